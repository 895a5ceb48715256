"""ROUGE accuracy the way MLPerf's LLM accuracy scripts report it.

MLPerf (llama2-70b, llama3.1-8b) reports the mean F-measure of ROUGE-1/2/L/Lsum with
stemming, in percent; ``gen_len`` is the total number of characters generated, ``gen_num``
the number of samples and ``tokens_per_sample`` the mean number of output tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def rouge_metrics(
    predictions: Sequence[str], references: Sequence[str], token_counts: Sequence[int]
) -> dict[str, float]:
    """Scores of ``predictions`` against ``references`` (same order and length)."""
    if len(predictions) != len(references) or len(predictions) != len(token_counts):
        raise ValueError("predictions, references and token_counts must have the same length")
    n = len(predictions)
    totals = dict.fromkeys(ROUGE_KEYS, 0.0)
    if n:
        from rouge_score import rouge_scorer

        scorer = rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=True)
        for pred, ref in zip(predictions, references, strict=True):  # lengths checked above
            scores = scorer.score(ref, pred)
            for key in ROUGE_KEYS:
                totals[key] += scores[key].fmeasure
    metrics = {key: round(100.0 * totals[key] / n, 4) if n else 0.0 for key in ROUGE_KEYS}
    metrics["gen_len"] = float(sum(len(p) for p in predictions))
    metrics["gen_num"] = float(n)
    metrics["tokens_per_sample"] = round(sum(token_counts) / n, 2) if n else 0.0
    return metrics

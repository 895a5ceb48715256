"""ROUGE accuracy the way MLPerf's LLM accuracy scripts report it.

MLPerf (llama2-70b, llama3.1-8b ``evaluation.py``) post-processes every prediction and
reference (strip, split into sentences, join the sentences with newlines), scores them
with ``rouge_score`` (through HF ``evaluate``: default tokenizer, Porter stemming), and
reports the mean F-measure of ROUGE-1/2/L/Lsum in percent, rounded to 4 places. rougeLsum
reads the newlines as sentence boundaries, so without the split it equals rougeL.
``gen_len`` is the total number of characters of the post-processed predictions,
``gen_num`` the number of samples, and ``tokens_per_sample`` the mean number of output
tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

from cmx_mlperf.llm.sentences import split_sentences

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL", "rougeLsum")


def postprocess_text(text: str) -> str:
    """The reference's post-processing of one text: stripped, one sentence per line."""
    return "\n".join(split_sentences(text.strip()))


def rouge_metrics(
    predictions: Sequence[str], references: Sequence[str], token_counts: Sequence[int]
) -> dict[str, float]:
    """Scores of ``predictions`` against ``references`` (same order and length)."""
    if len(predictions) != len(references) or len(predictions) != len(token_counts):
        raise ValueError("predictions, references and token_counts must have the same length")
    n = len(predictions)
    preds = [postprocess_text(p) for p in predictions]
    refs = [postprocess_text(r) for r in references]
    metrics = dict.fromkeys(ROUGE_KEYS, 0.0)
    if n:
        import numpy as np  # deferred: numpy only when this runs (117 modules)
        from rouge_score import rouge_scorer  # deferred: rouge_score only when this runs (1 module)

        scorer = rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=True)
        per_key: dict[str, list[float]] = {key: [] for key in ROUGE_KEYS}
        for pred, ref in zip(preds, refs, strict=True):  # lengths checked above
            scores = scorer.score(ref, pred)
            for key in ROUGE_KEYS:
                per_key[key].append(scores[key].fmeasure)
        for key in ROUGE_KEYS:
            metrics[key] = round(float(np.mean(per_key[key])) * 100, 4)
    metrics["gen_len"] = float(sum(len(p) for p in preds))
    metrics["gen_num"] = float(n)
    metrics["tokens_per_sample"] = round(sum(token_counts) / n, 2) if n else 0.0
    return metrics

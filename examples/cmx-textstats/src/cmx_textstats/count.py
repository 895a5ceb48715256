"""The ``textstats.count`` step: counts as outputs and as metrics of the run's result."""

from __future__ import annotations

from pathlib import Path

from cmx_core.api import Metric, ResultPart, StepContext, StepFailed, StepOutput


def count_text(data: bytes, encoding: str = "utf-8") -> dict[str, int]:
    """Lines (newline-terminated or not), whitespace-separated words and bytes of ``data``."""
    text = data.decode(encoding, errors="replace")
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return {"lines": lines, "words": len(text.split()), "bytes": len(data)}


def run(ctx: StepContext) -> StepOutput:
    raw = ctx.params.get("path")
    if not raw:
        raise StepFailed(f"{ctx.node_id}: textstats.count needs 'path' in its with: block")
    path = Path(str(raw)).expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise StepFailed(f"textstats.count: cannot read {path}: {exc.strerror}") from None
    encoding = str(ctx.params.get("encoding") or "utf-8")
    try:
        counts = count_text(data, encoding)
    except LookupError:
        raise StepFailed(f"textstats.count: unknown encoding '{encoding}'") from None
    ctx.log.info("textstats: %s: %s", path, counts)
    metrics = {name: Metric(value, name, higher_is_better=True) for name, value in counts.items()}
    part = ResultPart(
        status="completed",
        benchmark={"suite": "custom", "task": "textstats.count", "primary_metric": "words"},
        metrics=metrics,
    )
    return StepOutput(outputs={**counts, "path": str(path)}, result=part)


def top(ctx: StepContext) -> StepOutput:
    """The ``n`` most frequent lower-cased words, most frequent first (ties by word)."""
    from collections import Counter

    path = Path(str(ctx.params["path"])).expanduser()
    try:
        text = path.read_bytes().decode(str(ctx.params.get("encoding") or "utf-8"), errors="replace")
    except OSError as exc:
        raise StepFailed(f"textstats.top: cannot read {path}: {exc.strerror}") from None
    except LookupError:
        raise StepFailed(f"textstats.top: unknown encoding '{ctx.params.get('encoding')}'") from None
    counts = Counter(word.lower() for word in text.split())
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[: int(ctx.params.get("n") or 5)]
    return StepOutput(outputs={"top": [{"word": w, "count": c} for w, c in ranked]})

"""Where each sample's output token count came from, and the warning a guess deserves.

LoadGen's TPOT is (latency - TTFT) / (n_tokens - 1) and tokens/s is the sum of n_tokens over
the test time, so the count handed to ``complete`` must be the number of generated tokens.
The ``openai-http`` SUT takes it, in order of trust, from the server's
``usage.completion_tokens`` (``usage``), the ids the server returned (``token_ids``), the
model's tokenizer re-encoding the text (``tokenizer``, which may differ by a token or two
from what was generated: no EOS, merges across chunk boundaries) or, when none of these
exists, the number of streamed chunks (``chunks``), which is wrong whenever a chunk carries
more than one token. Both estimates are labelled: a run that used ``chunks`` or ``tokenizer``
carries a warning saying how many samples were counted that way.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

SOURCES = ("usage", "token_ids", "tokenizer", "chunks")


class TokenCountTally:
    """Counts, over the successful samples, which source gave the token count; thread-safe."""

    def __init__(self, sut: str) -> None:
        self.sut = sut
        self._counts: Counter[str] = Counter()
        self._chunks = 0  # stream chunks of the samples counted by chunks
        self._lock = threading.Lock()

    def add(self, source: str, chunks: int = 0) -> None:
        if source not in SOURCES:
            raise ValueError(f"token count source {source!r} not one of {', '.join(SOURCES)}")
        with self._lock:
            self._counts[source] += 1
            if source == "chunks":
                self._chunks += chunks

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {s: self._counts[s] for s in SOURCES if self._counts[s]}

    def source(self) -> str | None:
        """``usage``, ``token_ids``, ``tokenizer``, ``chunks``, ``mixed (usage: 37, chunks: 3)``
        or None when no sample succeeded."""
        counts = self.counts()
        if not counts:
            return None
        if len(counts) == 1:
            return next(iter(counts))
        return "mixed (" + ", ".join(f"{s}: {n}" for s, n in counts.items()) + ")"

    def warnings(self) -> list[str]:
        counts = self.counts()
        total = sum(counts.values())
        with self._lock:
            chunk_total = self._chunks
        out: list[str] = []
        if counts.get("chunks"):
            out.append(f"{self.sut}: {counts['chunks']} of {total} samples had no usage; token counts were "
                       f"estimated from {chunk_total} stream chunks, so TPOT and tokens/s may be wrong (a chunk "
                       "may carry several tokens): set model_dir to count with the tokenizer")
        if counts.get("tokenizer"):
            out.append(f"{self.sut}: {counts['tokenizer']} of {total} samples had no usage; token counts were "
                       "estimated by re-encoding the text with the local tokenizer (exact only when the text "
                       "re-encodes to the generated ids)")
        return out

    def extra(self) -> dict[str, Any]:
        return {"mlperf": {"token_count_source": self.source(), "token_count_samples": self.counts()},
                "warnings": self.warnings()}

"""The largest batch search recognises out-of-memory: under a CPU address-space budget the
allocator fails for real, the probe says OOM (not a crash), and the search ends between the
largest fit and the first OOM; a generous cap ends as 'capped'."""

from __future__ import annotations

from typing import Any


def test_the_search_finds_the_oom_boundary(train: Any) -> None:
    out = train(mode="max-batch", batch_size=128, memory_limit_mb=16, max_batch=100000)
    part = out.result
    section = part.sections["train"]
    assert part.status == "valid"
    assert section["oom_seen"] is True and "can't allocate memory" in section["oom_message"]
    largest = part.metrics["max_batch_size"].value
    first_oom = section["first_oom_batch_size"]
    assert largest is not None and first_oom is not None and largest < first_oom
    assert first_oom - largest <= max(1, largest // 8)
    fits = [p["per_rank_batch_size"] for p in section["probes"] if not p["oom"]]
    ooms = [p["per_rank_batch_size"] for p in section["probes"] if p["oom"]]
    assert max(fits) == largest and min(ooms) == first_oom
    assert out.outputs["oom_seen"] is True


def test_a_cap_that_fits_is_said(train: Any) -> None:
    part = train(mode="max-batch", batch_size=8, memory_limit_mb=512, max_batch=8).result
    section = part.sections["train"]
    assert section["capped"] is True and section["oom_seen"] is False
    assert part.metrics["max_batch_size"].value == 8

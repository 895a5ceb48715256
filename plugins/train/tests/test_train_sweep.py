"""A 1-, 2- and 4-process CPU (gloo) sweep through ``cmx sweep``: every point valid with its
ranks, and ``cmx results compare --sweep`` showing samples/s and the scaling efficiency of
each point against the sweep's own 1-process point."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def test_nproc_sweep_reports_scaling_efficiency(cli: Any, as_json: Any, home: Path) -> None:
    proc = cli("sweep", "--tags=train,throughput", "--matrix", "nproc=1,2,4", "--batch-size=64", "--steps=5",
               "--warmup-steps=1", "-j", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    manifest = as_json(proc)
    table = as_json(cli("results", "compare", "--sweep", manifest["sweep_id"], "--json"))
    assert table["metrics"]["samples_per_second"] == "samples/s"
    assert table["metrics"]["scaling_efficiency"] == "ratio"
    rows = {row["point"]["nproc"]: row for row in table["rows"]}
    assert set(rows) == {"1", "2", "4"} and all(r["status"] == "valid" for r in rows.values())
    one = rows["1"]["metrics"]["samples_per_second"]
    assert rows["1"]["metrics"]["scaling_efficiency"] == 1.0
    for n in ("2", "4"):
        sps = rows[n]["metrics"]["samples_per_second"]
        assert sps > 0
        assert math.isclose(rows[n]["metrics"]["scaling_efficiency"], sps / (int(n) * one), rel_tol=1e-9)
        assert rows[n]["metrics"][f"samples_per_second_rank{int(n) - 1}"] > 0
    four = json.loads(Path(manifest["points"][2]["result_path"]).read_text())
    assert four["train"]["baseline_from"].startswith(f"sweep {manifest['sweep_id']} point-0")
    assert [r["rank"] for r in four["train"]["ranks"]] == [0, 1, 2, 3]


def test_outside_a_sweep_the_efficiency_is_unmeasured_or_given(train: Any) -> None:
    alone = train(nproc=2, batch_size=32, steps=3).result
    assert alone.metrics["scaling_efficiency"].value is None
    given = train(nproc=2, batch_size=32, steps=3, baseline_samples_per_s=1000.0).result
    sps = given.metrics["samples_per_second"].value
    assert math.isclose(given.metrics["scaling_efficiency"].value, sps / 2000.0)
    assert given.sections["train"]["baseline_from"] == "input baseline_samples_per_s"

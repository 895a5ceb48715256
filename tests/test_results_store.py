"""ResultStore over SQLite: index, list, get by prefix, corrupt databases, reindex."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cmx_core.errors import ResultsError
from cmx_core.results import ResultStore, write_result
from cmx_core.results.examples import example_document, mlperf_part
from cmx_core.results.store import DB_VERSION


def _run(runs: Path, run_id: str, **changes: object) -> tuple[dict, Path]:
    run_dir = runs / run_id
    document = example_document(run_dir, run_id=run_id, **changes)
    return document, write_result(run_dir, document, suites=None)


@pytest.fixture()
def store(tmp_path: Path) -> ResultStore:
    return ResultStore(tmp_path / "data" / "results.sqlite")


def test_empty_store_lists_nothing_and_creates_no_file(store: ResultStore) -> None:
    assert store.list() == []
    assert not store.path.exists()
    with pytest.raises(ResultsError, match=r"no run matches 'abc'; `cmx results list` shows the runs"):
        store.get("abc")


def test_index_list_get(store: ResultStore, tmp_path: Path) -> None:
    doc, path = _run(tmp_path / "runs", "run-aaa1", part=mlperf_part())
    store.index(doc, path)
    [row] = store.list()
    assert (row.run_id, row.status, row.recipe, row.suite, row.task) == (
        "run-aaa1", "valid", "detect-os", "mlperf-inference", "resnet50")
    assert (row.primary_metric, row.result, row.units) == ("samples_per_second", 1234.5, "samples/s")
    assert row.result_path == path.resolve()
    stored = store.get("run-aaa1")
    assert stored.document == doc and stored.run_dir == path.parent
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == DB_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        metrics = conn.execute("SELECT name, value, unit, higher_is_better FROM metrics ORDER BY name").fetchall()
    assert metrics == [("latency_p99_ns", 41_000_000, "ns", 0), ("samples_per_second", 1234.5, "samples/s", 1)]


def test_reindexing_the_same_run_is_idempotent(store: ResultStore, tmp_path: Path) -> None:
    doc, path = _run(tmp_path / "runs", "run-1", part=mlperf_part())
    store.index(doc, path)
    store.index(doc, path)
    assert [r.run_id for r in store.list()] == ["run-1"]
    with sqlite3.connect(store.path) as conn:
        assert conn.execute("SELECT count(*) FROM metrics").fetchone()[0] == 2


def test_index_refuses_an_invalid_document_and_changes_nothing(store: ResultStore, tmp_path: Path) -> None:
    doc, path = _run(tmp_path / "runs", "run-1")
    store.index(doc, path)
    bad = dict(doc, run_id="run-2", status="passed")
    with pytest.raises(ResultsError, match=r"invalid result document: \$\.status"):
        store.index(bad, path)
    assert [r.run_id for r in store.list()] == ["run-1"]


def test_prefixes_exact_ids_and_ambiguity(store: ResultStore, tmp_path: Path) -> None:
    for run_id in ("abc1", "abc2", "abc", "b_x", "bxx"):
        store.index(*_run(tmp_path / "runs", run_id))
    assert store.get("abc").run_id == "abc"  # an exact id wins over being a prefix
    assert store.get("abc2").run_id == "abc2"
    with pytest.raises(ResultsError, match=r"run prefix 'ab' is ambiguous: it matches abc, abc1, abc2; give more"):
        store.get("ab")
    assert store.get("b_").run_id == "b_x"  # '_' is literal, not a LIKE wildcard
    with pytest.raises(ResultsError, match=r"no run matches 'b%'"):
        store.get("b%")


def test_list_filters_orders_and_limits(store: ResultStore, tmp_path: Path) -> None:
    from datetime import datetime, timedelta, timezone

    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i, status in enumerate(("completed", "valid", "completed")):
        doc, path = _run(tmp_path / "runs", f"r{i}", part=mlperf_part() if status == "valid" else None,
                         recipe_name="bench" if i else "detect-os")
        doc["created_at"] = (t0 + timedelta(minutes=i)).isoformat().replace("+00:00", "Z")
        store.index(doc, path)
    assert [r.run_id for r in store.list()] == ["r2", "r1", "r0"]
    assert [r.run_id for r in store.list(limit=1)] == ["r2"]
    assert [r.run_id for r in store.list(recipe="bench")] == ["r2", "r1"]
    assert [r.run_id for r in store.list(status="valid")] == ["r1"]
    assert store.list(recipe="nope") == []


def test_garbage_database_is_reported_with_the_fix_and_left_alone(store: ResultStore, tmp_path: Path) -> None:
    store.path.parent.mkdir(parents=True)
    garbage = b"this is not sqlite at all\x00\xff" * 200
    store.path.write_bytes(garbage)
    doc, path = _run(tmp_path / "runs", "run-1")
    for action in (lambda: store.list(), lambda: store.get("run"), lambda: store.index(doc, path)):
        with pytest.raises(ResultsError) as caught:
            action()
        message = str(caught.value)
        assert message.startswith(f"{store.path}: not a readable cmx results database")
        assert "mv " in message and "cmx results reindex" in message and "\n" not in message
    assert store.path.read_bytes() == garbage


def test_truncated_database_is_reported(store: ResultStore, tmp_path: Path) -> None:
    store.index(*_run(tmp_path / "runs", "run-1"))
    with sqlite3.connect(store.path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = store.path.read_bytes()
    store.path.write_bytes(data[:100] + b"\xde\xad" * 50 + data[200:])
    with pytest.raises(ResultsError, match=r"not a readable cmx results database"):
        store.list()


def test_foreign_sqlite_file_is_not_touched(store: ResultStore, tmp_path: Path) -> None:
    store.path.parent.mkdir(parents=True)
    with sqlite3.connect(store.path) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER)")
    with pytest.raises(ResultsError, match=r"unexpected tables \['photos'\]"):
        store.index(*_run(tmp_path / "runs", "run-1"))
    with sqlite3.connect(store.path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert names == ["photos"]


def test_database_from_a_newer_cmx_is_refused(store: ResultStore, tmp_path: Path) -> None:
    store.index(*_run(tmp_path / "runs", "run-1"))
    with sqlite3.connect(store.path) as conn:
        conn.execute(f"PRAGMA user_version = {DB_VERSION + 1}")
    with pytest.raises(ResultsError, match=r"written by a newer cmx .*; upgrade cmx"):
        store.list()


def test_missing_or_edited_result_file(store: ResultStore, tmp_path: Path) -> None:
    doc, path = _run(tmp_path / "runs", "run-1")
    store.index(doc, path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ResultsError, match=r"result.json: not valid JSON"):
        store.get("run-1")
    path.unlink()
    with pytest.raises(ResultsError, match=r"result file is missing .* `cmx results reindex` drops it"):
        store.get("run-1")


def test_reindex_rebuilds_from_run_directories(store: ResultStore, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for run_id in ("r1", "r2", "r3"):
        _run(runs, run_id)
    (runs / "broken").mkdir()
    (runs / "broken" / "result.json").write_text('{"schema_version": "1.0"}', encoding="utf-8")
    store.path.parent.mkdir(parents=True)
    store.path.write_bytes(b"garbage" * 100)
    with pytest.raises(ResultsError):
        store.list()
    store.path.rename(store.path.with_name("results.sqlite.bad"))  # what the error tells the user
    report = store.reindex([runs])
    assert sorted(report.indexed) == ["r1", "r2", "r3"]
    assert [Path(p).parent.name for p, _ in report.skipped] == ["broken"]
    assert "must contain" in report.skipped[0][1]
    assert sorted(r.run_id for r in store.list()) == ["r1", "r2", "r3"]
    # a vanished run directory is dropped on the next reindex; others stay
    (runs / "r2" / "result.json").unlink()
    report = store.reindex([runs])
    assert report.dropped == ["r2"]
    assert sorted(r.run_id for r in store.list()) == ["r1", "r3"]


def test_reindex_keeps_runs_outside_the_scanned_dirs(store: ResultStore, tmp_path: Path) -> None:
    store.index(*_run(tmp_path / "elsewhere", "out-1"))  # a --output DIR run
    _run(tmp_path / "runs", "r1")
    report = store.reindex([tmp_path / "runs"])
    assert report.indexed == ["r1"] and report.dropped == []
    assert sorted(r.run_id for r in store.list()) == ["out-1", "r1"]


_WORKER = """
import sys
from pathlib import Path
from cmx_core.results import ResultStore, write_result
from cmx_core.results.examples import example_document
db, runs, prefix = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
store = ResultStore(db)
for i in range(15):
    run_dir = runs / f"{prefix}{i}"
    doc = example_document(run_dir, run_id=f"{prefix}{i}")
    store.index(doc, write_result(run_dir, doc, suites=None))
"""


def test_concurrent_processes_index_without_losing_runs(store: ResultStore, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(store.path), str(runs), prefix],
                         stderr=subprocess.PIPE, text=True)
        for prefix in ("a", "b", "c")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert len(store.list(limit=100)) == 45

"""The SQLite index of runs behind ``cmx results``.

The run directories (their ``result.json``) are the source of truth; the database is an
index that ``reindex`` can always rebuild. It is never deleted or rewritten behind the
user's back: a file that is not a readable cmx results database is reported with the fix.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager

from cmx_core.datautil import JSONLimitError, loads_bounded, read_bounded
from cmx_core.errors import ResultsError
from cmx_core.results import RESULT_FILE
from cmx_core.results.validate import validate_document

TYPE_CHECKING = False
if TYPE_CHECKING:  # import-light: every run (the warm-run replay included) indexes its result
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from pathlib import Path
    from typing import Any

    from cmx_core.results.records import ReindexReport, RunSummary, StoredResult

DB_VERSION = 1
"""``PRAGMA user_version`` of the database layout below; bump it with a migration."""

_DDL = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL,
    recipe TEXT NOT NULL,
    suite TEXT NOT NULL,
    task TEXT NOT NULL,
    scenario TEXT,
    primary_metric TEXT,
    result REAL,
    units TEXT,
    wall_s REAL,
    result_path TEXT NOT NULL,
    schema_version TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_created ON runs (created_at);
CREATE INDEX IF NOT EXISTS runs_recipe ON runs (recipe, created_at);
CREATE TABLE IF NOT EXISTS metrics (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value REAL,
    unit TEXT NOT NULL,
    higher_is_better INTEGER NOT NULL,
    PRIMARY KEY (run_id, name)
);
"""
_TABLES = {"runs", "metrics"}
_COLUMNS = (
    "run_id, created_at, status, recipe, suite, task, scenario, primary_metric, result, units, "
    "wall_s, result_path"
)


class ResultStore:
    """Index of result documents in one SQLite file (WAL mode, safe across processes)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._file = os.fspath(path)

    @property
    def path(self) -> Path:
        from pathlib import Path  # deferred: start-up: 7 modules not needed to start cmx

        return Path(self._file)

    # -- connection -----------------------------------------------------------------------

    def _corrupt(self, detail: str) -> ResultsError:
        return ResultsError(
            f"{self.path}: not a readable cmx results database ({detail}); move it away "
            f"(mv '{self.path}' '{self.path}.bad') and run `cmx results reindex` to rebuild "
            "the index from the run directories"
        )

    @contextmanager
    def _connect(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """Open (creating for writes), check the layout, and map every sqlite error."""
        if not write and not os.path.exists(self._file):
            empty = sqlite3.connect(":memory:")  # an empty store: nothing indexed yet
            try:
                yield empty
            finally:
                empty.close()
            return
        try:
            if write:
                os.makedirs(os.path.dirname(self._file), exist_ok=True)
            conn = sqlite3.connect(self._file, timeout=30, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise ResultsError(f"{self.path}: cannot open the results database ({exc})") from None
        try:
            self._prepare(conn, write=write)
            yield conn
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                raise ResultsError(f"{self.path}: database is locked by another cmx; retry") from None
            raise self._corrupt(str(exc)) from None
        finally:
            conn.close()

    def _prepare(self, conn: sqlite3.Connection, *, write: bool) -> None:
        # No fsync: a crash of cmx is safe (transactions, WAL), and what power loss could
        # cost is an index that ``reindex`` rebuilds from the result.json files; syncing
        # would add ~7 ms to every run (WAL creation + the checkpoint on close).
        conn.execute("PRAGMA synchronous=OFF")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == DB_VERSION:
            return
        if version > DB_VERSION:
            raise ResultsError(
                f"{self.path}: results database version {version} was written by a newer cmx "
                f"(this one reads {DB_VERSION}); upgrade cmx"
            )
        tables = {
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if not r[0].startswith("sqlite_")
        }
        if tables - _TABLES:
            raise self._corrupt(f"unexpected tables {sorted(tables - _TABLES)}")
        if not write:
            return
        from filelock import FileLock  # deferred: filelock only when this runs (69 modules)

        # Two cmx processes creating the store at once: switching to WAL cannot wait on a
        # busy database, so creation is serialised (only ever on the very first writes).
        with FileLock(self._file + ".init.lock"):
            if conn.execute("PRAGMA user_version").fetchone()[0] == DB_VERSION:
                return  # the other process created it meanwhile
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                _create(conn)  # not executescript: it would COMMIT the open transaction
                conn.execute(f"PRAGMA user_version = {DB_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def check(self) -> None:
        """Open the store as a run's end would (creating it when missing): a corrupt or
        unwritable store is a ResultsError before the benchmark runs, not after."""
        with self._connect(write=True) as conn:
            conn.execute("SELECT count(*) FROM runs LIMIT 1").fetchone()

    # -- writes ---------------------------------------------------------------------------

    def index(self, document: Mapping[str, Any], result_path: str | Path, *, validated: bool = False) -> None:
        """Add (or replace: re-indexing a run is idempotent) one run, in one transaction.
        ``validated``: the caller has just validated ``document`` (the engine, which writes
        it), so it is not validated a second time."""
        if not validated:
            validate_document(document, source=str(result_path))
        row = _row(document, result_path)
        metrics = _metric_rows(document)
        with self._connect(write=True) as conn:
            _in_transaction(conn, lambda: _insert(conn, row, metrics))

    def reindex(self, dirs: Iterable[Path]) -> ReindexReport:
        """Rebuild the index from run directories: every ``result.json`` up to two levels
        below each of ``dirs`` is validated and indexed; rows whose file is gone are dropped."""
        from cmx_core.results.records import ReindexReport  # deferred: start-up: 26 modules not needed to start cmx

        report = ReindexReport()
        found: list[tuple[dict[str, Any], Path]] = []
        for path in _result_files(dirs):
            try:
                found.append((_read_document(path), path))
            except ResultsError as exc:
                report.skipped.append((str(path), str(exc)))
        with self._connect(write=True) as conn:
            def work() -> None:
                for (run_id, path) in conn.execute("SELECT run_id, result_path FROM runs").fetchall():
                    if not os.path.isfile(path):
                        conn.execute("DELETE FROM metrics WHERE run_id = ?", (run_id,))
                        conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
                        report.dropped.append(run_id)
                for document, path in found:
                    _insert(conn, _row(document, path), _metric_rows(document))
                    report.indexed.append(document["run_id"])
            _in_transaction(conn, work)
        return report

    # -- reads ----------------------------------------------------------------------------

    def resolve(self, run: str) -> tuple[str, Path]:
        """A run id or a unique prefix of one -> ``(run_id, result_path)``."""
        if not run:
            raise ResultsError("empty run id; `cmx results list` shows the runs")
        pattern = run.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._connect(write=False) as conn:
            exact = self._query(conn, "SELECT run_id, result_path FROM runs WHERE run_id = ?", (run,))
            rows = exact or self._query(
                conn,
                "SELECT run_id, result_path FROM runs WHERE run_id LIKE ? ESCAPE '\\' "
                "ORDER BY run_id LIMIT 6",
                (pattern,),
            )
        if not rows:
            raise ResultsError(f"no run matches {run!r}; `cmx results list` shows the runs")
        if len(rows) > 1:
            shown = ", ".join(r[0] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
            raise ResultsError(f"run prefix {run!r} is ambiguous: it matches {shown}; give more characters")
        from pathlib import Path  # deferred: start-up: 7 modules not needed to start cmx

        return rows[0][0], Path(rows[0][1])

    def get(self, run: str) -> StoredResult:
        """Read back and validate the ``result.json`` of a run id or unique prefix."""
        from cmx_core.results.records import StoredResult  # deferred: start-up: 26 modules not needed to start cmx

        run_id, path = self.resolve(run)
        document = _read_document(path)
        if document["run_id"] != run_id:
            raise ResultsError(
                f"{path}: holds run {document['run_id']!r}, not {run_id!r}; "
                "run `cmx results reindex` to refresh the index"
            )
        return StoredResult(run_id, path, document)

    def compare(self, runs: Sequence[str]) -> Any:
        """Compare the metrics of several runs (the first is the baseline): a
        :class:`cmx_core.results.compare.Comparison`."""
        from cmx_core.results.compare import compare_documents  # deferred: start-up: 32 modules not needed to start cmx

        return compare_documents([self.get(run).document for run in runs])

    @staticmethod
    def _query(conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # an empty in-memory store, nothing indexed
                return []
            raise

    def list(self, limit: int = 20, recipe: str | None = None, status: str | None = None) -> list[RunSummary]:
        """The newest ``limit`` runs, optionally only one recipe's or one status'."""
        from pathlib import Path  # deferred: start-up: 7 modules not needed to start cmx

        from cmx_core.results.records import RunSummary  # deferred: start-up: 26 modules not needed to start cmx

        where, params = [], []
        if recipe:
            where.append("recipe = ?")
            params.append(recipe)
        if status:
            where.append("status = ?")
            params.append(status)
        sql = f"SELECT {_COLUMNS} FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY created_at DESC, run_id LIMIT ?"
        with self._connect(write=False) as conn:
            rows = self._query(conn, sql, (*params, max(0, int(limit))))
        return [
            RunSummary(run_id=r[0], created_at=r[1], status=r[2], recipe=r[3], suite=r[4], task=r[5],
                       scenario=r[6], primary_metric=r[7], result=r[8], units=r[9], wall_s=r[10],
                       result_path=Path(r[11]))
            for r in rows
        ]


def _create(conn: sqlite3.Connection) -> None:
    for statement in _DDL.split(";"):
        if statement.strip():
            conn.execute(statement)


def _in_transaction(conn: sqlite3.Connection, work: Any) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        work()
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _insert(conn: sqlite3.Connection, row: tuple[Any, ...], metrics: list[tuple[Any, ...]]) -> None:
    conn.execute("DELETE FROM metrics WHERE run_id = ?", (row[0],))
    conn.execute(f"INSERT OR REPLACE INTO runs ({_COLUMNS}, schema_version) VALUES ({', '.join('?' * 13)})", row)
    conn.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?, ?)", metrics)


def _row(document: Mapping[str, Any], result_path: str | os.PathLike[str]) -> tuple[Any, ...]:
    benchmark = document["benchmark"]
    primary = benchmark.get("primary_metric")
    metric = document["metrics"].get(primary) if primary else None
    return (
        document["run_id"],
        document["created_at"],
        document["status"],
        document["software"]["recipe"]["name"],
        benchmark["suite"],
        benchmark["task"],
        benchmark.get("scenario"),
        primary,
        metric["value"] if metric else None,
        metric["unit"] if metric else None,
        document["timing"]["wall_s"],
        os.path.realpath(result_path),
        document["schema_version"],
    )


def _metric_rows(document: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    run_id = document["run_id"]
    return [
        (run_id, name, m["value"], m["unit"], int(m["higher_is_better"]))
        for name, m in document["metrics"].items()
    ]


def _read_document(path: Path) -> dict[str, Any]:
    """Read and validate one ``result.json``; every problem is a one-line ResultsError."""
    try:
        text = read_bounded(path).decode("utf-8")
    except FileNotFoundError:
        raise ResultsError(
            f"{path}: result file is missing (the run directory was moved or deleted); "
            "`cmx results reindex` drops it from the index"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: cannot read result file ({exc})") from None
    except JSONLimitError as exc:
        raise ResultsError(f"{path}: not valid JSON ({exc})") from None
    try:
        document: dict[str, Any] = loads_bounded(text)
    except ValueError as exc:  # (a JSONLimitError too: too large or too deep)
        raise ResultsError(f"{path}: not valid JSON ({exc})") from None
    validate_document(document, source=str(path))
    return document


def _result_files(dirs: Iterable[Path]) -> list[Path]:
    from pathlib import Path  # deferred: start-up: 7 modules not needed to start cmx

    found: list[Path] = []
    for base in dirs:
        base = Path(base)
        for pattern in (RESULT_FILE, f"*/{RESULT_FILE}", f"*/*/{RESULT_FILE}"):
            found.extend(p for p in sorted(base.glob(pattern)) if p.is_file())
    return found

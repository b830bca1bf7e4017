"""Run reads and writes: ``ResultsStore``, one connection to one results store file.

Why SQLite: runs are written by several processes (parallel local workers, a Ray driver) and
read by the report commands; a single file with transactions survives crashes and concurrent
writers without a server. WAL journaling lets readers proceed while one process writes, and a
busy timeout makes a second writer wait instead of failing.

Layout: the database lives at ``DEFAULT_STORE`` (``./atnbench-results/atnbench.db``) unless a
path is given; checkpoints live beside it under ``<store file>-checkpoints/<run_id>/`` (one
folder per store file, see ``atnbench.run.checkpoint``).

Non-finite numbers: JSON has no NaN or infinity and a diverged run produces them, so every
non-finite float (in the loss columns and anywhere inside config/env/summary/metrics JSON) is
stored as NULL/``null`` and read back as ``None``. Finite floats round-trip exactly (SQLite REAL
is an IEEE double and ``json`` writes the shortest repr that parses back to the same double).
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Optional, Union

from atnbench.errors import UserError
from atnbench.store.errors import MalformedRow, StoreBusy, StoreError, UnknownRun
from atnbench.store.files import DEFAULT_STORE, check_store_path, not_sqlite
from atnbench.store.schema import _ROW_COLUMNS, _SCHEMA, FINAL_STATUSES, MIGRATIONS, MODEL_KINDS, STATUSES
from atnbench.store.schema import RECORD_VERSION, SCHEMA_VERSION, STORE_TABLES
from atnbench.userfiles import why_not_writable

BUSY_TIMEOUT_S = 30.0
WRITE_PATIENCE_S = 600.0  # how long a write waits for another writer in all (``_begin_writing``)
log = logging.getLogger("atnbench")  # warnings print as "note:" lines (cli.app)


@dataclass(frozen=True)
class EvalPoint:
    """One point of a learning curve; losses are None when missing or non-finite."""

    step: int
    wall_s: Optional[float]
    train_loss: Optional[float]
    val_loss: Optional[float]
    metrics: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RunRecord:
    """One row of ``runs`` with its JSON columns parsed."""

    run_id: str
    task: Optional[str]
    T: Optional[int]
    norm: Optional[str]
    k: Optional[int]
    seed: Optional[int]
    budget: Optional[float]
    status: str
    config: dict
    env: dict
    summary: dict
    error: Optional[str]
    created_at: str
    updated_at: str


def _refuse_busy(path: Path, err: BaseException) -> None:
    """A lock another process held past the busy timeout is not an unusable store: said so (exit 1)."""
    if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
        raise StoreBusy(f"{path} is locked by another process, which has held it for more than "
                        f"{BUSY_TIMEOUT_S:g} s (an import or a merge?); try again when it is done") from None


class ResultsStore:
    """A connection to one results store file (create it with ``create=True``, the default).

    One SQLite connection per object; not shared across threads or processes. Each process
    opens its own ``ResultsStore`` on the same path. Use as a context manager or call close().
    """

    def __init__(self, path: Union[str, Path] = DEFAULT_STORE, create: bool = True, read_only: bool = False):
        self.path = Path(path).expanduser().absolute()  # checkpoint paths survive a later chdir
        self.read_only = read_only
        check_store_path(self.path, create=create and not read_only, write=not read_only)
        if create and not read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(f"cannot create the folder of results store {self.path}: "
                                 f"{err.strerror or err}") from None
        try:
            if read_only:  # SQLite itself refuses every write; nothing is created or converted
                self._conn = self._connect_read_only()
            else:
                # isolation_level=None: we issue BEGIN IMMEDIATE ourselves so a writer takes the write
                # lock up front (waiting on busy_timeout) instead of failing when upgrading a read lock.
                self._conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        except sqlite3.Error as err:
            _refuse_busy(self.path, err)
            raise StoreError(f"{self.path} cannot be opened as a results store: {err}") from None
        self._conn.row_factory = sqlite3.Row
        try:
            self._check_readable()
            if not read_only:
                self._setup()
        except BaseException as err:
            self._conn.close()
            if _not_a_database(err):
                raise not_sqlite(self.path) from None
            if isinstance(err, sqlite3.Error):
                _refuse_busy(self.path, err)
                raise StoreError(f"{self.path} is not a usable atnbench results store: {err}") from None
            raise

    def _connect_read_only(self) -> sqlite3.Connection:
        """A read-only connection. A WAL store's reader shares an index in the ``-shm`` file beside
        it; in a folder it cannot write, SQLite cannot make that file and refuses to read. There the
        file cannot change either (a writer could not make its ``-wal``), so it is read as
        immutable: unless a ``-wal`` already holds changes not yet in the file, which only a reader
        allowed to write the folder sees."""
        uri = f"{self.path.as_uri()}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as err:
            conn.close()
            if "readonly" not in str(err) and "unable to open" not in str(err):
                raise
            if why_not_writable(self.path.parent) == "":
                raise  # not the folder: SQLite's own reason stands
        wal = self.path.with_name(self.path.name + "-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise StoreError(f"{self.path} cannot be read here: its folder is read-only and its write-ahead log "
                             f"({wal.name}) holds changes not yet in the file; read it where the folder is writable "
                             f"(or copy the store and its {wal.name} to such a folder)")
        return sqlite3.connect(f"{uri}&immutable=1", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)

    @classmethod
    def open_read_only(cls, path: Union[str, Path] = DEFAULT_STORE) -> "ResultsStore":
        """For report, plot, stats and ``sweep --dry-run``: never creates, converts or repairs the file."""
        return cls(path, create=False, read_only=True)

    def _check_readable(self) -> None:
        """The file must be an intact SQLite database holding all of atnbench's tables, or (when
        opened for writing) an empty one that _setup turns into a store. A store with some tables
        missing is damaged: refused, never silently re-created."""
        self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        tables = {row[0] for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not tables and not self.read_only:
            return
        if not tables:
            raise StoreError(f"{self.path} is an empty database, not a results store (no tables; "
                             f"`atnbench run` or `sweep` create one)")
        missing = [name for name in STORE_TABLES if name not in tables]
        if missing:
            what = "not an atnbench results store" if len(missing) == len(STORE_TABLES) else "a damaged results store"
            raise StoreError(f"{self.path} is {what}: table(s) {', '.join(missing)} missing")
        problem = self._conn.execute("PRAGMA quick_check(1)").fetchone()[0]
        if problem != "ok":
            raise StoreError(f"{self.path} is a damaged results store (SQLite integrity check: {problem})")
        self.version = self._stored_version(tables)
        self._check_not_newer()

    def _stored_version(self, tables: set[str]) -> int:
        """The store's schema version: PRAGMA user_version, or for a store from before it was
        kept there the ``meta`` table's (1); 0 for a new, empty database."""
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version or "meta" not in tables:
            return int(version)
        found = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(found[0]) if found is not None else 1

    def _check_not_newer(self) -> None:
        if self.version > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema version {self.version}, newer than this atnbench understands "
                             f"({SCHEMA_VERSION}); upgrade atnbench")

    def _setup(self) -> None:
        """Per-connection pragmas, then the schema: created in a new database, an older store
        upgraded step by step through MIGRATIONS (one transaction: all steps or none)."""
        self._conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        self._enable_wal()
        with self._write() as conn:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            self.version = self._stored_version(tables)
            self._check_not_newer()
            if self.version == 0:
                # statement by statement: executescript() would commit our transaction midway
                for statement in _SCHEMA:
                    conn.execute(statement)
            for version in range(max(self.version, 1), SCHEMA_VERSION):
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
            if self.version != SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                             "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))
                self.version = SCHEMA_VERSION

    def _enable_wal(self) -> None:
        """Switch the file to WAL (a persistent setting, so a no-op after the first open).

        The switch needs an exclusive lock and SQLite does not wait for it through the busy
        timeout, so two processes creating the same store at once would fail; retry instead.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    # -- connection handling ---------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it lands, or (on any exception) none of it does. Inside
        ``batch()`` it is part of the batch's transaction."""
        if self._conn.in_transaction:
            yield self._conn
            return
        with self._conn:  # commits on success, rolls back on an exception
            self._begin_writing()
            yield self._conn

    def _begin_writing(self) -> None:
        """BEGIN IMMEDIATE, waiting for another writer as long as WRITE_PATIENCE_S: an import or a
        merge into a store in use holds its lock for its whole transaction, and a training run
        that gave up after the 30 s busy timeout would fail at its next evaluation. Said once."""
        deadline, said = time.monotonic() + WRITE_PATIENCE_S, False
        while True:
            try:
                self._conn.execute("BEGIN IMMEDIATE")  # waits up to the busy timeout itself
                return
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                if not said:
                    log.warning(f"waiting for {self.path}: another process has been writing it for "
                                f"{BUSY_TIMEOUT_S:.0f} s (an import or a merge?); waiting up to "
                                f"{WRITE_PATIENCE_S / 60:.0f} minutes")
                    said = True

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction, so multi-query reads see one consistent snapshot."""
        if self._conn.in_transaction:
            yield self._conn
            return
        with self._conn:
            self._conn.execute("BEGIN")
            yield self._conn

    @contextmanager
    def batch(self) -> Iterator["ResultsStore"]:
        """Many writes as one transaction (an import, a merge): all land, or none does."""
        with self._write():
            yield self

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._conn.close()

    def __enter__(self) -> "ResultsStore":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResultsStore({str(self.path)!r})"

    # -- writes ------------------------------------------------------------------------------

    def start_run(
        self, run_id: str, config: dict, env: dict, sweep: Optional[str] = None, fresh: bool = False
    ) -> None:
        """Mark a run as running, creating its row if new.

        A restarted run keeps its curve (the trainer resumes from its checkpoint and calls
        truncate_evals if needed); ``fresh=True`` deletes the curve and resets created_at,
        i.e. the run starts over. Summary and error of an earlier attempt are cleared.
        """
        now = _now()
        with self._write() as conn:
            conn.execute(
                """INSERT INTO runs (run_id, task, T, norm, k, seed, budget, status, config_json,
                                     env_json, summary_json, error, created_at, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, '{}', NULL, ?, ?)
                   ON CONFLICT (run_id) DO UPDATE SET
                       task = excluded.task, T = excluded.T, norm = excluded.norm, k = excluded.k,
                       seed = excluded.seed, budget = excluded.budget, status = 'running',
                       config_json = excluded.config_json, env_json = excluded.env_json,
                       summary_json = '{}', error = NULL, updated_at = excluded.updated_at,
                       created_at = CASE WHEN ? THEN excluded.created_at ELSE created_at END""",
                (run_id, *_config_columns(config), _dumps(config), _dumps(env), now, now, fresh),
            )
            if fresh:
                conn.execute("DELETE FROM evals WHERE run_id = ?", (run_id,))
                conn.execute("DELETE FROM models WHERE run_id = ?", (run_id,))
            if sweep is not None:
                self._add_membership(conn, sweep, run_id)

    def log_eval(
        self,
        run_id: str,
        step: int,
        wall_s: Optional[float],
        train_loss: Optional[float],
        val_loss: Optional[float],
        metrics: Optional[dict] = None,
    ) -> None:
        """Write one curve point (replacing an earlier point at the same step).

        Also bumps the run's updated_at, so a 'running' row that stopped being updated
        reveals a crashed process.
        """
        with self._write() as conn:
            self._require(conn, run_id)
            conn.execute(
                """INSERT INTO evals (run_id, step, wall_s, train_loss, val_loss, metrics_json)
                   VALUES (?, ?, ?, ?, ?, ?)
                   ON CONFLICT (run_id, step) DO UPDATE SET
                       wall_s = excluded.wall_s, train_loss = excluded.train_loss,
                       val_loss = excluded.val_loss, metrics_json = excluded.metrics_json""",
                (run_id, int(step), _real(wall_s), _real(train_loss), _real(val_loss), _dumps(metrics or {})),
            )
            conn.execute("UPDATE runs SET updated_at = ? WHERE run_id = ?", (_now(), run_id))

    def truncate_evals(self, run_id: str, after_step: int) -> int:
        """Delete curve points with step > after_step; returns how many went.

        Used when resuming from a checkpoint older than the last logged point, so the
        resumed curve equals that of an uninterrupted run.
        """
        with self._write() as conn:
            cursor = conn.execute("DELETE FROM evals WHERE run_id = ? AND step > ?", (run_id, int(after_step)))
            return cursor.rowcount

    def finish_run(self, run_id: str, status: str, summary: dict, error: Optional[str] = None) -> None:
        """Record the outcome: status is one of done, failed, diverged."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"finish_run status must be one of {', '.join(FINAL_STATUSES)}, got {status!r}")
        with self._write() as conn:
            cursor = conn.execute(
                "UPDATE runs SET status = ?, summary_json = ?, error = ?, updated_at = ? WHERE run_id = ?",
                (status, _dumps(summary or {}), error, _now(), run_id),
            )
            if cursor.rowcount == 0:
                raise UnknownRun(f"no run {run_id!r} in {self.path}")

    def save_model(self, run_id: str, kind: str, step: int, state: bytes) -> None:
        """Keep a trained model's weights (``torch.save`` bytes of its state dict): the
        ``final`` ones or the ``best`` (lowest validation loss) so far; replaces that kind."""
        if kind not in MODEL_KINDS:
            raise ValueError(f"model kind must be one of {', '.join(MODEL_KINDS)}, got {kind!r}")
        with self._write() as conn:
            self._require(conn, run_id)
            conn.execute("INSERT OR REPLACE INTO models (run_id, kind, step, state) VALUES (?, ?, ?, ?)",
                         (run_id, kind, int(step), sqlite3.Binary(state)))

    def model(self, run_id: str, kind: str = "best") -> Optional[tuple[int, bytes]]:
        """(step, weights bytes) of a kept model, or None when the run kept none of that kind."""
        if not self._has_table("models"):  # a schema-1 store opened read-only (never upgraded by reading)
            return None
        row = self._conn.execute("SELECT step, state FROM models WHERE run_id = ? AND kind = ?",
                                 (run_id, kind)).fetchone()
        return (row["step"], bytes(row["state"])) if row is not None else None

    def _has_table(self, name: str) -> bool:
        return self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                                  (name,)).fetchone() is not None

    def add_to_sweep(self, sweep: str, run_id: str) -> None:
        """Make run_id a member of sweep (a run may belong to several sweeps)."""
        with self._write() as conn:
            self._add_membership(conn, sweep, run_id)

    def _add_membership(self, conn: sqlite3.Connection, sweep: str, run_id: str) -> None:
        self._require(conn, run_id)
        conn.execute("INSERT OR IGNORE INTO sweep_runs (sweep, run_id) VALUES (?, ?)", (sweep, run_id))

    def _require(self, conn: sqlite3.Connection, run_id: str) -> None:
        """A readable error instead of SQLite's bare 'FOREIGN KEY constraint failed'."""
        if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
            raise UnknownRun(f"no run {run_id!r} in {self.path}; call start_run first")

    # -- reads -------------------------------------------------------------------------------

    def get_run(self, run_id: str) -> Optional[RunRecord]:
        """The run's record, or None if the store has no such run."""
        row = self._conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return _record(row, self.path) if row is not None else None

    def status(self, run_id: str) -> Optional[str]:
        """The run's status, or None if the store has no such run."""
        row = self._conn.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return row["status"] if row is not None else None

    def curve(self, run_id: str) -> list[EvalPoint]:
        """The run's curve, ordered by step (empty for an unknown run)."""
        rows = self._conn.execute(
            "SELECT step, wall_s, train_loss, val_loss, metrics_json FROM evals WHERE run_id = ? ORDER BY step",
            (run_id,),
        )
        return [_point(row, run_id, self.path) for row in rows]

    def runs(
        self,
        task: Optional[str] = None,
        T: Optional[int] = None,
        norm: Optional[str] = None,
        status: Optional[str] = None,
        sweep: Optional[str] = None,
        since: Union[str, datetime, None] = None,
    ) -> list[RunRecord]:
        """Runs matching every given filter, oldest first; since compares created_at (>=)."""
        clauses, params = [], []
        for column, value in (("task", task), ("T", T), ("norm", norm), ("status", status)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if sweep is not None:
            clauses.append("run_id IN (SELECT run_id FROM sweep_runs WHERE sweep = ?)")
            params.append(sweep)
        if since is not None:
            clauses.append("created_at >= ?")
            params.append(_iso(since))
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._conn.execute(f"SELECT * FROM runs{where} ORDER BY created_at, rowid", params)
        found = []
        for row in rows:  # one malformed row is one bad row: noted, skipped, the rest go on
            try:
                found.append(_record(row, self.path))
            except MalformedRow as error:
                log.warning(f"{error}; skipped")
        return found

    def set_meta(self, key: str, value: dict) -> None:
        """Keep a JSON object under ``key`` in the store (e.g. a sweep's seed plan)."""
        with self._write() as conn:
            conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                         (key, _dumps(value)))

    def meta(self, prefix: str) -> dict[str, dict]:
        """The JSON objects kept under keys starting with ``prefix`` (an unreadable one is left out)."""
        found = {}
        for row in self._conn.execute("SELECT key, value FROM meta WHERE key LIKE ? || '%' ORDER BY key", (prefix,)):
            try:
                found[row["key"]] = json.loads(row["value"])
            except ValueError:
                log.warning(f"{self.path}: meta {row['key']} is not JSON; skipped")
        return found

    def tasks(self) -> list[str]:
        """Names of the tasks the stored runs are of; sorted."""
        return [row["task"] for row in self._conn.execute("SELECT DISTINCT task FROM runs ORDER BY task")]

    def sweeps(self, run_id: Optional[str] = None) -> list[str]:
        """Names of all sweeps, or of the sweeps run_id belongs to; sorted."""
        if run_id is None:
            rows = self._conn.execute("SELECT DISTINCT sweep FROM sweep_runs ORDER BY sweep")
        else:
            rows = self._conn.execute("SELECT sweep FROM sweep_runs WHERE run_id = ? ORDER BY sweep", (run_id,))
        return [row["sweep"] for row in rows]

    def checkpoint_dir(self, run_id: str) -> Path:
        """Where the run's checkpoints go: <store file>-checkpoints/<run_id>/ (see atnbench.run.checkpoint)."""
        from atnbench.run.checkpoint import checkpoint_dir

        return checkpoint_dir(self.path, run_id)

    # -- transfer between stores (Ray workers -> driver) -------------------------------------

    def export_record(self, run_id: str) -> dict:
        """The whole run (row, curve, sweep names) as a JSON-able dict.

        A remote worker writes into its own scratch store and ships this dict back; the driver,
        the only process that writes the real store, passes it to import_record.
        """
        with self._read():
            run = self.get_run(run_id)
            if run is None:
                raise UnknownRun(f"no run {run_id!r} in {self.path}")
            curve, sweeps = self.curve(run_id), self.sweeps(run_id)
        return {
            "schema_version": RECORD_VERSION,
            **asdict(run),
            "curve": [asdict(point) for point in curve],
            "sweeps": sweeps,
        }

    def import_record(self, record: dict) -> str:
        """Write an exported run, replacing this store's row and curve for it; returns the run id.

        Sweep memberships are added (never removed). Atomic: a malformed record leaves the
        store untouched.
        """
        missing = [key for key in ("run_id", "status", "config") if key not in record]
        if missing:
            raise UserError(f"not an atnbench run record: missing {', '.join(missing)}")
        if int(record.get("schema_version", RECORD_VERSION)) > RECORD_VERSION:
            raise UserError(f"run record has schema version {record['schema_version']}, newer than this atnbench")
        if record["status"] not in STATUSES:
            raise UserError(f"run record has unknown status {record['status']!r}")
        run_id, config, now = record["run_id"], record["config"], _now()
        columns = [record.get(name, config.get(name)) for name in ("task", "T", "norm", "k", "seed", "budget")]
        with self._write() as conn:
            conn.execute(
                f"""INSERT INTO runs (run_id, {", ".join(_ROW_COLUMNS)})
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (run_id) DO UPDATE SET {", ".join(f"{c} = excluded.{c}" for c in _ROW_COLUMNS)}""",
                (
                    run_id, *columns, record["status"], _dumps(config), _dumps(record.get("env") or {}),
                    _dumps(record.get("summary") or {}), record.get("error"),
                    _iso(record.get("created_at") or now), _iso(record.get("updated_at") or now),
                ),
            )  # fmt: skip
            conn.execute("DELETE FROM evals WHERE run_id = ?", (run_id,))
            conn.executemany(
                "INSERT INTO evals (run_id, step, wall_s, train_loss, val_loss, metrics_json) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (run_id, int(p["step"]), _real(p.get("wall_s")), _real(p.get("train_loss")),
                     _real(p.get("val_loss")), _dumps(p.get("metrics") or {}))
                    for p in record.get("curve", [])
                ],
            )  # fmt: skip
            for sweep in record.get("sweeps", []):
                self._add_membership(conn, sweep, run_id)
        return run_id

    # -- lookup and removal (``atnbench runs``) ------------------------------------------------

    def run_ids(self, prefix: str = "") -> list[str]:
        """Ids of the runs whose id starts with prefix (all runs for ""), sorted."""
        rows = self._conn.execute("SELECT run_id FROM runs ORDER BY run_id")
        return [row["run_id"] for row in rows if row["run_id"].startswith(prefix)]

    def resolve_id(self, text: str) -> str:
        """The full run id for an id or a unique prefix of one; a one-line ValueError otherwise."""
        text = text.strip()
        matches = self.run_ids(text) if text else []
        if text in matches:
            return text
        if not matches:
            raise UserError(f"no run {text!r} in {self.path} (see `atnbench runs list`)")
        if len(matches) > 1:
            shown = ", ".join(matches[:4]) + (", ..." if len(matches) > 4 else "")
            raise UserError(f"run id prefix {text!r} matches {len(matches)} runs ({shown}); give more characters")
        return matches[0]

    def delete_run(self, run_id: str) -> bool:
        """Delete the run's row; its curve, sweep memberships (and any row that references the
        run with ON DELETE CASCADE) go with it. Files (checkpoints) are the caller's. Returns
        whether a row was there."""
        with self._write() as conn:
            return conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,)).rowcount > 0



def _not_a_database(err: BaseException) -> bool:
    """SQLite's SQLITE_NOTADB: the file's header is not an SQLite database's."""
    return isinstance(err, sqlite3.DatabaseError) and (
        getattr(err, "sqlite_errorname", None) == "SQLITE_NOTADB" or "file is not a database" in str(err))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def parse_moment(text: str) -> datetime:
    """An ISO-8601 date/time (a trailing Z is UTC); ValueError where the text is none."""
    text = text.strip()
    return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)


def _iso(moment: Union[str, datetime]) -> str:
    """Normalize a datetime or ISO-8601 string to the stored UTC form, so text order is time
    order. Naive values are taken as UTC."""
    if isinstance(moment, str):
        try:
            moment = parse_moment(moment)
        except ValueError:
            raise UserError(f"not an ISO-8601 date/time: {moment.strip()!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


def _config_columns(config: dict) -> tuple:
    """task, T, norm, k, seed, budget pulled out of the config for indexing and filtering."""
    return tuple(config.get(name) for name in ("task", "T", "norm", "k", "seed", "budget"))


def _real(value: Any) -> Optional[float]:
    """A float for a REAL column; None for missing or non-finite (NaN, +-inf)."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _clean(value: Any) -> Any:
    """A JSON-safe copy: non-finite floats -> None; numpy/torch values -> Python numbers/lists."""
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): _clean(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(item) for item in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy scalar/array, tensor
        return _clean(value.tolist())
    return value


def _dumps(value: Any) -> str:
    return json.dumps(_clean(value), allow_nan=False, default=str)


def _point(row: sqlite3.Row, run_id: str, path: Path) -> EvalPoint:
    """One evaluation; MalformedRow where a hand-edited store holds what atnbench never writes
    (SQLite keeps text in a REAL column): a report would otherwise fail deep in its arithmetic."""
    where = f"run {run_id} in {path}: the evaluation at step {row['step']!r}"
    if not isinstance(row["step"], int):
        raise MalformedRow(f"{where}: step is not a whole number")
    for column in ("wall_s", "train_loss", "val_loss"):
        if row[column] is not None and not isinstance(row[column], (int, float)):
            raise MalformedRow(f"{where}: {column} is {row[column]!r}, not a number")
    try:
        metrics = json.loads(row["metrics_json"])
    except (TypeError, ValueError) as error:
        raise MalformedRow(f"{where}: metrics is not JSON ({error})") from None
    if not isinstance(metrics, dict):
        raise MalformedRow(f"{where}: metrics is not a JSON object")
    return EvalPoint(row["step"], row["wall_s"], row["train_loss"], row["val_loss"], metrics)


def _record(row: sqlite3.Row, path: Path) -> RunRecord:
    parsed = {}
    for column in ("config_json", "env_json", "summary_json"):
        try:
            parsed[column] = json.loads(row[column])
        except (TypeError, ValueError) as error:
            raise MalformedRow(f"run {row['run_id']} in {path}: {column[:-5]} is not JSON ({error})") from None
        if not isinstance(parsed[column], dict):
            raise MalformedRow(f"run {row['run_id']} in {path}: {column[:-5]} is not a JSON object")
    for column in ("T", "seed", "k"):
        if row[column] is not None and not isinstance(row[column], int):
            raise MalformedRow(f"run {row['run_id']} in {path}: {column} is {row[column]!r}, not a whole number")
    return RunRecord(
        run_id=row["run_id"],
        task=row["task"],
        T=row["T"],
        norm=row["norm"],
        k=row["k"],
        seed=row["seed"],
        budget=row["budget"],
        status=row["status"],
        config=parsed["config_json"],
        env=parsed["env_json"],
        summary=parsed["summary_json"],
        error=row["error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )

"""The results store's tables and their versions: the one home of the schema.

``SCHEMA_VERSION`` is kept in SQLite's ``PRAGMA user_version``; ``MIGRATIONS`` brings a store of
any earlier release to it (``ResultsStore`` applies them, in one transaction, when it opens a
store for writing). ``RECORD_VERSION`` versions the export record (``store export``/``import``)
on its own.
"""

from __future__ import annotations

SCHEMA_VERSION = 2  # the store's tables: PRAGMA user_version; MIGRATIONS bring older stores here
RECORD_VERSION = 1  # the export record's format (``store export`` / ``import``), versioned on its own
STATUSES = ("running", "done", "failed", "diverged")
FINAL_STATUSES = ("done", "failed", "diverged")
_ROW_COLUMNS = ("task", "T", "norm", "k", "seed", "budget", "status", "config_json", "env_json", "summary_json",
                "error", "created_at", "updated_at")  # fmt: skip

# One CREATE per table, by name: a new store runs them all, and a migration names the ones its
# version lacked, so a table is written down once however many releases it came through.
TABLES: dict[str, str] = {
    "meta": """CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
)""",
    "runs": f"""CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    task TEXT,
    T INTEGER,
    norm TEXT,
    k INTEGER,
    seed INTEGER,
    budget REAL,
    status TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    config_json TEXT NOT NULL,
    env_json TEXT NOT NULL DEFAULT '{{}}',
    summary_json TEXT NOT NULL DEFAULT '{{}}',
    error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
)""",
    "evals": """CREATE TABLE IF NOT EXISTS evals (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    wall_s REAL,
    train_loss REAL,
    val_loss REAL,
    metrics_json TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, step)
)""",
    "sweep_runs": """CREATE TABLE IF NOT EXISTS sweep_runs (
    sweep TEXT NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    PRIMARY KEY (sweep, run_id)
)""",
    "models": """CREATE TABLE IF NOT EXISTS models (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('final', 'best')),
    step INTEGER NOT NULL,
    state BLOB NOT NULL,
    PRIMARY KEY (run_id, kind)
)""",
}
INDEXES: dict[str, str] = {  # index -> what it indexes
    "runs_task": "runs (task)",
    "runs_T": "runs (T)",
    "runs_norm": "runs (norm)",
    "runs_status": "runs (status)",
    "runs_created_at": "runs (created_at)",
    "sweep_runs_run": "sweep_runs (run_id)",
}


def statements(*names: str) -> tuple[str, ...]:
    """The CREATE statements of the named tables and indexes (IF NOT EXISTS: safe on a store
    that already has some of them)."""
    return tuple(TABLES[name] if name in TABLES else f"CREATE INDEX IF NOT EXISTS {name} ON {INDEXES[name]}"
                 for name in names)


_SCHEMA = statements(*TABLES, *INDEXES)  # a new store, at SCHEMA_VERSION
# Version -> the statements that bring a store of that version to the next. Version 1 is every
# store written before versions were kept in PRAGMA user_version (its ``meta`` says 1): the first
# release had neither ``models`` nor the indexes after ``runs_task``; later version-1 releases
# already hold them, hence IF NOT EXISTS.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: statements("models", "runs_T", "runs_norm", "runs_status", "runs_created_at", "sweep_runs_run"),
}
MODEL_KINDS = ("best", "final")
STORE_TABLES = ("meta", "runs", "evals", "sweep_runs")  # a store has all of them (models may come later)

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

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS runs (
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
);
CREATE INDEX IF NOT EXISTS runs_task ON runs (task);
CREATE INDEX IF NOT EXISTS runs_T ON runs (T);
CREATE INDEX IF NOT EXISTS runs_norm ON runs (norm);
CREATE INDEX IF NOT EXISTS runs_status ON runs (status);
CREATE INDEX IF NOT EXISTS runs_created_at ON runs (created_at);
CREATE TABLE IF NOT EXISTS evals (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    wall_s REAL,
    train_loss REAL,
    val_loss REAL,
    metrics_json TEXT NOT NULL DEFAULT '{{}}',
    PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS sweep_runs (
    sweep TEXT NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    PRIMARY KEY (sweep, run_id)
);
CREATE INDEX IF NOT EXISTS sweep_runs_run ON sweep_runs (run_id);
CREATE TABLE IF NOT EXISTS models (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('final', 'best')),
    step INTEGER NOT NULL,
    state BLOB NOT NULL,
    PRIMARY KEY (run_id, kind)
);
"""
# Version -> the statements that bring a store of that version to the next. Version 1 is every
# store written before versions were kept in PRAGMA user_version (its ``meta`` says 1); stores of
# some of those releases already hold ``models``, hence IF NOT EXISTS.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("""CREATE TABLE IF NOT EXISTS models (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('final', 'best')),
    step INTEGER NOT NULL,
    state BLOB NOT NULL,
    PRIMARY KEY (run_id, kind)
)""",),
}
MODEL_KINDS = ("best", "final")
STORE_TABLES = ("meta", "runs", "evals", "sweep_runs")  # a store has all of them (models may come later)

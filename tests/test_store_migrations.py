"""Stores written by earlier releases open and are upgraded (PRAGMA user_version, MIGRATIONS),
nothing lost; reading never upgrades; a store newer than the code is one line, exit 2."""

from __future__ import annotations

import json
import sqlite3

import pytest

from atnbench.store import SCHEMA_VERSION, ResultsStore, StoreError
from helpers import invoke

# The schema of the first release (eddcef5 .. 4340275: atnbench/store.py), as it wrote it: no
# `models` table, the version only in `meta`, PRAGMA user_version 0.
RELEASE_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    run_id TEXT PRIMARY KEY, task TEXT, T INTEGER, norm TEXT, k INTEGER, seed INTEGER, budget REAL,
    status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'diverged')),
    config_json TEXT NOT NULL, env_json TEXT NOT NULL DEFAULT '{}', summary_json TEXT NOT NULL DEFAULT '{}',
    error TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL
);
CREATE INDEX runs_task ON runs (task);
CREATE TABLE evals (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE, step INTEGER NOT NULL, wall_s REAL,
    train_loss REAL, val_loss REAL, metrics_json TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (run_id, step)
);
CREATE TABLE sweep_runs (
    sweep TEXT NOT NULL, run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    PRIMARY KEY (sweep, run_id)
);
INSERT INTO meta VALUES ('schema_version', '1');
"""
# The schema of the release at 283613b (atnbench/store.py, after kept models came in 8fd5b68): the
# first release's tables and `models`, the version still only in `meta` (1), PRAGMA user_version 0.
RELEASE_MODELS = RELEASE_1 + """
CREATE INDEX runs_T ON runs (T);
CREATE INDEX runs_norm ON runs (norm);
CREATE INDEX runs_status ON runs (status);
CREATE INDEX runs_created_at ON runs (created_at);
CREATE INDEX sweep_runs_run ON sweep_runs (run_id);
CREATE TABLE models (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('final', 'best')),
    step INTEGER NOT NULL,
    state BLOB NOT NULL,
    PRIMARY KEY (run_id, kind)
);
"""
RUN = ("0123456789ab", "adding", 100, "ln", None, 0, 1.0, "done", json.dumps({"task": "adding", "T": 100}),
       "{}", json.dumps({"min_val_loss": 0.01}), None, "2026-11-01T00:00:00+00:00", "2026-11-01T01:00:00+00:00")


def release_1_store(path):
    with sqlite3.connect(path) as conn:
        conn.executescript(RELEASE_1)
        conn.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", RUN)
        conn.execute("INSERT INTO evals VALUES (?, 100, 1.0, 0.02, 0.01, '{}')", (RUN[0],))
        conn.execute("INSERT INTO sweep_runs VALUES ('table2-adding', ?)", (RUN[0],))
    return path


def release_models_store(path):
    """A store as the release at 283613b left it: one finished run that kept its best model."""
    with sqlite3.connect(path) as conn:
        conn.executescript(RELEASE_MODELS)
        conn.execute("INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", RUN)
        conn.execute("INSERT INTO evals VALUES (?, 100, 1.0, 0.02, 0.01, '{}')", (RUN[0],))
        conn.execute("INSERT INTO models VALUES (?, 'best', 100, ?)", (RUN[0], sqlite3.Binary(b"kept weights")))
    return path


def versions(path):
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        return conn.execute("PRAGMA user_version").fetchone()[0], meta, tables


def test_a_release_1_store_is_upgraded_with_nothing_lost(tmp_path):
    path = release_1_store(tmp_path / "old.db")
    with ResultsStore(path) as store:
        assert store.version == SCHEMA_VERSION
        run = store.get_run(RUN[0])
        assert run.summary == {"min_val_loss": 0.01} and [p.step for p in store.curve(RUN[0])] == [100]
        assert store.sweeps(RUN[0]) == ["table2-adding"] and store.model(RUN[0]) is None
        store.save_model(RUN[0], "final", 100, b"weights")  # the new table works
        assert store.model(RUN[0], "final") == (100, b"weights")
    user_version, meta, tables = versions(path)
    assert user_version == SCHEMA_VERSION and meta == str(SCHEMA_VERSION) and "models" in tables


def test_a_store_that_already_keeps_models_is_upgraded_with_its_models(tmp_path):
    path = release_models_store(tmp_path / "models.db")
    assert versions(path)[:2] == (0, "1") and "models" in versions(path)[2]
    with ResultsStore(path) as store:
        assert store.version == SCHEMA_VERSION
        assert store.model(RUN[0], "best") == (100, b"kept weights") and store.model(RUN[0], "final") is None
        run = store.get_run(RUN[0])
        assert (run.task, run.T, run.norm, run.status) == ("adding", 100, "ln", "done")
        assert run.summary == {"min_val_loss": 0.01} and [p.step for p in store.curve(RUN[0])] == [100]
    user_version, meta, _ = versions(path)
    assert user_version == SCHEMA_VERSION and meta == str(SCHEMA_VERSION)
    with ResultsStore.open_read_only(path) as store:  # the upgrade was written, not only seen
        assert store.version == SCHEMA_VERSION and store.model(RUN[0], "best") == (100, b"kept weights")


def test_reading_a_release_1_store_does_not_upgrade_it(tmp_path):
    path = release_1_store(tmp_path / "old.db")
    with ResultsStore.open_read_only(path) as store:
        assert store.version == 1 and store.model(RUN[0]) is None and len(store.runs()) == 1
    assert versions(path)[0] == 0 and "models" not in versions(path)[2]


def test_a_new_store_carries_the_codes_version(tmp_path):
    with ResultsStore(tmp_path / "new.db") as store:
        assert store.version == SCHEMA_VERSION
    assert versions(tmp_path / "new.db")[:2] == (SCHEMA_VERSION, str(SCHEMA_VERSION))


def test_a_store_newer_than_the_code_is_refused_in_one_line(tmp_path):
    path = tmp_path / "future.db"
    with ResultsStore(path):
        pass
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer than this atnbench"):
        ResultsStore(path)
    result = invoke("runs", "list", "--store", str(path))
    assert result.exit_code == 2 and "newer than this atnbench" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def schema_of(path):
    """Each table's columns (name, type, not null, default, key) and every index, as SQLite reads
    them: equal for stores made by different statements that mean the same schema."""
    with sqlite3.connect(path) as conn:
        names = conn.execute("SELECT type, name, tbl_name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
        columns = {name: conn.execute(f"PRAGMA table_info({name})").fetchall() for kind, name, _ in names
                   if kind == "table"}
        return set(names), columns


@pytest.mark.parametrize("old_store", [release_1_store, release_models_store])
def test_an_upgraded_store_has_exactly_the_schema_of_a_new_store(tmp_path, old_store):
    path = old_store(tmp_path / "old.db")
    with ResultsStore(path):
        pass
    with ResultsStore(tmp_path / "new.db"):
        pass
    assert schema_of(path) == schema_of(tmp_path / "new.db")


def test_each_table_is_created_by_one_statement():
    """A migration names the tables it adds; it does not write their CREATE a second time."""
    import inspect
    import re

    from atnbench.store import schema

    created = re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", inspect.getsource(schema))
    assert sorted(created) == sorted(schema.TABLES) == sorted({*schema.STORE_TABLES, "models"})
    assert set(schema.MIGRATIONS[1]) <= set(schema._SCHEMA)

"""The results store: round trips, resume semantics, filters, transfer between stores,
concurrent writers and atomicity."""

from __future__ import annotations

import json
import multiprocessing as mp
from datetime import datetime, timedelta, timezone

import pytest

from atnbench.store import provenance
from atnbench.store import (
    DEFAULT_STORE,
    EvalPoint,
    MalformedRow,
    ResultsStore,
    StoreError,
    StoreMissing,
    UnknownRun,
    environment,
)


def config(task="copy", T=100, norm="atn", k=10, seed=0, budget=1.0, **extra):
    return {"task": task, "T": T, "norm": norm, "k": k, "seed": seed, "budget": budget, "lr": 1e-3, **extra}


@pytest.fixture
def store(tmp_path):
    with ResultsStore(tmp_path / "results" / "atnbench.db") as opened:
        yield opened


def test_default_location_and_checkpoint_dir(store, tmp_path):
    assert DEFAULT_STORE.as_posix() == "atnbench-results/atnbench.db"
    assert store.checkpoint_dir("abc123") == tmp_path / "results" / "atnbench.db-checkpoints" / "abc123"
    assert not store.checkpoint_dir("abc123").exists()  # a lookup, not a mkdir
    with pytest.raises(ValueError):
        store.checkpoint_dir("../escape")


def test_run_and_curve_round_trip_exactly(store):
    cfg = config(seed=2**62, budget=0.25, options={"permute": True, "path": "data/x"})
    env = {"torch": "2.13.0", "device": "cpu"}
    store.start_run("r1", cfg, env)
    awkward = [0.1 + 0.2, 1 / 3, 5e-324, 1.7976931348623157e308, -0.0]
    for step, value in enumerate(awkward):
        store.log_eval("r1", step * 10, wall_s=step + 0.5, train_loss=value, val_loss=value * 2, metrics={"acc": value})
    summary = {"min_val_loss": 1 / 3, "steps": 40, "steps_per_s": 123.456789, "params": 1234, "baseline": 0.69}
    store.finish_run("r1", "done", summary)

    run = store.get_run("r1")
    assert (run.run_id, run.task, run.T, run.norm, run.k, run.seed, run.budget) == ("r1", "copy", 100, "atn", 10, 2**62, 0.25)
    assert run.status == "done" and run.error is None
    assert run.config == cfg and run.env == env and run.summary == summary
    assert datetime.fromisoformat(run.created_at).utcoffset() == timedelta(0)
    curve = store.curve("r1")
    assert [p.step for p in curve] == [0, 10, 20, 30, 40]
    assert [p.train_loss for p in curve] == awkward  # bit-exact, REAL columns
    assert [p.metrics["acc"] for p in curve] == awkward  # bit-exact, JSON
    assert curve[1] == EvalPoint(10, 1.5, 1 / 3, 2 / 3, {"acc": 1 / 3})
    assert store.get_run("nope") is None and store.status("nope") is None and store.curve("nope") == []


def test_log_eval_upserts_same_step(store):
    store.start_run("r", config(), {})
    store.log_eval("r", 100, 1.0, 2.0, 3.0)
    store.log_eval("r", 100, 1.5, 2.5, None, {"bpc": 1.2})
    assert store.curve("r") == [EvalPoint(100, 1.5, 2.5, None, {"bpc": 1.2})]


def test_status_transitions(store):
    store.start_run("r", config(), {})
    assert store.status("r") == "running"
    store.finish_run("r", "failed", {"steps": 3}, error="RuntimeError: boom")
    assert (store.status("r"), store.get_run("r").error) == ("failed", "RuntimeError: boom")
    store.start_run("r", config(), {})  # retry: back to running, old outcome cleared
    run = store.get_run("r")
    assert (run.status, run.error, run.summary) == ("running", None, {})
    store.finish_run("r", "diverged", {"final_train_loss": float("nan")})
    assert store.status("r") == "diverged"
    store.start_run("r", config(), {})
    store.finish_run("r", "done", {})
    assert store.status("r") == "done"
    with pytest.raises(ValueError, match="done, failed, diverged"):
        store.finish_run("r", "running", {})
    with pytest.raises(UnknownRun, match="'ghost'"):
        store.finish_run("ghost", "done", {})
    with pytest.raises(UnknownRun, match="start_run first"):
        store.log_eval("ghost", 0, 0.0, 1.0, 1.0)


def test_restart_keeps_evals_and_fresh_deletes_them(store):
    store.start_run("r", config(), {"attempt": 1})
    for step in (0, 100, 200):
        store.log_eval("r", step, step / 10, 1.0, 1.0)
    created = store.get_run("r").created_at
    store.start_run("r", config(), {"attempt": 2})
    assert [p.step for p in store.curve("r")] == [0, 100, 200]
    assert store.get_run("r").created_at == created and store.get_run("r").env == {"attempt": 2}
    store.start_run("r", config(), {"attempt": 3}, fresh=True)
    assert store.curve("r") == []
    assert store.get_run("r").created_at > created


def test_truncate_evals(store):
    store.start_run("r", config(), {})
    for step in range(0, 600, 100):
        store.log_eval("r", step, float(step), 1.0, 1.0)
    assert store.truncate_evals("r", after_step=250) == 3
    assert [p.step for p in store.curve("r")] == [0, 100, 200]
    assert store.truncate_evals("r", after_step=200) == 0


def test_filters_combine_with_and(store):
    specs = [
        ("a", config(task="copy", T=100, norm="atn")),
        ("b", config(task="copy", T=200, norm="ln")),
        ("c", config(task="adding", T=100, norm="ln")),
        ("d", config(task="copy", T=100, norm="ln")),
    ]
    for run_id, cfg in specs:
        store.start_run(run_id, cfg, {}, sweep="main" if run_id in "ab" else None)
    store.finish_run("a", "done", {})
    store.finish_run("c", "diverged", {})
    assert store.tasks() == ["adding", "copy"]  # each once, whatever the runs' status

    def ids(**filters):
        return [run.run_id for run in store.runs(**filters)]

    assert ids() == ["a", "b", "c", "d"]  # oldest first
    assert ids(task="copy") == ["a", "b", "d"]
    assert ids(T=100) == ["a", "c", "d"]
    assert ids(norm="ln") == ["b", "c", "d"]
    assert ids(status="running") == ["b", "d"]
    assert ids(sweep="main") == ["a", "b"]
    assert ids(task="copy", T=100, norm="ln") == ["d"]
    assert ids(sweep="main", status="done") == ["a"]
    assert ids(task="nothing") == []

    since = store.get_run("c").created_at
    assert ids(since=since) == ["c", "d"]
    as_datetime = datetime.fromisoformat(since)
    assert ids(since=as_datetime) == ["c", "d"]
    assert ids(since=as_datetime.astimezone(timezone(timedelta(hours=5)))) == ["c", "d"]
    assert ids(since=since.replace("+00:00", "Z")) == ["c", "d"]
    assert ids(since=datetime.now(timezone.utc) + timedelta(days=1)) == []
    with pytest.raises(ValueError, match="ISO-8601"):
        store.runs(since="last tuesday")


def test_sweep_membership_is_many_to_many(store):
    for run_id in ("r1", "r2", "r3"):
        store.start_run(run_id, config(seed=int(run_id[1])), {})
    store.add_to_sweep("table1", "r1")
    store.add_to_sweep("table1", "r2")
    store.add_to_sweep("ablation", "r2")
    store.add_to_sweep("ablation", "r3")
    store.add_to_sweep("ablation", "r3")  # idempotent
    store.start_run("r1", config(seed=1), {}, sweep="ablation")  # membership via start_run
    assert [r.run_id for r in store.runs(sweep="table1")] == ["r1", "r2"]
    assert [r.run_id for r in store.runs(sweep="ablation")] == ["r1", "r2", "r3"]
    assert store.sweeps("r2") == ["ablation", "table1"]
    assert store.sweeps() == ["ablation", "table1"]
    with pytest.raises(UnknownRun):
        store.add_to_sweep("table1", "ghost")


def test_export_import_round_trip(store, tmp_path):
    store.start_run("r", config(options={"nested": [1, 2.5]}), {"device": "cpu"}, sweep="s1")
    store.add_to_sweep("s2", "r")
    for step in (0, 50, 100):
        store.log_eval("r", step, step * 0.01, 1 / (step + 3), None if step == 0 else 0.1 * step, {"acc": 0.5})
    store.log_eval("r", 150, 1.5, float("nan"), float("inf"))
    store.finish_run("r", "diverged", {"min_train_loss": 1 / 3, "final_train_loss": float("nan")})

    record = store.export_record("r")
    wire = json.loads(json.dumps(record, allow_nan=False))  # what travels back from a Ray worker
    with ResultsStore(tmp_path / "driver.db") as driver:
        driver.start_run("r", config(), {}, sweep="other")  # a stale local copy gets replaced
        driver.log_eval("r", 999, 0.0, 0.0, 0.0)
        assert driver.import_record(wire) == "r"
        assert driver.get_run("r") == store.get_run("r")
        assert driver.curve("r") == store.curve("r")
        assert driver.sweeps("r") == ["other", "s1", "s2"]  # memberships are added, never removed
        driver.import_record(wire)  # importing twice changes nothing
        assert driver.export_record("r") == {**record, "sweeps": ["other", "s1", "s2"]}
    with pytest.raises(UnknownRun):
        store.export_record("ghost")
    with pytest.raises(ValueError, match="missing config"):
        store.import_record({"run_id": "x", "status": "done"})


def _write_runs(path, prefix, barrier, count):
    """Child process body: its own store object on the shared file, many small transactions."""
    barrier.wait()
    with ResultsStore(path) as own:
        for i in range(count):
            run_id = f"{prefix}{i}"
            own.start_run(run_id, config(seed=i), {"writer": prefix}, sweep="shared")
            for step in range(3):
                own.log_eval(run_id, step, float(step), 1.0 / (step + 1), 2.0)
            own.finish_run(run_id, "done", {"steps": 3})


def test_two_processes_write_concurrently(tmp_path):
    path = tmp_path / "shared.db"
    context = mp.get_context("spawn")
    barrier = context.Barrier(2)
    workers = [context.Process(target=_write_runs, args=(path, prefix, barrier, 25)) for prefix in ("p", "q")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0, 0]
    with ResultsStore(path, create=False) as reader:
        assert reader._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        runs = reader.runs(sweep="shared", status="done")
        assert sorted(run.run_id for run in runs) == sorted(f"{p}{i}" for p in "pq" for i in range(25))
        assert all(len(reader.curve(run.run_id)) == 3 for run in runs)


def test_failed_transaction_leaves_no_half_written_row(store, monkeypatch):
    record = {
        "run_id": "half",
        "status": "done",
        "config": config(),
        "curve": [{"step": 0, "train_loss": 1.0}, {"train_loss": 0.5}],  # second point has no step
    }
    with pytest.raises(KeyError):
        store.import_record(record)
    assert store.get_run("half") is None and store.curve("half") == []

    def explode(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(ResultsStore, "_add_membership", explode)
    with pytest.raises(RuntimeError, match="disk on fire"):
        store.start_run("half", config(), {}, sweep="s")  # fails after the row insert
    assert store.get_run("half") is None and store.runs() == []


def test_missing_store_with_create_false(tmp_path):
    path = tmp_path / "nowhere" / "atnbench.db"
    with pytest.raises(StoreMissing) as caught:
        ResultsStore(path, create=False)
    assert isinstance(caught.value, FileNotFoundError)
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    assert not path.exists() and not path.parent.exists()


def test_not_a_database_is_a_readable_error(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("these are not the results you are looking for\n" * 100)
    with pytest.raises(StoreError, match="notes.db is not a results store: not an SQLite database"):
        ResultsStore(path, create=False)


def test_non_finite_values_become_null(store):
    store.start_run("r", config(), {})
    store.log_eval("r", 0, 0.1, float("nan"), float("-inf"), {"acc": float("inf"), "list": [1.0, float("nan")]})
    store.finish_run("r", "diverged", {"min_train_loss": float("nan"), "nested": {"x": float("inf")}, "ok": 1.5})
    assert store.get_run("r").summary == {"min_train_loss": None, "nested": {"x": None}, "ok": 1.5}
    assert store.curve("r") == [EvalPoint(0, 0.1, None, None, {"acc": None, "list": [1.0, None]})]
    raw = store._conn.execute("SELECT summary_json FROM runs").fetchone()[0]
    assert "NaN" not in raw and "Infinity" not in raw
    json.loads(raw, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))


def test_numpy_and_torch_values_are_stored_as_numbers(store):
    np = pytest.importorskip("numpy")
    store.start_run("r", config(), {})
    store.finish_run("r", "done", {"acc": np.float32(0.5), "steps": np.int64(7), "curve": np.array([1.0, np.nan])})
    assert store.get_run("r").summary == {"acc": 0.5, "steps": 7, "curve": [1.0, None]}


def test_environment_never_raises(monkeypatch):
    def no_git(*args, **kwargs):
        raise OSError("git not installed")

    monkeypatch.setattr(provenance.subprocess, "run", no_git)
    env = environment(device="cpu")
    assert set(env) >= {"torch", "python", "platform", "device", "atnbench_revision"}
    assert env["device"] == "cpu" and env["atnbench_revision"]
    json.dumps(env, allow_nan=False)  # storable as env_json


def test_environment_names_the_processor_and_the_instruction_set_torch_uses(monkeypatch, tmp_path):
    """The same code and seed give the same numbers only on the same kind of processor (AVX-512
    and AVX2 kernels round differently), so every run records which it had."""
    import atnbench.evidence.machine as machine
    import torch

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\nflags\t\t: fpu\n")
    real_path = machine.Path
    monkeypatch.setattr(machine, "Path", lambda p: cpuinfo if p == "/proc/cpuinfo" else real_path(p))
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    env = environment(device="cpu")
    assert env["processor"] == "AMD EPYC 9B14" and env["cpu_capability"] == "AVX2"

    def broken():
        raise RuntimeError("no such query in this torch")

    monkeypatch.setattr(machine, "Path", lambda p: tmp_path / "missing")
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", broken)
    env = environment(device="cpu")
    assert env["cpu_capability"] is None and env["processor"]  # falls back to platform's name


def _digest(path):
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_read_only_open_never_writes_the_store_file(tmp_path):
    import sqlite3

    path = tmp_path / "plain.db"
    with ResultsStore(path) as store:
        store.start_run("r", config(), {})
    with sqlite3.connect(path) as conn:  # a store left in rollback-journal mode: opening for writing would convert it
        conn.execute("PRAGMA journal_mode = DELETE")
    before = _digest(path)
    with ResultsStore.open_read_only(path) as store:
        assert store.status("r") == "running"
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store.start_run("s", config(), {})
    assert _digest(path) == before


@pytest.mark.parametrize("damage, message", [
    ("drop evals", "damaged results store: table(s) evals missing"),
    ("drop all", "empty database"),
    ("foreign", "not an atnbench results store: table(s) meta, runs, evals, sweep_runs missing"),
])
def test_a_store_missing_tables_is_refused_not_recreated(tmp_path, damage, message):
    import sqlite3

    path = tmp_path / "s.db"
    with ResultsStore(path):
        pass
    with sqlite3.connect(path) as conn:
        names = {"drop evals": ["evals"], "drop all": ["sweep_runs", "evals", "runs", "meta", "models"],
                 "foreign": ["sweep_runs", "evals", "runs", "meta", "models"]}[damage]
        for name in names:
            conn.execute(f"DROP TABLE {name}")
        if damage == "foreign":
            conn.execute("CREATE TABLE photos (x)")
    before = _digest(path)
    with pytest.raises(StoreError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ResultsStore.open_read_only(path)
    if damage != "drop all":  # an empty database may become a store when a run is recorded
        with pytest.raises(StoreError):
            ResultsStore(path)
    assert _digest(path) == before


def test_unusable_store_paths_are_one_line_naming_the_file(tmp_path):
    (tmp_path / "folder.db").mkdir()
    (tmp_path / "file").write_text("x")
    truncated = tmp_path / "truncated.db"
    with ResultsStore(tmp_path / "whole.db") as store:
        for i in range(50):
            store.start_run(f"r{i}", config(seed=i), {"pad": "x" * 500})
    truncated.write_bytes((tmp_path / "whole.db").read_bytes()[:8192])
    cases = [(tmp_path / "folder.db", "is a folder"), (tmp_path / "file" / "s.db", "is a file, not a folder"),
             (truncated, "malformed")]
    for path, problem in cases:
        for opener in (ResultsStore, ResultsStore.open_read_only):
            with pytest.raises(StoreError, match=problem) as caught:
                opener(path)
            assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def _grow(path, prefix, sessions, runs):
    """Another process: ``sessions`` times open the store, add ``runs`` runs, close it (as `sweep` does: its plan,
    then its runs), each close being that process's last connection."""
    for session in range(sessions):
        with ResultsStore(path) as own:
            for i in range(runs):
                own.start_run(f"{prefix}{session}-{i}", config(seed=i), {"pad": "x" * 2000})


def test_a_second_store_opened_and_closed_beside_an_open_one_keeps_its_view_of_the_file(tmp_path):
    """A Ray driver holds its store open while it marks a lost run through another ResultsStore on the same
    file (``mark_lost``). Closing any descriptor of that file drops every POSIX lock this process holds on it
    (SQLite's own descriptors are kept open for that reason), so a Python ``open()``/``close()`` of it
    here (the header check once did that) let another process's close believe it was the file's last user:
    it folded the WAL into the file and deleted the -wal and -shm files under the open connection, whose
    stale index then read "database disk image is malformed" (or missed rows)."""
    path = tmp_path / "r.db"
    with ResultsStore(path) as driver:
        driver.start_run("d0", config(), {})
        assert driver.runs()[0].run_id == "d0"  # the driver's connection has read the file: it holds its index
        with ResultsStore(path) as beside:  # as mark_lost does, in the same process
            beside.set_meta("note", {"seen": True})
        other = mp.get_context("spawn").Process(target=_grow, args=(path, "o", 2, 40))
        other.start()
        other.join(timeout=60)
        assert other.exitcode == 0
        assert sorted(path.parent.iterdir()) == sorted(path.with_name(path.name + s) for s in ("", "-wal", "-shm"))
        assert len(driver.runs()) == 81  # the other process's runs, read through an index that is current
        driver.start_run("d1", config(seed=1), {})
    with ResultsStore(path, create=False) as reader:
        assert [tuple(row) for row in reader._conn.execute("PRAGMA integrity_check")] == [("ok",)]
        assert len(reader.runs()) == 82


def test_a_store_in_a_read_only_folder_is_read_and_a_pending_log_is_named(tmp_path):
    """A WAL store's readers share an index file beside it (-shm), which a read-only folder cannot
    hold: the store is then read as the unchanging file it is. Where its -wal still holds changes
    the file lacks, reading it there would miss them: one line says so. (As root, permissions
    bind only without CAP_DAC_OVERRIDE: the commands run under setpriv.)"""
    import os
    import shutil
    import sqlite3
    import subprocess
    import sys
    from contextlib import closing

    from helpers import fill_store

    drop = [] if os.geteuid() != 0 else ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    command = [*drop, sys.executable, "-c", "from atnbench.cli import app; app(prog_name='atnbench')"]
    fill_store(tmp_path / "s.db", [("adding", 100, "ln", None, seed, "done", 0.5, None) for seed in (0, 1)])
    shelf, pending = tmp_path / "shelf", tmp_path / "pending"
    shelf.mkdir()
    shutil.copy(tmp_path / "s.db", shelf / "s.db")
    with closing(sqlite3.connect(tmp_path / "s.db")) as writer:  # a change still in the -wal while it is open
        writer.execute("UPDATE runs SET error = 'x'")
        writer.commit()
        pending.mkdir()
        for suffix in ("", "-wal"):
            shutil.copy(tmp_path / f"s.db{suffix}", pending / f"s.db{suffix}")
    for folder in (shelf, pending):
        folder.chmod(0o555)
    try:
        listed = subprocess.run([*command, "runs", "list", "--store", shelf / "s.db"], capture_output=True, text=True)
        assert listed.returncode == 0 and "2 of 2 runs" in listed.stdout, listed.stderr
        refused = subprocess.run([*command, "runs", "list", "--store", pending / "s.db"], capture_output=True, text=True)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "its write-ahead log (s.db-wal) holds changes not yet in the file" in refused.stderr
        assert sorted(p.name for p in shelf.iterdir()) == ["s.db"]  # nothing made beside it
    finally:
        for folder in (shelf, pending):
            folder.chmod(0o755)


def test_a_write_waits_for_a_long_writer_and_says_so(tmp_path, monkeypatch, caplog):
    """Another process's import holds the store's write lock past the busy timeout: a run's next
    write waits (one note), and lands once the lock is free; past WRITE_PATIENCE_S it fails."""
    import logging
    import sqlite3
    import threading
    from contextlib import closing

    from atnbench.store import results as results_module
    from helpers import fill_store

    (run_id,) = fill_store(tmp_path / "s.db", [("adding", 100, "ln", None, 0, "running", 0.5, None)])
    monkeypatch.setattr(results_module, "BUSY_TIMEOUT_S", 0.1)
    monkeypatch.setattr(results_module, "WRITE_PATIENCE_S", 5.0)
    with ResultsStore(tmp_path / "s.db") as store, \
            closing(sqlite3.connect(tmp_path / "s.db", check_same_thread=False)) as other:
        other.execute("BEGIN IMMEDIATE")
        threading.Timer(0.6, other.rollback).start()
        with caplog.at_level(logging.WARNING, logger="atnbench"):
            store.log_eval(run_id, 400, 4.0, 0.1, 0.1)
        assert [p.step for p in store.curve(run_id)][-1] == 400
        assert caplog.text.count("another process has been writing it") == 1
        monkeypatch.setattr(results_module, "WRITE_PATIENCE_S", 0.3)
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            store.log_eval(run_id, 500, 5.0, 0.1, 0.1)
        other.rollback()


def test_a_store_locked_past_the_busy_timeout_is_busy_not_unusable(tmp_path, monkeypatch):
    """A store not in WAL mode (switched by hand), another process holding its lock: commands said
    "is not a usable atnbench results store: database is locked", exit 2 (QA). It is busy: one line
    saying so, exit 1 (the work could not be done now), the store as it was."""
    import sqlite3
    from contextlib import closing

    from atnbench.store import results as results_module
    from helpers import fill_store, invoke

    fill_store(tmp_path / "s.db", [("adding", 100, "ln", None, 0, "done", 0.5, None)])
    with closing(sqlite3.connect(tmp_path / "s.db")) as switch:
        switch.execute("PRAGMA journal_mode = DELETE")
    monkeypatch.setattr(results_module, "BUSY_TIMEOUT_S", 0.2)
    with closing(sqlite3.connect(tmp_path / "s.db", isolation_level=None)) as other:
        other.execute("BEGIN EXCLUSIVE")
        for args in (("runs", "list"), ("report",)):
            result = invoke(*args, "--store", tmp_path / "s.db")
            assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1, result.output
            assert "s.db is locked by another process, which has held it for more than 0.2 s" in result.stderr
        other.execute("ROLLBACK")
    assert invoke("runs", "list", "--store", tmp_path / "s.db").exit_code == 0


@pytest.mark.parametrize("column, value, said", [
    ("val_loss", "abc", "val_loss is 'abc', not a number"),
    ("train_loss", b"\x00", "train_loss is b'\\x00', not a number"),
    ("metrics_json", "{", "metrics is not JSON"),
    ("metrics_json", "[1]", "metrics is not a JSON object"),
])
def test_a_hand_edited_evaluation_is_named_not_an_internal_error(tmp_path, column, value, said):
    """SQLite keeps text in a REAL column: a report read it and failed in its arithmetic as "a bug
    in atnbench"; the store now says which run and evaluation hold what, and the commands exit 2."""
    import sqlite3

    from helpers import fill_store, invoke

    (run_id,) = fill_store(tmp_path / "s.db", [("copying", 100, "ln", None, 0, "done", 0.5, None)])
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute(f"UPDATE evals SET {column} = ? WHERE run_id = ? AND step = 200", (value, run_id))
    with ResultsStore(tmp_path / "s.db") as store, pytest.raises(MalformedRow) as damaged:
        store.curve(run_id)
    assert f"run {run_id} in " in str(damaged.value) and f"the evaluation at step 200: {said}" in str(damaged.value)
    for command in (("report",), ("plot", "--out-dir", tmp_path / "figs")):
        refused = invoke(*command, "--store", tmp_path / "s.db")
        assert refused.exit_code == 2 and said in refused.stderr and "bug in atnbench" not in refused.stderr


def test_a_run_records_whether_the_cpp_fast_path_trained_it(monkeypatch):
    """The C++ path and the plain loop round differently (a 200-step adding run of LN: minimum
    validation loss 0.0615 against 0.0579 under one id, QA): the run's environment says which."""
    from atnbench.nn import fastpath
    from atnbench.store.provenance import environment

    for state, said in (({"ok": True}, True), ({"ok": False, "error": "no compiler"}, False), ({}, None)):
        monkeypatch.setattr(fastpath, "_cpp_state", state)
        assert environment("cpu")["cpp_fast_path"] is said


def test_runs_on_the_loop_are_a_processor_class_of_their_own():
    """Seeds are pooled, and comparisons stratified, by processor class: one made on the plain loop
    rounds differently from one made on the C++ path of the same processor."""
    from atnbench.evidence.machine import processor_class

    ln, lstm = {"norm": "ln"}, {"norm": "none"}
    assert processor_class({"cpu_capability": "AVX512", "cpp_fast_path": True}, ln) == "AVX512"
    assert processor_class({"cpu_capability": "AVX512", "cpp_fast_path": None}, ln) == "AVX512"  # never needed it
    assert processor_class({"cpu_capability": "AVX512"}, ln) == "AVX512"  # recorded before the path was
    assert processor_class({"cpu_capability": "AVX512", "cpp_fast_path": False}, ln) == "AVX512 loop"
    # the plain LSTM never uses the fast path: what its process had (an LN run before it in one
    # sweep process) is no class of its own (QA: it moved a plain-LSTM comparison's p with sweep order)
    assert processor_class({"cpu_capability": "AVX512", "cpp_fast_path": False}, lstm) == "AVX512"
    assert processor_class(None) == "unknown"

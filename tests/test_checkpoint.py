"""Checkpoints belong to one store, are written atomically, set aside when unusable and cleaned
up; one process at a time trains a run (a second is refused, or waits and keeps the result)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from atnbench.run import checkpoint as checkpoints
from atnbench.run.checkpoint import RunBusy, hold_run
from atnbench.run.runspec import resolve_run
from atnbench.store import ResultsStore
from atnbench.run.train import SilentReporter, _train, train
from helpers import Interrupt
from atnbench.evidence.identity import run_id_of

CPU = torch.device("cpu")
CONFIG = resolve_run("adding", {"T": 10, "hidden": 8, "batch_size": 4, "steps": 12, "eval_every": 2,
                                "val_samples": 8, "norm": "atn", "k": 3})


def points(store: ResultsStore) -> list[tuple]:
    return [(p.step, p.train_loss, p.val_loss) for p in store.curve(run_id_of(CONFIG))]


def killed_run(path: Path) -> Path:
    """A run of CONFIG interrupted at step 9 (checkpoint at step 8) in the store at path."""
    with ResultsStore(path) as store:
        with pytest.raises(KeyboardInterrupt):
            train(CONFIG, store, CPU, Interrupt(at=9), checkpoint_every=2)
    file = checkpoints.checkpoint_file(path, run_id_of(CONFIG))
    assert file.exists()
    return file


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The uninterrupted curve every recovered run must equal."""
    with ResultsStore(tmp_path_factory.mktemp("whole") / "whole.db") as store:
        train(CONFIG, store, CPU)
        return points(store)


def test_checkpoints_live_beside_their_own_store_file(tmp_path):
    assert checkpoints.checkpoint_dir(tmp_path / "x.db", "abc") == tmp_path / "x.db-checkpoints" / "abc"
    assert checkpoints.checkpoint_root(tmp_path / "x.db") != checkpoints.checkpoint_root(tmp_path / "y.db")


def test_a_killed_run_of_one_store_is_not_resumed_by_another_in_the_same_folder(tmp_path, whole, caplog):
    x_checkpoint = killed_run(tmp_path / "x.db")
    with ResultsStore(tmp_path / "y.db") as y, caplog.at_level(logging.WARNING, logger="atnbench"):
        record = train(CONFIG, y, CPU, resume=True)
        assert points(y) == whole  # from step 0, not from x's step 8
    assert record["status"] == "done"
    assert "no checkpoint for run" in caplog.text and "starting it from scratch" in caplog.text
    assert x_checkpoint.exists()  # x's checkpoint is x's: untouched
    with ResultsStore(tmp_path / "x.db") as x:
        train(CONFIG, x, CPU, resume=True)
        assert points(x) == whole


def test_a_finished_run_leaves_no_checkpoint_folders(tmp_path):
    killed_run(tmp_path / "r.db")
    with ResultsStore(tmp_path / "r.db") as store:
        train(CONFIG, store, CPU, resume=True)
    assert not checkpoints.checkpoint_root(tmp_path / "r.db").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db"]  # WAL files go when the store closes


@pytest.mark.parametrize("damage", ["garbage", "empty", "truncated", "not-a-checkpoint"])
def test_an_unusable_checkpoint_is_set_aside_and_the_run_starts_over(tmp_path, whole, caplog, damage):
    file = killed_run(tmp_path / "r.db")
    good = file.read_bytes()
    if damage == "garbage":
        file.write_bytes(b"this is not a checkpoint\n" * 10)
    elif damage == "empty":
        file.write_bytes(b"")
    elif damage == "truncated":
        file.write_bytes(good[: len(good) // 2])
    else:
        torch.save({"model": {}}, file)
    damaged = file.read_bytes()
    with ResultsStore(tmp_path / "r.db") as store, caplog.at_level(logging.WARNING, logger="atnbench"):
        record = train(CONFIG, store, CPU, resume=True)
        assert points(store) == whole
    assert record["status"] == "done"
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "set aside as checkpoint.pt.corrupt-" in notes[0] and "from scratch" in notes[0]
    aside = list(file.parent.glob("checkpoint.pt.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == damaged  # renamed, not deleted


def test_a_checkpoint_of_another_model_is_set_aside(tmp_path, whole, caplog):
    file = killed_run(tmp_path / "r.db")
    other = resolve_run("adding", {"T": 10, "hidden": 16, "batch_size": 4, "steps": 12, "eval_every": 2,
                                   "val_samples": 8, "norm": "atn", "k": 3})
    with ResultsStore(tmp_path / "other.db") as store:
        with pytest.raises(KeyboardInterrupt):
            train(other, store, CPU, Interrupt(at=9), checkpoint_every=2)
    os.replace(checkpoints.checkpoint_file(tmp_path / "other.db", run_id_of(other)), file)
    saved = torch.load(file, weights_only=False)
    saved.pop("run_id")  # as a checkpoint written before they held their run's id: told apart by its shapes
    torch.save(saved, file)
    with ResultsStore(tmp_path / "r.db") as store, caplog.at_level(logging.WARNING, logger="atnbench"):
        train(CONFIG, store, CPU, resume=True)
        assert points(store) == whole
    assert "does not fit run" in caplog.text


def test_writes_go_through_unique_temporary_names(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def spy(source, target):
        seen.append(Path(source).name)
        real_replace(source, target)

    monkeypatch.setattr(checkpoints.os, "replace", spy)
    target = tmp_path / "run" / "checkpoint.pt"
    checkpoints.save(target, {"a": 1})
    checkpoints.save(target, {"a": 2})
    assert len(set(seen)) == 2 and all(name.startswith(".checkpoint.pt.") for name in seen)
    assert torch.load(target)["a"] == 2 and [p.name for p in target.parent.iterdir()] == ["checkpoint.pt"]


def test_a_failed_write_leaves_the_old_checkpoint_and_no_temporary_file(tmp_path):
    target = tmp_path / "checkpoint.pt"
    checkpoints.save(target, {"a": 1})

    def broken(handle):
        handle.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError):
        checkpoints.write_atomic(target, broken)
    assert torch.load(target)["a"] == 1 and [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_a_file_written_whole_keeps_its_mode_or_takes_the_umasks(tmp_path):
    """mkstemp makes 0600 files: a bench record meant to be shared (`bench -o`) was unreadable to
    others whatever the umask, and a file's own mode was lost when it was written again."""
    import os
    import stat

    fresh, kept = tmp_path / "fresh.json", tmp_path / "kept.json"
    kept.write_text("{}")
    os.chmod(kept, 0o640)
    old = os.umask(0o027)
    try:
        for path in (fresh, kept):
            checkpoints.write_atomic(path, lambda handle: handle.write(b"[]"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640 and stat.S_IMODE(kept.stat().st_mode) == 0o640
    os.chmod(kept, 0o604)
    checkpoints.write_atomic(kept, lambda handle: handle.write(b"[1]"))
    assert stat.S_IMODE(kept.stat().st_mode) == 0o604 and kept.read_bytes() == b"[1]"


def test_on_save_sees_every_checkpoint_in_place_and_only_inside_its_block(tmp_path):
    """What a Ray task ships to the driver: each checkpoint, whole, right after it is written."""
    seen = []

    def watch(path):
        seen.append((path, checkpoints.load(path, CPU)["step"]))  # in place and readable when called

    path = tmp_path / "r.db"
    with checkpoints.on_save(watch):
        killed_run(path)  # checkpoints at steps 4 and 8 (every 2nd evaluation), then interrupted
    assert seen == [(checkpoints.checkpoint_file(path, run_id_of(CONFIG)), 4),
                    (checkpoints.checkpoint_file(path, run_id_of(CONFIG)), 8)]
    with ResultsStore(path) as store:
        train(CONFIG, store, CPU, resume=True)  # outside the block: no more calls
    assert len(seen) == 2


def test_a_run_training_elsewhere_is_refused(tmp_path):
    with ResultsStore(tmp_path / "r.db") as store:
        with hold_run(store.path, run_id_of(CONFIG)):  # as another process would
            with pytest.raises(RunBusy, match="being trained by another process"):
                train(CONFIG, store, CPU)
        assert store.status(run_id_of(CONFIG)) is None  # the refused run wrote nothing


def test_a_waiting_run_keeps_the_other_process_result(tmp_path):
    path = tmp_path / "r.db"
    steps = []

    class Counting:
        def start(self, run_id, total, done): pass
        def evaluated(self, step, train_loss, val_loss): pass
        def finish(self, status): pass
        def step(self, step, loss): steps.append(step)

    def wait_and_train():
        with ResultsStore(path) as own:
            outcome.update(train(CONFIG, own, CPU, Counting(), wait=True))

    outcome = {}
    with ResultsStore(path) as store:
        with hold_run(path, run_id_of(CONFIG)):  # "the other process", training the run meanwhile
            waiter = threading.Thread(target=wait_and_train)
            waiter.start()
            third = checkpoints.RunLock(checkpoints.lock_file(path, run_id_of(CONFIG)))
            assert not third.try_acquire()  # still held by us while the waiter polls
            _train(CONFIG, store, CPU, SilentReporter(), False, None, 2)
        waiter.join(timeout=60)
    assert not waiter.is_alive()
    assert outcome["status"] == "done" and steps == []  # kept, not trained twice


def test_a_lock_is_released_when_its_holder_is_killed(tmp_path):
    script = ("import sys, time; from atnbench.run.checkpoint import hold_run\n"
              "with hold_run(sys.argv[1], 'abc'):\n    print('held', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "r.db")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunBusy, match=f"pid {holder.pid}"):
            with hold_run(tmp_path / "r.db", "abc"):
                pass
    finally:
        holder.kill()
        holder.wait()
    with hold_run(tmp_path / "r.db", "abc"):  # free at once after SIGKILL
        pass
    assert not checkpoints.checkpoint_root(tmp_path / "r.db").exists()


@pytest.mark.slow
def test_two_identical_runs_at_once_no_crash_one_result(tmp_path):
    store = tmp_path / "r.db"
    args = [str(Path(sys.executable).parent / "atnbench"), "run", "adding", "--T", "10", "--hidden", "8", "--batch-size", "4",
            "--iters", "200", "--eval-every", "10", "--val-samples", "8", "--store", str(store), "--format", "json"]
    env = {**os.environ, "ATNBENCH_NO_BUILD": "1"}
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes in ([0, 0], [0, 1]), results
    for code, stdout, stderr in results:
        assert "Traceback" not in stderr
        if code == 1:  # refused, in one line
            assert stderr.strip().count("\n") == 0 and "being trained by another process" in stderr
        else:
            assert json.loads(stdout)["status"] == "done"
    with ResultsStore(store, create=False) as results_store:
        rows = results_store.runs()
    assert len(rows) == 1 and rows[0].status == "done"
    assert not checkpoints.checkpoint_root(store).exists()


def test_a_sweep_recovers_from_a_corrupt_checkpoint_instead_of_failing_every_rerun(tmp_path, caplog):
    from atnbench.sweep import expand, load_sweep, run_sweep

    spec_file = tmp_path / "one.yaml"
    spec_file.write_text("description: one run\ntask: adding\nbase: {T: 10, steps: 12, hidden: 8, batch_size: 4, "
                         "val_samples: 8, eval_every: 2}\ngrid: {norm: [atn], k: [3]}\n")
    spec = load_sweep(str(spec_file))
    runs = expand(spec, seeds=[0])
    store = tmp_path / "r.db"
    with ResultsStore(store) as results:
        with pytest.raises(KeyboardInterrupt):
            train(runs[0].config, results, CPU, Interrupt(at=9), checkpoint_every=2)
    file = checkpoints.checkpoint_file(store, runs[0].run_id)
    file.write_bytes(b"\x80garbage")
    with caplog.at_level(logging.WARNING, logger="atnbench"):
        outcome = run_sweep(spec, runs, store, workers=1, quiet=True)
    assert outcome.count("done") == 1 and outcome.exit_code == 0
    assert "set aside" in caplog.text
    assert len(list(file.parent.glob("checkpoint.pt.corrupt-*"))) == 1 and not file.exists()


@pytest.mark.parametrize("after_the_row", [False, True], ids=["before-the-final-row", "after-the-final-row"])
def test_an_interrupt_after_the_last_step_is_recorded_and_the_same_command_finishes(tmp_path, whole, monkeypatch,
                                                                                    after_the_row):
    """Ctrl-C while the run writes its summary leaves no row 'running': before the final row is
    written it is recorded interrupted and resumes to the uninterrupted numbers; after, the run is
    done and its checkpoint is gone."""
    from atnbench.run import train as train_module

    real = ResultsStore.finish_run if after_the_row else train_module.summarize
    calls = []

    def interrupted(*args, **kwargs):  # once: the recording of the interrupt calls it again
        done = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return done

    target = (ResultsStore, "finish_run") if after_the_row else (train_module, "summarize")
    with ResultsStore(tmp_path / "r.db") as store:
        with monkeypatch.context() as patch:
            patch.setattr(*target, interrupted)
            with pytest.raises(KeyboardInterrupt):
                train(CONFIG, store, CPU, checkpoint_every=2)
        row = store.get_run(run_id_of(CONFIG))
        assert (row.status, row.error) == (("done", None) if after_the_row else ("failed", "interrupted"))
        assert checkpoints.checkpoint_file(tmp_path / "r.db", run_id_of(CONFIG)).exists() != after_the_row
        record = train(CONFIG, store, CPU, resume=True)
        assert record["status"] == "done" and points(store) == whole


def test_a_checkpoint_beyond_what_the_store_holds_starts_over_not_onto_a_partial_curve(tmp_path, whole, caplog):
    """The store replaced (or its last writes lost) beside a killed run's checkpoint: resuming would
    record a done run whose curve lacks its first evaluations. It starts over, with a warning."""
    import sqlite3
    from contextlib import closing

    checkpoint = killed_run(tmp_path / "r.db")  # its checkpoint is at step 8; the store's curve at 2, 4, 6, 8
    with closing(sqlite3.connect(tmp_path / "r.db")) as db:
        db.execute("DELETE FROM evals WHERE step <= 4")
        db.commit()
    with ResultsStore(tmp_path / "r.db") as store, caplog.at_level(logging.WARNING, logger="atnbench"):
        record = train(CONFIG, store, CPU, resume=True)
        assert record["status"] == "done" and points(store) == whole
    assert "holds only part of run" in caplog.text and "starting run" in caplog.text and "from scratch" in caplog.text
    assert not checkpoint.exists()


def test_a_full_disk_while_a_checkpoint_is_written_says_so(tmp_path, monkeypatch):
    """torch.save on a full disk raises a RuntimeError about its zip writer ("unexpected pos"),
    chaining the OSError: the checkpoint says No space left, names its file, and leaves nothing."""
    import errno

    def full(payload, handle):
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as cause:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 32000 vs 31920") from cause

    monkeypatch.setattr(torch, "save", full)
    target = tmp_path / "run" / "checkpoint.pt"
    with pytest.raises(OSError, match="No space left on device .writing the checkpoint .*checkpoint.pt") as raised:
        checkpoints.save(target, {"step": 1})
    assert raised.value.errno == errno.ENOSPC and list(target.parent.iterdir()) == []
    monkeypatch.setattr(torch, "save", lambda payload, handle: (_ for _ in ()).throw(RuntimeError("not a disk")))
    with pytest.raises(RuntimeError, match="not a disk"):  # any other error stays what it is
        checkpoints.save(target, {"step": 1})


def test_another_runs_checkpoint_in_this_runs_place_is_set_aside(tmp_path, whole, caplog):
    """A checkpoint holds its run's id: one copied by hand into another run's place (same sizes,
    another seed) is set aside with a warning, and the run starts over to its own numbers."""
    import shutil

    other = resolve_run("adding", {"T": 10, "hidden": 8, "batch_size": 4, "steps": 12, "eval_every": 2,
                                   "val_samples": 8, "norm": "atn", "k": 3, "seed": 7})
    with ResultsStore(tmp_path / "r.db") as store:
        with pytest.raises(KeyboardInterrupt):
            train(other, store, CPU, Interrupt(at=9), checkpoint_every=2)
        killed_run(tmp_path / "r.db")
        mine = checkpoints.checkpoint_file(tmp_path / "r.db", run_id_of(CONFIG))
        shutil.copy(checkpoints.checkpoint_file(tmp_path / "r.db", run_id_of(other)), mine)
        with caplog.at_level(logging.WARNING, logger="atnbench"):
            record = train(CONFIG, store, CPU, resume=True)
        assert record["status"] == "done" and points(store) == whole
    assert f"is run {run_id_of(other)}'s, not run {run_id_of(CONFIG)}'s" in caplog.text and "from scratch" in caplog.text


def test_a_run_resumed_on_the_loop_after_starting_on_the_cpp_path_is_a_class_of_its_own(tmp_path, monkeypatch):
    """Interrupted on the C++ fast path and resumed where it cannot be built, a run's numbers are
    neither class's: it was recorded as a loop run (the resuming process's class), a stratum it
    does not belong to. Its class is "mixed", and verify says no single machine re-runs it."""
    from atnbench.config import build_config
    from atnbench.evidence.machine import cpu_capability, processor_class
    from atnbench.evidence.verify import machine_text, path_note
    from atnbench.nn import fastpath
    from atnbench.run.warmup import load_fast_path

    config = build_config({"task": "adding", "T": 10, "norm": "atn", "k": 3, "hidden": 8, "batch_size": 4,
                           "steps": 12, "eval_every": 2, "val_samples": 8})
    load_fast_path(config)
    assert fastpath.build_cpp()  # the suite runs where the fast path builds (.ci/run builds it first)
    store = tmp_path / "r.db"
    with ResultsStore(store) as results:
        with pytest.raises(KeyboardInterrupt):
            train(config, results, CPU, Interrupt(at=5), checkpoint_every=2)
        assert results.get_run(run_id_of(config)).env["cpp_fast_path"] is True
    monkeypatch.setattr(fastpath, "_cpp_state", {"ok": False, "disabled": True, "error": "ATNBENCH_NO_BUILD is set"})
    with ResultsStore(store) as results:  # two more segments on the loop: its classes named once each
        with pytest.raises(KeyboardInterrupt):
            train(config, results, CPU, Interrupt(at=9), resume=True, checkpoint_every=2)
        train(config, results, CPU, resume=True)
        run = results.get_run(run_id_of(config))
    capability = cpu_capability()
    assert run.status == "done" and run.env["cpp_fast_path"] is False
    assert processor_class(run.env, run.config) == f"mixed ({capability} / {capability} loop)"
    # the loop first, then the C++ path: the same mix, one class (QA: two names, two strata)
    assert processor_class({**run.env, "classes": run.env["classes"][::-1]}, run.config) == \
        processor_class(run.env, run.config)
    assert "resumed in another class: mixed (" in machine_text(run.env, run.config)
    assert "no single machine re-runs its numbers" in path_note(run.env, {**run.env, "classes": None}, run.config)


def test_a_run_resumed_in_the_class_it_started_in_keeps_that_class(tmp_path):
    from atnbench.config import build_config
    from atnbench.evidence.machine import cpu_capability, processor_class

    config = build_config({"task": "adding", "T": 10, "norm": "atn", "k": 3, "hidden": 8, "batch_size": 4,
                           "steps": 12, "eval_every": 2, "val_samples": 8})
    with ResultsStore(tmp_path / "r.db") as results:
        with pytest.raises(KeyboardInterrupt):
            train(config, results, CPU, Interrupt(at=9), checkpoint_every=2)
        train(config, results, CPU, resume=True)
        run = results.get_run(run_id_of(config))
    assert "classes" not in run.env and processor_class(run.env, run.config) == cpu_capability()


def test_the_resume_note_of_a_run_going_on_in_another_class_promises_no_uninterrupted_numbers(tmp_path, monkeypatch):
    """`atnbench run` again after an interrupt says the resumed run reaches the numbers of an
    uninterrupted one; started on the C++ path and going on on the loop, it does not (QA)."""
    import atnbench.run.command as command
    from atnbench.nn import fastpath
    from helpers import invoke

    flags = ["--T", "10", "--norm", "atn", "--k", "3", "--hidden", "8", "--batch-size", "4", "--iters", "12",
             "--eval-every", "2", "--val-samples", "8"]
    config = resolve_run("adding", {"T": 10, "norm": "atn", "k": 3, "hidden": 8, "batch_size": 4, "steps": 12,
                                    "eval_every": 2, "val_samples": 8})  # what `run` resolves those flags to
    store = tmp_path / "r.db"
    assert fastpath.build_cpp()
    with ResultsStore(store) as results:
        with pytest.raises(KeyboardInterrupt):
            train(config, results, CPU, Interrupt(at=5), checkpoint_every=2)
    notes = []
    monkeypatch.setattr(command.log, "warning", notes.append)
    monkeypatch.setattr(fastpath, "_cpp_state", {"ok": False, "disabled": True, "error": "ATNBENCH_NO_BUILD is set"})
    result = invoke("run", "adding", *flags, "--store", store)
    assert result.exit_code == 0, result.output
    (note,) = [text for text in notes if "resuming it from its checkpoint" in text]
    assert "reaches the numbers of an uninterrupted one" not in note
    assert "so its numbers will be neither class's" in note and " loop" in note, note

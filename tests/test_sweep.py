"""`atnbench sweep`: expansion, presets, skipping, interrupt + resume, workers, Ray, bad files.

Every sweep here is tiny (T=8, hidden 8, batch 4, a few steps), so the file runs in well under
a minute on 2 cores; the interrupt tests run the CLI in a subprocess and signal it only once the
store shows a run in progress with a checkpoint, so they do not depend on timing.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import textwrap
import types
from pathlib import Path

import pytest

from atnbench.config import ConfigError
from atnbench.run.runspec import resolve_run
from atnbench.store import ResultsStore
from atnbench.sweep import expand, load_sweep
from helpers import CliProcess, invoke, poll_store, still_running, store_snapshot, tiny_sweep
from atnbench.evidence.identity import run_id_of

REPO = Path(__file__).resolve().parents[1]

TINY = tiny_sweep("tiny", ["none", "ln", "atn"], [3, 5], steps=6)
# 2 seeds x (lstm, ln, atn k=3, atn k=5): k does not split the lstm and ln runs

# a variant axis: the copying preset's default (by its old name) and the paper text's optimiser
VARIANTS = """\
name: variants
description: both protocols, tiny
task: copying
base: {T: 4, hidden: 8, batch_size: 4, steps: 4, eval_every: 2, val_samples: 8}
grid:
  variant: [released-code, paper-text]
  norm: [ln]
seeds: [0]
"""

# a short run, a long one to interrupt, another short one
KILL = """\
name: kill
description: interrupt me
task: adding
base: {T: 8, hidden: 8, batch_size: 4, eval_every: 10, val_samples: 8}
runs:
  - {norm: none, steps: 20}
  - {norm: ln, steps: 800}  # 770 steps (~1 s) left when the test signals (at step 30)
  - {norm: atn, k: 3, steps: 20}
seeds: [0]
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def away(tmp_path, monkeypatch):
    """Run from an empty folder, so only the package's own presets are found."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- expansion -------------------------------------------------------------------------------------

def test_expansion_is_deterministic_and_does_not_split_runs_on_k(tmp_path):
    path = write(tmp_path, "tiny.yaml", TINY)
    first = expand(load_sweep(path))
    again = expand(load_sweep(str(path)))
    assert [r.run_id for r in first] == [r.run_id for r in again]
    assert [r.config for r in first] == [r.config for r in again]
    assert [(r.config.norm, r.config.k, r.config.seed) for r in first] == [
        ("none", 10, 0), ("ln", 10, 0), ("atn", 3, 0), ("atn", 5, 0),
        ("none", 10, 1), ("ln", 10, 1), ("atn", 3, 1), ("atn", 5, 1),
    ]  # seeds outermost; k of lstm/ln is what `atnbench run` would use (the preset's, here the default)
    assert first[1].label == "adding T=8 ln seed=0" and first[2].label == "adding T=8 atn k=3 seed=0"
    # the same run id as `atnbench run` with the same settings
    same = resolve_run("adding", {"T": 8, "hidden": 8, "batch_size": 4, "steps": 6, "eval_every": 2,
                                  "val_samples": 8, "norm": "ln"})
    assert first[1].run_id == run_id_of(same)
    # --seeds, --budget and run flags pass through
    other = expand(load_sweep(path), budget=0.5, seeds=(7,), overrides={"lr": 0.01})
    assert [r.config.seed for r in other] == [7] * 4
    assert all(r.config.budget == 0.5 and r.config.steps == 3 and r.config.lr == 0.01 for r in other)


def test_k_T_and_bias_inside_canonicalisation(tmp_path):
    path = write(tmp_path, "s.yaml", """\
        description: k = T and the default bias placement
        task: adding
        base: {T: 12}
        grid:
          norm: [ln, atn]
          bias_inside: [true, false]
        runs:
          - {k: T}
        seeds: [0]
        """)
    runs = expand(load_sweep(path))
    assert [(r.config.norm, r.config.k, r.config.bias_inside) for r in runs] == [
        ("ln", 10, None), ("ln", 10, False), ("atn", 12, None), ("atn", 12, False)]  # ln: the default k
    assert runs[0].run_id == run_id_of(resolve_run("adding", {"T": 12, "norm": "ln"}))


# --- shipped presets --------------------------------------------------------------------------------

SIZES = {"k-ablation": 15, "norm-ablation": 21, "table1-copying": 18, "table2-adding": 18, "table3-denoise": 18,
         "bias-placement": 12, "k-scan": 24, "copying-protocols": 18}
# every shipped sweep as `sweep --list` shows it (the real-data ones: table4-ptb-char, two seeds; fig5-bias-outside)
LISTED = {**SIZES, "table4-ptb-char": 6, "fig5-bias-outside": 6}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_shipped_presets_load_and_expand(away, name):
    spec = load_sweep(name)
    assert spec.source.parent == REPO / "sweeps" and spec.description and spec.citation
    runs = expand(spec)
    assert len(runs) == SIZES[name] and len({r.run_id for r in runs}) == len(runs)
    assert sorted({r.config.seed for r in runs}) == [0, 1, 2]
    assert all(r.config.budget == 1.0 for r in runs)


def test_preset_contents_follow_the_paper(away):
    def cells(name):
        return {(r.config.T, r.config.norm, r.config.k if r.config.norm == "atn" else None)
                for r in expand(load_sweep(name))}

    lstm_ln = {(T, norm, None) for T in (100, 200) for norm in ("none", "ln")}
    assert cells("table1-copying") == lstm_ln | {(100, "atn", 45), (200, "atn", 45)}
    assert cells("table2-adding") == lstm_ln | {(100, "atn", 25), (200, "atn", 5)}
    assert cells("table3-denoise") == lstm_ln | {(100, "atn", 20), (200, "atn", 60)}
    assert cells("k-ablation") == {(100, "none", None), (100, "ln", None)} | {(100, "atn", k) for k in (25, 45, 65)}
    assert {r.config.k for r in expand(load_sweep("k-scan"))} == {1, 2, 5, 10, 25, 45, 65, 100}
    assert {r.config.norm for r in expand(load_sweep("norm-ablation"))} == {
        "none", "ln", "atn", "atn-bn", "bn", "bn-input", "bln"}
    # the same run shared between sweeps (one row in the store, listed by both)
    shared = {r.run_id for r in expand(load_sweep("table2-adding"))}
    bias = expand(load_sweep("bias-placement"))
    assert sum(r.run_id in shared for r in bias) == 6  # bias inside = LN's and ATN's default
    assert {r.run_id for r in expand(load_sweep("k-ablation")) if r.config.norm != "atn"} <= \
        {r.run_id for r in expand(load_sweep("table1-copying"))}


def test_copying_protocols_runs_both_optimisers_and_shares_the_default_runs(away):
    runs = expand(load_sweep("copying-protocols"))
    by_variant = {}
    for r in runs:
        by_variant.setdefault(r.config.variant, set()).add((r.config.norm, r.config.lr, r.config.momentum))
    assert by_variant == {
        None: {(norm, 2e-4, 0.9) for norm in ("none", "ln", "atn")},  # the released code's (the default)
        "paper-text": {(norm, 1e-4, 0.0) for norm in ("none", "ln", "atn")},
    }
    assert "variant=default" in runs[0].label and any("variant=paper-text" in r.label for r in runs)
    table1 = {r.run_id for r in expand(load_sweep("table1-copying"))}
    assert {r.run_id for r in runs if r.config.variant is None} <= table1


def test_an_unknown_variant_in_a_grid_names_the_file_and_the_known_ones(tmp_path):
    path = write(tmp_path, "v.yaml", VARIANTS.replace("paper-text]", "nope]"))
    with pytest.raises(ConfigError, match=r"v\.yaml: run variant=nope.*unknown variant 'nope'; known variants: paper-text"):
        expand(load_sweep(path))


def test_list_and_dry_run_write_nothing(away):
    listed = invoke("sweep", "--list", "--json")
    assert listed.exit_code == 0, listed.output
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert {name: row["runs"] for name, row in rows.items()} == LISTED
    assert all(row["cpu_hours"] > 0 for row in rows.values())
    table = invoke("sweep", "--list")
    assert table.exit_code == 0 and "k-ablation" in table.stdout and "CPU-h" in table.stdout
    store = away / "r.db"
    dry = invoke("sweep", "k-ablation", "--dry-run", "--budget", "0.01", "--store", store)
    assert dry.exit_code == 0, dry.output
    assert "15 runs" in dry.stdout and dry.stdout.count("left") >= 15
    assert not store.exists()


# --- running -----------------------------------------------------------------------------------------

def run_json(*args) -> dict:
    result = invoke("sweep", *args, "--json", "--device", "cpu")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_second_invocation_runs_nothing(tmp_path):
    path, store = write(tmp_path, "tiny.yaml", TINY), tmp_path / "r.db"
    first = run_json(path, "--store", store, "--workers", "1")
    assert first["counts"]["done"] == 8 and first["counts"]["skipped"] == 0
    assert all(r["status"] == "done" and r["steps"] == 6 for r in first["runs"])
    before = store_snapshot(store)
    with ResultsStore(store, create=False) as results:
        stamps = {run.run_id: run.updated_at for run in results.runs()}
        assert {run.run_id for run in results.runs(sweep="tiny")} == set(stamps)
    second = run_json(path, "--store", store, "--workers", "2")
    assert second["counts"]["skipped"] == 8 and second["counts"]["done"] == 0
    assert second["runs"] == first["runs"]
    with ResultsStore(store, create=False) as results:
        assert {run.run_id: run.updated_at for run in results.runs()} == stamps  # not touched
    assert store_snapshot(store) == before
    dry = invoke("sweep", path, "--dry-run", "--store", store)
    assert "8 in the store, 0 left" in dry.stdout


def test_a_variant_axis_runs_and_reports_one_table_per_variant(tmp_path):
    path, store = write(tmp_path, "variants.yaml", VARIANTS), tmp_path / "r.db"
    ran = run_json(path, "--store", store, "--workers", "1")
    assert ran["counts"]["done"] == 2
    report = invoke("report", "--sweep", "variants", "--format", "json", "--store", store)
    assert report.exit_code == 0, report.output
    tables = json.loads(report.stdout)["tables"]
    assert sorted((t["variant"] or "", [r["label"] for r in t["rows"] if r["kind"] == "model"]) for t in tables) == [
        ("", ["ln"]), ("paper-text", ["ln"])]  # one row per variant, never pooled
    assert any("variant paper-text" in t["title"] for t in tables)


def serial_reference_store(tmp_path_factory, name: str, text: str) -> Path:
    """A sweep run serially, uninterrupted: what every other way of running it must give."""
    folder = tmp_path_factory.mktemp(f"{name}-reference")
    path, store = write(folder, f"{name}.yaml", text), folder / "r.db"
    run_json(path, "--store", store, "--workers", "1")
    return store


def serial_reference(tmp_path_factory, name: str, text: str) -> dict:
    return store_snapshot(serial_reference_store(tmp_path_factory, name, text))


@pytest.fixture(scope="module")
def tiny_reference(tmp_path_factory):
    return serial_reference(tmp_path_factory, "tiny", TINY)


@pytest.mark.slow
def test_workers_and_serial_give_identical_results(tmp_path, tiny_reference):
    path, store = write(tmp_path, "tiny.yaml", TINY), tmp_path / "r.db"
    result = run_json(path, "--store", store, "--workers", "2")
    assert result["counts"]["done"] == 8
    assert store_snapshot(store) == tiny_reference


def test_failures_and_divergence_are_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    import atnbench.run.train

    path = write(tmp_path, "s.yaml", """\
        description: one run fails, one diverges
        task: adding
        base: {T: 8, hidden: 8, batch_size: 4, steps: 6, eval_every: 2, val_samples: 8}
        runs:
          - {norm: ln}
          - {norm: none, optimizer: sgd, lr: 1.0e+30}
          - {norm: atn, k: 3}
        seeds: [0]
        """)
    store = tmp_path / "r.db"
    real_train = atnbench.run.train.train

    def flaky(config, *args, **kwargs):
        if config.norm == "ln":
            raise RuntimeError("simulated out of memory: pip install 'atnbench[data]'")
        return real_train(config, *args, **kwargs)

    monkeypatch.setattr(atnbench.run.train, "train", flaky)
    monkeypatch.delenv("COLUMNS", raising=False)  # piped, no width asked for: every row on one line
    result = invoke("sweep", path, "--store", store, "--workers", "1", "--device", "cpu")
    assert result.exit_code == 1, result.output
    counted = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()
               if len(line.split()) == 2 and line.split()[0] in ("done", "diverged", "failed")}
    assert counted == {"done": "1", "diverged": "1", "failed": "1"}, result.stdout  # the summary counts them
    assert "simulated out of memory: pip install 'atnbench[data]'" in result.stdout  # not read as markup
    assert any(line.split()[:2] == ["store", str(store)] for line in result.stdout.splitlines())  # its store
    assert any(line.startswith("failed ") and "adding T=8 ln " in line for line in result.stdout.splitlines())
    with ResultsStore(store, create=False) as results:
        assert sorted((run.norm, run.status) for run in results.runs()) == [
            ("atn", "done"), ("ln", "failed"), ("none", "diverged")]
    monkeypatch.setattr(atnbench.run.train, "train", real_train)
    rerun = invoke("sweep", path, "--store", store, "--workers", "1", "--json", "--device", "cpu")
    assert rerun.exit_code == 1, rerun.output  # only the failed run runs again; the diverged one is still its result
    assert json.loads(rerun.stdout)["counts"] == {"runs": 3, "skipped": 2, "skipped_diverged": 1, "done": 1,
                                                  "diverged": 0, "failed": 0, "interrupted": 0, "not-started": 0}


def test_the_json_runs_say_their_status_in_the_counts_words(tmp_path):
    """`sweep -f json` counted a run a signal stopped as "interrupted" and one never begun as
    "not-started", and listed them as "failed" and "not-run" (QA)."""
    from atnbench.sweep.command import _records

    path, store = write(tmp_path, "three.yaml", tiny_sweep("three", ["ln", "bn", "atn"], [3], steps=2, seeds=(0,))), \
        tmp_path / "r.db"
    runs = expand(load_sweep(path))
    with ResultsStore(store) as results:
        for run, (status, error) in zip(runs, [("failed", "interrupted"), ("failed", "RuntimeError: boom")]):
            results.start_run(run.run_id, run.config.to_dict(), {"device": "cpu", "threads": 1})
            results.finish_run(run.run_id, status, {}, error=error)
    assert [record["status"] for record in _records(runs, store)] == ["interrupted", "failed", "not-started"]


# --- interrupt and resume -------------------------------------------------------------------------------

def one_done_and_ln_checkpointed(conn) -> bool:
    statuses = dict(conn.execute("SELECT norm, status FROM runs").fetchall())
    evals = conn.execute("SELECT COUNT(*) FROM evals JOIN runs USING (run_id) WHERE runs.norm = 'ln'").fetchone()[0]
    return statuses.get("none") == "done" and statuses.get("ln") == "running" and evals >= 3  # checkpoint at 2


@pytest.fixture(scope="module")
def kill_reference(tmp_path_factory):
    return serial_reference(tmp_path_factory, "kill", KILL)


@pytest.mark.slow
@pytest.mark.parametrize("signum, workers", [(signal.SIGINT, 1), (signal.SIGTERM, 2)], ids=["SIGINT-serial", "SIGTERM-workers"])
def test_interrupted_sweep_resumes_to_the_uninterrupted_result(tmp_path, kill_reference, signum, workers):
    path, store = write(tmp_path, "kill.yaml", KILL), tmp_path / "r.db"
    with CliProcess(["sweep", path, "--store", store, "--workers", workers, "--device", "cpu"], tmp_path) as sweep:
        poll_store(store, one_done_and_ln_checkpointed, sweep.popen)
        sweep.popen.send_signal(signum)
        code = sweep.popen.wait(timeout=60)
        log_text = sweep.log()
    assert code == 128 + signum, log_text
    assert "run the same command again to resume" in log_text
    with ResultsStore(store, create=False) as results:
        ln = next(run for run in results.runs() if run.norm == "ln")
        assert ln.status == "failed" and ln.error == "interrupted"
        assert (results.checkpoint_dir(ln.run_id) / "checkpoint.pt").exists()
        assert results.status(next(run.run_id for run in results.runs() if run.norm == "none")) == "done"
        steps_before = len(results.curve(ln.run_id))

    rerun = invoke("sweep", path, "--store", store, "--workers", str(workers), "--device", "cpu")
    assert rerun.exit_code == 0, rerun.output
    assert "resuming at step" in rerun.output and 3 <= steps_before < 800 // 10
    assert store_snapshot(store) == kill_reference


# --- worker processes end with the sweep ------------------------------------------------------------------

# two runs far longer than the tests wait for, and a third that waits for a free worker
TWO_LONG = """\
name: two-long
description: kill me
task: adding
base: {T: 8, hidden: 8, batch_size: 4, eval_every: 25, val_samples: 8}
runs:
  - {norm: ln, steps: 100000}
  - {norm: atn, k: 3, steps: 100000}
  - {norm: none, steps: 20}
seeds: [0]
"""

# a short run whose worker then waits, idle, beside a long run
LONG_AND_SHORT = """\
name: long-and-short
description: one worker idles
task: adding
base: {T: 8, hidden: 8, batch_size: 4, eval_every: 25, val_samples: 8}
runs:
  - {norm: ln, steps: 100000}
  - {norm: none, steps: 20}
seeds: [0]
"""


def checkpointed(conn, norm: str) -> bool:
    """The run of ``norm`` is training and has a checkpoint (taken at its 2nd evaluation)."""
    row = conn.execute("SELECT status, (SELECT COUNT(*) FROM evals e WHERE e.run_id = r.run_id) FROM runs r "
                       "WHERE norm = ?", (norm,)).fetchone()
    return row is not None and row[0] == "running" and row[1] >= 3


def interrupted_with_checkpoint(store: Path, norms: tuple[str, ...]) -> None:
    with ResultsStore(store, create=False) as results:
        for run in results.runs():
            if run.norm in norms:  # the same sweep command resumes them
                assert (run.status, run.error) == ("failed", "interrupted"), run.norm
                assert (results.checkpoint_dir(run.run_id) / "checkpoint.pt").exists()


@pytest.mark.slow
def test_a_sweep_killed_with_sigkill_leaves_no_process_behind(tmp_path):
    path, store = write(tmp_path, "two-long.yaml", TWO_LONG), tmp_path / "r.db"
    with CliProcess(["sweep", path, "--store", store, "--workers", 2, "--device", "cpu"], tmp_path) as sweep:
        poll_store(store, lambda conn: checkpointed(conn, "ln") and checkpointed(conn, "atn"), sweep.popen)
        children = sweep.children()  # two workers, the fork server and multiprocessing's resource tracker
        sweep.popen.kill()
        sweep.popen.wait(timeout=10)
        left = still_running(children, within=10)
        assert len(children) >= 4 and left == [], (left, sweep.log())
    interrupted_with_checkpoint(store, ("ln", "atn"))


@pytest.mark.slow
def test_an_idle_worker_ends_on_sigterm(tmp_path):
    import os

    from atnbench.run.checkpoint import RunLock, checkpoint_root

    def short_done_long_checkpointed(conn):
        done = conn.execute("SELECT status FROM runs WHERE norm = 'none'").fetchone()
        return done == ("done",) and checkpointed(conn, "ln")

    path, store = write(tmp_path, "long-and-short.yaml", LONG_AND_SHORT), tmp_path / "r.db"
    with CliProcess(["sweep", path, "--store", store, "--workers", 2, "--device", "cpu"], tmp_path) as sweep:
        poll_store(store, short_done_long_checkpointed, sweep.popen)
        children = sweep.children()
        trainer = RunLock(next(checkpoint_root(store).glob("*.lock"))).holder()  # the pid training ln
        workers = [child for child in children if child.ppid() != sweep.popen.pid]  # the fork server's children
        idle = [child for child in workers if child.pid != trainer]
        assert len(idle) == 1 and trainer in [child.pid for child in children]
        os.kill(idle[0].pid, signal.SIGTERM)
        assert still_running(idle, within=5) == [], sweep.log()
        code = sweep.popen.wait(timeout=30)  # the pool lost a worker: the sweep stops its other run and ends
        assert still_running(children, within=10) == [], sweep.log()
        log_text = sweep.log()
    assert code == 1 and "interrupted: worker process died" in log_text, log_text
    interrupted_with_checkpoint(store, ("ln",))


# --- Ray -------------------------------------------------------------------------------------------------

@pytest.mark.ray
def test_a_ray_task_asks_whether_to_stop_from_a_thread_of_its_own(monkeypatch):
    """A task blocked in ray.get lends its CPU back and Ray starts another task beside it; so the
    training loop only reads a flag, which a thread keeps current (``_StopPoll``)."""
    import threading
    import time

    ray = pytest.importorskip("ray")
    from atnbench.sweep.ray_backend import _StopPoll

    asked_from, answers = [], {"stop": False}

    class Monitor:  # the monitor actor's handle: .stopping.remote() -> a reference ray.get resolves
        class stopping:
            @staticmethod
            def remote():
                return "ref"

    def get(ref):
        asked_from.append(threading.current_thread())
        if answers["stop"] == "gone":
            raise ray.exceptions.RayActorError()
        return answers["stop"]

    monkeypatch.setattr(ray, "get", get)
    with _StopPoll(Monitor(), interval=0.01) as should_stop:
        assert asked_from and not should_stop()  # the first answer came before the block
        asked = len(asked_from)
        assert not any(should_stop() for _ in range(1000))
        answers["stop"] = True
        deadline = time.monotonic() + 10
        while not should_stop():
            assert time.monotonic() < deadline, "the stop request was never seen"
            time.sleep(0.01)
        poller = asked_from[-1]
    assert threading.current_thread() not in asked_from and len(asked_from) > asked
    assert not poller.is_alive()  # the thread ends with the block (a worker runs many tasks)

    answers["stop"] = "gone"  # the monitor (with its driver) is gone: stop
    with _StopPoll(Monitor(), interval=0.01) as should_stop:
        assert should_stop()


class InProcessRay:
    """The part of Ray's API ``run_ray`` uses, in this process, with a monitor that is a plain
    object: a task sent says it began training where its run is in ``starting``; none ends. Its
    first wait is cut by a second Ctrl-C (``stop``)."""

    def __init__(self, starting: set[str], stop):
        from atnbench.sweep.ray_backend import _Monitor

        self.monitor, self.starting, self.stop, self.cancelled = _Monitor(), starting, stop, []

    def remote(self, target=None, **options):
        if target is None:  # ray.remote(num_cpus=0)(_Monitor).remote(): the actor's handle
            return lambda cls: types.SimpleNamespace(remote=lambda: self._handle())
        return types.SimpleNamespace(options=lambda **o: types.SimpleNamespace(remote=self._send))

    def _handle(self):
        return types.SimpleNamespace(**{name: types.SimpleNamespace(remote=getattr(self.monitor, name))
                                        for name in ("drain", "take_checkpoints", "request_stop")})

    def _send(self, job, *args):
        if job.run_id in self.starting:  # began, and shipped its first checkpoint with its record so far
            self.monitor.emit(job.run_id, "start", 10, 0)
            self.monitor.checkpointed(job.run_id, *self.starting[job.run_id])
        return object()

    def wait(self, refs, num_returns, timeout):
        self.stop.signum, self.stop.hard = signal.SIGINT, True
        return [], refs

    def get(self, value):
        return value

    def cancel(self, ref, force):
        self.cancelled.append(ref)

    def kill(self, handle):
        pass

    def cluster_resources(self):
        return {"CPU": 2}

    exceptions = types.SimpleNamespace(RayError=RuntimeError)


def test_ray_runs_cut_off_by_a_second_ctrl_c_are_interrupted_only_where_they_began(tmp_path, monkeypatch):
    """A second Ctrl-C cancels the tasks in flight: a run whose task said it began training is
    "interrupted", recorded so (failed, resumable from its newest checkpoint) as a local sweep
    records it, not left 'running'; one whose task had not begun is "not started", with no row;
    and the driver lets go of every run's lock."""
    from atnbench.run.checkpoint import checkpoint_file, checkpoint_root
    from atnbench.sweep import expand, load_sweep, ray_backend
    from atnbench.sweep.runner import NOT_STARTED, Job, StopRequest

    runs = expand(load_sweep(write(tmp_path, "tiny.yaml", TINY)))[:2]
    jobs = [Job(run.run_id, run.config.to_dict(), run.label, "tiny") for run in runs]
    with ResultsStore(tmp_path / "scratch.db") as scratch:  # the first run's record at its first checkpoint
        scratch.start_run(jobs[0].run_id, jobs[0].config, {}, sweep="tiny")
        scratch.log_eval(jobs[0].run_id, 3, 1.0, 0.9, 0.8)
        so_far = (scratch.export_record(jobs[0].run_id), b"its checkpoint", {})
    stop, store = StopRequest(), tmp_path / "r.db"
    fake = InProcessRay({jobs[0].run_id: so_far}, stop)
    monkeypatch.setattr(ray_backend, "import_ray", lambda: fake)
    view = types.SimpleNamespace(event=lambda *event: None, finished=lambda *args: None)
    outcomes = ray_backend.run_ray(jobs, store, "cpu", 1, view, stop)
    assert {run_id: o["status"] for run_id, o in outcomes.items()} == \
        {jobs[0].run_id: "interrupted", jobs[1].run_id: NOT_STARTED}
    assert len(fake.cancelled) == 2 and not list(checkpoint_root(store).glob("*.lock"))
    with ResultsStore(store, create=False) as results:
        assert [(run.run_id, run.status, run.error) for run in results.runs()] == \
            [(jobs[0].run_id, "failed", "interrupted")]
        assert [point.step for point in results.curve(jobs[0].run_id)] == [3]
    assert checkpoint_file(store, jobs[0].run_id).read_bytes() == b"its checkpoint"


def test_a_store_removed_while_the_sweep_runs_is_one_line_not_done(tmp_path, monkeypatch):
    """`rm -rf` of the store's folder mid-sweep: the runs then training recorded into the removed
    file and later ones into a new store there, while the sweep said "done 4" and exited 0. It
    says the store went, how many runs the store there holds, and exits 2."""
    import shutil

    from atnbench.sweep import local

    real = local.run_serial
    folder = tmp_path / "results"
    path, store = write(tmp_path, "tiny.yaml", TINY), folder / "r.db"

    def store_removed_midway(jobs, store_path, *args):
        first = real(jobs[:2], store_path, *args)
        shutil.rmtree(folder)  # what `rm -rf` of the folder does mid-sweep
        return {**first, **real(jobs[2:], store_path, *args)}

    monkeypatch.setattr(local, "run_serial", store_removed_midway)
    result = invoke("sweep", path, "--store", store, "--workers", "1", "--device", "cpu")
    said = " ".join(result.stderr.split())
    assert result.exit_code == 2 and "was removed or replaced while the sweep ran" in said, result.output
    assert f"{len(planned_runs(path)) - 2} of the sweep's {len(planned_runs(path))} runs are finished" in said


def planned_runs(path):
    from atnbench.sweep import expand, load_sweep

    return expand(load_sweep(path))


def test_a_run_another_process_finished_while_the_sweep_waited_joins_the_sweep(tmp_path):
    """The sweep's worker finds the run finished (an `atnbench run` of it took the lock first):
    it keeps that result, untrained again, and the run is the sweep's as every other."""
    import torch

    from atnbench.run.train import train
    from atnbench.sweep import expand, load_sweep
    from atnbench.sweep.runner import EventReporter, Job, execute

    run = expand(load_sweep(write(tmp_path, "tiny.yaml", TINY)))[0]
    with ResultsStore(tmp_path / "r.db") as store:
        train(run.config, store, torch.device("cpu"))  # no sweep: `atnbench run`
        before = store.get_run(run.run_id).summary["wall_s"]
        outcome = execute(Job(run.run_id, run.config.to_dict(), run.label, "tiny"), store, "cpu",
                          EventReporter(run.run_id, lambda *event: None, lambda: False))
        assert outcome["status"] == "done" and store.get_run(run.run_id).summary["wall_s"] == before
        assert [r.run_id for r in store.runs(sweep="tiny")] == [run.run_id]


def test_a_ray_workers_data_root_copy_is_checked_before_its_run(tmp_path, monkeypatch):
    """A Ray worker's machine has its own data root, which the driver's check never saw: a copy
    there that is not the published one fails that run in one line (the sweep goes on), instead
    of training under the published copy's id."""
    from atnbench.sweep import ray_backend
    from atnbench.sweep.runner import EventReporter, Job, execute

    ptb = tmp_path / "data" / "ptb"
    ptb.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (ptb / f"ptb.char.{split}.txt").write_text("a b c _ d e\n" * 40)
    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "data"))
    config = resolve_run("ptb-char", {"T": 8, "hidden": 4, "steps": 2, "eval_every": 2, "batch_size": 2})
    job = Job(run_id_of(config), config.to_dict(), "ln", "tiny")
    ignore = types.SimpleNamespace(remote=lambda *args: None)
    shipped = ray_backend._train_in_scratch(job, None, None, {}, "cpu",
                                            types.SimpleNamespace(emit=ignore, checkpointed=ignore), lambda: False)
    assert shipped["outcome"]["status"] == "failed" and "not the published ptb-char copy" in shipped["outcome"]["error"]
    assert shipped["record"]["status"] == "failed" and not shipped["record"]["curve"]  # what the driver keeps
    with ResultsStore(tmp_path / "r.db") as store:
        # every backend: a copy may change while a sweep runs (QA: checked once before the first run)
        outcome = execute(job, store, "cpu", EventReporter(job.run_id, lambda *event: None, lambda: False))
        assert outcome["status"] == "failed" and store.status(job.run_id) == "failed"
        assert outcome["error"].startswith(f"ConfigError: ptb-char data (the data root {ptb}): not the published "
                                           f"ptb-char copy, which a run's id stands for: ptb.char.train.txt: 40 lines")
        assert not store.curve(job.run_id)  # never trained


def test_a_dry_run_says_the_data_root_copy_the_sweep_would_refuse(tmp_path, monkeypatch):
    """QA: the dry run listed the runs as left to run, and the sweep then refused the copy."""
    ptb = tmp_path / "data" / "ptb"
    ptb.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (ptb / f"ptb.char.{split}.txt").write_text("a b c _ d e\n" * 40)
    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "data"))
    grid = "name: chars\ndescription: one run\ntask: ptb-char\nbase: {T: 8, hidden: 4, steps: 2}\n" \
           "runs: [{norm: ln}]\nseeds: [0]\n"
    result = invoke("sweep", write(tmp_path, "chars.yaml", grid), "--store", tmp_path / "r.db", "--dry-run")
    assert result.exit_code == 0, result.output
    assert (f"note: the sweep would refuse to start: ptb-char data (the data root {ptb}): not the published "
            f"ptb-char copy") in " ".join(result.stderr.split())
    assert not (tmp_path / "r.db").exists()


def test_a_ray_cluster_that_refuses_the_driver_leaves_no_new_store_behind(tmp_path, monkeypatch):
    """A `ray://` address answers the TCP check, then Ray's client refuses: the store this sweep
    made (and never wrote) goes; a store that was there before stays."""
    from atnbench.sweep import ray_backend

    def refuse(address):
        raise ConfigError(f"cannot connect to a Ray cluster at {address}: refused")

    monkeypatch.setattr(ray_backend, "import_ray", lambda: None)
    monkeypatch.setattr(ray_backend, "check_address", lambda address: None)
    monkeypatch.setattr(ray_backend, "connect", refuse)
    path, store = write(tmp_path, "tiny.yaml", TINY), tmp_path / "new.db"
    result = invoke("sweep", path, "--backend", "ray", "--address", "ray://127.0.0.1:10001", "--store", store)
    assert result.exit_code == 2 and "cannot connect to a Ray cluster at ray://127.0.0.1:10001" in result.output
    assert not store.exists() and list(tmp_path.iterdir()) == [path]
    with ResultsStore(store):  # made before: kept
        pass
    result = invoke("sweep", path, "--backend", "ray", "--address", "ray://127.0.0.1:10001", "--store", store)
    assert result.exit_code == 2 and store.exists()


@pytest.mark.ray
def test_a_ray_address_where_no_cluster_answers_fails_in_one_line(tmp_path, monkeypatch):
    import socket

    ray = pytest.importorskip("ray")

    def ray_init(*args, **kwargs):
        raise AssertionError("ray.init was reached: where nothing answers it retries for minutes")

    monkeypatch.setattr(ray, "init", ray_init)
    path, store = write(tmp_path, "tiny.yaml", TINY), tmp_path / "r.db"

    def one_line(address: str) -> str:
        result = invoke("sweep", path, "--backend", "ray", "--address", address, "--store", store)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert f"cannot connect to a Ray cluster at {address}" in lines[0] and not store.exists()
        return lines[0]

    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    one_line(f"127.0.0.1:{port}")

    # a host that takes no connection: the wait is bounded by a setting (30 s unless told)
    monkeypatch.setenv("ATNBENCH_RAY_CONNECT_TIMEOUT", "0.5")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        with socket.create_connection(server.getsockname()):  # fills the backlog: the next SYN goes unanswered
            assert "no answer within 0.5 s" in one_line("127.0.0.1:%d" % server.getsockname()[1])


def test_ray_missing_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    path, store = write(tmp_path, "tiny.yaml", TINY), tmp_path / "r.db"
    result = invoke("sweep", path, "--backend", "ray", "--store", store)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "pip install 'atnbench[ray]'" in lines[0]
    assert not store.exists()


# --- bad sweep files --------------------------------------------------------------------------------------

GOOD_HEAD = "description: bad\ntask: adding\nbase: {T: 8, steps: 2}\n"


@pytest.mark.parametrize("text, key, expected", [
    (GOOD_HEAD + "grid: {norm: [ln]}\nseed: [0]\n", "seed", "unknown top-level key"),
    (GOOD_HEAD + "grid: {hiden: [8, 16]}\n", "grid.hiden", "unknown setting"),
    # a --config file takes a flag's name; a sweep file said "unknown setting" and listed steps (QA)
    ("description: bad\ntask: adding\nbase: {T: 8, iters: 2}\ngrid: {norm: [ln]}\n", "base.iters",
     "a sweep file names this setting by its key, steps (--iters on the command line)"),
    (GOOD_HEAD + "grid: {batch-size: [2, 4]}\n", "grid.batch-size", "by its key, batch_size (--batch-size on the command line)"),
    (GOOD_HEAD + "grid: {norm: [ln, layernorm]}\n", "grid.norm", "unknown norm 'layernorm'"),
    (GOOD_HEAD + "runs:\n  - {norm: atn, k: [3, magic]}\n", "runs[0].k", "expected int"),
    (GOOD_HEAD + "grid: {}\n", "grid", "empty"),
    (GOOD_HEAD + "grid: {norm: []}\n", "grid.norm", "empty list"),
    (GOOD_HEAD, "grid", "missing"),
    (GOOD_HEAD + "grid: {norm: ln}\n", "grid.norm", "expected a non-empty list"),
    (GOOD_HEAD + "grid: {seed: [0, 1]}\n", "grid.seed", "top-level 'seeds'"),
    # a sweep file's threads/device were replaced by the command's without a word (cuda asked, the CPU used)
    ("description: bad\ntask: adding\nbase: {T: 8, device: cuda}\ngrid: {norm: [ln]}\n", "base.device",
     "the command's device: --device"),
    (GOOD_HEAD + "runs:\n  - {norm: ln, threads: 2}\n", "runs[0].threads", "the command's thread count"),
    (GOOD_HEAD + "grid: {norm: [ln], threads: [1, 2]}\n", "grid.threads", "--threads (or a --config file's"),
    (GOOD_HEAD + "grid: {norm: [ln]}\nruns: [{norm: atn}]\n", "runs[0].norm", "also set in grid"),
    (GOOD_HEAD + "grid: {norm: [ln]}\nseeds: []\n", "seeds", "non-empty list"),
    ("description: bad\ntask: addition\ngrid: {norm: [ln]}\n", "task", "unknown task 'addition'"),
    ("task: adding\ngrid: {norm: [ln]}\n", "description", "missing"),
    (GOOD_HEAD + "grid: {lr: [1e-3]}\n", "grid.lr", "write 1.0e-3"),
    (GOOD_HEAD + "grid: {norm: [atn], k: [25, 25]}\n", "grid.k", "25 appears twice in [25, 25]"),
    (GOOD_HEAD + "grid: {norm: [ln, atn, ln]}\n", "grid.norm", "'ln' appears twice"),
])
def test_bad_sweep_files_are_rejected_before_anything_runs(tmp_path, text, key, expected):
    path, store = tmp_path / "bad.yaml", tmp_path / "r.db"
    path.write_text(text)
    with pytest.raises(ConfigError) as error:
        load_sweep(path)
    message = str(error.value)
    assert str(path) in message and f"key '{key}'" in message and expected in message, message
    result = invoke("sweep", path, "--store", store)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"key '{key}'" in lines[0] and expected in lines[0]
    assert not store.exists()


@pytest.mark.parametrize("text, expected", [
    (GOOD_HEAD + "grid: {norm: [ln, atn]]}\n", "invalid YAML at line 4"),       # syntax error
    (GOOD_HEAD + "grid: {norm: [atn], k: [3, 0]}\n", "k must be >= 1, got 0"),  # caught when expanding
    ("description: bad\ntask: denoise\ngrid: {T: [100, 5]}\n", "too short"),
])
def test_bad_values_name_the_file_and_the_run(tmp_path, text, expected):
    path, store = tmp_path / "bad.yaml", tmp_path / "r.db"
    path.write_text(text)
    result = invoke("sweep", path, "--store", store, "--dry-run")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert str(path) in lines[0] and expected in lines[0]
    assert not store.exists()


def test_a_flag_on_a_varied_setting_picks_the_sweeps_runs(tmp_path):
    path, store = write(tmp_path, "tiny.yaml", TINY), tmp_path / "r.db"
    every = json.loads(invoke("sweep", path, "--store", store, "--dry-run", "--format", "json").stdout)["runs"]
    picked = json.loads(invoke("sweep", path, "--store", store, "--dry-run", "--format", "json",
                               "--norm", "ATN".lower(), "--k", "5").stdout)["runs"]
    assert [r["run_id"] for r in picked] == [r["run_id"] for r in every
                                             if r["config"]["norm"] == "atn" and r["config"]["k"] == 5]
    assert len(picked) == 2  # seeds 0 and 1, the same ids as in the whole sweep
    lstm = json.loads(invoke("sweep", path, "--store", store, "--dry-run", "--format", "json", "--norm", "lstm").stdout)["runs"]
    assert {r["config"]["norm"] for r in lstm} == {"none"} and len(lstm) == 2  # the alias names the plain LSTM
    # a flag a run ignores keeps it: --k 3 is ATN k=3 and the runs without a window
    k3 = json.loads(invoke("sweep", path, "--store", store, "--dry-run", "--format", "json", "--k", "3").stdout)["runs"]
    assert sorted((r["config"]["norm"], r["config"]["k"] if r["config"]["norm"] == "atn" else None) for r in k3) == \
        sorted([("none", None), ("ln", None), ("atn", 3)] * 2)
    # and with the norm named too: LN, which ignores a k the sweep holds (as `run --norm ln --k 3` runs it)
    ln3 = invoke("sweep", path, "--store", store, "--dry-run", "--format", "json", "--norm", "ln", "--k", "3")
    assert ln3.exit_code == 0, ln3.output
    assert {r["config"]["norm"] for r in json.loads(ln3.stdout)["runs"]} == {"ln"} and len(json.loads(ln3.stdout)["runs"]) == 2
    refused = invoke("sweep", path, "--store", store, "--dry-run", "--norm", "ln", "--k", "4")
    assert refused.exit_code == 2 and "has no run with --norm ln --k 4" in refused.output  # no k=4 anywhere
    variants = write(tmp_path, "variants.yaml", VARIANTS)
    every = json.loads(invoke("sweep", variants, "--store", store, "--dry-run", "--format", "json").stdout)["runs"]
    by_name = json.loads(invoke("sweep", variants, "--store", store, "--dry-run", "--format", "json",
                                "--variant", "released-code").stdout)["runs"]  # the default, by its alias
    assert by_name and [r["run_id"] for r in by_name] == [r["run_id"] for r in every if r["config"]["variant"] is None]
    steps = write(tmp_path, "steps.yaml", TINY.replace("  k: [3, 5]", "  steps: [4, 6]"))
    result = invoke("sweep", steps, "--store", store, "--dry-run", "--iters", "4")
    assert result.exit_code == 2 and "--iters would replace" in result.output
    assert not store.exists()


def test_bad_command_lines(tmp_path):
    path = write(tmp_path, "tiny.yaml", TINY)
    for args, expected in [
        (["sweep"], "give a sweep name"),
        (["sweep", "no-such-sweep"], "no sweeps preset named 'no-such-sweep'"),
        (["sweep", path, "--seeds", "a,b"], "--seeds"),
        (["sweep", path, "--seeds", "0-2,1"], "--seeds 0-2,1: seed 1 is given twice"),
        (["sweep", path, "--norm", "bn"], "has no run with --norm bn (it holds --norm none, --norm ln, --norm atn)"),
        (["sweep", path, "--k", "4"], "has no run with --k 4 (it holds --k 3, --k 5)"),
        (["sweep", path, "--address", "h:1"], "--address is for --backend ray"),
        (["sweep", path, "--backend", "slurm"], "unknown --backend"),
    ]:
        result = invoke(*args, "--store", tmp_path / "r.db")
        assert result.exit_code == 2 and expected in result.output, (args, result.output)
    assert not (tmp_path / "r.db").exists()


def test_a_dry_run_counts_runs_of_vouched_older_code_as_the_sweep_does(tmp_path):
    # the published k-ablation runs were made by older code that the canary vouched for: the
    # sweep skips them as done, and its dry run (and reproduce's) must say the same
    store = tmp_path / "published.db"
    imported = invoke("store", "import", str(REPO / "results" / "runs.jsonl"), "--store", str(store))
    assert imported.exit_code == 0, imported.output
    dry = invoke("sweep", "k-ablation", "--seeds", "0-11", "--dry-run", "--store", str(store))
    assert dry.exit_code == 0, dry.output
    assert "60 runs, 60 in the store, 0 left" in dry.stdout


def test_a_config_files_threads_and_device_count_where_no_flag_says_otherwise(tmp_path):
    """As for `run`: --threads and --device were the flags' defaults (1, auto) over the file's."""
    sweep = tmp_path / "tiny.yaml"
    sweep.write_text(tiny_sweep("tiny", ["ln"], [3], steps=2, seeds=(0,)))
    (tmp_path / "threads.yaml").write_text("threads: 2\n")
    ran = invoke("sweep", sweep, "--config", tmp_path / "threads.yaml", "--store", tmp_path / "s.db", "-q")
    assert ran.exit_code == 0, ran.output
    with ResultsStore(tmp_path / "s.db") as store:
        assert [run.config["threads"] for run in store.runs()] == [2]
    planned = invoke("sweep", sweep, "--config", tmp_path / "threads.yaml", "--threads", "1", "--dry-run",
                     "--store", tmp_path / "s.db")
    # the flag over the file: another thread count, another run (the 2-thread one is in the store)
    assert planned.exit_code == 0 and "tiny: 1 runs, 0 in the store, 1 left" in planned.stdout, planned.output
    import torch

    if not torch.cuda.is_available():
        (tmp_path / "cuda.yaml").write_text("device: cuda\n")
        refused = invoke("sweep", sweep, "--config", tmp_path / "cuda.yaml", "--store", tmp_path / "s.db", "--dry-run")
        assert refused.exit_code == 2
        assert f"{tmp_path / 'cuda.yaml'}: device: cuda asked for, but torch sees no CUDA GPU here" in refused.stderr
    # the file's device is --device's: auto as well (refused as "unknown device type" of a run's config)
    (tmp_path / "auto.yaml").write_text("device: auto\nthreads: 2\n")
    for command in (["sweep", sweep, "--dry-run"], ["run", "adding", "--T", "8", "--hidden", "8", "--iters", "2"]):
        auto = invoke(*command, "--config", tmp_path / "auto.yaml", "--store", tmp_path / "s.db")
        assert auto.exit_code == 0, auto.output


def test_points_that_are_one_run_are_said_once_not_lost_silently(tmp_path):
    """k-ablation at T=10: the copying sequence has 30 steps, so windows 45 and 65 both cover it and
    are one run id; the table lists it as k 45, and a line says k=65 is that run (`--k 65` too)."""
    note = "note: copying T=10 atn k=65 is the run listed as copying T=10 atn k=45: at this length both compute the same numbers (one run id)"
    for picked in ((), ("--k", "65")):
        result = invoke("sweep", "k-ablation", "--T", "10", "--seeds", "0,1", *picked, "--dry-run",
                        "--store", tmp_path / "none.db")
        assert result.exit_code == 0, result.output
        notes = [" ".join(line.split()) for line in result.stderr.splitlines() if line.startswith("note:")]
        assert notes == [note], result.stderr  # once, not once a seed
        assert ("8 runs" if not picked else "6 runs") in result.stdout  # --k 65: LSTM, LN and the k=45 run


def test_a_run_named_twice_or_spelled_otherwise_is_said_once_and_a_grid_product_is_not(tmp_path):
    """`runs:` entries given twice, `LN` beside `ln`, `k: 10` beside the default 10, were one run each
    without a word (8 settings planned as 4 runs); LN across a grid's k values is the product the
    grid means, and says nothing (the shipped presets say nothing)."""
    path = write(tmp_path, "dup.yaml", """\
        description: twice
        task: adding
        base: {T: 10, hidden: 8, steps: 5}
        runs:
          - {norm: ln}
          - {norm: LN}
          - {norm: atn, k: 10}
          - {norm: atn}
        seeds: [0, 1]
        """)
    result = invoke("sweep", path, "--dry-run", "--store", tmp_path / "none.db")
    assert result.exit_code == 0, result.output
    notes = [" ".join(line.split()) for line in result.stderr.splitlines() if line.startswith("note:")]
    assert notes == [f"note: the sweep names adding T=10 {row} more than once (spelled alike or otherwise): one run"
                     for row in ("ln", "atn k=10")], result.stderr
    for name in ("k-ablation", "table2-adding", "norm-ablation"):
        quiet = invoke("sweep", name, "--dry-run", "--store", tmp_path / "none.db")
        assert quiet.exit_code == 0 and "note:" not in quiet.stderr, quiet.stderr


def test_a_huge_grid_is_refused_before_it_is_built(tmp_path, monkeypatch):
    """5 keys x 20 values (3.2 million runs) were built in memory (1.5 GB, 10 s) before the one-line
    refusal; counted first now, nothing built."""
    import sys

    expanding = sys.modules["atnbench.sweep.expand"]  # the module (the package's `expand` is its function)
    values = lambda start: "[" + ", ".join(str(start + i) for i in range(20)) + "]"  # noqa: E731
    path = write(tmp_path, "huge.yaml", f"""\
        description: too many
        task: adding
        grid: {{hidden: {values(1)}, batch_size: {values(1)}, k: {values(1)}, eval_every: {values(1)}, layers: {values(1)}}}
        seeds: [0]
        """)
    monkeypatch.setattr(expanding, "points", lambda spec: pytest.fail("the grid was built"))
    result = invoke("sweep", path, "--dry-run", "--store", tmp_path / "none.db")
    assert result.exit_code == 2 and "is 3,200,000 runs; a sweep or reproduce plan holds at most" in result.stderr, \
        result.output


def test_a_dry_runs_json_has_the_shape_of_a_runs(tmp_path):
    """`sweep -f json` printed an object {sweep, store, counts, runs} when it ran and a bare list on
    a dry run: one shape now, the dry run's counts those of its plan."""
    path, store = write(tmp_path, "tiny.yaml", TINY), tmp_path / "r.db"
    dry = invoke("sweep", path, "--store", store, "--dry-run", "--format", "json")
    planned = json.loads(dry.stdout)
    assert dry.exit_code == 0 and set(planned) == {"sweep", "store", "dry_run", "counts", "runs"}
    assert planned["counts"] == {"runs": 8, "in_store": 0, "left": 8} and len(planned["runs"]) == 8


@pytest.mark.slow
def test_workers_take_the_sweeps_environment_not_the_fork_servers(tmp_path, monkeypatch):
    """Workers fork from a server that the first sweep of a process starts and later sweeps reuse:
    each worker takes the environment of the sweep that hands it runs, so a data root named in
    $ATNBENCH_DATA after the server started is where it reads."""
    from atnbench.data.prepare import prepare

    grid = "name: {name}\ndescription: two runs\ntask: {task}\n" \
           "base: {{T: 8, hidden: 4, steps: 2, eval_every: 2, batch_size: 2, val_samples: 8{extra}}}\n" \
           "runs: [{{norm: ln}}, {{norm: none}}]\nseeds: [0]\n"
    store = tmp_path / "r.db"
    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "no-data"))  # the server's root, if this sweep starts it
    run_json(write(tmp_path, "adding.yaml", grid.format(name="first", task="adding", extra="")), "--store", store,
             "--workers", "2")  # starts this process's fork server, without the data
    prepare("ptb-char", tmp_path / "data")  # the published copy: a run refuses any other from the data root
    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "data"))
    result = run_json(write(tmp_path, "chars.yaml", grid.format(name="second", task="ptb-char", extra=", options: {eval_batch_size: 4000}")),
                      "--store", store,
                      "--workers", "2")
    assert result["counts"]["done"] == 2, result  # a worker reading the server's root finds no data there
    # scored on PTB's 50 characters (after 2 steps, near the 5.6 bits of a uniform guess)
    assert all(5 < run["test_bpc"] < 6 for run in result["runs"]), result


def test_a_fast_path_that_could_not_be_built_is_warned_about_by_the_sweep_and_taken_over_by_its_workers(
        tmp_path, monkeypatch):
    """A sweep's workers each tried the build again and each printed the warning line; the sweep
    tries it once and warns once (seen here), and its workers take the failure over: their runs are
    on the loop, where a worker that tried again would have built it (what a worker prints is not
    seen from this process; taken over, it has nothing to warn about)."""
    from atnbench.nn import fastpath

    monkeypatch.setattr(fastpath, "_cpp_state", {"ok": False, "disabled": False, "error": "simulated: no compiler"})
    grid = "name: nobuild\ndescription: two runs\ntask: adding\n" \
           "base: {T: 8, hidden: 4, steps: 2, eval_every: 2, batch_size: 2, val_samples: 8}\n" \
           "runs: [{norm: ln}, {norm: atn, k: 3}]\nseeds: [0]\n"
    with pytest.warns(RuntimeWarning) as warned:
        result = run_json(write(tmp_path, "nobuild.yaml", grid), "--store", tmp_path / "r.db", "--workers", "2")
    assert result["counts"]["done"] == 2, result
    assert [str(w.message) for w in warned if "could not be built" in str(w.message)] == [
        "the C++ fast path could not be built (simulated: no compiler); NormLSTM uses the slower loop path. "
        "`atnbench build` retries and shows why."]
    with ResultsStore(tmp_path / "r.db", create=False) as results:
        assert [run.env["cpp_fast_path"] for run in results.runs()] == [False, False]  # built here: True


@pytest.mark.parametrize("workers", [1, 2])
def test_a_signal_during_the_fast_paths_build_stops_the_sweep_at_once(tmp_path, monkeypatch, workers):
    """The build before the first run (up to minutes on a slow machine) held Ctrl-C and SIGTERM
    until it ended; nothing of a run is there to record, so the sweep stops at once."""
    import os
    import time

    import atnbench.run.warmup

    built = []

    def slow_build(config):  # a signal arrives 0 s into a 5 s build
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
        built.append(config.norm)

    monkeypatch.setattr(atnbench.run.warmup, "load_fast_path", slow_build)
    path = write(tmp_path, "tiny.yaml", TINY)
    started = time.monotonic()
    result = invoke("sweep", path, "--store", tmp_path / "r.db", "--workers", workers, "--device", "cpu")
    assert time.monotonic() - started < 4 and built == []
    assert result.exit_code == 128 + signal.SIGINT, result.output
    assert "stopped by SIGINT" in result.stderr and "run the same command again to resume" in result.stderr
    with ResultsStore(tmp_path / "r.db", create=False) as results:
        assert results.runs() == []  # nothing started, nothing recorded


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads a process's signal dispositions in /proc")
def test_the_fork_server_ignores_the_stop_signals_and_workers_take_them():
    """A Ctrl-C (or SIGTERM to the group) while the fork server imported torch killed it with a
    traceback, and the sweep ended "error: aborted", exit 1 (QA): the server ignores SIGINT and
    SIGTERM (it ends with the sweep), this process keeps its handlers, and a worker handles them
    again (``Lifeline``) before any run."""
    import os
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import forkserver

    from atnbench.sweep import local

    def ignored(pid) -> set[int]:
        mask = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigIgn"))
        bits = int(mask.split()[1], 16)
        return {sig for sig in (signal.SIGINT, signal.SIGTERM) if bits >> (sig - 1) & 1}

    handlers = [signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)]
    context = local.worker_context()
    assert ignored(forkserver._forkserver._forkserver_pid) == {signal.SIGINT, signal.SIGTERM}
    assert [signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)] == handlers
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) & {signal.SIGINT, signal.SIGTERM} == set()
    events, stop = context.Queue(), context.Event()
    with ProcessPoolExecutor(1, mp_context=context, initializer=local._init_worker,
                             initargs=(events, stop, 1, dict(os.environ), os.getcwd(), None)) as pool:
        worker = pool.submit(os.getpid).result()
        assert ignored(worker) == set()

"""`atnbench run` end to end: the CLI, the store it writes, resume, and bad input."""

from __future__ import annotations

import json

import pytest
import torch

from atnbench.config import ConfigError
from atnbench.run.runspec import resolve_run
from atnbench.store import ResultsStore
from atnbench.tasks import get_task
from atnbench.run.train import train
from helpers import Interrupt, invoke, whole_and_resumed
from atnbench.evidence.identity import run_id_of


TINY = ["--T", "8", "--hidden", "8", "--batch-size", "4", "--iters", "6", "--eval-every", "2",
        "--val-samples", "8"]


def test_run_json_writes_the_store_and_reads_back(tmp_path):
    store = tmp_path / "results.db"
    result = invoke("run", "adding", "--norm", "atn", "--k", "3", *TINY, "--store", store, "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)  # nothing else on stdout
    for key in ("run_id", "status", "task", "norm", "k", "T", "seed", "steps", "wall_s", "min_train_loss",
                "min_val_loss", "final_train_loss", "final_val_loss"):
        assert key in record
    assert record["status"] == "done" and record["steps"] == 6 and record["k"] == 3 and record["T"] == 8
    with ResultsStore(store, create=False) as results:
        row = results.get_run(record["run_id"])
        curve = results.curve(record["run_id"])
    assert row.status == "done" and row.config["norm"] == "atn" and row.env["device"] == "cpu"
    assert [p.step for p in curve] == [2, 4, 6]
    assert row.summary["min_val_loss"] == min(p.val_loss for p in curve)
    assert row.summary["final_train_loss"] == curve[-1].train_loss
    # the same command again trains nothing: --output still gets the record it prints (it wrote no
    # file, exit 0, and an older file there stayed as it was)
    (tmp_path / "again.json").write_text("{}\n")
    again = invoke("run", "adding", "--norm", "atn", "--k", "3", *TINY, "--store", store, "--json",
                   "--output", tmp_path / "again.json")
    assert again.exit_code == 0 and "not training again" in again.stderr, again.output
    written = json.loads((tmp_path / "again.json").read_text())
    assert written == json.loads(again.stdout) and (written["run_id"], written["status"]) == (record["run_id"], "done")
    assert written["min_val_loss"] == record["min_val_loss"]


def test_run_prints_a_summary_and_labels_a_shrunk_run(tmp_path):
    result = invoke("run", "copying", "--norm", "ln", *TINY, "--budget", "0.5", "--store", tmp_path / "r.db",
                    "--quiet")
    assert result.exit_code == 0, result.output
    assert "min validation loss" in result.stdout
    assert "shrunk to 0.5" in result.stdout
    assert "task baseline" in result.stdout


def test_same_seed_same_numbers(tmp_path):
    a = json.loads(invoke("run", "denoise", "--T", "24", "--hidden", "8", "--batch-size", "4", "--iters", "4",
                          "--eval-every", "2", "--val-samples", "8", "--store", tmp_path / "a.db", "--json").stdout)
    b = json.loads(invoke("run", "denoise", "--T", "24", "--hidden", "8", "--batch-size", "4", "--iters", "4",
                          "--eval-every", "2", "--val-samples", "8", "--store", tmp_path / "b.db", "--json").stdout)
    assert a["run_id"] == b["run_id"]
    assert a["min_train_loss"] == b["min_train_loss"] and a["final_val_loss"] == b["final_val_loss"]


def test_precedence_flag_over_config_file_over_preset(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("hidden: 12\nlr: 0.005\nk: 7\n")
    resolved = resolve_run("adding", {"k": 3}, config_file=config)
    assert resolved.hidden == 12 and resolved.lr == 0.005  # file over preset
    assert resolved.k == 3  # flag over file
    assert resolve_run("adding", {}).k == 25 and resolve_run("adding", {"T": 200}).k == 5  # preset per T
    assert resolve_run("adding", {"epochs": 1}).steps == 2000  # the preset's epoch


def test_the_config_files_threads_and_device_count_where_no_flag_says_otherwise(tmp_path):
    """Flags on the command line override the file; where they are not given, the file's threads
    and device are the run's (they were the flags' defaults, 1 and auto, without a word)."""
    from helpers import invoke

    (tmp_path / "threads.yaml").write_text("T: 8\nhidden: 4\niters: 2\nthreads: 2\n")
    (tmp_path / "cuda.yaml").write_text("T: 8\nhidden: 4\niters: 2\ndevice: cuda\n")
    store = tmp_path / "s.db"

    def run(*args):
        return invoke("run", "adding", "--store", store, "--format", "json", *args)

    two = run("--config", tmp_path / "threads.yaml")
    assert two.exit_code == 0, two.output
    one = run("--config", tmp_path / "threads.yaml", "--threads", "1")
    assert one.exit_code == 0, one.output
    with ResultsStore(store) as results:
        assert results.get_run(json.loads(two.stdout)["run_id"]).config["threads"] == 2
        assert results.get_run(json.loads(one.stdout)["run_id"]).config["threads"] == 1
    import torch

    if not torch.cuda.is_available():  # the file's device asked for, refused as the flag is
        refused = run("--config", tmp_path / "cuda.yaml")
        assert refused.exit_code == 2, refused.output
        assert f"{tmp_path / 'cuda.yaml'}: device: cuda asked for, but torch sees no CUDA GPU here" in refused.stderr
    assert run("--config", tmp_path / "cuda.yaml", "--device", "cpu").exit_code == 0


@pytest.mark.parametrize("given, said", [
    ("lr_schedule: null", "options.lr_schedule must be {milestones: [epochs], gamma: factor}, got None"),
    ("lr_schedule: false", "options.lr_schedule must be {milestones: [epochs], gamma: factor}, got False"),
    ("lr_schedule: {milestone: [80]}", "options.lr_schedule: 'milestone' is not read"),
    ("lr_schedule: {milestones: []}", "options.lr_schedule.milestones must be a list of epochs"),
    ("lr_schedule: {milestones: [80], gamma: 0}", "options.lr_schedule.gamma must be a number > 0 other than 1"),
    ("lr_schedule: {milestones: [80], gamma: 1}", "options.lr_schedule.gamma must be a number > 0 other than 1, got 1"),
    ("asgd_switch: {}", "options.asgd_switch must be {nonmono: n}, got {}"),
    ("asgd_switch: {nonmono: 5, foo: 1}", "options.asgd_switch: 'foo' is not read"),
    ("asgd_switch: {nonmono: true}", "options.asgd_switch.nonmono must be a whole number >= 1, got True"),
])
def test_a_schedule_option_that_does_nothing_is_refused_naming_the_file(tmp_path, given, said):
    """`lr_schedule: null` or `{a: 1}` was read as no schedule: another run id, the same numbers."""
    from helpers import invoke

    (tmp_path / "opts.yaml").write_text(f"options: {{{given}}}\n")
    refused = invoke("run", "adding", "--T", "8", "--config", tmp_path / "opts.yaml", "--store", tmp_path / "s.db")
    assert refused.exit_code == 2 and not (tmp_path / "s.db").exists(), refused.output
    assert refused.stderr.startswith(f"error: {tmp_path / 'opts.yaml'}: {said}"), refused.stderr
    assert resolve_run("adding", {"options": {"asgd_switch": {"nonmono": 3}}}).options == {"asgd_switch": {"nonmono": 3}}


def test_an_option_no_task_reads_is_refused_and_every_shipped_option_is_taken(tmp_path):
    """`options: {foo: 1}` changed the run id and nothing else (a second report row of the same
    numbers); refused. Every option a shipped preset or variant sets is one its task reads."""
    from helpers import invoke

    from atnbench.presets import resolve_preset
    from atnbench.tasks.lookup import load_task_preset
    from atnbench.tasks.registry import TASK_MODULES

    (tmp_path / "opts.yaml").write_text("options: {foo: 1}\n")
    refused = invoke("run", "copying", "--T", "10", "--config", tmp_path / "opts.yaml", "--store", tmp_path / "s.db")
    assert refused.exit_code == 2 and not (tmp_path / "s.db").exists(), refused.output
    assert f"{tmp_path / 'opts.yaml'}: options: 'foo' is not an option of copying: nothing reads it" in refused.stderr
    with pytest.raises(ConfigError, match="'noise_variance' is not an option of smnist-noise"):
        resolve_run("smnist-noise", {"options": {"noise_variance": 0.2}})
    assert resolve_run("smnist-noise", {"options": {"noise_var": 0.2}}).options["noise_var"] == 0.2
    assert resolve_run("copying", {"options": {"lr_schedule": {"milestones": [5], "gamma": 0.1}}}).options
    for name in TASK_MODULES:
        preset = load_task_preset(name)
        for variant in (None, *preset.variants):
            resolved = resolve_run(name, {}, variant=variant)  # the check ran on the preset's own options
            assert set(resolve_preset(preset, preset.default_T, variant).get("options") or {}) <= set(resolved.options)

    full = resolve_run("adding", {"T": 200})
    small = resolve_run("adding", {"T": 200}, budget=0.01)
    assert small.steps == full.steps // 100 and small.eval_every == full.eval_every // 100
    assert small.val_samples == full.val_samples // 100 and small.budget == 0.01
    assert run_id_of(small) != run_id_of(full)


def test_budget_on_whole_split_tasks_keeps_the_evaluation_interval():
    """Language models score the whole validation (and test) text at every evaluation, which a
    budget cannot shrink: the budget takes evaluations away instead of shrinking the interval."""
    for task in ("ptb-char", "ptb-word", "wikitext2"):
        full, small = resolve_run(task, {}), resolve_run(task, {}, budget=0.01)
        assert small.steps == -(-full.steps // 100) and small.eval_every == full.eval_every, task
        assert small.steps // small.eval_every <= full.steps // full.eval_every // 100 + 1  # 1% of the evaluations
    assert resolve_run("imdb", {}, budget=0.01).eval_every < resolve_run("imdb", {}).eval_every  # val_samples shrinks


@pytest.mark.parametrize("norm", ["atn", "bn"])
def test_resume_after_kill_equals_uninterrupted(tmp_path, norm):
    config = resolve_run("adding", {"T": 10, "hidden": 8, "batch_size": 4, "steps": 12, "eval_every": 2,
                                    "val_samples": 8, "norm": norm, "k": 3})

    def at_the_kill(store):
        assert store.status(run_id_of(config)) == "failed"
        assert (store.checkpoint_dir(run_id_of(config)) / "checkpoint.pt").exists()

    whole, whole_curve, resumed, resumed_curve = whole_and_resumed(config, tmp_path, 9, at_the_kill)
    assert resumed["status"] == "done" and resumed_curve == whole_curve
    for key in ("min_train_loss", "min_val_loss", "final_train_loss", "final_val_loss"):
        assert resumed[key] == whole[key]


def test_divergence_is_recorded_not_a_crash(tmp_path):
    store = tmp_path / "r.db"
    result = invoke("run", "adding", "--norm", "none", "--T", "8", "--hidden", "8", "--batch-size", "4",
                    "--iters", "30", "--eval-every", "5", "--val-samples", "8", "--lr", "1e30", "--optimizer", "sgd",
                    "--store", store, "--json")
    record = json.loads(result.stdout)
    assert record["status"] == "diverged" and result.exit_code == 1
    with ResultsStore(store, create=False) as results:
        assert results.status(record["run_id"]) == "diverged"
    again = invoke("run", "adding", "--norm", "none", "--T", "8", "--hidden", "8", "--batch-size", "4",
                   "--iters", "30", "--eval-every", "5", "--val-samples", "8", "--lr", "1e30", "--optimizer", "sgd",
                   "--store", store, "--json")
    assert "already in" in again.stderr and again.exit_code == 1  # found in the store: the same outcome, the same code


@pytest.mark.parametrize("args, message", [
    (["run", "nosuchtask"], "unknown task"),
    (["run", "adding", "--norm", "magic"], "unknown norm"),
    (["run", "adding", "--k", "0"], "k must be >= 1"),
    (["run", "denoise", "--T", "5"], "too short"),
    (["run", "adding", "--config", "/nonexistent/config.yaml"], "config file not found"),
    (["run", "adding", "--lr", "-0.1"], "lr must be > 0"),
    (["run", "adding", "--budget", "2"], "budget"),
    (["run", "copying", "--variant", "nope"], "variant"),
    (["run", "adding", "--resume", "--force"], "--force starts it over: give one"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, message):
    store = tmp_path / "results.db"
    result = invoke(*args, "--store", store)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.output
    assert not store.exists()


def test_bad_config_key_names_the_key(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("hiden: 3\n")
    with pytest.raises(ConfigError, match="hiden"):
        resolve_run("adding", {}, config_file=config)


def test_tasks_and_models_list(tmp_path):
    tasks = invoke("tasks")
    assert tasks.exit_code == 0 and "adding" in tasks.stdout and "paper-text" in tasks.stdout and "released-code" in tasks.stdout
    models = invoke("models")
    assert models.exit_code == 0
    for name in ("lstm", "ln", "atn", "atn-bn", "bn", "bn-input", "bln", "gru-atn"):
        assert name in models.stdout


def test_init_option_reaches_the_model():
    from atnbench.tasks.source import make_source
    from atnbench.run.train import build_model

    weights = {}
    for init in ("atn", "torch"):
        config = resolve_run("adding", {"T": 8, "hidden": 4, "init": init, "norm": "ln"})
        model = build_model(config, make_source(get_task("adding"), config, torch.device("cpu")))
        weights[init] = model.rnn.layers[0].weight_hh.detach()
    assert torch.equal(weights["atn"], torch.eye(4).repeat(4, 1))  # identity per gate
    assert not torch.equal(weights["torch"], weights["atn"])
    with pytest.raises(ConfigError, match="unknown init"):
        resolve_run("adding", {"init": "xavier"})


# --- interrupted runs: SIGTERM as Ctrl-C, the same command resumes, --force starts over --------------------

LONGER = ["--T", "8", "--hidden", "8", "--batch-size", "4", "--iters", "300", "--eval-every", "10",
          "--val-samples", "8", "--norm", "atn", "--k", "3", "--device", "cpu"]


def curve_and_minima(store, run_id) -> tuple:
    with ResultsStore(store, create=False) as results:
        run = results.get_run(run_id)
        curve = [(p.step, p.train_loss, p.val_loss) for p in results.curve(run_id)]
    return run.status, curve, run.summary["min_train_loss"], run.summary["min_val_loss"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The LONGER run from start to end: (run id, what its interrupted copies must reach)."""
    store = tmp_path_factory.mktemp("whole") / "r.db"
    result = invoke("run", "adding", *LONGER, "--store", store, "--format", "json")
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.stdout)["run_id"]
    return run_id, curve_and_minima(store, run_id)


@pytest.mark.slow
def test_sigterm_records_the_run_as_failed_and_the_same_command_resumes_it(tmp_path, uninterrupted):
    import signal

    from helpers import CliProcess, poll_store

    run_id, whole = uninterrupted
    store = tmp_path / "r.db"
    with CliProcess(["run", "adding", *LONGER, "--store", store], tmp_path) as run:
        poll_store(store, lambda conn: conn.execute("SELECT COUNT(*) FROM evals").fetchone()[0] >= 3, run.popen)
        run.popen.send_signal(signal.SIGTERM)  # a checkpoint was taken at the 2nd evaluation
        code = run.popen.wait(timeout=30)
        log_text = run.log()
    assert code == 143, log_text
    assert f"interrupted: run {run_id} recorded as failed; continue it with the same command" in log_text
    with ResultsStore(store, create=False) as results:
        row = results.get_run(run_id)
        assert (row.status, row.error) == ("failed", "interrupted")
        assert (results.checkpoint_dir(run_id) / "checkpoint.pt").exists()

    rerun = invoke("run", "adding", *LONGER, "--store", store)  # no --resume
    assert rerun.exit_code == 0, rerun.output
    notes = [line for line in rerun.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and f"run {run_id} did not finish: resuming it from its checkpoint at step" in notes[0]
    assert curve_and_minima(store, run_id) == whole


def test_force_starts_an_interrupted_run_over(tmp_path, uninterrupted):
    run_id, whole = uninterrupted
    config = resolve_run("adding", {"T": 8, "hidden": 8, "batch_size": 4, "steps": 300, "eval_every": 10,
                                    "val_samples": 8, "norm": "atn", "k": 3, "threads": 1, "device": "cpu"})
    assert run_id_of(config) == run_id
    store = tmp_path / "r.db"
    with ResultsStore(store) as results, pytest.raises(KeyboardInterrupt):
        train(config, results, torch.device("cpu"), Interrupt(at=35))  # checkpoint at step 20
    forced = invoke("run", "adding", *LONGER, "--store", store, "--force")
    assert forced.exit_code == 0, forced.output
    assert f"starting run {run_id} over; its checkpoint is discarded" in forced.stderr
    assert "resuming" not in forced.stderr and "note:" not in forced.stderr
    assert curve_and_minima(store, run_id) == whole


@pytest.mark.parametrize("norm, builds", [("ln", True), ("none", False)])
def test_the_fast_path_is_loaded_before_the_run_is_timed(tmp_path, monkeypatch, norm, builds):
    """The one-time C++ build happens before ``_train`` starts the clock, for ``atnbench run`` and
    for a sweep's runs, and only for a norm the C++ kernels cover."""
    import atnbench.run.train
    from atnbench.nn import fastpath
    from atnbench.sweep.runner import Job, execute
    from atnbench.run.train import SilentReporter

    events = []
    real_build, real_train = fastpath.build_cpp, atnbench.run.train._train

    def build(*args, **kwargs):
        events.append("build")
        return real_build(*args, **kwargs)

    def timed_training(*args, **kwargs):
        events.append("train")
        return real_train(*args, **kwargs)

    monkeypatch.setattr(fastpath, "build_cpp", build)
    monkeypatch.setattr(atnbench.run.train, "_train", timed_training)
    result = invoke("run", "adding", *TINY, "--norm", norm, "--store", tmp_path / "run.db")
    assert result.exit_code == 0, result.output
    assert events[:2] == (["build", "train"] if builds else ["train"])

    events.clear()
    config = resolve_run("adding", {"T": 8, "hidden": 8, "batch_size": 4, "steps": 6, "eval_every": 2,
                                    "val_samples": 8, "norm": norm, "seed": 1})
    with ResultsStore(tmp_path / "sweep.db") as results:
        outcome = execute(Job(run_id_of(config), config.to_dict(), "tiny", "tiny"), results, "cpu", SilentReporter())
    assert outcome["status"] == "done"
    assert events[:2] == (["build", "train"] if builds else ["train"])


def test_a_run_interrupted_before_it_starts_says_nothing_was_recorded(tmp_path, monkeypatch):
    """Ctrl-C while a run is being set up (its data, its model) leaves no row: the message says
    so, instead of a "recorded as failed" the store would contradict."""
    import atnbench.run.train

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(atnbench.run.train, "train", stopped)
    store = tmp_path / "r.db"
    result = invoke("run", "adding", *TINY, "--store", store)
    assert result.exit_code == 130, result.output
    assert "nothing recorded; the same command starts it" in result.stderr and "recorded as failed" not in result.stderr
    with ResultsStore(store) as results:
        assert results.runs() == []


def test_an_interrupt_after_the_final_row_says_the_run_is_done(tmp_path, monkeypatch):
    """Ctrl-C in the instant after a run wrote its final row: the run stays done, and `run` says
    so, not "recorded as failed; continue it"."""
    real = ResultsStore.finish_run

    def then_interrupted(self, *args, **kwargs):
        real(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(ResultsStore, "finish_run", then_interrupted)
    result = invoke("run", "adding", *TINY, "--store", tmp_path / "r.db")
    assert result.exit_code == 130, result.output
    assert "interrupted after run" in result.stderr and "it is recorded done" in result.stderr
    assert "recorded as failed" not in result.stderr


def test_a_sweep_keeps_a_run_this_code_finished_after_its_plan_and_re_runs_a_stale_one(tmp_path):
    """A sweep planned a run while `atnbench run` trained it; that run ended before the sweep's
    worker took the lock, so nothing was waited for, and the worker trained it again from scratch
    over the finished row ("no checkpoint ... starting it from scratch")."""
    config = resolve_run("adding", {"T": 8, "hidden": 8, "batch_size": 4, "steps": 4, "eval_every": 2,
                                    "val_samples": 8})
    device = torch.device("cpu")
    with ResultsStore(tmp_path / "s.db") as store:
        first = train(config, store, device)
        finished = store.get_run(first["run_id"])
        kept = train(config, store, device, resume=True, wait=True)  # the sweep's call for the planned job
        assert store.get_run(first["run_id"]).created_at == finished.created_at and kept["status"] == "done"
        assert kept["min_val_loss"] == first["min_val_loss"]
        with store.batch():  # the same row made by other code: stale, which a sweep re-runs
            store._conn.execute("UPDATE runs SET env_json = json_set(env_json, '$.code', 'older') WHERE run_id = ?",
                                (first["run_id"],))
        train(config, store, device, resume=True, wait=True)
        assert store.get_run(first["run_id"]).created_at != finished.created_at


def test_an_unknown_key_in_a_config_file_is_named_with_that_file(tmp_path):
    """`sweep --config c.yaml` blamed the shipped sweep file for c.yaml's unknown key, and `run`
    named no file: both name c.yaml, before any work."""
    config = tmp_path / "c.yaml"
    config.write_text("hidden: 8\niters: 10\nbogus_key: 3\n")
    for args in (("run", "adding"), ("sweep", "k-ablation", "--dry-run")):
        result = invoke(*args, "--config", config, "--store", tmp_path / "r.db")
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert lines[0].startswith(f"error: {config}: unknown config key(s): bogus_key; known:"), lines[0]
    assert not (tmp_path / "r.db").exists()

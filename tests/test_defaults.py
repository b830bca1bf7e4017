"""Defaults that learn on small data (#38, point 2): a step budget with a floor for a task of your
own, early stopping (``--patience``, a run setting: on for such tasks, off for the paper's
protocols, kept out of the run id at 0), stratified validation splits, and the one line that says a
run ended at the no-information baseline."""

from __future__ import annotations

import collections
import json
import math
from pathlib import Path

import numpy as np
import pytest

from helpers import invoke as shared_invoke


@pytest.fixture(autouse=True)
def _no_user_folders(monkeypatch):
    monkeypatch.setenv("ATNBENCH_TASKS", "")
    monkeypatch.delenv("ATNBENCH_DEBUG", raising=False)


def invoke(*args, env=None):
    return shared_invoke(*args, terminal_width=200, env=env)


def ok(result):
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


def write_task(folder: Path, name: str, labels, defaults: str = "", seed: int = 0, learnable: bool = True) -> Path:
    """A sequence-classification task: 6-step, 2-channel sequences whose mean is their class
    (``learnable``) or pure noise beside random labels."""
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    x = rng.normal(0, 1, (len(labels), 6, 2)) + (labels[:, None, None] if learnable else 0)
    folder.mkdir(exist_ok=True)
    np.savez(folder / f"{name}.npz", x=x.astype(np.float32), y=labels)
    (folder / f"{name}.yaml").write_text(f"problem: sequence-classification\ndata: {{train: {name}.npz}}\n{defaults}")
    return folder


def resolve(folder: Path, name: str, **flags):
    from atnbench.run.runspec import resolve_run
    from atnbench.tasks.taskfiles import include

    include([folder])
    return resolve_run(name, flags)


# --- the step budget --------------------------------------------------------------------------

def test_a_small_data_set_trains_at_least_the_floor_and_a_large_one_its_epochs(tmp_path):
    from atnbench.tasks.userprep import EPOCHS, EVALUATIONS, MIN_STEPS, PATIENCE, step_budget

    config = resolve(write_task(tmp_path / "t", "small", np.arange(50) % 2), "small")
    # 40 training sequences in batches of 32: 20 epochs would be 20 steps
    assert config.steps == MIN_STEPS > EPOCHS * (40 // 32)
    assert config.patience == PATIENCE and config.eval_every == math.ceil(MIN_STEPS / EVALUATIONS)
    assert config.steps_per_epoch == 1 and config.batch_size == 32
    assert step_budget(100_000, 32) == EPOCHS * 3125 > MIN_STEPS  # large data: the epochs decide


def test_a_task_file_that_sets_the_length_keeps_it_with_an_interval_to_fit(tmp_path):
    folder = tmp_path / "t"
    config = resolve(write_task(folder, "short", np.arange(50) % 2, "defaults: {epochs: 3, batch_size: 8}\n"), "short")
    assert (config.steps, config.eval_every) == (15, 5)  # 3 epochs of 40 // 8 steps, evaluated once each
    config = resolve(write_task(folder, "long", np.arange(50) % 2, "defaults: {steps: 5000, batch_size: 8}\n"), "long")
    assert (config.steps, config.eval_every) == (5000, 100)  # 50 evaluations, not one per 5-step pass
    config = resolve(write_task(folder, "fixed", np.arange(50) % 2, "defaults: {steps: 500, eval_every: 7}\n"), "fixed")
    assert (config.steps, config.eval_every) == (500, 7)
    config = resolve(folder, "fixed", steps=100, patience=0)  # flags win: early stopping off
    assert (config.steps, config.patience) == (100, 0)


# --- early stopping: a run setting, off for the paper's protocols ---------------------------------

def test_the_paper_presets_keep_early_stopping_off_and_their_run_ids():
    from atnbench.evidence.identity import config_key, identity
    from atnbench.presets import list_task_presets
    from atnbench.run.runspec import resolve_run

    for task in list_task_presets():
        config = resolve_run(task, {})
        assert config.patience == 0, task
        stored_before = {key: value for key, value in config.to_dict().items() if key != "patience"}
        # a run stored before the setting existed has the id it has now; patience on is another run
        assert "patience" not in identity(config.to_dict())
        assert config_key(stored_before) == config_key(config.to_dict())
        assert config_key({**config.to_dict(), "patience": 5}) != config_key(config.to_dict())


def test_patience_is_a_declared_run_and_sweep_flag():
    from atnbench.settings import RUN_SETTINGS, SWEEP_SETTINGS

    assert [s.flag for s in RUN_SETTINGS if s.param == "patience"] == ["--patience"]
    assert "patience" in {s.param for s in SWEEP_SETTINGS}
    result = invoke("run", "adding", "--patience", "-1")
    assert result.exit_code == 2 and "patience must be >= 0, got -1" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_early_stopping_ends_a_run_patience_evaluations_after_its_best(tmp_path):
    """Random labels: the validation loss stops falling as the model learns the training noise;
    the run ends `patience` evaluations after its lowest validation loss, its best weights kept."""
    from atnbench.store import ResultsStore

    folder = write_task(tmp_path / "t", "noise", np.random.default_rng(3).integers(0, 2, 60), learnable=False,
                        defaults="defaults: {hidden: 16, batch_size: 8, steps: 400, eval_every: 2, lr: 0.03}\n")
    store, record = tmp_path / "s.db", tmp_path / "r.json"
    result = ok(invoke("run", "noise", "--include", folder, "--norm", "ln", "--patience", 3, "--store", store,
                       "-q", "-o", record))
    summary = json.loads(record.read_text())
    assert summary["status"] == "done" and summary["steps"] < 400
    assert "stopped early: no lower validation loss in 3 evaluations" in result.stdout
    with ResultsStore(store) as results:
        curve = [p.val_loss for p in results.curve(summary["run_id"])]
        best_step = results.model(summary["run_id"], "best")[0]
    best = curve.index(min(curve))
    assert len(curve) == best + 1 + 3 and min(curve[best + 1:]) >= curve[best]
    assert best_step == 2 * (best + 1) and summary["steps"] == 2 * len(curve)


def test_a_resumed_run_counts_on_from_its_curve():
    from atnbench.store.results import EvalPoint
    from atnbench.run.train import early_stopping_state

    def curve(*vals):
        return [EvalPoint(step=2 * (i + 1), wall_s=0.0, train_loss=1.0, val_loss=v, metrics={}) for i, v in enumerate(vals)]

    assert early_stopping_state([]) == (math.inf, 0)
    assert early_stopping_state(curve(0.9, 0.5, 0.7, 0.5, 0.6)) == (0.5, 3)  # the first 0.5 is the best
    assert early_stopping_state(curve(0.9, 0.8, 0.4)) == (0.4, 0)


# --- stratified splits --------------------------------------------------------------------------

def test_every_prefix_of_a_stratified_order_holds_each_class_in_its_share():
    from atnbench.tasks.userprep import stratified

    rng = np.random.default_rng(0)
    labels = list(rng.choice(10, 300, p=[0.3] + [0.7 / 9] * 9))
    order = stratified(rng.permutation(300), labels)
    assert sorted(order) == list(range(300))
    counts = collections.Counter(labels)
    for m in (10, 30, 60, 150):
        taken = collections.Counter(labels[i] for i in order[:m])
        for label, count in counts.items():
            assert abs(taken[label] - m * count / 300) <= 1, (m, label)


def test_a_carved_validation_split_is_stratified_and_its_baseline_the_training_frequencies(tmp_path):
    """PickupGestureWiimoteZ's case: 10 classes, an unstratified 20% held out none of the majority
    class, and the no-information loss sat above the uniform guess's ln 10."""
    from atnbench.tasks.taskfiles import read_definition, task_options
    from atnbench.tasks.userprep import no_information_loss, prepared

    labels = np.array([0] * 30 + [c for c in range(1, 10) for _ in range(5)])  # 75 sequences, class 0 the majority
    folder = write_task(tmp_path / "t", "skewed", labels)
    options = task_options(read_definition(folder / "skewed.yaml"), folder / "skewed.yaml")
    prep = prepared(options["user_task"], options["data_files"])
    val = collections.Counter(int(y) for y in prep.splits["val"].ys)
    train = collections.Counter(int(y) for y in prep.splits["train"].ys)
    assert len(prep.splits["val"].ys) == 15 and val[0] == 6  # 30 of 75 is 40%: 6 of the 15
    assert all(val[c] in (0, 1) for c in range(1, 10)) and sum(val.values()) == 15
    frequencies = np.array([train[c] for c in sorted(train)]) / sum(train.values())
    entropy = float(-(frequencies * np.log(frequencies)).sum())
    baseline = no_information_loss(prep, per_step=False)
    assert baseline < math.log(10) and abs(baseline - entropy) < 0.25


# --- a run at the no-information baseline says so -------------------------------------------------

def test_a_run_that_learned_nothing_says_so_in_one_line_with_what_to_try(tmp_path):
    folder = write_task(tmp_path / "t", "noise", np.random.default_rng(3).integers(0, 2, 60), learnable=False,
                        defaults="defaults: {hidden: 8, batch_size: 8, steps: 4, eval_every: 2, lr: 1.0e-4}\n")
    result = ok(invoke("run", "noise", "--include", folder, "--store", tmp_path / "s.db", "-q"))
    said = " ".join(result.stderr.split())  # a note wraps between words in a narrow terminal
    notes = [part for part in said.split("note: ")[1:] if "no-information baseline" in part]
    assert len(notes) == 1 and "learned nothing" in notes[0]
    assert "--iters 8" in notes[0] and "--lr" in notes[0] and "--norm ln" in notes[0]


def test_a_run_below_the_baseline_has_no_such_line():
    from atnbench.config import build_config
    from atnbench.run.learned import at_baseline

    config = build_config({"task": "mine", "T": 10, "steps": 100, "patience": 4, "options": {"user_task": {}}})
    done = {"status": "done", "baseline": 0.69, "steps": 100}
    paper = build_config({"task": "copying", "T": 10, "steps": 100})  # a fixed protocol: its plateau is a finding
    assert at_baseline(paper, {**done, "min_val_loss": 0.69}) is None
    assert at_baseline(config, {**done, "min_val_loss": 0.3}) is None
    assert at_baseline(config, {**done, "min_val_loss": 0.69, "status": "diverged"}) is None
    assert at_baseline(config, {**done, "min_val_loss": 0.3, "baseline": None}) is None
    # far above it, the run blew up: not "at" the baseline, and not "a larger learning rate"
    blown = at_baseline(config, {**done, "min_val_loss": 6.3e13})
    assert "is above the no-information baseline 0.69" in blown and "worse than that guess" in blown
    assert f"--lr {config.lr / 10:.2g}" in blown and "--iters" not in blown and f"{config.lr * 3:.2g}" not in blown
    for untrained in (0.67, 0.72, 1.3):  # not 5% below it, not twice it: learned nothing (an untrained model)
        assert "is not 5% below the no-information baseline" in at_baseline(config, {**done, "min_val_loss": untrained})
    line = at_baseline(config, {**done, "min_val_loss": 0.67, "steps": 40})  # stopped early
    assert line is not None and "--patience 8" in line and "step 40" in line and "\n" not in line
    # at a budget, --iters counts the steps before the budget shrinks them: twice this run's steps
    # (--iters 40 at budget 0.25 trained 10 and said --iters 20, which trains 5)
    quarter = build_config({"task": "mine", "T": 10, "steps": 10, "budget": 0.25, "options": {"user_task": {}}})
    line = at_baseline(quarter, {**done, "steps": 10, "min_val_loss": 0.69})
    assert "more steps (--iters 80 at --budget 0.25)" in line, line
    assert "more steps (--iters 200)" in at_baseline(config, {**done, "min_val_loss": 0.69})
    from atnbench.run.runspec import apply_budget

    for budget in (0.25, 0.3, 0.33, 0.7, 0.9):  # ceil() rounds a step up at some budgets: 2 steps at 0.3 said 14 (5)
        for steps in range(1, 40):
            shrunk = build_config({"task": "mine", "T": 10, "steps": steps, "budget": budget, "options": {"user_task": {}}})
            said = at_baseline(shrunk, {**done, "steps": steps, "min_val_loss": 0.69})
            iters = int(said.split("more steps (--iters ")[1].split()[0])
            assert apply_budget({"steps": iters, "batch_size": 4}, budget)["steps"] == 2 * steps, (budget, steps, iters)
    for norm, other in (("atn", "--norm ln"), ("ln", "--norm atn")):  # never the run's own norm
        config = build_config({"task": "mine", "T": 10, "steps": 100, "norm": norm, "options": {"user_task": {}}})
        line = at_baseline(config, {**done, "min_val_loss": 0.69})
        assert f"another norm ({other})" in line


# --- the example: real data at the defaults -----------------------------------------------------

def test_the_small_data_example_holds_real_data_at_the_defaults(tmp_path):
    """examples/small-data on a copy: its export writes GunPoint (CSV), BasicMotions and Japanese
    Vowels out of the aeon package; each task file resolves to the defaults, its validation split
    is stratified, and the README's runs, cut to 2 steps, say so where they end at the baseline."""
    import re
    import shutil
    import subprocess
    import sys

    example = Path(__file__).resolve().parents[1] / "examples" / "small-data"
    folder = tmp_path / "small-data"
    shutil.copytree(example, folder, ignore=shutil.ignore_patterns("*.npz", "*.csv"))
    subprocess.run([sys.executable, str(folder / "export.py")], check=True, capture_output=True)
    from atnbench.run.learned import MARGIN
    from atnbench.tasks.userprep import MIN_STEPS, PATIENCE

    sizes = {"gunpoint": (40, 10, 150), "basic-motions": (32, 8, 40), "japanese-vowels": (216, 54, 370)}
    for name, (n_train, n_val, n_test) in sizes.items():
        config = resolve(folder, name)
        assert (config.steps, config.patience, config.lr, config.optimizer) == (MIN_STEPS, PATIENCE, 3e-3, "adam")
        result = ok(invoke("tasks", "check", name, "--include", folder))
        assert f"train {n_train}, val {n_val}, test {n_test}" in result.stdout
    # GunPoint's 50 training sequences are 24 of class 1 and 26 of class 2: 5 of each held out
    checked = invoke("tasks", "check", "gunpoint", "--include", folder, env={"COLUMNS": "200"}).stdout
    assert "majority class (training) 2: guessing it is right on 50.0% of validation" in " ".join(checked.split())
    block = re.search(r"```bash\n(.+?)\n```", (example / "README.md").read_text(), re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands[0] == "pip install aeon && python examples/small-data/export.py"
    runs = [c for c in commands[1:] if c.startswith("atnbench run ")]
    assert len(runs) == 3
    noted = []
    for command in runs:
        words = command.replace("examples/small-data", str(folder)).split()[1:]
        record = tmp_path / "r.json"
        result = ok(invoke(*words, "--iters", 2, "--eval-every", 1, "--store", tmp_path / "s.db", "-q", "-o", record))
        summary = json.loads(record.read_text())
        at_baseline = summary["min_val_loss"] >= (1 - MARGIN) * summary["baseline"]
        assert ("no-information baseline" in " ".join(result.stderr.split())) == at_baseline, command
        noted.append(at_baseline)
    assert noted[0]  # GunPoint after 2 steps: 0.69 against 0.69

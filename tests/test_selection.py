"""The test split never selects (#38, point 1): every place that reports a run's test numbers
gives them at the evaluation validation chose, the numbers `atnbench evaluate` gives for the
kept (best-validation) weights, never the best test score over the curve."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

from atnbench.run.selection import best_val_point, held_out_at_best_val, selected_summary
from atnbench.store import EvalPoint, ResultsStore


@pytest.fixture(autouse=True)
def _no_user_folders(monkeypatch):
    monkeypatch.setenv("ATNBENCH_TASKS", "")

from helpers import invoke as shared_invoke
from atnbench.evidence.identity import run_id_of


def invoke(*args, **options):
    return shared_invoke(*args, **{"env": {"COLUMNS": "200"}, **options})


def ok(result):
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


def test_the_first_lowest_validation_loss_chooses_and_a_non_finite_one_never_does():
    curve = (EvalPoint(1, 1.0, 2.0, 1.5, {"test_loss": 1.6, "test_accuracy": 0.2}),
             EvalPoint(2, 2.0, 1.0, 1.2, {"test_loss": 1.4, "test_accuracy": 0.4}),
             EvalPoint(3, 3.0, 0.5, 1.2, {"test_loss": 1.1, "test_accuracy": 0.9}),  # a tie: the first one kept
             EvalPoint(4, 4.0, 0.5, None, {"test_loss": 0.1, "test_accuracy": 1.0}))
    assert best_val_point(curve).step == 2
    assert held_out_at_best_val(curve) == {"test_loss": 1.4, "test_accuracy": 0.4}
    stored = {"test_accuracy": 1.0, "test_loss": 0.1, "val_accuracy": 0.7, "min_val_loss": 1.2}  # an old summary
    assert selected_summary(stored, curve) == {"test_accuracy": 0.4, "test_loss": 1.4, "val_accuracy": 0.7,
                                               "min_val_loss": 1.2, "best_step": 2}
    assert selected_summary(stored, ()) == stored  # nothing to select from: as stored


@pytest.fixture
def flipped_task(tmp_path):
    """Two classes told apart by their mean; the test file's labels are flipped, so the better the
    model fits train and validation, the worse it scores on test: test accuracy peaks at an early
    evaluation, far from the one validation chooses."""
    folder = tmp_path / "tasks"
    folder.mkdir()
    rng = np.random.default_rng(0)

    def part(n, flip=False):
        y = np.arange(n) % 2
        x = rng.normal(np.where(y == 1, 1.0, -1.0)[:, None, None], 0.7, (n, 4, 1)).astype(np.float32)
        return x, (1 - y) if flip else y

    for name, (x, y) in (("train", part(32)), ("val", part(32)), ("test", part(32, flip=True))):
        np.savez(folder / f"{name}.npz", x=x, y=y)
    (folder / "flipped.yaml").write_text(
        "problem: sequence-classification\ndata:\n  train: train.npz\n  validation: val.npz\n  test: test.npz\n"
        "defaults: {hidden: 8, batch_size: 8, lr: 0.003, steps: 16, eval_every: 2}\n")
    return folder


def test_every_report_of_a_run_gives_the_test_numbers_of_its_kept_weights(flipped_task, tmp_path):
    store, written = tmp_path / "s.db", tmp_path / "run.json"
    shown = ok(invoke("run", "flipped", "--include", flipped_task, "--norm", "ln", "--store", store, "-q",
                      "-o", written))
    record = json.loads(written.read_text())
    with ResultsStore(store) as results:
        curve = results.curve(record["run_id"])
    chosen = min(curve, key=lambda p: p.val_loss)
    best_test = max(p.metrics["test_accuracy"] for p in curve)
    assert best_test > chosen.metrics["test_accuracy"] + 0.2, [(p.step, p.val_loss, p.metrics) for p in curve]
    assert record["best_step"] == chosen.step != max(curve, key=lambda p: p.metrics["test_accuracy"]).step
    assert (record["test_accuracy"], record["test_loss"]) == (chosen.metrics["test_accuracy"],
                                                              chosen.metrics["test_loss"])  # one step, both

    scores = json.loads(ok(invoke("evaluate", record["run_id"], "--store", store, "--format", "json")).stdout)
    test = next(row for row in scores["scores"] if row["split"] == "test")
    assert scores["step"] == record["best_step"]
    assert (test["accuracy"], test["loss"]) == pytest.approx((record["test_accuracy"], record["test_loss"]),
                                                             rel=1e-6, abs=1e-9)

    assert f"test accuracy at best val. (step {chosen.step})" in shown.stdout
    assert f"{record['test_accuracy']:.5g}" in shown.stdout and f"{best_test:.5g}" not in shown.stdout.split(
        "test accuracy at best val.")[1].splitlines()[0]
    again = json.loads(ok(invoke("run", "flipped", "--include", flipped_task, "--norm", "ln", "--store", store,
                                 "--format", "json")).stdout)  # already in the store: its record again
    assert again["test_accuracy"] == record["test_accuracy"]
    show = json.loads(ok(invoke("runs", "show", record["run_id"], "--store", store, "--format", "json")).stdout)
    assert show["summary"]["test_accuracy"] == record["test_accuracy"]
    exported = list(csv.DictReader(io.StringIO(ok(invoke("runs", "export", "--store", store)).stdout)))
    assert float(exported[0]["summary.test_accuracy"]) == record["test_accuracy"]
    report = json.loads(ok(invoke("report", "--include", flipped_task, "--store", store, "--format", "json")).stdout)
    (table,) = report["tables"]
    keys = [column["key"] for column in table["columns"]]
    assert "test_accuracy_at_best_val" in keys and not any(key.startswith(("max_test", "min_test")) for key in keys)
    (row,) = [r for r in table["rows"] if r["kind"] == "model"]
    assert row["cells"]["test_accuracy_at_best_val"]["mean"] == record["test_accuracy"]


def test_an_old_summary_is_shown_at_the_evaluation_validation_chose(tmp_path):
    """A run stored before the rule (its summary held the best test score) reads right."""
    from atnbench.run.runspec import resolve_run

    configs = [resolve_run("adding", {"T": 8, "norm": "ln", "seed": seed}, budget=0.01) for seed in (0, 1)]
    config = configs[0]
    store = tmp_path / "old.db"
    with ResultsStore(store) as results:
        for old in configs:
            results.start_run(run_id_of(old), old.to_dict(), {"device": "cpu", "threads": 1})
            for step, val, test in ((1, 0.5, 0.4), (2, 0.2, 0.3), (3, 0.3, 0.1)):
                results.log_eval(run_id_of(old), step, float(step), 0.5, val, {"test_loss": test})
            results.finish_run(run_id_of(old), "done", {"test_loss": 0.1, "min_val_loss": 0.2})
    compared = ok(invoke("runs", "compare", *(run_id_of(c) for c in configs), "--store", store)).stdout
    assert any(line.split()[:3] == ["test_loss", "0.3", "0.3"] for line in compared.splitlines()), compared
    show = json.loads(ok(invoke("runs", "show", run_id_of(config), "--store", store, "--format", "json")).stdout)
    assert (show["summary"]["test_loss"], show["summary"]["best_step"]) == (0.3, 2)
    table = ok(invoke("runs", "show", run_id_of(config), "--store", store, "--no-chart")).stdout
    assert "best_step" in table
    exported = json.loads(ok(invoke("runs", "export", "--store", store, "--format", "json")).stdout)
    assert exported[0]["summary"]["test_loss"] == 0.3
    assert not math.isclose(exported[0]["summary"]["test_loss"], 0.1)


def test_a_sweep_shows_the_tasks_measure_at_validations_pick(flipped_task, tmp_path):
    """Sweep records and the sweep's table: the task's own measure (#38, point 5), its test value
    at the evaluation validation chose (point 1)."""
    grid = tmp_path / "two.yaml"
    grid.write_text("description: two models on the flipped task\ntask: flipped\n"
                    "base: {T: 4}\ngrid:\n  norm: [none, ln]\nseeds: [0]\n")
    store = tmp_path / "s.db"
    result = ok(invoke("sweep", grid, "--include", flipped_task, "--store", store, "--workers", 1, "-q",
                       "--format", "json"))
    records = json.loads(result.stdout)["runs"]
    with ResultsStore(store) as results:
        for record in records:
            assert record["test_accuracy"] == held_out_at_best_val(results.curve(record["run_id"]))["test_accuracy"]
    table = ok(invoke("sweep", grid, "--include", flipped_task, "--store", store, "-q",
                      env={"COLUMNS": "250"})).stdout  # all skipped now; wide enough for one line a run
    assert "best val accuracy" in table and "test accuracy at best val." in table
    ln = next(r for r in records if r["norm"] == "ln")
    assert f"{ln['test_accuracy']:.4g}" in next(line for line in table.splitlines() if ln["run_id"] in line)


def test_a_sweeps_live_line_names_the_tasks_measure():
    from atnbench.sweep.runner import outcome_of
    from atnbench.sweep.view import SweepView

    stream = io.StringIO()
    view = SweepView("t", total=2, skipped=0, labels={"a": "mine ln"}, live=False, stream=stream)
    summary = {"metric": "mae", "val_mae": 0.125, "test_mae": 0.5, "min_val_loss": 0.03, "steps": 4, "wall_s": 1.0}
    view.finished("a", outcome_of("a", "done", summary))
    assert "min val 0.03  min val MAE 0.125" in stream.getvalue()

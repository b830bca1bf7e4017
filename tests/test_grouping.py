"""Honest grouping (issue 11): a report row holds runs that differ in nothing but the seed."""

from __future__ import annotations

import pytest

from atnbench.evidence.identity import code_fingerprint
from atnbench.report.aggregate import RunData, aggregate
from atnbench.report.render import group_view
from atnbench.store import ResultsStore
from atnbench.sweep import expand, load_sweep
from atnbench.evidence.identity import run_id_of


def record_sweeps(store: ResultsStore, names, loss_of, code=None) -> None:
    """Every run of the named presets recorded as done with a two-point curve (no training)."""
    for name in names:
        for run in expand(load_sweep(name)):
            config = run.config
            store.start_run(run.run_id, config.to_dict(), {"code": code or code_fingerprint()}, sweep=name)
            loss = loss_of(config)
            store.log_eval(run.run_id, 100, 1.0, 2 * loss, 2 * loss)
            store.log_eval(run.run_id, 200, 2.0, loss, loss)
            store.finish_run(run.run_id, "done", {"baseline": 0.167})


def loss_of(config) -> float:
    inside = {True: 0.001, False: 0.005, None: 0.001}[config.bias_inside]
    return {"none": 0.004, "ln": 0.002, "atn": 0.0015}[config.norm] + inside * (config.norm != "none") + config.seed * 1e-5


@pytest.fixture
def groups(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # only the package's own presets
    with ResultsStore(tmp_path / "s.db") as store:
        record_sweeps(store, ("table2-adding", "bias-placement"), loss_of)
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()]
    return {group.T: group for group in aggregate(runs)}


def test_bias_placements_are_separate_rows_and_only_the_papers_is_compared(groups):
    t100 = groups[100]
    labels = [row.label for row in t100.rows]
    assert labels == ["lstm", "ln (bias inside)", "ln (bias outside)", "atn (bias inside)", "atn (bias outside)"]
    for row in t100.rows:
        assert row.seeds == (0, 1, 2)  # each row: one run per seed, nothing pooled
        values = row.stats["min_val_loss"].values
        assert max(values) - min(values) < 1e-4  # the bias-outside runs (+0.004) never join a bias-inside row
    view = group_view(t100, with_paper=True)
    compared = {row.label: row.paper_model for row in view.rows if row.kind == "model"}
    assert compared == {"lstm": "lstm", "ln (bias inside)": "ln", "atn (bias inside)": "atn",
                        "ln (bias outside)": None, "atn (bias outside)": None}
    notes = " ".join(view.notes)
    assert "ln (bias outside): not compared with Table 2, T=100: bias outside (paper: bias inside)" in notes
    assert "full protocol" in view.title
    # T=200 holds only Table 2's runs: one row per model
    assert [row.label for row in groups[200].rows] == ["lstm", "ln", "atn"]


def test_stale_rows_are_marked_and_not_compared(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with ResultsStore(tmp_path / "s.db") as store:
        record_sweeps(store, ("table2-adding",), loss_of, code="0" * 16)
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()]
    group = {g.T: g for g in aggregate(runs)}[100]
    assert [row.label for row in group.rows] == ["lstm (stale †)", "ln (stale †)", "atn (stale †)"]
    assert any("stale" in note and "re-runs them" in note for note in group.notes)
    view = group_view(group, with_paper=True)
    assert all(row.paper_model is None for row in view.rows if row.kind == "model")


def test_test_loss_is_taken_at_the_best_validation_evaluation():
    from atnbench.report.aggregate import run_values
    from atnbench.store import EvalPoint, RunRecord

    record = RunRecord("r", "ptb-char", 50, "ln", 10, 0, 1.0, "done", {}, {}, {}, None, "", "")
    curve = (EvalPoint(1, 1.0, 2.0, 1.5, {"test_loss": 1.6}), EvalPoint(2, 2.0, 1.0, 1.2, {"test_loss": 1.4}),
             EvalPoint(3, 3.0, 0.5, 1.3, {"test_loss": 1.1}))
    values = run_values(RunData(record, curve))
    assert values["test_loss_at_best_val"] == 1.4  # not the test minimum 1.1: that would select on test
    assert "min_test_loss" not in values and "final_test_loss" not in values and values["min_val_loss"] == 1.2


def test_test_at_best_val_is_shown_in_the_tasks_measure(tmp_path, monkeypatch):
    """ptb-char's table is in bits per character: its test-at-best-validation column too, not in nats."""
    import math

    from atnbench.run.runspec import resolve_run

    monkeypatch.chdir(tmp_path)
    with ResultsStore(tmp_path / "s.db") as store:
        config = resolve_run("ptb-char", {"norm": "ln"}, budget=0.01)
        store.start_run(run_id_of(config), config.to_dict(), {"code": code_fingerprint()})
        for step, val, test in ((720, 1.3, 1.25), (1080, 1.2, 1.18)):
            store.log_eval(run_id_of(config), step, 1.0, 1.4, val, {"val_bpc": val / math.log(2), "test_loss": test,
                                                                "test_bpc": test / math.log(2)})
        store.finish_run(run_id_of(config), "done", {})
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()]
    view = group_view(aggregate(runs)[0], with_paper=True)
    column = next(c for c in view.columns if "at best val" in c.label)
    assert column.key == "test_bpc_at_best_val" and column.label == "test bpc at best val."
    row = next(r for r in view.rows if r.kind == "model")
    assert row.cells[column.key].mean == pytest.approx(1.18 / math.log(2))


def test_raw_wikitext_is_not_compared_with_table_5(tmp_path, monkeypatch):
    from atnbench.run.runspec import resolve_run

    monkeypatch.chdir(tmp_path)
    with ResultsStore(tmp_path / "s.db") as store:
        for variant in (None, "raw"):
            config = resolve_run("wikitext2", {"norm": "ln"}, variant=variant)
            store.start_run(run_id_of(config), config.to_dict(), {"code": code_fingerprint()})
            store.log_eval(run_id_of(config), 933, 1.0, 5.0, 4.8)
            store.finish_run(run_id_of(config), "done", {})
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()]
    views = {g.variant: group_view(g, with_paper=True) for g in aggregate(runs)}
    assert set(views) == {None, "raw"}
    assert views["raw"].comparable is False
    assert any("preset variant raw" in note for note in views["raw"].notes)
    assert not any("preset variant" in note for note in views[None].notes)


def test_a_row_of_diverged_runs_only_does_not_make_a_table_full_protocol(tmp_path):
    """A table of runs at hidden 8 is "own protocol"; a diverged run (no numbers) at the preset's
    sizes shows nothing it follows, so it does not make the table "full protocol"."""
    from atnbench.report.paper import protocol_label
    from atnbench.run.runspec import resolve_run

    with ResultsStore(tmp_path / "s.db") as store:
        for flags, status in (({"hidden": 8}, "done"), ({"lr": 0.5}, "diverged")):
            config = resolve_run("adding", {"T": 100, "norm": "ln", **flags}, budget=1.0)
            run_id = run_id_of(config)
            store.start_run(run_id, config.to_dict(), {"code": code_fingerprint()})
            if status == "done":
                store.log_eval(run_id, 100, 1.0, 0.1, 0.1)
            store.finish_run(run_id, status, {"baseline": 0.167})
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()]
    (group,) = aggregate(runs)
    label, differences = protocol_label(group)
    assert label == "own protocol" and any("hidden 8" in d for d in differences), (label, differences)

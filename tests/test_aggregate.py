"""Grouping and per-row statistics that the aggregation tests left open (mutation pass over
atnbench/report/aggregate.py): every identity setting keeps runs apart, failed runs are counted
and never shown, a missing metric is not a zero, and the tables, labels and baselines are the
ones the module documents."""

from __future__ import annotations

import hashlib

import pytest

from atnbench.evidence.identity import code_fingerprint
from atnbench.report.aggregate import RunData, aggregate, budget_label, k_ablations, mean_std, run_values
from atnbench.run.runspec import resolve_run
from atnbench.store import EvalPoint, ResultsStore, RunRecord
from atnbench.evidence.identity import run_id_of

CURRENT = code_fingerprint()


def run(norm, seed, level, *, task="copying", T=100, k=None, status="done", budget=1.0, code=CURRENT,
        summary=None, curve=None, record_budget=True, run_id=None, **config):
    """A stored run built by hand: a two-point curve whose minima are ``level`` (train and validation)."""
    config = {"norm": norm, "cell": "lstm", "budget": budget if record_budget else None,
              **({"k": k} if k is not None else {}), **config}
    if run_id is None:
        run_id = hashlib.sha256(repr((task, T, norm, k, seed, status, budget, code, sorted(config.items(), key=str)))
                                .encode()).hexdigest()[:12]
    if curve is None:
        curve = (EvalPoint(100, 1.0, 2 * level, 2 * level, {}), EvalPoint(200, 2.0, level, level, {}))
    record = RunRecord(run_id, task, T, norm, k, seed, budget if record_budget else None, status, config,
                       {"code": code} if code else {}, summary or {}, None, "", "")
    return RunData(record, curve)


@pytest.mark.parametrize("setting, a, b", [
    ("eps", 1e-5, 1e-3),
    ("lr", 1e-3, 1e-2),
    ("init", "atn", "torch"),
    ("threads", 1, 2),
    ("hidden", 128, 64),
    ("options", {}, {"permute": True}),
])
def test_runs_that_differ_in_any_identity_setting_are_never_pooled(setting, a, b):
    runs = [run("ln", s, 0.5 + 0.01 * s, **{setting: a}) for s in range(2)]
    runs += [run("ln", s, 0.1 + 0.01 * s, **{setting: b}) for s in range(2)]
    (group,) = aggregate(runs, {})
    assert len(group.rows) == 2 and all(row.model == "ln" for row in group.rows)
    assert len({row.label for row in group.rows}) == 2  # the label names the setting that tells them apart
    for row in group.rows:
        assert row.seeds == (0, 1)
        values = row.stats["min_val_loss"].values
        assert max(values) - min(values) < 0.05  # never a 0.1 run beside a 0.5 run


def test_failed_and_running_runs_are_counted_in_the_notes_and_never_make_a_row():
    runs = [run("none", s, 0.5) for s in range(2)]
    runs += [run("ln", 0, 0.4, status="failed"), run("ln", 1, 0.4, status="running"), run("atn", 0, 0.3, k=45, status="failed")]
    runs += [run("none", 0, 0.5, T=200), run("ln", 0, 0.4, T=200, status="failed")]
    groups = {g.T: g for g in aggregate(runs, {})}
    assert [row.label for row in groups[100].rows] == ["lstm"]
    assert "not shown: 2 failed, 1 running runs" in groups[100].notes
    assert [row.label for row in groups[200].rows] == ["lstm"]
    assert "not shown: 1 failed run" in groups[200].notes


def test_a_gru_and_an_lstm_with_the_same_normalization_are_different_models():
    runs = [run("ln", s, 0.5) for s in range(2)] + [run("ln", s, 0.1, cell="gru") for s in range(2)]
    (group,) = aggregate(runs, {})
    assert sorted((row.label, row.model, row.cell) for row in group.rows) == [("gru-ln", "gru-ln", "gru"),
                                                                              ("ln", "ln", "lstm")]


def test_rows_recorded_before_code_fingerprints_are_named_in_a_note():
    runs = [run("ln", s, 0.5, code=None) for s in range(2)] + [run("none", s, 0.9) for s in range(2)]
    (group,) = aggregate(runs, {})
    (note,) = [n for n in group.notes if "before code fingerprints" in n]
    assert note.endswith(": ln")  # the fingerprinted lstm row is not named
    current_only = aggregate([run("none", s, 0.9) for s in range(2)], {})[0]
    assert not any("before code fingerprints" in n for n in current_only.notes)


def test_a_rows_runs_ids_seeds_and_values_are_its_done_runs_in_run_order():
    runs = [run("ln", s, 1.5 - s) for s in range(2)] + [run("ln", 2, 0.7, status="diverged")]
    (group,) = aggregate(runs, {})
    (row,) = group.rows
    done_ids = tuple(r.record.run_id for r in runs[:2])
    assert row.seeds == (0, 1) and row.diverged_seeds == (2,)
    assert row.run_ids == done_ids  # one id per seed, as the seeds
    assert row.stats["min_val_loss"].values == (1.5, 0.5)  # seed 0's, then seed 1's
    assert tuple(r.record.run_id for r in group.runs["ln"]) == done_ids  # what the curve plot draws and counts


def test_runs_that_share_a_seed_in_one_row_are_noted():
    runs = [run("ln", 0, 0.5, run_id="a"), run("ln", 0, 0.6, run_id="b"), run("ln", 1, 0.7, run_id="c")]
    (group,) = aggregate(runs, {})
    assert group.rows[0].seeds == (0, 0, 1)
    assert any(note.startswith("ln: several runs share seed 0") for note in group.notes)


def test_the_recorded_baseline_is_used_when_none_is_given():
    runs = [run("ln", s, 0.5, summary={"baseline": 0.167}) for s in range(2)]
    assert aggregate(runs)[0].baseline == 0.167
    assert aggregate(runs, {("copying", 100): 0.2})[0].baseline == 0.2  # a given one wins


def test_a_run_without_a_metric_is_left_out_of_that_metrics_mean():
    with_test = (EvalPoint(100, 1.0, 1.0, 1.0, {"test_loss": 0.75}), EvalPoint(200, 2.0, 0.5, 0.5, {"test_loss": 0.5}))
    runs = [run("ln", 0, 0.5, curve=with_test), run("ln", 1, 0.5)]  # seed 1 logged no test loss
    (group,) = aggregate(runs, {})
    stats = group.rows[0].stats
    assert (stats["test_loss_at_best_val"].mean, stats["test_loss_at_best_val"].n) == (0.5, 1)
    assert stats["min_val_loss"].n == 2


def test_the_mean_is_the_mean_not_the_median():
    assert mean_std([1.0, 2.0, 6.0]).mean == 3.0
    runs = [run("ln", s, level) for s, level in enumerate((0.125, 0.25, 1.0))]
    assert aggregate(runs, {})[0].rows[0].stats["min_val_loss"].mean == 0.4583333333333333


def test_a_run_with_no_recorded_budget_is_full_protocol_and_full_protocol_comes_first():
    runs = [run("ln", 0, 0.5, record_budget=False)]  # no budget column, config budget None (older records)
    (group,) = aggregate(runs, {})
    assert group.budget == 1.0 and not group.reduced
    mixed = [run("ln", 0, 0.5, budget=0.05), run("ln", 0, 0.5, budget=1.0)]
    assert [g.budget for g in aggregate(mixed, {})] == [1.0, 0.05]  # the full protocol's table first
    assert budget_label(1.0) == "full protocol" and budget_label(0.05) == "reduced budget (5%)"


def test_k_ablation_references_are_the_rows_without_a_window():
    runs = [run("atn", s, 0.1 * k / 25, k=k) for k in (25, 45) for s in range(2)]
    runs += [run("atn-bn", s, 0.3, k=25) for s in range(2)] + [run("ln", s, 0.5) for s in range(2)]
    views = {view.model: view for view in k_ablations(aggregate(runs, {}))}
    assert set(views) == {"atn", "atn-bn"}
    assert [row.label for row in views["atn"].references] == ["ln"]  # not the atn-bn row
    assert [row.label for row in views["atn-bn"].references] == ["ln"]


def test_rows_without_a_window_have_no_k(tmp_path):
    with ResultsStore(tmp_path / "s.db") as store:
        for norm, flags in (("ln", {}), ("none", {}), ("atn", {"k": 45})):
            config = resolve_run("copying", {"T": 100, "norm": norm, **flags}, budget=0.01)
            store.start_run(run_id_of(config), config.to_dict(), {"code": CURRENT})
            store.log_eval(run_id_of(config), 100, 1.0, 0.5, 0.5)
            store.finish_run(run_id_of(config), "done", {})
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()]
    (group,) = aggregate(runs, {})
    assert {row.label: row.k for row in group.rows} == {"lstm": None, "ln": None, "atn": 45}


def test_final_losses_are_the_last_evaluations_not_an_earlier_one():
    """A last evaluation without a validation loss has no final validation loss; an earlier one is not it."""
    curve = (EvalPoint(100, 1.0, 1.0, 0.5, {"val_bpc": 0.7}), EvalPoint(200, 2.0, 0.8, None, {"val_bpc": None}))
    values = run_values(run("ln", 0, 0.5, curve=curve))
    assert values["final_train_loss"] == 0.8 and values["min_val_loss"] == 0.5
    assert "final_val_loss" not in values and "final_val_bpc" not in values


def test_a_curve_without_validation_losses_falls_back_to_the_summarys_minimum():
    curve = (EvalPoint(100, 1.0, 1.0, None, {}), EvalPoint(200, 2.0, 0.8, None, {}))
    values = run_values(run("ln", 0, 0.5, curve=curve, summary={"min_val_loss": 0.6}))
    assert values["min_val_loss"] == 0.6 and values["min_train_loss"] == 0.8


def test_only_test_metrics_are_taken_at_the_best_validation():
    curve = (EvalPoint(100, 1.0, 1.0, 0.5, {"val_bpc": 0.7, "test_bpc": 0.8}),)
    values = run_values(run("ln", 0, 0.5, curve=curve))
    assert {key for key in values if key.endswith("_at_best_val")} == {"test_bpc_at_best_val"}


def test_rows_of_two_stale_code_versions_are_told_apart():
    runs = [run("ln", s, level, code=code) for code, level in (("0" * 16, 0.5), ("1" * 16, 0.25), (CURRENT, 0.1))
            for s in range(2)]
    (group,) = aggregate(runs, {})
    labels = [row.label for row in group.rows]
    assert len(labels) == 3 and len(set(labels)) == 3  # "each row's label names the settings that tell them apart"
    assert sum(len(runs) for runs in group.runs.values()) == 6  # no row's runs lost from the plots and verdicts
    assert "ln (stale 00000000 †)" in labels and "ln (stale 11111111 †)" in labels


def test_rows_whose_labels_read_alike_are_numbered_not_merged():
    runs = [run("ln", s, 0.5, eps=1e-5) for s in range(2)] + [run("ln", s, 0.1, eps=1.0000001e-5) for s in range(2)]
    (group,) = aggregate(runs, {})
    assert [row.label for row in group.rows] == ["ln (eps=1e-05)", "ln (eps=1e-05) #2"]
    assert sum(len(runs) for runs in group.runs.values()) == 4


def test_a_later_setting_at_its_neutral_value_still_names_the_rows_it_tells_apart():
    """A setting added after the first runs is absent from a run's identity at its neutral value:
    when the first row was that run, the setting was never found "varied" and the rows read
    `ln` / `ln #2`; they read `ln (patience=0)` / `ln (patience=3)`."""
    runs = [run("ln", s, 0.5) for s in range(2)] + [run("ln", s, 0.4, patience=3) for s in range(2)]
    (group,) = aggregate(runs, {})
    assert sorted(row.label for row in group.rows) == ["ln (patience=0)", "ln (patience=3)"]


def test_rows_on_one_validation_subset_are_judged_against_its_baseline_whatever_other_rows_ran():
    """A task of your own whose baseline is measured on the validation split: atn and ln validated
    on the whole split (baseline 1.0), three unrelated lstm runs on 5 sequences (baseline 2.0).
    The group shows the baseline most runs share, but atn and ln stay at theirs: the claim on them
    stays "uninformative" (with the group's 2.0 they had "left the baseline")."""
    from atnbench.report.verdicts import compare, rows_at_baseline

    given = {("mine", 100, 20): 1.0, ("mine", 100, 5): 2.0, ("mine", 100, 100): 1.0}
    runs = [run(norm, s, 0.99, task="mine", val_samples=20) for norm in ("atn", "ln") for s in range(3)]
    runs += [run("none", s, 1.99, task="mine", val_samples=5) for s in range(7)]
    runs.append(run("none", 9, 0.99, task="mine", val_samples=100))  # the whole split too: the same subset
    (group,) = aggregate(runs, given)
    assert group.baseline == 1.0  # 7 runs at 5 against 7 on the whole split (asked as 20 or as 100): the tie's larger
    group = aggregate(runs[:-1], given)[0]
    assert group.baseline == 2.0 and group.baseline_of("atn") == group.baseline_of("ln") == 1.0
    assert rows_at_baseline(group) == {"atn": True, "ln": True, "lstm": True}
    [note] = [note for note in group.notes if note.startswith("baseline 2: ")]
    assert "atn against 1 (the 20 validation sequences it validates on)" in note and "ln against 1 (the 20 " in note
    values = [0.99, 0.985, 0.995]
    said = compare(values, values, labels=("atn", "ln"), baseline=(group.baseline_of("atn"), group.baseline_of("ln")),
                   task="mine")
    assert said.verdict.startswith("uninformative") and "no-information baseline 1 " in said.reason, said
    assert "no-memory baseline" in compare(values, values, baseline=1.0, task="copying").reason  # a shipped task


def test_runs_stored_without_val_samples_validated_on_the_whole_split():
    """Old runs carry no val_samples: the whole split, the larger subset at a tie (it was taken for
    a subset of 0 sequences); where a subset's runs recorded two baselines, the note and the row's
    judgement use the same one."""
    from atnbench.report.verdicts import rows_at_baseline

    runs = [run("atn", s, 0.99, task="mine", summary={"baseline": 1.0}) for s in range(3)]  # no val_samples
    runs += [run("ln", s, 1.99, task="mine", val_samples=5, summary={"baseline": 2.0}) for s in range(3)]
    (group,) = aggregate(runs, {})
    assert group.baseline == 1.0 and group.baseline_of("ln") == 2.0
    [note] = [note for note in group.notes if note.startswith("baseline 1: ")]
    assert "on the whole validation split 3 of the 6 runs" in note and "ln against 2 (the 5 validation sequences" in note
    runs += [run("ln", 7, 1.99, task="mine", val_samples=5, summary={"baseline": 1.5})]  # one of them recorded another
    (group,) = aggregate(runs, {})
    [note] = [note for note in group.notes if note.startswith("baseline ")]  # 4 runs at 5 now: theirs shown
    assert group.baseline == group.baseline_of("ln") == 2.0 and group.baseline_of("atn") == 1.0
    assert note.startswith("baseline 2: ") and "atn against 1 (the whole validation split it validates on)" in note
    assert rows_at_baseline(group) == {"atn": True, "ln": True}


def test_a_comparison_of_rows_validated_on_different_sequences_is_not_read_as_a_difference():
    """Own task: a row on the first 5 validation sequences against one on all 20 (other
    sequences, another baseline): the gap was reported as g -11, p 3e-05, "exploratory"."""
    from atnbench.report.verdict_tables import _claim_baseline
    from atnbench.report.verdicts import ClaimResult, compare

    low, high = [0.5, 0.51, 0.52, 0.5, 0.49], [2.0, 2.1, 1.9, 2.05, 1.95]
    said = compare(low, high, labels=("atn", "ln (val_samples=5)"), baseline=(1.0, 2.0), task="mine")
    assert said.verdict.startswith("uninformative") and "validated on different sequences" in said.reason, said
    assert said.baselines == (1.0, 2.0)
    on_training = compare(low, high, stat="min_train_loss", baseline=(1.0, 2.0), task="mine")
    assert not on_training.verdict.startswith("uninformative")  # the training split is the same for both
    same = compare(low, high, baseline=(1.0, 1.0), task="mine")
    assert same.baselines == (1.0, 1.0) and not same.verdict.startswith("uninformative")
    group = aggregate([run("atn", s, 0.5, task="mine", val_samples=20, summary={"baseline": 1.0}) for s in range(3)]
                      + [run("ln", s, 2.0, task="mine", val_samples=5, summary={"baseline": 2.0}) for s in range(4)], {})[0]
    assert group.baseline == 2.0  # the table's: the subset most runs share
    result = ClaimResult(claim=None, group=group, design="exploratory")
    result.comparisons.append(compare(low, low, baseline=(group.baseline_of("atn"), group.baseline_of("atn"))))
    assert _claim_baseline(result) == 1.0  # what the claim's sides were judged against, not the table's 2.0


def test_sides_on_disjoint_processor_classes_get_no_interval():
    """All of one side on the C++ path, all of the other on the loop: no class to compare within,
    so no test; the report printed the difference's interval as [d, d] (QA)."""
    from atnbench.report.verdicts import compare

    a, b = [0.10, 0.12, 0.11, 0.13, 0.09], [0.12, 0.14, 0.13, 0.11, 0.15]
    said = compare(a, b, classes=(["AVX512"] * 5, ["AVX512 loop"] * 5))
    assert said.diff is not None and said.diff_ci is None and said.p_value is None
    assert "not tested" in said.reason, said.reason
    assert compare(a, b).diff_ci is not None  # one class: tested as before
    from atnbench.report.verdict_tables import diff_text

    assert diff_text(said).endswith("(not tested)")

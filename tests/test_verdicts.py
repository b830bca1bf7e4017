"""Statistical verdicts on the paper's claims: the rules on constructed data where the answer is
known, the claims file, and `atnbench report --verdicts` / `--baseline-margin`."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from atnbench.report.aggregate import RunData, aggregate
from atnbench.report.render import group_view
from atnbench.report.verdicts import (
    ALPHA,
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_RUN,
    REPRODUCED,
    UNINFORMATIVE,
    Claim,
    Side,
    at_baseline,
    combine,
    compare,
    evaluate,
    load_claims,
    matching_rows,
    parse_side,
    paper_claims,
    rows_at_baseline,
    summarize,
)
from atnbench.runspec import resolve_run
from atnbench.store import EvalPoint, ResultsStore, RunRecord
from helpers import invoke

COPYING_BASELINE = 10 * math.log(8) / 120  # copying T=100: 0.1733


# --- the rules --------------------------------------------------------------------------------------

def test_clearly_separated_groups_are_reproduced():
    c = compare([0.10, 0.11, 0.12], [0.20, 0.21, 0.22], labels=("atn", "ln"))
    assert c.verdict == REPRODUCED and c.p_value < 0.001
    assert c.diff == pytest.approx(-0.10) and c.diff_ci[1] < 0


def test_identical_groups_are_inconclusive():
    c = compare([0.1, 0.2, 0.3], [0.1, 0.2, 0.3])
    assert c.verdict == INCONCLUSIVE and c.p_value == pytest.approx(1.0) and c.diff == 0


def test_reversed_groups_are_contradicted():
    c = compare([0.20, 0.21, 0.22], [0.10, 0.11, 0.12])
    assert c.verdict == CONTRADICTED and c.diff > 0 and c.diff_ci[0] > 0


def test_both_rows_at_baseline_are_uninformative_even_when_a_test_would_separate_them():
    b = COPYING_BASELINE
    c = compare([0.98 * b, 0.985 * b, 0.99 * b], [1.01 * b, 1.02 * b, 1.03 * b], baseline=b)
    assert c.verdict == UNINFORMATIVE and c.p_value is None
    # the same numbers without a baseline: a significant, separated difference
    assert compare([0.98 * b, 0.985 * b, 0.99 * b], [1.01 * b, 1.02 * b, 1.03 * b]).verdict == REPRODUCED


def test_one_row_below_the_baseline_is_compared():
    b = COPYING_BASELINE
    assert compare([0.5 * b, 0.52 * b, 0.54 * b], [b, 1.01 * b, 1.02 * b], baseline=b).verdict == REPRODUCED


def test_too_few_seeds_is_inconclusive():
    assert compare([0.1], [0.5, 0.6]).verdict == INCONCLUSIVE


def test_welch_numbers_match_the_textbook():
    # a = 1, 2, 3 and b = 4, 5, 6: difference -3, standard error sqrt(1/3 + 1/3), t = -3.674 on
    # 4 degrees of freedom: p = 0.0213, 95% CI -3 ± 2.776 * 0.8165
    c = compare([1, 2, 3], [4, 5, 6])
    assert c.p_value == pytest.approx(0.0213, abs=1e-4)
    assert c.diff_ci == pytest.approx((-5.267, -0.733), abs=1e-3)
    cell = summarize([1, 2, 3])  # 2 ± 4.303 / sqrt(3)
    assert (cell.mean, cell.std) == (2, 1) and cell.ci == pytest.approx((-0.484, 4.484), abs=1e-3)


def test_higher_is_better_statistics_compare_the_other_way():
    assert compare([0.9, 0.91, 0.92], [0.5, 0.51, 0.52], stat="max_val_accuracy").verdict == REPRODUCED


def test_the_threshold_is_five_percent_and_p_at_it_is_not_enough():
    assert ALPHA == 0.05
    separated_but_noisy = compare([0.10, 0.12, 0.14], [0.15, 0.16, 0.20])  # seeds apart, p = 0.064
    assert separated_but_noisy.verdict == INCONCLUSIVE and 0.05 < separated_but_noisy.p_value < 0.1
    p = compare([1, 2, 3], [4, 5, 6]).p_value
    assert compare([1, 2, 3], [4, 5, 6], alpha=p).verdict == INCONCLUSIVE  # "p < alpha", not "<="


def test_seeds_that_tie_count_half_in_the_probability_of_improvement():
    c = compare([0.10, 0.11, 0.12, 0.20], [0.20, 0.28, 0.29, 0.30])  # p = 0.006; both have a 0.20
    assert c.p_improve == pytest.approx(15.5 / 16) and c.verdict == REPRODUCED


def test_a_clear_difference_the_other_way_is_contradicted_despite_overlap():
    c = compare(list(range(8, 28)), list(range(0, 20)))
    assert c.p_value < 0.001 and c.verdict == CONTRADICTED and c.p_improve_ci[1] < 0.5


def test_two_seeds_a_side_are_enough_for_a_test():
    assert compare([0.10, 0.11], [0.20, 0.21]).verdict == REPRODUCED


def test_the_test_is_welchs_not_students():
    # unequal spreads and sizes: Student's pooled variance gives p = 0.002, Welch's p = 0.19
    c = compare([0.1, 0.3, 0.5], [0.52 + 0.001 * i for i in range(10)])
    assert c.verdict == INCONCLUSIVE and c.p_value == pytest.approx(0.19, abs=0.01)


def test_one_constant_side_is_still_a_t_test(recwarn):
    c = compare([0.1, 0.1, 0.1], [0.11, 0.5, 2.0])
    assert c.verdict == INCONCLUSIVE and c.p_value == pytest.approx(0.31, abs=0.01)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]  # nothing on a user's stderr


def test_two_constant_sides_are_decided_by_their_difference():
    assert compare([0.1] * 3, [0.2] * 3).verdict == REPRODUCED
    assert compare([0.1] * 3, [0.1] * 3).verdict == INCONCLUSIVE


def test_higher_is_better_statistics_are_shown_as_measured():
    c = compare([0.9, 0.91, 0.92], [0.5, 0.51, 0.52], stat="max_val_accuracy")
    assert c.diff == pytest.approx(0.40) and c.diff_ci[0] > 0 and c.a.mean == pytest.approx(0.91)


def test_non_finite_values_are_left_out():
    c = compare([0.10, 0.11, 0.12, math.nan, math.inf], [0.20, 0.21, 0.22])
    assert c.verdict == REPRODUCED and c.a.n == 3

@pytest.mark.parametrize("values, margin, expected", [
    ([0.96, 1.2], 0.05, True),   # 4% below: within the margin
    ([0.94, 1.2], 0.05, False),  # one seed 6% below: it learned something
    ([0.94], 0.10, True),
    ([1.5], 0.05, True),         # above the baseline is no better
    ([0.95], 0.05, True),        # exactly at the margin still counts as at the baseline
])
def test_at_baseline(values, margin, expected):
    assert at_baseline(values, 1.0, margin) is expected


def test_at_baseline_needs_a_baseline_and_values():
    assert at_baseline([0.1], None) is None and at_baseline([], 1.0) is None


def test_combine():
    assert combine([REPRODUCED, REPRODUCED]) == REPRODUCED
    assert combine([REPRODUCED, CONTRADICTED]) == CONTRADICTED
    assert combine([UNINFORMATIVE, UNINFORMATIVE]) == UNINFORMATIVE
    assert combine([UNINFORMATIVE, REPRODUCED]) == INCONCLUSIVE
    assert combine([]) == NOT_RUN


# --- claims -----------------------------------------------------------------------------------------

def test_the_claims_file_holds_the_papers_tables_and_ablations():
    claims = {c.id: c for c in paper_claims()}
    assert {"copying-T100", "adding-T100", "denoise-T200", "k45-best", "bias-outside", "ptb-char"} <= set(claims)
    table1 = claims["copying-T100"]
    assert [(a.text, b.text) for a, b in table1.pairs] == [("atn k=45", "ln"), ("ln", "lstm")]
    assert [(a.text, b.text) for a, b in claims["k45-best"].pairs] == [("atn k=45", "atn k=25"), ("atn k=45", "atn k=65")]
    assert parse_side("ln bias_inside=false").settings == (("bias_inside", False),)


def test_a_claim_without_comparisons_is_rejected(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("claims:\n  - {id: x, claim: x, source: x, task: copying, order: [atn]}\n")
    with pytest.raises(ValueError, match="claim x: no comparison"):
        load_claims(path)


def record(norm, k, seed, value, variant=None, T=100, task="copying", bias_inside=None):
    config = {"norm": norm, "cell": "lstm", "variant": variant, "bias_inside": bias_inside, "budget": 1.0}
    return RunData(RunRecord(
        run_id=f"{task}{T}{norm}{k}{seed}{variant}{bias_inside}", task=task, T=T, norm=norm, k=k, seed=seed,
        budget=1.0, status="done", config=config, env={}, summary={"min_val_loss": value, "min_train_loss": value},
        error=None, created_at="", updated_at=""))


def test_each_protocol_gets_its_own_verdict():
    b = COPYING_BASELINE
    learned = [("atn", 45, 0.30), ("ln", None, 0.60), ("none", None, 0.97)]  # fractions of the baseline
    stuck = [("atn", 45, 0.99), ("ln", None, 0.995), ("none", None, 1.0)]
    runs = [record(norm, k, seed, b * (level + 0.01 * seed)) for norm, k, level in learned for seed in range(3)]
    runs += [record(norm, k, seed, b * (level + 0.001 * seed), variant="paper-text")
             for norm, k, level in stuck for seed in range(3)]
    groups = aggregate(runs, {("copying", 100): b})
    results, not_run = evaluate(paper_claims(), groups)
    verdicts = {(r.claim.id, r.group.variant): r.verdict for r in results}
    assert verdicts[("copying-T100", None)] == REPRODUCED
    assert verdicts[("copying-T100", "paper-text")] == UNINFORMATIVE
    assert "adding-T100" in {c.id for c in not_run} and "k45-best" in {c.id for c in not_run}
    # the table marks the rows at baseline and says so
    default, text = (group_view(g) for g in groups)
    assert [(row.label, row.at_baseline) for row in default.rows if row.kind == "model"] == [
        ("lstm", True), ("ln", False), ("atn", False)]
    assert all(row.at_baseline for row in text.rows if row.kind == "model")
    assert any(note.startswith("≈ at baseline") and "lstm" in note for note in default.notes)


def test_sides_select_rows_by_setting():
    runs = [record("atn", 10, s, 0.5 + 0.01 * s, T=784, task="smnist-noise", bias_inside=False) for s in range(3)]
    runs += [record("ln", None, s, 2.3 + 0.001 * s, T=784, task="smnist-noise", bias_inside=False) for s in range(3)]
    results, _ = evaluate([c for c in paper_claims() if c.id == "bias-outside"], aggregate(runs, {}))
    assert [r.verdict for r in results] == [REPRODUCED]
    inside = [record("atn", 10, s, 0.5, T=784, task="smnist-noise") for s in range(3)]  # default: bias inside
    assert evaluate([c for c in paper_claims() if c.id == "bias-outside"], aggregate(inside, {}))[0] == []


def test_a_side_without_a_setting_means_the_default_row():
    """bias-placement puts bias-outside LN and ATN rows in the adding group beside the default
    ones: "ATN < LN < LSTM" compares the default (bias-inside) rows only, not every pair."""
    def rows(norm, k, level, bias_inside=None):
        return [record(norm, k, s, level + 0.001 * s, task="adding", bias_inside=bias_inside) for s in range(3)]

    runs = rows("atn", 25, 0.01) + rows("ln", None, 0.05) + rows("none", None, 0.15)
    runs += rows("atn", 25, 0.10, bias_inside=False) + rows("ln", None, 0.005, bias_inside=False)
    claim = [c for c in paper_claims() if c.id == "adding-T100"]
    (result,), _ = evaluate(claim, aggregate(runs, {}))
    assert [(c.better, c.worse) for c in result.comparisons] == [
        ("atn (bias inside)", "ln (bias inside)"), ("ln (bias inside)", "lstm")]
    assert result.verdict == REPRODUCED  # the bias-outside rows (ATN worse than LN) would contradict it
    # a side that names the setting still gets its rows
    outside = [c for c in paper_claims() if c.id == "bias-outside"][0]
    side = outside.pairs[0][1]  # ln bias_inside=false
    group = aggregate(runs, {})[0]
    assert [row.label for row in matching_rows(group, side)] == ["ln (bias outside)"]


def test_a_side_prefers_the_current_codes_row_to_a_stale_one():
    from atnbench.identity import code_fingerprint

    def rows(norm, k, level, code=code_fingerprint()):
        made = [record(norm, k, s, level + 0.001 * s) for s in range(3)]
        return [RunData(dataclasses.replace(r.record, run_id=r.record.run_id + str(code),
                                            env={"code": code}), r.curve) for r in made]

    runs = rows("atn", 45, 0.01) + rows("ln", None, 0.05) + rows("none", None, 0.15) + rows("atn", 45, 0.10, "0ldc0de")
    (result,), _ = evaluate([c for c in paper_claims() if c.id == "copying-T100"], aggregate(runs, {}))
    assert [c.better for c in result.comparisons] == ["atn (current code)", "ln"]
    assert result.verdict == REPRODUCED


def test_real_data_claims_compare_in_the_tables_measure():
    """Table 4 is in bits per character: the ptb-char verdict's cells and difference are too."""
    def run(norm, seed, nats):
        base = record(norm, 20 if norm == "atn" else None, seed, nats, T=150, task="ptb-char")
        curve = (EvalPoint(1, 1.0, nats, nats, {"val_bpc": nats / math.log(2)}),)
        return RunData(base.record, curve)

    levels = {"atn": 1.04, "ln": 1.10, "none": 1.25}
    runs = [run(norm, s, nats + 0.002 * s) for norm, nats in levels.items() for s in range(3)]
    results, _ = evaluate([c for c in paper_claims() if c.id == "ptb-char"], aggregate(runs, {}))
    (result,) = results
    assert result.verdict == REPRODUCED
    atn_ln = result.comparisons[0]
    assert atn_ln.stat == "min_val_bpc"
    assert atn_ln.a.mean == pytest.approx((1.04 + 0.002) / math.log(2))
    assert atn_ln.diff == pytest.approx((1.04 - 1.10) / math.log(2))


# --- the command ------------------------------------------------------------------------------------

def fill(path, levels):
    """Copying T=100 runs whose validation minimum is level × the baseline, per (variant, norm)."""
    with ResultsStore(path) as store:
        for (variant, norm), level in levels.items():
            for seed in range(3):
                config = resolve_run("copying", {"T": 100, "norm": norm, "seed": seed}, variant=variant)
                store.start_run(config.run_id, config.to_dict(), {"device": "cpu"})
                value = COPYING_BASELINE * (level + 0.01 * seed)
                store.log_eval(config.run_id, 100, 1.0, 2 * value, 2 * value)
                store.log_eval(config.run_id, 200, 2.0, value, value)
                store.finish_run(config.run_id, "done", {"wall_s": 1.0, "steps_per_s": 1.0})
    return path


LEVELS = {(None, "atn"): 0.3, (None, "ln"): 0.6, (None, "none"): 0.97,
          ("paper-text", "atn"): 0.98, ("paper-text", "ln"): 0.98, ("paper-text", "none"): 1.0}


def test_report_verdicts_shows_both_protocols(tmp_path):
    store = fill(tmp_path / "r.db", LEVELS)
    result = invoke("report", "--verdicts", "--store", str(store), env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "verdicts on the paper's claims" in result.stdout and "variant paper-text" in result.stdout
    assert "reproduced" in result.stdout and "uninformative (no model learned)" in result.stdout
    assert "≈ at baseline" in result.stdout and "Welch" in result.stdout
    data = json.loads(invoke("report", "--verdicts", "--format", "json", "--store", str(store)).stdout)
    verdicts = {(c["id"], c["variant"]): c["verdict"] for c in data["verdicts"]["claims"]}
    assert verdicts == {("copying-T100", None): REPRODUCED, ("copying-T100", "paper-text"): UNINFORMATIVE,
                        # only k=45 ran: one of the claim's three comparisons, so not "reproduced"
                        ("every-k-beats-ln", None): INCONCLUSIVE, ("every-k-beats-ln", "paper-text"): UNINFORMATIVE}
    partial = next(c for c in data["verdicts"]["claims"] if c["id"] == "every-k-beats-ln" and c["variant"] is None)
    assert partial["missing"] == ["atn k=25 < ln", "atn k=65 < ln"] and partial["comparisons"][0]["verdict"] == REPRODUCED
    first = data["verdicts"]["claims"][0]["comparisons"][0]
    assert first["test"].startswith("Welch") and first["lower_cell"]["n"] == 3 and first["p_value"] < 0.05
    markdown = invoke("report", "--verdicts", "--format", "markdown", "--store", str(store)).stdout
    assert "## Verdicts on the paper's claims" in markdown and "**reproduced**" in markdown


def test_a_wider_margin_makes_more_rows_uninformative(tmp_path):
    store = fill(tmp_path / "r.db", LEVELS)
    args = ["report", "--verdicts", "--format", "json", "--store", str(store)]
    wide = json.loads(invoke(*args, "--baseline-margin", "0.5").stdout)
    verdicts = {(c["id"], c["variant"]): c["verdict"] for c in wide["verdicts"]["claims"]}
    # LN (0.6 of the baseline) now counts as at baseline with LSTM: LN < LSTM is uninformative,
    # ATN < LN still reproduced, so the claim as a whole is inconclusive
    assert verdicts[("copying-T100", None)] == INCONCLUSIVE
    table = wide["tables"][0]
    assert [(row["label"], row["at_baseline"]) for row in table["rows"] if row["kind"] == "model"] == [
        ("lstm", True), ("ln", True), ("atn", False)]


@pytest.mark.parametrize("args, expected", [
    (["--baseline-margin", "1.5"], "--baseline-margin must be a fraction"),
    (["--verdicts", "--format", "csv"], "--verdicts: choose --format table, markdown or json"),
])
def test_bad_options_are_one_line(tmp_path, args, expected):
    store = fill(tmp_path / "r.db", {(None, "ln"): 0.5})
    result = invoke("report", *args, "--store", str(store))
    assert result.exit_code == 2 and expected in result.output and "Traceback" not in result.output


def test_at_baseline_reads_validation_first_then_training():
    b = COPYING_BASELINE

    def ln_runs(summary):
        return [RunData(dataclasses.replace(r.record, summary=summary), r.curve)
                for r in (record("ln", None, s, b) for s in range(2))]

    only_train = aggregate(ln_runs({"min_train_loss": b}), {("copying", 100): b})[0]
    assert rows_at_baseline(only_train) == {"ln": True}
    val_stuck_train_not = aggregate(ln_runs({"min_val_loss": b, "min_train_loss": 0.5 * b}), {("copying", 100): b})[0]
    assert rows_at_baseline(val_stuck_train_not) == {"ln": True}


def test_a_row_is_never_compared_with_itself():
    runs = [record("atn", 45, s, 0.1 + 0.01 * s) for s in range(3)]
    claim = Claim("self", "atn < atn k=45", "test", "copying", 100, "min_val_loss", ((Side("atn"), Side("atn", 45)),))
    results, not_run = evaluate([claim], aggregate(runs, {}))
    assert results == [] and not_run == [claim]


def test_evaluate_passes_its_threshold_on():
    b = COPYING_BASELINE
    runs = [record(norm, k, s, b * (level + 0.01 * s))
            for norm, k, level in [("atn", 45, 0.30), ("ln", None, 0.60), ("none", None, 0.97)] for s in range(3)]
    claim = [c for c in paper_claims() if c.id == "copying-T100"]
    groups = aggregate(runs, {("copying", 100): b})
    assert evaluate(claim, groups)[0][0].verdict == REPRODUCED
    assert evaluate(claim, groups, alpha=1e-9)[0][0].verdict == INCONCLUSIVE

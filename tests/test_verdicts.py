"""Statistical verdicts on the paper's claims: the rules on constructed data where the answer is
known, the claims file, and `atnbench report --verdicts` / `--baseline-margin`."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from atnbench.report.aggregate import RunData, aggregate
from atnbench.report.render import group_view
from atnbench.report.claims import ClaimsError, family_from
from atnbench.report.verdicts import (
    CONTRADICTED,
    EXPLORATORY,
    INCONCLUSIVE,
    NOT_RUN,
    REPRODUCED,
    TOO_FEW,
    UNINFORMATIVE,
    Claim,
    Side,
    at_baseline,
    combine,
    compare,
    evaluate,
    matching_rows,
    parse_side,
    paper_claims,
    rows_at_baseline,
)
from atnbench.run.runspec import resolve_run
from atnbench.store import EvalPoint, ResultsStore, RunRecord

from helpers import invoke
from atnbench.evidence.identity import run_id_of

COPYING_BASELINE = 10 * math.log(8) / 120  # copying T=100: 0.1733


# --- the rules --------------------------------------------------------------------------------------

FIVE_LOW, FIVE_HIGH = [0.10, 0.11, 0.12, 0.105, 0.115], [0.20, 0.21, 0.22, 0.205, 0.215]


def test_clearly_separated_groups_give_numbers_but_no_verdict_without_a_plan():
    c = compare(FIVE_LOW, FIVE_HIGH, labels=("atn", "ln"))
    assert c.verdict == EXPLORATORY and c.p_value < 0.001
    assert c.diff == pytest.approx(-0.10) and c.diff_ci[1] < 0 and c.p_improve == 1.0


def test_both_rows_at_baseline_are_uninformative_even_when_a_test_would_separate_them():
    b = COPYING_BASELINE
    low, high = [0.98 * b, 0.985 * b, 0.99 * b, 0.982 * b, 0.987 * b], [1.01 * b, 1.02 * b, 1.03 * b, 1.015 * b, 1.025 * b]
    c = compare(low, high, baseline=b)
    assert c.verdict == UNINFORMATIVE and c.p_value is None
    assert compare(low, high).verdict == EXPLORATORY and compare(low, high).p_value < 0.001


def test_two_rows_that_learned_nothing_are_uninformative_on_an_accuracy_too():
    """On an accuracy (higher is better) "at baseline" was never judged: two rows whose losses sat at
    the no-information baseline were compared on the noise of their accuracies (QA). It is judged
    on their losses, as the report's note judges the rows."""
    b = 1.0
    accuracy_a, accuracy_b = [0.40, 0.36, 0.42, 0.38, 0.41], [0.30, 0.33, 0.29, 0.31, 0.32]
    at, learned = [0.99, 1.0, 0.98, 1.01, 0.99], [0.5, 0.45, 0.52, 0.48, 0.5]
    c = compare(accuracy_b, accuracy_a, stat="max_val_accuracy", baseline=b, losses=(at, at))
    assert c.verdict == UNINFORMATIVE and "judged on their losses" in c.reason
    assert compare(accuracy_b, accuracy_a, stat="max_val_accuracy", baseline=b, losses=(learned, at)).verdict \
        == EXPLORATORY
    assert compare(accuracy_b, accuracy_a, stat="max_val_accuracy", baseline=b).verdict == EXPLORATORY


def test_fewer_than_five_seeds_a_side_are_too_few():
    assert compare([0.1], [0.5, 0.6]).verdict == TOO_FEW
    assert compare([0.1, 0.11, 0.12, 0.13], [0.5, 0.6, 0.55, 0.57]).verdict == TOO_FEW


def test_higher_is_better_statistics_are_shown_as_measured():
    c = compare([0.9, 0.91, 0.92, 0.915, 0.905], [0.5, 0.51, 0.52, 0.515, 0.505], stat="max_val_accuracy")
    assert c.diff == pytest.approx(0.40) and c.diff_ci[0] > 0 and c.a.mean == pytest.approx(0.91)
    assert c.p_improve == 1.0  # "lower" reads "better": the higher accuracy wins every pair


def test_non_finite_values_are_left_out():
    c = compare(FIVE_LOW + [math.nan, math.inf], FIVE_HIGH)
    assert c.verdict == EXPLORATORY and c.a.n == 5


def test_one_constant_side_is_still_a_t_test(recwarn):
    c = compare([0.1] * 5, [0.11, 0.5, 2.0, 0.3, 0.7])
    assert c.p_value is not None and 0.05 < c.p_value < 0.5
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]  # nothing on a user's stderr

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
    assert combine([EXPLORATORY, UNINFORMATIVE]) == EXPLORATORY
    assert combine([TOO_FEW, UNINFORMATIVE]) == TOO_FEW
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
    data = {"claims": [{"id": "x", "claim": "x", "source": "x", "task": "copying", "order": ["atn"]}]}
    with pytest.raises(ClaimsError, match="at least two sides"):
        family_from(tmp_path / "c.yaml", data, "")


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
    runs = [record(norm, k, seed, b * (level + 0.01 * seed)) for norm, k, level in learned for seed in range(5)]
    runs += [record(norm, k, seed, b * (level + 0.001 * seed), variant="paper-text")
             for norm, k, level in stuck for seed in range(5)]
    groups = aggregate(runs, {("copying", 100): b})
    results, not_run = evaluate(paper_claims(), groups)
    verdicts = {(r.claim.id, r.group.variant): r.verdict for r in results}
    assert verdicts[("copying-T100", None)] == EXPLORATORY
    assert verdicts[("copying-T100", "paper-text")] == UNINFORMATIVE
    designs = {(r.claim.id, r.group.variant): r.design for r in results}
    assert designs[("copying-T100", "paper-text")] == "other protocol"  # the claim is about the preset's own
    assert "adding-T100" in {c.id for c in not_run} and "k45-best" in {c.id for c in not_run}
    # the table marks the rows at baseline and says so
    default, text = (group_view(g) for g in groups)
    assert [(row.label, row.at_baseline) for row in default.rows if row.kind == "model"] == [
        ("lstm", True), ("ln", False), ("atn", False)]
    assert all(row.at_baseline for row in text.rows if row.kind == "model")
    # one row at the baseline beside rows that learned: that row learned nothing, and a comparison
    # with it is not called uninformative (the rule says so only of two rows at the baseline)
    from atnbench.report.plots import _paper_values  # a figure draws the paper's minima where the table compares them

    assert set(_paper_values(groups[0], "min_val_loss")) == {"lstm", "ln", "atn"}
    assert _paper_values(groups[1], "min_val_loss") == {}  # paper-text: "not comparable" in the table too
    from atnbench.report.export import to_latex, to_markdown  # the mark the note explains, in every format

    assert "| lstm ≈ |" in to_markdown([default]) and "LSTM $\\approx$ &" in to_latex([default])
    [one] = [note for note in default.notes if note.startswith("≈ at baseline")]
    assert "no-memory baseline" in one and one.endswith(": lstm; it learned nothing (a comparison is uninformative "
                                                         "only where both rows sit there)")
    [three] = [note for note in text.notes if note.startswith("≈ at baseline")]
    assert three.endswith("they learned nothing, so comparisons among them are uninformative")
    mine = aggregate([dataclasses.replace(r, record=dataclasses.replace(r.record, task="my-task")) for r in runs],
                     {("my-task", 100): b})
    assert any("no-information baseline" in note for g in mine for note in group_view(g).notes)


def test_sides_select_rows_by_setting():
    runs = [record("atn", 10, s, 0.5 + 0.01 * s, T=784, task="smnist-noise", bias_inside=False) for s in range(5)]
    runs += [record("ln", None, s, 2.3 + 0.001 * s, T=784, task="smnist-noise", bias_inside=False) for s in range(5)]
    results, _ = evaluate([c for c in paper_claims() if c.id == "bias-outside"], aggregate(runs, {}))
    assert [r.verdict for r in results] == [EXPLORATORY] and results[0].comparisons[0].diff < 0
    inside = [record("atn", 10, s, 0.5, T=784, task="smnist-noise") for s in range(3)]  # default: bias inside
    assert evaluate([c for c in paper_claims() if c.id == "bias-outside"], aggregate(inside, {}))[0] == []


def test_a_side_without_a_setting_means_the_default_row():
    """bias-placement puts bias-outside LN and ATN rows in the adding group beside the default
    ones: "ATN < LN < LSTM" compares the default (bias-inside) rows only, not every pair."""
    def rows(norm, k, level, bias_inside=None):
        return [record(norm, k, s, level + 0.001 * s, task="adding", bias_inside=bias_inside) for s in range(5)]

    runs = rows("atn", 25, 0.01) + rows("ln", None, 0.05) + rows("none", None, 0.15)
    runs += rows("atn", 25, 0.10, bias_inside=False) + rows("ln", None, 0.005, bias_inside=False)
    claim = [c for c in paper_claims() if c.id == "adding-T100"]
    (result,), _ = evaluate(claim, aggregate(runs, {}))
    assert [(c.better, c.worse) for c in result.comparisons] == [
        ("atn (bias inside)", "ln (bias inside)"), ("ln (bias inside)", "lstm")]
    assert all(c.diff < 0 for c in result.comparisons)  # the bias-outside rows (ATN worse than LN) would not be
    # a side that names the setting still gets its rows
    outside = [c for c in paper_claims() if c.id == "bias-outside"][0]
    side = outside.pairs[0][1]  # ln bias_inside=false
    group = aggregate(runs, {})[0]
    assert [row.label for row in matching_rows(group, side)] == ["ln (bias outside)"]


def test_a_side_prefers_the_current_codes_row_to_a_stale_one():
    from atnbench.evidence.identity import code_fingerprint

    def rows(norm, k, level, code=code_fingerprint()):
        made = [record(norm, k, s, level + 0.001 * s) for s in range(5)]
        return [RunData(dataclasses.replace(r.record, run_id=r.record.run_id + str(code),
                                            env={"code": code}), r.curve) for r in made]

    runs = rows("atn", 45, 0.01) + rows("ln", None, 0.05) + rows("none", None, 0.15) + rows("atn", 45, 0.10, "0ldc0de")
    (result,), _ = evaluate([c for c in paper_claims() if c.id == "copying-T100"], aggregate(runs, {}))
    assert [c.better for c in result.comparisons] == ["atn (current code)", "ln"]
    assert result.comparisons[0].a.mean == pytest.approx(0.012)  # the current code's row, not the stale one


def test_real_data_claims_compare_in_the_tables_measure():
    """Table 4 is in bits per character: the ptb-char verdict's cells and difference are too."""
    def run(norm, seed, nats):
        base = record(norm, 20 if norm == "atn" else None, seed, nats, T=150, task="ptb-char")
        curve = (EvalPoint(1, 1.0, nats, nats, {"val_bpc": nats / math.log(2)}),)
        return RunData(base.record, curve)

    levels = {"atn": 1.04, "ln": 1.10, "none": 1.25}
    runs = [run(norm, s, nats + 0.002 * s) for norm, nats in levels.items() for s in range(5)]
    results, _ = evaluate([c for c in paper_claims() if c.id == "ptb-char"], aggregate(runs, {}))
    (result,) = results
    assert result.verdict == EXPLORATORY
    atn_ln = result.comparisons[0]
    assert atn_ln.stat == "min_val_bpc"
    assert atn_ln.a.mean == pytest.approx((1.04 + 0.004) / math.log(2))
    assert atn_ln.diff == pytest.approx((1.04 - 1.10) / math.log(2))


# --- the command ------------------------------------------------------------------------------------

def fill(path, levels):
    """Copying T=100 runs whose validation minimum is level × the baseline, per (variant, norm)."""
    with ResultsStore(path) as store:
        for (variant, norm), level in levels.items():
            for seed in range(5):
                config = resolve_run("copying", {"T": 100, "norm": norm, "seed": seed}, variant=variant)
                store.start_run(run_id_of(config), config.to_dict(), {"device": "cpu"})
                value = COPYING_BASELINE * (level + 0.01 * seed)
                store.log_eval(run_id_of(config), 100, 1.0, 2 * value, 2 * value)
                store.log_eval(run_id_of(config), 200, 2.0, value, value)
                store.finish_run(run_id_of(config), "done", {"wall_s": 1.0, "steps_per_s": 1.0})
    return path


LEVELS = {(None, "atn"): 0.3, (None, "ln"): 0.6, (None, "none"): 0.97,
          ("paper-text", "atn"): 0.98, ("paper-text", "ln"): 0.98, ("paper-text", "none"): 1.0}


def test_report_verdicts_shows_both_protocols(tmp_path):
    store = fill(tmp_path / "r.db", LEVELS)
    result = invoke("report", "--verdicts", "--store", str(store), env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "verdicts on the paper's claims" in result.stdout and "variant paper-text" in result.stdout
    assert "exploratory" in result.stdout and "uninformative (no model learned)" in result.stdout
    assert "≈ at baseline" in result.stdout and "Welch" in result.stdout
    data = json.loads(invoke("report", "--verdicts", "--format", "json", "--store", str(store)).stdout)
    verdicts = {(c["id"], c["variant"]): c["verdict"] for c in data["verdicts"]["claims"]}
    assert verdicts == {("copying-T100", None): EXPLORATORY, ("copying-T100", "paper-text"): UNINFORMATIVE,
                        ("every-k-beats-ln", None): EXPLORATORY, ("every-k-beats-ln", "paper-text"): UNINFORMATIVE}
    partial = next(c for c in data["verdicts"]["claims"] if c["id"] == "every-k-beats-ln" and c["variant"] is None)
    assert partial["missing"] == ["atn k=25 < ln", "atn k=65 < ln"] and partial["comparisons"][0]["verdict"] == EXPLORATORY
    first = data["verdicts"]["claims"][0]["comparisons"][0]
    assert first["test"].startswith("Welch") and first["lower_cell"]["n"] == 5 and first["p_value"] < 0.05
    assert first["m"] == 22 and first["p_family"] == pytest.approx(min(1.0, 22 * first["p_value"]))
    markdown = invoke("report", "--verdicts", "--format", "markdown", "--store", str(store)).stdout
    assert "## Verdicts on the paper's claims" in markdown and "**exploratory**" in markdown


def test_a_wider_margin_makes_more_rows_uninformative(tmp_path):
    store = fill(tmp_path / "r.db", LEVELS)
    args = ["report", "--verdicts", "--format", "json", "--store", str(store)]
    wide = json.loads(invoke(*args, "--baseline-margin", "0.5").stdout)
    verdicts = {(c["id"], c["variant"]): c["verdict"] for c in wide["verdicts"]["claims"]}
    # LN (0.6 of the baseline) now counts as at baseline with LSTM: LN < LSTM is uninformative
    copying = next(c for c in wide["verdicts"]["claims"] if c["id"] == "copying-T100" and c["variant"] is None)
    assert [c["verdict"] for c in copying["comparisons"]] == [EXPLORATORY, UNINFORMATIVE]
    assert verdicts[("copying-T100", None)] == EXPLORATORY
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


def test_a_list_of_claims_is_its_own_family():
    b = COPYING_BASELINE
    runs = [record(norm, k, s, b * (level + 0.01 * s))
            for norm, k, level in [("atn", 45, 0.30), ("ln", None, 0.60), ("none", None, 0.97)] for s in range(5)]
    claim = [c for c in paper_claims() if c.id == "copying-T100"]
    (result,), _ = evaluate(claim, aggregate(runs, {("copying", 100): b}))
    assert [c.tested_with for c in result.comparisons] == [2, 2]
    assert all(c.p_adjusted == pytest.approx(min(1.0, 2 * c.p_value)) for c in result.comparisons)


def test_a_setting_the_claims_sides_name_is_the_claims_protocol_not_another(tmp_path):
    """A claim "atn hidden=8 < ln hidden=8" asks for hidden 8: runs at hidden 8 (the preset's
    steps) are its own experiment, with an exploratory verdict, not "other protocol"; runs that
    also differ where no side names it (20 steps), or a side that does not name it, are another."""
    def group_of(steps):
        with ResultsStore(tmp_path / f"s{steps}.db") as store:
            for norm in ("ln", "atn"):
                for seed in (0, 1):
                    config = resolve_run("adding", {"T": 200, "norm": norm, "hidden": 8, "seed": seed,
                                                    **({"steps": steps} if steps else {})}, budget=1.0)
                    store.start_run(run_id_of(config), config.to_dict(), {})
                    store.log_eval(run_id_of(config), 20, 1.0, 0.1, 0.1 + 0.01 * seed + (0.05 if norm == "ln" else 0))
                    store.finish_run(run_id_of(config), "done", {})
            return aggregate([RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()])

    def design(order, steps=None):
        family = family_from(tmp_path / "mine.yaml", {"claims": [{"id": "mine", "claim": "ATN < LN", "task": "adding",
                                                                   "T": 200, "order": order}]}, "0" * 64)
        (result,), _ = evaluate(family, group_of(steps))
        return result.design, [c.verdict for c in result.comparisons]

    assert design(["atn hidden=8", "ln hidden=8"]) == (EXPLORATORY, [TOO_FEW])
    assert design(["atn hidden=8", "ln hidden=8"], steps=20) == ("other protocol", [EXPLORATORY])
    assert design(["atn hidden=8", "ln"]) == ("other protocol", [EXPLORATORY])


def test_a_side_without_a_setting_means_the_presets_value_even_where_runs_state_it(tmp_path):
    """Runs store their lr (the preset's 0.001 too): "ln hidden=8" beside ln rows at lr 0.001 and
    0.003 is the preset's lr row, not "ambiguous"; rows apart in no preset value stay apart, the
    claim and its runs named on the line that says which setting tells them apart."""
    from atnbench.report.verdict_tables import rows

    preset_lr = resolve_run("adding", {"T": 200, "norm": "ln"}, budget=1.0).lr
    with ResultsStore(tmp_path / "s.db") as store:
        for norm, lr in (("atn", preset_lr), ("ln", preset_lr), ("ln", 0.003), ("ln", 0.01)):
            for seed in (0, 1):
                config = resolve_run("adding", {"T": 200, "norm": norm, "hidden": 8, "lr": lr, "seed": seed},
                                     budget=1.0)
                assert config.to_dict()["lr"] == lr
                store.start_run(run_id_of(config), config.to_dict(), {})
                store.log_eval(run_id_of(config), 20, 1.0, 0.1, 0.1 + 0.01 * seed + (0.05 if norm == "ln" else 0))
                store.finish_run(run_id_of(config), "done", {})
        groups = aggregate([RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()])

    def evaluated(order):
        family = family_from(tmp_path / "mine.yaml", {"claims": [{"id": "mine", "claim": "ATN < LN", "task": "adding",
                                                                   "T": 200, "order": order}]}, "0" * 64)
        (result,), _ = evaluate(family, groups)
        return result

    result = evaluated(["atn hidden=8", "ln hidden=8"])
    assert [(c.better, c.worse) for c in result.comparisons] == [("atn", f"ln (lr={preset_lr:g})")] and not result.missing
    assert result.design == EXPLORATORY
    result = evaluated(["ln hidden=8 lr=0.003", "ln hidden=8 bias_inside=true"])  # the other side: the preset's lr
    assert [c.worse for c in result.comparisons] == [f"ln (lr={preset_lr:g})"]
    without_default = evaluated(["ln hidden=8 lr=0.003", "ln hidden=8 lr=0.01"])
    assert len(without_default.comparisons) == 1
    group = without_default.group  # rows at 0.003 and 0.01 only: "ln hidden=8" is either
    only_off = [row for row in group.rows if row.settings.get("lr") != preset_lr]
    from atnbench.report.verdicts import _tell_apart

    assert _tell_apart(only_off) == "name lr in the claim"
    ambiguous = dataclasses.replace(without_default, comparisons=[], missing=["ln < ln hidden=8: 'ln hidden=8' matches "
                                                                          "two rows; name lr in the claim"])
    [line] = rows(ambiguous)
    assert line[0].startswith("ATN < LN") and line[1].startswith("adding T=200") and line[3] == "not compared"


def test_runs_off_the_presets_protocol_are_called_so_in_the_verdicts(tmp_path):
    """Runs at hidden 8 and 20 steps on adding T=200: the table says "own protocol"; a verdict on
    them says so too, and calls its design "other protocol", not the paper's full protocol."""
    from atnbench.report.verdict_tables import runs_text

    with ResultsStore(tmp_path / "s.db") as store:
        for norm in ("ln", "atn"):
            for seed in (0, 1):
                config = resolve_run("adding", {"T": 200, "norm": norm, "hidden": 8, "steps": 20, "seed": seed},
                                     budget=1.0)
                run_id = run_id_of(config)
                store.start_run(run_id, config.to_dict(), {})
                store.log_eval(run_id, 20, 1.0, 0.1, 0.1 + 0.01 * seed + (0.05 if norm == "ln" else 0.0))
                store.finish_run(run_id, "done", {})
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()]
    family = family_from(tmp_path / "mine.yaml", {"claims": [{"id": "mine", "claim": "ATN < LN", "task": "adding",
                                                               "T": 200, "order": ["atn", "ln"]}]}, "0" * 64)
    (result,), _ = evaluate(family, aggregate(runs))
    assert result.design == "other protocol"
    # numbers only at any number of seeds: neither "too few seeds" nor seeds for power point at more seeds
    assert [(c.verdict, c.seeds_for_power) for c in result.comparisons] == [(EXPLORATORY, None)]
    assert "another protocol than the claim's" in result.comparisons[0].reason
    assert "adding T=200, preset default, own protocol, other protocol" in runs_text(result)
    import dataclasses  # a task of your own has no preset variant: the slot is left out ("the task file's
    # defaults" there read as the runs' settings, which the protocol label says otherwise; QA)

    mine = dataclasses.replace(result, group=dataclasses.replace(result.group, task="my-task"))
    assert runs_text(mine) == "my-task T=200, protocol unchecked, other protocol"
    claims = tmp_path / "mine.yaml"  # and a table-format --output holds the verdicts the terminal shows
    claims.write_text("claims:\n  - {id: mine, claim: ATN < LN, task: adding, T: 200, order: [atn, ln]}\n")
    written = invoke("report", "--store", tmp_path / "s.db", "--claims", claims, "--output", tmp_path / "r.txt")
    assert written.exit_code == 0, written.output
    text = (tmp_path / "r.txt").read_text()
    assert "attained minima" in text and "verdicts on the claims of mine.yaml" in text and "own protocol" in text


def test_the_verdict_legend_says_how_to_read_an_accuracy_where_the_table_holds_one():
    """On an accuracy the "lower" row is the claimed-better one with its own (higher) values, and
    P(lower < higher) the chance it beats the other: the legend, written for losses, read the
    opposite (QA). Tables of losses only (the published ones) keep their legend."""
    from types import SimpleNamespace

    from atnbench.report.verdict_tables import ACCURACY_NOTE, FOOTNOTE, footnote

    def holding(*stats, task="copying"):
        return [SimpleNamespace(comparisons=[SimpleNamespace(stat=stat) for stat in stats],
                                group=SimpleNamespace(task=task))]

    assert footnote(holding("min_val_loss", "min_val_bpc")) == FOOTNOTE
    assert footnote(holding("min_val_loss", "max_val_accuracy")).endswith(ACCURACY_NOTE)
    low, high = [0.30, 0.33, 0.29, 0.31, 0.32], [0.95, 0.97, 0.99, 0.96, 1.0]
    c = compare(high, low, stat="max_val_accuracy")  # "high < low" in the claim's order: high claimed better
    assert c.diff > 0 and c.p_improve == 1.0  # as ACCURACY_NOTE says: positive, and it beats every seed


def test_rows_that_learned_are_not_called_at_the_baseline_on_a_bpc_or_a_perplexity():
    """A bpc (loss / ln 2) or a perplexity (exp of the loss) set against a baseline in nats: two
    rows at 0.7 of the baseline's loss were "both at the baseline", uninformative (review). Judged
    on their losses, as the report's rows are, they are compared."""
    b = 1.0
    loss_a, loss_b = [0.70, 0.71, 0.69, 0.72, 0.70], [0.80, 0.81, 0.79, 0.82, 0.80]
    for stat, of in (("min_val_bpc", lambda v: v / math.log(2)), ("min_val_ppl", math.exp)):
        c = compare([of(v) for v in loss_a], [of(v) for v in loss_b], stat=stat, baseline=b, losses=(loss_a, loss_b))
        assert c.verdict == EXPLORATORY and c.p_value < 0.001, (stat, c.reason)
        at = [0.99, 1.0, 0.98, 1.01, 0.99]
        nothing = compare([of(v) for v in at], [of(v) for v in at], stat=stat, baseline=b, losses=(at, at))
        assert nothing.verdict == UNINFORMATIVE and "judged on their losses" in nothing.reason


def test_the_verdict_legend_names_a_task_of_your_owns_baseline_as_the_report_does():
    """The report calls a task of your own's baseline the no-information one; its verdict legend
    said "no-memory" (QA). Tables of shipped tasks (the published ones) keep their words."""
    from types import SimpleNamespace

    from atnbench.report.verdict_tables import FOOTNOTE, footnote

    def of(*tasks):
        return [SimpleNamespace(comparisons=[], group=SimpleNamespace(task=task)) for task in tasks]

    assert footnote(of("copying", "adding")) == FOOTNOTE
    own = footnote(of("mine"))
    assert "no-memory" not in own and own.count("no-information baseline") == FOOTNOTE.count("no-memory baseline") > 0
    assert "no-memory (no-information on a task of your own) baseline" in footnote(of("copying", "mine"))

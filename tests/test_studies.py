"""Confirmatory studies (#37): a claims file is one family whatever the report's filters; a study's
plan is recorded before its runs and reused, never changed; each look is recorded once and decides
reproduced / equivalent / futile / open; seeds added without a plan stay exploratory; fewer than 5
seeds a side decide nothing; sides that mix processor classes differently are tested stratified."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import yaml

from atnbench.report import study as studies
from atnbench.report.claims import family_from, paper_family, read_family
from atnbench.report.verdicts import (
    EQUIVALENT,
    EXPLORATORY,
    OPEN,
    REPRODUCED,
    TOO_FEW,
    UNINFORMATIVE,
    compare,
    hedges_g,
    seeds_for_power,
    CannotPlan,
    welch_test,
)
from atnbench.store import ResultsStore
from atnbench.sweep import confirm, expand, load_sweep

from helpers import fill_store, invoke


CLAIMS = {"claims": [
    {"id": "atn-ln", "claim": "ATN < LN", "task": "copying", "T": 100, "budget": 0.01, "order": ["atn k=45", "ln"],
     "margin": 0.5, "margin_reason": "test"},
    {"id": "ln-lstm", "claim": "LN < LSTM", "task": "copying", "T": 100, "budget": 0.01, "order": ["ln", "lstm"]},
]}


def claims_file(tmp_path, data=CLAIMS):
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def k_ablation_runs(first, n):
    return expand(load_sweep("k-ablation"), budget=0.01, seeds=tuple(range(first, first + n)),
                  overrides={"threads": 1, "device": "cpu"})


def fill(db, levels: dict, seeds, code=None):
    """Runs of k-ablation at budget 0.01 with min validation loss levels[model][i] / 2 (made by
    the code of fingerprint ``code`` where given)."""
    norms = {"atn": ("atn", 45), "ln": ("ln", None), "lstm": ("none", None)}
    rows = [("copying", 100, norms[model][0], norms[model][1], seed, "done", level, "k-ablation")
            for model, values in levels.items() for seed, level in zip(seeds, values)]
    return fill_store(db, rows, code=code)


def recorded_study(tmp_path, looks=(5, 10), first=20):
    family = read_family(claims_file(tmp_path))
    study = confirm.plan("k-ablation", k_ablation_runs(first, looks[-1]), family, looks, first, 0.05)
    db = tmp_path / "r.db"
    confirm.record_or_reuse(db, study, dry_run=False)
    return db, study


def test_the_family_is_the_file_so_a_verdict_never_moves_with_filters(tmp_path):
    family = paper_family()
    assert family.m == 22  # atn k=45 < ln, declared by two claims, counted once
    db = tmp_path / "r.db"
    fill(db, {"atn": [0.10, 0.11, 0.12, 0.105, 0.115, 0.118], "ln": [0.2, 0.21, 0.22, 0.205, 0.215, 0.2],
              "lstm": [0.3, 0.31, 0.32, 0.305, 0.315, 0.3]}, range(6))
    fill_store(db, [("adding", 100, "ln", None, seed, "done", 0.01 + seed / 1000, "other") for seed in range(6)])

    def p_of(*filters):
        result = invoke("report", "--store", db, "--verdicts", "--format", "json", *filters)
        assert result.exit_code == 0, result.output
        found = {}
        for claim in json.loads(result.stdout)["verdicts"]["claims"]:
            for c in claim["comparisons"]:
                found[(claim["id"], c["lower"], c["higher"])] = (c["p_family"], c["m"], c["verdict"])
        return found

    everything, copying, sweep = p_of(), p_of("--task", "copying"), p_of("--sweep", "k-ablation")
    key = ("copying-T100", "atn", "ln")
    assert everything[key] == copying[key] == sweep[key]
    assert everything[key][1] == 22 and everything[key][2] == EXPLORATORY  # seeds added without a plan
    user = invoke("report", "--store", db, "--verdicts", "--format", "json", "--claims", claims_file(tmp_path))
    first = json.loads(user.stdout)["verdicts"]["claims"][0]["comparisons"][0]
    assert first["m"] == 2 and first["p_family"] == pytest.approx(min(1, 2 * first["p_value"]))


def test_a_studys_row_shows_the_numbers_its_look_decided_on_whatever_the_filters(tmp_path):
    """Filters choose which rows a report shows, never the seeds of a study's decision: with
    --norm ln (the atn rows filtered out) or --since in the future of some runs, the study's
    comparison keeps its look's n, p and verdict."""
    db, study = recorded_study(tmp_path)
    fill(db, {"atn": [0.10, 0.101, 0.102, 0.1015, 0.1005], "ln": [0.2, 0.201, 0.202, 0.2015, 0.2005],
              "lstm": [0.3, 0.301, 0.302, 0.3015, 0.3005]}, range(20, 25))
    with ResultsStore(db) as store:
        studies.take_look(store, study)

    def study_rows(*filters):
        result = invoke("report", "--store", db, "--claims", claims_file(tmp_path), "--format", "json", *filters)
        assert result.exit_code == 0, result.output
        return {(c["lower"], c["higher"]): (c["lower_cell"]["n"], c["higher_cell"]["n"], c["p_value"], c["verdict"])
                for claim in json.loads(result.stdout)["verdicts"]["claims"] if claim["design"].startswith("study")
                for c in claim["comparisons"]}

    everything = study_rows()
    assert everything[("atn k=45", "ln")][:2] == (5, 5) and everything[("atn k=45", "ln")][3] == REPRODUCED
    assert study_rows("--norm", "ln") == everything
    # the same claims under another file name are the same family: its study still decides them
    # (a renamed copy dropped the study's verdicts without a word and pooled its seeds as exploratory)
    renamed = tmp_path / "copy-of-claims.yaml"
    renamed.write_bytes(Path(claims_file(tmp_path)).read_bytes())
    result = invoke("report", "--store", db, "--claims", renamed, "--format", "json")
    assert result.exit_code == 0, result.output
    assert {(c["lower"], c["higher"]): (c["lower_cell"]["n"], c["higher_cell"]["n"], c["p_value"], c["verdict"])
            for claim in json.loads(result.stdout)["verdicts"]["claims"] if claim["design"].startswith("study")
            for c in claim["comparisons"]} == everything
    # so are the same claims reworded, reordered, commented and their margin's reason rewritten; a
    # margin changed is another family: its study decides nothing there, and the report says so
    edited = {"claims": [{**CLAIMS["claims"][1], "claim": "LN beats LSTM"},
                         {**CLAIMS["claims"][0], "margin_reason": "another reason"}]}
    reworded = tmp_path / "reworded.yaml"
    reworded.write_text("# a comment added after the study was planned\n" + yaml.safe_dump(edited))
    result = invoke("report", "--store", db, "--claims", reworded, "--format", "json")
    assert {(c["lower"], c["higher"]): (c["lower_cell"]["n"], c["higher_cell"]["n"], c["p_value"], c["verdict"])
            for claim in json.loads(result.stdout)["verdicts"]["claims"] if claim["design"].startswith("study")
            for c in claim["comparisons"]} == everything and "another version" not in result.stderr
    moved = tmp_path / "claims.yaml"
    moved.write_text(yaml.safe_dump({"claims": [{**CLAIMS["claims"][0], "margin": 0.4}, CLAIMS["claims"][1]]}))
    other = invoke("report", "--store", db, "--claims", moved, "--format", "json")
    assert other.exit_code == 0 and not any(claim["design"].startswith("study")
                                            for claim in json.loads(other.stdout)["verdicts"]["claims"])
    assert "was planned for another version of claims.yaml" in " ".join(other.stderr.split())


def test_rows_split_by_unvouched_code_are_shown_as_not_compared_never_dropped(tmp_path):
    """Runs of two code fingerprints no canary vouched for make two rows per model: the claim's
    comparisons cannot pick one, and the table says so (and what to do) instead of leaving the
    claim out."""
    db = tmp_path / "r.db"
    levels = {"atn": [0.10, 0.11, 0.12], "ln": [0.2, 0.21, 0.22], "lstm": [0.3, 0.31, 0.32]}
    fill(db, levels, range(3), code="a" * 16)
    fill(db, levels, range(3, 6), code="b" * 16)
    result = invoke("report", "--store", db, "--claims", claims_file(tmp_path), "--format", "markdown")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if "atn k=45 < ln: 'atn k=45' matches" in line]
    assert len(rows) == 1 and "not compared" in rows[0] and "`atnbench canary` checks them" in rows[0]


def test_a_plan_is_recorded_before_its_runs_reused_and_never_changed(tmp_path):
    db, study = recorded_study(tmp_path)
    assert [c.lower + " < " + c.higher for c in study.comparisons] == ["atn k=45 < ln", "ln < lstm"]
    assert study.m == 2 and study.alpha_each == pytest.approx(0.025)
    assert len(study.run_ids["ln"]) == 10 and study.processor is not None
    again, note = confirm.record_or_reuse(db, confirm.plan("k-ablation", k_ablation_runs(20, 10),
                                                           read_family(claims_file(tmp_path)), (5, 10), 20, 0.05), False)
    assert "reused" in note and again.planned_at == study.planned_at
    other = confirm.plan("k-ablation", k_ablation_runs(20, 12), read_family(claims_file(tmp_path)), (6, 12), 20, 0.05)
    with pytest.raises(Exception, match="with other looks"):
        confirm.record_or_reuse(db, other, False)


def study_dry_run(tmp_path, db) -> list:
    result = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path), "--budget", "0.01",
                    "--store", db, "--dry-run", "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["runs"]


def test_a_look_waits_for_its_runs_then_is_recorded_once_and_decides(tmp_path):
    db, study = recorded_study(tmp_path)
    assert len(study_dry_run(tmp_path, db)) == 3 * 10  # every seed the plan may need of the three sides
    table = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path), "--budget", "0.01",
                   "--store", db, "--dry-run", terminal_width=200)
    assert "sweep k-ablation (its studies' runs): 30 runs" in table.stdout  # not the grid the description names
    assert "the sweep: Which ATN window k?" in table.stdout
    fill(db, {"atn": [0.10, 0.101, 0.102, 0.1015, 0.1005], "ln": [0.2, 0.201, 0.202, 0.2015]}, range(20, 25))
    with ResultsStore(db) as store:
        assert studies.take_look(store, study) is None  # ln's fifth seed is missing: the look waits
    fill(db, {"ln": [0.2005], "lstm": [0.30, 0.301, 0.302, 0.3015, 0.3005]}, range(24, 25))
    fill(db, {"lstm": [0.30, 0.301, 0.302, 0.3015]}, range(20, 24))
    with ResultsStore(db) as store:
        look = studies.take_look(store, study)
        kept = studies.load(store, "k-ablation")[0]
    assert look["look"] == 1 and look["seeds"] == 5 and len(kept.recorded) == 1
    decided = {(e["lower"], e["higher"]): e for e in look["comparisons"]}
    assert decided[("atn k=45", "ln")]["decision"] == studies.REPRODUCED
    assert decided[("atn k=45", "ln")]["p"] < decided[("atn k=45", "ln")]["nominal_level"]
    assert kept.next_look() is None  # every comparison decided: the study is over
    assert study_dry_run(tmp_path, db) == []  # and its dry run prices nothing (it listed the seeds of looks not taken)
    # the report shows the study's verdict and keeps the same runs out of the exploratory rows
    report = invoke("report", "--store", db, "--verdicts", "--format", "json", "--claims", claims_file(tmp_path))
    claims = json.loads(report.stdout)["verdicts"]["claims"]
    by_design = {(c["id"], c["design"]): c for c in claims}
    assert by_design[("atn-ln", "study k-ablation")]["verdict"] == REPRODUCED
    assert by_design[("atn-ln", "study k-ablation")]["comparisons"][0]["look"] == "look 1 of 2 (5 seeds)"
    assert ("atn-ln", EXPLORATORY) not in by_design  # every run here belongs to the study


def test_a_small_difference_inside_the_margin_is_equivalent_and_a_hopeless_one_futile(tmp_path):
    planned = studies.Planned(("c",), "A", "B", "min_val_loss", False, 0.5, None)
    a, b = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0], [1.01, 1.0, 0.99, 1.0, 1.02, 0.98]
    entry = studies.judge(planned, a, b, (0.2,), 0.05, False, 0.1)
    assert entry["decision"] == EQUIVALENT and entry["equivalence_interval"][1] < 0.5
    no_margin = studies.Planned(("c",), "A", "B", "min_val_loss", False, None, None)
    noisy_a, noisy_b = [1, 3, 2, 5, 0, 2], [2, 1, 4, 2, 3, 1]
    entry = studies.judge(no_margin, noisy_a, noisy_b, (0.2,), 0.05, False, 0.1)
    assert entry["decision"] == studies.FUTILE and entry["conditional_probability"] < 0.1


def test_a_relative_margin_is_a_fraction_of_the_side_it_names_as_that_side_is_named(tmp_path):
    """"10% of atn" on "atn k=5 < ln": 10% of the ATN side's mean (it was the higher side's, LN's,
    whenever the text was not spelled as the lower side is), in the plan and at every look."""
    from atnbench.report.claims import read_family

    data = {"claims": [{"id": "c", "claim": "x", "task": "copying", "T": 100, "budget": 0.01,
                        "order": ["atn k=5", "ln"], "margin": "10% of atn"}]}
    claim = read_family(claims_file(tmp_path, data)).claims[0]
    ln, atn = ([run for run in k_ablation_runs(0, 1) if run.config.norm == norm] for norm in ("ln", "atn"))
    runs = ln + [dataclasses.replace(atn[0], config=dataclasses.replace(atn[0].config, k=5))]
    [planned] = studies.claims_of(read_family(claims_file(tmp_path, data)), runs)
    assert (planned.lower, planned.margin_of) == ("atn k=5", "atn k=5") and claim.margin.of.text == "atn"
    entry = studies.judge(planned, [1.0, 1.1, 0.9, 1.0, 1.05], [2.0, 2.1, 1.9, 2.0, 2.05], (1.0,), 0.05, True, 0.1)
    assert entry["margin"] == pytest.approx(0.1 * 1.01)  # of ATN's mean 1.01, not LN's 2.01


def test_fewer_than_five_seeds_decide_nothing_and_show_no_bootstrap_interval():
    c = compare([0.1, 0.11, 0.12, 0.105], [0.3, 0.31, 0.32, 0.305])
    assert c.verdict == TOO_FEW and c.p_value < 1e-4 and c.p_improve_ci is None
    c = compare([0.1, 0.11, 0.12, 0.105, 0.1], [0.3, 0.31, 0.32, 0.305, 0.3])
    assert c.verdict == EXPLORATORY and c.p_improve_ci is not None


def test_a_comparison_whose_sides_mix_processor_classes_differently_is_stratified():
    a = [0.10, 0.11, 0.12, 0.20, 0.21, 0.22]
    b = [0.12, 0.13, 0.14, 0.15, 0.22, 0.23]
    plain = welch_test(a, b)
    mixed = welch_test(a, b, (["X"] * 3 + ["Y"] * 3, ["X"] * 4 + ["Y"] * 2))
    assert not plain.stratified and mixed.stratified
    assert mixed.diff == pytest.approx(-0.02, abs=1e-3)  # within each class A is 0.02 lower
    same = welch_test(a, b, (["X"] * 3 + ["Y"] * 3, ["X"] * 3 + ["Y"] * 3))
    assert not same.stratified and same.p == pytest.approx(plain.p)
    c = compare(a, b, classes=(["X"] * 3 + ["Y"] * 3, ["X"] * 4 + ["Y"] * 2))
    assert c.stratified and c.classes == ({"X": 3, "Y": 3}, {"X": 4, "Y": 2})
    # the numbers beside a stratified test are class by class too: g between the classes' own (A is
    # lower in each), P(lower < higher) over the pairs within a class (ties half)
    from atnbench.report.verdicts import hedges_g

    per_class = [hedges_g(a[:3], b[:4]), hedges_g(a[3:], b[4:])]
    assert c.hedges_g < 0 and min(per_class) <= c.hedges_g <= max(per_class)
    within_pairs = [(x < y) + 0.5 * (x == y) for xs, ys in ((a[:3], b[:4]), (a[3:], b[4:])) for x in xs for y in ys]
    assert c.p_improve == pytest.approx(sum(within_pairs) / len(within_pairs)) and c.p_improve > 0.5
    assert c.p_improve_ci[0] <= c.p_improve <= c.p_improve_ci[1] and c.seeds_for_power is not None
    # one class shared (A all on X; B 3 on X, 3 on Y, much lower there): the test and every number
    # beside it are X's, where A is lower; pooled, g and P(lower < higher) said the opposite
    low_b = [0.12, 0.13, 0.14, 0.01, 0.02, 0.03]
    one = compare(a[:3] + [0.105, 0.115, 0.11], low_b, classes=(["X"] * 6, ["X"] * 3 + ["Y"] * 3))
    within = compare(a[:3] + [0.105, 0.115, 0.11], low_b[:3])
    assert one.stratified and one.diff < 0 and within.hedges_g < 0 and one.hedges_g == pytest.approx(within.hedges_g)
    from atnbench.report.verdicts import probability_of_improvement

    improve = probability_of_improvement(a[:3] + [0.105, 0.115, 0.11], low_b[:3])
    assert (one.p_improve, one.p_improve_ci) == improve and improve[0] > 0.5
    assert one.seeds_for_power == within.seeds_for_power
    assert compare(a[:3] + [0.105, 0.115, 0.11], low_b).hedges_g > 0  # pooled: B looked lower


def test_hedges_g_uses_the_exact_correction():
    # 2 + 2 seeds: d = (1.5 - 3.5) / 0.7071 = -2.828; J(2) = Gamma(1) / (1 * Gamma(0.5)) = 0.5642
    assert hedges_g([1, 2], [3, 4]) == pytest.approx(-2.828427 * 0.564190, rel=1e-5)


def test_power_is_planned_for_welchs_test_with_an_interval_and_refuses_thin_pilots():
    n, (low, high) = seeds_for_power([0.10, 0.12, 0.14, 0.11], [0.13, 0.15, 0.16, 0.14], 0.05)
    assert 2 <= low <= n <= high
    with pytest.raises(CannotPlan, match="3 seeds a side"):
        seeds_for_power([0.1, 0.2], [0.3, 0.4], 0.05)
    with pytest.raises(CannotPlan, match="no spread"):
        seeds_for_power([0.1] * 3, [0.3] * 3, 0.05)
    # unequal variances: Welch needs more seeds than the pooled t's answer at the same means
    n_welch, _ = seeds_for_power([0.1, 0.1001, 0.0999, 0.1], [0.1, 0.2, 0.05, 0.15], 0.05)
    assert n_welch > 2


def test_power_where_scipys_far_tail_is_nan_is_the_noncentral_ts_not_the_normals():
    """At 3 seeds a side with one side's spread 0 (Satterthwaite df 2) and noncentrality 20,
    scipy's nct.cdf of the far tail is nan: the power is the near tail's 0.60, not the normal
    approximation's 1.0 (which made the published seeds-for-power 3 where 5 are needed)."""
    from scipy import stats

    from atnbench.report.verdicts import welch_power

    alpha = 0.05 / 22
    critical = stats.t.isf(alpha / 2, 2)
    assert math.isnan(stats.nct.cdf(-critical, 2, 20))  # the case: scipy gives no number there
    power = welch_power(20 * math.sqrt(1 / 3), 1.0, 0.0, 3, alpha)
    assert power == pytest.approx(stats.nct.sf(critical, 2, 20), rel=1e-12) and 0.5 < power < 0.7
    assert [welch_power(3.0, 1.0, 0.0, n, alpha) for n in range(3, 8)] == sorted(
        welch_power(3.0, 1.0, 0.0, n, alpha) for n in range(3, 8))


def test_the_sweep_runs_a_study_look_by_look_and_resumes(tmp_path):
    db, study = recorded_study(tmp_path)
    levels = {"atn": [0.10, 0.101, 0.102, 0.1015, 0.1005], "ln": [0.2, 0.201, 0.202, 0.2015, 0.2005],
              "lstm": [0.30, 0.301, 0.302, 0.3015, 0.3005]}
    fill(db, levels, range(20, 25))  # look 1's runs are in the store: the sweep skips them
    result = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path), "--budget", "0.01",
                    "--store", db, "--looks", "5,10", "--first-seed", "20")
    assert result.exit_code == 0, result.output
    assert "plan reused" in result.stderr and "look 1 of 2 (5 seeds a side)" in result.stderr
    assert "atn k=45 < ln: reproduced" in result.stderr
    changed = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path), "--budget", "0.01",
                     "--store", db, "--looks", "6,12")
    assert changed.exit_code == 2 and "with other looks" in changed.stderr


def test_a_study_planned_by_other_code_goes_on_where_a_canary_vouched_for_it(tmp_path, monkeypatch):
    from dataclasses import replace

    from atnbench.evidence import equivalence
    from atnbench.evidence.identity import code_fingerprint

    planning = "a1" * 8  # the code that planned the study and ran its first seeds
    family = read_family(claims_file(tmp_path))
    study = confirm.plan("k-ablation", k_ablation_runs(20, 10), family, (5, 10), 20, 0.05, code=planning)
    assert study.code == planning and study.run_ids["ln"][0] != k_ablation_runs(20, 1)[0].run_id
    db = tmp_path / "r.db"
    with ResultsStore(db) as store:  # as plans were recorded before they named their experiments
        studies.save(store, replace(study, config_keys={}))
    levels = {"atn": [0.10, 0.101, 0.102, 0.1015, 0.1005], "ln": [0.2, 0.201, 0.202, 0.2015, 0.2005],
              "lstm": [0.30, 0.301, 0.302, 0.3015, 0.3005]}
    fill(db, {model: values[:3] for model, values in levels.items()}, range(20, 23), code=planning)
    fill(db, {model: values[3:] for model, values in levels.items()}, range(23, 25), code=code_fingerprint())
    with ResultsStore(db) as store:  # no canary vouched for the planning code: the new runs cannot stand in
        assert studies.take_look(store, study) is None
    classes = sorted({equivalence.class_key(run.config.to_dict()) for run in k_ablation_runs(20, 1)})
    records = tmp_path / "equivalence.json"
    records.write_text(json.dumps({"records": [{"old_code": planning, "new_code": code_fingerprint(),
                                                "identical": classes}]}))
    monkeypatch.setattr(equivalence, "RECORDS_FILE", records)
    result = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path), "--budget", "0.01",
                    "--store", db, "--first-seed", "20")
    assert result.exit_code == 0, result.output
    assert "config keys recorded now" in result.stderr and "look 1 of 2 (5 seeds a side)" in result.stderr
    assert "atn k=45 < ln: reproduced" in result.stderr
    with ResultsStore(db) as store:
        (kept,) = studies.load(store)
        current_ids = {run.run_id for run in store.runs() if run.env.get("code") == code_fingerprint()}
    assert kept.planned_at == study.planned_at and kept.config_keys == study.config_keys
    used = kept.recorded[0]["runs"]["ln"]
    assert used[:3] == study.run_ids["ln"][:3] and set(used[3:]) <= current_ids  # which run stood for which seed
    report = invoke("report", "--store", db, "--verdicts", "--format", "json", "--claims", claims_file(tmp_path))
    claims = {(c["id"], c["design"]): c for c in json.loads(report.stdout)["verdicts"]["claims"]}
    shown = claims[("atn-ln", "study k-ablation")]["comparisons"][0]
    assert shown["verdict"] == REPRODUCED and shown["code_fingerprints"][1] == sorted([planning, code_fingerprint()])
    assert ("atn-ln", EXPLORATORY) not in claims  # the stand-ins belong to the study, not to an exploration


def test_a_sweep_over_lengths_makes_one_study_per_length_and_tests_a_comparison_once(tmp_path):
    data = {"claims": CLAIMS["claims"] + [
        {"id": "t200", "claim": "ATN < LN at T=200", "task": "copying", "T": 200, "budget": 0.01,
         "order": ["atn k=45", "ln"]}]}
    claims = claims_file(tmp_path, data)
    db = tmp_path / "r.db"
    first = invoke("sweep", "k-ablation", "--until-decided", "--plan-only", "--claims", claims, "--budget", "0.01",
                   "--store", db, "--looks", "5,10")
    assert first.exit_code == 0, first.output
    result = invoke("sweep", "table1-copying", "--until-decided", "--plan-only", "--claims", claims, "--budget",
                    "0.01", "--store", db, "--looks", "5,10")
    assert result.exit_code == 0, result.output
    assert "no study for T=100: every comparison is tested in study k-ablation" in result.stderr
    with ResultsStore(db) as store:
        found = {study.name: study for study in studies.load(store)}
        assert sorted(found) == ["k-ablation", "table1-copying-T200"]
        t200 = found["table1-copying-T200"]
    assert t200.T == 200
    by_id = {run.run_id: run for run in expand(load_sweep("table1-copying"), budget=0.01, seeds=tuple(range(10)),
                                               overrides={"threads": 1, "device": "cpu"})}
    assert {by_id[i].config.T for ids in t200.run_ids.values() for i in ids} == {200}  # each study one length
    assert [f"{c.lower} < {c.higher}" for c in t200.comparisons] == ["atn k=45 < ln"]
    again = invoke("sweep", "table1-copying", "--until-decided", "--plan-only", "--claims", claims_file(tmp_path),
                   "--budget", "0.01", "--store", tmp_path / "other.db", "--looks", "5,10", "--T", "100")
    assert again.exit_code == 0, again.output
    with ResultsStore(tmp_path / "other.db") as store:
        assert [study.name for study in studies.load(store)] == ["table1-copying-T100"]  # named alike when picked
    # planned on another machine, it tests what k-ablation tests in r.db: merging the stores would
    # decide that comparison twice, each at its full share of alpha
    merged = invoke("store", "merge", tmp_path / "m.db", db, tmp_path / "other.db")
    assert merged.exit_code == 2 and len(merged.stderr.strip().splitlines()) == 1, merged.output
    assert not (tmp_path / "m.db").exists()  # refused: no empty store left behind (import already said so)
    assert "study table1-copying-T100 tests atn k=45 < ln (copying T=100), which study k-ablation" in merged.stderr
    assert "a comparison is tested in one study" in merged.stderr
    assert invoke("store", "export", tmp_path / "o.jsonl", "--store", tmp_path / "other.db", "--studies",
                  tmp_path / "o.json").exit_code == 0
    imported = invoke("store", "import", tmp_path / "o.jsonl", "--store", db, "--studies", tmp_path / "o.json")
    assert imported.exit_code == 2 and "which study k-ablation" in imported.stderr, imported.output
    with ResultsStore(db) as store:
        assert sorted(study.name for study in studies.load(store)) == ["k-ablation", "table1-copying-T200"]


def test_a_study_needs_claims_about_its_runs_and_sane_looks(tmp_path):
    result = invoke("sweep", "k-ablation", "--until-decided", "--budget", "0.01", "--store", tmp_path / "r.db",
                    "--dry-run")
    assert result.exit_code == 2 and "no claim of paper_claims.yaml" in result.stderr  # the paper's are full protocol
    for looks, message in (("3,6", "at least 5"), ("10,5", "must increase"), ("a,b", "seeds per configuration")):
        bad = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path), "--budget", "0.01",
                     "--store", tmp_path / "r.db", "--looks", looks, "--dry-run")
        assert bad.exit_code == 2 and message in bad.stderr, bad.output
    both = invoke("sweep", "k-ablation", "--until-decided", "--seeds", "0-4", "--store", tmp_path / "r.db")
    assert both.exit_code == 2 and "not both" in both.stderr


@pytest.mark.parametrize("entry, message", [
    ({"stat": "min_val_los"}, "did you mean 'min_val_loss'"),
    ({"order": ["atm", "ln"]}, "did you mean 'atn'"),
    ({"order": ["atn k=abc", "ln"]}, "whole number"),
    ({"order": ["atn", "atn"]}, "compares a row with itself"),
    ({"colour": "red"}, "unknown key 'colour'"),
    ({"margin": -1}, "positive number"),
    ({"margin": "5 percent of ln"}, "P% of SIDE"),
    ({"margin": "100% of ln"}, "P in 'P% of SIDE' must be above 0 and below 100, got '100% of ln'"),  # QA
    ({"margin": "10% of lstm"}, "'lstm' names neither side of atn < ln"),
    ({"order": ["atn hiden=8", "ln"]}, "unknown setting 'hiden' (did you mean 'hidden'?)"),
    ({"order": ["atn steps=30", "ln steps=30"]}, "steps is not a side's to name: the claim's budget: says it"),
    ({"order": ["atn k=5", "atn k=10"], "margin": "10% of atn"}, "'atn' names both sides of atn k=5 < atn k=10"),
    ({"stat": 5}, "unknown statistic 5"),
])
def test_a_claims_file_mistake_is_one_line_naming_the_file_and_claim(tmp_path, entry, message):
    data = {"claims": [{"id": "c", "claim": "x", "task": "copying", "T": 100, "order": ["atn", "ln"], **entry}]}
    path = claims_file(tmp_path, data)
    result = invoke("report", "--claims", path, "--store", tmp_path / "none.db")
    assert result.exit_code == 2 and message in result.stderr and str(path) in result.stderr, result.output
    assert "Traceback" not in result.output


def test_a_claim_about_a_task_no_one_knows_is_refused_with_the_nearest_name(tmp_path):
    """A typo in a claim's task ("copyng") is not a claim without runs yet: one line, exit 2."""
    db = tmp_path / "r.db"
    fill(db, {"atn": [0.1, 0.11, 0.12], "ln": [0.2, 0.21, 0.22]}, range(3))
    typo = {"claims": [{**CLAIMS["claims"][0], "task": "copyng"}]}
    result = invoke("report", "--store", db, "--claims", claims_file(tmp_path, typo), "--format", "markdown")
    assert result.exit_code == 2 and "unknown task 'copyng' (did you mean 'copying'?)" in result.stderr, result.output
    assert invoke("report", "--store", db, "--claims", claims_file(tmp_path), "--format", "markdown").exit_code == 0


def test_duplicate_claim_ids_are_refused(tmp_path):
    claim = {"id": "c", "claim": "x", "task": "copying", "order": ["atn", "ln"]}
    path = claims_file(tmp_path, {"claims": [claim, dict(claim)]})
    result = invoke("report", "--claims", path, "--store", tmp_path / "none.db")
    assert result.exit_code == 2 and "used twice" in result.stderr


def test_the_paper_claims_declare_margins_with_reasons():
    family = paper_family()
    with_margin = [c for c in family.claims if c.margin is not None]
    assert len(with_margin) >= 10 and all(c.margin.reason for c in with_margin)
    one = family_from(Path("x.yaml"), {"claims": [{"id": "a", "claim": "b", "task": "copying", "order": ["atn", "ln"]}]}, "")
    assert one.m == 1 and one.claims[0].margin is None


def test_plan_only_records_and_prices_and_studies_travel_with_the_runs(tmp_path):
    db = tmp_path / "r.db"
    result = invoke("sweep", "k-ablation", "--until-decided", "--plan-only", "--claims", claims_file(tmp_path),
                    "--budget", "0.01", "--store", db, "--looks", "5,10", "--first-seed", "20")
    assert result.exit_code == 0, result.output
    assert "recorded in the store before any of its runs" in result.stderr and "30 runs" in result.stdout
    with ResultsStore(db) as store:
        (study,) = studies.load(store)
        assert store.runs() == []  # nothing ran
    assert study.sweep == "k-ablation" and confirm.left_to_run(study, db).runs == 30  # 3 sides x 10 seeds
    for task, kept in (("adding", 0), (study.task, 1)):  # a plan with no look yet goes with its task's runs
        plan_only = invoke("store", "export", tmp_path / "p.jsonl", "--store", db, "--task", task,
                           "--studies", tmp_path / "p.json")
        assert plan_only.exit_code == 0 and len(json.loads((tmp_path / "p.json").read_text())) == kept, plan_only.output
    fill(db, {"atn": [0.10, 0.101, 0.102, 0.1015, 0.1005], "ln": [0.2, 0.201, 0.202, 0.2015, 0.2005],
              "lstm": [0.3, 0.301, 0.302, 0.3015, 0.3005]}, range(20, 25))
    assert confirm.left_to_run(study, db).runs == 15
    from atnbench.report.prose import render_studies

    assert "| 15 runs, ~" in render_studies(db) and "at the most: 15 runs" in render_studies(db)
    with ResultsStore(db) as store:
        studies.take_look(store, study)
    out = invoke("store", "export", tmp_path / "runs.jsonl", "--store", db, "--studies", tmp_path / "studies.json")
    assert out.exit_code == 0, out.output
    other = tmp_path / "other.db"
    back = invoke("store", "import", tmp_path / "runs.jsonl", "--store", other, "--studies", tmp_path / "studies.json")
    assert back.exit_code == 0 and "1 study added" in back.stderr, back.output
    with ResultsStore(other) as store:
        (copy,) = studies.load(store)
    assert copy == studies.load(ResultsStore(db))[0] and len(copy.recorded) == 1
    again = invoke("store", "import", tmp_path / "runs.jsonl", "--store", other, "--studies", tmp_path / "studies.json")
    assert "0 studies added or extended, 1 already there" in again.stderr
    older = json.loads((tmp_path / "studies.json").read_text())
    older[0].update(config_keys={}, sweep="")  # as exported before plans named their sweep and experiments
    (tmp_path / "older.json").write_text(json.dumps(older))
    third = tmp_path / "third.db"
    for source in ("older.json", "studies.json"):  # the older copy first, then one that names them
        invoke("store", "import", tmp_path / "runs.jsonl", "--store", third, "--studies", tmp_path / source)
    with ResultsStore(third) as store:
        assert studies.load(store)[0] == copy  # the names filled in, nothing else changed
    changed = json.loads((tmp_path / "studies.json").read_text())
    changed[0]["looks"] = [6, 12]
    (tmp_path / "bad.json").write_text(json.dumps(changed))
    refused = invoke("store", "import", tmp_path / "runs.jsonl", "--store", other, "--studies", tmp_path / "bad.json")
    assert refused.exit_code == 2 and "differs" in refused.stderr
    flipped = json.loads((tmp_path / "studies.json").read_text())  # a look its runs do not give
    flipped[0]["recorded"][0]["comparisons"][0].update(decision="contradicted", p=1e-12)
    (tmp_path / "flipped.json").write_text(json.dumps(flipped))
    refused = invoke("store", "import", tmp_path / "runs.jsonl", "--store", tmp_path / "new" / "sub" / "fresh.db",
                     "--studies", tmp_path / "flipped.json")
    assert refused.exit_code == 2 and not (tmp_path / "new").exists(), refused.output  # no empty store (nor its folders) left
    part = invoke("store", "export", tmp_path / "part.jsonl", "--store", db, "--task", "adding",
                  "--studies", tmp_path / "part.json")  # a part without the study's runs: without the study
    assert part.exit_code == 0 and f"left out {study.name}: their runs are not in this export" in part.stderr, part.output
    assert json.loads((tmp_path / "part.json").read_text()) == []
    assert invoke("store", "import", tmp_path / "part.jsonl", "--store", tmp_path / "part.db",
                  "--studies", tmp_path / "part.json").exit_code == 0


def test_a_study_brought_in_is_checked_against_its_runs_and_merges_carry_studies(tmp_path):
    """A study file is evidence only where its runs give it: a look's decision or p edited, an m
    or alpha other than the family's, are refused with nothing imported (the runs neither); a bad
    file leaves no store behind; ``store merge`` carries a source's studies with its runs."""
    db, study = recorded_study(tmp_path)
    fill(db, {"atn": [0.10, 0.101, 0.102, 0.1015, 0.1005], "ln": [0.2, 0.201, 0.202, 0.2015, 0.2005],
              "lstm": [0.3, 0.301, 0.302, 0.3015, 0.3005]}, range(20, 25))
    with ResultsStore(db) as store:
        look = studies.take_look(store, study)
    assert {entry["decision"] for entry in look["comparisons"]} == {REPRODUCED}
    out = invoke("store", "export", tmp_path / "runs.jsonl", "--store", db, "--studies", tmp_path / "studies.json")
    assert out.exit_code == 0, out.output
    exported = json.loads((tmp_path / "studies.json").read_text())

    def edited(name, change):
        data = json.loads(json.dumps(exported))
        change(data[0])
        (tmp_path / name).write_text(json.dumps(data))
        return tmp_path / name

    def flip(record):
        record["recorded"][0]["comparisons"][0].update(decision="contradicted", p=1e-12)

    cases = {"flipped.json": (flip, "its runs give reproduced"),
             "p.json": (lambda r: r["recorded"][0]["comparisons"][1].update(p=float("nan")), "p = nan"),
             "m.json": (lambda r: r.update(m=1), "m = 1, fewer than its own 2 comparisons"),
             "alpha.json": (lambda r: r.update(alpha=0.5), "alpha 0.5, where the rule's is 0.05")}
    for name, (change, message) in cases.items():
        target = tmp_path / f"{name}.db"
        refused = invoke("store", "import", tmp_path / "runs.jsonl", "--store", target, "--studies", edited(name, change))
        assert refused.exit_code == 2 and message in refused.stderr and "nothing imported" in refused.stderr, \
            (name, refused.output)
        with ResultsStore(target) as store:
            assert store.runs() == [] and studies.load(store) == []
    (tmp_path / "empty.json").write_text("{}")
    bad = invoke("store", "import", tmp_path / "runs.jsonl", "--store", tmp_path / "none.db", "--studies",
                 tmp_path / "empty.json")
    assert bad.exit_code == 2 and not (tmp_path / "none.db").exists()
    paper = paper_family()
    assert studies.check_recorded(ResultsStore(db), dataclasses.replace(study, family=paper.name,
                                                                    family_digest=paper.digest, m=2), paper) == \
        f"m = 2, where its claims file {paper.name} has m = {paper.m}"

    merged = tmp_path / "merged.db"
    result = invoke("store", "merge", merged, db)
    assert result.exit_code == 0 and "1 study added or extended" in result.stderr, result.output
    with ResultsStore(merged) as store, ResultsStore(db) as source:
        assert studies.load(store) == studies.load(source)


def test_a_planned_seed_run_by_other_code_before_its_look_is_not_exploratory(tmp_path):
    """Seeds of a study's next look, made by (vouched) code other than the planning code, wait
    for their look: their ids are not the planned ones, but their experiments are, so they stay
    out of the exploratory rows (before, a half-made look was pooled with the seeds added without a
    plan, and counted again at its look)."""
    from atnbench.evidence.identity import code_fingerprint

    planning = "a1" * 8
    study = confirm.plan("k-ablation", k_ablation_runs(20, 10), read_family(claims_file(tmp_path)), (5, 10), 20,
                         0.05, code=planning)
    db = tmp_path / "r.db"
    confirm.record_or_reuse(db, study, dry_run=False)
    fill(db, {"atn": [0.1, 0.11], "ln": [0.2, 0.21], "lstm": [0.3, 0.31]}, range(20, 22), code=code_fingerprint())
    with ResultsStore(db) as store:
        assert not {run.run_id for run in store.runs()} & study.all_runs()  # not the planned ids
    report = invoke("report", "--store", db, "--verdicts", "--format", "json", "--claims", claims_file(tmp_path))
    assert report.exit_code == 0, report.output
    designs = {(c["id"], c["design"]) for c in json.loads(report.stdout)["verdicts"]["claims"]}
    assert ("atn-ln", EXPLORATORY) not in designs and ("ln-lstm", EXPLORATORY) not in designs
    fill(db, {"atn": [0.1], "ln": [0.2]}, range(40, 41), code=code_fingerprint())  # a seed the plan does not hold
    again = invoke("report", "--store", db, "--verdicts", "--format", "json", "--claims", claims_file(tmp_path))
    assert ("atn-ln", EXPLORATORY) in {(c["id"], c["design"]) for c in json.loads(again.stdout)["verdicts"]["claims"]}


def test_the_report_draws_a_studys_runs_apart_from_the_exploratory_ones(tmp_path, monkeypatch):
    """A part whose sweep has a study with looks gets figures of the runs its looks used alone
    (files tagged ``study-NAME``), and its pooled figures say they pool."""
    from atnbench.report import document
    from atnbench.report.aggregate import RunData

    db, study = recorded_study(tmp_path)
    levels = {"atn": [0.10, 0.101, 0.102, 0.1015, 0.1005], "ln": [0.2, 0.201, 0.202, 0.2015, 0.2005],
              "lstm": [0.30, 0.301, 0.302, 0.3015, 0.3005]}
    looked = set(fill(db, levels, range(20, 25)))
    explored = set(fill(db, {model: values[:3] for model, values in levels.items()}, range(3)))
    longer = set(fill_store(db, [("copying", 200, "ln", None, seed, "done", 0.2, "k-ablation") for seed in range(3)]))
    with ResultsStore(db) as store:
        assert studies.take_look(store, study)["look"] == 1
    drawn = []
    monkeypatch.setattr(document, "write_plots", lambda groups, out_dir, subset=None: drawn.append(
        ({run.record.run_id for group in groups for runs in group.runs.values() for run in runs}, subset)) or [])
    with ResultsStore(db) as store:
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs(sweep="k-ablation")]
        document.part_figures(store, "k-ablation", runs, document.aggregate(runs), tmp_path / "figures")
        document.part_figures(store, "table1-copying", runs, document.aggregate(runs), tmp_path / "other")
    by_ids = {frozenset(ids): subset for ids, subset in drawn[:3]}  # the k-ablation part's
    assert len(drawn) == 5  # per sweep: T=100 pooled, T=200, and (k-ablation only) the study's runs
    pooled, apart = by_ids[frozenset(looked | explored)], by_ids[frozenset(looked)]
    assert pooled.tag == "" and "0-2, 20-24" in pooled.title and "pooled" in pooled.title
    assert apart.tag == "study-k-ablation" and "seeds 20-24" in apart.title and "1 look used" in apart.title
    assert by_ids[frozenset(longer)] is None  # a group the study did not draw from: as always
    assert [subset for ids, subset in drawn[3:]] == [None, None]  # no study of that sweep: as always
    monkeypatch.undo()
    with ResultsStore(db) as store:
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs(sweep="k-ablation")]
        written = document.part_figures(store, "k-ablation", runs, document.aggregate(runs), tmp_path / "real")
    assert sorted(p.name for p in written if p.suffix == ".png") == [
        "curves_copying_T100_budget0.01.png", "curves_copying_T100_budget0.01_study-k-ablation.png",
        "curves_copying_T200_budget0.01.png"]


def test_a_claim_on_a_task_no_one_knows_is_refused_before_a_plan_counts_it(tmp_path):
    """A typo'd task would be one more comparison in the family (m = 3, alpha a third each) and
    a recorded plan cannot be changed: the sweep refuses it as `report --claims` does."""
    typo = {"claims": CLAIMS["claims"] + [{**CLAIMS["claims"][1], "id": "typo", "task": "copyng"}]}
    for plan in ("--plan-only", "--dry-run"):
        refused = invoke("sweep", "k-ablation", "--budget", "0.01", "--until-decided", plan, "--claims",
                         claims_file(tmp_path, typo), "--store", tmp_path / "s.db")
        assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
        assert "claim 'typo': unknown task 'copyng' (did you mean 'copying'?)" in refused.stderr
        assert not (tmp_path / "s.db").exists()


def test_a_study_off_the_protocol_its_claims_are_judged_on_is_refused(tmp_path):
    """A budget other than the claim's was refused; 16 units and 60 steps on a 68-unit, 4,000-step
    protocol were planned and decided without a word (a reviewer rejects that decision)."""
    refused = invoke("sweep", "k-ablation", "--until-decided", "--hidden", "16", "--iters", "60", "--dry-run",
                     "--store", tmp_path / "s.db")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
    assert "these runs differ from the protocol the claims are judged on (copying T=100 at budget 1): " \
           "hidden 16 (protocol 68), steps 60 (protocol 4000)" in refused.stderr
    assert "run it at the preset's settings" in refused.stderr and not (tmp_path / "s.db").exists()
    planned = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path), "--budget", "0.01",
                     "--dry-run", "--store", tmp_path / "s.db")  # at the claims' protocol (budget 0.01): planned
    assert planned.exit_code == 0, planned.output


@pytest.mark.parametrize("other, apart", [
    ({"order": ["ln", "atn k=45"]}, "in opposite orders"),
    ({"order": ["atn k=45", "ln"], "margin": 0.1, "margin_reason": "another"}, "with other margins"),
    ({"order": ["atn k=45", "ln"]}, "with other margins"),  # none: no equivalence decision for it
])
def test_claims_on_one_pair_of_sides_in_another_order_or_margin_are_not_planned_as_one_test(tmp_path, other, apart):
    """They shared the first claim's test: a claim without a margin was found "equivalent" inside
    another's, and reordering the file moved a verdict on the same runs."""
    data = {"claims": [*CLAIMS["claims"], {"id": "mine", "claim": "x", "task": "copying", "T": 100, "budget": 0.01,
                                           **other}]}
    refused = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path, data), "--budget",
                     "0.01", "--dry-run", "--store", tmp_path / "s.db")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
    assert f"claims 'atn-ln' and 'mine' compare 'atn k=45' and 'ln' {apart}: a study tests a pair of sides once" \
        in refused.stderr
    same = {"claims": [*CLAIMS["claims"], {**CLAIMS["claims"][0], "id": "again"}]}  # the same test twice: one test
    planned = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path, same), "--budget",
                     "0.01", "--dry-run", "--store", tmp_path / "s.db")
    assert planned.exit_code == 0, planned.output


def test_a_new_plan_may_not_start_at_seeds_the_store_already_holds(tmp_path):
    """--first-seed 0 over a pilot's seeds 0-4 recorded a plan "before any of its runs" and took its
    first look on the pilot's runs, seen before the plan: seeds chosen after looking."""
    db = tmp_path / "r.db"
    fill(db, {"atn": [0.1] * 5, "ln": [0.2] * 5, "lstm": [0.3] * 5}, range(0, 5))  # the pilot
    refused = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path), "--budget", "0.01",
                     "--store", db, "--looks", "5,10", "--first-seed", "0", "--dry-run")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
    assert "--first-seed 0: the store holds runs of copying at seeds up to 4" in refused.stderr
    assert "give --first-seed 5 or more" in refused.stderr
    planned = invoke("sweep", "k-ablation", "--until-decided", "--claims", claims_file(tmp_path), "--budget", "0.01",
                     "--store", db, "--looks", "5,10", "--first-seed", "5", "--plan-only")
    assert planned.exit_code == 0 and "from seed 5" in planned.stderr, planned.output


def test_a_study_decides_only_for_the_version_of_the_claims_file_it_was_planned_for(tmp_path):
    """Matched by the file's name only, a study planned at m = 2 gave its verdicts to an edited
    claims.yaml of m = 3 (or to another file of that name), whose level is lower."""
    db, study = recorded_study(tmp_path)
    fill(db, {"atn": [0.10, 0.101, 0.102, 0.1015, 0.1005], "ln": [0.2, 0.201, 0.202, 0.2015, 0.2005],
              "lstm": [0.30, 0.301, 0.302, 0.3015, 0.3005]}, range(20, 25))
    with ResultsStore(db) as store:
        assert studies.take_look(store, study) is not None
    same = invoke("report", "--store", db, "--verdicts", "--format", "json", "--claims", claims_file(tmp_path))
    decided = [c for c in json.loads(same.stdout)["verdicts"]["claims"] if c["design"].startswith("study")]
    assert decided, same.output
    edited = {"claims": CLAIMS["claims"] + [{"id": "extra", "claim": "ATN < LSTM", "task": "copying", "T": 100,
                                             "budget": 0.01, "order": ["atn k=45", "lstm"]}]}
    other = invoke("report", "--store", db, "--verdicts", "--format", "json", "--claims", claims_file(tmp_path, edited))
    assert other.exit_code == 0, other.output
    assert not [c for c in json.loads(other.stdout)["verdicts"]["claims"] if c["design"].startswith("study")]
    assert "study k-ablation was planned for another version of claims.yaml (m = 2" in other.stderr


def test_a_study_planned_off_its_protocol_elsewhere_is_not_imported(tmp_path, monkeypatch):
    """Planning refuses a study off the protocol its claims are judged on; one planned so elsewhere
    (an older atnbench) would still have come in through the studies' file and given verdicts."""
    runs = expand(load_sweep("k-ablation"), budget=0.01, seeds=tuple(range(20, 30)),
                  overrides={"threads": 1, "device": "cpu", "hidden": 16})
    monkeypatch.setattr(studies, "off_protocol", lambda config, side: [])  # as an older atnbench planned it
    study = confirm.plan("k-ablation", runs, read_family(claims_file(tmp_path)), (5, 10), 20, 0.05)
    monkeypatch.undo()
    with ResultsStore(tmp_path / "a.db") as store:
        for run in runs:
            store.start_run(run.run_id, run.config.to_dict(), {})
            store.log_eval(run.run_id, 2, 1.0, 0.5, 0.5)
            store.finish_run(run.run_id, "done", {})
        studies.save(store, study)
    assert invoke("store", "export", tmp_path / "a.jsonl", "--store", tmp_path / "a.db", "--studies",
                  tmp_path / "a.json").exit_code == 0
    refused = invoke("store", "import", tmp_path / "a.jsonl", "--store", tmp_path / "b.db", "--studies",
                     tmp_path / "a.json")
    assert refused.exit_code == 2 and "study k-ablation: the runs of side" in refused.stderr, refused.output
    assert "differ from the protocol its claims are judged on: hidden 16 (protocol 68)" in refused.stderr


def test_planned_seeds_a_study_never_came_to_are_exploratory_once_it_is_over():
    """A study planned for looks at 5 and 8 seeds that ended at its first look (futile) held seeds
    3-10 still: seeds 8-9 run later were in neither its row nor the exploratory one, and nothing said
    so. Open, the whole plan is the study's (its next look's seeds); over, each configuration holds
    the seeds of the look that decided its comparisons: one decided at the first look beside one
    that went on holds 5 seeds where its partner's other comparison held 8."""
    sides = ("atn", "ln", "lstm")
    first = studies.Planned(claims=("c1",), lower="atn", higher="ln", stat="min_val_loss",
                            higher_is_better=False, margin=None, margin_of=None)
    second = dataclasses.replace(first, claims=("c2",), lower="ln", higher="lstm")
    plan = studies.Study(name="s", family="f", family_digest="d", m=2, alpha=0.05, looks=(5, 8), first_seed=3,
                         processor=None, task="adding", T=10, budget=1.0, variant=None, comparisons=(first, second),
                         run_ids={s: [f"{s}{i}" for i in range(8)] for s in sides}, planned_at="", code="",
                         config_keys={s: [f"key-{s}{i}" for i in range(8)] for s in sides})
    assert [plan.seeds_held(s) for s in sides] == [8, 8, 8] and len(plan.all_runs()) == 24

    def look(number, n, decisions):  # a look's runs: those of the comparisons it judged
        judged = {side for pair in decisions for side in pair}
        return {"look": number, "seeds": n, "date": "", "runs": {s: [f"{s}{i}" for i in range(n)] for s in judged},
                "comparisons": [{"lower": a, "higher": b, "decision": d} for (a, b), d in decisions.items()]}

    futile = dataclasses.replace(plan, recorded=(look(1, 5, {("atn", "ln"): studies.FUTILE,
                                                             ("ln", "lstm"): studies.FUTILE}),))
    assert futile.next_look() is None and [futile.seeds_held(s) for s in sides] == [5, 5, 5]
    assert futile.all_runs() == {f"{s}{i}" for s in sides for i in range(5)}
    assert futile.planned_experiments() == {f"key-{s}{i}" for s in sides for i in range(5)}
    still_open = dataclasses.replace(plan, recorded=(look(1, 5, {("atn", "ln"): studies.REPRODUCED,
                                                                 ("ln", "lstm"): studies.OPEN}),))
    assert [still_open.seeds_held(s) for s in sides] == [8, 8, 8]
    went_on = dataclasses.replace(still_open, recorded=(*still_open.recorded,
                                                        look(2, 8, {("ln", "lstm"): studies.UNDECIDED})))
    assert went_on.next_look() is None
    assert [went_on.seeds_held(s) for s in sides] == [5, 8, 8]  # atn's comparison was decided at look 1
    assert "atn6" not in went_on.all_runs() and "ln6" in went_on.all_runs()


def test_a_side_naming_a_decimal_setting_matches_its_runs():
    """`ln lr=0.01` kept "0.01" as text, which never equals the stored 0.01: "claims without runs here"
    beside the very rows it names."""
    from atnbench.report.claims import parse_side

    assert parse_side("ln lr=0.01").settings == (("lr", 0.01),)
    assert parse_side("ln lr=1e-2 hidden=8").settings == (("lr", 0.01), ("hidden", 8))
    assert parse_side("atn k=45 bias_inside=false").settings == (("bias_inside", False),)
    assert parse_side("ln init=torch").settings == (("init", "torch"),)


def test_a_norm_on_the_loop_is_compared_with_the_plain_lstm_of_the_same_processor(tmp_path):
    """Without a compiler LN runs are class "AVX512 loop" and the plain LSTM's "AVX512": stratified
    by class, no class held both sides, so "LN < LSTM" was never tested (a study ran every look and
    ended "no spread"). The LSTM computes the same on both paths: it meets the loop runs (QA)."""
    db = tmp_path / "r.db"
    ids = fill(db, {"ln": [0.20, 0.22, 0.21, 0.23, 0.24], "lstm": [0.40, 0.41, 0.43, 0.39, 0.42]}, range(5))
    with ResultsStore(db) as store:
        for run_id in ids:
            record = store.export_record(run_id)
            loop = {"cpp_fast_path": False} if record["config"]["norm"] == "ln" else {}
            record["env"] = {**record["env"], "cpu_capability": "AVX512", **loop}
            store.import_record(record)
    report = invoke("report", "--store", db, "--verdicts", "--format", "json", "--claims", claims_file(tmp_path))
    claims = json.loads(report.stdout)["verdicts"]["claims"]
    (compared,) = [c["comparisons"][0] for c in claims if c["id"] == "ln-lstm"]
    assert compared["p_value"] is not None and compared["p_value"] < 0.001, compared
    assert compared["processor_classes"] == [{"AVX512 loop": 5}, {"AVX512": 5}]  # where each ran, as it was
    from atnbench.evidence.machine import comparable_classes

    both_loop = comparable_classes((["AVX512 loop"] * 2, ["AVX2 loop"]), (False, False))
    assert both_loop == (["AVX512 loop"] * 2, ["AVX2 loop"])  # two normalized rows: the path kept


def test_a_studys_look_compares_loop_runs_of_a_norm_with_the_plain_lstm(tmp_path):
    """The study's own test, at a look: LN on the loop against the plain LSTM is tested (it ran
    every look and ended "no spread: the test is undefined", QA)."""
    db, study = recorded_study(tmp_path)
    ids = fill(db, {"atn": [0.10, 0.101, 0.102, 0.1015, 0.1005], "ln": [0.2, 0.201, 0.202, 0.2015, 0.2005],
                    "lstm": [0.30, 0.301, 0.302, 0.3015, 0.3005]}, range(20, 25))
    with ResultsStore(db) as store:
        for run_id in ids:  # atn and ln made without a compiler, the LSTM anywhere
            record = store.export_record(run_id)
            loop = {} if record["config"]["norm"] == "none" else {"cpp_fast_path": False}
            record["env"] = {**record["env"], "cpu_capability": "AVX512", **loop}
            store.import_record(record)
        look = studies.take_look(store, study)
    decided = {(e["lower"], e["higher"]): e for e in look["comparisons"]}
    assert decided[("ln", "lstm")]["decision"] == studies.REPRODUCED, decided[("ln", "lstm")]
    assert decided[("ln", "lstm")]["classes"] == [{"AVX512 loop": 5}, {"AVX512": 5}]


def test_the_sweeps_end_of_a_study_says_what_the_report_says_of_rows_that_learned_nothing(tmp_path):
    """LN and the LSTM at copying's baseline: the study's test ends "inconclusive", the report says
    "uninformative (no model learned)"; the sweep's last line said only the first (QA)."""
    db, study = recorded_study(tmp_path, looks=(5,))
    fill(db, {"atn": [0.10, 0.101, 0.102, 0.1015, 0.1005], "ln": [0.40, 0.41, 0.42, 0.415, 0.405],
              "lstm": [0.40, 0.405, 0.43, 0.41, 0.42]}, range(20, 25))  # best validation L/2 >= 0.2 > 0.173
    with ResultsStore(db) as store:
        assert studies.take_look(store, study) is not None
        study = studies.load(store, "k-ablation")[0]
    lines = confirm.over_lines(study, db)
    (ln_lstm,) = [line for line in lines if line.startswith("ln < lstm: ")]
    assert ln_lstm.startswith(f"ln < lstm: {UNINFORMATIVE} (both rows at the no-memory baseline") and "its test: " in ln_lstm
    report = invoke("report", "--store", db, "--verdicts", "--format", "json", "--claims", claims_file(tmp_path))
    (reported,) = [c for c in json.loads(report.stdout)["verdicts"]["claims"] if c["id"] == "ln-lstm"]
    assert reported["comparisons"][0]["verdict"] == UNINFORMATIVE
    assert [line for line in lines if line.startswith("atn k=45 < ln: ")] == ["atn k=45 < ln: reproduced"]


def test_a_study_stopped_by_a_signal_says_so_as_a_plain_sweep_does(tmp_path):
    """Ctrl-C during a look's runs: exit 130 and nothing said (a plain sweep says how many runs are
    left and that the same command resumes, QA)."""
    import signal

    from atnbench.sweep.runner import SweepOutcome

    db, study = recorded_study(tmp_path)
    said = []

    def stopped(chosen):
        return SweepOutcome(total=len(chosen), skipped=[], signal=signal.SIGINT)

    code = confirm.run(study, k_ablation_runs(20, 10), db, stopped, said.append)
    assert code == 128 + signal.SIGINT
    assert said[-1] == "stopped by SIGINT: 15 run(s) left; run the same command again to resume", said

"""Sizing a study from pilot runs (#37.5): `sweep --seeds-for-power` sizes the study's looks from
the store's pilot (Welch's test at alpha/m, an interval from the pilot's uncertainty), records
the plan before its runs, reuses it, and refuses pilots it cannot plan from; `reproduce
--until-decided` makes each part with claims a study."""

from __future__ import annotations

import re

import pytest
import yaml

from atnbench.report import study as studies
from atnbench.store import ResultsStore
from helpers import fill_store, invoke

CLAIMS = {"claims": [{"id": "order", "claim": "ATN < LN < LSTM", "task": "copying", "T": 100, "budget": 0.01,
                      "order": ["atn k=45", "ln", "lstm"]}]}


def claims(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump(CLAIMS))
    return path


def pilot(path, atn=(0.10, 0.13, 0.115), ln=(0.20, 0.24, 0.22), lstm=(0.30, 0.31, 0.36)):
    runs = [("copying", 100, norm, k, seed, "done", level, "k-ablation")
            for norm, k, levels in (("atn", 45, atn), ("ln", None, ln), ("none", None, lstm))
            for seed, level in enumerate(levels)]
    fill_store(path, runs)


def most(output: str) -> int:
    return int(re.search(r"at most (\d+) seeds per configuration", output).group(1))


def sized(tmp_path, db, *extra):
    return invoke("sweep", "k-ablation", "--seeds-for-power", "0.8", "--claims", claims(tmp_path), "--store", db,
                  "--budget", "0.01", *extra)


def test_a_dry_run_sizes_the_study_from_the_pilot_and_records_nothing(tmp_path):
    db = tmp_path / "r.db"
    pilot(db)
    result = sized(tmp_path, db, "--dry-run")
    assert result.exit_code == 0, result.output
    n = most(result.stderr)
    assert 5 <= n <= 40 and "dry run: not recorded" in result.stderr
    assert "pilot: atn k=45 < ln:" in result.stderr and "interval" in result.stderr
    assert "from seed 3" in result.stderr  # fresh seeds: the pilot used 0-2
    assert f"{3 * n} runs" in result.stdout  # the three configurations the claims compare, n seeds each
    with ResultsStore(db) as store:
        assert studies.load(store) == []


ONE_K = """\
name: one-k
description: the copying preset with one ATN window
task: copying
base: {T: 100}
runs:
  - norm: [ln, atn]
    k: 45
seeds: [0]
"""


def test_the_pilot_is_the_studys_own_configurations_never_another_k_or_budget(tmp_path):
    """The study runs atn k=45 at budget 0.01; a side "atn" (no k) also names the store's atn
    k=25 runs, and every model has runs at the full budget: neither is the study's configuration,
    so the pilot reads 3 and 3 seeds and sizes what the clean pilot sizes (it pooled both, and
    counted each run once per group holding a row of its label)."""
    sweep, family = tmp_path / "one-k.yaml", tmp_path / "atn-ln.yaml"
    sweep.write_text(ONE_K)
    family.write_text(yaml.safe_dump({"claims": [{"id": "atn-ln", "claim": "ATN < LN", "task": "copying", "T": 100,
                                                  "budget": 0.01, "order": ["atn", "ln"]}]}))
    clean, mixed = tmp_path / "clean.db", tmp_path / "mixed.db"
    for db in (clean, mixed):
        pilot(db)
    fill_store(mixed, [("copying", 100, "atn", 25, seed, "done", level, "other")
                       for seed, level in enumerate((0.4, 0.1, 0.7))])
    fill_store(mixed, [("copying", 100, norm, k, seed, "done", level, "full")
                       for norm, k, levels in (("atn", 45, (0.5, 0.1, 0.9)), ("ln", None, (0.2, 0.6, 0.9)))
                       for seed, level in enumerate(levels)], budget=1.0)

    def pilot_line(db):
        result = invoke("sweep", sweep, "--seeds-for-power", "0.8", "--claims", family, "--store", db,
                        "--budget", "0.01", "--dry-run")
        assert result.exit_code == 0, result.output
        return next(line for line in result.stderr.splitlines() if "pilot: atn < ln" in line)

    assert pilot_line(mixed) == pilot_line(clean) and "pilot 3 and 3 seeds" in pilot_line(mixed)


def test_noisier_pilots_plan_more_seeds_and_the_cap_holds(tmp_path):
    pilot(tmp_path / "clear.db")
    pilot(tmp_path / "noisy.db", atn=(0.10, 0.22, 0.16), ln=(0.14, 0.26, 0.2))
    clear = most(sized(tmp_path, tmp_path / "clear.db", "--dry-run", "--max-seeds", "500").stderr)
    noisy = most(sized(tmp_path, tmp_path / "noisy.db", "--dry-run", "--max-seeds", "500").stderr)
    assert noisy > clear
    capped = sized(tmp_path, tmp_path / "noisy.db", "--dry-run", "--max-seeds", "6")
    assert most(capped.stderr) == 6 and "capped at --max-seeds 6" in capped.stderr


def test_a_recorded_study_is_reused_and_shown_by_the_report(tmp_path):
    from atnbench.report.claims import read_family
    from atnbench.sweep import confirm, expand, load_sweep

    db = tmp_path / "r.db"
    pilot(db)
    runs = expand(load_sweep("k-ablation"), budget=0.01, seeds=tuple(range(3, 13)),
                  overrides={"threads": 1, "device": "cpu"})
    confirm.record_or_reuse(db, confirm.plan("k-ablation", runs, read_family(claims(tmp_path)), (5, 10), 3, 0.05),
                            False)
    again = sized(tmp_path, db, "--dry-run")
    assert again.exit_code == 0, again.output
    assert "plan reused" in again.stderr and "looks at 5, 10 seeds from seed 3" in again.stderr
    report = invoke("report", "--verdicts", "--store", db, "--claims", claims(tmp_path))
    assert report.exit_code == 0 and "study k-ablation: 2 comparisons of claims.yaml" in report.stdout


def test_seeds_for_power_refuses_what_it_cannot_plan(tmp_path):
    db = tmp_path / "r.db"
    pilot(db, atn=(0.1, 0.2), ln=(0.2, 0.3), lstm=(0.3, 0.4))  # two seeds a side
    result = sized(tmp_path, db, "--dry-run")
    assert result.exit_code == 2 and "3 seeds a side" in result.stderr and "Traceback" not in result.output
    flat = tmp_path / "flat.db"
    pilot(flat, atn=(0.1,) * 3, ln=(0.2,) * 3, lstm=(0.3,) * 3)
    result = sized(tmp_path, flat, "--dry-run")
    assert result.exit_code == 2 and "no spread" in result.stderr
    bad = sized(tmp_path, db, "--dry-run", "--seeds", "0-2")
    assert bad.exit_code == 2 and "not both" in bad.stderr


def test_reproduce_makes_each_part_with_claims_a_study(tmp_path):
    db = tmp_path / "r.db"
    result = invoke("reproduce", "--until-decided", "--dry-run", "--store", db, "--only", "k-ablation,bias-placement")
    assert result.exit_code == 0, result.output
    assert "k-ablation: study k-ablation: 7 comparisons of paper_claims.yaml (m = 22" in result.stderr
    assert "bias-placement: study bias-placement: 1 comparison of" in result.stderr  # its default rows, no lstm
    reduced = invoke("reproduce", "--until-decided", "--dry-run", "--store", db, "--only", "k-ablation",
                     "--budget", "0.01")
    assert "note: part k-ablation: no claim" in reduced.stderr and "keeps seeds 0,1,2" in reduced.stderr
    both = invoke("reproduce", "--until-decided", "--seeds", "0-2", "--dry-run", "--store", db)
    assert both.exit_code == 2 and "not both" in both.stderr
    assert not db.exists()  # a dry run records nothing


def test_reproduce_plan_only_records_one_study_per_length_each_comparison_once(tmp_path):
    from atnbench.report import study as studies
    from atnbench.store import ResultsStore

    db = tmp_path / "r.db"
    result = invoke("reproduce", "--until-decided", "--plan-only", "--store", db, "--only",
                    "table2-adding,bias-placement")
    assert result.exit_code == 0, result.output
    said, shown = (" ".join(text.split()) for text in (result.stderr, result.stdout))  # wrapped at any width
    assert "recorded in the store before any of its runs" in said and "left to run: ~" in shown
    assert "every comparison is tested in study table2-adding-T100" in said  # bias-placement's one claim
    with ResultsStore(db) as store:
        assert sorted(s.name for s in studies.load(store)) == ["table2-adding-T100", "table2-adding-T200"]
        assert store.runs() == []  # nothing ran
    alone = invoke("reproduce", "--plan-only", "--store", db)
    assert alone.exit_code == 2 and "--until-decided" in alone.stderr


def test_a_comparison_whose_pilot_sides_both_learned_nothing_is_not_sized(tmp_path):
    """LN and the LSTM at copying's no-memory baseline (0.173 at T=100) in the pilot: a study of
    "ln < lstm" ends uninformative at any number of seeds, yet it was sized (from the noise between
    two baselines) and could set the study's maximum. It is named and left out of the sizing."""
    db = tmp_path / "r.db"
    pilot(db, ln=(0.40, 0.42, 0.41), lstm=(0.40, 0.43, 0.45))  # best validation L/2 >= 0.2: at the baseline
    result = sized(tmp_path, db, "--dry-run")
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())
    assert "ln < lstm: both sides' pilot runs sit at the task's baseline (they learned nothing)" in said, said
    assert "pilot: atn k=45 < ln:" in said and "seeds a side (interval" in said  # the one that can be sized


def test_a_study_goes_on_under_its_claims_file_renamed_and_not_under_other_claims(tmp_path):
    """Family.tests_digest promises that renaming the claims file leaves the family as it was; the
    study's plan was refused as "other family" (it compared the file names)."""
    from atnbench.errors import UserError
    from atnbench.report.claims import read_family
    from atnbench.sweep import confirm, expand, load_sweep

    db = tmp_path / "r.db"
    runs = expand(load_sweep("k-ablation"), budget=0.01, seeds=tuple(range(3, 13)),
                  overrides={"threads": 1, "device": "cpu"})
    original = claims(tmp_path)
    confirm.record_or_reuse(db, confirm.plan("k-ablation", runs, read_family(original), (5, 10), 3, 0.05), False)
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text("# the same claims, another file name\n" + original.read_text())
    study, said = confirm.record_or_reuse(db, confirm.plan("k-ablation", runs, read_family(renamed), (5, 10), 3, 0.05),
                                          False)
    assert said.startswith("reused") and study.family == "claims.yaml"
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"claims": [{**CLAIMS["claims"][0], "id": "another"}]}))  # other tests
    with pytest.raises(UserError, match="with other family"):
        confirm.record_or_reuse(db, confirm.plan("k-ablation", runs, read_family(other), (5, 10), 3, 0.05), False)


def test_a_study_whose_comparisons_all_sit_at_the_baseline_is_refused_without_asking_for_a_pilot(tmp_path):
    """Every comparison at the baseline: more seeds, a pilot or --looks cannot help; the error
    said to run the pilot the store holds (QA)."""
    db = tmp_path / "r.db"
    pilot(db, atn=(0.40, 0.44, 0.42), ln=(0.40, 0.42, 0.41), lstm=(0.40, 0.43, 0.45))
    result = sized(tmp_path, db, "--dry-run")
    said = " ".join(result.stderr.split())
    assert result.exit_code == 2 and "no comparison of the study can be decided" in said, said
    assert "Run a pilot" not in said and "--looks" not in said and "it can be sized once its pilot runs learn" in said


def test_a_pair_sized_on_two_statistics_says_which_line_is_which(tmp_path):
    db = tmp_path / "r.db"
    pilot(db)
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump({"claims": [
        {"id": "val", "claim": "ATN < LN", "task": "copying", "T": 100, "budget": 0.01, "order": ["atn k=45", "ln"]},
        {"id": "train", "claim": "ATN < LN in training", "task": "copying", "T": 100, "budget": 0.01,
         "order": ["atn k=45", "ln"], "stat": "min_train_loss"}]}))
    result = invoke("sweep", "k-ablation", "--seeds-for-power", "0.8", "--claims", two, "--store", db,
                    "--budget", "0.01", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "pilot: atn k=45 < ln (min_val_loss): " in result.stderr
    assert "pilot: atn k=45 < ln (min_train_loss): " in result.stderr


def test_a_study_planned_before_tests_digests_goes_on_under_its_claims_file_renamed(tmp_path):
    """A plan recorded the claims file's bytes digest before it recorded its tests' digest; the
    report accepts such a study under the file renamed (Family.planned), the sweep refused it (review)."""
    import dataclasses

    from atnbench.report.claims import read_family
    from atnbench.sweep import confirm, expand, load_sweep

    db = tmp_path / "r.db"
    runs = expand(load_sweep("k-ablation"), budget=0.01, seeds=tuple(range(3, 13)),
                  overrides={"threads": 1, "device": "cpu"})
    original = read_family(claims(tmp_path))
    older = dataclasses.replace(confirm.plan("k-ablation", runs, original, (5, 10), 3, 0.05), family_digest=original.digest)
    with ResultsStore(db) as store:
        studies.save(store, older)
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(claims(tmp_path).read_text())  # the same bytes, another name
    family = read_family(renamed)
    study, said = confirm.record_or_reuse(db, confirm.plan("k-ablation", runs, family, (5, 10), 3, 0.05), False,
                                          family)
    assert said.startswith("reused") and study.family_digest == original.digest

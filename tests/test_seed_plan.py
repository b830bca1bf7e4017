"""Seeds planned before running (#31.2): `sweep --seeds-for-power` plans from the store's pilot
runs, records the plan, reuses it (the count is fixed before the runs), and `report --verdicts`
shows it."""

from __future__ import annotations

import json


from atnbench.cli.report import load_groups
from atnbench.report import plan as planning
from atnbench.store import ResultsStore
from helpers import fill_store, invoke


def pilot(path, atn=(0.10, 0.13, 0.115), ln=(0.20, 0.24, 0.22), lstm=(0.30, 0.31, 0.36)):
    runs = [("copying", 100, norm, k, seed, "done", level, "k-ablation")
            for norm, k, levels in (("atn", 45, atn), ("ln", None, ln), ("none", None, lstm))
            for seed, level in enumerate(levels)]
    fill_store(path, runs)


def planned(output: str) -> int:
    line = next(line for line in output.splitlines() if line.startswith("plan for sweep k-ablation"))
    return int(line.split(": ", 1)[1].split()[0])


def test_a_dry_run_plans_from_the_pilot_and_records_nothing(tmp_path):
    db = tmp_path / "r.db"
    pilot(db)
    result = invoke("sweep", "k-ablation", "--seeds-for-power", "0.8", "--dry-run", "--store", db, "--budget", "0.01")
    assert result.exit_code == 0, result.output
    n = planned(result.stderr)
    assert 2 <= n <= 40 and "dry run: not recorded" in result.stderr
    assert f"{5 * n} runs" in result.stdout  # 5 configurations × the planned seeds
    with ResultsStore(db) as store:
        assert planning.recorded(store) == []


def test_noisier_pilots_plan_more_seeds_and_the_cap_holds(tmp_path):
    pilot(tmp_path / "clear.db")
    pilot(tmp_path / "noisy.db", atn=(0.10, 0.22, 0.16), ln=(0.14, 0.26, 0.2))
    clear = planned(invoke("sweep", "k-ablation", "--seeds-for-power", "0.8", "--dry-run", "--max-seeds", "500",
                           "--store", tmp_path / "clear.db", "--budget", "0.01").stderr)
    noisy = invoke("sweep", "k-ablation", "--seeds-for-power", "0.8", "--dry-run", "--max-seeds", "500",
                   "--store", tmp_path / "noisy.db", "--budget", "0.01")
    assert planned(noisy.stderr) > clear
    capped = invoke("sweep", "k-ablation", "--seeds-for-power", "0.8", "--dry-run", "--max-seeds", "3",
                    "--store", tmp_path / "noisy.db", "--budget", "0.01")
    assert planned(capped.stderr) == 3 and "capped at --max-seeds 3" in capped.stderr


def test_a_recorded_plan_is_reused_and_shown_by_the_report(tmp_path):
    db = tmp_path / "r.db"
    pilot(db)
    with ResultsStore(db) as store:
        groups = load_groups(db, "copying", 100, None, None, None)[0]
        chosen = planning.plan("k-ablation", groups, 0.8, 40)
        planning.record(store, chosen)
        assert planning.recorded(store) == [chosen]
    again = invoke("sweep", "k-ablation", "--seeds-for-power", "0.9", "--dry-run", "--store", db, "--budget", "0.01")
    assert again.exit_code == 0 and "reused" in again.stderr and planned(again.stderr.replace("note: ", "")) == chosen.seeds
    report = invoke("report", "--verdicts", "--store", db, "--format", "json")
    assert report.exit_code == 0, report.output
    plans = json.loads(report.stdout)["seed_plans"]
    assert [p["seeds"] for p in plans] == [chosen.seeds] and plans[0]["comparisons"]
    table = invoke("report", "--verdicts", "--store", db)
    assert "plan for sweep k-ablation" in table.stdout


def test_seeds_for_power_refuses_what_it_cannot_plan(tmp_path):
    both = invoke("sweep", "k-ablation", "--seeds-for-power", "0.8", "--seeds", "0-2", "--store", tmp_path / "r.db")
    assert both.exit_code == 2 and "not both" in both.stderr
    missing = invoke("sweep", "k-ablation", "--seeds-for-power", "0.8", "--store", tmp_path / "none.db")
    assert missing.exit_code == 2 and "pilot" in missing.stderr
    pilot(tmp_path / "r.db")
    power = invoke("sweep", "k-ablation", "--seeds-for-power", "1.5", "--store", tmp_path / "r.db")
    assert power.exit_code == 2 and "(0, 1)" in power.stderr


def test_reproduce_plans_each_part_and_keeps_the_default_where_there_is_no_pilot(tmp_path):
    db = tmp_path / "r.db"
    pilot(db)
    result = invoke("reproduce", "--seeds-for-power", "0.8", "--dry-run", "--store", db, "--budget", "0.01",
                    "--only", "k-ablation,table3-denoise")
    assert result.exit_code == 0, result.output
    assert "k-ablation: plan for sweep k-ablation" in result.stderr
    assert "part table3-denoise" in result.stderr and "keeps seeds 0,1,2" in result.stderr
    both = invoke("reproduce", "--seeds-for-power", "0.8", "--seeds", "0-2", "--dry-run", "--store", db)
    assert both.exit_code == 2 and "not both" in both.stderr

"""What a plan will cost (`atnbench.sweep.estimate`): measured rates from finished runs of the same
work in the store where it has them, the rough model elsewhere."""

from __future__ import annotations

import pytest

from atnbench.evidence.identity import run_id_of
from atnbench.run.runspec import resolve_run
from atnbench.store import ResultsStore
from atnbench.sweep import estimate, estimate_seconds, measured_rates
from helpers import invoke

SETTINGS = {"T": 12, "hidden": 8, "batch_size": 10, "steps": 100, "eval_every": 50, "val_samples": 30}


def config(**changes):
    return resolve_run("adding", {**SETTINGS, "norm": "ln", "seed": 0, **changes})


def store_with(path, run, wall_s, steps):
    with ResultsStore(path) as store:
        store.start_run(run_id_of(run), run.to_dict(), {"device": "cpu"})
        store.finish_run(run_id_of(run), "done", {"wall_s": wall_s, "steps": steps})
    return path


def test_without_a_store_the_rough_model_prices_every_run(tmp_path):
    runs = [config(seed=s) for s in range(3)]
    cost = estimate(runs, measured_rates(tmp_path / "none.db"))
    assert (cost.measured, cost.runs) == (0, 3) and cost.seconds == pytest.approx(estimate_seconds(runs))
    assert "rough" in cost.note() and cost.seconds > 0


def test_a_finished_run_prices_the_same_work_by_its_wall_time_per_sample(tmp_path):
    # 100 steps x 10 samples + 2 evaluations x 30 samples / 3 = 1,020 units in 10.2 s: 0.01 s a unit
    store = store_with(tmp_path / "s.db", config(), wall_s=10.2, steps=100)
    other_seed_twice_as_long = config(seed=1, steps=200, eval_every=100)  # 2,000 + 2 x 10 = 2,020 units
    other_norm = config(norm="atn", k=3)
    cost = estimate([other_seed_twice_as_long, other_norm], measured_rates(store))
    assert (cost.measured, cost.runs) == (1, 2)
    assert cost.seconds == pytest.approx(0.01 * 2020 + estimate_seconds([other_norm]))
    assert "1 of 2 runs" in cost.note()
    assert estimate([config(threads=2)], measured_rates(store)).measured == 0  # another thread count is other work


def test_a_diverged_or_unfinished_run_prices_nothing(tmp_path):
    path = tmp_path / "s.db"
    run = config()
    with ResultsStore(path) as store:
        store.start_run(run_id_of(run), run.to_dict(), {"device": "cpu"})
        store.finish_run(run_id_of(run), "diverged", {"wall_s": 1.0, "steps": 3})
    assert measured_rates(path) == {} and estimate([config(seed=1)], {}).measured == 0


def test_the_sweep_dry_run_says_how_its_cost_was_made(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: s\ndescription: d\ntask: adding\nbase: {T: 12, hidden: 8, batch_size: 10, steps: 100, "
                     "eval_every: 50, val_samples: 30}\ngrid: {norm: [ln]}\nseeds: [0, 1]\n")
    store = store_with(tmp_path / "s.db", config(), wall_s=10.2, steps=100)
    result = invoke("sweep", str(sweep), "--dry-run", "--store", str(store))
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "2 runs, 1 in the store, 1 left" in text
    assert "~0.2 CPU-min (from measured runs in the store)" in text  # 10.2 s for the other seed

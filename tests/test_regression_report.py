"""A regression task's report reads in one scale (#38, point 6): every MAE and MSE column in the
targets' own units, under the one power of ten the caption names (the MAE columns used to keep
a scale of 1 while the test MAE took the loss columns' ×10⁻ᵏ: "0.025" beside "324.027")."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from helpers import invoke
from atnbench.report.aggregate import RunData, aggregate
from atnbench.report.export import to_markdown
from atnbench.report.render import column_scale, group_view, header_caption, number
from atnbench.store import ResultsStore


@pytest.fixture(autouse=True)
def _no_user_folders(monkeypatch):
    monkeypatch.setenv("ATNBENCH_TASKS", "")


def test_every_mae_and_mse_column_shares_the_views_scale(tmp_path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    rng = np.random.default_rng(1)
    with open(folder / "small.csv", "w", newline="") as handle:  # targets of order 0.01: losses far below 1
        writer = csv.writer(handle)
        writer.writerow(["target"] + [f"t{i}" for i in range(5)])
        for _ in range(40):
            values = rng.normal(0, 1, 5)
            writer.writerow([0.01 * values.sum()] + list(values))
    (folder / "small.yaml").write_text(
        "problem: sequence-regression\ndata:\n  train: small.csv\n  y: target\n"
        "  split: {validation: 0.25, test: 0.25, seed: 0}\n"
        "defaults: {hidden: 4, batch_size: 8, steps: 4, eval_every: 2}\n")
    store = tmp_path / "s.db"
    result = invoke("run", "small", "--include", folder, "--norm", "ln", "--store", store, "-q")
    assert result.exit_code == 0, result.output
    with ResultsStore(store) as results:
        runs = [RunData(r, tuple(results.curve(r.run_id))) for r in results.runs()]
    (group,) = aggregate(runs)
    view = group_view(group)
    keys = [column.key for column in view.columns]
    assert {"min_val_loss", "min_val_mae", "test_mae_at_best_val"} <= set(keys), keys
    assert view.scale < 1  # a power of ten is at work, so a column left out of it would show
    assert {column_scale(view, column) for column in view.columns} == {view.scale}
    assert "MAE" in view.measure and "targets' units" in header_caption(view)
    (row,) = [r for r in view.rows if r.kind == "model"]
    markdown = to_markdown([view])
    for key in ("min_val_mae", "test_mae_at_best_val", "min_val_loss"):
        assert number(row.cells[key].mean, view.scale) in markdown

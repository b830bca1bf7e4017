"""``atnbench evaluate``: score a finished run's kept model on its task's held-out data."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from atnbench.cli import options
from atnbench.cli.app import app, out, user_errors
from atnbench.store import MODEL_KINDS
from atnbench.tables import FitTable


@app.command()
@user_errors
def evaluate(
    run_id: str = typer.Argument(..., help="Run id (or a unique prefix) of a finished run in the store."),
    weights: str = typer.Option("best", "--weights", help=f"Which kept weights: {' or '.join(MODEL_KINDS)} (best = lowest validation loss)."),
    store: options.Store = options.STORE,
    device: options.Device = options.DEVICE,
    fmt: Annotated[Optional[str], options.output_format(("table", "json"))] = None,
    json_old: bool = options.deprecated_flag("--json", "--format json", is_flag=True),
):
    """Score a finished run's kept model on the task's validation (and test) data.

    The model is rebuilt from the run's stored config and its kept weights; the validation set
    is the one the run was scored on during training, so `best` reproduces its minimum. Kept
    weights that cannot be read (damaged, or another model's) are an error naming the run, exit
    code 2 as for a damaged store: train the run again with `atnbench run ... --force`.

    Example: [bold]atnbench evaluate 3f2a9c --weights final[/]
    """
    from atnbench.run.restore import restore
    from atnbench.store import ResultsStore
    from atnbench.tasks.lookup import task_for
    from atnbench.run.train import evaluate as evaluate_split
    from atnbench.tasks.source import derived_metric
    from atnbench.zoo import resolve_device

    fmt = options.check_format(options.deprecated("json" if json_old else None, "--json", "--format json", fmt),
                               ("table", "json"))
    with ResultsStore.open_read_only(store) as results:
        restored = restore(results, run_id, resolve_device(device), weights)
    task = task_for(restored.config)  # a user task from its stored definition: no --include needed
    scores = []
    for split in restored.source.splits:
        loss, accuracy = evaluate_split(restored.model, task, restored.source, split)
        row = {"split": "validation" if split == "val" else split, "loss": loss}
        if task.metric:
            row[task.metric] = derived_metric(task.metric, loss, accuracy)
        scores.append(row)
    record = {"run_id": restored.record.run_id, "weights": weights, "step": restored.step, "scores": scores}
    if fmt == "json":
        print(json.dumps(record))
        return
    table = FitTable(title=f"run {restored.record.run_id}: {weights} weights (step {restored.step})", lift=False)
    for column in scores[0]:
        table.add_column(column, justify="left" if column == "split" else "right")
    for row in scores:
        table.add_row(*(f"{v:.6g}" if isinstance(v, float) else str(v) for v in row.values()))
    out.print(table)

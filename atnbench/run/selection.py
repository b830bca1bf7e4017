"""Model selection on validation: which evaluation of a curve a run's held-out numbers come from.

The test split never selects anything. A run is scored on its test split at every evaluation
(the published runs' curves hold those scores, and the canary compares curves), but a test
number is only ever *reported* at the evaluation validation chose: the first one with the
lowest validation loss, which is the evaluation whose weights ``train`` keeps as "best" (it
saves on a strict improvement) and so the weights ``atnbench evaluate`` scores. The best test
score over the curve would pick the step by looking at the test split.

Pure functions over curve points (anything with ``step``, ``val_loss`` and ``metrics``): the
run summary, the report, ``runs show``/``runs export`` and the sweep records all use them.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence

HELD_OUT = "test_"  # curve metrics of the held-out split: test_loss, test_accuracy, test_bpc, ...
BEST_STEP = "best_step"  # the summary key naming the evaluation validation chose
METRIC_NAMES = {"mae": "MAE"}  # a task's metric as labels write it; the others as named (accuracy, bpc, ppl)


def metric_name(metric: str) -> str:
    return METRIC_NAMES.get(metric, metric)


def attained(key: str):
    """How a validation measure's best over a curve is taken (the paper reports the attained best):
    ``max`` for an accuracy, ``min`` for a loss, bpc, perplexity or MAE. It is over every evaluation,
    so it need not be the evaluation validation's loss chose (``best_val_point``)."""
    return max if key.endswith("accuracy") else min


def attained_label(metric: str) -> str:
    """"max validation accuracy", "min validation bpc": what a summary's ``val_METRIC`` is."""
    return f"{attained(metric).__name__} validation {metric_name(metric)}"


def _finite(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def is_held_out(name: str) -> bool:
    return name.startswith(HELD_OUT)


def best_val_point(curve: Sequence[Any]) -> Optional[Any]:
    """The first evaluation with the lowest finite validation loss (None when none has one)."""
    scored = [point for point in curve if _finite(point.val_loss) is not None]
    return min(scored, key=lambda point: point.val_loss) if scored else None  # min keeps the first of ties


def held_out_at_best_val(curve: Sequence[Any]) -> dict[str, float]:
    """Every held-out metric of the curve, as scored at the evaluation validation chose."""
    best = best_val_point(curve)
    if best is None:
        return {}
    values = ((name, _finite(value)) for name, value in (best.metrics or {}).items())
    return {name: value for name, value in values if is_held_out(name) and value is not None}


def selected_summary(summary: dict, curve: Sequence[Any]) -> dict:
    """A stored summary with its held-out numbers taken at the evaluation validation chose.

    Summaries written before this rule held the best test score over the curve; read through
    this, every run shows the numbers ``atnbench evaluate`` gives for its kept weights. Without
    a curve the summary is returned as stored (nothing to select from)."""
    if not curve or not summary:
        return summary
    best = best_val_point(curve)
    chosen = held_out_at_best_val(curve)
    fixed = {key: chosen.get(key) if is_held_out(key) else value for key, value in summary.items()}
    fixed.update({key: value for key, value in chosen.items() if key not in fixed})
    if best is not None:
        fixed[BEST_STEP] = best.step
    return fixed

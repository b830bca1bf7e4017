"""From stored runs to table cells: pure functions, no printing, no files.

A *group* is one table of the paper: runs of one task at one sequence length T, at one budget
(and one named preset variant), so that a reduced-budget run is never averaged with a
full-protocol one. Inside a group a *row* is one model (cell + normalization); a windowed
model (ATN) is split by k when the group holds several k. A row's cells are mean ± sample std
(ddof = 1) over its finished ("done") runs, one run per seed; diverged runs are counted in the
row but never averaged; running and failed runs are left out and counted in the group's notes.

Per run, the minimum and final losses are taken from its stored curve (falling back to the
summary when the curve is empty), so imported or resumed runs are summarised the same way.
A numeric curve metric ``m`` (e.g. ``val_bpc``, ``test_loss``) gives the statistics ``min_m``
(``max_m`` for an accuracy) and ``final_m``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from atnbench.store import EvalPoint, RunRecord
from atnbench.zoo import MODELS, model_name

WINDOWED_NORMS = ("atn", "atn-bn")
LOSS_STATS = ("min_train_loss", "min_val_loss", "final_train_loss", "final_val_loss")
COST_STATS = ("wall_s", "steps_per_s")
STAT_LABELS = {
    "min_train_loss": "min train",
    "min_val_loss": "min validation",
    "final_train_loss": "final train",
    "final_val_loss": "final validation",
    "wall_s": "wall time (s)",
    "steps_per_s": "steps/s",
}


@dataclass(frozen=True)
class RunData:
    """A stored run with its curve."""

    record: RunRecord
    curve: tuple[EvalPoint, ...] = ()


@dataclass(frozen=True)
class Stat:
    """Mean and sample standard deviation of one quantity over a row's seeds.

    ``std`` is None with fewer than two values (shown as "-"); ``mean`` is None with none.
    """

    mean: Optional[float]
    std: Optional[float]
    n: int
    values: tuple[float, ...] = ()


@dataclass
class ModelRow:
    label: str  # "atn", or "atn (k=45)" when the group holds several k for ATN
    model: str  # the zoo name: lstm, ln, atn, gru-ln, ...
    cell: str
    norm: str
    k: Optional[int]  # for windowed norms; None otherwise (or when the row mixes k)
    seeds: tuple  # seeds of the done runs, in run order
    diverged_seeds: tuple
    run_ids: tuple
    stats: dict[str, Stat]

    @property
    def n(self) -> int:
        return len(self.seeds)


@dataclass
class Group:
    task: str
    T: Optional[int]
    budget: float
    variant: Optional[str]
    rows: list[ModelRow]
    baseline: Optional[float]
    notes: list[str] = field(default_factory=list)
    runs: dict[str, list[RunData]] = field(default_factory=dict)  # row label -> its done runs

    @property
    def reduced(self) -> bool:
        return self.budget < 1

    def best(self, stat: str) -> set[str]:
        """Labels of the rows with the best (lowest; highest for accuracy) mean of ``stat``."""
        means = {row.label: row.stats[stat].mean for row in self.rows
                 if stat in row.stats and row.stats[stat].mean is not None}
        if not means:
            return set()
        low = (max if higher_is_better(stat) else min)(means.values())
        return {label for label, mean in means.items() if mean == low}

    def row(self, label: str) -> Optional[ModelRow]:
        return next((row for row in self.rows if row.label == label), None)

    def stat_names(self) -> list[str]:
        names = list(LOSS_STATS)
        for row in self.rows:
            names.extend(name for name in row.stats if name not in names)
        return names


@dataclass
class KAblation:
    """One windowed model's loss against k in one group, with the other models as references."""

    group: Group
    model: str  # atn or atn-bn (or gru-atn ...)
    rows: list[ModelRow]  # one per k, ascending
    references: list[ModelRow]  # lstm, ln, ... (rows of the group without a window)


# -- per run -------------------------------------------------------------------------------------


def _finite(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def run_values(run: RunData) -> dict[str, float]:
    """One run's numbers: min/final train and validation loss over its curve, min/final of
    every numeric curve metric, and its cost (wall time, steps/s) from the summary."""
    summary = run.record.summary or {}
    curve = run.curve
    values: dict[str, float] = {}
    for split, attr in (("train", "train_loss"), ("val", "val_loss")):
        points = [v for v in (_finite(getattr(p, attr)) for p in curve) if v is not None]
        last = _finite(getattr(curve[-1], attr)) if curve else None
        low = min(points) if points else _finite(summary.get(f"min_{split}_loss"))
        final = last if curve else _finite(summary.get(f"final_{split}_loss"))
        if low is not None:
            values[f"min_{split}_loss"] = low
        if final is not None:
            values[f"final_{split}_loss"] = final
    metric_names: list[str] = []
    for point in curve:
        metric_names.extend(name for name in (point.metrics or {}) if name not in metric_names)
    for name in metric_names:
        series = [_finite((p.metrics or {}).get(name)) for p in curve]
        points = [v for v in series if v is not None]
        if points:
            if higher_is_better(name):
                values[f"max_{name}"] = max(points)
            else:
                values[f"min_{name}"] = min(points)
        if series and series[-1] is not None:
            values[f"final_{name}"] = series[-1]
    for name in COST_STATS:
        value = _finite(summary.get(name))
        if value is not None:
            values[name] = value
    return values


def higher_is_better(name: str) -> bool:
    """Accuracy-like statistics are best when highest; losses, bpc and perplexity when lowest."""
    return name.endswith("accuracy")


def mean_std(values: Sequence[float]) -> Stat:
    """Mean and sample standard deviation (ddof = 1), computed exactly (``statistics``)."""
    values = tuple(float(v) for v in values)
    if not values:
        return Stat(None, None, 0, ())
    mean = statistics.mean(values)
    std = statistics.stdev(values) if len(values) > 1 else None
    return Stat(mean, std, len(values), values)


# -- grouping ------------------------------------------------------------------------------------


def _model_order(model: str) -> int:
    names = list(MODELS)
    return names.index(model) if model in names else len(names)


def _cell(record: RunRecord) -> str:
    return record.config.get("cell") or "lstm"


def _norm(record: RunRecord) -> str:
    return record.norm or record.config.get("norm") or "none"


def _budget(record: RunRecord) -> float:
    budget = record.budget if record.budget is not None else record.config.get("budget", 1.0)
    return float(budget if budget is not None else 1.0)


def group_key(record: RunRecord) -> tuple:
    return (record.task or "?", record.T, _budget(record), record.config.get("variant"))


def _group_sort_key(key: tuple) -> tuple:
    task, T, budget, variant = key
    return (task, T if T is not None else -1, -budget, variant or "")


def aggregate(runs: Iterable[RunData], baselines: Optional[dict] = None) -> list[Group]:
    """Group runs by (task, T, budget, variant) and model; one table row per model.

    ``baselines`` maps (task, T) to the task's no-memory baseline; where missing, the baseline
    recorded in the runs' summaries is used.
    """
    by_group: dict[tuple, list[RunData]] = {}
    for run in runs:
        by_group.setdefault(group_key(run.record), []).append(run)
    groups = []
    for key in sorted(by_group, key=_group_sort_key):
        groups.append(_make_group(key, by_group[key], baselines or {}))
    return groups


def _make_group(key: tuple, runs: list[RunData], baselines: dict) -> Group:
    task, T, budget, variant = key
    considered = [r for r in runs if r.record.status in ("done", "diverged")]
    left_out: dict[str, int] = {}
    for run in runs:
        if run.record.status not in ("done", "diverged"):
            left_out[run.record.status] = left_out.get(run.record.status, 0) + 1

    by_model: dict[str, list[RunData]] = {}
    for run in considered:
        by_model.setdefault(model_name(_cell(run.record), _norm(run.record)), []).append(run)

    rows, row_runs, notes = [], {}, []
    for model in sorted(by_model, key=lambda m: (_model_order(m), m)):
        model_runs = by_model[model]
        cell, norm = _cell(model_runs[0].record), _norm(model_runs[0].record)
        if norm in WINDOWED_NORMS:
            ks = sorted({r.record.k for r in model_runs}, key=lambda k: (k is None, k))
            split = len(ks) > 1
            for k in ks:
                part = [r for r in model_runs if r.record.k == k]
                label = f"{model} (k={k})" if split else model
                rows.append(_make_row(label, model, cell, norm, k, part))
                row_runs[label] = [r for r in part if r.record.status == "done"]
        else:
            rows.append(_make_row(model, model, cell, norm, None, model_runs))
            row_runs[model] = [r for r in model_runs if r.record.status == "done"]

    for row in rows:
        repeated = sorted({s for s in row.seeds if row.seeds.count(s) > 1}, key=str)
        if repeated:
            notes.append(f"{row.label}: several runs share seed {', '.join(map(str, repeated))} "
                         f"(their configs differ); each run counts once in the mean")
    if left_out:
        parts = ", ".join(f"{n} {status}" for status, n in sorted(left_out.items()))
        notes.append(f"not shown: {parts} run{'s' if sum(left_out.values()) > 1 else ''}")

    baseline = baselines.get((task, T))
    if baseline is None:
        recorded = [_finite(r.record.summary.get("baseline")) for r in runs if r.record.summary]
        recorded = [b for b in recorded if b is not None]
        baseline = recorded[0] if recorded else None
    return Group(task=task, T=T, budget=budget, variant=variant, rows=rows, baseline=baseline,
                 notes=notes, runs=row_runs)


def _make_row(label: str, model: str, cell: str, norm: str, k: Optional[int], runs: list[RunData]) -> ModelRow:
    done = [r for r in runs if r.record.status == "done"]
    diverged = [r for r in runs if r.record.status == "diverged"]
    per_run = [run_values(r) for r in done]
    names: list[str] = []
    for values in per_run:
        names.extend(name for name in values if name not in names)
    stats = {name: mean_std([v[name] for v in per_run if name in v]) for name in names}
    for name in LOSS_STATS:
        stats.setdefault(name, Stat(None, None, 0, ()))
    return ModelRow(
        label=label, model=model, cell=cell, norm=norm, k=k,
        seeds=tuple(r.record.seed for r in done),
        diverged_seeds=tuple(r.record.seed for r in diverged),
        run_ids=tuple(r.record.run_id for r in done),
        stats=stats,
    )


# -- the k-ablation view ---------------------------------------------------------------------------


def k_ablations(groups: Iterable[Group]) -> list[KAblation]:
    """For every group with a windowed model (ATN): that model's rows by k, the rest as references."""
    views = []
    for group in groups:
        windowed = [row for row in group.rows if row.norm in WINDOWED_NORMS and row.k is not None]
        for model in dict.fromkeys(row.model for row in windowed):
            rows = sorted((row for row in windowed if row.model == model), key=lambda row: row.k)
            references = [row for row in group.rows if row.norm not in WINDOWED_NORMS]
            views.append(KAblation(group=group, model=model, rows=rows, references=references))
    return views


def budget_label(budget: float) -> str:
    """"full protocol" or "reduced budget (5%)"."""
    if budget >= 1:
        return "full protocol"
    return f"reduced budget ({budget * 100:.3g}%)"

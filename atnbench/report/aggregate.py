"""From stored runs to table cells: pure functions, no printing, no files.

A *group* is one table of the paper: runs of one task at one sequence length T, at one budget
(and one named preset variant), so that a reduced-budget run is never averaged with a
full-protocol one. Inside a group a *row* holds runs that differ in nothing but the seed: one
model (cell + normalization) with one value of every setting of its run identity
(``atnbench.evidence.identity``: k, bias placement, eps, init, optimizer settings, threads, ...) and one
code fingerprint. Where a model has several rows, each row's label names the settings that
tell them apart ("atn (k=25, bias outside)"); a row made by other code than the running
atnbench is *stale* and says so. A row's cells are mean ± sample std
(ddof = 1) over its finished ("done") runs, one run per seed; diverged runs are counted in the
row but never averaged; running and failed runs are left out and counted in the group's notes.

Per run, the minimum and final losses are taken from its stored curve (falling back to the
summary when the curve is empty), so imported or resumed runs are summarised the same way.
A numeric curve metric ``m`` (e.g. ``val_bpc``) gives the statistics ``min_m`` (``max_m`` for an
accuracy) and ``final_m``; a test metric (``test_loss``, ``test_bpc``) gives only ``m_at_best_val``,
its value at the evaluation validation chose (``atnbench.run.selection``): the test split never selects.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from atnbench.config import setting_default
from atnbench.run.selection import held_out_at_best_val, is_held_out
from atnbench.store import EvalPoint, RunRecord
from atnbench.registry import is_windowed, model_name, models

LOSS_STATS = ("min_train_loss", "min_val_loss", "final_train_loss", "final_val_loss")
COST_STATS = ("wall_s", "steps_per_s")
STAT_LABELS = {
    "min_train_loss": "min train",
    "min_val_loss": "min validation",
    "min_val_bpc": "min validation bpc",
    "min_val_ppl": "min validation ppl",
    "final_train_loss": "final train",
    "final_val_loss": "final validation",
    "wall_s": "wall time (s)",
    "steps_per_s": "steps/s",
    "test_loss_at_best_val": "test at best val.",
    "test_bpc_at_best_val": "test bpc at best val.",
    "test_ppl_at_best_val": "test ppl at best val.",
    "test_accuracy_at_best_val": "test accuracy at best val.",
    "min_val_mae": "min validation MAE",
    "test_mae_at_best_val": "test MAE at best val.",
}
# What each statistic is: shown under every report table and in `atnbench report --help`.
STAT_DEFINITIONS = {
    "min_train_loss": "the lowest, over the evaluations, of the mean training-minibatch loss since the previous "
                      "evaluation (the paper's attained minimum; a generated task's minibatches are fresh data, a data "
                      "task's come from its training split, pass after pass)",
    "min_val_loss": "the lowest validation loss over the evaluations (the paper's attained minimum)",
    "min_val_bpc": "the lowest validation bits per character over the evaluations (Table 4's measure)",
    "min_val_ppl": "the lowest validation perplexity over the evaluations (Table 5's measure)",
    "final_train_loss": "the mean training-minibatch loss before the last evaluation",
    "final_val_loss": "the validation loss at the last evaluation",
    "test_loss_at_best_val": "the test loss at the evaluation with the lowest validation loss (model selection "
                             "on validation, as a held-out result should be)",
}
STAT_DEFINITIONS["min_val_mae"] = "the lowest validation mean absolute error over the evaluations (regression tasks)"
for _metric in ("bpc", "ppl", "accuracy", "mae"):  # the task's own measure, taken the same way
    STAT_DEFINITIONS[f"test_{_metric}_at_best_val"] = STAT_DEFINITIONS["test_loss_at_best_val"].replace(
        "the test loss", f"the test {_metric}", 1)


# The same statistics on a user's task, which no paper reports: no "the paper's" in their words.
OWN_TASK_DEFINITIONS = {
    "min_train_loss": "the lowest, over the evaluations, of the mean training-minibatch loss since the previous "
                      "evaluation (the attained minimum; minibatches come from the training split, pass after pass)",
    "min_val_loss": "the lowest validation loss over the evaluations (the attained minimum)",
    "min_val_bpc": "the lowest validation bits per character over the evaluations",
    "min_val_ppl": "the lowest validation perplexity over the evaluations",
}


def definitions(keys, own_task: bool = False) -> str:
    """"statistics: min train = ...; ..." for the statistics ``keys`` that have a definition
    (``own_task``: worded for a user's task, which no paper reports)."""
    defined = {**STAT_DEFINITIONS, **(OWN_TASK_DEFINITIONS if own_task else {})}
    known = [f"{STAT_LABELS.get(key, key)} = {defined[key]}" for key in keys if key in defined]
    return "statistics: " + "; ".join(known) if known else ""


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
    label: str  # "atn", or "atn (k=45, bias outside)" when the model has several rows
    model: str  # the zoo name: lstm, ln, atn, gru-ln, ...
    cell: str
    norm: str
    k: Optional[int]  # for windowed norms; None otherwise (or when the row mixes k)
    seeds: tuple  # seeds of the done runs, in run order
    diverged_seeds: tuple
    run_ids: tuple
    stats: dict[str, Stat]
    settings: dict = field(default_factory=dict)  # the row's identity settings (atnbench.evidence.identity)
    stale: bool = False  # made by other code than the running atnbench (another code fingerprint)
    k_label: str = ""  # the label of a k-ablation: "atn k=5", with what else tells the row apart
    k_series: str = ""  # that else: " (bias outside)"; a k-ablation figure draws one line per series

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
    # runs that validated on different subsets of a validation split the baseline is measured on
    # (a task of your own at several --val-samples): each subset's baseline, by val_samples
    subset_baselines: dict = field(default_factory=dict)

    def baseline_for(self, runs: Iterable[RunData]) -> Optional[float]:
        """The baseline ``runs`` are judged against: that of the subset they all validated on,
        else the group's."""
        if not self.subset_baselines:
            return self.baseline
        values = {self.subset_baselines.get(run.record.config.get("val_samples")) for run in runs}
        return values.pop() if len(values) == 1 and None not in values else self.baseline

    def baseline_of(self, label: str) -> Optional[float]:
        """The baseline row ``label`` is judged against: its own subset's, else the group's."""
        return self.baseline_for(self.runs.get(label, []))

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
        if is_held_out(name):  # the test split never selects: its numbers only at validation's pick, below
            continue
        series = [_finite((p.metrics or {}).get(name)) for p in curve]
        points = [v for v in series if v is not None]
        if points:
            if higher_is_better(name):
                values[f"max_{name}"] = max(points)
            else:
                values[f"min_{name}"] = min(points)
        if series and series[-1] is not None:
            values[f"final_{name}"] = series[-1]
    values.update(_at_best_val(curve))
    for name in COST_STATS:
        value = _finite(summary.get(name))
        if value is not None:
            values[name] = value
    return values


def _at_best_val(curve) -> dict[str, float]:
    """Every test statistic of the curve at the evaluation with the lowest validation loss."""
    return {f"{name}_at_best_val": value for name, value in held_out_at_best_val(curve).items()}


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
    names = list(models())
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
        by_settings: dict[str, list[RunData]] = {}
        for run in model_runs:
            by_settings.setdefault(_key(row_settings(run.record)), []).append(run)
        parts = [row_settings(part[0].record) for part in by_settings.values()]
        # a setting added after the first runs is absent from a row at its neutral value, so the
        # names come from every row: one the first row lacks still tells the others apart
        names = dict.fromkeys(name for settings in parts for name in settings)
        varied = [name for name in names if len({_key(p.get(name)) for p in parts}) > 1]
        stale_codes = {p.get("code") for p in parts if _is_stale(p.get("code"))}
        for settings, part in sorted(zip(parts, by_settings.values()), key=lambda sp: _settings_order(sp[0], varied)):
            label = _label(model, norm, settings, varied, name_stale_code=len(stale_codes) > 1)
            label = _unique(label, row_runs)
            row = _make_row(label, model, cell, norm, settings.get("k"), part)
            row.settings = settings
            row.stale = _is_stale(settings.get("code"))
            row.k_series = _label(model, norm, settings, [name for name in varied if name != "k"],
                                  name_stale_code=len(stale_codes) > 1).removeprefix(model)
            row.k_label = _unique(f"{model} k={row.k}{row.k_series}", {r.k_label: None for r in rows})
            rows.append(row)
            row_runs[label] = [r for r in part if r.record.status == "done"]

    unknown = [row.label for row in rows if row.settings.get("code") is None]
    if unknown:
        notes.append(f"recorded before code fingerprints (the code that made them is unknown): {', '.join(unknown)}")
    stale = [row for row in rows if row.stale]
    if stale:
        notes.append(f"{STALE_MARK} stale: made by other code than this atnbench's (code fingerprint "
                     f"{current_code()}): {', '.join(row.label for row in stale)}; `atnbench sweep` re-runs them")
    for row in rows:
        repeated = sorted({s for s in row.seeds if row.seeds.count(s) > 1}, key=str)
        if repeated:
            notes.append(f"{row.label}: several runs share seed {', '.join(map(str, repeated))} "
                         f"(their configs differ); each run counts once in the mean")
    if left_out:
        parts = ", ".join(f"{n} {status}" for status, n in sorted(left_out.items()))
        notes.append(f"not shown: {parts} run{'s' if sum(left_out.values()) > 1 else ''}")
    classes = _processor_classes(run for row in rows for run in row_runs.get(row.label, []))
    if len(classes) > 1:  # a mean over seeds pools them; a study tests such sides stratified
        counted = ", ".join(f"{name} {n}" for name, n in sorted(classes.items()))
        notes.append(f"seeds made on {len(classes)} processor classes, pooled ({counted} runs): float rounding "
                     f"differs between them, which moves a single seed by a few percent")
    baseline, subset_baselines, said = _baseline(task, T, runs, row_runs, baselines)
    if said:
        notes.append(said)
    return Group(task=task, T=T, budget=budget, variant=variant, rows=rows, baseline=baseline,
                 notes=notes, runs=row_runs, subset_baselines=subset_baselines)


def _baseline(task: str, T: int, runs: list[RunData], row_runs: dict[str, list[RunData]],
              baselines: dict) -> tuple[Optional[float], dict, Optional[str]]:
    """The group's no-memory baseline, each validation subset's (where they differ), and a note.

    A baseline measured on the validation split (a task of your own) depends on the subset the
    runs validate on (their val_samples): the group's is that of most of its runs (at a tie, the
    larger subset; subsets with the same baseline, such as the whole split asked for as 20 or
    as 100 sequences, count as one), given for (task, T, val_samples), else for (task, T), else
    the one those runs recorded. A row whose runs all validated on another subset is judged
    against that subset's: a verdict on two rows never moves with other rows' runs."""
    by_val: dict = {}  # val_samples -> the baseline of that subset
    for v in {run.record.config.get("val_samples") for run in runs}:
        value = baselines.get((task, T, v))
        if value is None:
            value = baselines.get((task, T))
        if value is None:  # the one the subset's runs recorded (most of them, if they differ)
            recorded = Counter(_finite(r.record.summary.get("baseline")) for r in runs
                               if r.record.summary and r.record.config.get("val_samples") == v)
            recorded.pop(None, None)
            value = recorded.most_common(1)[0][0] if recorded else None
        if value is not None:
            by_val[v] = value
    counts = Counter(by_val[v] for v in (r.record.config.get("val_samples") for r in runs) if v in by_val)
    if not counts:
        return None, {}, None
    # a subset's size; a run stored without val_samples validated on the whole split
    size = {value: min(math.inf if v is None else v for v, b in by_val.items() if b == value) for value in counts}
    baseline = max(counts, key=lambda value: (counts[value], size[value]))
    if len(counts) == 1:
        return baseline, {}, None

    def subset(value: float) -> str:
        return "whole validation split" if size[value] == math.inf else f"{size[value]} validation sequences"

    own = {}
    for label, its in row_runs.items():
        values = {by_val.get(run.record.config.get("val_samples")) for run in its}
        if len(values) == 1 and None not in values and values != {baseline}:
            own[label] = values.pop()
    on_own = "; ".join(f"{label} against {value:.4g} (the {subset(value)} it validates on)" for label, value in own.items())
    return baseline, by_val, (f"baseline {baseline:.4g}: the no-information guess on the {subset(baseline)} "
                              f"{counts[baseline]} of the {sum(counts.values())} runs validate on"
                              + (f"; rows on other subsets are judged against their own: {on_own}" if on_own else ""))


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


# -- row identity -------------------------------------------------------------------------------

STALE_MARK = "†"
# What a group already fixes, or what varies inside a row (seeds).
GROUP_FIELDS = ("task", "T", "budget", "variant", "seed")


def current_code() -> str:
    from atnbench.evidence.identity import code_fingerprint

    return code_fingerprint()


def _processor_classes(runs: Iterable[RunData]) -> Counter:
    """How many runs each processor class (``machine.processor_class``; "unknown" where none was
    recorded) made."""
    from atnbench.evidence.machine import processor_class

    return Counter(processor_class(run.record.env, run.record.config) for run in runs)


def _is_stale(code: Optional[str]) -> bool:
    """Made by other code: a recorded fingerprint that is not the running atnbench's."""
    return code is not None and code != current_code()


def row_settings(record: RunRecord) -> dict:
    """The settings a row's runs share: their identity less the group's fields and the seed,
    plus the code fingerprint they were made by (None for runs recorded before fingerprints; the
    current one for a code a canary vouched for, ``atnbench.evidence.equivalence``)."""
    from atnbench.evidence.equivalence import current_equivalent
    from atnbench.evidence.identity import identity

    columns = {"task": record.task, "T": record.T, "norm": record.norm, "k": record.k, "seed": record.seed}
    config = {**{key: value for key, value in columns.items() if value is not None}, **record.config}
    settings = {key: value for key, value in identity(config).items() if key not in GROUP_FIELDS}
    settings["code"] = current_equivalent((record.env or {}).get("code"), config)  # vouched code: current
    return settings


def _key(value) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)


def _settings_order(settings: dict, varied: list[str]) -> tuple:
    return tuple((settings.get(name) is not None, _key(settings.get(name))) if name != "k" else
                 (settings.get("k") is None, settings.get("k") or 0) for name in varied)


def _label(model: str, norm: str, settings: dict, varied: list[str], name_stale_code: bool = False) -> str:
    """The model name, with the settings that tell its rows apart: "atn (k=25, bias outside)";
    rows made by two old codes name each by its fingerprint's first digits."""
    parts = [setting_text(name, settings[name] if name in settings else setting_default(name), norm)
             for name in varied if name != "code"]
    if _is_stale(settings.get("code")):
        parts.append(f"stale {settings['code'][:8]} {STALE_MARK}" if name_stale_code else f"stale {STALE_MARK}")
    elif "code" in varied:
        parts.append("current code" if settings.get("code") else "code unknown")
    return f"{model} ({', '.join(parts)})" if parts else model


def _unique(label: str, taken: dict) -> str:
    """Rows are looked up by label: two that read alike (settings equal to the printed digits)
    are numbered rather than merged."""
    number = 2
    unique = label
    while unique in taken:
        unique, number = f"{label} #{number}", number + 1
    return unique


def setting_text(name: str, value, norm: str) -> str:
    """One setting as a reader says it: k=25, bias outside, eps=0.001, init=torch."""
    if name == "bias_inside":
        from atnbench.registry import get_scheme

        inside = value if value is not None else get_scheme(norm).bias_inside
        return "bias inside" if inside else "bias outside"
    if name == "init" and value is None:
        from atnbench.registry import get_scheme

        return f"init={get_scheme(norm).init}"
    if name == "options" and isinstance(value, dict):
        return ", ".join(f"{key}={item}" for key, item in sorted(value.items())) or "no options"
    if isinstance(value, float):
        return f"{name}={value:g}"
    return f"{name}={value}"


# -- the k-ablation view ---------------------------------------------------------------------------


def k_ablations(groups: Iterable[Group]) -> list[KAblation]:
    """For every group with a windowed model (ATN): that model's rows by k, the rest as references."""
    views = []
    for group in groups:
        windowed = [row for row in group.rows if is_windowed(row.norm) and row.k is not None]
        for model in dict.fromkeys(row.model for row in windowed):
            rows = sorted((row for row in windowed if row.model == model), key=lambda row: row.k)
            references = [row for row in group.rows if not is_windowed(row.norm)]
            views.append(KAblation(group=group, model=model, rows=rows, references=references))
    return views


def budget_label(budget: float) -> str:
    """"full protocol" or "reduced budget (5%)"."""
    if budget >= 1:
        return "full protocol"
    return f"reduced budget ({budget * 100:.3g}%)"

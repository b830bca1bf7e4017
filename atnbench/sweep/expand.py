"""A sweep file -> the list of run configs it stands for, in a fixed order with fixed run ids.

Each run's settings are layered (later wins): the task preset (through ``resolve_run``) <
``base`` < the grid point < the ``runs`` entry < command-line overrides, then ``--budget``
shrinks it. Order: seeds outermost (an interrupted sweep has whole seeds done first), then grid
points, then ``runs`` entries, each in file order.

Canonical run ids: a setting that does not change the model must not split one run into
several. ``k`` only enters the windowed normalizations (ATN, ATN-BN): for every other norm a
sweep's k is dropped, so the run takes the k that ``atnbench run`` would give it (the task
preset's for its T) and LSTM/LN runs are one run however many k values the sweep lists, and the
same run as in every other sweep and as ``atnbench run`` with the same settings. Likewise a
``bias_inside`` equal to the norm's default placement is stored as the default (null).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Any, Optional

from atnbench.config import ConfigError, RunConfig
from atnbench.evidence.identity import uses
from atnbench.run.progress import run_label
from atnbench.sweep.spec import SweepSpec, check_plan_size
from atnbench.evidence.identity import run_id_of

@dataclass(frozen=True)
class PlannedRun:
    config: RunConfig
    label: str  # "copying T=100 atn k=45 seed=0": for tables and the live view
    # the labels of the sweep's other points that are this run (k=65 where k=45 already covers a
    # sequence of 30 steps): the sweep says so, as its table lists the first label only
    same: tuple[str, ...] = ()

    @property
    def run_id(self) -> str:
        return run_id_of(self.config)


def merge_layers(*layers: dict[str, Any]) -> dict[str, Any]:
    """Later layers win; a later ``epochs`` replaces an earlier ``steps`` and vice versa, and
    ``options`` (task extras) merge key by key, as in task presets."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for given, replaced in (("epochs", "steps"), ("steps", "epochs")):
            if given in layer:
                merged.pop(replaced, None)
        options = {**(merged.get("options") or {}), **(layer.get("options") or {})}
        merged.update(layer)
        if options:
            merged["options"] = options
    return merged


def _product(mapping: dict[str, list]) -> list[dict[str, Any]]:
    keys = list(mapping)
    return [dict(zip(keys, values)) for values in itertools.product(*(mapping[k] for k in keys))]


def points(spec: SweepSpec) -> list[dict[str, Any]]:
    """Every combination of grid point and runs entry, before seeds, in file order."""
    grid_points = _product(spec.grid) if spec.grid else [{}]
    run_points = [point for entry in spec.runs for point in _product(entry)] or [{}]
    return [{**g, **r} for g in grid_points for r in run_points]


def count_points(spec: SweepSpec) -> int:
    """How many points :func:`points` gives, without making them."""
    grid = math.prod(len(values) for values in spec.grid.values()) if spec.grid else 1
    entries = sum(math.prod(len(values) for values in entry.values()) for entry in spec.runs) if spec.runs else 1
    return grid * entries


def canonical_config(task: str, settings: dict[str, Any], budget: Optional[float] = None) -> RunConfig:
    """The RunConfig for one run of a sweep; ``k: T`` means the run's own T (windowed norms).

    ``resolve_run`` canonicalises k for norms without a window and a default ``bias_inside``,
    so runs shared between sweeps (and with ``atnbench run``) share their run id.
    """
    from atnbench.run.runspec import resolve_run

    flags = dict(settings)
    if flags.get("k") == "T":
        del flags["k"]
        config = resolve_run(task, flags, budget=budget)
        return resolve_run(task, {**flags, "k": config.T}, budget=budget)
    return resolve_run(task, flags, budget=budget)


def expand(spec: SweepSpec, budget: Optional[float] = None, seeds: Optional[tuple[int, ...]] = None,
           overrides: Optional[dict[str, Any]] = None) -> list[PlannedRun]:
    """The sweep's runs, deduplicated by run id (first occurrence kept), in a fixed order.

    ``overrides`` (command-line run flags) apply to every run; ``budget`` and ``seeds`` replace
    the file's. Any run that cannot be configured is a ConfigError naming the sweep file.
    """
    overrides = {key: value for key, value in (overrides or {}).items() if value is not None}
    seeds = seeds or spec.seeds
    check_plan_size(len(seeds) * count_points(spec), f"sweep {spec.name}")  # before a huge grid is built
    settings_points = points(spec)
    extra = tuple(key for key in spec.varied if key not in ("T", "norm", "k", "seed", "task"))
    planned: dict[str, PlannedRun] = {}
    first: dict[str, dict[str, Any]] = {}  # run id -> the sweep point that planned it
    for seed in seeds:
        for point in settings_points:
            settings = merge_layers(spec.base, point, overrides, {"seed": seed})
            try:
                config = canonical_config(spec.task, settings, budget)
            except (ConfigError, ValueError) as err:
                described = " ".join(f"{key}={value}" for key, value in {**point, "seed": seed}.items())
                message = str(err).splitlines()[0] if str(err) else type(err).__name__
                error = ConfigError(f"{spec.source}: run {described}: {message}")
                error.reason = message  # what is wrong, without where (for callers that say where)
                raise error from None
            run_id, label = run_id_of(config), run_label(config, extra)
            if run_id not in planned:
                planned[run_id], first[run_id] = PlannedRun(config, label), point
                continue
            said = _same_run(label, point, planned[run_id], first[run_id])
            if said is not None and said not in planned[run_id].same:
                planned[run_id] = dataclasses.replace(planned[run_id], same=(*planned[run_id].same, said))
    return list(planned.values())


def _same_run(label: str, point: dict[str, Any], run: PlannedRun, first: dict[str, Any]) -> Optional[str]:
    """How the sweep names ``run`` again at ``point``, where that is worth a line: another label
    (k=65 beside k=45), or the same one spelled otherwise (``LN`` beside ``ln``, ``k: T`` beside
    ``k: 10``) or given twice in ``runs:``; None where the points differ only in a setting the run
    does not use (a grid's k for LN: the grid's product, meant)."""
    if label != run.label:
        return label
    differ = sorted(key for key in {*point, *first} if point.get(key) != first.get(key))
    if differ and not any(uses(run.config, key) for key in differ):
        return None
    return label


def pick(spec: SweepSpec, runs: list[PlannedRun], flags: dict[str, Any], budget: Optional[float] = None,
         seeds: Optional[tuple[int, ...]] = None, overrides: Optional[dict[str, Any]] = None) -> list[PlannedRun]:
    """The runs that run flags on settings the sweep varies leave unchanged: the sweep expanded
    with the flags on top, as run ids (``sweep table2-adding --T 100``: its T=100 half). The
    flags are resolved as for any run, so aliases pick what they name (``--norm lstm``, the
    default variant by its name), and a flag a run ignores (``--k`` for LN) keeps it, but only
    beside a run that has the value (``k-ablation --k 7`` picks nothing, not just LN and LSTM;
    ``--norm ln --k 5`` on a grid with ATN k=5 picks LN, as ``run --norm ln --k 5`` runs it)."""
    def kept(picked: dict[str, Any]) -> set[str]:
        return {run.run_id for run in expand(spec, budget=budget, seeds=seeds, overrides={**(overrides or {}), **picked})}

    every = kept(flags)
    chosen = [run for run in runs if run.run_id in every]
    for key, value in flags.items():
        using = [run for run in runs if uses(run.config, key)]
        if using and not any(run.run_id in every for run in using):  # does the sweep have the value at all?
            alone = kept({key: value})
            if not any(run.run_id in alone for run in using):
                return []
    return chosen

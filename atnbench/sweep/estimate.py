"""What runs will cost before they run: measured where the store has done the same work, else
a rough model.

A finished run in the store prices every planned run with the same *cost signature* (task, T,
cell, normalization, hidden size, layers, device type, threads): its wall time per unit of work
(a training sample is one unit, an evaluation sample a third of one), median over the matching
runs, times the planned run's units. So a sweep's second half is priced by its first, and a
budgeted plan by the runs of any budget. Runs without a match use ``SECONDS_PER_UNIT``, a
formula good to a factor of 2-3, no better (it ignores the machine and small-model overheads:
it priced adding runs 2.4x too high on the project's VM). A measured price is as good as the
conditions it was measured under: two runs sharing two cores price two runs sharing two cores.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from atnbench.config import RunConfig

# Seconds per (sequence step x sample x hidden^2) of training, measured with one torch thread on
# a 2-core x86 CPU for ATN/BN-type LSTMs; the plain LSTM's fused kernel and LN are cheaper.
SECONDS_PER_UNIT = 3.5e-9
NORM_COST = {"none": 0.15, "ln": 0.4}
EVAL_SAMPLE = 1 / 3  # an evaluation sample costs about a third of a training sample

Signature = tuple


@dataclass(frozen=True)
class Estimate:
    seconds: float
    measured: int  # runs priced from measured runs in the store
    runs: int

    def note(self) -> str:
        """How the estimate was made, for a table caption."""
        if not self.runs:
            return "nothing left to run"
        if self.measured == self.runs:
            return "from measured runs in the store"
        if self.measured:
            return (f"{self.measured} of {self.runs} runs priced from measured runs in the store, the rest by a "
                    f"rough model (a factor of 2-3)")
        return "a rough model, good to a factor of 2-3: no measured run of the same work in the store"


def signature(config: dict) -> Signature:
    return tuple(config.get(key) for key in ("task", "T", "cell", "norm", "hidden", "layers", "device", "threads"))


def work_units(config: dict, steps: float) -> float:
    """Training samples plus evaluation samples weighted by EVAL_SAMPLE, over ``steps`` steps."""
    evals = steps / max(int(config.get("eval_every") or 1), 1)
    return steps * config["batch_size"] + evals * config["val_samples"] * EVAL_SAMPLE


def rough_seconds(config: RunConfig) -> float:
    from atnbench.tasks import get_task

    length = get_task(config.task).seq_len(config.T)
    units = work_units(config.to_dict(), config.steps)
    return units * length * config.hidden ** 2 * config.layers * NORM_COST.get(config.norm, 1.0) * SECONDS_PER_UNIT


def measured_rates(store_path: Optional[Path]) -> dict[Signature, float]:
    """Median seconds per work unit of the store's finished runs, by cost signature ({} when
    there is no store)."""
    from atnbench.store import ResultsStore, StoreMissing

    if store_path is None:
        return {}
    try:
        store = ResultsStore.open_read_only(store_path)
    except StoreMissing:
        return {}
    rates: dict[Signature, list[float]] = {}
    with store:
        for record in store.runs(status="done"):
            summary, config = record.summary or {}, record.config or {}
            wall, steps = summary.get("wall_s"), summary.get("steps")
            try:
                units = work_units(config, float(steps))
            except (KeyError, TypeError, ValueError):
                continue
            if isinstance(wall, (int, float)) and wall > 0 and units > 0:
                rates.setdefault(signature(config), []).append(wall / units)
    return {key: statistics.median(values) for key, values in rates.items()}


def estimate(configs: list[RunConfig], rates: dict[Signature, float]) -> Estimate:
    """Single-thread CPU seconds for the runs: the measured ``rates`` (``measured_rates``) where
    they price a run's signature, the rough model elsewhere."""
    seconds, measured = 0.0, 0
    for config in configs:
        as_dict = config.to_dict()
        rate = rates.get(signature(as_dict))
        if rate is None:
            seconds += rough_seconds(config)
        else:
            seconds += rate * work_units(as_dict, config.steps)
            measured += 1
    return Estimate(seconds, measured, len(configs))


def estimate_seconds(configs: list[RunConfig]) -> float:
    """The rough model alone (``sweep --list``: no store to measure from)."""
    return sum(rough_seconds(config) for config in configs)


def cpu_time_text(seconds: float) -> str:
    """A price as tables show it: ~N CPU-h, ~N CPU-min, or none."""
    if seconds <= 0:
        return "none"
    hours = seconds / 3600
    if hours >= 1:
        return f"~{hours:.1f} CPU-h"
    return f"~{max(seconds / 60, 0.1):.1f} CPU-min"

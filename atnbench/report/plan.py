"""Sizing a study from pilot runs (``--seeds-for-power``) and pricing it (``--dry-run``).

The pilot is what the store already holds for the study's configurations (exploratory seeds,
never the study's own: those are fresh): for each side, the runs of exactly the configuration the
study runs for it, seeds aside (its length, budget and variant, its k and settings), whatever code
made them; never another k or budget the side's words would also match. For every comparison
the study will test, Welch's test at alpha / m needs ``verdicts.seeds_for_power`` seeds a side for
the asked power at the pilot's difference and variances; the looks cost a little more
(``sequential.inflation``). The study's
maximum is the largest of them, capped by ``--max-seeds``, with an interval from the pilot's own
uncertainty (the seeds needed at the two ends of each difference's 95% interval). A pilot of fewer
than 3 seeds a side, or one without spread, cannot size a study: one line says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional

from atnbench.errors import UserError
from atnbench.evidence.identity import identity
from atnbench.report import sequential
from atnbench.report.aggregate import GROUP_FIELDS
from atnbench.report.claims import parse_side
from atnbench.report.study import side_matches
from atnbench.report.verdicts import MAX_PLANNED_SEEDS, MIN_SEEDS, CannotPlan, at_baseline, seeds_for_power


AT_BASELINE = ("both sides' pilot runs sit at the task's baseline (they learned nothing), so a study would find "
               "the comparison uninformative at any number of seeds; it can be sized once its pilot runs learn")


@dataclass(frozen=True)
class Sizing:
    comparison: str
    pilot_n: tuple[int, int]
    seeds: Optional[int]  # the study's maximum this comparison asks for (None: cannot plan)
    interval: Optional[tuple[int, int]]
    why_not: str = ""

    def text(self) -> str:
        if self.seeds is None:
            return f"{self.comparison}: {self.why_not}"
        high = f"> {MAX_PLANNED_SEEDS:,}" if self.interval[1] > MAX_PLANNED_SEEDS else str(self.interval[1])
        seeds = f"> {MAX_PLANNED_SEEDS:,}" if self.seeds > MAX_PLANNED_SEEDS else str(self.seeds)
        return (f"{self.comparison}: {seeds} seeds a side (interval {self.interval[0]} to {high}; pilot "
                f"{self.pilot_n[0]} and {self.pilot_n[1]} seeds)")


def looks_up_to(maximum: int, count: int = 5) -> tuple[int, ...]:
    """``count`` looks evenly spread up to ``maximum`` seeds, the first at MIN_SEEDS or more."""
    maximum = max(maximum, MIN_SEEDS)
    looks = sorted({max(MIN_SEEDS, math.ceil(maximum * (j + 1) / count)) for j in range(count)})
    return tuple(looks)


def pilot_runs(groups: Iterable, configs) -> list:
    """The runs of ``groups`` that are one of ``configs`` but for the seed: the same length, budget
    and variant (the group) and the same settings (the row: k, hidden, bias placement, ...),
    whatever code made them."""
    wanted = [((config.T, config.budget, config.variant),
               {key: value for key, value in identity(config.to_dict()).items() if key not in GROUP_FIELDS})
              for config in configs]
    return [run for runs, _ in _pilot_by_group(groups, wanted) for run in runs]


def pilot_baseline(groups: Iterable, configs) -> Optional[float]:
    """The no-information (no-memory) baseline the pilot runs of ``configs`` are judged against
    (None where the task has none, or the runs span groups judged against different ones)."""
    wanted = [((config.T, config.budget, config.variant),
               {key: value for key, value in identity(config.to_dict()).items() if key not in GROUP_FIELDS})
              for config in configs]
    values = {baseline for _, baseline in _pilot_by_group(groups, wanted)}
    return values.pop() if len(values) == 1 else None


def _pilot_by_group(groups: Iterable, wanted: list) -> list[tuple[list, Optional[float]]]:
    found = []
    for group in groups:
        runs = []
        for row in group.rows:
            settings = {key: value for key, value in row.settings.items() if key != "code"}
            if ((group.T, group.budget, group.variant), settings) in wanted:
                runs.extend(group.runs.get(row.label, []))
        if runs:
            found.append((runs, group.baseline_for(runs)))
    return found


def size(comparisons, configs, groups: Iterable, alpha_each: float, power: float,
         looks_count: int = 5) -> list[Sizing]:
    """Each planned comparison's maximum seeds from the pilot ``groups``: per side, the runs of
    the configuration among ``configs`` (the study's runs of one seed) that the side names."""
    from atnbench.report.verdicts import _run_numbers, learned_losses

    groups, configs = list(groups), list(configs)
    fractions = tuple((j + 1) / looks_count for j in range(looks_count))
    factor = sequential.inflation(fractions, alpha_each, power) if looks_count > 1 else 1.0
    found = []
    comparisons = list(comparisons)
    pairs = [(planned.lower, planned.higher) for planned in comparisons]
    for planned in comparisons:
        name = f"{planned.lower} < {planned.higher}"
        if pairs.count((planned.lower, planned.higher)) > 1:  # the same rows on two statistics: say which
            name += f" ({planned.stat})"
        values, baselines, losses = [], [], []
        for text in (planned.lower, planned.higher):
            side = parse_side(text)
            matching = [config for config in configs if side_matches(side, config)]
            runs = pilot_runs(groups, matching)
            values.append(_run_numbers(runs, planned.stat)[0])
            baselines.append(pilot_baseline(groups, matching))
            losses.append(learned_losses(runs))
        sign = -1.0 if planned.higher_is_better else 1.0
        a, b = ([sign * v for v in side] for side in values)
        # "learned nothing" judged on the losses, in the baseline's units, as verdicts.compare judges it
        if all(at_baseline(side, base) for side, base in zip(losses, baselines)):
            # a study of them would end "uninformative" whatever its seeds (verdicts.compare): not sized
            found.append(Sizing(name, (len(a), len(b)), None, None, AT_BASELINE))
            continue
        try:
            n, (low, high) = seeds_for_power(a, b, alpha_each, power)
        except CannotPlan as why:
            found.append(Sizing(name, (len(a), len(b)), None, None, str(why)))
            continue
        grow = lambda k: k if k > MAX_PLANNED_SEEDS else math.ceil(k * factor)  # noqa: E731
        found.append(Sizing(name, (len(a), len(b)), grow(n), (grow(low), grow(high))))
    return found


def maximum(sizings: list[Sizing], max_seeds: int) -> tuple[int, bool]:
    """The study's maximum seeds and whether --max-seeds capped it; UserError when no comparison
    could be sized."""
    sized = [s.seeds for s in sizings if s.seeds is not None]
    if not sized:
        reasons = "; ".join(s.text() for s in sizings) or "no comparison of the claims file is in this sweep"
        if sizings and all(s.why_not == AT_BASELINE for s in sizings):  # more seeds or --looks would not help
            raise UserError(f"--seeds-for-power: no comparison of the study can be decided: {reasons}")
        raise UserError(f"--seeds-for-power cannot size the study from the store's pilot runs: {reasons}. "
                        f"Run a pilot of a few seeds first (--seeds 0-2), or give --looks")
    wanted = max(sized)
    return min(wanted, max_seeds), wanted > max_seeds


def pilot_groups(store_path, task: str, Ts: Iterable[int]) -> list:
    """The report's groups of the store's finished runs of ``task`` at the lengths ``Ts``."""
    from pathlib import Path

    from atnbench.report.aggregate import RunData, aggregate
    from atnbench.store import ResultsStore
    from atnbench.tasks.lookup import task_of

    if not Path(store_path).is_file():
        return []
    Ts = set(Ts)
    with ResultsStore.open_read_only(store_path) as results:
        runs = [RunData(r, tuple(results.curve(r.run_id)) if r.status == "done" else ())
                for r in results.runs(task=task) if r.T in Ts and r.status in ("done", "diverged")]
    baselines = {}
    options = next((r.record.config.get("options") for r in runs), None)
    for T, val_samples in {(r.record.T, r.record.config.get("val_samples")) for r in runs}:
        try:
            baselines[(task, T, val_samples)] = task_of(task, options).baseline_of(T, val_samples)
        except (ValueError, TypeError):
            pass
    return [group for group in aggregate(runs, baselines) if group.rows]

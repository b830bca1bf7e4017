"""Seeds planned before running (#31): how many seeds a sweep's claims need, fixed in the store
before the new runs start.

From the runs a store already holds for the sweep's task and lengths (a pilot), every claim's
comparison gets the seeds per side a two-sided t-test at alpha / m needs for the asked power at
the observed difference and spread (``verdicts.seeds_for_power``; m = the comparisons planned
for, Bonferroni, Holm's strictest step). The plan is the largest of them, capped by
``max_seeds``. It is recorded in the store's ``meta`` table under ``plan:<sweep>`` with the
numbers it used and the date, and a later ``--seeds-for-power`` on the same sweep reuses it: the
seed count is fixed before the runs, never raised until p drops.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Iterable, Optional

from atnbench.errors import UserError
from atnbench.report.verdicts import ALPHA, Claim, evaluate, paper_claims, seeds_for_power

PREFIX = "plan:"


@dataclass(frozen=True)
class Plan:
    sweep: str
    seeds: int  # per configuration: seeds 0 .. seeds-1
    power: float
    alpha: float  # per comparison: ALPHA / m
    max_seeds: int
    capped: bool  # some comparison would need more than max_seeds
    comparisons: tuple[dict, ...]  # lower, higher, pilot n, difference, spread, seeds
    planned_at: str

    def line(self) -> str:
        cap = f", capped at --max-seeds {self.max_seeds}" if self.capped else ""
        return (f"plan for sweep {self.sweep} ({self.planned_at[:10]}): {self.seeds} seeds per configuration for "
                f"{self.power:.0%} power at alpha {self.alpha:.3g} over {len(self.comparisons)} comparisons{cap} "
                f"(pilot estimate from the runs then in the store)")


def plan(sweep: str, groups: Iterable, power: float, max_seeds: int,
         claims: Optional[Iterable[Claim]] = None) -> Plan:
    """The seed plan for ``sweep`` from the pilot ``groups`` (its task and lengths)."""
    results, _ = evaluate(paper_claims() if claims is None else claims, groups, alpha=ALPHA)
    tested = [c for r in results for c in r.comparisons if c.p_value is not None]
    if not tested:
        raise UserError(f"--seeds-for-power: the store holds no pilot runs (2 seeds a side) for a claim of sweep "
                        f"{sweep}; run it with a few seeds first (--seeds 0-2)")
    alpha = ALPHA / len(tested)
    rows, needed = [], []
    for c in tested:
        n = seeds_for_power(c.a.values, c.b.values, alpha, power)
        rows.append({"lower": c.better, "higher": c.worse, "stat": c.stat, "pilot_n": [c.a.n, c.b.n],
                     "difference": c.diff, "spread": [c.a.std, c.b.std], "seeds": n})
        if n is not None:
            needed.append(n)
    planned = max(needed, default=2)
    return Plan(sweep, max(2, min(planned, max_seeds)), power, alpha, max_seeds, planned > max_seeds, tuple(rows),
                datetime.now(timezone.utc).isoformat(timespec="seconds"))


def pilot_groups(store_path, task: str, Ts: Iterable[int]) -> list:
    """The report's groups of the store's finished runs of ``task`` at the lengths ``Ts``."""
    from atnbench.report.aggregate import RunData, aggregate
    from atnbench.store import ResultsStore
    from atnbench.tasks.registry import task_of

    Ts = set(Ts)
    with ResultsStore.open_read_only(store_path) as results:
        runs = [RunData(r, tuple(results.curve(r.run_id)) if r.status == "done" else ())
                for r in results.runs(task=task) if r.T in Ts and r.status in ("done", "diverged")]
    baselines = {}
    options = next((r.record.config.get("options") for r in runs), None)
    for T in Ts:
        try:
            baselines[(task, T)] = task_of(task, options).baseline(T)
        except (ValueError, TypeError):
            pass
    return [group for group in aggregate(runs, baselines) if group.rows]


def seeds_for(store_path, sweep: str, task: str, Ts: Iterable[int], power: float, max_seeds: int,
              record_it: bool) -> tuple[list[int], str]:
    """Seeds 0 .. n-1 for ``sweep`` and a line saying where n came from: the plan the store
    records for the sweep, else one made now from its pilot runs (recorded when ``record_it``).
    A UserError when there is no store or no pilot to plan from."""
    from pathlib import Path

    from atnbench.store import ResultsStore

    if not 0 < power < 1:
        raise UserError(f"--seeds-for-power is a power in (0, 1), e.g. 0.8; got {power:g}")
    if not Path(store_path).is_file():
        raise UserError(f"--seeds-for-power plans from pilot runs, and there is no store at {store_path}; "
                        f"run the sweep with a few seeds first (--seeds 0-2)")
    with ResultsStore.open_read_only(store_path) as results:
        kept = recorded(results, sweep)
    if kept:
        return list(range(kept[0].seeds)), f"note: {kept[0].line()}; reused (the plan is fixed before the runs)"
    chosen = plan(sweep, pilot_groups(store_path, task, Ts), power, max_seeds)
    if record_it:
        with ResultsStore(store_path) as results:
            record(results, chosen)
    return list(range(chosen.seeds)), chosen.line() + ("" if record_it else " (dry run: not recorded)")


def recorded(store, sweep: Optional[str] = None) -> list[Plan]:
    """The plans a store holds (one sweep's, or every one)."""
    found = store.meta(PREFIX + (sweep or ""))
    return [Plan(**{**value, "comparisons": tuple(value["comparisons"])}) for key, value in found.items()
            if sweep is None or key == PREFIX + sweep]


def record(store, chosen: Plan) -> None:
    store.set_meta(PREFIX + chosen.sweep, asdict(chosen))

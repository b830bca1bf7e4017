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


def recorded(store, sweep: Optional[str] = None) -> list[Plan]:
    """The plans a store holds (one sweep's, or every one)."""
    found = store.meta(PREFIX + (sweep or ""))
    return [Plan(**{**value, "comparisons": tuple(value["comparisons"])}) for key, value in found.items()
            if sweep is None or key == PREFIX + sweep]


def record(store, chosen: Plan) -> None:
    store.set_meta(PREFIX + chosen.sweep, asdict(chosen))

"""Welch's two-sided test of two sets of seeds, stratified by processor class where the sides
mix classes differently: the one test under both the single-look verdicts (``verdicts``) and
the sequential studies (``study``)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

LEVEL = 0.95  # the intervals' default confidence level


@dataclass(frozen=True)
class WelchTest:
    """Welch's test of mean(a) - mean(b), stratified by processor class where the sides mix
    classes differently (then the per-class differences are combined by inverse variance and
    the degrees of freedom summed)."""

    diff: float
    se: float
    df: float
    p: float  # two-sided; nan when the test cannot be made (see ``note``)
    stratified: bool = False
    note: str = ""

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        from scipy import stats

        half = stats.t.isf((1 - level) / 2, self.df) * self.se if self.se > 0 else 0.0
        return self.diff - half, self.diff + half


def _welch_parts(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se2 = va + vb
    df = se2 ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if se2 > 0 else float(len(a) + len(b) - 2)
    return statistics.fmean(a) - statistics.fmean(b), se2, df


def _mix(classes: Sequence[str], n: int) -> dict[str, float]:
    return {c: classes.count(c) / n for c in set(classes)} if classes else {}


def stratified(a: Sequence[float], b: Sequence[float], classes: tuple[Sequence[str], Sequence[str]]) -> bool:
    """Whether the sides mix processor classes differently (so they are compared class by class)."""
    ca, cb = classes
    return bool(ca and cb) and _mix(ca, len(a)) != _mix(cb, len(b))


def class_strata(a: Sequence[float], b: Sequence[float],
                 classes: tuple[Sequence[str], Sequence[str]]) -> list[tuple[list[float], list[float]]]:
    """The two sides' values class by class, for each class both sides have 2 seeds of at least."""
    ca, cb = classes
    strata = []
    for c in sorted(set(ca) & set(cb)):
        xa, xb = [v for v, k in zip(a, ca) if k == c], [v for v, k in zip(b, cb) if k == c]
        if len(xa) >= 2 and len(xb) >= 2:
            strata.append((xa, xb))
    return strata


def welch_test(a: Sequence[float], b: Sequence[float],
               classes: tuple[Sequence[str], Sequence[str]] = ((), ())) -> WelchTest:
    """Welch's two-sided test of a against b (2 values a side at least); ``classes`` gives each
    value's processor class: sides whose class mixes differ are tested stratified by class."""
    from scipy import stats

    ca, cb = classes
    if stratified(a, b, classes):
        strata = [_welch_parts(xa, xb) for xa, xb in class_strata(a, b, classes)]
        usable = [(d, se2, df) for d, se2, df in strata if se2 > 0]
        if not usable:
            return WelchTest(statistics.fmean(a) - statistics.fmean(b), 0.0, 1.0, float("nan"), True,
                             "the sides mix processor classes differently and no class has 2 seeds with spread "
                             "on both sides: not tested")
        weights = [1 / se2 for _, se2, _ in usable]
        diff = sum(w * d for w, (d, _, _) in zip(weights, usable)) / sum(weights)
        se = math.sqrt(1 / sum(weights))
        df = sum(df for _, _, df in usable)
        return WelchTest(diff, se, df, float(2 * stats.t.sf(abs(diff) / se, df)), True,
                         f"stratified by processor class ({len(usable)} of {len(set(ca) | set(cb))} classes)")
    diff, se2, df = _welch_parts(a, b)
    if se2 == 0:  # no spread on either side: the test is undefined
        return WelchTest(diff, 0.0, df, 1.0 if diff == 0 else 0.0)
    se = math.sqrt(se2)
    return WelchTest(diff, se, df, float(2 * stats.t.sf(abs(diff) / se, df)))

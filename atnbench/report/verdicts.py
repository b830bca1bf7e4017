"""Statistical verdicts on claims (the paper's ``paper_claims.yaml``, or a user's): pure functions.

A claim (``atnbench.report.claims``) is a set of pairwise comparisons "A is lower than B" on one
statistic, e.g. the minimum validation loss, one value per seed. Its claims file is the family:
each of the m distinct comparisons the file declares gets alpha / m, whatever a report shows.

A comparison is **decided** only inside a study whose plan was recorded before its runs
(``atnbench.report.study``: seeds in planned looks, group-sequential boundaries, equivalence
margins, futility): **reproduced**, **contradicted**, **equivalent**, or **inconclusive** (not
decided at the last look, or stopped as futile). Every other set of seeds is **exploratory**: its
numbers are shown, no verdict is drawn, because nobody can tell whether its seeds were added
after looking. Before any of that, a comparison is **uninformative** when both rows sit at the
no-memory baseline (nothing learned), and **too few seeds** below ``MIN_SEEDS`` a side, whatever
p says (docs/reproducing.md gives the reasons).

Shown with every comparison: n, means with t intervals, the difference with its Welch interval,
Welch's p and the family-adjusted p (Bonferroni, m · p), Hedges' g with the exact small-sample
correction, the probability of improvement P(A < B) with a stratified-bootstrap interval
(from MIN_SEEDS a side), on baseline tasks the seeds that left the baseline (Clopper-Pearson),
the processor classes and code fingerprints of the seeds (sides that mix processor classes
differently are tested stratified by class), and the seeds per side that Welch's test at alpha / m
would need for 80% power, with an interval from the pilot's own uncertainty.

A statistic where higher is better (accuracy) is compared on its negation, so "A < B" always reads
"A is better than B".
"""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Optional, Sequence, Union

from atnbench.errors import UserError
from atnbench.evidence.identity import config_keys
from atnbench.evidence.machine import comparable_classes, path_free, processor_class
from atnbench.report.aggregate import Group, ModelRow, RunData, higher_is_better, run_values
from atnbench.report.rule import ALPHA, MIN_SEEDS, RULE  # noqa: F401 - re-exported for the tables
from atnbench.report.welch import LEVEL, class_strata, welch_test
from atnbench.report.claims import (  # noqa: F401 - the claims' home; re-exported for callers
    CLAIMS_FILE,
    Claim,
    Family,
    Side,
    comparison_key,
    paper_claims,
    paper_family,
    parse_side,
    read_family,
)

DEFAULT_MARGIN = 0.05
BASELINE_STATS = ("min_val_loss", "min_train_loss")  # what "at baseline" looks at, first present

UNINFORMATIVE = "uninformative (no model learned)"
REPRODUCED = "reproduced"
CONTRADICTED = "contradicted"
EQUIVALENT = "equivalent"
INCONCLUSIVE = "inconclusive"
TOO_FEW = "too few seeds"
EXPLORATORY = "exploratory"
OPEN = "open"  # a study whose next look is still to come
NOT_RUN = "not run"
TEST_NAME = "Welch's t-test, two-sided; alpha / m per comparison (m: the claims file's comparisons)"
POWER = 0.8
MAX_PLANNED_SEEDS = 10_000
BOOTSTRAP_RESAMPLES = 2000


# -- cells and the baseline ------------------------------------------------------------------------


@dataclass(frozen=True)
class CellSummary:
    """One row's values of a statistic over seeds: mean ± sample std and a t interval of the mean."""

    n: int
    mean: Optional[float]
    std: Optional[float]
    ci: Optional[tuple[float, float]]  # LEVEL t interval of the mean; None with fewer than 2 values
    values: tuple[float, ...] = ()


def summarize(values: Sequence[float], level: float = LEVEL) -> CellSummary:
    from scipy import stats

    values = tuple(float(v) for v in values)
    if not values:
        return CellSummary(0, None, None, None)
    mean = statistics.fmean(values)
    if len(values) < 2:
        return CellSummary(1, mean, None, None, values)
    std = statistics.stdev(values)
    half = stats.t.ppf(0.5 + level / 2, len(values) - 1) * std / math.sqrt(len(values))
    return CellSummary(len(values), mean, std, (mean - half, mean + half), values)


def at_baseline(values: Sequence[float], baseline: Optional[float], margin: float = DEFAULT_MARGIN) -> Optional[bool]:
    """True when no value (seed) gets more than ``margin`` (a fraction of the baseline) below the
    task's no-memory baseline: the row learned nothing. None when there is no baseline or no value."""
    values = [float(v) for v in values if v is not None and math.isfinite(v)]
    if baseline is None or not values:
        return None
    return min(values) >= baseline * (1 - margin)


def baseline_values(row: ModelRow) -> tuple[str, tuple[float, ...]]:
    """The statistic a row's "at baseline" is judged on (validation minimum, else training) and its values."""
    for name in BASELINE_STATS:
        stat = row.stats.get(name)
        if stat is not None and stat.n:
            return name, stat.values
    return BASELINE_STATS[0], ()


def rows_at_baseline(group: Group, margin: float = DEFAULT_MARGIN) -> dict[str, bool]:
    """Row label -> at baseline, for the rows where it can be told (the task has a baseline)."""
    marks = {}
    for row in group.rows:
        flag = at_baseline(baseline_values(row)[1], group.baseline_of(row.label), margin)
        if flag is not None:
            marks[row.label] = flag
    return marks


def baseline_words(task: str) -> str:
    """What a task's baseline is: a shipped task's loss without memory of the inputs; a task of your
    own's loss of a guess that ignores them (the training class frequencies, or the mean), as
    `tasks check` and docs/adding-a-task.md name it."""
    from atnbench.tasks.registry import TASK_MODULES

    return "no memory" if task in TASK_MODULES else "no information"


def baseline_note(group: Group, margin: float = DEFAULT_MARGIN) -> Optional[str]:
    """One line naming the rows at baseline, or None when none is."""
    at = [label for label, flag in rows_at_baseline(group, margin).items() if flag]
    if not at:
        return None
    # one row at the baseline beside rows that learned is a finding, not an uninformative comparison
    learned = ("they learned nothing, so comparisons among them are uninformative" if len(at) > 1 else
               "it learned nothing (a comparison is uninformative only where both rows sit there)")
    words = baseline_words(group.task).replace(" ", "-")
    # rows on other validation subsets are judged against their own (the group's note names them)
    which = "of its validation subset" if group.subset_baselines else f"{group.baseline:.4g}"
    baseline = f"{words} baseline {which}"
    return f"≈ at baseline (no seed more than {margin:.0%} below the {baseline}): {', '.join(at)}; {learned}"


# -- one comparison --------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineExit:
    """How many seeds of a row left the no-memory baseline, with a Clopper-Pearson interval."""

    left: int
    n: int
    ci: tuple[float, float]


@dataclass(frozen=True)
class Comparison:
    better: str  # the row claimed lower (better)
    worse: str
    stat: str
    a: CellSummary  # the "better" side's values
    b: CellSummary
    diff: Optional[float]  # mean(a) - mean(b): negative when the claim holds
    diff_ci: Optional[tuple[float, float]]  # LEVEL CI of the difference (Welch)
    p_value: Optional[float]  # Welch, unadjusted
    verdict: str
    reason: str
    test: str = TEST_NAME
    p_adjusted: Optional[float] = None  # min(1, m p): the family's Bonferroni-adjusted p
    hedges_g: Optional[float] = None  # (a - b) / pooled std, exact small-sample correction, as measured
    p_improve: Optional[float] = None  # P(a seed of A < a seed of B), ties half; from MIN_SEEDS a side
    p_improve_ci: Optional[tuple[float, float]] = None
    left_baseline: Optional[tuple[BaselineExit, BaselineExit]] = None  # (A, B) on baseline tasks
    seeds_for_power: Optional[int] = None  # per side, POWER at alpha/m; None: cannot be planned
    seeds_interval: Optional[tuple[int, int]] = None  # from the ends of the difference's interval
    tested_with: int = 1  # m: the comparisons of the claims file (the family)
    classes: tuple[dict, dict] = ({}, {})  # processor class -> seeds, per side
    codes: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # code fingerprints, per side
    stratified: bool = False
    look: Optional[str] = None  # "look 2 of 5 (12 seeds)" for a study's comparison
    baselines: tuple[Optional[float], Optional[float]] = (None, None)  # what each side is judged against


def _on_validation(stat: str) -> bool:
    """A statistic of the validation split (min_val_loss, max_val_accuracy, ...), not of training or test."""
    return stat.startswith("val_") or stat.split("_")[1:2] == ["val"]


def welch(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> tuple[float, tuple[float, float], float]:
    """mean(a) - mean(b), its ``level`` CI and the two-sided p-value of Welch's t-test."""
    test = welch_test(a, b)
    return test.diff, test.interval(level), test.p


def hedges_g(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    """Hedges' g of a - b: the difference of means over the pooled sample std, times the exact
    small-sample correction J(df) = Gamma(df/2) / (sqrt(df/2) Gamma((df-1)/2)), df = n_a + n_b - 2
    (Hedges 1981). None without spread."""
    from scipy.special import gammaln

    na, nb = len(a), len(b)
    pooled = ((na - 1) * statistics.variance(a) + (nb - 1) * statistics.variance(b)) / (na + nb - 2)
    if pooled == 0:
        return None
    df = na + nb - 2
    correction = math.exp(gammaln(df / 2) - gammaln((df - 1) / 2)) / math.sqrt(df / 2)
    return (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(pooled) * correction


def _prob_lower(x, y, axis=-1):
    """P(X < Y) + P(X = Y) / 2 over all pairs; vectorised over leading (bootstrap) axes."""
    import numpy as np

    x, y = np.moveaxis(np.asarray(x), axis, -1)[..., :, None], np.moveaxis(np.asarray(y), axis, -1)[..., None, :]
    return (x < y).mean(axis=(-2, -1)) + 0.5 * (x == y).mean(axis=(-2, -1))


def probability_of_improvement(a: Sequence[float], b: Sequence[float], level: float = LEVEL,
                               resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, tuple[float, float]]:
    """P(a seed of A ends lower than a seed of B) and its stratified-bootstrap percentile interval
    (each side resampled within itself; a fixed seed, so the same values give the same interval)."""
    import numpy as np
    from scipy import stats

    point = float(_prob_lower(a, b))
    with warnings.catch_warnings():  # a degenerate bootstrap distribution (complete separation) is fine here
        warnings.simplefilter("ignore")
        result = stats.bootstrap((np.asarray(a), np.asarray(b)), _prob_lower, n_resamples=resamples,
                                 confidence_level=level, method="percentile", vectorized=True,
                                 rng=np.random.default_rng(0))
    return point, (float(result.confidence_interval.low), float(result.confidence_interval.high))


def hedges_g_within(strata: list[tuple[list[float], list[float]]]) -> Optional[float]:
    """Hedges' g of sides compared class by class: one class's g; several combined with
    inverse-variance weights, var(g) = (n_a + n_b) / (n_a n_b) + g^2 / (2 (n_a + n_b)) (Hedges &
    Olkin 1985, fixed effect). None where no class has spread."""
    found = []
    for xa, xb in strata:
        g = hedges_g(xa, xb)
        if g is not None:
            na, nb = len(xa), len(xb)
            found.append((g, (na + nb) / (na * nb) + g * g / (2 * (na + nb))))
    if not found:
        return None
    return sum(g / var for g, var in found) / sum(1 / var for _, var in found)


def probability_of_improvement_within(strata: list[tuple[list[float], list[float]]], level: float = LEVEL,
                                      resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, tuple[float, float]]:
    """P(a seed of A ends lower than a seed of B of the same class), ties half: over the pairs
    within each class, and its percentile interval from resampling each side within each class
    (a fixed seed). One class: ``probability_of_improvement`` of its values."""
    import numpy as np

    if len(strata) == 1:
        return probability_of_improvement(*strata[0], level, resamples)
    rng = np.random.default_rng(0)
    pairs = sum(len(xa) * len(xb) for xa, xb in strata)
    point = sum(float(_prob_lower(xa, xb)) * len(xa) * len(xb) for xa, xb in strata) / pairs
    draws = np.zeros(resamples)
    for xa, xb in strata:
        xa, xb = np.asarray(xa), np.asarray(xb)
        ra = xa[rng.integers(0, len(xa), (resamples, len(xa)))]
        rb = xb[rng.integers(0, len(xb), (resamples, len(xb)))]
        draws += _prob_lower(ra, rb) * len(xa) * len(xb)
    low, high = np.quantile(draws / pairs, [(1 - level) / 2, (1 + level) / 2])
    return point, (float(low), float(high))


def baseline_exit(values: Sequence[float], baseline: float, margin: float, level: float = LEVEL) -> BaselineExit:
    """Seeds more than ``margin`` below the baseline, out of all, with a Clopper-Pearson interval."""
    from scipy import stats

    left = sum(v < baseline * (1 - margin) for v in values)
    ci = stats.binomtest(left, len(values)).proportion_ci(confidence_level=level, method="exact")
    return BaselineExit(left, len(values), (float(ci.low), float(ci.high)))


class CannotPlan(UserError):
    """A pilot that cannot size a study: too few seeds, no spread, no difference."""


MIN_PILOT = 3


def welch_power(diff: float, var_a: float, var_b: float, n: int, alpha: float) -> float:
    """Power of Welch's two-sided test at ``alpha`` with n seeds a side, true difference ``diff``
    and variances ``var_a``, ``var_b``: the noncentral t with Satterthwaite's degrees of freedom.

    scipy's noncentral t gives nan for the far tail (below -critical) where it underflows, at a
    large noncentrality and few degrees of freedom: that tail is then 0 to double precision (it
    is below the central t's alpha / 2 always). Replacing the whole sum by a normal approximation
    there, as this did before, claimed power 1.0 at 3 seeds where the t's is 0.02."""
    from scipy import stats

    se = math.sqrt((var_a + var_b) / n)
    df = (n - 1) * (var_a + var_b) ** 2 / (var_a ** 2 + var_b ** 2)
    ncp = abs(diff) / se
    critical = stats.t.isf(alpha / 2, df)
    near, far = float(stats.nct.sf(critical, df, ncp)), float(stats.nct.cdf(-critical, df, ncp))
    if not math.isfinite(near):  # not seen on a grid of df 1.1-30, ncp 0.5-80; a number, not nan, regardless
        z = stats.norm.isf(alpha / 2)
        return float(stats.norm.sf(z - ncp) + stats.norm.cdf(-z - ncp))
    return near + (far if math.isfinite(far) else 0.0)


def seeds_needed(diff: float, var_a: float, var_b: float, alpha: float, power: float = POWER) -> int:
    """The smallest n a side (>= MIN_SEEDS, the fewest a verdict takes) at which Welch's test
    reaches ``power``; MAX_PLANNED_SEEDS + 1 beyond it. Not below MIN_SEEDS: there the power
    computed with the true variances' degrees of freedom overstates the test's (80% said, ~72%
    simulated at 4 seeds a side), and no verdict is made on fewer anyway."""
    if diff == 0 or var_a + var_b == 0:
        return MAX_PLANNED_SEEDS + 1 if diff == 0 else MIN_SEEDS
    if welch_power(diff, var_a, var_b, MAX_PLANNED_SEEDS, alpha) < power:
        return MAX_PLANNED_SEEDS + 1
    low, high = MIN_SEEDS, MAX_PLANNED_SEEDS
    while low < high:  # power grows with n: the smallest n that reaches it
        middle = (low + high) // 2
        low, high = (middle + 1, high) if welch_power(diff, var_a, var_b, middle, alpha) < power else (low, middle)
    return low


def seeds_for_power(a: Sequence[float], b: Sequence[float], alpha: float,
                    power: float = POWER) -> tuple[int, tuple[int, int]]:
    """Seeds per side Welch's test at ``alpha`` needs for ``power`` at the pilot's difference and
    variances, and an interval: the seeds at the two ends of the difference's 95% Welch interval
    (the far end past 0 means more than MAX_PLANNED_SEEDS). A pilot of fewer than MIN_PILOT seeds
    a side, or with no spread or no difference, cannot plan: CannotPlan (one line)."""
    if len(a) < MIN_PILOT or len(b) < MIN_PILOT:
        raise CannotPlan(f"a pilot needs {MIN_PILOT} seeds a side to plan from (has {len(a)} and {len(b)})")
    var_a, var_b = statistics.variance(a), statistics.variance(b)
    if var_a + var_b == 0:
        raise CannotPlan("the pilot's seeds have no spread: the seeds needed cannot be told from it")
    return _seeds_from(welch_test(a, b), var_a, var_b, alpha, power)


def seeds_for_power_within(strata: list[tuple[list[float], list[float]]], test, alpha: float,
                           power: float = POWER) -> tuple[int, tuple[int, int]]:
    """``seeds_for_power`` of sides compared class by class: the stratified test's difference and
    interval, each side's variance pooled within classes."""
    def within(side: int) -> float:
        dof = sum(len(stratum[side]) - 1 for stratum in strata)
        return sum((len(stratum[side]) - 1) * statistics.variance(stratum[side]) for stratum in strata) / dof

    sizes = [sum(len(stratum[side]) for stratum in strata) for side in (0, 1)]
    if min(sizes) < MIN_PILOT:
        raise CannotPlan(f"a pilot needs {MIN_PILOT} seeds a side to plan from (has {sizes[0]} and {sizes[1]})")
    var_a, var_b = within(0), within(1)
    if var_a + var_b == 0:
        raise CannotPlan("no spread within the classes: the seeds needed cannot be told")
    return _seeds_from(test, var_a, var_b, alpha, power)


def _seeds_from(test, var_a: float, var_b: float, alpha: float, power: float) -> tuple[int, tuple[int, int]]:
    if test.diff == 0:
        raise CannotPlan("the pilot shows no difference: no number of seeds can be planned for it")
    low, high = sorted(abs(end) for end in test.interval())
    far = MAX_PLANNED_SEEDS + 1 if test.interval()[0] <= 0 <= test.interval()[1] else seeds_needed(low, var_a, var_b, alpha, power)
    return seeds_needed(test.diff, var_a, var_b, alpha, power), (seeds_needed(high, var_a, var_b, alpha, power), far)


def compare(better: Sequence[float], worse: Sequence[float], *, labels: tuple[str, str] = ("A", "B"),
            stat: str = "min_val_loss", baseline: Union[None, float, tuple[Optional[float], Optional[float]]] = None,
            margin: float = DEFAULT_MARGIN,
            m: int = 1, alpha: float = ALPHA, level: float = LEVEL,
            classes: tuple[Sequence[str], Sequence[str]] = ((), ()),
            codes: tuple[Sequence[str], Sequence[str]] = ((), ()), task: Optional[str] = None,
            losses: Optional[tuple[Sequence[float], Sequence[float]]] = None,
            path_free_sides: tuple[bool, bool] = (False, False)) -> Comparison:
    """The numbers of "``better`` is lower than ``worse``" (one value per seed each) and its
    verdict outside a study: uninformative, too few seeds, or exploratory. See the module doc.
    ``baseline``: the task's, or each side's (rows validated on different subsets of a split);
    ``task`` names it ("no-information" on a task of your own, ``baseline_words``). ``losses``: each
    side's losses (``learned_losses``), on which "learned nothing" is judged, as the report's rows
    are: two rows at the baseline are uninformative on any statistic (an accuracy, a bpc, a
    perplexity, an MAE: none is in the baseline's units). Without them a loss statistic's own values are.
    ``path_free_sides``: per side, whether its runs compute the same on the C++ path and the loop (the
    plain LSTM): the test then stratifies by ``comparable_classes``; ``classes`` are shown as they are."""
    base_a, base_b = baseline if isinstance(baseline, tuple) else (baseline, baseline)
    sign = -1.0 if higher_is_better(stat) else 1.0
    keep, keep_b = _aligned(better, classes[0], codes[0]), _aligned(worse, classes[1], codes[1])
    a, b = [sign * v for v, _, _ in keep], [sign * v for v, _, _ in keep_b]
    class_a, class_b = [c for _, c, _ in keep], [c for _, c, _ in keep_b]
    shown_a, shown_b = summarize([sign * v for v in a], level), summarize([sign * v for v in b], level)
    # "learned nothing" is judged on losses, in the baseline's units: a bpc (loss / ln 2), a
    # perplexity (exp of it) or an MAE (against an MSE baseline) is not; the values themselves only
    # where no losses are given (a loss statistic)
    judged_a, judged_b = losses if losses is not None else ((a, b) if sign > 0 else ((), ()))
    exits = None
    if base_a is not None and base_b is not None and judged_a and judged_b:
        exits = (baseline_exit(judged_a, base_a, margin, level), baseline_exit(judged_b, base_b, margin, level))
    base = Comparison(labels[0], labels[1], stat, shown_a, shown_b, None, None, None, EXPLORATORY, "",
                      left_baseline=exits, tested_with=m, baselines=(base_a, base_b),
                      classes=(_counts(class_a), _counts(class_b)),
                      codes=(tuple(sorted({k for _, _, k in keep if k})), tuple(sorted({k for _, _, k in keep_b if k}))))
    if base_a is not None and base_b is not None and base_a != base_b and _on_validation(stat):
        # a task of your own whose rows validated on different sequences: the difference would be the sets'
        return replace(base, verdict=UNINFORMATIVE, reason=f"the rows validated on different sequences (their "
                       f"no-information baselines {base_a:.4g} and {base_b:.4g}): their validation numbers are "
                       f"not comparable; give both the same --val-samples")
    if at_baseline(judged_a, base_a, margin) and at_baseline(judged_b, base_b, margin):
        at = f"{base_a:.4g}" if base_a == base_b else f"{base_a:.4g} and {base_b:.4g} (their validation subsets')"
        words = baseline_words(task).replace(" ", "-") if task else "no-memory"
        return replace(base, verdict=UNINFORMATIVE,
                       reason=f"both rows at the {words} baseline {at} (within {margin:.0%})"
                              + ("; judged on their losses" if losses is not None and not _is_loss(stat) else ""))
    if len(a) < 2 or len(b) < 2:
        return replace(base, verdict=TOO_FEW, reason=f"{len(a)} and {len(b)} seeds; a verdict needs {MIN_SEEDS} a side")
    by_class = comparable_classes((class_a, class_b), path_free_sides)
    test = welch_test(a, b, by_class)
    # the effect size, P(lower < higher) and seeds for power describe the comparison the test made:
    # where it is stratified, class by class (pooled, they mix the classes the test keeps apart)
    strata = class_strata(a, b, by_class) if test.stratified else [(a, b)]
    g = hedges_g_within(strata) if strata else None
    lo, hi = test.interval(level)
    tested = not math.isnan(test.p)  # no stratum to test in: no interval either (it printed [d, d])
    c = replace(base, diff=sign * test.diff, diff_ci=tuple(sorted((sign * lo, sign * hi))) if tested else None,
                p_value=None if math.isnan(test.p) else test.p,
                p_adjusted=None if math.isnan(test.p) else min(1.0, m * test.p),
                hedges_g=None if g is None else sign * g, stratified=test.stratified)
    try:
        if strata:
            needed, interval = seeds_for_power_within(strata, test, alpha / m)
            c = replace(c, seeds_for_power=needed, seeds_interval=interval)
    except CannotPlan:
        pass
    if len(a) < MIN_SEEDS or len(b) < MIN_SEEDS:
        return replace(c, verdict=TOO_FEW, reason=f"{len(a)} and {len(b)} seeds; a verdict needs {MIN_SEEDS} a side")
    improve, improve_ci = probability_of_improvement_within(strata, level) if strata else (None, None)
    reason = "seeds added without a recorded plan: numbers only" + (f"; {test.note}" if test.note else "")
    return replace(c, p_improve=improve, p_improve_ci=improve_ci, reason=reason)


def _aligned(values: Sequence[float], classes: Sequence[str], codes: Sequence[str]):
    """(value, class, code) of the finite values; classes/codes may be empty (unknown)."""
    classes = list(classes) or [""] * len(values)
    codes = list(codes) or [""] * len(values)
    return [(float(v), c, k) for v, c, k in zip(values, classes, codes) if v is not None and math.isfinite(v)]


def _counts(classes: Sequence[str]) -> dict:
    return {c: classes.count(c) for c in sorted(set(classes)) if c}


def combine(verdicts: Iterable[str]) -> str:
    """A claim of several comparisons: reproduced only if all are; contradicted if any is;
    equivalent or uninformative if all are; exploratory or too few seeds where nothing was
    decided; otherwise inconclusive (open where a study still runs)."""
    verdicts = list(verdicts)
    if not verdicts:
        return NOT_RUN
    for every in (REPRODUCED, EQUIVALENT, UNINFORMATIVE):
        if all(v == every for v in verdicts):
            return every
    if CONTRADICTED in verdicts:
        return CONTRADICTED
    if all(v in (EXPLORATORY, TOO_FEW, UNINFORMATIVE) for v in verdicts):
        return EXPLORATORY if EXPLORATORY in verdicts else TOO_FEW
    if any(v.startswith(OPEN) for v in verdicts):
        return OPEN
    return INCONCLUSIVE


def _setting(config: dict, norm: str, key: str) -> Any:
    value = config.get(key)
    if key == "bias_inside" and value is None:  # stored as None when it is the norm's default
        from atnbench.registry import get_scheme

        value = get_scheme(norm).bias_inside
    return value


def matching_rows(group: Group, side: Side) -> list[ModelRow]:
    """The group's rows that are this side: the model, the k if given, and every run of the row
    with the side's settings."""
    found = []
    for row in group.rows:
        if row.model != side.model or (side.k is not None and row.k != side.k):
            continue
        runs = group.runs.get(row.label, [])
        if side.settings and not runs:
            continue
        if all(_setting(run.record.config, row.norm, key) == value
               for run in runs for key, value in side.settings):
            found.append(row)
    return _prefer_defaults(group, found, side)


def _tell_apart(rows: list[ModelRow]) -> str:
    """What to do about a side that matches several rows: rows apart only by the code that made
    them want a canary (or new runs), others the k or setting that tells them apart named in the claim."""
    settings = [{key: value for key, value in row.settings.items() if key != "code"} for row in rows]
    differing = sorted(key for key in {key for s in settings for key in s}
                       if len({repr(s.get(key)) for s in settings}) > 1)
    if not differing and all(row.k == rows[0].k for row in rows):
        return ("runs of code no canary vouched for as computing the same numbers: `atnbench canary` "
                "checks them, `atnbench sweep` re-runs them")
    if any(row.k != rows[0].k for row in rows) and "k" not in differing:
        differing.insert(0, "k")
    return f"name {' or '.join(differing)} in the claim"


def _preset_settings(group: Group, row: ModelRow) -> dict:
    """The settings a run of this row's model has at the task's preset (the protocol at the
    group's budget and variant; a task of your own: its file's defaults), as ``row_settings``
    spells them; {} where no preset is found."""
    from atnbench.evidence.identity import identity
    from atnbench.run.runspec import resolve_run

    try:
        config = resolve_run(group.task, {"T": group.T, "norm": row.norm, "cell": row.cell},
                             variant=group.variant, budget=group.budget).to_dict()
    except Exception:  # noqa: BLE001 - no preset for this task here: only None counts as its default
        return {}
    return identity(config)


def _at_default(row: ModelRow, key: str, preset: dict) -> bool:
    """None in a row's settings is the preset's default; so is the preset's own value stated (a
    run's config stores its lr and hidden), and the norm's default bias placement."""
    value = row.settings.get(key)
    if value is None:
        return True
    if key == "bias_inside":
        from atnbench.registry import get_scheme

        return value == get_scheme(row.norm).bias_inside
    return key in preset and value == preset[key]


def _prefer_defaults(group: Group, rows: list[ModelRow], side: Side) -> list[ModelRow]:
    """A side names the settings it is about; where its rows still differ in one it does not name
    (bias-placement's bias-outside rows beside the default ones, an eps variant, another lr), it
    means the default: keep the rows at it (the preset's value, stated or left out). Where rows
    differ only in the code that made them, keep the current code's. k is left alone: a side
    without k is any window (the real-data tables give one k each)."""
    named = {key for key, _ in side.settings} | {"k", "code"}
    presets: dict[tuple, dict] = {}  # read only where rows differ in a setting the side does not name

    def preset(row: ModelRow) -> dict:
        if (row.norm, row.cell) not in presets:
            presets[row.norm, row.cell] = _preset_settings(group, row)
        return presets[row.norm, row.cell]

    for key in sorted({key for row in rows for key in row.settings} - named):
        if len({repr(row.settings.get(key)) for row in rows}) > 1:
            rows = [row for row in rows if _at_default(row, key, preset(row))] or rows
    return [row for row in rows if not row.stale] or rows


@dataclass
class ClaimResult:
    claim: Claim
    group: Group
    comparisons: list[Comparison] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # comparisons of the claim without rows here
    design: str = EXPLORATORY  # exploratory, "other protocol", or "study NAME"
    seeds: str = ""  # which seeds: "seeds 20-25" for a study's look

    @property
    def verdict(self) -> str:
        """``combine`` of the comparisons; a claim is reproduced only when all of its are here."""
        verdict = combine(c.verdict for c in self.comparisons)
        return INCONCLUSIVE if verdict in (REPRODUCED, EQUIVALENT) and self.missing else verdict


def _path_free(used: list) -> tuple[bool, bool]:
    """Per side, whether every run computes the same on the C++ path and the loop (``path_free``)."""
    return tuple(all(path_free(run.record.config) for run in runs) for runs in used)


def _is_loss(stat: str) -> bool:
    """Whether a statistic is one of the losses "learned nothing" is judged on (``BASELINE_STATS``)."""
    return stat in BASELINE_STATS


def learned_losses(runs: Iterable[RunData]) -> list[float]:
    """The losses runs' "learned nothing" is judged on (``BASELINE_STATS``: the validation minimum,
    else the training one), whatever statistic a comparison tests."""
    runs = list(runs)
    for stat in BASELINE_STATS:
        values = _run_numbers(runs, stat)[0]
        if values:
            return values
    return []


def _run_numbers(runs: Iterable[RunData], stat: str, sign: float = 1.0):
    """(values, processor classes, code fingerprints) of runs that have the statistic."""
    values, classes, codes = [], [], []
    for run in runs:
        value = run_values(run).get(stat)
        if value is None or not math.isfinite(value):
            continue
        values.append(value)
        classes.append(processor_class(run.record.env, run.record.config))
        codes.append(str((run.record.env or {}).get("code") or "unknown"))
    return values, classes, codes


def _deviating(group: Group) -> dict[str, set[str]]:
    """Per row: the fields in which its runs differ from the task preset's protocol (hidden, steps)."""
    from atnbench.report.paper import row_difference_fields

    return {label: set(fields) for label, fields in row_difference_fields(group).items() if fields}


def _off_side(deviating: dict[str, set[str]], label: str, side: Side) -> bool:
    """Whether a row differs from the protocol in more than its side names: a side ``ln
    hidden=4`` asks for hidden 4, so that difference is the claim's experiment, not another."""
    named = {key for key, _ in side.settings} | ({"k"} if side.k is not None else set())
    return bool(deviating.get(label, set()) - named)


def _protocol(claim: Claim, group: Group) -> bool:
    return group.budget == claim.budget and group.variant == claim.variant


def evaluate(family: Family | Iterable[Claim], groups: Iterable[Group], margin: float = DEFAULT_MARGIN,
             alpha: float = ALPHA, studies: Iterable = (), study_runs: Optional[dict] = None,
             ) -> tuple[list[ClaimResult], list[Claim]]:
    """Every claim in every group (task, T, budget, variant) that has rows for it — exploratory
    numbers, or for a group at another budget or variant than the claim's, "other protocol" —
    and every claim's comparisons in the studies made for this family, decided by their
    recorded looks; and the claims nothing here has runs for. m is the family's, whatever the
    groups hold. ``study_runs`` (run id -> RunData): the studies' runs, read whatever filters
    chose the groups, so a study's row shows the numbers of the seeds its look decided on (by
    default the groups' runs: every run, where nothing was filtered)."""
    if not isinstance(family, Family):
        claims = tuple(family)
        family = Family("claims", claims, "")
    groups = list(groups)
    # a study decides for the claims file it was planned for, that version of it (its digest): the
    # same name with other claims is another family, another m (report.command says so)
    studies = [s for s in studies  # the same claims under another file name are the same family
               if (family.digest and family.planned(s.family_digest))
               or (s.family == family.name and not family.digest)]
    in_studies = {run_id for study in studies for run_id in study.all_runs()}
    planned = {key for study in studies for key in study.planned_experiments()}
    if planned:  # a planned seed's run not yet in a look (another code's stand-in) is the study's too
        in_studies |= {r.record.run_id for group in groups for runs in group.runs.values() for r in runs
                       if not planned.isdisjoint(config_keys(r.record.config))}
    results, not_run = [], []
    for claim in family.claims:
        found = False
        for group in groups:
            if group.task != claim.task or (claim.T is not None and group.T != claim.T):
                continue
            design = EXPLORATORY if _protocol(claim, group) else "other protocol"
            result = ClaimResult(claim, group, design=design)
            off_protocol, deviating = False, None  # a compared row off the preset: not the claim's experiment
            ambiguous = False  # a comparison with rows but no single pair of them: shown, never dropped
            for lower, higher in claim.pairs:
                found_a, found_b = matching_rows(group, lower), matching_rows(group, higher)
                if len(found_a) > 1 or len(found_b) > 1:
                    many = lower if len(found_a) > 1 else higher
                    rows = found_a if len(found_a) > 1 else found_b
                    result.missing.append(f"{lower.text} < {higher.text}: '{many.text}' matches "
                                          f"{', '.join(r.label for r in rows)}; {_tell_apart(rows)}")
                    ambiguous = True
                    continue
                if not found_a or not found_b or found_a[0] is found_b[0]:
                    result.missing.append(f"{lower.text} < {higher.text}")
                    continue
                a, b = found_a[0], found_b[0]
                deviating = _deviating(group) if deviating is None else deviating
                off_protocol = off_protocol or _off_side(deviating, a.label, lower) or _off_side(deviating, b.label, higher)
                used = [[r for r in group.runs.get(row.label, []) if r.record.run_id not in in_studies] for row in (a, b)]
                sides = [_run_numbers(side_runs, claim.stat) for side_runs in used]
                if in_studies and not (sides[0][0] and sides[1][0]):
                    continue  # every seed of a side belongs to a study: the study's result stands for it
                result.comparisons.append(compare(
                    sides[0][0], sides[1][0], labels=(a.label, b.label), stat=claim.stat,
                    baseline=(group.baseline_of(a.label), group.baseline_of(b.label)), task=group.task,
                    margin=margin, m=family.m, alpha=alpha, classes=(sides[0][1], sides[1][1]),
                    path_free_sides=_path_free(used),
                    codes=(sides[0][2], sides[1][2]), losses=(learned_losses(used[0]), learned_losses(used[1]))))
            if off_protocol and result.design == EXPLORATORY:
                result.design = "other protocol"
            if result.design != EXPLORATORY:
                result.comparisons = [_numbers_only(c) for c in result.comparisons]
            if result.comparisons or ambiguous:
                results.append(result)
                found = True
        for study in studies:
            result = _study_result(claim, study, groups, family, margin, alpha, study_runs)
            if result is not None:
                results.append(result)
                found = True
        if not found:
            not_run.append(claim)
    return results, not_run


def _numbers_only(c: Comparison) -> Comparison:
    """A comparison on another protocol than its claim's: no verdict at any number of seeds, so
    neither "too few seeds" nor seeds to plan for (a study runs on the claim's protocol)."""
    if c.verdict == UNINFORMATIVE:
        return c
    return replace(c, verdict=EXPLORATORY, reason="another protocol than the claim's: numbers only, at any number "
                   "of seeds", seeds_for_power=None, seeds_interval=None)


def _study_result(claim: Claim, study, groups: list[Group], family: Family, margin: float,
                  alpha: float, study_runs: Optional[dict] = None) -> Optional[ClaimResult]:
    """A claim's comparisons as a study decided them, with the numbers of the seeds its last
    look used; None when the study does not test this claim or has no look yet."""
    from atnbench.report import study as studies

    if claim.id not in {cid for c in study.comparisons for cid in c.claims} or not study.recorded:
        return None
    group = _study_group(study, groups)
    if group is None:
        return None
    runs = study_runs if study_runs is not None else {
        run.record.run_id: run for rows in group.runs.values() for run in rows}
    decisions = study.decisions()
    result = ClaimResult(claim, group, design=f"study {study.name}")
    # the seeds behind this claim's decisions: a comparison decided at the first look used its seeds only
    deciding = [decisions[(p.lower, p.higher)]["look"] for p in study.comparisons
                if claim.id in p.claims and (p.lower, p.higher) in decisions]
    seeds = study.looks[max(deciding) - 1] if deciding else study.recorded[-1]["seeds"]
    result.seeds = f"seeds {study.first_seed}-{study.first_seed + seeds - 1}"
    for planned in study.comparisons:
        if claim.id not in planned.claims:
            continue
        entry = decisions.get((planned.lower, planned.higher))
        if entry is not None:
            result.comparisons.append(study_comparison(study, planned, entry, group, runs, margin))
    return result if result.comparisons else None


def _study_group(study, groups: Iterable[Group]) -> Optional[Group]:
    """The report's group holding a study's protocol (its task, length, budget and variant)."""
    return next((g for g in groups if (g.task, g.T, g.budget, g.variant) ==
                 (study.task, study.T, study.budget, study.variant)), None)


def study_comparison(study, planned, entry: dict, group: Group, runs: dict, margin: float) -> Comparison:
    """One comparison of ``study`` as its look ``entry`` decided it, with the numbers of the seeds
    that look used; uninformative where both rows sit at the baseline, whatever the look's test."""
    from atnbench.report import study as studies

    n = study.looks[entry["look"] - 1]
    used = [[runs[i] for i in study.runs_used(side, n) if i in runs] for side in (planned.lower, planned.higher)]
    sides = [_run_numbers(side_runs, planned.stat) for side_runs in used]
    c = compare(sides[0][0], sides[1][0], labels=(planned.lower, planned.higher), stat=planned.stat,
                baseline=(group.baseline_for(used[0]), group.baseline_for(used[1])), margin=margin, task=group.task,
                m=study.m, alpha=study.alpha, classes=(sides[0][1], sides[1][1]), path_free_sides=_path_free(used),
                codes=(sides[0][2], sides[1][2]), losses=(learned_losses(used[0]), learned_losses(used[1])))
    verdict = {studies.REPRODUCED: REPRODUCED, studies.CONTRADICTED: CONTRADICTED,
               studies.EQUIVALENT: EQUIVALENT, studies.FUTILE: INCONCLUSIVE,
               studies.UNDECIDED: INCONCLUSIVE}.get(entry["decision"], OPEN)
    look = f"look {entry['look']} of {len(study.looks)} ({n} seeds)"
    reason = entry.get("reason", "")
    if entry["decision"] == studies.FUTILE:
        reason = f"futile at {look}: {reason}"
    elif verdict == OPEN:
        reason = f"{look} taken; next look at {study.looks[entry['look']]} seeds"
    if c.verdict == UNINFORMATIVE:
        verdict, reason = UNINFORMATIVE, c.reason
    return replace(c, verdict=verdict, reason=reason, look=look, test=studies.SPENDING,
                   stratified=bool(entry.get("stratified")))


def study_verdicts(study, groups: list[Group], margin: float = DEFAULT_MARGIN) -> dict[tuple[str, str], Comparison]:
    """Each decided comparison of ``study`` as ``report`` shows it (``study_comparison``), from the
    report's ``groups`` of the store's runs; empty where they hold none of its protocol."""
    group = _study_group(study, groups)
    if group is None:
        return {}
    runs = {run.record.run_id: run for rows in group.runs.values() for run in rows}
    return {key: study_comparison(study, planned, entry, group, runs, margin)
            for planned in study.comparisons
            if (entry := study.decisions().get(key := (planned.lower, planned.higher))) is not None}


def check_margin(margin: float) -> float:
    if not (isinstance(margin, (int, float)) and 0 <= margin < 1):
        raise UserError(f"--baseline-margin must be a fraction in [0, 1), got {margin!r}")
    return float(margin)

"""Statistical verdicts on the paper's claims, from the report's rows: pure functions.

A claim (``paper_claims.yaml``) is a set of pairwise comparisons "A is lower than B" on one
statistic, e.g. the minimum validation loss, one value per seed. The rule (``RULE``, shown in
every report, ``report --help`` and docs/reproducing.md) decides each comparison from:

- Welch's two-sample t-test (unequal variances, two-sided), its p-value **Holm-corrected** across
  all the comparisons a report tests (so 22 comparisons at 5% do not find one by chance);
- the **probability of improvement** P(A < B) that a seed of A ends lower than a seed of B (ties
  count half; Agarwal et al.'s rliable), with a 95% stratified-bootstrap interval (each side
  resampled on its own, percentile interval, 2,000 resamples from a fixed seed so a report is
  reproducible);
- shown beside them: the effect size (Hedges' g, A − B over the pooled std, small-sample
  corrected), and on tasks with a no-memory baseline the fraction of seeds of each side that left
  it (more than the margin below it) with its Clopper-Pearson 95% interval, because copying and
  adding outcomes are bimodal: a seed learns or it does not.

Verdicts: **uninformative** when both rows sit at the no-memory baseline (nothing learned, nothing
to compare); **reproduced** when the Holm-corrected p < alpha with the difference on the claimed
side *and* the bootstrap interval of P(A < B) lies above 1/2; **contradicted** for the same the
other way; **inconclusive** otherwise. Seed overlap plays no part, so more seeds make a true
effect easier to confirm, never harder (``tests/test_verdict_rule.py`` simulates it). Every
comparison also shows the seeds per side that 80% power would need at its observed effect and
spread (two-sample t-test at the Bonferroni level alpha/m, Holm's strictest step): a pilot
estimate for planning, not a result.

Per cell the report states mean ± sample std (ddof 1) and a 95% t interval of the mean. A
statistic where higher is better (accuracy) is compared on its negation, so "A < B" always reads
"A is better than B".
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import yaml

from atnbench.errors import UserError
from atnbench.report.aggregate import Group, ModelRow, higher_is_better

CLAIMS_FILE = Path(__file__).resolve().parent / "paper_claims.yaml"
DEFAULT_MARGIN = 0.05
ALPHA = 0.05
LEVEL = 0.95
BASELINE_STATS = ("min_val_loss", "min_train_loss")  # what "at baseline" looks at, first present

UNINFORMATIVE = "uninformative (no model learned)"
REPRODUCED = "reproduced"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_RUN = "not run"
TEST_NAME = "Welch's t-test, two-sided, Holm-corrected"
POWER = 0.8
MAX_PLANNED_SEEDS = 10_000
BOOTSTRAP_RESAMPLES = 2000
RULE = ("reproduced: Welch's t-test, Holm-corrected across the report's comparisons, p < 0.05 with the "
        "difference on the claimed side, and the 95% stratified-bootstrap interval of P(lower < higher) "
        "above 1/2; contradicted: the same the other way; uninformative: both rows at the no-memory "
        "baseline; inconclusive: anything else. Seed overlap plays no part.")


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
        flag = at_baseline(baseline_values(row)[1], group.baseline, margin)
        if flag is not None:
            marks[row.label] = flag
    return marks


def baseline_note(group: Group, margin: float = DEFAULT_MARGIN) -> Optional[str]:
    """One line naming the rows at baseline, or None when none is."""
    at = [label for label, flag in rows_at_baseline(group, margin).items() if flag]
    if not at:
        return None
    return (f"≈ at baseline (no seed more than {margin:.0%} below the no-memory baseline "
            f"{group.baseline:.4g}): {', '.join(at)}; nothing learned, so comparisons "
            f"{'among them are' if len(at) > 1 else 'with it are'} uninformative")


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
    p_value: Optional[float]  # Welch, before the correction
    verdict: str
    reason: str
    test: str = TEST_NAME
    p_adjusted: Optional[float] = None  # Holm across the comparisons tested together
    hedges_g: Optional[float] = None  # (a - b) / pooled std, small-sample corrected, as measured (like diff)
    p_improve: Optional[float] = None  # P(a seed of A < a seed of B), ties half
    p_improve_ci: Optional[tuple[float, float]] = None
    left_baseline: Optional[tuple[BaselineExit, BaselineExit]] = None  # (A, B) on baseline tasks
    seeds_for_power: Optional[int] = None  # per side, POWER at alpha/m; None: no effect or no spread
    tested_with: int = 1  # m: the comparisons the Holm correction ran over


def welch(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> tuple[float, tuple[float, float], float]:
    """mean(a) - mean(b), its ``level`` CI and the two-sided p-value of Welch's t-test."""
    from scipy import stats

    diff = statistics.fmean(a) - statistics.fmean(b)
    if statistics.variance(a) == 0 and statistics.variance(b) == 0:  # no spread: the test is undefined
        return diff, (diff, diff), (1.0 if diff == 0 else 0.0)
    with warnings.catch_warnings():  # one side's seeds all equal: its variance is 0, which Welch's test handles
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        result = stats.ttest_ind(a, b, equal_var=False)
    ci = result.confidence_interval(confidence_level=level)
    return diff, (float(ci.low), float(ci.high)), float(result.pvalue)


def hedges_g(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    """Hedges' g of a - b: the difference of means over the pooled sample std, times the
    small-sample correction 1 - 3 / (4 (n_a + n_b) - 9). None without spread."""
    na, nb = len(a), len(b)
    pooled = ((na - 1) * statistics.variance(a) + (nb - 1) * statistics.variance(b)) / (na + nb - 2)
    if pooled == 0:
        return None
    return (statistics.fmean(a) - statistics.fmean(b)) / math.sqrt(pooled) * (1 - 3 / (4 * (na + nb) - 9))


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


def baseline_exit(values: Sequence[float], baseline: float, margin: float, level: float = LEVEL) -> BaselineExit:
    """Seeds more than ``margin`` below the baseline, out of all, with a Clopper-Pearson interval."""
    from scipy import stats

    left = sum(v < baseline * (1 - margin) for v in values)
    ci = stats.binomtest(left, len(values)).proportion_ci(confidence_level=level, method="exact")
    return BaselineExit(left, len(values), (float(ci.low), float(ci.high)))


def seeds_for_power(a: Sequence[float], b: Sequence[float], alpha: float, power: float = POWER) -> Optional[int]:
    """Seeds per side a two-sided two-sample t-test at ``alpha`` needs for ``power`` at the observed
    difference and spread (standardised by the root mean of the two variances): a pilot estimate.
    None without a difference or without spread; MAX_PLANNED_SEEDS + 1 when beyond it."""
    from scipy import stats

    spread = math.sqrt((statistics.variance(a) + statistics.variance(b)) / 2)
    diff = abs(statistics.fmean(a) - statistics.fmean(b))
    if spread == 0 or diff == 0:
        return None
    effect = diff / spread

    def power_at(n: int) -> float:
        df, ncp = 2 * n - 2, effect * math.sqrt(n / 2)
        critical = stats.t.ppf(1 - alpha / 2, df)
        return float(stats.nct.sf(critical, df, ncp) + stats.nct.cdf(-critical, df, ncp))

    low, high = 2, MAX_PLANNED_SEEDS
    if power_at(high) < power:
        return MAX_PLANNED_SEEDS + 1
    while low < high:  # power grows with n: the smallest n that reaches it
        middle = (low + high) // 2
        low, high = (middle + 1, high) if power_at(middle) < power else (low, middle)
    return low


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def decide(c: Comparison, alpha: float = ALPHA) -> tuple[str, str]:
    """The verdict and its reason from a comparison's numbers (see RULE)."""
    if c.p_value is None:
        return c.verdict, c.reason
    p = c.p_adjusted if c.p_adjusted is not None else c.p_value
    shown = f"Holm p = {p:.3g}" if c.tested_with > 1 else f"p = {p:.3g}"
    if p >= alpha:
        return INCONCLUSIVE, f"{shown} ≥ {alpha:g}"
    lo, hi = c.p_improve_ci
    if c.diff < 0 and lo > 0.5:
        return REPRODUCED, f"{shown} < {alpha:g}, P({c.better} lower) ≥ {lo:.2f} > 1/2"
    if c.diff > 0 and hi < 0.5:
        return CONTRADICTED, f"{shown} < {alpha:g} the other way, P({c.better} lower) ≤ {hi:.2f} < 1/2"
    return INCONCLUSIVE, f"{shown} < {alpha:g}, but the interval of P({c.better} lower) [{lo:.2f}, {hi:.2f}] holds 1/2"


def compare(better: Sequence[float], worse: Sequence[float], *, labels: tuple[str, str] = ("A", "B"),
            stat: str = "min_val_loss", baseline: Optional[float] = None, margin: float = DEFAULT_MARGIN,
            alpha: float = ALPHA, level: float = LEVEL) -> Comparison:
    """The verdict on "``better`` is lower than ``worse``" (one value per seed each), tested alone;
    ``adjust`` re-decides a report's comparisons together. See the module doc."""
    sign = -1.0 if higher_is_better(stat) else 1.0
    a = [sign * float(v) for v in better if v is not None and math.isfinite(v)]
    b = [sign * float(v) for v in worse if v is not None and math.isfinite(v)]
    shown_a, shown_b = summarize([sign * v for v in a], level), summarize([sign * v for v in b], level)
    exits = None
    if sign > 0 and baseline is not None and a and b:
        exits = (baseline_exit(a, baseline, margin, level), baseline_exit(b, baseline, margin, level))
    base = Comparison(labels[0], labels[1], stat, shown_a, shown_b, None, None, None, INCONCLUSIVE, "",
                      left_baseline=exits)
    if sign > 0 and at_baseline(a, baseline, margin) and at_baseline(b, baseline, margin):
        return replace(base, verdict=UNINFORMATIVE,
                       reason=f"both rows at the no-memory baseline {baseline:.4g} (within {margin:.0%})")
    if len(a) < 2 or len(b) < 2:
        return replace(base, reason=f"a test needs 2 seeds a side (have {len(a)} and {len(b)})")
    diff, ci, p = welch(a, b, level)
    g = hedges_g(a, b)  # on the signed scale; shown as measured, like the difference
    improve, improve_ci = probability_of_improvement(a, b, level)
    c = replace(base, diff=sign * diff, diff_ci=tuple(sorted((sign * ci[0], sign * ci[1]))), p_value=p,
                hedges_g=None if g is None else sign * g, p_improve=improve, p_improve_ci=improve_ci,
                seeds_for_power=seeds_for_power(a, b, alpha))
    # the rule reads the signed difference: negative when the claim holds
    verdict, reason = decide(replace(c, diff=diff), alpha)
    return replace(c, verdict=verdict, reason=reason)


def adjust(comparisons: Sequence[Comparison], alpha: float = ALPHA) -> list[Comparison]:
    """The comparisons tested together: Holm-corrected p-values, verdicts re-decided on them, and
    the planned seeds at alpha / m."""
    tested = [i for i, c in enumerate(comparisons) if c.p_value is not None]
    adjusted = holm([comparisons[i].p_value for i in tested])
    out = list(comparisons)
    for i, p_adj in zip(tested, adjusted):
        c = replace(comparisons[i], p_adjusted=p_adj, tested_with=len(tested))
        sign = -1.0 if higher_is_better(c.stat) else 1.0
        a, b = [sign * v for v in c.a.values], [sign * v for v in c.b.values]
        verdict, reason = decide(replace(c, diff=sign * c.diff), alpha)
        out[i] = replace(c, verdict=verdict, reason=reason,
                         seeds_for_power=seeds_for_power(a, b, alpha / len(tested)))
    return out


def combine(verdicts: Iterable[str]) -> str:
    """A claim of several comparisons: reproduced only if all are; contradicted if any is;
    uninformative if all are; otherwise inconclusive."""
    verdicts = list(verdicts)
    if not verdicts:
        return NOT_RUN
    if all(v == REPRODUCED for v in verdicts):
        return REPRODUCED
    if CONTRADICTED in verdicts:
        return CONTRADICTED
    if all(v == UNINFORMATIVE for v in verdicts):
        return UNINFORMATIVE
    return INCONCLUSIVE


# -- claims ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """A row of a group, by model, optionally k, optionally run settings (e.g. bias_inside)."""

    model: str
    k: Optional[int] = None
    settings: tuple[tuple[str, Any], ...] = ()

    @property
    def text(self) -> str:
        parts = [self.model] + ([f"k={self.k}"] if self.k is not None else [])
        return " ".join(parts + [f"{key}={str(value).lower()}" for key, value in self.settings])


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    source: str
    task: str
    T: Optional[int]  # None: any T
    stat: str
    pairs: tuple[tuple[Side, Side], ...]  # (claimed lower, claimed higher)


def parse_side(text: str) -> Side:
    """"atn k=45 bias_inside=false" -> Side("atn", 45, (("bias_inside", False),))."""
    if not isinstance(text, str) or not text.split():
        raise ValueError(f"{CLAIMS_FILE.name}: a side is 'model [key=value ...]', got {text!r}")
    model, *rest = text.split()
    k, settings = None, []
    for item in rest:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ValueError(f"{CLAIMS_FILE.name}: {text!r}: expected key=value, got {item!r}")
        value: Any = {"true": True, "false": False}.get(raw.lower(), raw)
        if isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        if key == "k":
            k = value
        else:
            settings.append((key, value))
    return Side(model, k, tuple(settings))


def load_claims(path: Path = CLAIMS_FILE, data: Optional[dict] = None) -> list[Claim]:
    data = yaml.safe_load(Path(path).read_text()) if data is None else data
    claims = []
    for entry in data["claims"]:
        if "order" in entry:
            sides = [parse_side(s) for s in entry["order"]]
            pairs = tuple(zip(sides, sides[1:]))
        else:
            pairs = tuple((parse_side(a), parse_side(b)) for a, b in entry["pairs"])
        if not pairs:
            raise ValueError(f"{Path(path).name}: claim {entry.get('id')}: no comparison (give order or pairs)")
        claims.append(Claim(id=entry["id"], text=entry["claim"], source=entry["source"], task=entry["task"],
                            T=entry.get("T"), stat=entry.get("stat", "min_val_loss"), pairs=pairs))
    return claims


def read_claims(path: Path) -> list[Claim]:
    """A user's claims file (the format of paper_claims.yaml; ``source`` optional), every mistake
    one ConfigError line naming the file."""
    from atnbench.config import ConfigError
    from atnbench.presets import read_yaml_mapping

    path = Path(path)
    if not path.exists():  # anything else that is not a regular file: read_yaml_mapping says what it is
        raise ConfigError(f"--claims {path}: no such file")
    data = read_yaml_mapping(path)
    entries = data.get("claims")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path}: key 'claims': expected a list of claims (id, claim, task, order or pairs)")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: claims[{i}]: expected a mapping, got {type(entry).__name__}")
        for key in ("id", "claim", "task"):
            if not isinstance(entry.get(key), str):
                raise ConfigError(f"{path}: claims[{i}].{key}: required text")
        if not isinstance(entry.get("order", entry.get("pairs")), list):
            raise ConfigError(f"{path}: claims[{i}]: give 'order' (best first) or 'pairs', a list")
        if entry.get("T") is not None and (type(entry["T"]) is not int or entry["T"] < 1):
            raise ConfigError(f"{path}: claims[{i}].T: expected a positive whole number or nothing")
        entry.setdefault("source", str(path))
    try:
        return load_claims(path, data)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{path}: {err}") from None


@functools.lru_cache(maxsize=1)
def paper_claims() -> tuple[Claim, ...]:
    return tuple(load_claims())


def _setting(config: dict, norm: str, key: str) -> Any:
    value = config.get(key)
    if key == "bias_inside" and value is None:  # stored as None when it is the norm's default
        from atnbench.nn.schemes import get_scheme

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
    return _prefer_defaults(found, side)


def _at_default(row: ModelRow, key: str) -> bool:
    """None in a row's settings is the preset's default; an explicit default placement is too."""
    value = row.settings.get(key)
    if key == "bias_inside" and value is not None:
        from atnbench.nn.schemes import get_scheme

        return value == get_scheme(row.norm).bias_inside
    return value is None


def _prefer_defaults(rows: list[ModelRow], side: Side) -> list[ModelRow]:
    """A side names the settings it is about; where its rows still differ in one it does not name
    (bias-placement's bias-outside rows beside the default ones, an eps variant), it means the
    default: keep the rows at it (None in the config is the preset's default). Where rows differ
    only in the code that made them, keep the current code's. k is left alone: a side without k
    is any window (the real-data tables give one k each)."""
    named = {key for key, _ in side.settings} | {"k", "code"}
    for key in sorted({key for row in rows for key in row.settings} - named):
        if len({repr(row.settings.get(key)) for row in rows}) > 1:
            rows = [row for row in rows if _at_default(row, key)] or rows
    return [row for row in rows if not row.stale] or rows


@dataclass
class ClaimResult:
    claim: Claim
    group: Group
    comparisons: list[Comparison] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # comparisons of the claim without rows here

    @property
    def verdict(self) -> str:
        """``combine`` of the comparisons; a claim is reproduced only when all of its are here."""
        verdict = combine(c.verdict for c in self.comparisons)
        return INCONCLUSIVE if verdict == REPRODUCED and self.missing else verdict


def evaluate(claims: Iterable[Claim], groups: Iterable[Group], margin: float = DEFAULT_MARGIN,
             alpha: float = ALPHA) -> tuple[list[ClaimResult], list[Claim]]:
    """Every claim in every group (task, T, budget, variant) that has rows for it, and the claims
    no group has rows for."""
    groups = list(groups)
    results, not_run = [], []
    for claim in claims:
        found = False
        for group in groups:
            if group.task != claim.task or (claim.T is not None and group.T != claim.T):
                continue
            result = ClaimResult(claim, group)
            for lower, higher in claim.pairs:
                pairs = [(a, b) for a, b in itertools.product(matching_rows(group, lower), matching_rows(group, higher))
                         if a is not b]
                if not pairs:
                    result.missing.append(f"{lower.text} < {higher.text}")
                for a, b in pairs:
                    result.comparisons.append(compare(
                        _values(a, claim.stat), _values(b, claim.stat), labels=(a.label, b.label),
                        stat=claim.stat, baseline=group.baseline, margin=margin, alpha=alpha))
            if result.comparisons:
                results.append(result)
                found = True
        if not found:
            not_run.append(claim)
    decided = iter(adjust([c for r in results for c in r.comparisons], alpha))
    for result in results:
        result.comparisons = [next(decided) for _ in result.comparisons]
    return results, not_run


def _values(row: ModelRow, stat: str) -> tuple[float, ...]:
    found = row.stats.get(stat)
    return found.values if found is not None else ()


def check_margin(margin: float) -> float:
    if not (isinstance(margin, (int, float)) and 0 <= margin < 1):
        raise UserError(f"--baseline-margin must be a fraction in [0, 1), got {margin!r}")
    return float(margin)

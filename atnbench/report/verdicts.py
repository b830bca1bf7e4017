"""Statistical verdicts on the paper's claims, from the report's rows: pure functions.

A claim (``paper_claims.yaml``) is a set of pairwise comparisons "A is lower than B" on one
statistic, e.g. the minimum validation loss, one value per seed. Each comparison gets one of:

- **uninformative (no model learned)**: the task has a no-memory baseline and *both* rows are at
  it (``at_baseline``): no seed of either got more than ``margin`` (default 5%) below the
  baseline. Nothing was learned, so nothing can be compared; this comes first, before any test.
- **reproduced**: Welch's two-sample t-test (unequal variances, two-sided, via scipy) rejects
  equal means at ``alpha`` (0.05) with the difference in the claimed direction, so the 95% CI of
  the difference lies wholly on the claimed side of 0, *and* the two rows' seeds do not overlap
  (every seed of A below every seed of B). The second condition keeps "reproduced" off
  overlapping intervals: with 3 seeds a side, complete separation alone has a one-sided
  permutation p of 1/20.
- **contradicted**: the same evidence in the other direction.
- **inconclusive**: anything else (too few seeds, p >= alpha, seeds that overlap).

Per cell the report states mean ± sample std (ddof 1) and a 95% t interval of the mean
(mean ± t(0.975, n-1)·s/√n). A statistic where higher is better (accuracy) is compared on its
negation, so "A < B" always reads "A is better than B".
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
import warnings
from dataclasses import dataclass, field
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
TEST_NAME = "Welch's t-test, two-sided"


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
class Comparison:
    better: str  # the row claimed lower (better)
    worse: str
    stat: str
    a: CellSummary  # the "better" side's values
    b: CellSummary
    diff: Optional[float]  # mean(a) - mean(b): negative when the claim holds
    diff_ci: Optional[tuple[float, float]]  # LEVEL CI of the difference (Welch)
    p_value: Optional[float]
    verdict: str
    reason: str
    test: str = TEST_NAME


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


def compare(better: Sequence[float], worse: Sequence[float], *, labels: tuple[str, str] = ("A", "B"),
            stat: str = "min_val_loss", baseline: Optional[float] = None, margin: float = DEFAULT_MARGIN,
            alpha: float = ALPHA, level: float = LEVEL) -> Comparison:
    """The verdict on "``better`` is lower than ``worse``" (one value per seed each); see the module doc."""
    sign = -1.0 if higher_is_better(stat) else 1.0
    a = [sign * float(v) for v in better if v is not None and math.isfinite(v)]
    b = [sign * float(v) for v in worse if v is not None and math.isfinite(v)]
    shown_a, shown_b = summarize([sign * v for v in a], level), summarize([sign * v for v in b], level)

    def result(verdict: str, reason: str, diff=None, ci=None, p=None) -> Comparison:
        if diff is not None:
            diff, ci = sign * diff, tuple(sorted((sign * ci[0], sign * ci[1])))
        return Comparison(labels[0], labels[1], stat, shown_a, shown_b, diff, ci, p, verdict, reason)

    if sign > 0 and at_baseline(a, baseline, margin) and at_baseline(b, baseline, margin):
        return result(UNINFORMATIVE, f"both rows at the no-memory baseline {baseline:.4g} (within {margin:.0%})")
    if len(a) < 2 or len(b) < 2:
        return result(INCONCLUSIVE, f"a test needs 2 seeds a side (have {len(a)} and {len(b)})")
    diff, ci, p = welch(a, b, level)
    if p >= alpha:
        return result(INCONCLUSIVE, f"p = {p:.3g} ≥ {alpha:g}", diff, ci, p)
    if diff < 0:
        if max(a) < min(b):
            return result(REPRODUCED, f"p = {p:.3g} < {alpha:g} and every seed of {labels[0]} below every seed "
                                      f"of {labels[1]}", diff, ci, p)
        return result(INCONCLUSIVE, f"p = {p:.3g} < {alpha:g}, but the seeds overlap", diff, ci, p)
    if min(a) > max(b):
        return result(CONTRADICTED, f"p = {p:.3g} < {alpha:g} the other way, every seed of {labels[1]} below "
                                    f"every seed of {labels[0]}", diff, ci, p)
    return result(INCONCLUSIVE, f"p = {p:.3g} < {alpha:g} the other way, but the seeds overlap", diff, ci, p)


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


def load_claims(path: Path = CLAIMS_FILE) -> list[Claim]:
    data = yaml.safe_load(Path(path).read_text())
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
    return results, not_run


def _values(row: ModelRow, stat: str) -> tuple[float, ...]:
    found = row.stats.get(stat)
    return found.values if found is not None else ()


def check_margin(margin: float) -> float:
    if not (isinstance(margin, (int, float)) and 0 <= margin < 1):
        raise UserError(f"--baseline-margin must be a fraction in [0, 1), got {margin!r}")
    return float(margin)

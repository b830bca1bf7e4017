"""The group-sequential rule (#37.2): boundaries against published values, and by simulation the
false-decision rate over all looks at most alpha for normal, bimodal-at-baseline (copying-like)
and lognormal outcomes; repeated testing without the spending would exceed it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from atnbench.report import sequential
from atnbench.report.study import DECIDED, EQUIVALENT, FUTILE, OPEN, Planned, fraction, judge

LOOKS = (6, 12, 18, 24, 30)
FRACTIONS = tuple(n / LOOKS[-1] for n in LOOKS)


def test_boundaries_match_the_published_lan_demets_obrien_fleming_values():
    # Lan & DeMets (1983) O'Brien-Fleming-type spending, alpha = 0.05 two-sided, five equal looks
    assert sequential.boundaries(FRACTIONS, 0.05) == pytest.approx((4.877, 3.357, 2.680, 2.290, 2.031), abs=2e-3)
    assert sequential.boundaries((1.0,), 0.05) == pytest.approx((1.95996,), abs=1e-4)  # one look: fixed sample


def test_the_design_spends_exactly_alpha_and_has_power_under_a_drift():
    assert sequential.crossing_probability(FRACTIONS, 0.05, 0.0) == pytest.approx(0.05, abs=1e-6)
    assert sequential.crossing_probability(FRACTIONS, 0.01, 0.0) == pytest.approx(0.01, abs=1e-6)
    # the drift that gives 80% power at a fixed sample (2.80) gives a little less with looks
    assert 0.77 < sequential.crossing_probability(FRACTIONS, 0.05, 1.95996 + 0.84162) < 0.80
    assert 1.0 < sequential.inflation(FRACTIONS, 0.05, 0.8) < 1.05


def test_looks_may_come_at_any_fraction_and_early_ones_spend_little():
    uneven = sequential.boundaries((0.15, 0.5, 1.0), 0.05)
    assert uneven[0] > uneven[1] > uneven[2] > 1.96
    assert sequential.nominal_levels((0.2,), 0.05)[0] < 1e-4  # an early look needs an overwhelming difference


def _outcomes(kind: str, rng, size):
    if kind == "normal":
        return rng.normal(0.14, 0.015, size)
    if kind == "bimodal":  # copying: a seed learns (about 0.13) or stays at the no-memory baseline exactly
        return np.where(rng.random(size) < 0.4, 10 * math.log(8) / 120, rng.normal(0.13, 0.015, size))
    return rng.lognormal(0.0, 1.0, size)


def _study_decides(a, b, alpha: float, margin=None) -> str:
    """The study's decision over its looks (the code the sweep runs: ``study.judge``)."""
    planned = Planned(("c",), "A", "B", "min_val_loss", False, margin, None)
    fractions = ()
    for j, n in enumerate(LOOKS):
        fractions += (fraction(n, n, LOOKS[-1]),)
        entry = judge(planned, list(a[:n]), list(b[:n]), fractions, alpha, j == len(LOOKS) - 1, 0.1)
        if entry["decision"] in DECIDED:
            return entry["decision"]
    return OPEN


@pytest.mark.parametrize("kind", ["normal", "bimodal", "lognormal"])
def test_no_difference_is_declared_in_at_most_alpha_of_studies_over_all_looks(kind):
    rng = np.random.default_rng({"normal": 1, "bimodal": 2, "lognormal": 3}[kind])
    draws, alpha = 400, 0.05
    decisions = [_study_decides(_outcomes(kind, rng, 30), _outcomes(kind, rng, 30), alpha) for _ in range(draws)]
    false = sum(d in ("reproduced", "contradicted") for d in decisions) / draws
    assert false <= alpha + 2.6 * math.sqrt(alpha * (1 - alpha) / draws), false  # a one-sided 99.5% bound
    assert FUTILE in decisions  # under no difference most studies stop early for futility


def test_testing_at_every_look_without_spending_is_what_the_rule_prevents():
    from scipy import stats

    rng = np.random.default_rng(4)
    draws = 400
    a, b = (np.stack(side) for side in zip(*[(rng.normal(0, 1, 30), rng.normal(0, 1, 30)) for _ in range(draws)]))
    hit = np.zeros(draws, dtype=bool)
    for n in LOOKS:  # Welch's test at each look, all studies at once
        hit |= stats.ttest_ind(a[:, :n], b[:, :n], axis=1, equal_var=False).pvalue < 0.05
    assert hit.mean() > 0.09, hit.mean()  # about 0.13 (the audit's simulation): well above 0.05


def test_equivalence_is_declared_when_the_difference_is_small_and_rarely_when_it_is_the_margin():
    rng = np.random.default_rng(5)
    close = [_study_decides(rng.normal(0, 1, 30), rng.normal(0, 1, 30), 0.05, margin=1.5) for _ in range(100)]
    assert close.count(EQUIVALENT) > 80
    at_margin = [_study_decides(rng.normal(0, 1, 30), rng.normal(1.0, 1, 30), 0.05, margin=1.0) for _ in range(300)]
    assert at_margin.count(EQUIVALENT) / 300 <= 0.05 + 2.6 * math.sqrt(0.05 * 0.95 / 300)


def test_a_large_effect_is_reproduced_before_the_last_look():
    rng = np.random.default_rng(6)
    planned = Planned(("c",), "A", "B", "min_val_loss", False, None, None)
    a, b = rng.normal(0, 1, 30), rng.normal(2.5, 1, 30)
    entry = judge(planned, list(a[:18]), list(b[:18]), FRACTIONS[:3], 0.05, False, 0.1)
    assert entry["decision"] == "reproduced" and entry["p"] < entry["nominal_level"]
    flipped = judge(planned, list(b[:18]), list(a[:18]), FRACTIONS[:3], 0.05, False, 0.1)
    assert flipped["decision"] == "contradicted"

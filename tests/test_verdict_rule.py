"""The verdict rule's operating characteristics, by simulation: it confirms a true effect at
n = 30 and almost never declares one where there is none (the issue's two conditions), and
more seeds help it rather than hurt it."""

from __future__ import annotations

import numpy as np
import pytest

from atnbench.report.verdicts import (
    ALPHA,
    CONTRADICTED,
    INCONCLUSIVE,
    REPRODUCED,
    adjust,
    baseline_exit,
    compare,
    hedges_g,
    holm,
    probability_of_improvement,
    seeds_for_power,
)

DRAWS = 200


def verdicts(effect: float, n: int, seed: int = 0, draws: int = DRAWS) -> list[str]:
    """The verdict on "A < B" over ``draws`` draws of n normal values a side, B shifted up by effect."""
    rng = np.random.default_rng(seed)
    return [compare(rng.normal(0.0, 1.0, n), rng.normal(effect, 1.0, n)).verdict for _ in range(draws)]


def test_a_true_standardised_difference_of_one_is_reproduced_at_thirty_seeds():
    found = verdicts(1.0, 30)
    assert found.count(REPRODUCED) >= 0.9 * DRAWS  # Welch's power here is about 0.97
    assert CONTRADICTED not in found


def test_no_difference_is_declared_in_at_most_about_alpha_of_draws():
    found = verdicts(0.0, 30, seed=1)
    declared = found.count(REPRODUCED) + found.count(CONTRADICTED)
    assert declared <= (ALPHA + 0.03) * DRAWS  # alpha plus sampling slack (sd of the rate ≈ 0.015)


def test_more_seeds_make_a_true_effect_easier_to_confirm():
    # the t-test's power at d = 0.7 is about 0.87 at 40 seeds and 0.32 at 10: out of 60 draws the
    # confirmations differ by about 30, the standard deviation of either count is under 4
    assert verdicts(0.7, 40, seed=2, draws=60).count(REPRODUCED) > verdicts(0.7, 10, seed=2, draws=60).count(REPRODUCED)


def test_overlapping_seeds_do_not_block_a_clear_difference():
    low, high = list(range(0, 20)), list(range(8, 28))  # p < 0.001; seeds 8..19 overlap
    assert compare(low, high).verdict == REPRODUCED


def test_holm_matches_the_step_down_definition():
    # sorted 0.01, 0.03, 0.04, 0.5 -> 4*0.01, max(0.04, 3*0.03), max(0.09, 2*0.04), max(0.09, 0.5)
    assert holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm([0.9, 0.8]) == [1.0, 1.0] and holm([]) == []  # 2 * 0.8 capped at 1


def test_the_correction_can_turn_a_lone_finding_inconclusive():
    # p ≈ 0.018 alone is reproduced; tested beside 9 null comparisons its Holm p is ~0.18
    one = compare([0.0, 0.2, 0.4, 0.3, 0.5, 0.1], [0.3, 0.5, 0.7, 0.6, 0.9, 0.45])
    assert one.verdict == REPRODUCED and 0.01 < one.p_value < 0.02
    nulls = [compare([0.1, 0.2, 0.3], [0.1, 0.2, 0.31]) for _ in range(9)]
    together = adjust([one] + nulls)
    assert together[0].p_adjusted == pytest.approx(min(1.0, 10 * one.p_value))
    assert together[0].verdict == INCONCLUSIVE and together[0].tested_with == 10


def test_probability_of_improvement_counts_pairs_and_ties_half():
    point, (lo, hi) = probability_of_improvement([1, 2, 3], [2, 4, 5])
    assert point == pytest.approx((3 + 2.5 + 2) / 9)  # 1 < {2, 4, 5}; 2 < {4, 5} and 2 = 2 half; 3 < {4, 5}
    assert 0 <= lo <= point <= hi <= 1
    assert probability_of_improvement([1, 2], [3, 4]) == (1.0, (1.0, 1.0))


def test_hedges_g_is_cohens_d_corrected_for_small_samples():
    d = (2 - 5) / 1.0  # both samples have std 1
    assert hedges_g([1, 2, 3], [4, 5, 6]) == pytest.approx(d * (1 - 3 / (4 * 6 - 9)))
    assert hedges_g([1, 1], [2, 2]) is None


def test_baseline_exits_are_counted_with_an_exact_interval():
    exit_ = baseline_exit([0.5, 0.9, 1.0, 0.99], baseline=1.0, margin=0.05)
    assert (exit_.left, exit_.n) == (2, 4)
    assert exit_.ci == pytest.approx((0.0676, 0.9324), abs=1e-4)  # Clopper-Pearson for 2 of 4


def test_the_power_plan_matches_the_textbook_and_grows_as_the_effect_shrinks():
    # d = 1 at alpha 0.05, 80% power: 17 per side (Cohen's tables, two-sided t-test)
    rng = np.random.default_rng(0)
    base = rng.normal(0, 1, 50)
    a, b = (base - base.mean()) / base.std(ddof=1), (base - base.mean()) / base.std(ddof=1) + 1.0
    assert seeds_for_power(a, b, 0.05) == 17
    assert seeds_for_power(a, a + 0.5, 0.05) > 60
    assert seeds_for_power(a, a + 1.0, 0.05 / 10) > 17  # the Bonferroni level asks for more
    assert seeds_for_power(a, a, 0.05) is None

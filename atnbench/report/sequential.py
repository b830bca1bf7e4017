"""Group-sequential boundaries: seeds added in planned looks with the error controlled across them.

A comparison tested at several looks (after 6, 12, 18 ... seeds a side) at 5% each would find a
difference that is not there far more often than 5% of the time (13% at four looks). The design
here spends the comparison's level ``alpha`` over its looks with the **Lan-DeMets
O'Brien-Fleming-type spending function** (Lan & DeMets 1983; Jennison & Turnbull 2000, ch. 7):

    alpha(t) = 4 - 4 Phi(z_{1 - alpha/4} / sqrt(t)),     t = information fraction in (0, 1],

(alpha/2 on each side, each spent by the one-sided function 2 - 2 Phi(z_{1 - alpha/4} / sqrt(t))):
two-sided and symmetric: little is spent at early looks (only an overwhelming difference stops a
study early), almost all at the last, whose boundary is close to the fixed-sample one. Because
the spending function, not a fixed schedule, sets the boundaries, a look may come at any fraction
(a run that failed leaves a look short): each look's boundary depends only on the fractions of
the looks so far.

A look's boundary ``c_j`` (on the z scale) is solved so that the probability, under no difference,
of first crossing at look j is alpha(t_j) - alpha(t_{j-1}). That probability is computed by the
recursive numerical integration of Armitage, McPherson & Rowe (1969) over the score process
S(t) = Z(t) sqrt(t), a Brownian motion with drift theta (theta: the expected z at t = 1).
scipy has no group-sequential design; this module is that integration (Simpson's rule on a
grid), checked against published boundaries and by simulation (tests/test_sequential.py).

The test at a look is Welch's t-test: the comparison crosses when its two-sided p-value is below
the look's nominal level ``2 (1 - Phi(c_j))`` — equivalently, when the **repeated confidence
interval** (the Welch interval at that nominal level) excludes 0. The same intervals, from a
design that spends twice the level, decide equivalence (two one-sided tests at ``alpha``): see
``atnbench.report.study``.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import numpy as np
from scipy import optimize, stats

GRID = 801  # Simpson points over a continuation region: boundaries to ~1e-6
Z_MAX = 12.0  # a look that spends nothing (alpha(t) below 1e-15) gets this boundary: never crossed


def spent(t: float, alpha: float) -> float:
    """The Lan-DeMets O'Brien-Fleming-type two-sided spending function alpha(t)."""
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    return float(4 * stats.norm.sf(stats.norm.ppf(1 - alpha / 4) / math.sqrt(t)))


def _simpson(low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    points = np.linspace(low, high, GRID)
    weights = np.ones(GRID)
    weights[1:-1:2], weights[2:-1:2] = 4, 2
    return points, weights * (high - low) / (GRID - 1) / 3


def _crossing(start: tuple[np.ndarray, np.ndarray, np.ndarray], t_prev: float, t: float, b: float,
              theta: float) -> float:
    """P(|S(t)| >= b, no earlier crossing) from the sub-density ``start`` = (points, weights,
    density) of S(t_prev) on its continuation region."""
    points, weights, density = start
    step = t - t_prev
    sd, mean = math.sqrt(step), points + theta * step
    mass = weights * density
    return float(mass @ (stats.norm.sf((b - mean) / sd) + stats.norm.cdf((-b - mean) / sd)))


def _continue(start, t_prev: float, t: float, b: float, theta: float):
    """The sub-density of S(t) on (-b, b), not having crossed before or at t."""
    points, weights, density = start
    step = t - t_prev
    new_points, new_weights = _simpson(-b, b)
    kernel = stats.norm.pdf((new_points[:, None] - points[None, :] - theta * step) / math.sqrt(step)) / math.sqrt(step)
    return new_points, new_weights, kernel @ (weights * density)


def _origin() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """S(0) = 0: a point mass, as a one-point 'grid' of weight 1."""
    return np.zeros(1), np.ones(1), np.ones(1)


@functools.lru_cache(maxsize=512)
def boundaries(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """Two-sided z boundaries c_1..c_K for looks at information ``fractions`` (increasing, the
    last usually 1), spending ``alpha`` with the O'Brien-Fleming-type function."""
    fractions = tuple(float(t) for t in fractions)
    if not fractions or any(b <= a for a, b in zip(fractions, fractions[1:])) or fractions[0] <= 0:
        raise ValueError(f"information fractions must increase from above 0: {fractions}")
    found, state, t_prev = [], _origin(), 0.0
    for j, t in enumerate(fractions):
        target = spent(t, alpha) - spent(t_prev, alpha)
        if target < 1e-15:
            c = Z_MAX
        else:
            def excess(c: float) -> float:
                return _crossing(state, t_prev, t, c * math.sqrt(t), 0.0) - target

            c = Z_MAX if excess(Z_MAX) > 0 else optimize.brentq(excess, 1e-6, Z_MAX, xtol=1e-9)
        found.append(float(c))
        if j < len(fractions) - 1:
            state = _continue(state, t_prev, t, c * math.sqrt(t), 0.0)
        t_prev = t
    return tuple(found)


def nominal_levels(fractions: Sequence[float], alpha: float) -> tuple[float, ...]:
    """The two-sided nominal level of each look: reject there when the p-value is below it."""
    return tuple(float(2 * stats.norm.sf(c)) for c in boundaries(tuple(fractions), alpha))


def crossing_probability(fractions: Sequence[float], alpha: float, theta: float) -> float:
    """P(the design crosses at some look) when the expected z at t = 1 is ``theta``: alpha at
    theta = 0, the power otherwise."""
    fractions = tuple(float(t) for t in fractions)
    bounds = boundaries(fractions, alpha)
    total, state, t_prev = 0.0, _origin(), 0.0
    for j, (t, c) in enumerate(zip(fractions, bounds)):
        total += _crossing(state, t_prev, t, c * math.sqrt(t), theta)
        if j < len(fractions) - 1:
            state = _continue(state, t_prev, t, c * math.sqrt(t), theta)
        t_prev = t
    return total


def inflation(fractions: Sequence[float], alpha: float, power: float) -> float:
    """How many times the fixed-sample seeds the design needs at its last look for the same
    power (>= 1: the price of being able to stop early)."""
    return _inflation(tuple(float(t) for t in fractions), float(alpha), float(power))


@functools.lru_cache(maxsize=64)
def _inflation(fractions: tuple[float, ...], alpha: float, power: float) -> float:
    """``inflation``, kept: a root search over the design's power (~0.8 s), asked again for each
    sizing of a command (every part of a reproduction, each --dry-run)."""
    fixed = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    theta = optimize.brentq(lambda th: crossing_probability(fractions, alpha, th) - power, 0.0, 3 * fixed + 5)
    return float((theta / fixed) ** 2)

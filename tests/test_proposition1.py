"""Proposition 1 (ATN paper eqs. 11-13, Appendix A): the closed-form derivative of ATN-LN
against autograd through atnbench (float64, 1e-10).

The a^(t-j) are independent inputs here, so da(t-j)/da(t-m) = [j == m] (eq. A13's chain
through y^(t-m) is the RNN's business, not the normalization's). The closed form is written
in tests/reference.py from eq. A10 (eq. 13 as typeset misplaces a bracket).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from atnbench.nn import functional as F

from reference import as_f64, prop1_derivative, ref_atn_ln, window_steps



EPS = 1e-3


def sequence(T, n, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(T, 1, n, generator=g, dtype=torch.float64)
    a = a * (torch.rand(T, 1, 1, generator=g, dtype=torch.float64) * 2 + 0.3)
    return a + torch.randn(T, 1, 1, generator=g, dtype=torch.float64)


def atn_jacobian(a, k, gamma, beta):
    """J[t, i, u, s] = d y_i^(t) / d a_s^(u) for the one sequence a (T, 1, n)."""
    J = torch.autograd.functional.jacobian(lambda x: F.assorted_time_norm(x, k, EPS, gamma, beta), a)
    T, n = a.shape[0], a.shape[2]
    return J.reshape(T, n, T, n)


CASES = [(k, n) for k in (1, 2, 3, 5) for n in (2, 4)]


@pytest.mark.parametrize("k,n", CASES)
def test_closed_form_matches_autograd_same_feature(k, n):
    T = k + 4
    a = sequence(T, n, seed=10 * k + n)
    gamma = torch.linspace(0.5, 2.0, n, dtype=torch.float64)
    beta = torch.linspace(-1.0, 1.0, n, dtype=torch.float64)
    J = atn_jacobian(a, k, gamma, beta)
    a2 = as_f64(a[:, 0])
    checked = 0
    for t in range(T):  # includes t < k-1 (shrinking window) and full windows
        for m in range(k):
            for i in range(n):
                expected = prop1_derivative(a2, k, EPS, t, m, i, gamma=float(gamma[i]))
                actual = J[t, i, t - m, i].item() if t - m >= 0 else 0.0
                assert abs(actual - expected) < 1e-10, (t, m, i, actual, expected)
                checked += 1
    assert checked == T * k * n


@pytest.mark.parametrize("k,n", CASES)
def test_closed_form_full_jacobian_block(k, n):
    """Every entry d y_i^(t) / d a_s^(t-m), s != i included (no direct term, same paths
    through mu and sigma^2), and zero outside the window (m >= k) and for future steps."""
    T = k + 3
    a = sequence(T, n, seed=7 * k + n)
    gamma = torch.linspace(0.7, 1.3, n, dtype=torch.float64)
    J = atn_jacobian(a, k, gamma, None)
    a2 = as_f64(a[:, 0])
    for t in range(T):
        for u in range(T):
            m = t - u
            for i in range(n):
                for s in range(n):
                    if 0 <= m < len(window_steps(t, k)):
                        expected = prop1_derivative(a2, k, EPS, t, m, i, gamma=float(gamma[i]), s=s)
                    else:
                        expected = 0.0  # future steps and steps that left the window
                    assert abs(J[t, i, u, s].item() - expected) < 1e-10, (t, u, i, s)


@pytest.mark.parametrize("k", (2, 4))
def test_closed_form_matches_finite_differences_of_reference(k):
    """Independent of atnbench: central differences of the loop reference (h = 1e-6, error
    ~h^2 * |y'''| + 1e-16/h ~ 1e-10; we allow 1e-7)."""
    T, n, h = k + 2, 3, 1e-6
    a = as_f64(sequence(T, n, seed=k)[:, 0])
    for t in (0, T - 1):
        for m in range(min(k, t + 1)):
            for i in range(n):
                plus, minus = a.copy(), a.copy()
                plus[t - m, i] += h
                minus[t - m, i] -= h
                fd = (ref_atn_ln(plus[:, None], k, EPS)[t, 0, i] - ref_atn_ln(minus[:, None], k, EPS)[t, 0, i]) / (2 * h)
                assert abs(fd - prop1_derivative(a, k, EPS, t, m, i)) < 1e-7


def test_typeset_bracket_of_eq13_is_numerically_harmless():
    """Eq. 13 as typeset scales only the first sum by 2/(nk); eq. A10 scales both. The second
    sum is sum_j sum_s (a_s^(t-j) - mu) * dmu/da, and the deviations from the window mean sum
    to 0, so both readings give the same number (the bracket is a typo without effect)."""
    k, n, T = 3, 4, 6
    a = as_f64(sequence(T, n, seed=1)[:, 0])
    for t in range(k - 1, T):
        window = a[t - k + 1 : t + 1]
        assert abs((window - window.mean()).sum()) < 1e-12


def test_k1_reduces_to_layer_norm_derivative():
    """k = 1, m = 0: eqs. 11-13 become LN's diagonal derivative
    (1 - 1/n) / sigma - (a_i - mu)^2 / (n sigma^3)."""
    n = 5
    a = as_f64(sequence(3, n, seed=4)[:, 0])
    for t in range(3):
        mu = a[t].mean()
        var = a[t].var()
        for i in range(n):
            expected = (1 - 1 / n) / np.sqrt(var + EPS) - (a[t, i] - mu) ** 2 / (n * (var + EPS) ** 1.5)
            assert abs(prop1_derivative(a, 1, EPS, t, 0, i) - expected) < 1e-12

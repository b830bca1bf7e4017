"""Proposition 1 of the ATN paper, checked numerically in float64.

For ATN-LN of one sequence a = {a^(t)} in R^n (eqs. 7-9), Proposition 1 gives
dy_i^(t)/da_i^(t-m) for 0 <= m <= k-1. Here the a's are independent inputs (a random
sequence, not produced by an RNN), so da_i^(t-j)/da_i^(t-m) = [j == m] and the chain of
eq. A13 collapses to the indicator. With k' the number of steps in the window (k once
t >= k-1; the window shrinks to 0..t at the start of a sequence, as atnbench does):

    dmu/da      = 1/(n k')                                                         (eq. 12 / A7)
    dsigma^2/da = 2/(n k') ( (a_i^(t-m) - mu) - sum_{j<k'} sum_s (a_s^(t-j) - mu) dmu/da )  (A10)
    dy_i/da     = gamma_i ([m == 0] - dmu/da) / sqrt(sigma^2 + eps)
                  - gamma_i (a_i^(t) - mu) / (2 (sigma^2 + eps)^{3/2}) dsigma^2/da          (eq. 11)

Eq. 13 as typeset closes the bracket early, so 2/(nk) multiplies only the first sum; A10 (the
proof's own line) is the correct form. The second sum is a sum of deviations from the window's
own mean, i.e. zero, so the typeset form gives the same number up to rounding: ``typeset``
reports that difference too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from atnbench.nn.functional import assorted_time_norm


def random_sequence(T: int, n: int, seed: int) -> Tensor:
    """A (T, n) float64 sequence whose scale and offset change over time (so windows differ)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(T, n, generator=g, dtype=torch.float64)
    a = a * (torch.rand(T, 1, generator=g, dtype=torch.float64) * 2 + 0.3)
    return a + torch.randn(T, 1, generator=g, dtype=torch.float64)


def closed_form(a: Tensor, k: int, eps: float, gamma: Tensor, typeset: bool = False) -> Tensor:
    """D[t, m, i] = dy_i^(t)/da_i^(t-m) by Proposition 1 for a (T, n) sequence; NaN where
    step t-m is not in t's window (m >= k' or t-m < 0). ``typeset``: eq. 13 with its bracket
    as printed instead of A10."""
    T, n = a.shape
    D = torch.full((T, k, n), float("nan"), dtype=a.dtype)
    for t in range(T):
        window = a[max(0, t - k + 1) : t + 1]  # the k' steps t-k'+1..t
        kk = window.shape[0]
        nk = n * kk
        mu = window.sum() / nk  # eq. 7
        var = ((window - mu) ** 2).sum() / nk  # eq. 8
        deviations = (window - mu).sum()  # sum_j sum_s (a_s^(t-j) - mu): zero up to rounding
        root = torch.sqrt(var + eps)
        for m in range(kk):
            dmu = 1.0 / nk  # eq. 12: only j = m contributes
            first = a[t - m] - mu  # sum_{j<=m} (a_i^(t-j) - mu) da_i^(t-j)/da_i^(t-m)
            if typeset:
                dvar = 2.0 / nk * first - deviations * dmu  # eq. 13 as printed
            else:
                dvar = 2.0 / nk * (first - deviations * dmu)  # eq. A10
            direct = 1.0 if m == 0 else 0.0  # da_i^(t)/da_i^(t-m)
            D[t, m] = gamma * (direct - dmu) / root - gamma * (a[t] - mu) / (2.0 * root**3) * dvar
    return D


def autograd_jacobian(a: Tensor, k: int, eps: float, gamma: Tensor, beta: Tensor) -> Tensor:
    """J[t, i, u, s] = dy_i^(t)/da_s^(u) of atnbench's ATN-LN, by autograd."""
    T, n = a.shape
    J = torch.autograd.functional.jacobian(
        lambda x: assorted_time_norm(x.unsqueeze(1), k, eps, gamma, beta).squeeze(1), a)
    return J.reshape(T, n, T, n)


@dataclass
class MError:
    k: int
    m: int
    entries: int  # how many (t, i) pairs have step t-m in the window of t
    max_error: float  # max |closed form (A10) - autograd|
    typeset_max_error: float  # the same with eq. 13 as typeset


@dataclass
class KResult:
    k: int
    per_m: list[MError]
    outside_window_max: float  # max |dy^(t)/da^(u)| over u outside t's window (must be 0)

    @property
    def max_error(self) -> float:
        return max(e.max_error for e in self.per_m)

    def to_dict(self) -> dict:
        return {"k": self.k, "max_error": self.max_error, "outside_window_max": self.outside_window_max,
                "per_m": [asdict(e) for e in self.per_m]}


def check(k: int, T: int = 20, n: int = 8, eps: float = 1e-5, seed: int = 0) -> KResult:
    """Proposition 1 against autograd for one random sequence and window k."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if T < 1 or n < 1:
        raise ValueError(f"T and n must be >= 1, got T={T}, n={n}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    a = random_sequence(T, n, seed)
    g = torch.Generator().manual_seed(seed + 1)
    gamma = torch.rand(n, generator=g, dtype=torch.float64) * 1.5 + 0.5
    beta = torch.randn(n, generator=g, dtype=torch.float64)
    J = autograd_jacobian(a, k, eps, gamma, beta)
    D, D13 = closed_form(a, k, eps, gamma), closed_form(a, k, eps, gamma, typeset=True)
    per_m = []
    for m in range(min(k, T)):
        t = torch.arange(m, T)
        auto = J[t, :, t - m, :].diagonal(dim1=-2, dim2=-1)  # (t, i): dy_i^(t)/da_i^(t-m)
        valid = ~torch.isnan(D[t, m, 0])  # window of t contains t-m
        err = (D[t, m] - auto)[valid].abs()
        err13 = (D13[t, m] - auto)[valid].abs()
        per_m.append(MError(k, m, int(err.numel()),
                            float(err.max()) if err.numel() else 0.0,
                            float(err13.max()) if err13.numel() else 0.0))
    steps = torch.arange(T)
    lag = steps.view(T, 1) - steps.view(1, T)  # t - u
    outside = (lag < 0) | (lag >= k)
    outside_max = float(J.permute(0, 2, 1, 3)[outside].abs().max()) if outside.any() else 0.0
    return KResult(k, per_m, outside_max)

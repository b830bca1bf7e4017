"""Moments over a sliding window of time steps: the statistics of Assorted-Time Normalization.

ATN (Pospisil et al., eqs. 7-8) normalizes step t with the mean and variance of the last k
steps of a sequence, pooled with whatever the base normalization reduces over (the features
for ATN-LN, the batch for ATN-BN). Every step in a window contributes the same number of
values, so the pooled moments are plain averages over the window of each step's own moments:

    mean_t = avg_j m_j        E[a^2]_t = avg_j (v_j + m_j^2)        var_t = E[a^2]_t - mean_t^2

with m_j, v_j the mean and (biased) variance of step j. That makes the cost independent of k:
a step's moments are computed once, and a window is a sum of per-step "power sums"
P_j = (m_j, v_j + m_j^2), obtained for all steps at once by cumulative-sum differences
(``windowed_moments``) or step by step with a running total that adds the newest step and
subtracts the one leaving (``WindowStream``).

Numerics (the choice, documented): per-step moments come from ``torch.var_mean`` in the
working dtype (a two-pass, cancellation-free variance within a step). The window combination
``E[a^2] - mean^2`` would cancel badly when the mean is large against the spread, so the power
sums are formed from step means shifted by a fixed reference (the first step's mean of the
sequence, detached; the shift cancels exactly in the result and in the gradients), and are
accumulated in float64 (``accumulation_dtype``): cumulative sums and running totals then carry
errors relative to the spread of the data, not to its offset. The variance is clamped at 0
before eps is added. MPS has no float64, so there the accumulation falls back to float32.

The window is part of the recurrent state: ``history`` holds the per-step (mean, var) of the
last (at most k-1) steps, oldest first, and its length says how many there are. Passing it back
continues the sequence exactly (truncated BPTT sees one continuous stream).
"""

from __future__ import annotations

from collections import deque

import torch
from torch import Tensor


def accumulation_dtype(device: torch.device) -> torch.dtype:
    """float64 wherever the device has it (CPU, CUDA); float32 on MPS."""
    return torch.float32 if device.type == "mps" else torch.float64


def step_moments(a: Tensor, dim: int | tuple[int, ...]) -> Tensor:
    """Each step's ``(mean, biased variance)`` of ``a`` reduced over ``dim``.

    A tensor of the reduced shape with a trailing axis of size 2, in the accumulation dtype.
    The variance inside a step comes from ``var_mean`` in the working dtype (two-pass, no
    cancellation).
    """
    var, mean = torch.var_mean(a, dim=dim, unbiased=False)
    return torch.stack((mean, var), dim=-1).to(accumulation_dtype(a.device))


def _shifted_sums(moments: Tensor, ref: Tensor) -> Tensor:
    """Power sums ``(m - ref, v + (m - ref)^2)`` of steps whose means are shifted by ``ref``."""
    d = moments[..., 0] - ref
    return torch.stack((d, moments[..., 1] + d * d), dim=-1)


def _window_moments(total: Tensor, count: Tensor | int, ref: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    avg = total / count
    shift, ex2 = avg.unbind(-1)
    var = (ex2 - shift * shift).clamp_min(0.0)
    return (ref + shift).to(dtype), var.to(dtype)


def empty_history(stat_shape: tuple[int, ...], device: torch.device) -> Tensor:
    """The window state of a sequence that has not started: zero past steps."""
    return torch.zeros((0, *stat_shape, 2), dtype=accumulation_dtype(device), device=device)


def windowed_moments(
    moments: Tensor, k: int, history: Tensor | None, dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Window mean and variance for every step at once, fully parallel over time.

    ``moments`` is (T, *S, 2) per-step ``(mean, var)``; ``history`` the (h <= k-1, *S, 2)
    moments of the steps before. Returns ``(mean, var, count, new_history)``: the moments of
    the window ending at each step (at most k steps, fewer at the start) in ``dtype``, the (T,)
    number of steps in each window, and the last min(k-1, h+T) steps' moments.
    """
    if history is None:
        history = moments.new_zeros((0, *moments.shape[1:]))
    h, steps = history.shape[0], moments.shape[0]
    full = torch.cat((history, moments), dim=0)
    ref = full[0, ..., 0].detach()  # shifting by the first mean keeps the cumulative sums small
    sums = _shifted_sums(full, ref)
    prefix = torch.cat((torch.zeros_like(sums[:1]), sums.cumsum(dim=0)), dim=0)
    end = torch.arange(h + 1, h + steps + 1, device=moments.device)
    start = (end - k).clamp_min(0)
    count = (end - start).to(moments.dtype)
    total = prefix[end] - prefix[start]
    mean, var = _window_moments(total, count.view(-1, *([1] * (total.dim() - 1))), ref, dtype)
    keep = min(k - 1, h + steps)
    return mean, var, count, full[full.shape[0] - keep :]


class WindowStream:
    """Step-by-step window moments with a running total: O(1) work per step for any k.

    ``push(moments_t, dtype)`` takes the newest step's ``(mean, var)`` and returns the window's
    mean and variance: the newest step's power sums are added to the running total and the
    leaving step's subtracted. ``history()`` gives the state to hand to the next call.
    """

    def __init__(self, k: int, history: Tensor):
        self.k = k
        self.initial = history
        self.raw: deque[Tensor] = deque(history.unbind(0), maxlen=k - 1)
        self.ref: Tensor | None = history[0, ..., 0].detach() if history.shape[0] else None
        self.sums: deque[Tensor] = deque(maxlen=k)
        self.total: Tensor | None = None
        if self.ref is not None:
            shifted = _shifted_sums(history, self.ref)
            self.sums.extend(shifted.unbind(0))
            self.total = shifted.sum(dim=0)

    def push(self, moments: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        if self.ref is None:
            self.ref = moments[..., 0].detach()
        sums = _shifted_sums(moments, self.ref)
        if self.total is None:
            self.total = sums
        elif len(self.sums) == self.k:
            self.total = self.total + sums - self.sums[0]  # the deque drops sums[0] on append
        else:
            self.total = self.total + sums
        self.sums.append(sums)
        self.raw.append(moments)
        return _window_moments(self.total, len(self.sums), self.ref, dtype)

    def history(self) -> Tensor:
        if not self.raw:
            return self.initial[:0]
        return torch.stack(tuple(self.raw), dim=0)

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
working dtype (a two-pass, cancellation-free variance within a step); the power sums, the
cumulative sums and the running totals are kept in float64 (``accumulation_dtype``), where
``E[a^2] - mean^2`` loses only ~1e-16 * (mean^2 / var) relatively and the add/subtract drift
of a running total over 10^4 steps stays below 1e-12. The variance is then clamped at 0
before eps is added. MPS has no float64, so there the accumulation falls back to float32.

The window is part of the recurrent state: ``history`` holds the power sums of the last
(at most k-1) steps, oldest first, and its length says how many there are. Passing it back
continues the sequence exactly (truncated BPTT sees one continuous stream).
"""

from __future__ import annotations

import torch
from torch import Tensor


def accumulation_dtype(device: torch.device) -> torch.dtype:
    """float64 wherever the device has it (CPU, CUDA); float32 on MPS."""
    return torch.float32 if device.type == "mps" else torch.float64


def power_sums(a: Tensor, dim: int | tuple[int, ...]) -> Tensor:
    """Per-step power sums ``(mean, mean of squares)`` of ``a`` reduced over ``dim``.

    Returns a tensor of the reduced shape with a trailing axis of size 2, in the
    accumulation dtype. The variance inside a step is computed in the working dtype by
    ``var_mean`` (no cancellation); only the combination ``v + m^2`` happens in float64.
    """
    var, mean = torch.var_mean(a, dim=dim, unbiased=False)
    acc = accumulation_dtype(a.device)
    mean = mean.to(acc)
    return torch.stack((mean, var.to(acc) + mean * mean), dim=-1)


def moments_from_sums(total: Tensor, count: Tensor | int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """Mean and clamped variance from summed power sums over ``count`` steps."""
    avg = total / (count.unsqueeze(-1) if isinstance(count, Tensor) else count)
    mean, ex2 = avg.unbind(-1)
    var = (ex2 - mean * mean).clamp_min(0.0)
    return mean.to(dtype), var.to(dtype)


def empty_history(stat_shape: tuple[int, ...], device: torch.device) -> Tensor:
    """The window state of a sequence that has not started: zero past steps."""
    return torch.zeros((0, *stat_shape, 2), dtype=accumulation_dtype(device), device=device)


def windowed_moments(
    sums: Tensor, k: int, history: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """Window moments for every step at once, fully parallel over time.

    ``sums`` is (T, *S, 2) per-step power sums; ``history`` the (h <= k-1, *S, 2) sums of the
    steps before. Returns ``(total, count, new_history)``: ``total[t]`` is the sum of the
    power sums of the window ending at t (at most k steps, fewer at the start), ``count`` the
    (T,) number of steps in each window, ``new_history`` the last min(k-1, h+T) steps.
    """
    if history is None:
        history = sums.new_zeros((0, *sums.shape[1:]))
    h, steps = history.shape[0], sums.shape[0]
    full = torch.cat((history, sums), dim=0)
    prefix = torch.cat((torch.zeros_like(full[:1]), full.cumsum(dim=0)), dim=0)
    end = torch.arange(h + 1, h + steps + 1, device=sums.device)
    start = (end - k).clamp_min(0)
    total = prefix[end] - prefix[start]
    keep = min(k - 1, h + steps)
    return total, (end - start).to(sums.dtype), full[full.shape[0] - keep :]


class WindowStream:
    """Step-by-step window moments with a running total: O(1) work per step for any k.

    Call ``push(sums_t)`` with the newest step's power sums; it returns the window total and
    the number of steps in it. ``history()`` gives the state to hand to the next call.
    """

    def __init__(self, k: int, history: Tensor):
        self.k = k
        self.initial = history
        self.steps: list[Tensor] = list(history.unbind(0))
        self.total: Tensor | None = history.sum(dim=0) if self.steps else None

    def push(self, sums: Tensor) -> tuple[Tensor, int]:
        self.steps.append(sums)
        self.total = sums if self.total is None else self.total + sums
        if len(self.steps) > self.k:
            self.total = self.total - self.steps[-self.k - 1]
        return self.total, min(len(self.steps), self.k)

    def history(self) -> Tensor:
        kept = self.steps[max(0, len(self.steps) - (self.k - 1)) :] if self.k > 1 else []
        if not kept:
            return self.initial[:0]
        return torch.stack(kept, dim=0)

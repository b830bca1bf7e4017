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


# --------------------------------------------------------------------------------------
# Variable-length batches (see padding.py)
# --------------------------------------------------------------------------------------

def history_at(full: Tensor, k: int, ends: Tensor) -> Tensor:
    """The window state of each column at its own end: a per-sequence (ATN-LN) window of a ragged batch.

    ``full`` (L, B, 2) holds the moments of every step (history included), ``ends`` (B,) the
    number of valid steps of each column. Returns the last min(k-1, max(ends)) steps before each
    column's end, oldest first. A column with fewer steps than that cannot share the tensor: its
    missing rows are NaN, which marks the state as not continuable (``check_history`` refuses it)
    rather than silently continuing a shorter window as a longer one.
    """
    keep = min(k - 1, int(ends.max()))
    if keep <= 0:
        return full[:0]
    rows = ends.to(full.device).unsqueeze(0) - keep + torch.arange(keep, device=full.device).unsqueeze(1)
    missing = rows < 0
    index = rows.clamp_min(0).view(keep, -1, *([1] * (full.dim() - 2))).expand(keep, *full.shape[1:])
    picked = full.gather(0, index)
    return picked.masked_fill(missing.view(keep, -1, *([1] * (full.dim() - 2))), float("nan"))


def check_history(history: Tensor) -> None:
    """Refuse a window state marked as not continuable by ``history_at`` / ``masked window``."""
    if history.numel() and bool(torch.isnan(history).any()):
        raise ValueError("this window state comes from a variable-length batch in which some sequence was "
                         "shorter than the window (k-1 steps) or, for ATN-BN, steps had padded rows: it "
                         "cannot be continued exactly; start the next call with state=None, or keep h (and c) "
                         "with its windows started empty: (h.clone(), c) for an LSTM, h.clone() for a GRU "
                         "(an encoder's state handed to a decoder)")


def masked_step_moments(a: Tensor, mask: Tensor) -> Tensor:
    """Per-feature ``(mean, biased var, count)`` over the valid rows of the batch axis (-2).

    ``a`` (..., B, n), ``mask`` (..., B, 1) bool. Returns (..., n, 3) in the accumulation dtype;
    a step without valid rows has count 0 (and mean, var 0).
    """
    weight = mask.to(a.dtype)
    count = weight.sum(dim=-2)
    safe = count.clamp_min(1)
    mean = (a * weight).sum(dim=-2) / safe
    var = (((a - mean.unsqueeze(-2)) * weight) ** 2).sum(dim=-2) / safe
    count = count.expand_as(mean)
    return torch.stack((mean, var, count), dim=-1).to(accumulation_dtype(a.device))


def pooled_window(entries: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor]:
    """Moments of the values of a window of steps with different numbers of values each.

    ``entries`` (w, ..., 3): per step ``(mean m_j, biased var v_j, count n_j)``. The pooled
    mean is sum n_j m_j / N and the pooled E[a^2] is sum n_j (v_j + m_j^2) / N (N = sum n_j),
    with the means shifted by the first step's mean (as ``windowed_moments``) against
    cancellation. Returns (mean, var, N) in ``dtype`` (N in the accumulation dtype).
    """
    ref = entries[0, ..., 0].detach()
    n = entries[..., 2]
    d = entries[..., 0] - ref
    total = n.sum(dim=0)
    safe = total.clamp_min(1)
    shift = (n * d).sum(dim=0) / safe
    ex2 = (n * (entries[..., 1] + d * d)).sum(dim=0) / safe
    var = (ex2 - shift * shift).clamp_min(0.0)
    return (ref + shift).to(dtype), var.to(dtype), total


def with_counts(history: Tensor, count: int) -> Tensor:
    """A (h, ..., 2) window state as (h, ..., 3) entries, each step counting ``count`` values."""
    return torch.cat((history, torch.full_like(history[..., :1], float(count))), dim=-1)


def masked_history(entries: Tensor, k: int, full_count: int) -> Tensor:
    """The (mean, var) window state of the last k-1 entries; NaN-marked (not continuable, see
    ``check_history``) where a step had fewer than ``full_count`` values."""
    keep = entries[max(0, entries.shape[0] - (k - 1)):]
    partial = (keep[..., 2] != full_count).unsqueeze(-1)
    return keep[..., :2].masked_fill(partial, float("nan"))

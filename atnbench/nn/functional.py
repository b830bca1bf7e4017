"""The normalizations as functions: each written once, used by the modules and the cells.

Sequences are time first, ``(T, B, n)``; a single step is ``(B, n)``. ``weight``/``bias``
are the trainable gain and shift of shape ``(n,)`` (None: no affine transform).

- ``layer_norm``: Ba et al. (2016), statistics over the features of one step.
- ``assorted_time_norm``: ATN-LN, Pospisil et al. eqs. 7-9, statistics over the features of
  the last k steps (the window shrinks to 1..t while t < k), applied to step t only.
- ``assorted_time_batch_norm``: ATN-BN, the same window pooled with the batch, per feature.
- ``batch_norm_steps``: batch statistics per feature, separately at every step (Cooijmans
  et al., recurrent BN; also Laurent et al.'s frame-wise BN).
- ``sequence_batch_norm``: Laurent et al.'s sequence-wise BN, per-feature statistics over all
  unpadded frames of the batch.
- ``batch_layer_norm``: Ziaee & Cano's BLN (Algorithm 1, eqs. 10-17).

Zero batch variance (a feature with the same value in every row of a step): the batch norms
compute what they always do (eps keeps the values finite), and their gradient goes through
``share_alike``: such a feature's rows get their mean gradient. Every parameter's gradient is
then exact and finite, where BN's 1/sqrt(eps) would otherwise compound over a recurrence to inf.

ATN-BN on a flat window (every row and every step of the window have the same value: its variance
is 0): the step's output passes no gradient through its normalization (``cut_flat``, which says
why and what the paper leaves open). Values, and every window that is not flat, are untouched.
"""

from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import Tensor

from atnbench.nn.window import history_at, step_moments, windowed_moments


def checked_k(k) -> int:
    """The window ``k`` as an int: TypeError unless an integer (2.5 or "3" would fail deep inside
    the kernels), ValueError below 1."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k (the window, in time steps) must be an integer, got {k!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return int(k)


def checked_eps(eps) -> float:
    """``eps`` as a float: TypeError unless a number, ValueError unless finite and >= 0."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps must be a number, got {eps!r}")
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps}")
    return float(eps)


def _checked_sequence(x: Tensor) -> None:
    if x.dim() != 3:
        raise ValueError(f"expected a (T, B, n) sequence, got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError("expected a sequence of at least one step, got T = 0")
    if not x.is_floating_point():
        raise TypeError(f"expected a floating-point sequence, got {x.dtype}")


def affine(y: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def standardize(a: Tensor, mean: Tensor, var: Tensor, eps: float) -> Tensor:
    """(a - mean) / sqrt(var + eps), eps inside the root as in every paper here."""
    return (a - mean) * torch.rsqrt(var + eps)


class _ShareAlike(torch.autograd.Function):
    """Identity; backward: see ``share_alike``."""

    @staticmethod
    def forward(ctx, a: Tensor, alike: Tensor, mask: Tensor | None) -> Tensor:
        ctx.save_for_backward(alike, mask)
        return a.view_as(a)

    @staticmethod
    def backward(ctx, grad: Tensor):
        alike, mask = ctx.saved_tensors
        if mask is None:
            mean = grad.mean(dim=-2, keepdim=True)
        else:
            weight = mask.to(grad.dtype)
            mean = (grad * weight).sum(dim=-2, keepdim=True) / weight.sum(dim=-2, keepdim=True).clamp_min(1)
            alike = alike & mask
        return torch.where(alike, mean, grad), None, None


def rows_alike(a: Tensor, mask: Tensor | None = None) -> Tensor:
    """(..., 1, n) bool: the features whose value is the same in every (valid) row of the batch
    axis (-2), i.e. whose batch variance is exactly 0. ``mask`` as in ``masked_batch_moments``."""
    if mask is None:
        return a.amax(dim=-2, keepdim=True) == a.amin(dim=-2, keepdim=True)
    valid = mask.to(torch.bool)
    high = a.masked_fill(~valid, float("-inf")).amax(dim=-2, keepdim=True)
    low = a.masked_fill(~valid, float("inf")).amin(dim=-2, keepdim=True)
    return high == low  # no valid row: -inf == inf, not alike


def share_alike(a: Tensor, mask: Tensor | None = None) -> Tensor:
    """``a`` (..., B, n) unchanged; in the backward, each feature whose value is the same in every
    (valid) row gets, in every (valid) row, the mean of its rows' gradients.

    Why (the batch norms' zero batch variance): where every row of the batch has the same value
    (a time series whose first days are 0 for every sequence; W_h h with h0 = 0), BN's Jacobian
    is (I - 1/B) gain / sqrt(eps): it multiplies the part of the gradient that differs between
    rows by ~30 (gain 0.1, eps 1e-5) at every such step, and through a recurrence whose rows stay
    alike for tens of steps that overflows (inf - inf: NaN in every weight). That part can only
    reach the per-row inputs of those steps (x, h0, c0): every parameter moves all rows alike
    there, so its gradient gets exactly 0 from it (by rounding, not: noise times 30^steps). The
    mean over the rows is the part every parameter's gradient is made of: keeping only it leaves
    each parameter's gradient exact and finite, and alike inputs get alike gradients. Values,
    and every feature whose rows differ, are untouched (bit for bit).
    """
    if not (torch.is_grad_enabled() and a.requires_grad):
        return a
    with torch.no_grad():
        alike = rows_alike(a, mask)
    return _ShareAlike.apply(a, alike, None if mask is None else mask.to(torch.bool))


def equal_runs(full: Tensor) -> Tensor:
    """(L, ...) int64 for per-step moments ``full`` (L, ..., 2): how many consecutive steps, ending
    at each step, have exactly its (mean, var) (bit for bit)."""
    steps = full.shape[0]
    index = torch.arange(steps, device=full.device).view(-1, *([1] * (full.dim() - 2))).expand(full.shape[:-1])
    same = torch.zeros(full.shape[:-1], dtype=torch.bool, device=full.device)
    same[1:] = (full[1:] == full[:-1]).all(-1)
    start = torch.where(same, torch.zeros_like(index), index).cummax(dim=0).values
    return index - start + 1


def flat_windows(x: Tensor, moments: Tensor, history: Tensor | None, k: int) -> Tensor:
    """(T, n) bool: ATN-BN's flat windows in a (T, B, n) sequence, ``moments`` (T, n, 2) its steps'
    moments and ``history`` the window state before it: step t's rows are all equal and every
    step of its window has the same batch moments as step t (bit for bit; the window state
    carries the moments, not the values, so a continued sequence decides as the whole one)."""
    alike = rows_alike(x).squeeze(-2)
    past = 0 if history is None else history.shape[0]
    full = moments if history is None else torch.cat((history, moments))
    runs = equal_runs(full)[past:]
    count = (torch.arange(past + 1, past + x.shape[0] + 1, device=x.device).clamp_max(k)).unsqueeze(-1)
    return alike & (runs >= count)


def window_flat(a: Tensor, window: Tensor, mask: Tensor | None = None) -> Tensor:
    """(n,) bool: one step's flat window (as ``flat_windows``): ``a`` (B, n) the step, ``window``
    (w, n, >=2) its window's moments, the step's own last; ``mask`` (B, 1) its valid rows."""
    moments = window[..., :2]
    return rows_alike(a, mask).squeeze(-2) & (moments == moments[-1]).all(-1).all(0)


def cut_flat(y: Tensor, flat: Tensor | None) -> Tensor:
    """ATN-BN's standardized output ``y`` (before gain and shift), unchanged in value; where its
    window is flat (``flat`` broadcastable to y) its gradient stops: the step's normalization
    sends nothing back to the window's values (nor to this step's), as if xhat = 0 were a constant.

    Why (and the paper's gap): Pospisil et al. define ATN-BN's moments over the batch and the last
    k steps, eps inside the root, and say nothing of a window whose values are all equal. There
    the derivative is gain / sqrt(eps) (~30) on whatever differs between the window's steps; a
    recurrence that sits at a fixed point (a series whose first days are 0 everywhere) compounds it
    step after step: ~1e43 over Covid3Month's prefix, inf - inf = NaN in float32. Rows alike
    (``share_alike``) removed the part that differs between rows, exactly; here the part that
    differs between steps reaches the parameters too (they can move steps differently), so no
    exact finite rule exists: we choose the limit of a window whose spread vanishes relative to
    eps, where xhat stays 0 and gives no signal. Only flat windows are cut; the gain's and the
    shift's gradients (dy * xhat, dy) are untouched, and so is every value. For k = 1 ATN-BN is
    BN, whose rows-alike rule is already exact and finite: the callers cut for k > 1 only.
    """
    if flat is None or not torch.is_grad_enabled() or not y.requires_grad:
        return y
    if not flat.is_meta and not bool(flat.any()):  # on meta (shapes only) nothing can be read: cut as written
        return y
    return torch.where(flat, y.detach(), y)


def layer_norm(x: Tensor, eps: float = 1e-5, weight: Tensor | None = None, bias: Tensor | None = None) -> Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def atn_ln_sequence(
    x: Tensor, k: int, eps: float, weight: Tensor | None, bias: Tensor | None, history: Tensor | None,
    lengths: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """ATN-LN of a whole (T, B, n) sequence; returns the output and the window state.

    ``lengths`` (B,) of a right-padded batch changes only the state: each sequence's window at
    its own last step (its outputs never see padding: the window reaches back, not forward).
    """
    moments = step_moments(x, dim=-1)
    mean, var, _, new_history = windowed_moments(moments, k, history, x.dtype)
    if lengths is not None:
        past = moments[:0] if history is None else history
        new_history = history_at(torch.cat((past, moments)), k, past.shape[0] + lengths)
    y = standardize(x, mean.unsqueeze(-1), var.unsqueeze(-1), eps)
    return affine(y, weight, bias), new_history


def assorted_time_norm(
    x: Tensor, k: int, eps: float = 1e-5, weight: Tensor | None = None, bias: Tensor | None = None
) -> Tensor:
    """Assorted-Time Normalization on top of LN (ATN-LN) of a (T, B, n) sequence.

    At step t the mean and variance are taken over all n features of steps
    max(1, t-k+1)..t (eqs. 7-8), and only step t is normalized with them (eq. 9); eps sits
    inside the square root and ``weight``/``bias`` are shared over time. k=1 is LN.
    """
    k, eps = checked_k(k), checked_eps(eps)
    _checked_sequence(x)
    return atn_ln_sequence(x, k, eps, weight, bias, None)[0]


def atn_bn_sequence(
    x: Tensor, k: int, eps: float, weight: Tensor | None, bias: Tensor | None, history: Tensor | None
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """ATN-BN of a (T, B, n) sequence with batch statistics.

    Per feature, the moments pool the batch and the last k steps. Returns the output, the
    per-step window mean and unbiased variance (T, n) (for population estimates: the window
    pools batch x count values) and the window state.
    """
    x = share_alike(x)
    moments = step_moments(x, dim=1)
    mean, var, count, new_history = windowed_moments(moments, k, history, x.dtype)
    y = standardize(x, mean.unsqueeze(1), var.unsqueeze(1), eps)
    if k > 1 and torch.is_grad_enabled() and x.requires_grad:
        y = cut_flat(y, flat_windows(x.detach(), moments, history, k).unsqueeze(1))
    pooled = (count * x.shape[1]).unsqueeze(-1)
    unbiased = var * (pooled / (pooled - 1).clamp_min(1)).to(var.dtype)
    return affine(y, weight, bias), mean, unbiased, new_history


def assorted_time_batch_norm(
    x: Tensor, k: int, eps: float = 1e-5, weight: Tensor | None = None, bias: Tensor | None = None
) -> Tensor:
    """ATN on top of BN (ATN-BN) of a (T, B, n) sequence, with the batch's statistics."""
    k, eps = checked_k(k), checked_eps(eps)
    _checked_sequence(x)
    return atn_bn_sequence(x, k, eps, weight, bias, None)[0]


def masked_batch_moments(x: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """Per-feature biased mean and variance over the batch axis (-2), counting only rows where
    ``mask`` (broadcastable to x, 1 valid / 0 padded) is set; keepdim. A step with no valid row
    gets mean 0, variance 0 (its outputs are padding, and stay finite)."""
    if mask is None:
        var, mean = torch.var_mean(x, dim=-2, unbiased=False, keepdim=True)
        return mean, var
    mask = mask.to(x.dtype)
    count = mask.sum(dim=-2, keepdim=True).clamp_min(1)
    mean = (x * mask).sum(dim=-2, keepdim=True) / count
    var = (((x - mean) * mask) ** 2).sum(dim=-2, keepdim=True) / count
    return mean, var


def batch_norm_steps(
    x: Tensor, eps: float = 1e-5, weight: Tensor | None = None, bias: Tensor | None = None,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """BN with batch statistics computed separately at every step.

    Works on a (T, B, n) sequence or a (B, n) step (reduction over the batch axis, -2).
    ``mask`` ((T, B, 1) or (B, 1)): the statistics of each step pool only its valid rows (the
    sequences of a padded batch still running at that step; Laurent et al.'s frame-wise BN,
    eq. 19, over unpadded frames). Every row is normalized with them.
    Returns the output and the biased batch mean and variance used.
    """
    x = share_alike(x, mask)
    mean, var = masked_batch_moments(x, mask)
    y = standardize(x, mean, var, eps)
    return affine(y, weight, bias), mean.squeeze(-2), var.squeeze(-2)


def sequence_batch_norm(
    x: Tensor,
    eps: float = 1e-5,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    lengths: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Laurent et al.'s sequence-wise BN (eqs. 20-21) of a (T, B, n) sequence.

    Per-feature mean and variance over time and batch, counting only the unpadded frames
    (``lengths``: (B,) valid steps per sequence; None: all frames are valid).
    """
    steps = x.shape[0]
    if lengths is None:
        x = share_alike(x)
        var, mean = torch.var_mean(x, dim=(0, 1), unbiased=False)
    else:
        mask = (torch.arange(steps, device=x.device).unsqueeze(1) < lengths.to(x.device).unsqueeze(0))
        x = share_alike(x, mask.unsqueeze(-1))
        mask = mask.unsqueeze(-1).to(x.dtype)
        frames = mask.sum()
        mean = (x * mask).sum(dim=(0, 1)) / frames
        var = (((x - mean) * mask) ** 2).sum(dim=(0, 1)) / frames
    y = standardize(x, mean, var, eps)
    return affine(y, weight, bias), mean, var


def batch_layer_norm(
    x: Tensor,
    eps: float,
    weight: Tensor | None,
    bias: Tensor | None,
    batch_mean: Tensor | None = None,
    batch_std: Tensor | None = None,
    feature_mean: Tensor | None = None,
    feature_std: Tensor | None = None,
    mask: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Batch-Layer Normalization (Ziaee & Cano, Algorithm 1) of a (..., B, n) tensor.

    eqs. 10-13: batch mean/std per feature (eps inside the root, eq. 11) and feature
    mean/std per example; eqs. 14-15 normalize by each; eq. 16 mixes them with weights
    1 - (1/m + eps) and 1/m - eps (m the batch size) and divides by sqrt(d); eq. 17 applies
    gain and bias. Any statistic passed in (population estimates at inference, Algorithm 2
    eqs. 18-21) replaces the current batch's. Returns the output and the statistics used.

    Deviation, on purpose: eq. 13 has no eps in the feature std, which divides by zero for a
    constant vector (the recurrent terms are exactly 0 at t=0 when h0 = c0 = 0); we put eps
    inside that root too.

    ``mask`` ((..., B, 1), 1 valid / 0 padded): the batch of a step is its valid rows only (the
    sequences of a padded batch still running there): the batch statistics pool them and m in
    eq. 16 is their number at that step. The feature statistics are per row and unaffected.
    """
    d = x.shape[-1]
    if batch_mean is None or batch_std is None:  # the batch part couples the rows
        x = share_alike(x, mask)
    if mask is None:
        m = x.shape[-2]
        mb = x.mean(dim=-2, keepdim=True) if batch_mean is None else batch_mean.unsqueeze(-2)
    else:
        mask = mask.to(x.dtype)
        m = mask.sum(dim=-2, keepdim=True).clamp_min(1)
        mb = (x * mask).sum(dim=-2, keepdim=True) / m if batch_mean is None else batch_mean.unsqueeze(-2)
    mf = x.mean(dim=-1, keepdim=True) if feature_mean is None else feature_mean.unsqueeze(-1)
    # eqs. 19 and 21 (False): the current std is taken around whichever mean is in use.
    if batch_std is None and mask is not None:
        sb = torch.sqrt((((x - mb) * mask) ** 2).sum(dim=-2, keepdim=True) / m + eps)
    elif batch_std is None:
        sb = torch.sqrt(((x - mb) ** 2).mean(dim=-2, keepdim=True) + eps)
    else:
        sb = batch_std.unsqueeze(-2)
    if feature_std is None:
        sf = torch.sqrt(((x - mf) ** 2).mean(dim=-1, keepdim=True) + eps)
    else:
        sf = feature_std.unsqueeze(-1)
    current = {
        "batch_mean": mb.squeeze(-2),
        "batch_std": sb.squeeze(-2),
        "feature_mean": mf.squeeze(-1),
        "feature_std": sf.squeeze(-1),
    }
    x_batch = (x - mb) / sb
    x_feature = (x - mf) / sf
    mixed = ((1.0 - (1.0 / m + eps)) * x_batch + (1.0 / m - eps) * x_feature) / d**0.5
    return affine(mixed, weight, bias), current

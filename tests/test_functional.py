"""atnbench.nn.functional against the loop references of tests/reference.py (float64)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from atnbench.nn import functional as F
from atnbench.nn.window import step_moments, windowed_moments

from reference import (
    as_f64,
    ref_atn_bn,
    ref_atn_ln,
    ref_bln,
    ref_bn_steps,
    ref_layer_norm,
    ref_seq_bn,
)



ATOL = 1e-10  # float64: the implementations differ only in summation order (~1e-15)


def seq(T, B, n, seed=0, dtype=torch.float64):
    """A (T, B, n) sequence whose scale and offset change over time, so that which steps
    are in a window visibly matters."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, n, generator=g, dtype=torch.float64)
    scale = torch.rand(T, 1, 1, generator=g, dtype=torch.float64) * 3 + 0.2
    offset = torch.randn(T, 1, 1, generator=g, dtype=torch.float64) * 2
    return (x * scale + offset).to(dtype)


def affine_params(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, generator=g, dtype=torch.float64) + 0.5,
            torch.randn(n, generator=g, dtype=torch.float64))


def close(actual, expected, atol=ATOL):
    np.testing.assert_allclose(as_f64(actual), as_f64(expected), rtol=0, atol=atol)


KS = (1, 2, 3, 7)
TS = (2, 10)  # T < k for k = 3, 7; T > k for every k
BS = (1, 7)


# ----------------------------------------------------------------------------- values

@pytest.mark.parametrize("B", BS)
@pytest.mark.parametrize("use_affine", (False, True))
def test_layer_norm_matches_reference(B, use_affine):
    x = seq(6, B, 5)
    w, b = affine_params(5) if use_affine else (None, None)
    close(F.layer_norm(x, 1e-5, w, b), ref_layer_norm(x, 1e-5, w, b))


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("T", TS)
@pytest.mark.parametrize("B", BS)
def test_atn_ln_matches_reference(k, T, B):
    x = seq(T, B, 5, seed=k * 100 + T + B)
    w, b = affine_params(5)
    close(F.assorted_time_norm(x, k), ref_atn_ln(x, k))
    close(F.assorted_time_norm(x, k, 1e-3, w, b), ref_atn_ln(x, k, 1e-3, w, b))


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("T", TS)
@pytest.mark.parametrize("B", BS)
def test_atn_bn_matches_reference(k, T, B):
    x = seq(T, B, 4, seed=k * 100 + T + B + 1)
    w, b = affine_params(4)
    close(F.assorted_time_batch_norm(x, k), ref_atn_bn(x, k))
    y, mean, var, _ = F.atn_bn_sequence(x, k, 1e-3, w, b, None)
    ry, rmean, rvar = ref_atn_bn(x, k, 1e-3, w, b, return_stats=True)
    close(y, ry)
    close(mean, rmean)
    # the returned variance feeds population estimates: unbiased over the batch x window values
    pooled = np.array([[B * min(t + 1, k)] for t in range(T)], dtype=float)
    close(var, rvar * pooled / np.maximum(pooled - 1, 1))


@pytest.mark.parametrize("B", BS)
def test_batch_norm_steps_matches_reference(B):
    x = seq(5, B, 4)
    w, b = affine_params(4)
    y, mean, var = F.batch_norm_steps(x, 1e-5, w, b)
    ry, rmean, rvar = ref_bn_steps(x, 1e-5, w, b)
    close(y, ry)
    close(mean, rmean)
    close(var, rvar)
    # a single (B, n) step
    y0, m0, v0 = F.batch_norm_steps(x[2], 1e-5, w, b)
    close(y0, ry[2])
    close(m0, rmean[2])
    close(v0, rvar[2])


@pytest.mark.parametrize("B", BS)
@pytest.mark.parametrize("padded", (False, True))
def test_sequence_batch_norm_matches_reference(B, padded):
    x = seq(6, B, 4)
    w, b = affine_params(4)
    lengths = torch.tensor([6, 3, 1, 5, 2, 6, 4][:B]) if padded else None
    if padded and B == 1:
        lengths = torch.tensor([3])
    y, mean, var = F.sequence_batch_norm(x, 1e-5, w, b, lengths)
    ry, rmean, rvar = ref_seq_bn(x, 1e-5, w, b, lengths)
    close(y, ry)
    close(mean, rmean)
    close(var, rvar)


def test_sequence_batch_norm_ignores_padding_values():
    x = seq(6, 3, 4)
    lengths = torch.tensor([6, 2, 4])
    y1, m1, v1 = F.sequence_batch_norm(x, 1e-5, lengths=lengths)
    x2 = x.clone()
    x2[2:, 1] = 1e3  # padded frames of sequence 1
    x2[4:, 2] = -7.0  # padded frames of sequence 2
    y2, m2, v2 = F.sequence_batch_norm(x2, 1e-5, lengths=lengths)
    close(m1, m2)
    close(v1, v2)
    mask = (torch.arange(6).unsqueeze(1) < lengths.unsqueeze(0))
    close(y1[mask], y2[mask])


@pytest.mark.parametrize("B", BS)
@pytest.mark.parametrize("T", (1, 4))
def test_batch_layer_norm_matches_reference(B, T):
    x = seq(T, B, 5)
    w, b = affine_params(5)
    for eps in (1e-4, 1e-2):
        y, stats = F.batch_layer_norm(x, eps, w, b)
        ry, rstats = ref_bln(x, eps, w, b)
        close(y, ry)
        for name in ("batch_mean", "batch_std", "feature_mean", "feature_std"):
            close(stats[name], rstats[name])
    # a single (B, n) step
    y, _ = F.batch_layer_norm(x[0], 1e-4, w, b)
    close(y, ref_bln(x[0], 1e-4, w, b)[0])


def test_batch_layer_norm_constant_vector_is_finite():
    """The reason for the documented eq.-13 deviation: W_h h0 = 0 at t=0 is a constant
    vector; with eps inside the feature-std root BLN stays finite (and matches the ref)."""
    x = torch.zeros(1, 3, 4, dtype=torch.float64)
    y, _ = F.batch_layer_norm(x, 1e-4, None, None)
    assert torch.isfinite(y).all()
    close(y, ref_bln(x, 1e-4)[0])


def test_batch_layer_norm_with_given_statistics():
    """Algorithm 2 (eqs. 18-24): any statistic passed in replaces the current batch's."""
    x = seq(3, 4, 5)
    w, b = affine_params(5)
    g = torch.Generator().manual_seed(5)
    bm = torch.randn(3, 5, generator=g, dtype=torch.float64)
    bs = torch.rand(3, 5, generator=g, dtype=torch.float64) + 0.5
    fm = torch.randn(3, 1, generator=g, dtype=torch.float64)
    fs = torch.rand(3, 1, generator=g, dtype=torch.float64) + 0.5
    given = {"batch_mean": bm, "batch_std": bs, "feature_mean": fm, "feature_std": fs}
    for names in (("batch_mean",), ("batch_std",), ("feature_mean", "feature_std"),
                  ("batch_mean", "batch_std", "feature_mean", "feature_std")):
        kwargs = {name: given[name] for name in names}
        y, _ = F.batch_layer_norm(x, 1e-4, w, b, **kwargs)
        per_step = [{name: as_f64(given[name][t]) for name in names} for t in range(3)]
        close(y, ref_bln(x, 1e-4, w, b, per_step)[0])


# ----------------------------------------------------------------------------- k = 1

@pytest.mark.parametrize("B", BS)
def test_atn_with_k1_is_layer_norm(B):
    x = seq(9, B, 6)
    w, b = affine_params(6)
    close(F.assorted_time_norm(x, 1, 1e-5, w, b), F.layer_norm(x, 1e-5, w, b), atol=1e-12)
    close(F.assorted_time_norm(x, 1), torch.nn.functional.layer_norm(x, (6,)), atol=1e-12)


@pytest.mark.parametrize("B", BS)
def test_atn_bn_with_k1_is_step_batch_norm(B):
    x = seq(9, B, 6)
    w, b = affine_params(6)
    close(F.assorted_time_batch_norm(x, 1, 1e-5, w, b), F.batch_norm_steps(x, 1e-5, w, b)[0], atol=1e-12)


def test_window_longer_than_sequence_is_statistics_over_all_steps():
    """k >= T: step t uses steps 0..t (the shrinking window), the last step uses them all."""
    x = seq(4, 3, 5)
    y = F.assorted_time_norm(x, 50, eps=0.0)
    last = x[-1]
    flat = x.permute(1, 0, 2).reshape(3, -1)  # per example, all steps' features
    mean = flat.mean(dim=1, keepdim=True)
    var = flat.var(dim=1, unbiased=False, keepdim=True)
    close(y[-1], (last - mean) / var.sqrt())
    close(y[0], torch.nn.functional.layer_norm(x[0], (5,), eps=0.0))


@pytest.mark.parametrize("fn", (F.assorted_time_norm, F.assorted_time_batch_norm))
def test_invalid_arguments_are_one_clear_error(fn):
    """Not an IndexError or a torch warning from inside the window code: what is wrong, named."""
    with pytest.raises(ValueError, match="k must be >= 1"):
        fn(seq(3, 2, 4), 0)
    with pytest.raises(TypeError, match="must be an integer, got 2.5"):
        fn(seq(3, 2, 4), 2.5)
    with pytest.raises(TypeError, match="eps must be a number"):
        fn(seq(3, 2, 4), 2, "a")
    with pytest.raises(ValueError, match="at least one step, got T = 0"):
        fn(seq(3, 2, 4)[:0], 2)
    with pytest.raises(TypeError, match="floating-point sequence, got torch.int64"):
        fn(torch.ones(3, 2, 4, dtype=torch.long), 2)
    with pytest.raises(ValueError, match=r"\(T, B, n\) sequence"):
        fn(seq(3, 2, 4)[0], 2)


# ----------------------------------------------------------------------------- gradients

def _leaf(t):
    return t.detach().clone().requires_grad_(True)


@pytest.mark.parametrize("k", (1, 2, 3, 7))
def test_gradcheck_atn_ln(k):
    x, (w, b) = _leaf(seq(5, 2, 3, seed=k)), map(_leaf, affine_params(3))
    assert torch.autograd.gradcheck(lambda x, w, b: F.assorted_time_norm(x, k, 1e-3, w, b), (x, w, b))


@pytest.mark.parametrize("k", (1, 2, 3, 7))
def test_gradcheck_atn_bn(k):
    x, (w, b) = _leaf(seq(5, 3, 2, seed=k)), map(_leaf, affine_params(2))
    assert torch.autograd.gradcheck(lambda x, w, b: F.assorted_time_batch_norm(x, k, 1e-3, w, b), (x, w, b))


def test_gradcheck_batch_norm_steps():
    x, (w, b) = _leaf(seq(3, 4, 3)), map(_leaf, affine_params(3))
    assert torch.autograd.gradcheck(lambda x, w, b: F.batch_norm_steps(x, 1e-3, w, b)[0], (x, w, b))


def test_gradcheck_batch_layer_norm():
    x, (w, b) = _leaf(seq(2, 3, 4)), map(_leaf, affine_params(4))
    assert torch.autograd.gradcheck(lambda x, w, b: F.batch_layer_norm(x, 1e-3, w, b)[0], (x, w, b))


@pytest.mark.parametrize("padded", (False, True))
def test_gradcheck_sequence_batch_norm(padded):
    x, (w, b) = _leaf(seq(4, 3, 3)), map(_leaf, affine_params(3))
    lengths = torch.tensor([4, 2, 3]) if padded else None
    assert torch.autograd.gradcheck(lambda x, w, b: F.sequence_batch_norm(x, 1e-3, w, b, lengths)[0], (x, w, b))


def test_gradcheck_atn_ln_through_window_state():
    """The window state carries gradient: a continued sequence depends on the earlier part."""
    x = _leaf(seq(6, 2, 3))

    def two_part(x):
        y1, hist = F.atn_ln_sequence(x[:2], 3, 1e-3, None, None, None)
        y2, _ = F.atn_ln_sequence(x[2:], 3, 1e-3, None, None, hist)
        return torch.cat([y1, y2])

    assert torch.autograd.gradcheck(two_part, (x,))


# ----------------------------------------------------------------------------- variance guard

OFFSET = 1e4


@pytest.mark.parametrize("k", (1, 3, 7))
def test_variance_guard_large_offset_float32(k):
    """x + 1e4 in float32: ATN must not form E[a^2] - mean^2 in float32 (that would lose
    ~1e8 * 6e-8 = 6 units of a variance of ~1, i.e. everything, and can go negative -> NaN).

    Tolerance for float32 vs float64 (both fed the *same* float32-rounded input): the
    unavoidable error is holding the ~1e4 window mean in float32, half an ulp with
    ulp(1e4) = 2^-10 ~ 9.8e-4, so a - mean carries ~5e-4 absolute error, divided by the
    window std. We allow 4 ulp(1e4) / std_min (~4e-3 here on outputs of size ~1): a relative
    error of order 2^-24 * offset / std, i.e. float32 precision relative to the
    offset-to-spread ratio (a naive float32 E[a^2] - mean^2 is off by ~600%).
    """
    g = torch.Generator().manual_seed(k)
    x32 = torch.randn(12, 16, 16, generator=g).float() + OFFSET
    x64 = x32.double()
    ulp = float(np.spacing(np.float32(OFFSET)))
    for fn, ref, dim in ((F.assorted_time_norm, ref_atn_ln, 2), (F.assorted_time_batch_norm, ref_atn_bn, 1)):
        y32, y64 = fn(x32, k), fn(x64, k)
        assert y32.dtype == torch.float32
        assert torch.isfinite(y32).all()
        # per-(step, row) std: a lower bound of every window std (pooled var >= min step var)
        var_min = x64.var(dim=dim, unbiased=False).min().item()
        tol32 = 4 * ulp / var_min**0.5
        err32 = (y32.double() - y64).abs().max().item()
        assert err32 < tol32, (err32, tol32)
        # the float64 path against the loop reference: the power sums are shifted by the first
        # step's mean before they are accumulated, so their rounding scales with the spread of
        # the data, not with offset^2; without the shift this error was ~T * 2^-52 * offset^2.
        tol64 = 1e-9
        err64 = np.abs(as_f64(y64) - ref(x64, k)).max()
        assert err64 < tol64, (err64, tol64)


def test_variance_never_negative():
    """Nearly constant windows far from 0: E[a^2] - mean^2 rounds to about +-1e-8 while the
    true variance is ~1e-18; the clamp must keep it >= 0 (and the output finite)."""
    g = torch.Generator().manual_seed(3)
    for trial in range(20):
        base = float(torch.rand((), generator=g)) * 1e5 + 1e3
        x = base + 1e-9 * torch.randn(8, 3, 5, generator=g, dtype=torch.float64)
        for k in (1, 2, 5):
            _, var, _, _ = windowed_moments(step_moments(x, dim=-1), k, None, x.dtype)
            assert (var >= 0).all()
            _, _, var_bn, _ = F.atn_bn_sequence(x, k, 1e-5, None, None, None)
            assert (var_bn >= 0).all()
            assert torch.isfinite(F.assorted_time_norm(x, k)).all()
            assert torch.isfinite(F.assorted_time_batch_norm(x, k)).all()
    # exactly constant: variance exactly 0, output exactly 0 (not NaN) with eps > 0
    x = torch.full((5, 2, 4), 12345.678, dtype=torch.float64)
    assert (F.assorted_time_norm(x, 3) == 0).all()
    assert (F.assorted_time_norm(x.float(), 3) == 0).all()

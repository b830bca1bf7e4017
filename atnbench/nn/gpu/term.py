"""One normalized term of one time step on a tile, in Triton: forward and backward.

The Triton twin of ``csrc/norm_rnn.cpp``'s ``norm_forward`` / ``norm_backward`` (read that file and
``fastpath_rnn.py`` for the math): the same kinds (``none``, ``row``: LN/ATN-LN, ``col``: BN/ATN-BN,
``bln``, ``given``), the same per-step records ``st`` (m + T, S, 7) in float64
(m_j, v_j, window mean, r = 1/sqrt(var + eps), flag (1 clamped, 2 ATN-BN's flat window), var, shift) and BLN records ``bl`` (T,
2n + 2B), so the Python side (running statistics, window states) is shared with the C++ path.

A tile is a (BB rows, BQ gates, BH hidden units) block of a (B, NQ * H) term: feature ``q * H +
j``. ``rows`` (BB,) and ``feats`` (BQ, BH) index it, ``rmask``/``fmask`` mark what exists. A
``row`` term needs every feature of its rows in the tile, a ``col`` term every row of its
features, ``bln`` both (the launchers choose tiles so).

ATN's window is O(1) per step for any k: running totals per slot (a row for ``row``, a feature
for ``col``) of the shifted power sums, the step leaving the window subtracted from its record.
State that a step reads and rewrites (the totals, the backward's reverse running sums, the
gain/shift gradient accumulators) lives in two buffers used alternately by step parity: a program
never reads what another thread of it may already have overwritten in the same step.
"""

import triton
import triton.language as tl

NONE = tl.constexpr(0)
ROW = tl.constexpr(1)
COL = tl.constexpr(2)
BLN = tl.constexpr(3)
GIVEN = tl.constexpr(4)
SW = tl.constexpr(7)  # fields of a per-step, per-slot record


@triton.jit
def sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def tanh(x):
    # exp of a non-positive argument never overflows; absolute error of a few ulp of 1
    e = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -y, y)


@triton.jit
def row_sum(x):
    """(BB, BQ, BH) -> (BB,): over every feature of each row."""
    return tl.sum(tl.sum(x, axis=2), axis=1)


@triton.jit
def col_sum(x):
    """(BB, BQ, BH) -> (BQ, BH): over the rows, per feature."""
    return tl.sum(x, axis=0)


@triton.jit
def parity(step):
    """The buffer a step reads (``step % 2``) and the one it writes, as offsets of 0 or 1."""
    return step % 2, (step + 1) % 2


@triton.jit
def window_push(mu, v, slot, smask, t, j, k, eps, S, st, ref, tot):
    """Record step j's moments (mu, v) of each slot and return the window's (mean, r) in float64.

    ``tot`` (2, 2, S): the running totals (s1, s2) read from parity t % 2, written to the other.
    k = 1 (LN, BN) takes the step's own moments, as the C++ does.
    """
    mu = mu.to(tl.float64)
    v = v.to(tl.float64)
    p_in, p_out = parity(t)
    e = st + (j * S + slot) * SW
    tl.store(e, mu, mask=smask)
    tl.store(e + 1, v, mask=smask)
    jj = slot * 0 + j  # the scalar conditions as tensors of the slots' shape, for masks
    first = jj == 0
    refv = tl.where(first, mu, tl.load(ref + slot, mask=smask, other=0.0))
    tl.store(ref + slot, refv, mask=smask & first & (jj * 0 + k > 1))
    d = mu - refv
    s1 = tl.load(tot + (p_in * 2) * S + slot, mask=smask, other=0.0) + d
    s2 = tl.load(tot + (p_in * 2 + 1) * S + slot, mask=smask, other=0.0) + (v + d * d)
    leaving = jj >= k
    old = st + ((j - k) * S + slot) * SW
    old_m = tl.load(old, mask=smask & leaving, other=0.0)
    old_v = tl.load(old + 1, mask=smask & leaving, other=0.0)
    d_old = old_m - refv
    s1 = tl.where(leaving, s1 - d_old, s1)
    s2 = tl.where(leaving, s2 - (old_v + d_old * d_old), s2)
    tl.store(tot + (p_out * 2) * S + slot, s1, mask=smask)
    tl.store(tot + (p_out * 2 + 1) * S + slot, s2, mask=smask)
    w = tl.minimum(k, j + 1) + tl.full((), 0.0, tl.float64)
    shift = s1 / w
    var = s2 / w - shift * shift
    clamped = var < 0.0
    var = tl.where(clamped, 0.0, var)
    mean = refv + shift
    single = k == 1
    mean = tl.where(single, mu, mean)
    var = tl.where(single, v, var)
    shift = tl.where(single, 0.0, shift)
    clamped = clamped & (k > 1)
    r = 1.0 / tl.sqrt(var + eps)
    tl.store(e + 2, mean, mask=smask)
    tl.store(e + 3, r, mask=smask)
    tl.store(e + 4, tl.where(clamped, 1.0, 0.0), mask=smask)
    tl.store(e + 5, var, mask=smask)
    tl.store(e + 6, shift, mask=smask)
    return mean, r


@triton.jit
def window_adjoint(sg, sgx, slot, smask, t, j, step, Tn, L, m, k, S, st, ref, xs, rs, gout):
    """(dm_j, dv_j) of each slot at step t from sg = sum g^ and sgx = sum g^ xhat (g^ = dy * gain),
    with what later steps' windows send back (reverse running sums over k steps, ``rs`` (2, 2, S)
    by the parity of ``step``, the number of steps already gone back) and the returned window
    state's gradient ``gout`` (L, S, 2) where this step is in it."""
    sg = sg.to(tl.float64)
    sgx = sgx.to(tl.float64)
    p_in, p_out = parity(step)
    e = st + (j * S + slot) * SW
    r = tl.load(e + 3, mask=smask, other=0.0)
    clamped = tl.load(e + 4, mask=smask, other=0.0) != 0.0
    shift = tl.load(e + 6, mask=smask, other=0.0)
    mu = tl.load(e, mask=smask, other=0.0)
    dmean = -r * sg
    dvar = tl.where(clamped, 0.0, -0.5 * r * r * sgx)
    w = tl.minimum(k, j + 1) + tl.full((), 0.0, tl.float64)
    xa = (dmean - 2.0 * dvar * shift) / w
    xb = dvar / w
    x = xs + (t * S + slot) * 2
    tl.store(x, xa, mask=smask)
    tl.store(x + 1, xb, mask=smask)
    ra = tl.load(rs + (p_in * 2) * S + slot, mask=smask, other=0.0) + xa
    rb = tl.load(rs + (p_in * 2 + 1) * S + slot, mask=smask, other=0.0) + xb
    jj = slot * 0 + j
    later = jj - j + t + k <= Tn - 1
    xo = xs + ((t + k) * S + slot) * 2
    ra = tl.where(later, ra - tl.load(xo, mask=smask & later, other=0.0), ra)
    rb = tl.where(later, rb - tl.load(xo + 1, mask=smask & later, other=0.0), rb)
    tl.store(rs + (p_out * 2) * S + slot, ra, mask=smask)
    tl.store(rs + (p_out * 2 + 1) * S + slot, rb, mask=smask)
    refv = tl.load(ref + slot, mask=smask, other=0.0)
    single = k == 1
    dm = tl.where(single, dmean, ra + 2.0 * (mu - refv) * rb)
    dv = tl.where(single, dvar, rb)
    if gout is not None:
        first_out = m + Tn - L
        held = jj >= first_out
        g = gout + ((j - first_out) * S + slot) * 2
        dm += tl.load(g, mask=smask & held, other=0.0)
        dv += tl.load(g + 1, mask=smask & held, other=0.0)
    return dm, dv


@triton.jit
def term_forward(a, rows, feats, rmask, fmask, t, m, B, n, k, eps_ptr, gain, shift, st, ref, tot, gmean, grstd,
                 bmean, bstd, fmean, fstd, bl, KIND: tl.constexpr):
    """y = N(a) of step t (this call's step; m window steps came before it)."""
    m3 = rmask[:, None, None] & fmask[None, :, :]
    j = m + t
    dt = a.dtype
    if KIND == ROW:
        eps = tl.load(eps_ptr)
        x = tl.where(m3, a, 0.0)
        mu = row_sum(x) / n
        d = tl.where(m3, a - mu[:, None, None], 0.0)
        v = row_sum(d * d) / n
        mean, r = window_push(mu, v, rows, rmask, t, j, k, eps, B, st, ref, tot)
        y = (a - mean.to(dt)[:, None, None]) * r.to(dt)[:, None, None]
    elif KIND == COL:
        eps = tl.load(eps_ptr)
        x = tl.where(m3, a, 0.0)
        mu = col_sum(x) / B
        d = tl.where(m3, a - mu[None, :, :], 0.0)
        v = col_sum(d * d) / B
        mean, r = window_push(mu, v, feats, fmask, t, j, k, eps, n, st, ref, tot)
        if k > 1:
            mark_flat(a, m3, mu, v, feats, fmask, j, k, n, st)
        y = (a - mean.to(dt)[None, :, :]) * r.to(dt)[None, :, :]
    elif KIND == GIVEN:
        mt = tl.load(gmean + t * n + feats, mask=fmask, other=0.0)
        rt = tl.load(grstd + t * n + feats, mask=fmask, other=0.0)
        y = (a - mt[None, :, :]) * rt[None, :, :]
    elif KIND == BLN:
        y = bln_forward(a, rows, feats, rmask, fmask, m3, t, B, n, eps_ptr, bmean, bstd, fmean, fstd, bl)
    else:
        y = a
    if KIND != NONE:
        if gain is not None:
            y = y * tl.load(gain + feats, mask=fmask, other=0.0)[None, :, :]
        if shift is not None:
            y = y + tl.load(shift + feats, mask=fmask, other=0.0)[None, :, :]
    return y


@triton.jit
def mark_flat(a, m3, mu, v, feats, fmask, j, k, n, st):
    """ATN-BN's flat windows (csrc ``mark_flat``, ``functional.cut_flat`` says why): record field 4
    = 2 where step j's rows are all equal and every earlier step of its window has this step's
    moments (mu, v) bit for bit; a tile holds every row of its features."""
    same = tl.max(tl.where(m3, a, float("-inf")), axis=0) == tl.min(tl.where(m3, a, float("inf")), axis=0)
    mu = mu.to(tl.float64)
    v = v.to(tl.float64)
    flat = same & fmask
    for p in range(tl.maximum(j - k + 1, 0), j):
        o = st + (p * n + feats) * SW
        flat = flat & (tl.load(o, mask=fmask, other=0.0) == mu) & (tl.load(o + 1, mask=fmask, other=0.0) == v)
    tl.store(st + (j * n + feats) * SW + 4, tl.where(flat, 2.0, 0.0).to(tl.float64), mask=flat)


@triton.jit
def bln_forward(a, rows, feats, rmask, fmask, m3, t, B, n, eps_ptr, bmean, bstd, fmean, fstd, bl):
    """BLN (Ziaee & Cano, Algorithm 1), any of its four statistics given, without gain/shift."""
    dt = a.dtype
    eps64 = tl.load(eps_ptr)
    eps = eps64.to(dt)
    x = tl.where(m3, a, 0.0)
    if bmean is None:
        mb = col_sum(x) / B
    else:
        mb = tl.load(bmean + t * n + feats, mask=fmask, other=0.0)
    if bstd is None:
        db = tl.where(m3, a - mb[None, :, :], 0.0)
        sb = tl.sqrt(col_sum(db * db) / B + eps)
    else:
        sb = tl.load(bstd + t * n + feats, mask=fmask, other=1.0)
    if fmean is None:
        mf = row_sum(x) / n
    else:
        mf = tl.load(fmean + t + rows * 0, mask=rmask, other=0.0)
    if fstd is None:
        df = tl.where(m3, a - mf[:, None, None], 0.0)
        sf = tl.sqrt(row_sum(df * df) / n + eps)
    else:
        sf = tl.load(fstd + t + rows * 0, mask=rmask, other=1.0)
    rec = bl + t * (2 * n + 2 * B)
    tl.store(rec + feats, mb.to(tl.float64), mask=fmask)
    tl.store(rec + n + feats, sb.to(tl.float64), mask=fmask)
    tl.store(rec + 2 * n + rows, mf.to(tl.float64), mask=rmask)
    tl.store(rec + 2 * n + B + rows, sf.to(tl.float64), mask=rmask)
    ca, cf = bln_weights(B, n, eps64)
    ca = ca.to(dt)
    cf = cf.to(dt)
    isb = ca / tl.where(fmask, sb, 1.0)
    isf = cf / tl.where(rmask, sf, 1.0)
    return (a - mb[None, :, :]) * isb[None, :, :] + (a - mf[:, None, None]) * isf[:, None, None]


@triton.jit
def bln_weights(B, n, eps):
    """eq. 16's mixing weights over sqrt(d), in float64: (1 - (1/m + eps)) / sqrt(n), (1/m - eps) / sqrt(n)."""
    zero = tl.full((), 0.0, tl.float64)  # + B: a float64 even where Triton made B (= 1) a constant
    inv_b = 1.0 / (zero + B)
    root = tl.sqrt(zero + n)
    return (1.0 - (inv_b + eps)) / root, (inv_b - eps) / root


@triton.jit
def term_backward(a, dy, rows, feats, rmask, fmask, t, step, Tn, m, B, n, k, eps_ptr, gain, st, ref, xs, rs, gout,
                  gmean, grstd, bmean, bstd, fmean, fstd, bl, KIND: tl.constexpr):
    """(da, dy * xhat) of step t given dy = dL/dN(a): the input's gradient, including what later
    steps' windows send back, and the gain gradient's contribution of each element."""
    m3 = rmask[:, None, None] & fmask[None, :, :]
    j = m + t
    dt = a.dtype
    dy = tl.where(m3, dy, 0.0)
    L = tl.minimum(k - 1, m + Tn)
    if gain is not None:
        g = tl.load(gain + feats, mask=fmask, other=0.0)[None, :, :]
    else:
        g = tl.full((1, 1, 1), 1.0, dt)
    if KIND == ROW:
        e = st + (j * B + rows) * SW
        mt = tl.load(e + 2, mask=rmask, other=0.0).to(dt)[:, None, None]
        rt = tl.load(e + 3, mask=rmask, other=0.0).to(dt)[:, None, None]
        mu = tl.load(e, mask=rmask, other=0.0).to(dt)[:, None, None]
        xh = (a - mt) * rt
        gh = dy * g
        dm, dv = window_adjoint(row_sum(gh), row_sum(gh * xh), rows, rmask, t, j, step, Tn, L, m, k, B, st, ref,
                                xs, rs, gout)
        c1 = (dm / n).to(dt)[:, None, None]
        c2 = (2.0 * dv / n).to(dt)[:, None, None]
        da = gh * rt + c1 + c2 * (a - mu)
        dgx = dy * xh
    elif KIND == COL:
        e = st + (j * n + feats) * SW
        mt = tl.load(e + 2, mask=fmask, other=0.0).to(dt)[None, :, :]
        rt = tl.load(e + 3, mask=fmask, other=0.0).to(dt)[None, :, :]
        mu = tl.load(e, mask=fmask, other=0.0).to(dt)[None, :, :]
        xh = (a - mt) * rt
        gi = tl.sum(g, axis=0)  # (BQ, BH)
        flat = tl.load(e + 4, mask=fmask, other=0.0) == 2.0  # mark_flat: nothing passes back
        dm, dv = window_adjoint(tl.where(flat, 0.0, gi * col_sum(dy)), tl.where(flat, 0.0, gi * col_sum(dy * xh)),
                                feats, fmask, t, j, step, Tn, L, m, k, n, st, ref, xs, rs, gout)
        c1 = (dm / B).to(dt)[None, :, :]
        c2 = (2.0 * dv / B).to(dt)[None, :, :]
        direct = tl.where(flat[None, :, :], 0.0, dy * (g * rt))
        da = share_alike(a, direct + c1 + c2 * (a - mu), m3, B)
        dgx = dy * xh
    elif KIND == GIVEN:
        mt = tl.load(gmean + t * n + feats, mask=fmask, other=0.0)[None, :, :]
        rt = tl.load(grstd + t * n + feats, mask=fmask, other=0.0)[None, :, :]
        dgx = dy * ((a - mt) * rt)
        da = dy * g * rt
    elif KIND == BLN:
        da, dgx = bln_backward(a, dy, g, rows, feats, rmask, fmask, m3, t, B, n, eps_ptr, bmean, bstd, fmean, fstd,
                               bl)
        if bmean is None or bstd is None:  # the batch part couples the rows
            da = share_alike(a, da, m3, B)
    else:
        da = dy
        dgx = dy
    return da, dgx


@triton.jit
def share_alike(a, da, m3, B):
    """Each feature whose value is the same in every row gets, in every row, the mean of its rows'
    gradients (``functional.share_alike`` says why); a tile holds every row of its features."""
    same = tl.max(tl.where(m3, a, float("-inf")), axis=0) == tl.min(tl.where(m3, a, float("inf")), axis=0)
    mean = col_sum(tl.where(m3, da, 0.0)) / B
    return tl.where(same[None, :, :], mean[None, :, :].to(da.dtype), da)


@triton.jit
def bln_backward(a, dy, g, rows, feats, rmask, fmask, m3, t, B, n, eps_ptr, bmean, bstd, fmean, fstd, bl):
    """Each part is c (a - mu) / sigma; with w = c g^ and d = a - mu over the N values it reduces:
    dd = w / sigma + dsigma d / (N sigma), dsigma = -sum(w d) / sigma^2 (0 if sigma is given),
    da = dd - mean(dd) (dd if mu is given)."""
    dt = a.dtype
    ca, cf = bln_weights(B, n, tl.load(eps_ptr))
    ca = ca.to(dt)
    cf = cf.to(dt)
    rec = bl + t * (2 * n + 2 * B)
    mb = tl.load(rec + feats, mask=fmask, other=0.0).to(dt)[None, :, :]
    isb = 1.0 / tl.load(rec + n + feats, mask=fmask, other=1.0).to(dt)[None, :, :]
    mf = tl.load(rec + 2 * n + rows, mask=rmask, other=0.0).to(dt)[:, None, None]
    isf = 1.0 / tl.load(rec + 2 * n + B + rows, mask=rmask, other=1.0).to(dt)[:, None, None]
    x = a
    dgx = dy * (ca * (x - mb) * isb + cf * (x - mf) * isf)
    gh = dy * g
    # batch part, per feature
    w = gh * ca
    d = tl.where(m3, x - mb, 0.0)
    coef, mean_dd = _bln_part(col_sum(w * d)[None, :, :], col_sum(w)[None, :, :], col_sum(d)[None, :, :], isb, B,
                              bmean is None, bstd is None)
    da = w * isb + coef * (x - mb) - mean_dd
    # feature part, per row
    w = gh * cf
    d = tl.where(m3, x - mf, 0.0)
    coef, mean_dd = _bln_part(row_sum(w * d)[:, None, None], row_sum(w)[:, None, None], row_sum(d)[:, None, None],
                              isf, n, fmean is None, fstd is None)
    da += w * isf + coef * (x - mf) - mean_dd
    return da, dgx


@triton.jit
def _bln_part(P, Q, R, inv, N, MEAN: tl.constexpr, STD: tl.constexpr):
    """dsigma's coefficient and mean(dd) of one BLN part from P = sum w d, Q = sum w, R = sum d
    (``MEAN``/``STD``: the statistic is the current batch's, not given)."""
    coef = -P * inv * inv * inv / N if STD else tl.zeros_like(P)
    mean_dd = (Q * inv + coef * R) / N if MEAN else tl.zeros_like(Q)
    return coef, mean_dd


@triton.jit
def accumulate(acc, step, rows, feats, m3, n, B, dgx, dy):
    """Add this step's gain (dy * xhat) and shift (dy) gradients of each element to ``acc``
    (2, 2, B, n): read from the parity of ``step``, written to the other; summed over rows at the end."""
    p_in, p_out = parity(step)
    at = rows[:, None, None] * n + feats[None, :, :]
    gain_in = tl.load(acc + (p_in * 2) * B * n + at, mask=m3, other=0.0)
    shift_in = tl.load(acc + (p_in * 2 + 1) * B * n + at, mask=m3, other=0.0)
    tl.store(acc + (p_out * 2) * B * n + at, gain_in + dgx, mask=m3)
    tl.store(acc + (p_out * 2 + 1) * B * n + at, shift_in + dy, mask=m3)

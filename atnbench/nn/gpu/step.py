"""One time step of a normalized LSTM or GRU layer as one fused Triton kernel, forward and backward.

Per step the recurrence is one GEMM (``W_h h_{t-1} + b_h``, cuBLAS through torch, written by the
caller into ``ah``) and one of these kernels: the hidden term's normalization (statistics, ATN
window), the gates, the state update and, for the LSTM, the cell term's normalization and the
output; the backward kernel does the same in reverse and leaves ``dA_h`` for the GEMM that gives
``dh_{t-1}``. The math is ``csrc/norm_rnn.cpp``'s ``forward_impl`` / ``backward_impl`` step by step.

A program owns a (BB rows, BH hidden units) tile and the 4 (LSTM) or 3 (GRU) gates of those
units; ``term.py`` says which tiles a kind needs. The two terms' arguments follow each other in the
order of ``ops.TermBuffers.forward_args`` / ``backward_args``.
"""

import triton
import triton.language as tl

from atnbench.nn.gpu.term import accumulate, sigmoid, tanh, term_backward, term_forward


@triton.jit
def _tile(B, H, NQ: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr):
    rows = tl.program_id(0) * BB + tl.arange(0, BB)
    hid = tl.program_id(1) * BH + tl.arange(0, BH)
    q = tl.arange(0, 4)
    feats = q[:, None] * H + hid[None, :]
    rmask = rows < B
    fmask = (q < NQ)[:, None] & (hid < H)[None, :]
    return rows, hid, q, feats, rmask, fmask


@triton.jit
def _gate(x, q3, which: tl.constexpr):
    """Gate ``which`` of a (BB, 4, BH) tile as (BB, BH)."""
    return tl.sum(tl.where(q3 == which, x, 0.0), axis=1)


@triton.jit
def _incoming(dh_in, dout, rows, hid, rmask, H, G):
    """(B, H) and (B, G) offsets of the tile's units, their mask, and dL/dh_t: what the step
    above sent back (``dh_in``) plus the output's own gradient (``dout``, None: none)."""
    at2 = rows[:, None] * H + hid[None, :]
    m2 = rmask[:, None] & (hid < H)[None, :]
    dh = tl.load(dh_in + at2, mask=m2, other=0.0)
    if dout is not None:
        dh += tl.load(dout + at2, mask=m2, other=0.0)
    return at2, m2, rows[:, None] * G + hid[None, :], dh


@triton.jit
def lstm_forward(xn, ah, cprev, c, act, ty, h, t, B, H,
                 hm, hk, heps, hgain, hshift, hst, href, htot, hgmean, hgrstd, hbmean, hbstd, hfmean, hfstd, hbl,
                 cm, ck, ceps, cgain, cshift, cst, cref, ctot, cgmean, cgrstd, cbmean, cbstd, cfmean, cfstd, cbl,
                 KIND_H: tl.constexpr, KIND_C: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr):
    """z = xn_t + N_h(ah_t); c_t = sig(f) c_{t-1} + sig(i) tanh(g); h_t = sig(o) tanh(N_c(c_t))."""
    rows, hid, q, feats, rmask, fmask = _tile(B, H, 4, BB, BH)
    G = 4 * H
    m3 = rmask[:, None, None] & fmask[None, :, :]
    at = rows[:, None, None] * G + feats[None, :, :]
    a = tl.load(ah + at, mask=m3, other=0.0)
    z = tl.load(xn + at, mask=m3, other=0.0) + term_forward(
        a, rows, feats, rmask, fmask, t, hm, B, G, hk, heps, hgain, hshift, hst, href, htot, hgmean, hgrstd, hbmean,
        hbstd, hfmean, hfstd, hbl, KIND_H)
    q3 = q[None, :, None]
    gates = tl.where(q3 == 2, tanh(z), sigmoid(z))
    tl.store(act + at, gates, mask=m3)
    at2 = rows[:, None] * H + hid[None, :]
    m2 = rmask[:, None] & (hid < H)[None, :]
    c_t = _gate(gates, q3, 1) * tl.load(cprev + at2, mask=m2, other=0.0) + _gate(gates, q3, 0) * _gate(gates, q3, 2)
    tl.store(c + at2, c_t, mask=m2)
    cfeats = hid[None, :]
    cfmask = (hid < H)[None, :]
    yc = term_forward(c_t[:, None, :], rows, cfeats, rmask, cfmask, t, cm, B, H, ck, ceps, cgain, cshift, cst, cref,
                      ctot, cgmean, cgrstd, cbmean, cbstd, cfmean, cfstd, cbl, KIND_C)
    tc = tanh(tl.sum(yc, axis=1))
    tl.store(ty + at2, tc, mask=m2)
    tl.store(h + at2, _gate(gates, q3, 3) * tc, mask=m2)


@triton.jit
def gru_forward(xn, ah, hprev, hn, act, h, t, B, H,
                hm, hk, heps, hgain, hshift, hst, href, htot, hgmean, hgrstd, hbmean, hbstd, hfmean, hfstd, hbl,
                KIND_H: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr):
    """a_h = N_h(ah_t); r, z = sig(xn + a_h); n = tanh(xn_n + r a_h^n); h_t = n + z (h_{t-1} - n)."""
    rows, hid, q, feats, rmask, fmask = _tile(B, H, 3, BB, BH)
    G = 3 * H
    m3 = rmask[:, None, None] & fmask[None, :, :]
    at = rows[:, None, None] * G + feats[None, :, :]
    a = tl.load(ah + at, mask=m3, other=0.0)
    nh = term_forward(a, rows, feats, rmask, fmask, t, hm, B, G, hk, heps, hgain, hshift, hst, href, htot, hgmean,
                      hgrstd, hbmean, hbstd, hfmean, hfstd, hbl, KIND_H)
    tl.store(hn + at, nh, mask=m3)
    x = tl.load(xn + at, mask=m3, other=0.0)
    q3 = q[None, :, None]
    rz = sigmoid(x + nh)
    r = _gate(rz, q3, 0)
    zg = _gate(rz, q3, 1)
    n = tanh(_gate(x, q3, 2) + r * _gate(nh, q3, 2))
    at2 = rows[:, None] * H + hid[None, :]
    m2 = rmask[:, None] & (hid < H)[None, :]
    row_at = rows[:, None] * G + hid[None, :]
    tl.store(act + row_at, r, mask=m2)
    tl.store(act + row_at + H, zg, mask=m2)
    tl.store(act + row_at + 2 * H, n, mask=m2)
    hp = tl.load(hprev + at2, mask=m2, other=0.0)
    tl.store(h + at2, n + zg * (hp - n), mask=m2)


@triton.jit
def lstm_backward(dh_in, dout, act, ty, c, cprev, dc, ah, dxn, dah, t, step, Tn, B, H,
                  hm, hk, heps, hgain, hst, href, hxs, hrs, hgout, hgmean, hgrstd, hbmean, hbstd, hfmean, hfstd, hbl,
                  hacc,
                  cm, ck, ceps, cgain, cst, cref, cxs, crs, cgout, cgmean, cgrstd, cbmean, cbstd, cfmean, cfstd, cbl,
                  cacc,
                  KIND_H: tl.constexpr, KIND_C: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr):
    """Step t in reverse (``step`` steps already done): dxn_t = dz, dah_t = dN_h/dah^T dz, and dc
    carried (``dc`` (2, B, H) by the parity of ``step``); dh_{t-1} = dah_t W_hh is the caller's GEMM."""
    rows, hid, q, feats, rmask, fmask = _tile(B, H, 4, BB, BH)
    G = 4 * H
    m3 = rmask[:, None, None] & fmask[None, :, :]
    at2, m2, row_at, dh = _incoming(dh_in, dout, rows, hid, rmask, H, G)
    ig = tl.load(act + row_at, mask=m2, other=0.0)
    fg = tl.load(act + row_at + H, mask=m2, other=0.0)
    gg = tl.load(act + row_at + 2 * H, mask=m2, other=0.0)
    og = tl.load(act + row_at + 3 * H, mask=m2, other=0.0)
    tc = tl.load(ty + at2, mask=m2, other=0.0)
    c_t = tl.load(c + at2, mask=m2, other=0.0)
    dyc = dh * og * (1.0 - tc * tc)
    cfeats = hid[None, :]
    cfmask = (hid < H)[None, :]
    dcn, dgx = term_backward(c_t[:, None, :], dyc[:, None, :], rows, cfeats, rmask, cfmask, t, step, Tn, cm, B, H, ck,
                             ceps, cgain, cst, cref, cxs, crs, cgout, cgmean, cgrstd, cbmean, cbstd, cfmean, cfstd,
                             cbl, KIND_C)
    if cacc is not None:
        accumulate(cacc, step, rows, cfeats, m2[:, None, :], H, B, dgx, dyc[:, None, :])
    p_in = step % 2
    p_out = (step + 1) % 2
    dct = tl.load(dc + p_in * B * H + at2, mask=m2, other=0.0) + tl.sum(dcn, axis=1)
    cp = tl.load(cprev + at2, mask=m2, other=0.0)
    tl.store(dc + p_out * B * H + at2, dct * fg, mask=m2)
    q3 = q[None, :, None]
    dz = tl.where(q3 == 0, (dct * gg * ig * (1.0 - ig))[:, None, :],
                  tl.where(q3 == 1, (dct * cp * fg * (1.0 - fg))[:, None, :],
                           tl.where(q3 == 2, (dct * ig * (1.0 - gg * gg))[:, None, :],
                                    (dh * tc * og * (1.0 - og))[:, None, :])))
    at = rows[:, None, None] * G + feats[None, :, :]
    tl.store(dxn + at, dz, mask=m3)
    a = tl.load(ah + at, mask=m3, other=0.0)
    da, dgx = term_backward(a, dz, rows, feats, rmask, fmask, t, step, Tn, hm, B, G, hk, heps, hgain, hst, href, hxs,
                            hrs, hgout, hgmean, hgrstd, hbmean, hbstd, hfmean, hfstd, hbl, KIND_H)
    tl.store(dah + at, da, mask=m3)
    if hacc is not None:
        accumulate(hacc, step, rows, feats, m3, G, B, dgx, dz)


@triton.jit
def gru_backward(dh_in, dout, act, hn, hprev, ah, dxn, dah, dh_direct, t, step, Tn, B, H,
                 hm, hk, heps, hgain, hst, href, hxs, hrs, hgout, hgmean, hgrstd, hbmean, hbstd, hfmean, hfstd, hbl,
                 hacc,
                 KIND_H: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr):
    """Step t in reverse: dxn_t, dah_t and dh z (``dh_direct``); dh_{t-1} = dh z + dah_t W_hh is
    the caller's GEMM."""
    rows, hid, q, feats, rmask, fmask = _tile(B, H, 3, BB, BH)
    G = 3 * H
    m3 = rmask[:, None, None] & fmask[None, :, :]
    at2, m2, row_at, dh = _incoming(dh_in, dout, rows, hid, rmask, H, G)
    r = tl.load(act + row_at, mask=m2, other=0.0)
    zg = tl.load(act + row_at + H, mask=m2, other=0.0)
    n = tl.load(act + row_at + 2 * H, mask=m2, other=0.0)
    hnn = tl.load(hn + row_at + 2 * H, mask=m2, other=0.0)
    hp = tl.load(hprev + at2, mask=m2, other=0.0)
    dn = dh * (1.0 - zg) * (1.0 - n * n)
    dzz = dh * (hp - n) * zg * (1.0 - zg)
    dr = dn * hnn * r * (1.0 - r)
    q3 = q[None, :, None]
    at = rows[:, None, None] * G + feats[None, :, :]
    tl.store(dxn + at, tl.where(q3 == 0, dr[:, None, :], tl.where(q3 == 1, dzz[:, None, :], dn[:, None, :])),
             mask=m3)
    e = tl.where(q3 == 0, dr[:, None, :], tl.where(q3 == 1, dzz[:, None, :], (dn * r)[:, None, :]))
    a = tl.load(ah + at, mask=m3, other=0.0)
    da, dgx = term_backward(a, e, rows, feats, rmask, fmask, t, step, Tn, hm, B, G, hk, heps, hgain, hst, href, hxs,
                            hrs, hgout, hgmean, hgrstd, hbmean, hbstd, hfmean, hfstd, hbl, KIND_H)
    tl.store(dah + at, da, mask=m3)
    if hacc is not None:
        accumulate(hacc, step, rows, feats, m3, G, B, dgx, tl.where(m3, e, 0.0))
    tl.store(dh_direct + at2, dh * zg, mask=m2)

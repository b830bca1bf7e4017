"""A normalized term over a whole sequence in Triton: the input term, and the window state's gradient.

``forward`` / ``backward``: ``N(a)`` of every step of a (T, B, n) block with no recurrence, the
twin of ``csrc/norm_rnn.cpp``'s ``norm_seq_forward`` / ``_backward`` (same records). Steps are
independent unless the norm has a window (ATN, k > 1): then a program runs its tile through all
steps in order (``chunk`` = T), otherwise every step is a program of its own (``chunk`` = 1).
A program that runs several steps waits for all its threads at the end of each (a barrier), since
a step reads what an earlier one wrote (the window's leaving record, the running totals).

``history_gradient``: the gradient of the window state passed in: the m steps before the call
receive what the first k - 1 steps' windows send back (the reverse running sums continued).
"""

import triton
import triton.language as tl

from atnbench.nn.gpu.term import SW, term_backward, term_forward


@triton.jit
def _tile(B, n, BB: tl.constexpr, BH: tl.constexpr):
    rows = tl.program_id(1) * BB + tl.arange(0, BB)
    cols = tl.program_id(2) * BH + tl.arange(0, BH)
    feats = cols[None, :]
    return rows, feats, rows < B, feats < n


@triton.jit
def forward(a, y, chunk, B, n, m, k, eps, gain, shift, st, ref, tot, gmean, grstd, bmean, bstd, fmean, fstd, bl,
            KIND: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr):
    rows, feats, rmask, fmask = _tile(B, n, BB, BH)
    m3 = rmask[:, None, None] & fmask[None, :, :]
    at = rows[:, None, None] * n + feats[None, :, :]
    for s in range(0, chunk):
        t = tl.program_id(0) * chunk + s
        x = tl.load(a + t * B * n + at, mask=m3, other=0.0)
        out = term_forward(x, rows, feats, rmask, fmask, t, m, B, n, k, eps, gain, shift, st, ref, tot, gmean, grstd,
                           bmean, bstd, fmean, fstd, bl, KIND)
        tl.store(y + t * B * n + at, out, mask=m3)
        tl.debug_barrier()


@triton.jit
def backward(a, dy, da, dgx, chunk, Tn, B, n, m, k, eps, gain, st, ref, xs, rs, gout, gmean, grstd, bmean, bstd,
             fmean, fstd, bl, KIND: tl.constexpr, BB: tl.constexpr, BH: tl.constexpr):
    """da of every step in reverse order, and dy * xhat per element in ``dgx`` (None: no gain)."""
    rows, feats, rmask, fmask = _tile(B, n, BB, BH)
    m3 = rmask[:, None, None] & fmask[None, :, :]
    at = rows[:, None, None] * n + feats[None, :, :]
    for s in range(0, chunk):
        step = tl.program_id(0) * chunk + s
        t = Tn - 1 - step
        x = tl.load(a + t * B * n + at, mask=m3, other=0.0)
        d = tl.load(dy + t * B * n + at, mask=m3, other=0.0)
        out, contribution = term_backward(x, d, rows, feats, rmask, fmask, t, step, Tn, m, B, n, k, eps, gain, st, ref,
                                          xs, rs, gout, gmean, grstd, bmean, bstd, fmean, fstd, bl, KIND)
        tl.store(da + t * B * n + at, out, mask=m3)
        if dgx is not None:
            tl.store(dgx + t * B * n + at, contribution, mask=m3)
        tl.debug_barrier()


@triton.jit
def history_gradient(dp, st, ref, xs, rs, gout, Tn, m, k, S, BS: tl.constexpr):
    """dp (m, S, 2): (dm_j, dv_j) of the history steps j < m, after all Tn steps went back."""
    slot = tl.program_id(0) * BS + tl.arange(0, BS)
    smask = slot < S
    last = Tn % 2  # the parity the last backward step wrote
    ra = tl.load(rs + (last * 2) * S + slot, mask=smask, other=0.0)
    rb = tl.load(rs + (last * 2 + 1) * S + slot, mask=smask, other=0.0)
    refv = tl.load(ref + slot, mask=smask, other=0.0)
    L = tl.minimum(k - 1, m + Tn)
    first_out = m + Tn - L
    for u in range(1, m + 1):
        t = -u
        later = slot * 0 + t + k <= Tn - 1
        xo = xs + ((t + k) * S + slot) * 2
        ra = tl.where(later, ra - tl.load(xo, mask=smask & later, other=0.0), ra)
        rb = tl.where(later, rb - tl.load(xo + 1, mask=smask & later, other=0.0), rb)
        j = m + t
        dm = ra + 2.0 * (tl.load(st + (j * S + slot) * SW, mask=smask, other=0.0) - refv) * rb
        dv = rb
        if gout is not None:
            held = slot * 0 + j >= first_out
            g = gout + ((j - first_out) * S + slot) * 2
            dm += tl.load(g, mask=smask & held, other=0.0)
            dv += tl.load(g + 1, mask=smask & held, other=0.0)
        tl.store(dp + (j * S + slot) * 2, dm, mask=smask)
        tl.store(dp + (j * S + slot) * 2 + 1, dv, mask=smask)

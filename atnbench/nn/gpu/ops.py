"""The Triton fast path's operations, with the signatures and returns of the C++ ones.

``norm_rnn_forward`` / ``norm_rnn_backward`` (the recurrence of one layer) and ``norm_seq_forward``
/ ``norm_seq_backward`` (one normalized term over a whole sequence) take and return what
``torch.ops.atnbench_fast`` does (``csrc/norm_rnn.cpp``), so ``fastpath_rnn`` runs either with the
same Python around it (running statistics, window states, autograd nodes). Per step: one GEMM
through torch (cuBLAS on a GPU) and one fused kernel (``step.py``); the input term's norm for all
steps at once (``sequence.py``). ``graph.py`` replays a whole recurrence as one CUDA graph.

On a CPU the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``): that is how CI tests
them, at tiny sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from atnbench.nn.gpu import graph, sequence, step

NONE, ROW, COL, BLN, GIVEN = range(5)  # the kinds of fastpath_rnn / norm_rnn.cpp
LSTM = 0
SW = 7
# Elements per program a tile aims at (a row-kind program holds whole rows, so it may hold more).
# At the paper's sizes a kernel's time is one program's latency, which fewer elements per program
# shorten. Measured at the adding sizes, one LSTM layer's training step, GPU time (2026-11-26,
# benchmarks/results/2026-11-26-cuda-tiles.md): on an H200, LN 9.8 / 6.3 / 5.8 ms and ATN k=45
# 14.0 / 8.1 / 7.1 ms at 4096 / 1024 / 512; on an H100, ATN's input term (WINDOW_TILE: its steps
# in order within a program) 3.3 ms at 4096 and 1.1 ms at 1024.
TILE = 512
WINDOW_TILE = 1024


def _pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


@dataclass
class Tiling:
    """How a (B, NQ x H) term is split into programs: ``row`` kinds need whole rows in a program,
    ``col`` kinds whole columns, BLN both."""

    BB: int
    BH: int
    grid_rows: int
    grid_hidden: int
    num_warps: int

    @staticmethod
    def of(kinds, B: int, H: int, gates: int, tile: Optional[int] = None) -> "Tiling":
        tile = TILE if tile is None else tile
        whole_rows = any(kind in (ROW, BLN) for kind in kinds)
        whole_cols = any(kind in (COL, BLN) for kind in kinds)
        per_unit = _pow2(gates)
        BB = _pow2(B) if whole_cols else None
        BH = _pow2(H) if whole_rows else None
        if BB is None and BH is None:
            BH = min(_pow2(H), 64)
        if BB is None:
            BB = max(1, min(_pow2(B), tile // (per_unit * BH)))
        if BH is None:
            BH = max(1, min(_pow2(H), tile // (per_unit * BB)))
        size = BB * per_unit * BH
        warps = 4 if size <= 4096 else 8 if size <= 16384 else 16
        return Tiling(BB, BH, -(-B // BB), -(-H // BH), warps)


def _slots(kind: int, B: int, n: int) -> int:
    return B if kind == ROW else n if kind == COL else 0


@dataclass
class TermBuffers:
    """One normalized term's kernel arguments and working buffers (see ``term.py``)."""

    kind: int
    k: int
    eps: Tensor  # (1,) float64: a float argument would reach the kernel as float32
    n: int
    B: int
    Tn: int
    m: int
    S: int
    opts: list  # gain, shift, hist, gmean, grstd, bmean, bstd, fmean, fstd
    st: Optional[Tensor]
    ref: Optional[Tensor]
    bl: Optional[Tensor]
    tot: Optional[Tensor] = None
    xs: Optional[Tensor] = None
    rs: Optional[Tensor] = None
    gout: Optional[Tensor] = None
    acc: Optional[Tensor] = None

    @staticmethod
    def new(kind, k, eps, opts, B, n, Tn, like: Tensor, records=None) -> "TermBuffers":
        """A term's buffers for a forward (``records`` None: fresh records, the window state
        ``opts[2]`` loaded into them) or a backward (``records``: the forward's (st, ref, bl))."""
        S = _slots(kind, B, n)
        f64 = dict(dtype=torch.float64, device=like.device)
        eps_t = torch.full((1,), float(eps), **f64)
        if records is not None:
            st, ref, bl = records
            m = st.shape[0] - Tn if S else 0
            return TermBuffers(kind, k, eps_t, n, B, Tn, m, S, list(opts), st if S else None, ref if S else None,
                               bl if kind == BLN else None)
        hist = opts[2]
        m = hist.shape[0] if S and hist is not None else 0
        term = TermBuffers(kind, k, eps_t, n, B, Tn, m, S, list(opts),
                           torch.zeros((m + Tn, S, SW), **f64) if S else None,
                           torch.zeros((S,), **f64) if S else None,
                           torch.empty((Tn, 2 * n + 2 * B), **f64) if kind == BLN else None)
        if S:
            term.tot = torch.zeros((2, 2, S), **f64)
            if m:
                term.st[:m, :, :2] = hist
                term.ref.copy_(hist[0, :, 0])
                if k > 1:
                    d = hist[..., 0] - term.ref
                    term.tot[0, 0] = d.sum(0)
                    term.tot[0, 1] = (hist[..., 1] + d * d).sum(0)
        return term

    def _given(self) -> list:
        o = self.opts
        return [o[3], o[4], o[5], o[6], o[7], o[8], self.bl]

    def forward_args(self) -> list:
        return [self.m, self.k, self.eps, self.opts[0], self.opts[1], self.st, self.ref, self.tot, *self._given()]

    def prepare_backward(self, gout: Optional[Tensor], with_acc: bool) -> None:
        dev = self.eps.device
        if self.S:
            self.xs = torch.empty((self.Tn, self.S, 2), dtype=torch.float64, device=dev)
            self.rs = torch.zeros((2, 2, self.S), dtype=torch.float64, device=dev)
            L = min(self.k - 1, self.m + self.Tn)
            self.gout = gout.contiguous() if gout is not None and L > 0 and gout.numel() else None
        if with_acc and (self.opts[0] is not None or self.opts[1] is not None):
            self.acc = torch.zeros((2, 2, self.B, self.n), dtype=self.opts[0 if self.opts[0] is not None else 1].dtype,
                                   device=dev)

    def backward_args(self, with_acc: bool = True) -> list:
        args = [self.m, self.k, self.eps, self.opts[0], self.st, self.ref, self.xs, self.rs, self.gout, *self._given()]
        return args + [self.acc] if with_acc else args

    def history_out(self, hist: Tensor) -> Tensor:
        if self.kind not in (ROW, COL):
            return hist  # no window: the state passes through unchanged
        total = self.st.shape[0]
        keep = min(self.k - 1, total)
        return self.st[total - keep:, :, :2].contiguous()

    def history_grad(self) -> Tensor:
        """The gradient of the window state passed in, after every step went back."""
        dev = self.eps.device
        rows = self.st.shape[0] - self.Tn if self.st is not None else 0
        dp = torch.zeros((rows, self.S, 2), dtype=torch.float64, device=dev)
        if self.k > 1 and self.m and self.S:
            BS = min(_pow2(self.S), 1024)
            sequence.history_gradient[(-(-self.S // BS),)](dp, self.st, self.ref, self.xs, self.rs, self.gout,
                                                          self.Tn, self.m, self.k, self.S, BS=BS)
        return dp

    def gain_shift_grads(self, like: Tensor) -> tuple[Tensor, Tensor]:
        empty = like.new_zeros(0)
        if self.acc is None:
            return empty, empty
        sums = self.acc[self.Tn % 2].sum(1)
        return (sums[0] if self.opts[0] is not None else empty), (sums[1] if self.opts[1] is not None else empty)


def _hist(opts) -> Tensor:
    return opts[2]


# ------------------------------------------------------------------------------------------ recurrence

@graph.replayed
def norm_rnn_forward(xn, h0, c0, w_hh, b_hh, cell, kind_h, k_h, eps_h, opt_h, kind_c, k_c, eps_c, opt_c, save):
    """One layer's recurrence; returns out, c_n, hist_h, hist_c, st_h, st_c, bl_h, bl_c, ref_h, ref_c and
    (kept whether ``save`` or not) AH, ACT, C (LSTM) or N_h(AH) (GRU), TY, as the C++ op."""
    Tn, B, G = xn.shape
    H = h0.shape[1]
    lstm = cell == LSTM
    kind_c = kind_c if lstm else NONE
    th = TermBuffers.new(kind_h, k_h, eps_h, opt_h, B, G, Tn, xn)
    tc = TermBuffers.new(kind_c, k_c, eps_c, opt_c, B, H, Tn, xn)
    out = xn.new_empty((Tn, B, H))
    AH, ACT = xn.new_empty((Tn, B, G)), xn.new_empty((Tn, B, G))
    CH = xn.new_empty((Tn, B, H)) if lstm else xn.new_empty((Tn, B, G))
    TY = xn.new_empty((Tn if lstm else 0, B, H))
    w_t = w_hh.t()
    tiles = Tiling.of((kind_h, kind_c), B, H, 4 if lstm else 3)
    grid = (tiles.grid_rows, tiles.grid_hidden)
    for t in range(Tn):
        hprev = h0 if t == 0 else out[t - 1]
        if b_hh is None:
            torch.mm(hprev, w_t, out=AH[t])
        else:
            torch.addmm(b_hh, hprev, w_t, out=AH[t])
        if lstm:
            step.lstm_forward[grid](xn[t], AH[t], c0 if t == 0 else CH[t - 1], CH[t], ACT[t], TY[t], out[t], t, B, H,
                                    *th.forward_args(), *tc.forward_args(), KIND_H=kind_h, KIND_C=kind_c,
                                    BB=tiles.BB, BH=tiles.BH, num_warps=tiles.num_warps)
        else:
            step.gru_forward[grid](xn[t], AH[t], hprev, CH[t], ACT[t], out[t], t, B, H, *th.forward_args(),
                                   KIND_H=kind_h, BB=tiles.BB, BH=tiles.BH, num_warps=tiles.num_warps)
    cn = CH[Tn - 1].clone() if lstm else xn.new_empty(0)
    empty = torch.empty((Tn, 0, SW), dtype=torch.float64, device=xn.device)
    res = [out, cn, th.history_out(_hist(opt_h)), tc.history_out(_hist(opt_c)),
           th.st if th.st is not None else empty, tc.st if tc.st is not None else empty,
           th.bl if th.bl is not None else empty.new_empty((0, 2 * G + 2 * B)),
           tc.bl if tc.bl is not None else empty.new_empty((0, 2 * H + 2 * B)),
           th.ref if th.ref is not None else empty.new_zeros(0), tc.ref if tc.ref is not None else empty.new_zeros(0)]
    return res + [AH, ACT, CH, TY]


@graph.replayed
def norm_rnn_backward(dout, dcn, dhist_h, dhist_c, h0, c0, w_hh, cell, kind_h, k_h, eps_h, opt_h, kind_c, k_c,
                      eps_c, opt_c, out, sth, stc, blh, blc, refh, refc, AH, ACT, CH, TY):
    """Returns dxn, dh0, dc0 (empty for the GRU), dW_hh, db_hh, the gain and shift gradients of
    both terms (empty where absent) and the window states' gradients, as the C++ op."""
    Tn, B, G = AH.shape
    H = h0.shape[1]
    lstm = cell == LSTM
    kind_c = kind_c if lstm else NONE

    def term(kind, k, eps, opts, n, st, ref, bl, gout):
        t = TermBuffers.new(kind, k, eps, opts, B, n, Tn, AH, records=(st, ref, bl))
        t.prepare_backward(gout, with_acc=True)
        return t

    th = term(kind_h, k_h, eps_h, opt_h, G, sth, refh, blh, dhist_h)
    tc = term(kind_c, k_c, eps_c, opt_c, H, stc, refc, blc, dhist_c)
    DXN, DAH = AH.new_empty((Tn, B, G)), AH.new_empty((Tn, B, G))
    DH = AH.new_zeros((B, H))
    dout = dout.contiguous() if dout is not None else None
    tiles = Tiling.of((kind_h, kind_c), B, H, 4 if lstm else 3)
    grid = (tiles.grid_rows, tiles.grid_hidden)
    if lstm:
        DC = AH.new_zeros((2, B, H))
        if dcn is not None:
            DC[0].copy_(dcn)
    else:
        DZH = AH.new_empty((B, H))
    for s, t in enumerate(range(Tn - 1, -1, -1)):
        d_t = dout[t] if dout is not None else None
        if lstm:
            step.lstm_backward[grid](DH, d_t, ACT[t], TY[t], CH[t], c0 if t == 0 else CH[t - 1], DC, AH[t], DXN[t],
                                     DAH[t], t, s, Tn, B, H, *th.backward_args(), *tc.backward_args(),
                                     KIND_H=kind_h, KIND_C=kind_c, BB=tiles.BB, BH=tiles.BH,
                                     num_warps=tiles.num_warps)
            torch.mm(DAH[t], w_hh, out=DH)
        else:
            step.gru_backward[grid](DH, d_t, ACT[t], CH[t], h0 if t == 0 else out[t - 1], AH[t], DXN[t], DAH[t], DZH,
                                    t, s, Tn, B, H, *th.backward_args(), KIND_H=kind_h, BB=tiles.BB, BH=tiles.BH,
                                    num_warps=tiles.num_warps)
            torch.addmm(DZH, DAH[t], w_hh, out=DH)
    hprev = torch.cat((h0.unsqueeze(0), out[:-1])) if Tn > 1 else h0.unsqueeze(0)
    dahf = DAH.reshape(Tn * B, G)
    dW = torch.mm(hprev.reshape(Tn * B, H).t(), dahf).t()
    db = dahf.sum(0)
    dgh, dsh = th.gain_shift_grads(AH)
    dgc, dsc = tc.gain_shift_grads(AH)
    dc0 = DC[Tn % 2].clone() if lstm else AH.new_zeros(0)
    return [DXN, DH, dc0, dW, db, dgh, dsh, dgc, dsc, _window_grad(th, sth), _window_grad(tc, stc)]


def _window_grad(term: TermBuffers, st: Tensor) -> Tensor:
    if term.S:
        return term.history_grad()
    return torch.zeros((st.shape[0] - term.Tn, st.shape[1], 2), dtype=torch.float64, device=st.device)


# ------------------------------------------------------------------------------------------ one term, all steps

def _sequence_layout(kind: int, k: int, Tn: int, B: int, n: int) -> tuple[int, Tiling]:
    """(steps per program, tiling): a window runs its steps in order, anything else one step each."""
    chunk = Tn if kind in (ROW, COL) and k > 1 else 1
    return chunk, Tiling.of((kind,), B, n, 1, WINDOW_TILE if chunk > 1 else None)


def norm_seq_forward(a, kind, k, eps, opt):
    """y = N(a) of every step of a (T, B, n); returns y, the new window state, the records, BLN's
    records and ref, as the C++ op."""
    a = a.contiguous()
    Tn, B, n = a.shape
    term = TermBuffers.new(kind, k, eps, opt, B, n, Tn, a)
    y = torch.empty_like(a)
    chunk, tiles = _sequence_layout(kind, k, Tn, B, n)
    grid = (Tn // chunk, tiles.grid_rows, tiles.grid_hidden)
    sequence.forward[grid](a, y, chunk, B, n, *term.forward_args(), KIND=kind, BB=tiles.BB, BH=tiles.BH,
                           num_warps=tiles.num_warps)
    f64 = dict(dtype=torch.float64, device=a.device)
    return [y, term.history_out(_hist(opt)),
            term.st if term.st is not None else torch.empty((Tn, 0, SW), **f64),
            term.bl if term.bl is not None else torch.empty((0, 2 * n + 2 * B), **f64),
            term.ref if term.ref is not None else torch.zeros(0, **f64)]


def norm_seq_backward(dy, dhist, a, kind, k, eps, opt, st, bl, ref):
    """Returns da, the gain and shift gradients (empty where absent) and the window state's gradient."""
    a, dy = a.contiguous(), dy.contiguous()
    Tn, B, n = a.shape
    term = TermBuffers.new(kind, k, eps, opt, B, n, Tn, a, records=(st, ref, bl))
    term.prepare_backward(dhist, with_acc=False)
    da = torch.empty_like(a)
    gain, shift = opt[0], opt[1]
    dgx = torch.empty_like(a) if gain is not None else None
    chunk, tiles = _sequence_layout(kind, k, Tn, B, n)
    grid = (Tn // chunk, tiles.grid_rows, tiles.grid_hidden)
    sequence.backward[grid](a, dy, da, dgx, chunk, Tn, B, n, *term.backward_args(with_acc=False), KIND=kind,
                            BB=tiles.BB, BH=tiles.BH, num_warps=tiles.num_warps)
    empty = a.new_zeros(0)
    dg = dgx.sum((0, 1)) if dgx is not None else empty
    ds = dy.sum((0, 1)) if shift is not None else empty
    return [da, dg, ds, _window_grad(term, st)]

"""The fast path for every normalization of NormLSTM and NormGRU: ``csrc/norm_rnn.cpp``.

One layer runs as the loop does in three parts:

1. the input term ``N_x(W_x x [+ b_x]) [+ b]`` for all steps: one matmul, then the input norm
   as one autograd node (``NormSequence``: the same kernel term as the recurrence's, with no
   recurrence; running statistics as in 3.); norms without a kernel term (sequence-wise BN), and
   padded batches on Triton, take the layer's own ``input_term`` (torch ops, autograd),
2. the recurrence (hidden term ``N_h(W_h h_{t-1} + b_h)``, the LSTM cell term ``N_c(c_t)``, the
   gates) as one autograd node (``NormRNNRecurrence``) with a hand-written C++ backward,
3. the running (population) statistics of the recurrent terms, updated from the per-step
   statistics the recurrence returns: ``StepStatistics.update(0, values)`` for all T steps at
   once, the same element-wise EMA the loop applies step by step (each step's row once).

Padded batches (``lengths``, C++ only; ``padded``): the rows are sorted longest first and the
kernels run the steps that have a valid row, computing at each step the rows still running (the
first ones); a finished sequence's h and c are held (the recurrence's output is the held h), batch
statistics pool the valid rows (ATN-BN's window weights each step by its count), and every step's
window moments come back, from which ``padded_window`` takes the state as the loop does.

Each normalization module type maps to a kernel term (``TERMS``, a registry): ``none``, ``row``
(LN, ATN-LN: statistics per row over the features, a window of k steps), ``col`` (BN,
ATN-BN: statistics per feature over the batch), ``bln`` (BLN, any of its four statistics
given at inference), ``given`` (population mean and 1/sqrt(var+eps) per step: BN and ATN-BN
in eval mode). Batch statistics couple the rows at every step, so the kernel runs the whole
batch per step on one thread (measured: benchmarks/README.md).

The math of the window statistics and their adjoint is in ``fast_python.py``; BN is its
transpose (slots are features, the reduction is over the batch). BLN's two parts are each
``(a - mu) / sigma`` with ``sigma = sqrt(mean((a - mu)^2) + eps)``; with ``w`` the incoming
gradient, ``d = a - mu`` and N values reduced over:

    dd = w / sigma + dsigma * d / (N sigma),  dsigma = -sum(w d) / sigma^2   (0 if sigma given)
    da = dd - mean(dd)                                                       (dd if mu given)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
from torch import Tensor
import functools

from torch.autograd.function import once_differentiable  # inside first_order

from atnbench.nn.norms import (AssortedTimeBatchNorm, AssortedTimeNorm, BatchLayerNorm, LayerNorm, NoNorm,
                               SequenceNorm, StepBatchNorm, _unbiased, _unbiased_counts)
from atnbench.nn.padding import step_mask
from atnbench.nn.window import history_at, masked_history

NONE, ROW, COL, BLN, GIVEN = range(5)
LSTM, GRU = 0, 1
# Positions in a term's list of optional tensors (csrc/norm_rnn.cpp, enum Opt).
GAIN, SHIFT, HIST, GMEAN, GRSTD, BMEAN, BSTD, FMEAN, FSTD = range(9)
STAT_MEAN, STAT_VAR = 2, 5  # window mean and (biased, clamped) var in the per-step records


@dataclass
class Term:
    """What the kernel needs for one normalized term, and what to do with its statistics."""

    kind: int
    k: int = 1
    eps: float = 0.0
    opts: list = field(default_factory=lambda: [None] * 9)
    # training: update the running statistics from (records (m+T, S, 7), bln (T, 2n+2B), batch, mask:
    # (T, B) bool, the valid rows of a padded batch's steps, or None)
    update: Optional[Callable[[Tensor, Tensor, int, Optional[Tensor]], None]] = None
    windowed: bool = False  # the kernel returns the new window state


def _affine(term: Term, norm: SequenceNorm) -> Term:
    term.opts[GAIN], term.opts[SHIFT] = norm.weight, norm.bias
    term.eps = float(norm.eps)
    return term


def _none(norm, window, steps, like) -> Term:
    return Term(NONE)


def _row(norm, window, steps, like) -> Term:
    k = getattr(norm, "k", 1)
    term = _affine(Term(ROW, k, windowed=norm.windowed), norm)
    term.opts[HIST] = window
    return term


def _given(norm, steps, like) -> Term:
    pop = norm.stats.lookup(0, steps)
    term = _affine(Term(GIVEN), norm)
    term.opts[GMEAN] = pop["mean"].to(like.dtype).contiguous()
    term.opts[GRSTD] = torch.rsqrt(pop["var"] + norm.eps).to(like.dtype).contiguous()
    return term


def _window_values(records: Tensor, steps: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    rows = records[records.shape[0] - steps:]
    return rows[..., STAT_MEAN].to(dtype), rows[..., STAT_VAR].to(dtype)


def _step_bn(norm: StepBatchNorm, window, steps, like) -> Term:
    if not norm.training:
        return _given(norm, steps, like)

    def update(records, bln, batch, mask):
        mean, var = _window_values(records, steps, like.dtype)
        var = _unbiased(var, batch) if mask is None else _unbiased_counts(var, mask.sum(dim=1, keepdim=True))
        norm.stats.update(0, {"mean": mean, "var": var})

    return _affine(Term(COL, 1, update=update), norm)


def _atn_bn(norm: AssortedTimeBatchNorm, window, steps, like) -> Term:
    if not norm.training and norm.use_population:
        return _given(norm, steps, like)  # the window state passes through unchanged, as in the loop

    def update(records, bln, batch, mask):
        mean, var = _window_values(records, steps, like.dtype)
        past = records.shape[0] - steps
        if mask is None:
            pooled = torch.arange(past + 1, past + steps + 1, device=var.device).clamp_max(norm.k) * batch
        else:  # the values each window pools: the valid rows of its steps (the state's: full batches)
            pooled = window_counts(mask, past, batch, norm.k)[past:]
        pooled = pooled.to(torch.float64).unsqueeze(-1)  # the loop's factor n / (n - 1) is a Python float
        factor = torch.where(pooled > 1, pooled / (pooled - 1).clamp_min(1), torch.ones_like(pooled))
        norm.stats.update(0, {"mean": mean, "var": var * factor.to(var.dtype)})

    term = _affine(Term(COL, norm.k, update=update if norm.training else None, windowed=True), norm)
    term.opts[HIST] = window
    return term


def _bln(norm: BatchLayerNorm, window, steps, like) -> Term:
    term = _affine(Term(BLN), norm)
    if not norm.training:
        if any(norm.population.values()):
            pop = norm.stats.lookup(0, steps)
            for name, slot in (("batch_mean", BMEAN), ("batch_std", BSTD), ("feature_mean", FMEAN),
                               ("feature_std", FSTD)):
                if norm.population[name]:
                    term.opts[slot] = pop[name].to(like.dtype).contiguous()
        return term

    def update(records, bln, batch, mask):
        n = norm.size
        stats = bln.to(like.dtype)
        if mask is None:
            correction = batch / (batch - 1) if batch > 1 else 1.0
            norm.stats.update(0, {
                "batch_mean": stats[:, :n],
                "batch_std": stats[:, n:2 * n] * correction,
                "feature_mean": stats[:, 2 * n:2 * n + batch].mean(dim=-1),
                "feature_std": stats[:, 2 * n + batch:].mean(dim=-1) * correction,
            })
            return
        weight = mask.to(like.dtype)  # as BatchLayerNorm.apply with a mask: the valid rows of each step
        rows = weight.sum(dim=1)
        correction = torch.where(rows > 1, rows / (rows - 1).clamp_min(1), torch.ones_like(rows))
        norm.stats.update(0, {
            "batch_mean": stats[:, :n],
            "batch_std": stats[:, n:2 * n] * correction.unsqueeze(-1),
            "feature_mean": (stats[:, 2 * n:2 * n + batch] * weight).sum(dim=-1) / rows,
            "feature_std": (stats[:, 2 * n + batch:] * weight).sum(dim=-1) / rows * correction,
        })

    term.update = update
    return term


# Normalization module type -> its kernel term. A type not listed here runs on the loop path.
TERMS: dict[type, Callable[..., Term]] = {
    NoNorm: _none,
    LayerNorm: _row,
    AssortedTimeNorm: _row,
    StepBatchNorm: _step_bn,
    AssortedTimeBatchNorm: _atn_bn,
    BatchLayerNorm: _bln,
}


def covered(norm: SequenceNorm) -> bool:
    return type(norm) in TERMS


def _history(term: Term, window: Optional[Tensor], norm: SequenceNorm, batch: int, like: Tensor) -> Tensor:
    if term.kind in (ROW, COL) and window is not None:
        return window.contiguous()
    if term.kind in (ROW, COL):
        return norm.initial_state(batch, like.device) if norm.windowed else like.new_zeros((0, 0, 2), dtype=torch.float64)
    return like.new_zeros((0, 0, 2), dtype=torch.float64)


N_DIFF_OPTS = (GAIN, SHIFT, HIST)  # the optional inputs that can receive a gradient


# ------------------------------------------------------------------------------------------
# Padded batches: the kernels take ``lengths`` and run the active steps (each has a valid row);
# they hold a finished sequence's h and c, pool batch statistics over the valid rows and return
# every step's window moments, from which each sequence's own window state is taken here.

def step_counts(mask: Tensor, past: int, batch: int) -> Tensor:
    """(past + T,) float64: the values per feature of each step, the window state's steps full batches."""
    full = torch.full((past,), float(batch), dtype=torch.float64, device=mask.device)
    return torch.cat((full, mask.sum(dim=1).to(torch.float64)))


def window_counts(mask: Tensor, past: int, batch: int, k: int) -> Tensor:
    """(past + T,) float64: the values each ATN-BN window pools (its last k steps' counts)."""
    counts = step_counts(mask, past, batch)
    prefix = torch.cat((counts.new_zeros(1), counts.cumsum(0)))
    end = torch.arange(1, counts.shape[0] + 1, device=counts.device)
    return prefix[end] - prefix[(end - k).clamp_min(0)]


def padded_window(term: Term, every: Tensor, mask: Tensor, lengths: Tensor, batch: int) -> Tensor:
    """The window state of a padded batch from ``every`` step's (m_j, v_j) (past + T, S, 2), as the
    loop returns it: ATN-LN each sequence's window at its own last step (``history_at``), ATN-BN
    the batch's last k-1 steps, NaN-marked where a step had padded rows (``masked_history``)."""
    if term.k == 1:
        return every  # no window to carry: (0, S, 2)
    past = every.shape[0] - mask.shape[0]
    if term.kind == ROW:
        return history_at(every, term.k, past + lengths)
    counts = step_counts(mask, past, batch).to(every.dtype)
    entries = torch.cat((every, counts.view(-1, 1, 1).expand(-1, every.shape[1], 1)), dim=-1)
    return masked_history(entries, term.k, batch)


def _with_lengths(lengths: Optional[Tensor]) -> tuple:
    """The kernels' trailing ``lengths`` argument: none for a dense batch (the Triton ops take none)."""
    return () if lengths is None else (lengths,)


def first_order(backward):
    """torch's ``once_differentiable``, refusing a second derivative in words. Asked for one
    (``create_graph=True``: grad mode is on in the backward), ``once_differentiable`` raises only
    where an incoming gradient requires grad; where none does (a critic's ``y.mean()`` in a
    gradient penalty) it returned a gradient without a graph, and the penalty lost its
    second-order term without a word."""
    once = once_differentiable(backward)

    @functools.wraps(backward)
    def refusing(ctx, *grads):
        if torch.is_grad_enabled():
            raise RuntimeError("NormLSTM/NormGRU's fast path is differentiable once: a second derivative "
                               "(create_graph=True, a gradient penalty) needs backend=\"loop\"")
        return once(ctx, *grads)

    return refusing


class NormRNNRecurrence(torch.autograd.Function):
    """``apply(ops, cell, th, tc, lengths, xn, h0, c0, w_hh, b_hh, *opts_h, *opts_c)``; ``ops`` the
    kernels (``torch.ops.atnbench_fast`` or the Triton ones), ``th``/``tc`` (kind, k, eps) of the
    hidden and cell terms, ``lengths`` (B,) of a padded batch or None. Returns ``(out, c_n, hist_h,
    hist_c, records_h, records_c, bln_h, bln_c)``; the last four carry no gradient."""

    @staticmethod
    def forward(ctx, ops, cell, th, tc, lengths, xn, h0, c0, w_hh, b_hh, *opts):
        opts_h, opts_c = list(opts[:9]), list(opts[9:])
        res = ops.norm_rnn_forward(xn, h0, c0, w_hh, b_hh, cell, *th, opts_h, *tc, opts_c, True,
                                   *_with_lengths(lengths))
        out, cn, hh, hc, sth, stc, blh, blc, refh, refc, *saved = res
        ctx.ops, ctx.cell, ctx.th, ctx.tc, ctx.lengths = ops, cell, th, tc, lengths
        ctx.n_opts = len(opts)
        ctx.present = [t is not None for t in (c0, b_hh, *opts)]
        ctx.save_for_backward(h0, *(t for t in (c0, *opts) if t is not None), w_hh, out, sth, stc, blh, blc, refh,
                              refc, *saved)
        ctx.mark_non_differentiable(sth, stc, blh, blc)
        ctx.set_materialize_grads(False)
        return out, cn, hh, hc, sth, stc, blh, blc

    @staticmethod
    @first_order
    def backward(ctx, dout, dcn, dhh, dhc, *_):
        stored = list(ctx.saved_tensors)
        h0 = stored.pop(0)
        c0 = stored.pop(0) if ctx.present[0] else None
        opts = [stored.pop(0) if present else None for present in ctx.present[2:]]
        w_hh, out, sth, stc, blh, blc, refh, refc, ah, act, ch, ty = stored
        opts_h, opts_c = opts[:9], opts[9:]
        (dxn, dh0, dc0, dw, db, dgh, dsh, dgc, dsc, dhist_h, dhist_c) = ctx.ops.norm_rnn_backward(
            dout, dcn, dhh, dhc, h0, c0, w_hh, ctx.cell, *ctx.th, opts_h, *ctx.tc, opts_c, out, sth, stc, blh, blc,
            refh, refc, ah, act, ch, ty, *_with_lengths(ctx.lengths))
        needs = ctx.needs_input_grad

        def grads_of(term_opts, dg, ds, dhist):
            g = [None] * 9
            g[GAIN] = dg if term_opts[GAIN] is not None else None
            g[SHIFT] = ds if term_opts[SHIFT] is not None else None
            g[HIST] = dhist if term_opts[HIST] is not None else None
            return g

        rest = grads_of(opts_h, dgh, dsh, dhist_h) + grads_of(opts_c, dgc, dsc, dhist_c)
        rest = [g if need else None for g, need in zip(rest, needs[10:])]
        return (None, None, None, None, None, dxn, dh0, dc0 if c0 is not None else None, dw,
                db if ctx.present[1] else None, *rest)


def _project_and_normalize(ops, spec, x: Tensor, w_ih: Tensor, b_ih: Optional[Tensor], opts,
                           lengths: Optional[Tensor] = None) -> tuple[Tensor, list]:
    x2 = x.reshape(-1, x.shape[-1])
    wx = (x2 @ w_ih.t() if b_ih is None else torch.addmm(b_ih, x2, w_ih.t())).view(x.shape[0], x.shape[1], -1)
    return wx, ops.norm_seq_forward(wx, *spec, list(opts), *_with_lengths(lengths))


class NormSequence(torch.autograd.Function):
    """``apply(ops, (kind, k, eps), lengths, x, w_ih, b_ih, *opts)``: the input term ``N(W_ih x +
    b_ih)`` of every step of ``x`` (T, B, D), the norm on the kernel with no recurrence (``lengths``:
    a padded batch's, or None). Returns ``(y, hist, records, bln)``; the last two carry no gradient.

    The projection is part of the node so that its weight gradient is taken as ``(x^T dA)^T``:
    with few input features (adding: 2) that is ~9x faster than autograd's ``dA^T x``.
    """

    @staticmethod
    def forward(ctx, ops, spec, lengths, x, w_ih, b_ih, *opts):
        wx, (y, hist, records, bln, ref) = _project_and_normalize(ops, spec, x, w_ih, b_ih, opts, lengths)
        ctx.ops, ctx.spec, ctx.lengths = ops, spec, lengths
        ctx.present = [t is not None for t in (b_ih, *opts)]
        ctx.save_for_backward(x, w_ih, wx, *(t for t in opts if t is not None), records, bln, ref)
        ctx.mark_non_differentiable(records, bln)
        ctx.set_materialize_grads(False)
        return y, hist, records, bln

    @staticmethod
    @first_order
    def backward(ctx, dy, dhist, *_):
        x, w_ih, wx, *stored = ctx.saved_tensors
        opts = [stored.pop(0) if present else None for present in ctx.present[1:]]
        records, bln, ref = stored
        dy = torch.zeros_like(wx) if dy is None else dy
        da, dg, ds, dh = ctx.ops.norm_seq_backward(dy, dhist, wx, *ctx.spec, opts, records, bln, ref,
                                                   *_with_lengths(ctx.lengths))
        needs = ctx.needs_input_grad
        da2 = da.view(-1, da.shape[-1])
        dx = (da2 @ w_ih).view_as(x) if needs[3] else None
        dw = (x.reshape(-1, x.shape[-1]).t() @ da2).t() if needs[4] else None
        db = da2.sum(0) if ctx.present[0] and needs[5] else None
        grads = [None] * len(opts)
        grads[GAIN] = dg if opts[GAIN] is not None else None
        grads[SHIFT] = ds if opts[SHIFT] is not None else None
        grads[HIST] = dh if opts[HIST] is not None else None
        return (None, None, None, dx, dw, db, *(g if need else None for g, need in zip(grads, needs[6:])))


def input_term(model_layer, x: Tensor, window: Optional[Tensor], lengths: Optional[Tensor], ops=None):
    """``N_x(W_x x [+ b_x]) [+ b]`` for every step: the input norm on the kernel where it has a
    kind (``TERMS``; a padded batch on the C++ kernel only), the layer's own ``input_term`` otherwise.

    The kernel applies the same term as the recurrence does to W_h h, and the running
    statistics are updated from its records as there: one home for each norm's kernel math.
    The outside bias ``b`` is added to the norm's shift (one vector add instead of one over
    every step). ``lengths``: every step of ``x`` has a valid row (``layer`` runs the active ones).
    """
    norm = model_layer.norm_x
    if not covered(norm) or isinstance(norm, NoNorm) or (lengths is not None and ops is not torch.ops.atnbench_fast):
        return model_layer.input_term(x, window, lengths)
    steps, batch = x.shape[0], x.shape[1]
    like = x.new_empty(0)
    term = TERMS[type(norm)](norm, window, steps, like)
    term.opts[HIST] = _history(term, window, norm, batch, like)
    if model_layer.bias is not None:
        shift = term.opts[SHIFT]
        term.opts[SHIFT] = model_layer.bias if shift is None else shift + model_layer.bias
    spec = (term.kind, term.k, term.eps)
    args = (x.contiguous(), model_layer.weight_ih, model_layer.bias_ih, *term.opts)
    kernel_lengths = None if lengths is None else lengths.cpu()
    if torch.is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in args):
        y, hist, records, bln = NormSequence.apply(ops, spec, kernel_lengths, *args)
    else:
        y, hist, records, bln = _project_and_normalize(ops, spec, args[0], args[1], args[2], args[3:],
                                                       kernel_lengths)[1][:4]
    mask = None if lengths is None else step_mask(lengths, steps)
    if term.update is not None:
        term.update(records.detach(), bln.detach(), batch, mask)
    if not (term.windowed and term.kind in (ROW, COL)):
        return y, window
    return y, (hist if mask is None else padded_window(term, hist, mask, lengths, batch))


def layer(model_layer, x: Tensor, h0: Tensor, c0: Optional[Tensor], windows: tuple, lengths: Optional[Tensor],
          ops=None):
    """One layer of NormLSTM (``c0`` given) or NormGRU (``c0`` None) on the fast path: the C++
    kernels (``ops`` None: ``torch.ops.atnbench_fast``) or others with their signatures (the
    Triton ones, ``gpu/ops.py``).

    Returns ``(out, h_n, c_n or None, new_windows)`` as the layer's own forward does.

    ``lengths`` (B,) of a padded batch (C++ kernels only): the kernels run the steps that have a
    valid row, hold each sequence's h and c after its last step (the recurrence's ``out`` is then
    the held h, whose last step is h_n) and pool batch statistics over the valid rows; here the
    padded outputs become 0 (as the loop's) and each window state is taken as the loop takes it
    (``padded_window``).
    """
    ops = torch.ops.atnbench_fast if ops is None else ops

    def run(x, h0, c0, windows, lengths):
        xn, window_x = input_term(model_layer, x, windows[0], lengths, ops)
        return _recurrence(model_layer, xn, window_x, h0, c0, windows, lengths, ops)

    return run(x, h0, c0, windows, None) if lengths is None else padded(model_layer, x, h0, c0, windows, lengths, run)


def padded(model_layer, x: Tensor, h0: Tensor, c0: Optional[Tensor], windows: tuple, lengths: Tensor, run):
    """A layer's padded batch on a kernel ``run(x, h0, c0, windows, lengths)`` that takes the rows
    sorted longest first and the steps up to the longest (the active ones), and returns ``(held
    h of every step, h_n, c_n, windows)``: the rows are sorted (each step's running rows are then
    the first ones, and the kernels skip the rest) and put back, the padded outputs zeroed."""
    order = torch.argsort(lengths, descending=True, stable=True)
    inverse = torch.argsort(order)
    by_row = [isinstance(n, AssortedTimeNorm) for n in model_layer.norms()]  # ATN-LN: a window per row
    steps, active = x.shape[0], int(lengths.max())
    x, h0, lengths = x[:active, order], h0[order], lengths[order]
    c0 = None if c0 is None else c0[order]
    windows = tuple(w[:, order] if row and w is not None else w for w, row in zip(windows, by_row))
    held, h_n, c_n, new = run(x, h0, c0, windows, lengths)
    out = torch.where(step_mask(lengths, active).unsqueeze(-1), held, held.new_zeros(()))[:, inverse]
    if active < steps:
        out = torch.cat((out, out.new_zeros((steps - active, *out.shape[1:]))))
    new = tuple(w[:, inverse] if row and w is not None else w for w, row in zip(new, by_row))
    return out, h_n[inverse], None if c_n is None else c_n[inverse], new


def _recurrence(model_layer, xn: Tensor, window_x, h0: Tensor, c0: Optional[Tensor], windows: tuple,
                lengths: Optional[Tensor], ops):
    """``layer``'s recurrence on the normalized input term ``xn``: ``(out, h_n, c_n or None, windows)``."""
    steps, batch = xn.shape[0], xn.shape[1]
    cell = GRU if c0 is None else LSTM
    norms = [model_layer.norm_h] + ([model_layer.norm_c] if cell == LSTM else [])
    terms = []
    for norm, window in zip(norms, windows[1:]):
        term = TERMS[type(norm)](norm, window, steps, xn)
        term.opts[HIST] = _history(term, window, norm, batch, xn)
        terms.append(term)
    if cell == GRU:
        terms.append(Term(NONE, opts=[None, None, xn.new_zeros((0, 0, 2), dtype=torch.float64)] + [None] * 6))
    th, tc = terms
    args = ((th.kind, th.k, th.eps), (tc.kind, tc.k, tc.eps), xn.contiguous(), h0.contiguous(),
            None if c0 is None else c0.contiguous(), model_layer.weight_hh.contiguous(), model_layer.bias_hh,
            *th.opts, *tc.opts)
    differentiable = [t for t in args[2:] if isinstance(t, Tensor)]
    kernel_lengths = None if lengths is None else lengths.cpu()
    if torch.is_grad_enabled() and any(t.requires_grad for t in differentiable):
        out, cn, hh, hc, sth, stc, blh, blc = NormRNNRecurrence.apply(ops, cell, args[0], args[1], kernel_lengths,
                                                                      *args[2:])
    else:
        res = ops.norm_rnn_forward(args[2], args[3], args[4], args[5], args[6], cell, *args[0],
                                   list(th.opts), *args[1], list(tc.opts), False, *_with_lengths(kernel_lengths))
        out, cn, hh, hc, sth, stc, blh, blc = res[:8]
    mask = None if lengths is None else step_mask(lengths, steps)
    for term, records, bln in ((th, sth, blh), (tc, stc, blc)):
        if term.update is not None:
            term.update(records.detach(), bln.detach(), batch, mask)
    new = [window_x]
    for term, window, hist in zip(terms[: len(norms)], windows[1:], (hh, hc)):
        if not (term.windowed and term.kind in (ROW, COL)):
            new.append(window)
        else:
            new.append(hist if mask is None else padded_window(term, hist, mask, lengths, batch))
    return out, out[-1], (cn if cell == LSTM else None), tuple(new)

"""Windowed statistics: the parallel (all steps) and streaming (step by step) paths of ATN
agree with each other and with the loop reference, and the window state continues a
sequence exactly (functional path, module streams, NormLSTM / NormGRU)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from atnbench.nn import LSTMState, NormGRU, NormLSTM, NormSpec, WindowedTensor, detach_state
from atnbench.nn import functional as F
from atnbench.nn.norms import AssortedTimeBatchNorm, AssortedTimeNorm
from atnbench.nn.window import WindowStream, windowed_moments

from reference import as_f64, layer_params, ref_atn_bn, ref_atn_ln, ref_norm_lstm



ATOL = 1e-10
DT = torch.float64


def seq(T, B, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, n, generator=g, dtype=DT)
    scale = torch.rand(T, 1, 1, generator=g, dtype=DT) * 3 + 0.2
    return x * scale + torch.randn(T, 1, 1, generator=g, dtype=DT)


def close(actual, expected, atol=ATOL):
    np.testing.assert_allclose(as_f64(actual), as_f64(expected), rtol=0, atol=atol)


def make_norm(cls, n, k, eps=1e-4, seed=0):
    norm = cls(n, NormSpec(k=k, eps=eps)).to(DT)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(n, generator=g, dtype=DT) + 0.5)
        norm.bias.copy_(torch.randn(n, generator=g, dtype=DT))
    return norm.train()


def run_stream(norm, x, state):
    s = norm.stream(state)
    y = torch.stack([s(x[t]) for t in range(x.shape[0])])
    return y, s.state()


def reference(cls, x, k, norm, past=None):
    fn = ref_atn_ln if cls is AssortedTimeNorm else ref_atn_bn
    return fn(x, k, norm.eps, norm.weight, norm.bias, past=past)


CLASSES = (AssortedTimeNorm, AssortedTimeBatchNorm)


# ----------------------------------------------------------------------------- parallel == stream == reference

@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k", (1, 2, 3, 7))
@pytest.mark.parametrize("B", (1, 4))
def test_parallel_equals_stream_equals_reference(cls, k, B):
    x = seq(10, B, 5, seed=k + B)
    norm = make_norm(cls, 5, k)
    state0 = norm.initial_state(B, x.device)
    y_par, _ = norm(x, state0)
    y_str, _ = run_stream(norm, x, norm.initial_state(B, x.device))
    close(y_par, y_str)
    close(y_par, reference(cls, x, k, norm))


@pytest.mark.parametrize("k", range(1, 41))
def test_stream_correct_for_every_k(k):
    """The stream keeps a running window total (one add, one subtract per step): whatever k,
    the outputs are the window statistics of the last k steps (T = 45 > k, so the window
    fills and then slides)."""
    x = seq(45, 2, 3, seed=k)
    norm = make_norm(AssortedTimeNorm, 3, k)
    y, _ = run_stream(norm, x, norm.initial_state(2, x.device))
    close(y, reference(AssortedTimeNorm, x, k, norm))
    if k in (1, 5, 40):
        nb = make_norm(AssortedTimeBatchNorm, 3, k)
        yb, _ = run_stream(nb, x, nb.initial_state(2, x.device))
        close(yb, reference(AssortedTimeBatchNorm, x, k, nb))


class _CountOps(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("cls", CLASSES)
def test_stream_work_per_step_does_not_depend_on_k(cls):
    """O(1) per step, counted (not timed): once the window is full, one step issues the
    same number of torch operations for k = 1, 2 and 40."""
    x = seq(50, 3, 4)
    counts = {}
    for k in (1, 2, 40):
        norm = make_norm(cls, 4, k)
        s = norm.stream(norm.initial_state(3, x.device))
        for t in range(45):
            s(x[t])
        with _CountOps() as mode:
            s(x[45])
        counts[k] = mode.calls
    assert counts[1] > 0  # the mode does see the step's torch calls
    assert counts[1] == counts[2] == counts[40], counts


def _random_moments(steps, seed):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(steps, 3, generator=g, dtype=DT) * 3 + 5
    variances = torch.rand(steps, 3, generator=g, dtype=DT) + 0.1
    return torch.stack((means, variances), dim=-1)


def _pooled(moments):
    """Window moments straight from the definition: average of means, E[a^2] - mean^2."""
    mean = moments[..., 0].mean(dim=0)
    return mean, (moments[..., 1] + moments[..., 0] ** 2).mean(dim=0) - mean**2


def test_window_stream_counts_and_totals():
    moments = _random_moments(12, 0)
    for k in (1, 3, 5):
        w = WindowStream(k, moments[:0])
        for t in range(12):
            mean, var = w.push(moments[t], DT)
            assert len(w.sums) == min(t + 1, k)
            want_mean, want_var = _pooled(moments[max(0, t - k + 1) : t + 1])
            close(mean, want_mean, atol=1e-12)
            close(var, want_var, atol=1e-12)
        close(w.history(), moments[12 - (k - 1) :] if k > 1 else moments[:0])
    # the state after p < k-1 steps is all p steps (regression: a negative slice start once
    # kept only the last few, e.g. 1 of 10 steps for k = 12)
    for k in (1, 2, 5, 12):
        for p in range(13):
            w = WindowStream(k, moments[:0])
            for t in range(p):
                w.push(moments[t], DT)
            hist = w.history()
            assert hist.shape[0] == min(p, k - 1), (k, p, hist.shape)
            close(hist, moments[max(0, p - (k - 1)) : p])


def test_windowed_moments_counts_and_history():
    moments = _random_moments(7, 1)
    for k in (1, 3, 10):
        mean, var, count, hist = windowed_moments(moments, k, None, DT)
        for t in range(7):
            lo = max(0, t - k + 1)
            assert count[t].item() == t - lo + 1
            want_mean, want_var = _pooled(moments[lo : t + 1])
            close(mean[t], want_mean, atol=1e-12)
            close(var[t], want_var, atol=1e-12)
        assert hist.shape[0] == min(k - 1, 7)
        close(hist, moments[7 - hist.shape[0] :])


# ----------------------------------------------------------------------------- continuation

SPLITS = ([30], [10, 20], [1, 1, 5, 23], [2, 2, 2, 24], [29, 1])


@pytest.mark.parametrize("k", (1, 3, 7))
@pytest.mark.parametrize("splits", SPLITS[1:])
def test_functional_continuation_atn_ln(k, splits):
    x = seq(30, 3, 4, seed=k)
    w, b = torch.rand(4, dtype=DT) + 0.5, torch.randn(4, dtype=DT)
    whole, hist_whole = F.atn_ln_sequence(x, k, 1e-4, w, b, None)
    parts, hist, t0 = [], None, 0
    for size in splits:
        y, hist = F.atn_ln_sequence(x[t0 : t0 + size], k, 1e-4, w, b, hist)
        parts.append(y)
        t0 += size
    close(torch.cat(parts), whole)
    close(hist, hist_whole)
    close(whole, ref_atn_ln(x, k, 1e-4, w, b))


@pytest.mark.parametrize("k", (1, 3, 7))
@pytest.mark.parametrize("splits", SPLITS[1:])
def test_functional_continuation_atn_bn(k, splits):
    x = seq(30, 3, 4, seed=k + 1)
    whole, _, _, hist_whole = F.atn_bn_sequence(x, k, 1e-4, None, None, None)
    parts, hist, t0 = [], None, 0
    for size in splits:
        y, _, _, hist = F.atn_bn_sequence(x[t0 : t0 + size], k, 1e-4, None, None, hist)
        parts.append(y)
        t0 += size
    close(torch.cat(parts), whole)
    close(hist, hist_whole)
    close(whole, ref_atn_bn(x, k, 1e-4))


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("k", (1, 3, 7, 12))
def test_module_continuation_stream_and_forward(cls, k):
    """T = 30 at once equals 10 + 20 with the state passed, whichever path (forward or
    stream) runs each part; the states are interchangeable."""
    B = 3
    x = seq(30, B, 4, seed=k)
    norm = make_norm(cls, 4, k)
    init = lambda: norm.initial_state(B, x.device)  # noqa: E731
    whole, state_whole = norm(x, init())
    close(whole, reference(cls, x, k, norm))
    for first, second in (("stream", "stream"), ("forward", "stream"), ("stream", "forward"), ("forward", "forward")):
        run = {"stream": lambda xx, st: run_stream(norm, xx, st), "forward": lambda xx, st: norm(xx, st)}
        y1, st = run[first](x[:10], init())
        y2, st = run[second](x[10:], st)
        close(torch.cat([y1, y2]), whole)
        close(st, state_whole)
    # and the reference continued from the raw first part
    y2, _ = run_stream(norm, x[10:], norm(x[:10], init())[1])
    close(y2, reference(cls, x[10:], k, norm, past=x[:10]))


def _randomize(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    return model


@pytest.mark.parametrize("cell", ("lstm", "gru"))
@pytest.mark.parametrize("num_layers", (1, 2))
@pytest.mark.parametrize("batch_first", (False, True))
@pytest.mark.parametrize("k", (1, 4, 15))
def test_model_continuation_atn(cell, num_layers, batch_first, k):
    cls = NormLSTM if cell == "lstm" else NormGRU
    model = _randomize(cls(3, 5, num_layers, batch_first=batch_first, norm="atn", k=k).to(DT))
    x = seq(30, 2, 3, seed=k)
    if batch_first:
        x = x.transpose(0, 1).contiguous()
    split = (slice(None, 10), slice(10, None)) if not batch_first else ((slice(None), slice(None, 10)), (slice(None), slice(10, None)))
    cat_dim = 1 if batch_first else 0
    out, state = model(x)
    out1, state1 = model(x[split[0]])
    out2, state2 = model(x[split[1]], state1)
    close(torch.cat([out1, out2], dim=cat_dim), out)
    if cell == "lstm":  # nn.LSTM's (h, c), nn.GRU's h; the windows ride on h
        assert isinstance(state, LSTMState) and isinstance(state2, LSTMState)
        close(state2.c, state.c)
    h, h2 = (state[0], state2[0]) if cell == "lstm" else (state, state2)
    assert isinstance(h, WindowedTensor) and isinstance(h2, WindowedTensor)
    close(h2, h)
    for layer_w, layer_w2 in zip(h.windows, h2.windows):
        for w, w2 in zip(layer_w, layer_w2):
            close(w2, w)
    # detaching between truncated-BPTT segments changes no value
    out2d, _ = model(x[split[1]], detach_state(state1))
    close(out2d, out2)


def test_lstm_continuation_matches_reference_with_raw_past():
    """The continued second part equals the reference LSTM fed the raw earlier terms of
    every window (input, hidden and cell) and the first part's h, c."""
    k = 4
    model = _randomize(NormLSTM(3, 4, norm="atn", k=k).to(DT))
    x = seq(12, 2, 3, seed=3)
    params = layer_params(model)
    out1, st1 = model(x[:5])
    out2, _ = model(x[5:], st1)
    ref_all, _, _ = ref_norm_lstm(x, params, "atn", k=k, eps=model.spec.eps)
    close(torch.cat([out1, out2]), ref_all)


@pytest.mark.parametrize("cell", ("lstm", "gru"))
def test_model_continuation_atn_bn_training(cell):
    """ATN-BN is windowed too: in training (batch statistics) 10 + 20 equals 30."""
    cls = NormLSTM if cell == "lstm" else NormGRU
    model = _randomize(cls(3, 4, norm="atn-bn", k=5).to(DT)).train()
    x = seq(30, 4, 3, seed=9)
    out, state = model(x)
    out1, st1 = model(x[:10])
    out2, st2 = model(x[10:], st1)
    close(torch.cat([out1, out2]), out)
    close(st2[0] if cell == "lstm" else st2, state[0] if cell == "lstm" else state)


@pytest.mark.parametrize("kind", ("bn", "atn-bn", "atn-bn-batch", "bln-pop", "bln-mixed", "bln-current"))
def test_eval_parallel_equals_stream_with_population_statistics(kind):
    """In evaluation the batch normalizations use per-step population statistics; the
    parallel path (input term) and the stream (recurrent terms) must still give the same
    numbers, including steps beyond the trained length (T_eval = 9 > T_train = 4)."""
    from atnbench.nn.norms import BatchLayerNorm, StepBatchNorm

    n, B = 4, 3
    if kind == "bn":
        norm = StepBatchNorm(n, NormSpec(momentum=0.5))
    elif kind.startswith("atn-bn"):
        norm = AssortedTimeBatchNorm(n, NormSpec(k=3, momentum=0.5, atn_bn_eval="batch" if kind.endswith("batch") else "population"))
    else:
        flags = {"bln-pop": (True,) * 4, "bln-mixed": (True, False, False, True), "bln-current": (False,) * 4}[kind]
        norm = BatchLayerNorm(n, NormSpec(momentum=0.5, bln_population=flags))
    norm = norm.to(DT).train()
    init = lambda: norm.initial_state(B, torch.device("cpu"))  # noqa: E731
    for seed in range(3):
        norm(seq(4, B, n, seed=seed), init())
    norm.eval()
    x = seq(9, B, n, seed=10)
    y_par, _ = norm(x, init())
    y_str, _ = run_stream(norm, x, init())
    close(y_par, y_str)
    if kind == "atn-bn":  # population window moments of step t, the last trained step beyond
        for t in range(9):
            row = min(t, 3)
            mean, var = norm.stats.mean[row], norm.stats.var[row]
            close(y_par[t], (x[t] - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias)


def test_long_sequence_far_from_zero_keeps_float64_accuracy():
    """ATN is invariant to a common offset; the shifted power sums keep it so numerically over
    long sequences (unshifted cumulative sums of E[a^2] lost ~1e-4 here at T=4000, offset 1e4)."""
    from atnbench.nn import AssortedTimeNorm, NormSpec

    g = torch.Generator().manual_seed(5)
    x = torch.randn(4000, 2, 8, generator=g, dtype=DT)
    exact = F.assorted_time_norm(x, 10)
    shifted = x + 1e4
    close(F.assorted_time_norm(shifted, 10), exact, atol=1e-9)
    norm = AssortedTimeNorm(8, NormSpec(k=10, affine=False)).to(DT)
    stream = norm.stream(norm.initial_state(2, x.device))
    close(torch.stack([stream(step) for step in shifted]), exact, atol=1e-9)

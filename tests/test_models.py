"""NormLSTM / NormGRU: drop-in equivalence with torch's modules, every norm running in every
mode, and each normalized cell equal to the reference loop of tests/reference.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from atnbench.nn import LSTMState, NormGRU, NormLSTM, WindowedTensor
from atnbench.nn.norms import NormSpec, StepBatchNorm

from reference import as_f64, layer_params, ref_bn_step, ref_bn_steps, ref_norm_gru, ref_norm_lstm

DT = torch.float64
NORMS = ("none", "ln", "atn", "atn-bn", "bn", "bn-input", "bln")
BATCH_NORMS = ("atn-bn", "bn", "bn-input", "bln")




def close(actual, expected, atol=1e-10):
    np.testing.assert_allclose(as_f64(actual), as_f64(expected), rtol=0, atol=atol)


def inputs(T, B, d, seed=0, dtype=DT):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, d, generator=g, dtype=torch.float64)
    return (x * (torch.rand(T, 1, 1, generator=g, dtype=torch.float64) + 0.5)).to(dtype)


def randomize(model, seed=0):
    """Random weights and biases; gains in [0.5, 1.5] and random shifts for the norms, so
    that a wrong gain/shift placement shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.rand(p.shape, generator=g, dtype=torch.float64).to(p.dtype)
            if name.startswith("layers.") and ".norm_" in name and name.endswith("weight"):
                p.copy_(r + 0.5)
            else:
                p.copy_((r - 0.5) * 1.2)
    return model


def time_first(x, batch_first):
    return x.transpose(0, 1).contiguous() if batch_first else x


# ----------------------------------------------------------------------------- drop-in equality

def copy_from_torch(model, ref, num_layers):
    with torch.no_grad():
        if model.fused:
            model.rnn.load_state_dict(ref.state_dict())
            return
        for i, layer in enumerate(model.layers):
            layer.weight_ih.copy_(getattr(ref, f"weight_ih_l{i}"))
            layer.weight_hh.copy_(getattr(ref, f"weight_hh_l{i}"))
            if layer.bias_ih is not None:
                layer.bias_ih.copy_(getattr(ref, f"bias_ih_l{i}"))
                layer.bias_hh.copy_(getattr(ref, f"bias_hh_l{i}"))


def every_layout(test):
    """Both backends, one and two layers, time- and batch-first, with and without biases."""
    for name, values in (("bias", (True, False)), ("batch_first", (False, True)), ("num_layers", (1, 2)),
                         ("backend", ("auto", "loop"))):
        test = pytest.mark.parametrize(name, values)(test)
    return test


@every_layout
def test_none_lstm_equals_torch_lstm(backend, num_layers, batch_first, bias):
    torch.manual_seed(0)
    ref = nn.LSTM(3, 4, num_layers, bias=bias, batch_first=batch_first).to(DT)
    model = NormLSTM(3, 4, num_layers, bias=bias, batch_first=batch_first, norm="none", backend=backend).to(DT)
    assert model.fused == (backend == "auto")
    copy_from_torch(model, ref, num_layers)
    x = time_first(inputs(7, 3, 3), batch_first)
    h0 = torch.randn(num_layers, 3, 4, dtype=DT)
    c0 = torch.randn(num_layers, 3, 4, dtype=DT)
    for state in (None, (h0, c0)):
        out, (h, c) = ref(x, state)
        out2, st = model(x, state)
        assert isinstance(st, LSTMState)
        close(out2, out)
        close(st.h, h)
        close(st.c, c)


@pytest.mark.parametrize("backend", ("auto", "loop"))
def test_none_lstm_equals_torch_lstm_float32(backend):
    torch.manual_seed(1)
    ref = nn.LSTM(3, 5, 2)
    model = NormLSTM(3, 5, 2, norm="none", backend=backend)
    copy_from_torch(model, ref, 2)
    x = inputs(9, 4, 3, dtype=torch.float32)
    out, (h, c) = ref(x)
    out2, (h2, c2) = model(x)
    close(out2, out, atol=1e-6)
    close(h2, h, atol=1e-6)
    close(c2, c, atol=1e-6)


@every_layout
def test_none_gru_equals_torch_gru(backend, num_layers, batch_first, bias):
    torch.manual_seed(0)
    ref = nn.GRU(3, 4, num_layers, bias=bias, batch_first=batch_first).to(DT)
    model = NormGRU(3, 4, num_layers, bias=bias, batch_first=batch_first, norm="none", backend=backend).to(DT)
    copy_from_torch(model, ref, num_layers)
    x = time_first(inputs(7, 3, 3), batch_first)
    h0 = torch.randn(num_layers, 3, 4, dtype=DT)
    for state in (None, h0):
        out, h = ref(x, state)
        out2, h2 = model(x, state)
        close(out2, out)
        close(h2, h)


def test_none_gru_equals_torch_gru_float32():
    torch.manual_seed(1)
    ref = nn.GRU(3, 5, 2)
    model = NormGRU(3, 5, 2, norm="none", backend="loop")
    copy_from_torch(model, ref, 2)
    x = inputs(9, 4, 3, dtype=torch.float32)
    out, h = ref(x)
    out2, h2 = model(x)
    close(out2, out, atol=1e-6)
    close(h2, h, atol=1e-6)


# ----------------------------------------------------------------------------- every norm runs

@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("cell", ("lstm", "gru"))
@pytest.mark.parametrize("batch_first", (False, True))
@pytest.mark.parametrize("num_layers", (1, 2))
@pytest.mark.parametrize("B", (1, 3))
def test_every_norm_forward_backward_train_eval(norm, cell, batch_first, num_layers, B):
    cls = NormLSTM if cell == "lstm" else NormGRU
    model = cls(3, 4, num_layers, batch_first=batch_first, norm=norm, k=3)
    x = time_first(inputs(5, B, 3, dtype=torch.float32), batch_first)
    for mode in ("train", "eval"):
        model.train(mode == "train")
        model.zero_grad()
        out, state = model(x)
        assert out.shape == ((B, 5, 4) if batch_first else (5, B, 4))
        h = state[0] if isinstance(state, tuple) else state
        assert h.shape == (num_layers, B, 4)
        assert torch.isfinite(out).all(), (norm, mode)
        (out.square().sum() + h.sum()).backward()
        for name, p in model.named_parameters():
            assert p.grad is not None, name
            assert torch.isfinite(p.grad).all(), (name, mode)
        if B > 1 or norm not in BATCH_NORMS:
            # at batch size 1 the batch normalizations only have to stay finite
            assert out.abs().sum() > 0


def test_sequence_bn_input_runs_with_lengths():
    model = NormLSTM(3, 4, norm="bn-input", bn_input_mode="sequence")
    x = inputs(6, 3, 3, dtype=torch.float32)
    lengths = torch.tensor([6, 2, 4])
    for mode in (True, False):
        model.train(mode)
        out, _ = model(x, lengths=lengths)
        out.sum().backward()
        assert torch.isfinite(out).all()


# ----------------------------------------------------------------------------- against the reference loop

REF_CASES = [(norm, inside) for norm in NORMS for inside in (True, False)]


@pytest.mark.parametrize("norm,bias_inside", REF_CASES)
@pytest.mark.parametrize("num_layers", (1, 2))
def test_lstm_equals_reference_loop(norm, bias_inside, num_layers):
    """Train mode, float64: the normalized LSTM (eqs. 14-16 with each norm, bias inside
    N(W_h h + b_h) + N(W_x x + b_x) or outside N(W_h h) + N(W_x x) + b) equals the loop."""
    k, eps = 3, 1e-3
    model = randomize(NormLSTM(3, 4, num_layers, norm=norm, k=k, eps=eps, bias_inside=bias_inside,
                               backend="loop").to(DT))
    assert model.bias_inside == bias_inside
    model.train()
    x = inputs(6, 4, 3, seed=num_layers)
    h0 = torch.randn(num_layers, 4, 4, dtype=DT) * 0.5
    c0 = torch.randn(num_layers, 4, 4, dtype=DT) * 0.5
    out, st = model(x, (h0, c0))
    ref_out, ref_h, ref_c = ref_norm_lstm(x, layer_params(model), norm, k=k, eps=eps, h0=h0, c0=c0)
    close(out, ref_out)
    close(st.h, ref_h)
    close(st.c, ref_c)


@pytest.mark.parametrize("bias_inside", (True, False))
def test_lstm_sequence_bn_input_equals_reference(bias_inside):
    model = randomize(NormLSTM(3, 4, norm="bn-input", bn_input_mode="sequence", eps=1e-3,
                               bias_inside=bias_inside).to(DT)).train()
    x = inputs(6, 3, 3, seed=5)
    lengths = torch.tensor([6, 2, 4])
    out, st = model(x, lengths=lengths)
    ref_out, ref_h, ref_c = ref_norm_lstm(x, layer_params(model), "bn-input", eps=1e-3,
                                          bn_input_mode="sequence", lengths=lengths)
    close(out, ref_out)
    close(st.h, ref_h)
    close(st.c, ref_c)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("bias_inside", (True, False))
def test_gru_equals_reference_loop(norm, bias_inside):
    k, eps = 3, 1e-3
    model = randomize(NormGRU(3, 4, 2, norm=norm, k=k, eps=eps, bias_inside=bias_inside,
                              backend="loop").to(DT)).train()
    x = inputs(6, 4, 3, seed=7)
    out, st = model(x)
    h = st.h if hasattr(st, "h") else st
    ref_out, ref_h = ref_norm_gru(x, layer_params(model), norm, k=k, eps=eps)
    close(out, ref_out)
    close(h, ref_h)


def test_atn_lstm_k_larger_than_sequence_equals_reference():
    model = randomize(NormLSTM(3, 4, norm="atn", k=50).to(DT))
    x = inputs(7, 2, 3)
    out, st = model(x)
    assert isinstance(st, LSTMState) and isinstance(st.h, WindowedTensor)
    close(out, ref_norm_lstm(x, layer_params(model), "atn", k=50, eps=model.spec.eps)[0])


# ----------------------------------------------------------------------------- k = 1, gains, bias placement

@pytest.mark.parametrize("cell", ("lstm", "gru"))
@pytest.mark.parametrize("bias_inside", (True, False))
def test_atn_k1_equals_ln(cell, bias_inside):
    cls = NormLSTM if cell == "lstm" else NormGRU
    atn = randomize(cls(3, 5, 2, norm="atn", k=1, bias_inside=bias_inside).to(DT))
    ln = cls(3, 5, 2, norm="ln", bias_inside=bias_inside).to(DT)
    ln.load_state_dict(atn.state_dict())
    x = inputs(8, 3, 3)
    out_a, st_a = atn(x)
    out_l, st_l = ln(x)
    close(out_a, out_l, atol=1e-12)
    close(st_a[0] if cell == "lstm" else st_a, st_l[0] if cell == "lstm" else st_l, atol=1e-12)
    if cell == "lstm":
        close(st_a.c, st_l.c, atol=1e-12)


@pytest.mark.parametrize("cls", (NormLSTM, NormGRU))
def test_default_gains(cls):
    """Cooijmans et al.: recurrent BN's gain starts at 0.1 (all of bn's norms), and so does
    ATN-BN's, which normalizes with BN statistics; the others 1."""
    for scheme in ("bn", "atn-bn"):
        for name, norm in cls(3, 4, 2, norm=scheme).norm_modules():
            assert torch.all(norm.weight == torch.tensor(0.1)), (scheme, name)
            assert torch.all(norm.bias == 0.0), (scheme, name)
    for name, norm in cls(3, 4, norm="atn-bn", gain_init=1.0).norm_modules():
        assert torch.all(norm.weight == 1.0), name
    for scheme in ("ln", "atn", "bln", "bn-input"):
        for name, norm in cls(3, 4, norm=scheme).norm_modules():
            if norm.weight is not None:
                assert torch.all(norm.weight == 1.0), (scheme, name)
    for name, norm in cls(3, 4, norm="bn", gain_init=0.5).norm_modules():
        assert torch.all(norm.weight == 0.5), name
    for name, norm in cls(3, 4, norm="atn", affine=False).norm_modules():
        assert norm.weight is None and norm.bias is None, name


def test_bias_placement_defaults():
    """LN/ATN put the bias inside the normalizations (b_ih, b_hh), batch norms outside (b)."""
    for norm, inside in (("none", True), ("ln", True), ("atn", True), ("atn-bn", False),
                         ("bn", False), ("bn-input", False), ("bln", False)):
        layer = NormLSTM(3, 4, norm=norm, backend="loop").layers[0]
        assert (layer.bias_ih is not None) == inside, norm
        assert (layer.bias is not None) == (not inside), norm


def test_bias_inside_batch_statistics_is_dead():
    """Why batch norms default to the bias outside: a per-feature constant inside BN is
    removed by the batch mean, so b_ih / b_hh get no gradient (train mode)."""
    model = randomize(NormLSTM(3, 4, norm="bn", bias_inside=True).to(DT)).train()
    out, _ = model(inputs(5, 4, 3))
    out.square().sum().backward()
    layer = model.layers[0]
    assert layer.bias_ih.grad.abs().max() < 1e-12
    assert layer.bias_hh.grad.abs().max() < 1e-12
    assert layer.weight_ih.grad.abs().max() > 1e-6


# ----------------------------------------------------------------------------- BN population statistics

def test_step_batch_norm_eval_reuses_last_trained_step():
    """Cooijmans et al.: population statistics per step up to T_max (the longest training
    sequence); at test time steps beyond T_max use step T_max's statistics."""
    n, B = 4, 5
    norm = StepBatchNorm(n, NormSpec(momentum=1.0, eps=1e-3)).to(DT).train()
    xt = inputs(3, B, n, seed=1)
    norm(xt)
    assert int(norm.stats.steps_seen) == 3
    _, mean, var = ref_bn_steps(xt, 1e-3)
    close(norm.stats.mean[:3], mean)
    close(norm.stats.var[:3], var * B / (B - 1))  # unbiased population variance
    norm.eval()
    xe = inputs(7, B, n, seed=2)
    y, _ = norm(xe)
    s = norm.stream(None)
    y_stream = torch.stack([s(xe[t]) for t in range(7)])
    for t in range(7):
        row = min(t, 2)
        expected = ref_bn_step(as_f64(xe[t]), 1e-3, as_f64(norm.weight), as_f64(norm.bias),
                               mean[row], var[row] * B / (B - 1))[0]
        close(y[t], expected)
        close(y_stream[t], expected)


def test_bn_lstm_eval_beyond_trained_length_equals_reference():
    """Train a BN-LSTM pass on T = 3 (momentum 1: the population is that batch's statistics),
    then evaluate T = 7: every normalized term uses its per-step population statistics, and
    steps 3..6 reuse step 2's. Checked against the reference loop in population mode, the
    population built from the reference's own training-pass batch statistics."""
    B, eps = 5, 1e-3
    model = randomize(NormLSTM(3, 4, norm="bn", eps=eps, momentum=1.0).to(DT)).train()
    params = layer_params(model)
    xt = inputs(3, B, 3, seed=1)
    out_t, _ = model(xt)
    record = []
    ref_out_t = ref_norm_lstm(xt, params, "bn", eps=eps, record=record)[0]
    close(out_t, ref_out_t)
    population = {}
    for term, norm in zip(("input", "hidden", "cell"), model.layers[0].norms()):
        means = np.stack([m for m, _ in record[0][term]])
        variances = np.stack([v for _, v in record[0][term]]) * B / (B - 1)
        close(norm.stats.mean[:3], means)
        close(norm.stats.var[:3], variances)
        assert int(norm.stats.steps_seen) == 3
        population[term] = (means, variances, 3)
    model.eval()
    xe = inputs(7, B, 3, seed=2)
    out_e, st_e = model(xe)
    ref_out_e, ref_h, ref_c = ref_norm_lstm(xe, params, "bn", eps=eps, population=[population])
    close(out_e, ref_out_e)
    close(st_e.h, ref_h)
    close(st_e.c, ref_c)
    # evaluation is per example: a batch of 1 gives the same numbers for that example
    out_1, _ = model(xe[:, 2:3])
    close(out_1[:, 0], out_e[:, 2])


def test_population_statistics_not_updated_in_eval():
    model = NormLSTM(3, 4, norm="bn", momentum=0.5)
    model.train()
    model(inputs(4, 3, 3, dtype=torch.float32))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    model.eval()
    model(inputs(6, 3, 3, seed=3, dtype=torch.float32))
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_atn_bn_population_statistics_are_the_window_moments():
    """ATN-BN keeps, per step, an exponential average of its training window moments (the
    pooled batch x window mean and variance, unbiased over the B x window values, as BN
    keeps an unbiased running variance); momentum 1 stores the last batch's.
    Both the parallel path and the stream update them identically."""
    from atnbench.nn.norms import AssortedTimeBatchNorm
    from reference import ref_atn_bn

    n, B, k = 4, 3, 3
    x = inputs(6, B, n, seed=4)
    _, rmean, rvar = ref_atn_bn(x, k, 1e-3, return_stats=True)
    for path in ("forward", "stream"):
        norm = AssortedTimeBatchNorm(n, NormSpec(k=k, eps=1e-3, momentum=1.0)).to(DT).train()
        state = norm.initial_state(B, x.device)
        if path == "forward":
            norm(x, state)
        else:
            s = norm.stream(state)
            for t in range(6):
                s(x[t])
        assert int(norm.stats.steps_seen) == 6
        close(norm.stats.mean[:6], rmean)
        pooled = np.array([[B * min(t + 1, k)] for t in range(6)], dtype=float)
        close(norm.stats.var[:6], rvar * pooled / (pooled - 1))


def test_bln_population_statistics():
    """BLN's population estimates (Algorithm 2, eqs. 18-21): E[mu_B], m/(m-1) E[sigma_B],
    E[mu_F], m/(m-1) E[sigma_F], per step; momentum 1 stores the last batch's."""
    from atnbench.nn.norms import BatchLayerNorm
    from reference import ref_bln

    n, B, eps = 5, 4, 1e-3
    x = inputs(3, B, n, seed=6)
    _, st = ref_bln(x, eps)
    norm = BatchLayerNorm(n, NormSpec(eps=eps, momentum=1.0)).to(DT).train()
    norm(x)
    c = B / (B - 1)
    close(norm.stats.batch_mean[:3], st["batch_mean"])
    close(norm.stats.batch_std[:3], st["batch_std"] * c)
    close(norm.stats.feature_mean[:3], st["feature_mean"].mean(axis=1))
    close(norm.stats.feature_std[:3], st["feature_std"].mean(axis=1) * c)
    # evaluation with every flag True uses exactly those (eqs. 22-24), steps >= 3 reuse step 2
    norm_pop = BatchLayerNorm(n, NormSpec(eps=eps, momentum=1.0, bln_population=(True,) * 4)).to(DT).train()
    norm_pop.load_state_dict(norm.state_dict())
    norm_pop.eval()
    xe = inputs(5, B, n, seed=7)
    y, _ = norm_pop(xe)
    given = []
    for t in range(5):
        r = min(t, 2)
        given.append({"batch_mean": st["batch_mean"][r], "batch_std": st["batch_std"][r] * c,
                      "feature_mean": st["feature_mean"][r].mean(), "feature_std": st["feature_std"][r].mean() * c})
    close(y, ref_bln(xe, eps, norm_pop.weight, norm_pop.bias, given)[0])


def test_sequence_batch_norm_running_statistics():
    """Laurent et al.'s sequence-wise BN keeps one population estimate over the unpadded
    frames (unbiased: n_frames / (n_frames - 1)) and uses it in evaluation."""
    from atnbench.nn.norms import SequenceBatchNorm
    from reference import ref_seq_bn

    n = 4
    x = inputs(6, 3, n, seed=8)
    lengths = torch.tensor([6, 2, 4])
    frames = 12
    _, mean, var = ref_seq_bn(x, 1e-3, lengths=lengths)
    norm = SequenceBatchNorm(n, NormSpec(eps=1e-3, momentum=1.0)).to(DT).train()
    norm(x, None, lengths)
    close(norm.running_mean, mean)
    close(norm.running_var, var * frames / (frames - 1))
    norm.eval()
    xe = inputs(5, 2, n, seed=9)
    y, _ = norm(xe)
    close(y, (as_f64(xe) - mean) / np.sqrt(var * frames / (frames - 1) + 1e-3) * as_f64(norm.weight) + as_f64(norm.bias))
    with pytest.raises(ValueError):
        norm.stream(None)

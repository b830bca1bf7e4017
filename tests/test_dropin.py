"""NormLSTM / NormGRU as drop-ins: bidirectional, PackedSequence and padded batches with lengths,
weights interchangeable with nn.LSTM / nn.GRU (issue 15), and padding that no statistic sees
(issue 13, point 4).

What "a packed batch equals each sequence run alone" means per normalization:
- per-sample norms (none, LN, ATN) in training and evaluation, and batch norms in evaluation
  with population statistics: exactly that (float64, 1e-10), values and gradients;
- batch norms in training: a sequence's output depends on the batch by design, so the packed
  batch is checked against the float64 reference of tests/reference.py in which the batch of
  step t is the sequences still valid at t (``_TermNorm``), and against the same batch with
  different padding values (padding must change nothing).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

from atnbench.nn import LSTMState, NormGRU, NormLSTM, WindowedTensor
from atnbench.nn.padding import last_steps, reverse_padded

from reference import as_f64, layer_params, ref_norm_gru, ref_norm_lstm
from helpers import randomize

DT = torch.float64
CELLS = {"lstm": (NormLSTM, nn.LSTM), "gru": (NormGRU, nn.GRU)}
PER_SAMPLE = ("none", "ln", "atn")
BATCH = ("atn-bn", "bn", "bn-input", "bn-input-seq", "bln")
LENGTHS = {"one": [4], "one-step": [1, 1], "equal": [4, 4, 4], "sorted": [5, 3, 3, 1], "unsorted": [2, 5, 1, 4]}
D, H, K, EPS = 3, 4, 3, 1e-3


def close(actual, expected, atol=1e-10):
    np.testing.assert_allclose(as_f64(actual), as_f64(expected), rtol=0, atol=atol)


def make(cell, norm, bidirectional=True, layers=2, backend="loop", seed=0):
    """A float64 model with random weights, gains in [0.5, 1.5] and random shifts."""
    options = dict(bn_input_mode="sequence") if norm == "bn-input-seq" else {}
    model = CELLS[cell][0](D, H, layers, bidirectional=bidirectional, norm=norm.replace("-seq", ""), k=K,
                           eps=EPS, backend=backend, **options).to(DT)
    return randomize(model, seed)


def sequences(lengths, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, D, generator=g, dtype=DT) * (1 + 0.5 * torch.rand(n, 1, generator=g, dtype=DT))
            for n in lengths]


def final_states(cell, state):
    return [state[0], state[1]] if cell == "lstm" else [state]


def loss_weights(cell, model, batch, steps, seed=2):
    g = torch.Generator().manual_seed(seed)
    out = torch.randn(steps, batch, H * (2 if model.bidirectional else 1), generator=g, dtype=DT)
    directions = 2 if model.bidirectional else 1
    states = [torch.randn(model.num_layers * directions, batch, H, generator=g, dtype=DT)
              for _ in range(2 if cell == "lstm" else 1)]
    return out, states


def padded_loss(cell, out, state, weights):
    w_out, w_states = weights
    return (out * w_out[: out.shape[0]]).sum() + sum((s * w).sum() for s, w in zip(final_states(cell, state), w_states))


def grads(model, *tensors):
    return [p.grad.clone() for p in model.parameters()] + [t.grad.clone() for t in tensors]


def run_packed(cell, model, xs, enforce_sorted):
    """The batch packed (sorted by length where ``enforce_sorted``); returns padded output in the
    original order, the state, the parameter and per-sequence input gradients."""
    model.zero_grad()
    xs = [x.clone().requires_grad_(True) for x in xs]
    lengths = torch.tensor([len(x) for x in xs])
    padded = pad_sequence(xs)
    packed = pack_padded_sequence(padded, lengths, enforce_sorted=enforce_sorted)
    out, state = model(packed)
    assert isinstance(out, torch.nn.utils.rnn.PackedSequence)
    assert torch.equal(out.batch_sizes, packed.batch_sizes)
    out, out_lengths = pad_packed_sequence(out)
    assert out_lengths.tolist() == lengths.tolist()
    padded_loss(cell, out, state, loss_weights(cell, model, len(xs), max(lengths))).backward()
    return out, state, grads(model, *xs)


def run_alone(cell, model, xs):
    """Each sequence as a batch of one; returns the padded outputs, stacked states and gradients."""
    model.zero_grad()
    xs = [x.clone().requires_grad_(True) for x in xs]
    steps = max(len(x) for x in xs)
    w_out, w_states = loss_weights(cell, model, len(xs), steps)
    outs, states = [], []
    for b, x in enumerate(xs):
        out, state = model(x.unsqueeze(1))
        padded_loss(cell, out, state, (w_out[:, b:b + 1], [w[:, b:b + 1] for w in w_states])).backward()
        outs.append(out[:, 0])
        states.append(final_states(cell, state))
    out = pad_sequence(outs)
    return out, [torch.cat(s, dim=1) for s in zip(*states)], grads(model, *xs)


# ----------------------------------------------------------------------------- nn.LSTM / nn.GRU

@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("backend", ("auto", "loop"))
@pytest.mark.parametrize("enforce_sorted", (True, False))
def test_none_bidirectional_packed_equals_torch(cell, backend, enforce_sorted):
    """norm="none", 2 bidirectional layers, packed: nn.LSTM / nn.GRU's outputs, final states and
    gradients (weights loaded from the torch module's state dict)."""
    torch.manual_seed(0)
    ref = CELLS[cell][1](D, H, 2, bidirectional=True).to(DT)
    model = CELLS[cell][0](D, H, 2, bidirectional=True, norm="none", backend=backend).to(DT)
    assert model.fused == (backend == "auto")
    model.load_torch_state_dict(ref.state_dict())
    xs = sequences([5, 3, 3, 1] if enforce_sorted else [2, 5, 1, 4])
    out, state, g = run_packed(cell, model, xs, enforce_sorted)
    ref_out, ref_state, ref_g = run_packed(cell, ref, xs, enforce_sorted)
    close(out, ref_out, 1e-12)
    for a, b in zip(final_states(cell, state), final_states(cell, ref_state)):
        close(a, b, 1e-12)
    by_name = dict(zip([n for n, _ in ref.named_parameters()], ref_g))
    inputs_g, ref_inputs_g = g[-len(xs):], ref_g[-len(xs):]
    for a, b in zip(inputs_g, ref_inputs_g):
        close(a, b, 1e-12)
    # parameter gradients, matched by nn.LSTM name
    for name, grad in _torch_named_grads(model).items():
        close(grad, by_name[name], 1e-12)


def _torch_named_grads(model):
    if model.fused:
        return {n: p.grad for n, p in model.rnn.named_parameters()}
    out = {}
    for index, layer in enumerate(model.layers):
        i, d = divmod(index, model.num_directions)
        suffix = f"_l{i}{'_reverse' if d else ''}"
        for attr in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            out[attr + suffix] = getattr(layer, attr).grad
    return out


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm", ("none", "ln", "atn", "bn", "bln"))
def test_state_dict_interchangeable_with_torch(cell, norm):
    """An nn.LSTM / nn.GRU state dict loads into the normalized model and back, unchanged; with
    norm="none" a whole model's checkpoint around nn.LSTM loads with load_state_dict."""
    torch.manual_seed(1)
    ref = CELLS[cell][1](D, H, 2, bidirectional=True)
    model = CELLS[cell][0](D, H, 2, bidirectional=True, norm=norm)
    if cell == "gru" and not model.bias_inside:  # one bias, added to the input term: nn.GRU's b_hn has no place
        with pytest.raises(ValueError, match="b_hn"):
            model.load_torch_state_dict(ref.state_dict())
        with torch.no_grad():
            for name, value in ref.named_parameters():
                if name.startswith("bias_hh"):
                    value[2 * H:] = 0  # the n gate's
    model.load_torch_state_dict(ref.state_dict())
    back = CELLS[cell][1](D, H, 2, bidirectional=True)
    back.load_state_dict(model.torch_state_dict())
    x = torch.randn(5, 3, D)
    torch.testing.assert_close(back(x)[0], ref(x)[0])  # the module given back computes what it was given
    for name, value in ref.state_dict().items():
        if model.bias_inside or not name.startswith("bias"):
            assert torch.equal(back.state_dict()[name], value), name
        elif name.startswith("bias_ih"):  # bias outside: one bias, b_ih + b_hh
            other = ref.state_dict()[name.replace("bias_ih", "bias_hh")]
            assert torch.allclose(back.state_dict()[name], value + other)
            assert not back.state_dict()[name.replace("bias_ih", "bias_hh")].any()
    # plain load_state_dict: the torch names are accepted (the norms' own parameters stay)
    wrapped_ref, wrapped = nn.Sequential(ref), nn.Sequential(CELLS[cell][0](D, H, 2, bidirectional=True, norm=norm))
    missing, unexpected = wrapped.load_state_dict(wrapped_ref.state_dict(), strict=norm == "none")
    assert not unexpected and all(".norm_" in name for name in missing)
    assert torch.equal(wrapped[0].torch_state_dict()["weight_hh_l1_reverse"], ref.weight_hh_l1_reverse)


def test_load_torch_state_dict_refuses_other_shapes():
    model = NormLSTM(D, H, 2, bidirectional=True, norm="ln")
    with pytest.raises(ValueError, match="missing"):
        model.load_torch_state_dict(nn.LSTM(D, H, 1, bidirectional=True).state_dict())
    with pytest.raises(ValueError, match="shape"):
        model.load_torch_state_dict(nn.LSTM(D, H + 1, 2, bidirectional=True).state_dict())


# ----------------------------------------------------------------------------- packed = run alone

@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm", PER_SAMPLE + tuple(n for n in BATCH if n != "bln"))
@pytest.mark.parametrize("case", LENGTHS)
def test_packed_batch_equals_each_sequence_alone(cell, norm, case):
    """Every norm (batch norms in evaluation, with population statistics of a training pass):
    a packed bidirectional 2-layer batch equals each sequence run alone, values and gradients
    (parameters: the batch's gradient is the sum of the sequences').

    Not BLN: even with every statistic from the population, eq. 24 mixes its two parts with
    weights 1/m of the batch size, so no BLN output is per example; the masked reference
    (next tests) covers it."""
    model = make(cell, norm)
    if norm in BATCH:
        model.train()
        model(pad_sequence(sequences([6, 6, 6, 6], seed=9)))  # population statistics
        model.eval()
    xs = sequences(LENGTHS[case])
    out, state, g = run_packed(cell, model, xs, enforce_sorted=case != "unsorted")
    ref_out, ref_state, ref_g = run_alone(cell, model, xs)
    close(out, ref_out)
    for a, b in zip(final_states(cell, state), ref_state):
        close(a, b)
    for a, b in zip(g, ref_g):
        close(a, b)


@pytest.mark.parametrize("norm", ("ln", "atn"))
@pytest.mark.parametrize("backend", ("auto", "function"))
def test_packed_loop_equals_fast_path_alone(norm, backend):
    """A packed batch on the C++ fast path (the mask in norm_rnn.cpp; ``"function"`` has none: the
    loop) equals each sequence alone on the fast path (equal-length batches, both directions)."""
    fast = make("lstm", norm, backend=backend)
    xs = sequences(LENGTHS["unsorted"])
    out, state, g = run_packed("lstm", fast, xs, enforce_sorted=False)
    assert set(fast.last_paths) == {"cpp" if backend == "auto" else "loop"}
    ref_out, ref_state, ref_g = run_alone("lstm", fast, xs)
    assert set(fast.last_paths) == {"cpp" if backend == "auto" else "function"}
    close(out, ref_out)
    for a, b in zip(final_states("lstm", state), ref_state):
        close(a, b)
    for a, b in zip(g, ref_g):
        close(a, b)


# ----------------------------------------------------------------------------- batch norms in training

def _reference(cell, model, x, lengths, **kwargs):
    ref = ref_norm_lstm if cell == "lstm" else ref_norm_gru
    return ref(x, layer_params(model), model.norm, k=K, eps=EPS, lengths=lengths,
               bidirectional=model.bidirectional, bn_input_mode=model.spec.bn_input_mode, **kwargs)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm", PER_SAMPLE + BATCH)
@pytest.mark.parametrize("case", ("one-step", "sorted", "unsorted"))
def test_padded_batch_in_training_equals_masked_reference(cell, norm, case):
    """Training mode, padded batch with lengths: equal to the float64 reference in which step t's
    batch is the sequences valid at t (BN/BLN statistics, ATN-BN's pooled window), h_n at each
    sequence's own last step, padded outputs 0."""
    model = make(cell, norm).train()
    lengths = torch.tensor(LENGTHS[case])
    x = pad_sequence(sequences(LENGTHS[case]))
    out, state = model(x, lengths=lengths)
    ref = _reference(cell, model, x, lengths)
    close(out, ref[0])
    for a, b in zip(final_states(cell, state), ref[1:]):
        close(a, b)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm", BATCH + ("atn",))
def test_padding_values_change_nothing(cell, norm):
    """Whatever the padded steps hold, outputs, final states, gradients and the population
    statistics are the same: no statistic includes a padded step."""
    lengths = torch.tensor(LENGTHS["unsorted"])
    results = []
    for fill in (0.0, 1e3):
        model = make(cell, norm).train()
        x = pad_sequence(sequences(LENGTHS["unsorted"]), padding_value=fill).requires_grad_(True)
        out, state = model(x, lengths=lengths)
        padded_loss(cell, out, state, loss_weights(cell, model, 4, x.shape[0])).backward()
        valid = (torch.arange(x.shape[0]).unsqueeze(1) < lengths).unsqueeze(-1)
        assert not out.masked_select(~valid).any()  # padded outputs are 0
        assert not x.grad.masked_select(~valid).any()  # and padding gets no gradient
        buffers = [b.clone() for b in model.buffers()]
        results.append((out, *final_states(cell, state), x.grad, *grads(model), *buffers))
    for a, b in zip(*results):
        close(a, b, 1e-12)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm", ("bn", "atn-bn", "bln"))
def test_masked_batch_norm_gradients_match_finite_differences(cell, norm):
    """Gradients of the masked batch statistics: autograd equals central differences of the
    float64 reference (inputs of a short and a long sequence)."""
    model = make(cell, norm, bidirectional=False, layers=1).train()
    lengths = torch.tensor([3, 1, 2])
    x = pad_sequence(sequences([3, 1, 2])).requires_grad_(True)
    g = torch.Generator().manual_seed(5)
    w = torch.randn(3, 3, H, generator=g, dtype=DT)
    out, _ = model(x, lengths=lengths)
    (out * w).sum().backward()
    base = as_f64(x)
    for t, b, i in ((0, 1, 0), (0, 0, 2), (2, 0, 1), (1, 2, 0)):
        diffs = []
        for step in (1e-6, -1e-6):
            xp = base.copy()
            xp[t, b, i] += step
            diffs.append((_reference(cell, model, xp, lengths)[0] * as_f64(w)).sum())
        np.testing.assert_allclose(float(x.grad[t, b, i]), (diffs[0] - diffs[1]) / 2e-6, rtol=0, atol=1e-7)


def test_bn_population_statistics_count_valid_rows_only():
    """BN per step trained on a padded batch (momentum 1): the population mean/var of step t are
    the reference's statistics over the sequences valid at t (var unbiased by their number);
    steps no sequence reaches are never trained."""
    model = make("lstm", "bn", bidirectional=False, layers=1)
    for norm in model.layers[0].norms():
        norm.stats.momentum = 1.0
    lengths = torch.tensor([4, 1, 3])
    x = torch.cat((pad_sequence(sequences([4, 1, 3])), torch.zeros(2, 3, D, dtype=DT)))  # 2 all-padded steps
    model.train()(x, lengths=lengths)
    record = []
    ref_norm_lstm(x, layer_params(model), "bn", eps=EPS, lengths=lengths, record=record)
    running = [3, 2, 2, 1]
    for term, norm in zip(("input", "hidden", "cell"), model.layers[0].norms()):
        means = np.stack([m for m, _ in record[0][term]])
        variances = np.stack([v for _, v in record[0][term]])
        close(norm.stats.mean[:4], means)
        close(norm.stats.var[:4], variances * np.array([[n / (n - 1) if n > 1 else 1.0] for n in running]))
        assert int(norm.stats.steps_seen) == 4


# ----------------------------------------------------------------------------- bidirectional

@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm", PER_SAMPLE + BATCH)
@pytest.mark.parametrize("case", ("equal", "unsorted"))
def test_bidirectional_is_forward_plus_reversed_run(cell, norm, case):
    """One bidirectional layer (training mode) = a forward layer on x concatenated with a
    forward layer with the reverse weights on each sequence reversed within its length, its
    output reversed back; h_n = the two final states."""
    bi = make(cell, norm, layers=1).train()
    lengths = torch.tensor(LENGTHS[case])
    x = pad_sequence(sequences(LENGTHS[case]))
    out, state = bi(x, lengths=lengths)
    halves, finals = [], []
    for d in range(2):
        uni = make(cell, norm, bidirectional=False, layers=1).train()
        uni.layers[0].load_state_dict(bi.layers[d].state_dict())
        y, s = uni(x if d == 0 else reverse_padded(x, lengths), lengths=lengths)
        halves.append(y if d == 0 else reverse_padded(y, lengths))
        finals.append(final_states(cell, s))
    close(out, torch.cat(halves, dim=-1), 1e-12)
    for i, a in enumerate(final_states(cell, state)):
        close(a, torch.cat([f[i] for f in finals]), 1e-12)


def test_reverse_padded_and_last_steps():
    x = torch.arange(12.0).view(4, 3, 1)
    lengths = torch.tensor([4, 1, 2])
    r = reverse_padded(x, lengths)
    assert r[:, 0, 0].tolist() == [9.0, 6.0, 3.0, 0.0]
    assert r[:, 1, 0].tolist() == [1.0, 4.0, 7.0, 10.0]  # one step: nothing to reverse
    assert r[:, 2, 0].tolist() == [5.0, 2.0, 8.0, 11.0]
    assert torch.equal(reverse_padded(r, lengths), x)
    assert last_steps(x, lengths)[:, 0].tolist() == [9.0, 1.0, 5.0]


# ----------------------------------------------------------------------------- ATN window state

def test_atn_window_state_continues_each_sequence():
    """The window state of a variable-length batch is each sequence's at its own last step:
    continuing it with the rest of each sequence equals running the whole sequence."""
    model = make("lstm", "atn", bidirectional=False)
    lengths = [4, 2, 3]  # every sequence has >= k-1 = 2 steps: the state is exact
    first, rest = sequences(lengths), sequences([3, 3, 3], seed=4)
    _, state = model(pad_sequence(first), lengths=torch.tensor(lengths))
    assert not any(torch.isnan(w).any() for ws in state.h.windows for w in ws)
    out, _ = model(torch.stack(rest, dim=1), state)
    for b in range(3):
        whole, _ = model(torch.cat((first[b], rest[b])).unsqueeze(1))
        close(out[:, b], whole[lengths[b]:, 0])


def test_window_state_of_too_short_sequence_is_refused():
    model = make("lstm", "atn", bidirectional=False)
    # k = 3: a one-step sequence has a shorter window than the state holds (2 steps)
    _, state = model(pad_sequence(sequences([3, 1])), lengths=torch.tensor([3, 1]))
    assert isinstance(state, LSTMState) and isinstance(state.h, WindowedTensor)
    with pytest.raises(ValueError, match="cannot be continued"):
        model(pad_sequence(sequences([2, 2])), state)


# ----------------------------------------------------------------------------- input errors

@pytest.mark.parametrize("lengths,match", (([3, 0], "lengths must be in"), ([3, 5], "lengths must be in"),
                                           ([3], "one entry per sequence"), ([1.5, 2.0], "integers")))
def test_bad_lengths(lengths, match):
    model = NormLSTM(D, H, norm="ln")
    with pytest.raises(ValueError, match=match):
        model(torch.zeros(4, 2, D), lengths=torch.tensor(lengths))


def test_state_of_another_layout_refused():
    """The state is nn.LSTM's (h_0, c_0) / nn.GRU's h_0: the former (h, c, windows) triple, or a
    tuple given to the GRU, is refused with the expected layout named."""
    h = torch.zeros(1, 2, H)
    with pytest.raises(ValueError, match=r"\(h_0, c_0\), two tensors, as for nn.LSTM.*a tuple of 3"):
        NormLSTM(D, H, norm="atn")(torch.zeros(4, 2, D), (h, h, ()))
    with pytest.raises(ValueError, match="h_0 \\(a tensor\\), as for nn.GRU.*got a tuple"):
        NormGRU(D, H, norm="atn")(torch.zeros(4, 2, D), (h,))


def test_packed_and_lengths_together_refused():
    model = NormLSTM(D, H, norm="ln")
    packed = pack_padded_sequence(torch.zeros(3, 2, D), torch.tensor([3, 2]))
    with pytest.raises(ValueError, match="not both"):
        model(packed, lengths=torch.tensor([3, 2]))


def test_batch_first_with_lengths():
    model = make("gru", "atn", bidirectional=True, layers=1)
    lengths = torch.tensor([2, 4])
    x = pad_sequence(sequences([2, 4]))
    out_t, h_t = model(x, lengths=lengths)
    model.batch_first = True
    out_b, h_b = model(x.transpose(0, 1), lengths=lengths)
    close(out_b.transpose(0, 1), out_t, 0)
    close(h_b, h_t, 0)


def test_docs_use_it_in_your_model_example_runs():
    """docs/library.md's "Use it in your model" example: a bidirectional, packed tagger."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "library.md").read_text()
    section = text[text.index("## Use it in your model"):]
    code = re.search(r"```python\n(.+?)\n```", section, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "docs/library.md", "exec"), scope)
    assert scope["scores"].shape == (7, 3, 9)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("batch_first", (False, True))
def test_fused_padded_with_lengths_equals_loop(cell, batch_first):
    """norm="none" on torch's kernel with a padded batch and lengths (packed inside) equals the loop."""
    fused = make(cell, "none", backend="auto")
    loop = make(cell, "none", backend="loop")
    assert fused.fused and not loop.fused
    loop.load_torch_state_dict(fused.torch_state_dict())
    fused.batch_first = fused.rnn.batch_first = loop.batch_first = batch_first
    lengths = torch.tensor(LENGTHS["unsorted"])
    x = pad_sequence(sequences(LENGTHS["unsorted"]), batch_first=batch_first)
    (out_f, state_f), (out_l, state_l) = fused(x, lengths=lengths), loop(x, lengths=lengths)
    close(out_f, out_l, 1e-12)
    for a, b in zip(final_states(cell, state_f), final_states(cell, state_l)):
        close(a, b, 1e-12)


@pytest.mark.parametrize("backend", ("loop", "auto"))
@pytest.mark.parametrize("norm", PER_SAMPLE + BATCH)
@pytest.mark.parametrize("cell", CELLS)
def test_an_empty_batch_is_answered_as_torch_answers_it(cell, norm, backend):
    """B = 0: empty outputs and states of nn.LSTM's / nn.GRU's shapes, in the graph (every
    gradient 0), no statistic changed (torch's BatchNorm leaves its running statistics alike), and
    the state goes into the next call. Before, the batch norms failed on the loop and C++ paths."""
    ours, theirs = make(cell, norm, backend=backend), CELLS[cell][1](D, H, 2, bidirectional=True).to(DT)
    x = torch.zeros(4, 0, D, dtype=DT, requires_grad=True)
    buffers = [b.clone() for b in ours.buffers()]
    out, state = ours(x)
    want_out, want_state = theirs(x.detach())
    assert out.shape == want_out.shape
    states = [state] if cell == "gru" else list(state)
    wanted = [want_state] if cell == "gru" else list(want_state)
    assert [tuple(s.shape) for s in states] == [tuple(s.shape) for s in wanted]
    (out.sum() + sum(s.sum() for s in states)).backward()
    assert all(p.grad is not None and not p.grad.any() for p in ours.parameters())
    assert x.grad is not None and x.grad.shape == x.shape
    assert all(torch.equal(a, b) for a, b in zip(buffers, ours.buffers()))
    again, _ = ours(x.detach(), state)
    assert again.shape == out.shape


@pytest.mark.parametrize("norm", [norm for norm in (*PER_SAMPLE, *BATCH) if norm != "none"])  # none: nn.LSTM's own
@pytest.mark.parametrize("cell", CELLS)
def test_autocast_takes_the_loop_and_gives_its_numbers(cell, norm):
    """Under `torch.autocast("cpu", bfloat16)` the C++ path got the projections in bfloat16 and
    failed ("norm_seq_forward not implemented for 'BFloat16'") where the loop runs: autocast takes
    the loop, whatever the backend asked for, and gives the loop's numbers (and sequence-wise BN's
    running statistics, bfloat16 there, are kept in float32, where they failed on every norm's loop)."""
    models = []
    for backend in ("auto", "loop"):
        model = make(cell, norm, backend=backend).float()
        models.append(model)
    x = torch.randn(5, 2, D)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        (fast, _), (loop, _) = (model(x) for model in models)
    assert set(models[0].last_paths) == {"loop"}
    assert torch.equal(fast, loop) and fast.isfinite().all()


@pytest.mark.parametrize("cell", CELLS)
def test_a_second_derivative_is_refused_in_words_on_the_fast_path_and_taken_by_the_loop(cell):
    """A gradient penalty (create_graph=True) whose critic is ``y.mean()``: once_differentiable gave
    a gradient without a graph on the fast path, and the penalty's second-order term was lost
    without a word (2.3e4 off the loop's parameter gradients); refused, saying to use the loop."""
    x = torch.randn(5, 2, D, dtype=DT, requires_grad=True)
    for backend in ("auto", "loop"):
        model = make(cell, "ln", bidirectional=False, layers=1, backend=backend)
        score = model(x)[0].mean()
        if backend == "auto":
            assert model.last_paths == ("cpp",)
            with pytest.raises(RuntimeError, match=r"differentiable once: a second derivative .* needs backend=\"loop\""):
                torch.autograd.grad(score, x, create_graph=True)
        else:
            (gx,) = torch.autograd.grad(score, x, create_graph=True)
            assert gx.requires_grad
    model = make(cell, "ln", bidirectional=False, layers=1, backend="auto")
    model(x)[0].mean().backward()  # one derivative: the fast path as before
    assert model.last_paths == ("cpp",) and x.grad is not None


@pytest.mark.parametrize("cell", CELLS)
def test_torch_func_grad_and_layer_hooks_take_the_loop_with_its_numbers(cell):
    """torch.func.grad over functional_call failed on the fast path with torch's words about
    setup_context; a forward pre-hook on a layer (legacy weight_norm/spectral_norm recompute a
    weight in one) never ran there. Both take the loop, whose numbers they get."""
    from torch.func import functional_call, grad

    x = torch.randn(5, 2, D, dtype=DT)
    fast, loop = make(cell, "atn", backend="auto"), make(cell, "atn", backend="loop")
    grads = [grad(lambda p, m=m: functional_call(m, p, (x,))[0].pow(2).sum())(
        {n: p.detach() for n, p in m.named_parameters()}) for m in (fast, loop)]
    assert fast.last_paths == ("loop",) * 4 and grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=0, atol=0)
    calls = []
    fast.layers[0].register_forward_pre_hook(lambda module, args: calls.append(module))
    torch.testing.assert_close(fast(x)[0], loop(x)[0], rtol=0, atol=0)
    assert set(fast.last_paths) == {"loop"} and calls == [fast.layers[0]]


@pytest.mark.parametrize("cell", CELLS)
def test_wrong_arguments_and_states_are_named_in_one_line(cell):
    """A quoted "False" from a config was true (`batch_first="False"` read a time-first batch as
    batch-first); a NaN gain made every output NaN; a state of NumPy arrays was told to match
    dtypes already equal; one on another device reached the kernels (torch's words on fake tensors)."""
    import numpy as np

    RNN = CELLS[cell][0]
    for name in ("bias", "batch_first", "bidirectional", "bias_inside"):
        with pytest.raises(TypeError, match=rf"^{name} should be of type bool, got str \('False'\)$"):
            RNN(D, H, norm="ln", **{name: "False"})
    with pytest.raises(ValueError, match=r"^gain_init must be a finite number, got nan$"):
        RNN(D, H, norm="ln", gain_init=float("nan"))
    model, x = RNN(D, H, norm="atn", k=K), torch.randn(5, 2, D)
    zeros = lambda **kw: torch.zeros(1, 2, H, **kw)  # noqa: E731
    on_meta = (zeros(device="meta"), zeros(device="meta")) if cell == "lstm" else zeros(device="meta")
    with pytest.raises(ValueError, match=r"^state tensor 0 is on meta, the input on cpu; give them one device"):
        model(x, on_meta)
    if cell == "lstm":
        arrays = (np.zeros((1, 2, H), np.float32), np.zeros((1, 2, H), np.float32))
        with pytest.raises(ValueError, match=r"two tensors, .* got a tuple of 2 \(ndarray, ndarray\)$"):
            model(x, arrays)
    with pytest.raises(ValueError, match=r"^lengths must be one whole number per sequence .* got '6,4'$"):
        model(x, lengths="6,4")  # torch's "new(): invalid data type 'str'" named no argument
    with pytest.raises(ValueError, match=r"^input dtype torch.int64: .* convert it \(x.float\(\)\)"):
        model(x.long())  # it said model.to(torch.int64), which torch refuses


@pytest.mark.parametrize("cell", CELLS)
def test_every_norm_runs_on_meta_for_its_shapes(cell):
    """`model.to("meta")` (shapes without values, as deferred initialisation uses it) failed for the
    batch norms on reading their step count ("Tensor.item() cannot be called on meta tensors"),
    and, once autocast was asked about, for every norm ("unknown device type for autocast")."""
    RNN = CELLS[cell][0]
    for norm in (*PER_SAMPLE, "atn-bn", "bn", "bn-input", "bln"):
        for mode in ("train", "eval"):
            model = getattr(RNN(D, H, 2, norm=norm, k=K).to("meta"), mode)()
            out, _ = model(torch.randn(5, 2, D, device="meta"))
            assert out.is_meta and out.shape == (5, 2, H), (norm, mode)


def test_numpy_numbers_and_the_gru_without_a_python_fast_path():
    """`dropout=np.float32(0.2)` (nn.LSTM takes it) was refused as no number; NormGRU's
    `backend="function"` was refused as covering "no norm of NormGRU, not norm='atn'"."""
    assert NormLSTM(D, H, 2, dropout=np.float32(0.2), norm="ln").dropout == pytest.approx(0.2)
    with pytest.raises(ValueError, match=r"^backend='function' exists for NormLSTM only"):
        NormGRU(D, H, norm="atn", backend="function")


def test_the_full_backward_hook_warning_comes_once_a_model():
    import warnings

    model = NormGRU(D, H, norm="atn", k=K)
    model.register_full_backward_hook(lambda *args: None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            model(torch.randn(4, 2, D))
    assert sum("full backward hook" in str(w.message) for w in caught) == 1


# -- by-name modifiers, the other bias placement, messages (QA, third pass) ------------------------

@pytest.mark.parametrize("norm, backend, where, name", [("ln", "auto", "layers[0]", "weight_hh"),
                                                        ("none", "loop", "layers[0]", "weight_hh"),
                                                        ("none", "auto", "rnn", "weight_hh_l0")])
def test_prune_by_nn_lstm_name_is_refused_before_it_changes_the_model(norm, backend, where, name):
    """``prune.l1_unstructured(model, "weight_hh_l0")`` works on nn.LSTM; here the name is an alias,
    and prune registered ``weight_hh_l0_orig`` before failing with a bare KeyError (its checkpoints
    then failed a strict load). Refused first, naming the module and name that work, which do."""
    from torch.nn.utils import prune

    model = NormLSTM(3, 4, norm=norm, backend=backend, init="torch")
    before = {key: value.clone() for key, value in model.state_dict().items()}
    with pytest.raises(AttributeError, match=rf"prune.l1_unstructured\(model.{re_escape(where)}, '{name}'"):
        prune.l1_unstructured(model, "weight_hh_l0", amount=0.5)
    assert list(model.state_dict()) == list(before)
    NormLSTM(3, 4, norm=norm, backend=backend).load_state_dict(model.state_dict())  # strict: nothing stray
    target = model.rnn if where == "rnn" else model.layers[0]
    prune.l1_unstructured(target, name, amount=0.5)
    assert int((model.weight_hh_l0 == 0).sum()) == 4 * 4 * 4 // 2  # the pruned weight is the one the model uses
    assert not torch.equal(model.weight_hh_l0, before[f"{'rnn' if where == 'rnn' else 'layers.0'}.{name}"])


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize("cell", [NormLSTM, NormGRU])
def test_a_checkpoints_biases_load_whichever_backend_saved_it(cell):
    """A norm="none" checkpoint into a bias-outside model (bn) loads its biases as their sum whether
    the default backend (``rnn.`` names) or the loop backend (``layers.N.bias_ih``/``bias_hh``)
    saved it (the loop's were left at 0, reported only among strict=False's keys); a bn checkpoint
    into norm="none" loads its one bias as ``bias_ih`` (``bias_hh`` 0) on either backend."""
    torch.manual_seed(0)
    saved = cell(3, 4, norm="none", init="torch")
    if cell is NormGRU:  # nn.GRU's b_hn sits inside r * (W_hn h + b_hn): a bias outside needs it 0
        with torch.no_grad():
            saved.bias_hh_l0[8:].zero_()
    loaded = []
    for backend in ("auto", "loop"):
        source = cell(3, 4, norm="none", backend=backend)
        source.load_state_dict(saved.state_dict())  # the same model, saved by either backend
        target = cell(3, 4, norm="bn")
        result = target.load_state_dict(source.state_dict(), strict=False)
        assert not [key for key in result.unexpected_keys + result.missing_keys if "bias" in key and "norm" not in key]
        assert torch.equal(target.layers[0].bias, (source.bias_ih_l0 + source.bias_hh_l0).detach())
        loaded.append(target.layers[0].bias.detach().clone())
    assert torch.equal(*loaded)
    batch_norm = cell(3, 4, norm="bn")
    with torch.no_grad():
        batch_norm.layers[0].bias.normal_()
    for backend in ("auto", "loop"):
        target = cell(3, 4, norm="none", backend=backend)
        result = target.load_state_dict(batch_norm.state_dict(), strict=False)
        assert not [key for key in result.missing_keys if "bias" in key]
        assert torch.equal(target.bias_ih_l0.detach(), batch_norm.layers[0].bias.detach())
        assert not target.bias_hh_l0.detach().any()


def test_the_messages_name_the_layout_and_how_to_keep_h_and_c():
    model = NormLSTM(3, 4, norm="ln", batch_first=True)
    with pytest.raises(ValueError, match=r"3-d input \(batch, seq, feature\) \(batch_first\), got shape \(5, 3\)"):
        model(torch.randn(5, 3))
    encoder = NormLSTM(3, 4, norm="atn", k=4)
    packed = nn.utils.rnn.pack_sequence([torch.randn(6, 3), torch.randn(2, 3)])  # one source shorter than k - 1
    _, (h, c) = encoder(packed)
    decoder = NormLSTM(3, 4, norm="atn", k=4)
    with pytest.raises(ValueError, match=r"\(h.clone\(\), c\) for an LSTM"):
        decoder(torch.randn(3, 2, 3), (h, c))
    decoder(torch.randn(3, 2, 3), (h.clone(), c))  # the encoder's h and c, the decoder's windows empty


@pytest.mark.parametrize("cell", CELLS)
def test_an_unbatched_input_is_refused_by_every_norm_and_backend(cell):
    """The docs: the input is nn.LSTM's "except unbatched". norm="none" on its default (torch's own)
    path took an unbatched (T, H_in) input and every other norm refused it (QA: the one-line switch
    to norm="atn" then failed)."""
    for norm, backend in (("none", "auto"), ("none", "loop"), ("ln", "auto"), ("atn", "loop")):
        model = CELLS[cell][0](D, H, norm=norm, k=K, backend=backend)
        with pytest.raises(ValueError, match=r"^expected a 3-d input \(seq, batch, feature\), got shape \(6, 3\)$"):
            model(torch.randn(6, D))


@pytest.mark.parametrize("norm, shape", [("ln", {}), ("atn", {}), ("bn", {}), ("atn", {"num_layers": 2}),
                                         ("ln", {"batch_first": True}), ("atn", {"bidirectional": True})])
def test_a_gru_output_written_in_place_still_backpropagates_as_nn_gru_does(norm, shape):
    """nn.GRU's output can be written in place before backward (Dropout(inplace=True), masked_fill_);
    the fast path saved its output for backward and failed there (QA). Its gradients equal those of
    the output left alone, and of the loop, also where the last layer's output is handed out as a
    view (batch_first) or made anew (two directions)."""
    x = torch.randn(2 if shape.get("batch_first") else 6, 6 if shape.get("batch_first") else 2, D, dtype=DT)
    grads = {}
    for backend, in_place in (("auto", True), ("auto", False), ("loop", True)):
        model = randomize(NormGRU(D, H, norm=norm, k=K, backend=backend, **shape).to(DT), seed=3)
        out, h = model(x)
        if backend == "auto":
            assert set(model.last_paths) == {"cpp"}
        out = out.mul_(2.0) if in_place else out * 2.0
        (out.square().sum() + h.sum()).backward()
        grads[backend, in_place] = [p.grad for p in model.parameters()]
    for a, b, c in zip(grads["auto", True], grads["auto", False], grads["loop", True]):
        assert torch.equal(a, b)
        close(a, c)

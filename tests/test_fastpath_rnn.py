"""The C++ fast path of every other norm (atnbench/nn/fastpath_rnn.py, csrc/norm_rnn.cpp)
equals the plain loop path: BN (per step), BN-input (frame- and sequence-wise), BLN and ATN-BN
LSTMs, and the GRU with every norm.

float64 to 1e-10: outputs, final states (h, c, window states), gradients (input, every
parameter, given state) and the running (population) statistics after the forward; in
training and in evaluation (population statistics, including steps beyond the trained ones),
bias inside/outside, affine off, a given state, batch 1. gradcheck on odd shapes.
"""

from __future__ import annotations

import pytest
import torch

from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from atnbench.nn import NormGRU, NormLSTM
from atnbench.nn import fastpath
from helpers import randomize, state_like, state_tensors

DT = torch.float64
CELLS = {"lstm": NormLSTM, "gru": NormGRU}
LSTM_NORMS = [("bn", {}), ("bn-input", {}), ("bn-input", {"bn_input_mode": "sequence"}), ("bln", {}),
              ("atn-bn", {"k": 1}), ("atn-bn", {"k": 3}), ("atn-bn", {"k": 30})]
GRU_NORMS = [("ln", {}), ("atn", {"k": 3}), ("bn", {}), ("bn-input", {}), ("bln", {}), ("atn-bn", {"k": 3})]
CASES = [("lstm", n, o) for n, o in LSTM_NORMS] + [("gru", n, o) for n, o in GRU_NORMS]
IDS = [f"{c}-{n}-{'-'.join(f'{k}{v}' for k, v in o.items())}" for c, n, o in CASES]


@pytest.fixture(scope="module", autouse=True)
def cpp():
    if not fastpath.build_cpp():
        pytest.fail("the C++ extension did not build:\n" + fastpath._cpp_state.get("error", ""))


def make(cell, backend, norm, layers=1, din=3, hidden=5, seed=0, **kw):
    torch.manual_seed(seed)
    model = CELLS[cell](din, hidden, layers, norm=norm, backend=backend, **kw).to(DT)
    return randomize(model, seed)


def inputs(T, B, d=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, d, generator=g, dtype=DT)
    return x * (torch.rand(T, 1, 1, generator=g, dtype=DT) * 2 + 0.3) + 0.5


flat_state = state_tensors  # h (c) and the windows riding on h


def run(model, x, state=None, wrt=()):
    x = x.clone().requires_grad_()
    out, new = model(x, state)
    g = torch.Generator().manual_seed(2)
    loss = (out * torch.randn(out.shape, generator=g, dtype=DT)).sum()
    for i, t in enumerate(flat_state(new)):
        loss = loss + (t * t).sum() * (0.3 + 0.1 * i)
    params = list(model.parameters())
    grads = torch.autograd.grad(loss, [x, *params, *wrt], allow_unused=True)
    return out, flat_state(new), grads, [b.clone() for b in model.buffers()]


def assert_same(a, b):
    for u, v in zip([a[0], *a[1], *a[2], *a[3]], [b[0], *b[1], *b[2], *b[3]]):
        assert (u is None) == (v is None)
        if u is not None:
            assert u.shape == v.shape
            torch.testing.assert_close(v, u, rtol=1e-10, atol=1e-10)
    assert len(a[1]) == len(b[1]) and len(a[2]) == len(b[2]) and len(a[3]) == len(b[3])


def compare(cell, norm, opts, T=9, B=4, layers=1, state=None, wrt=(), train=True, **kw):
    loop = make(cell, "loop", norm, layers, **opts, **kw)
    fast = make(cell, "cpp", norm, layers, **opts, **kw)
    if not train:
        for model in (loop, fast):  # population statistics of 6 trained steps, then evaluate 9
            model(inputs(6, B, seed=7))
            model.eval()
    a = run(loop, inputs(T, B), state, wrt)
    b = run(fast, inputs(T, B), state, wrt)
    assert fast.last_paths == ("cpp",) * layers and loop.last_paths == ("loop",) * layers
    assert_same(a, b)
    return a, b


@pytest.mark.parametrize("cell, norm, opts", CASES, ids=IDS)
def test_train_equals_loop(cell, norm, opts):
    a, _ = compare(cell, norm, opts, layers=2)
    assert any(g is not None and g.abs().sum() > 0 for g in a[2][1:])


@pytest.mark.parametrize("cell, norm, opts", CASES, ids=IDS)
def test_eval_equals_loop(cell, norm, opts):
    compare(cell, norm, opts, train=False)


@pytest.mark.parametrize("cell, norm, opts", [c for c in CASES if c[1] != "ln"], ids=[i for c, i in zip(CASES, IDS) if c[1] != "ln"])
@pytest.mark.parametrize("variant", [{"bias_inside": True}, {"affine": False}, {"bias": False}])
def test_bias_and_affine_variants(cell, norm, opts, variant):
    compare(cell, norm, opts, **variant)


@pytest.mark.parametrize("cell, norm, opts", CASES, ids=IDS)
def test_batch_of_one(cell, norm, opts):
    compare(cell, norm, opts, T=5, B=1)


@pytest.mark.parametrize("cell, norm, opts", CASES, ids=IDS)
def test_state_in_and_its_gradient(cell, norm, opts):
    """A real state from an earlier segment, passed in as leaves: continuation and gradients
    w.r.t. h0 (c0) and the window states."""
    warm = make(cell, "loop", norm, 2, **opts)
    _, state = warm(inputs(6, 4, seed=5))
    leaves = [t.detach().clone().requires_grad_() for t in flat_state(state)]
    given = state_like(state, leaves)
    a, b = compare(cell, norm, opts, T=8, layers=2, state=given, wrt=leaves)
    assert all(g is not None for g in b[2][-len(leaves):][:1])


def test_bln_population_flags():
    """BLN inference with population statistics: all four, and a mixture (current std around a
    population mean and the other way round)."""
    for flags in ((True, True, True, True), (True, False, False, True), (False, True, True, False)):
        for cell in CELLS:
            compare(cell, "bln", {"bln_population": flags}, train=False)


def test_atn_bn_eval_with_batch_statistics():
    compare("lstm", "atn-bn", {"k": 3, "atn_bn_eval": "batch"}, train=False)
    compare("gru", "atn-bn", {"k": 3, "atn_bn_eval": "batch"}, train=False)


def test_inference_without_grad_and_beyond_max_steps():
    """no_grad (nothing saved for backward), and T beyond max_steps (population statistics of
    the last kept step reused)."""
    for cell, norm in (("lstm", "bn"), ("gru", "atn-bn"), ("lstm", "bln")):
        loop = make(cell, "loop", norm, max_steps=4, bln_population=(True,) * 4)
        fast = make(cell, "cpp", norm, max_steps=4, bln_population=(True,) * 4)
        x = inputs(7, 3)
        for model in (loop, fast):
            with torch.no_grad():
                model(x)
        for u, v in zip(loop.buffers(), fast.buffers()):
            torch.testing.assert_close(v, u, rtol=1e-10, atol=1e-10)
        loop.eval(), fast.eval()
        with torch.no_grad():
            a, b = loop(x)[0], fast(x)[0]
        assert fast.last_paths == ("cpp",)
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("cell, norm, opts", [("lstm", "bn", {}), ("lstm", "atn-bn", {"k": 2}), ("lstm", "bln", {}),
                                              ("gru", "bn", {}), ("gru", "atn", {"k": 2}), ("gru", "bln", {}),
                                              ("gru", "atn-bn", {"k": 2})])
def test_gradcheck(cell, norm, opts):
    """Odd shapes (T=3, B=3, D=2, H=3), every parameter, the input and h0."""
    model = make(cell, "cpp", norm, din=2, hidden=3, eps=1e-3, **opts)
    names = [n for n, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in model.parameters()]
    x = inputs(3, 3, 2).requires_grad_()
    h0 = (torch.randn(1, 3, 3, dtype=DT) * 0.5).requires_grad_()

    def f(x, h0, *ps):
        state = (h0, torch.zeros_like(h0)) if cell == "lstm" else h0
        out, _ = torch.func.functional_call(model, dict(zip(names, ps)), (x, state))
        return out

    assert torch.autograd.gradcheck(f, (x, h0, *params), eps=1e-6, atol=1e-5, rtol=1e-4)
    assert model.last_paths == ("cpp",)


def test_auto_picks_the_fast_path_and_falls_back_with_a_probe():
    x = inputs(5, 2).float()
    for cell, norm in (("lstm", "bn"), ("lstm", "bln"), ("gru", "ln"), ("gru", "atn-bn")):
        model = CELLS[cell](3, 4, 2, norm=norm)
        model(x)
        assert model.backend == "auto" and model.last_paths == ("cpp", "cpp")
        model.layers[0].norm_h.probe = lambda y, t0: None
        model(x)
        assert model.last_paths == ("loop", "loop")
    with pytest.raises(ValueError, match="not norm='bn'"):
        NormLSTM(3, 4, norm="bn", backend="function")


FLOAT32_ENVELOPE = 5e-5


def test_float32_as_accurate_as_the_loop():
    """float32, T=60: against a float64 evaluation of the same model, the fast path's worst
    relative error (outputs, every gradient, running statistics) is no worse than the loop's, or
    within the float32 envelope of a long recurrence (5e-5 relative: shared/notes measured
    1e-5 to 5e-5 for two exact float32 implementations at T=220). The envelope is needed because
    the loop's accuracy is ATen's and depends on the processor: on an AVX-512 Xeon ATen's batch
    norm gave the BN-LSTM 4e-6 where the fast path gave 2e-5; BLN's loop path is the less
    accurate one (~5e-4 on weight gradients against ~8e-5)."""
    for cell, norm in (("lstm", "bn"), ("lstm", "atn-bn"), ("lstm", "bln"), ("gru", "bn"), ("gru", "atn")):
        torch.manual_seed(0)
        loop = CELLS[cell](2, 16, norm=norm, k=5, backend="loop")
        fast = CELLS[cell](2, 16, norm=norm, k=5, backend="cpp")
        exact = CELLS[cell](2, 16, norm=norm, k=5, backend="loop").double()
        fast.load_state_dict(loop.state_dict())
        exact.load_state_dict(loop.state_dict())
        x = torch.rand(60, 6, 2, generator=torch.Generator().manual_seed(3))
        res = []
        for model, dtype in ((loop, torch.float32), (fast, torch.float32), (exact, DT)):
            xr = x.to(dtype).requires_grad_()
            out, _ = model(xr)
            grads = torch.autograd.grad((out[-1] ** 2).mean() + (out ** 2).mean(), [xr, *model.parameters()])
            res.append([out, *grads, *(b for b in model.buffers() if b.is_floating_point())])
        assert fast.last_paths == ("cpp",)
        worst_loop = worst_fast = 0.0
        for a, b, e in zip(*res):
            scale = max(e.abs().max().item(), 1e-30)
            assert (a - b).abs().max().item() <= 1e-3 * scale, (cell, norm)
            worst_loop = max(worst_loop, (a.double() - e).abs().max().item() / scale)
            worst_fast = max(worst_fast, (b.double() - e).abs().max().item() / scale)
        assert worst_fast <= max(2 * worst_loop, FLOAT32_ENVELOPE), (cell, norm, worst_fast, worst_loop)


def _graph_names(out):
    seen, todo, names = set(), [out.grad_fn], set()
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        names.add(type(fn).__name__)
        todo.extend(f for f, _ in fn.next_functions)
    return names


@pytest.mark.parametrize("cell,norm,opts", [("lstm", "bn", {}), ("lstm", "atn-bn", {"k": 3}), ("lstm", "bln", {}),
                                            ("gru", "atn", {"k": 3}), ("lstm", "bn-input", {})])
def test_input_term_runs_on_the_kernel_unless_sequence_wise(cell, norm, opts):
    """The input norm is one kernel node (NormSequence), padded batches too (the mask is in the
    kernel); sequence-wise BN (no kernel term) keeps the layer's own torch ops."""
    model = make(cell, "cpp", norm, **opts)
    x = inputs(6, 3).requires_grad_()
    assert "NormSequenceBackward" in _graph_names(model(x)[0])
    padded, _ = model(x, lengths=torch.tensor([6, 4, 2]))
    assert "NormSequenceBackward" in _graph_names(padded) and model.last_paths == ("cpp",)
    seq = make("lstm", "cpp", "bn-input", bn_input_mode="sequence")
    assert "NormSequenceBackward" not in _graph_names(seq(x)[0])


# ---------------------------------------------------------------------------------------------
# Padded and packed batches: the mask is in the kernel (norm_rnn.cpp); every norm of both cells,
# LSTM LN/ATN included (they take norm_rnn.cpp when padded), equals the loop to the same 1e-10.

PADDED_CASES = [("lstm", "ln", {}), ("lstm", "atn", {"k": 3})] + CASES
PADDED_IDS = ["lstm-ln-", "lstm-atn-k3"] + IDS


def _lengths(B, T, seed):
    """Random lengths in 1..T with 1 and T among them, in random order."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    lengths[:2] = torch.tensor([1, T])
    return lengths[torch.randperm(B, generator=g)]


def run_padded(model, x, lengths, packed=False, state=None, wrt=()):
    """``run`` for a padded batch (time first ``x``; batch first if the model is): outputs, the
    state's tensors (NaN-marked windows compared as NaN, left out of the loss), gradients, buffers."""
    x = x.clone().requires_grad_()
    inp = x.transpose(0, 1) if model.batch_first else x
    if packed:
        packed_x = pack_padded_sequence(inp, lengths, batch_first=model.batch_first, enforce_sorted=False)
        out, new = model(packed_x, state)
        out = pad_packed_sequence(out, batch_first=model.batch_first, total_length=x.shape[0])[0]
    else:
        out, new = model(inp, state, lengths=lengths)
    g = torch.Generator().manual_seed(2)
    loss = (out * torch.randn(out.shape, generator=g, dtype=DT)).sum()
    for i, t in enumerate(flat_state(new)):
        loss = loss + (torch.where(torch.isnan(t), 0.0, t) ** 2).sum() * (0.3 + 0.1 * i)
    grads = torch.autograd.grad(loss, [x, *model.parameters(), *wrt], allow_unused=True)
    return out, flat_state(new), grads, [b.clone() for b in model.buffers()]


def compare_padded(cell, norm, opts, lengths, T=7, train=True, packed=False, state=None, wrt=(), **kw):
    B = lengths.shape[0]
    loop = make(cell, "loop", norm, **opts, **kw)
    fast = make(cell, "cpp", norm, **opts, **kw)
    if not train:
        for model in (loop, fast):  # population statistics of a padded training pass, then evaluate
            model(inputs(T, B, seed=7), lengths=_lengths(B, T, seed=8))
            model.eval()
    a = run_padded(loop, inputs(T, B), lengths, packed, state, wrt)
    b = run_padded(fast, inputs(T, B), lengths, packed, state, wrt)
    assert set(fast.last_paths) == {"cpp"} and set(loop.last_paths) == {"loop"}
    for u, v in zip([a[0], *a[1], *a[2], *a[3]], [b[0], *b[1], *b[2], *b[3]]):
        u, v = (None if t is not None and t.numel() == 0 else t for t in (u, v))  # k = 1's (0, n, 2) window
        assert (u is None) == (v is None)
        if u is not None:
            assert u.shape == v.shape
            # the dense tests' 1e-10, of each tensor's scale: steps with one or two valid rows give
            # batch norms gradients in the hundreds, and the loop itself moves them by ~1e-10 under
            # a 1e-15 relative change of its input (measured), as much as the two paths differ
            scale = max(1.0, float(u.detach().nan_to_num().abs().max())) if u.numel() else 1.0
            torch.testing.assert_close(v, u, rtol=1e-10, atol=1e-10 * scale, equal_nan=True)
    assert len(a[1]) == len(b[1]) and len(a[2]) == len(b[2])
    return a, b


@pytest.mark.parametrize("cell, norm, opts", PADDED_CASES, ids=PADDED_IDS)
def test_padded_equals_loop(cell, norm, opts):
    """Random lengths (1 and the full length among them): a padded bidirectional 2-layer batch,
    and a packed batch-first one with steps past every sequence's end."""
    a, _ = compare_padded(cell, norm, opts, _lengths(6, 7, seed=3), layers=2, bidirectional=True)
    assert any(g is not None and g.abs().sum() > 0 for g in a[2][1:])
    assert bool((a[0][:, :, :5].abs().sum(-1) == 0).any())  # padded outputs are 0, and compared
    compare_padded(cell, norm, opts, torch.tensor([5, 1, 3, 4]), packed=True, batch_first=True)
    compare_padded(cell, norm, opts, torch.tensor([4, 1, 2]))  # steps past every sequence's end


@pytest.mark.parametrize("cell, norm, opts", PADDED_CASES, ids=PADDED_IDS)
def test_padded_eval_equals_loop(cell, norm, opts):
    compare_padded(cell, norm, opts, _lengths(5, 6, seed=4), T=6, train=False, bidirectional=True)


@pytest.mark.parametrize("cell, norm, opts", [c for c in PADDED_CASES if c[1] in ("atn", "atn-bn", "bln")],
                         ids=[i for c, i in zip(PADDED_CASES, PADDED_IDS) if c[1] in ("atn", "atn-bn", "bln")])
def test_padded_state_in_and_its_gradient(cell, norm, opts):
    """A real state from an earlier (unpadded) segment continued by a padded one: values and the
    gradients w.r.t. h0 (c0) and the window states; the padded batch's own window states (each
    sequence's, NaN-marked where not continuable) compared too."""
    warm = make(cell, "loop", norm, 2, **opts)
    _, state = warm(inputs(6, 5, seed=5))
    leaves = [t.detach().clone().requires_grad_() for t in flat_state(state)]
    given = state_like(state, leaves)
    _, b = compare_padded(cell, norm, opts, _lengths(5, 7, seed=6), state=given, wrt=leaves, layers=2)
    assert all(g is not None for g in b[2][-len(leaves):][:1])


def test_padded_batch_of_one_and_float32():
    for cell, norm in (("lstm", "atn-bn"), ("gru", "bln")):
        compare_padded(cell, norm, {"k": 2} if norm == "atn-bn" else {}, torch.tensor([4]), T=6)
    for cell, norm in (("lstm", "bn"), ("gru", "atn")):
        lengths = _lengths(4, 8, seed=9)
        outs = []
        for backend in ("loop", "cpp"):
            model = make(cell, backend, norm).float()
            outs.append(model(inputs(8, 4).float(), lengths=lengths)[0])
        torch.testing.assert_close(outs[1], outs[0], rtol=1e-4, atol=1e-5)


def test_padded_batches_take_the_cpp_path_only():
    """``auto``/``cpp`` run a padded batch on C++; ``function`` (LN/ATN, no mask) takes the loop."""
    x, lengths = inputs(5, 3), torch.tensor([5, 2, 1])
    for backend, norm, path in (("auto", "atn", "cpp"), ("cpp", "bn", "cpp"), ("function", "ln", "loop")):
        model = make("lstm", backend, norm)
        assert fastpath.select(model, x, lengths=lengths) == path
    model = make("lstm", "cpp", "ln")  # an empty batch: no path runs (nn.LSTM's answer, test_dropin)
    out, _ = model(x[:, :0], lengths=torch.zeros(0, dtype=torch.long))
    assert model.last_paths == ("empty",) and out.shape == (5, 0, 5)


@pytest.mark.parametrize("cell, norm, opts", [c for c in PADDED_CASES if c[1] != "ln"],
                         ids=[i for c, i in zip(PADDED_CASES, PADDED_IDS) if c[1] != "ln"])
@pytest.mark.parametrize("variant", [{"bias_inside": True}, {"affine": False}, {"bias": False}])
def test_padded_bias_and_affine_variants(cell, norm, opts, variant):
    compare_padded(cell, norm, opts, _lengths(4, 6, seed=10), T=6, **variant)


@pytest.mark.parametrize("cell, norm, opts", PADDED_CASES, ids=PADDED_IDS)
def test_padded_inference_without_grad(cell, norm, opts):
    """no_grad (the kernels' forward without saving, the input term outside autograd), training
    and evaluation: outputs, state and running statistics equal the loop's."""
    lengths = _lengths(5, 6, seed=11)
    for train in (True, False):
        loop = make(cell, "loop", norm, **opts).train(train)
        fast = make(cell, "cpp", norm, **opts).train(train)
        with torch.no_grad():
            a = loop(inputs(6, 5), lengths=lengths)
            b = fast(inputs(6, 5), lengths=lengths)
        assert fast.last_paths == ("cpp",)
        for u, v in zip([a[0], *flat_state(a[1]), *loop.buffers()], [b[0], *flat_state(b[1]), *fast.buffers()]):
            torch.testing.assert_close(v, u, rtol=1e-10, atol=1e-10, equal_nan=True)


@pytest.mark.parametrize("norm, opts", [("ln", {}), ("atn", {"k": 3})])
def test_padded_ln_atn_lstm_run_on_the_row_parallel_kernel(norm, opts):
    """LN/ATN-LSTM keep norm_lstm.cpp when padded (the batch split over threads, each chunk's
    running rows first): 40 rows (several chunks), equal to the loop."""
    model = make("lstm", "cpp", norm, **opts)
    out, _ = model(inputs(5, 3).requires_grad_(), lengths=torch.tensor([5, 2, 1]))
    assert "NormLSTMRecurrenceBackward" in _graph_names(out)
    compare_padded("lstm", norm, opts, _lengths(40, 9, seed=12), T=9, layers=2, bidirectional=True)

"""The fast path of NormLSTM (atnbench/nn/fastpath.py) equals the plain loop path.

Outputs, final states (h, c and the ATN window histories) and gradients (input, every
parameter, h0/c0, window state) of ``backend="cpp"`` (C++) and ``backend="function"``
(torch ops) against ``backend="loop"``: 1e-10 in float64; float32 over T=200 to a relative
1e-4 (a long recurrence amplifies float32 rounding ~100x, see
/work/shared/notes/measured-performance.md). gradcheck on the autograd Function itself, and
the automatic choice of path. The C++ extension is compiled once per machine (cached; the
first test that needs it waits ~10-20 s).
"""

from __future__ import annotations

import pytest
import torch

from atnbench.nn import NormGRU, NormLSTM
from atnbench.nn import fastpath
from helpers import randomize, state_like, state_tensors

DT = torch.float64
FAST = ("cpp", "function")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def cpp():
    if not fastpath.build_cpp():
        pytest.fail("the C++ extension did not build:\n" + fastpath._cpp_state.get("error", ""))


def _skip_unless_built(path, request):
    if path == "cpp":
        request.getfixturevalue("cpp")


def make(backend, norm="atn", k=3, layers=1, dtype=DT, din=3, hidden=5, seed=0, **kw):
    torch.manual_seed(seed)
    return randomize(NormLSTM(din, hidden, layers, norm=norm, k=k, backend=backend, **kw).to(dtype), seed)


def inputs(T, B, d, dtype=DT, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, d, generator=g, dtype=torch.float64)
    x = x * (torch.rand(T, 1, 1, generator=g, dtype=torch.float64) * 2 + 0.3) + 0.5
    return x.to(dtype)


def weights_for(out, seed=2):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(out.shape, generator=g, dtype=torch.float64).to(out.dtype)


def run(model, x, state=None, wrt_state=()):
    """Outputs, final state and gradients of a loss touching out, h_n, c_n and the windows."""
    x = x.clone().requires_grad_()
    out, new = model(x, state)
    loss = (out * weights_for(out)).sum() + (new[0] * 0.3).sum() + (new[1] ** 2).sum()
    for w in state_tensors(new)[2:]:  # the windows riding on h_n
        loss = loss + (w * w).sum() * 0.01
    params = list(model.parameters())
    grads = torch.autograd.grad(loss, [x, *params, *wrt_state], allow_unused=True)
    return out, new, grads


def assert_same(a, b, rtol, atol):
    out_a, st_a, g_a = a
    out_b, st_b, g_b = b
    torch.testing.assert_close(out_b, out_a, rtol=rtol, atol=atol)
    sa, sb = state_tensors(st_a), state_tensors(st_b)
    assert len(sa) == len(sb)
    for u, v in zip(sa, sb):
        assert u.shape == v.shape and u.dtype == v.dtype
        torch.testing.assert_close(v, u, rtol=rtol, atol=atol)
    assert len(g_a) == len(g_b)
    for u, v in zip(g_a, g_b):
        assert (u is None) == (v is None)
        if u is not None:
            torch.testing.assert_close(v, u, rtol=rtol, atol=atol)


def compare(path, T=9, B=4, layers=1, state=None, **kw):
    x = inputs(T, B, 3)
    loop = make("loop", layers=layers, **kw)
    fast = make(path, layers=layers, **kw)
    a = run(loop, x, state)
    b = run(fast, x, state)
    assert fast.last_paths == (path,) * layers and loop.last_paths == ("loop",) * layers
    assert_same(a, b, rtol=1e-10, atol=1e-10)


# ----------------------------------------------------------------------------------- float64

@pytest.mark.parametrize("path", FAST)
@pytest.mark.parametrize("norm, k", [("ln", 1), ("atn", 1), ("atn", 2), ("atn", 4), ("atn", 30)])
def test_fast_equals_loop(path, norm, k, request):
    _skip_unless_built(path, request)
    compare(path, norm=norm, k=k)  # k=30 > T=9: the window never fills


@pytest.mark.parametrize("path", FAST)
@pytest.mark.parametrize("norm", ("ln", "atn"))
@pytest.mark.parametrize("bias_inside, affine, bias", [(False, True, True), (True, False, True),
                                                        (False, False, True), (True, True, False)])
def test_bias_and_affine_variants(path, norm, bias_inside, affine, bias, request):
    _skip_unless_built(path, request)
    compare(path, norm=norm, k=3, bias_inside=bias_inside, affine=affine, bias=bias)


@pytest.mark.parametrize("path", FAST)
@pytest.mark.parametrize("norm", ("ln", "atn"))
def test_two_layers_batch_first_and_eval(path, norm, request):
    _skip_unless_built(path, request)
    compare(path, norm=norm, k=3, layers=2, T=11, batch_first=True)
    x = inputs(11, 3, 3)
    loop, fast = make("loop", norm=norm, k=3, layers=2).eval(), make(path, norm=norm, k=3, layers=2).eval()
    with torch.no_grad():  # inference: the forward without saving anything for backward
        out_a, st_a = loop(x)
        out_b, st_b = fast(x)
    torch.testing.assert_close(out_b, out_a, rtol=1e-10, atol=1e-10)
    for u, v in zip(state_tensors(st_a), state_tensors(st_b)):
        torch.testing.assert_close(v, u, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("path", FAST)
def test_many_rows_and_threads(path, request):
    """Enough batch rows for several chunks, register tiles and a remainder (B=37), 2 threads."""
    _skip_unless_built(path, request)
    torch.set_num_threads(2)
    try:
        compare(path, norm="atn", k=4, T=7, B=37, hidden=21)
        compare(path, norm="ln", T=7, B=37, hidden=21)
    finally:
        torch.set_num_threads(1)


@pytest.mark.parametrize("path", FAST)
def test_wide_layer(path, request):
    """H=120 in float64: the weights no longer fit the cache-sized kernels (ATen's GEMMs, and
    weight gradients from all steps at the end instead of accumulated per step)."""
    _skip_unless_built(path, request)
    compare(path, norm="atn", k=3, T=4, B=5, hidden=120)


@pytest.mark.parametrize("path", FAST)
def test_input_without_grad(path, request):
    """The usual training call: x needs no gradient (the C++ backward then skips dx)."""
    _skip_unless_built(path, request)
    x = inputs(9, 4, 3)
    grads = []
    for backend in ("loop", path):
        model = make(backend, k=3, layers=2)
        out, _ = model(x)
        grads.append(torch.autograd.grad((out * weights_for(out)).sum(), list(model.parameters())))
    for u, v in zip(*grads):
        torch.testing.assert_close(v, u, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("path", FAST)
@pytest.mark.parametrize("norm, k", [("ln", 1), ("atn", 1), ("atn", 3), ("atn", 12)])
def test_state_in_and_its_gradient(path, norm, k, request):
    """A given (h0, c0[, windows]) state: continuation, and gradients w.r.t. every state tensor."""
    _skip_unless_built(path, request)
    x0 = inputs(6, 4, 3, seed=5)
    warm = make("loop", norm=norm, k=k, layers=2)
    _, state = warm(x0)  # a real state (windows of 5 steps for k=12, full k-1 for k=3)
    leaves = [t.detach().clone().requires_grad_() for t in state_tensors(state)]
    given = state_like(state, leaves)
    x = inputs(8, 4, 3)
    a = run(make("loop", norm=norm, k=k, layers=2), x, given, leaves)
    b = run(make(path, norm=norm, k=k, layers=2), x, given, leaves)
    assert_same(a, b, rtol=1e-10, atol=1e-10)
    grad_h0, grad_c0 = b[2][-len(leaves)], b[2][-len(leaves) + 1]
    assert grad_h0 is not None and grad_c0 is not None and grad_h0.abs().sum() > 0


@pytest.mark.parametrize("path", FAST)
@pytest.mark.parametrize("k", (1, 4, 20))
def test_continuation_equals_whole_sequence(path, k, request):
    """Two segments with the state handed over (graph kept) = one pass over both = the loop path."""
    _skip_unless_built(path, request)
    x = inputs(14, 3, 3).requires_grad_()
    fast = make(path, k=k, layers=2)
    weights = weights_for(torch.zeros(14, 3, 5, dtype=DT))

    def loss_of(out, state):
        return (out * weights[: out.shape[0]]).sum() + (state.c ** 2).sum()

    whole, st_whole = fast(x)
    g_whole = torch.autograd.grad(loss_of(whole, st_whole), [x, *fast.parameters()])
    first, st = fast(x[:5])
    second, st2 = fast(x[5:], st)
    both = torch.cat((first, second))
    g_split = torch.autograd.grad(loss_of(both, st2), [x, *fast.parameters()])
    torch.testing.assert_close(both, whole, rtol=1e-10, atol=1e-10)
    for u, v in zip(state_tensors(st_whole), state_tensors(st2)):
        torch.testing.assert_close(v, u, rtol=1e-10, atol=1e-10)
    for u, v in zip(g_whole, g_split):
        torch.testing.assert_close(v, u, rtol=1e-10, atol=1e-10)
    loop = make("loop", k=k, layers=2)
    out_loop, st_loop = loop(x)
    g_loop = torch.autograd.grad(loss_of(out_loop, st_loop), [x, *loop.parameters()])
    torch.testing.assert_close(whole, out_loop, rtol=1e-10, atol=1e-10)
    for u, v in zip(g_loop, g_whole):
        torch.testing.assert_close(v, u, rtol=1e-10, atol=1e-10)


# ----------------------------------------------------------------------------------- float32

@pytest.mark.parametrize("norm, k", [("ln", 1), ("atn", 1), ("atn", 5), ("atn", 45)])
def test_float32_long_sequence(norm, k, cpp):
    """T=200 at the adding workload's widths, float32: fast and loop agree to 1e-4 of each
    tensor's scale (outputs, states, every gradient), and the fast path's worst error against
    float64 is no worse than the loop path's (both ~1e-6..5e-5 here)."""
    torch.manual_seed(0)
    loop = NormLSTM(2, 24, norm=norm, k=k, backend="loop")
    fast = NormLSTM(2, 24, norm=norm, k=k, backend="cpp")
    fast.load_state_dict(loop.state_dict())
    exact = NormLSTM(2, 24, norm=norm, k=k, backend="loop").double()
    exact.load_state_dict(loop.state_dict())
    g = torch.Generator().manual_seed(3)
    x = torch.rand(200, 6, 2, generator=g)
    target = torch.rand(6, 24, generator=g)
    res = []
    for model, dtype in ((loop, torch.float32), (fast, torch.float32), (exact, DT)):
        xr = x.to(dtype).requires_grad_()
        out, state = model(xr)
        loss = ((out[-1] - target.to(dtype)) ** 2).mean() + (out ** 2).mean()
        grads = torch.autograd.grad(loss, [xr, *model.parameters()])
        res.append([out, state.h, state.c, *grads])
    worst_loop = worst_fast = 0.0
    for a, b, e in zip(*res):
        scale = e.abs().max().item()
        assert (a - b).abs().max().item() <= 1e-4 * scale, (a - b).abs().max().item() / scale
        worst_loop = max(worst_loop, (a.double() - e).abs().max().item() / scale)
        worst_fast = max(worst_fast, (b.double() - e).abs().max().item() / scale)
    assert worst_fast <= 2 * worst_loop + 1e-6, (worst_fast, worst_loop)  # as accurate as the loop path


@pytest.mark.parametrize("norm, k", [("ln", 1), ("atn", 3), ("atn", 5)])
def test_float32_short_sequence(norm, k, cpp):
    """T=12, float32: fast and loop agree to 1e-5 of each tensor's scale, outputs and every
    gradient (measured ~1.5e-6..5e-6: the summation orders of the weight gradients differ)."""
    torch.manual_seed(0)
    loop = NormLSTM(3, 16, norm=norm, k=k, backend="loop")
    fast = NormLSTM(3, 16, norm=norm, k=k, backend="cpp")
    fast.load_state_dict(loop.state_dict())
    x = torch.randn(12, 5, 3, generator=torch.Generator().manual_seed(1))
    res = []
    for model in (loop, fast):
        xr = x.clone().requires_grad_()
        out, state = model(xr)
        grads = torch.autograd.grad((out ** 2).sum() + state.h.sum(), [xr, *model.parameters()])
        res.append([out, state.h, state.c, *grads])
    for a, b in zip(*res):
        assert (a - b).abs().max().item() <= 1e-5 * a.abs().max().item()


# -------------------------------------------------------------------------- the Function itself

@pytest.mark.parametrize("path", FAST)
@pytest.mark.parametrize("k", (1, 3))
def test_gradcheck(path, k, request):
    _skip_unless_built(path, request)
    g = torch.Generator().manual_seed(0)
    T, B, H = 4, 2, 2
    G = 4 * H

    def r(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=g, dtype=DT) * scale + shift).requires_grad_()

    m = min(k - 1, 2)  # a window state of two earlier steps (k=3)
    hist = [torch.stack((torch.randn(m, B, generator=g, dtype=DT),
                         torch.rand(m, B, generator=g, dtype=DT) + 0.5), dim=-1).requires_grad_() for _ in range(3)]
    inputs = (r(T, B, 3), r(G, 3), r(G), r(B, H), r(B, H), r(G, H, scale=0.5), r(G), r(G),
              r(G, scale=0.3, shift=1.0), r(G), r(G, scale=0.3, shift=1.0), r(G), r(H, scale=0.3, shift=1.0), r(H),
              *hist)
    assert len(inputs) == len(fastpath.GRAD_NAMES)
    impl = fastpath.IMPLS[path]

    def f(*args):
        return fastpath.NormLSTMRecurrence.apply(impl, k, k, k, 1e-3, *args)

    assert torch.autograd.gradcheck(f, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------------------- path choice

def test_auto_picks_cpp_on_cpu_and_loop_with_a_probe(cpp):
    model = NormLSTM(3, 4, 2, norm="atn", k=3)
    x = inputs(5, 2, 3, dtype=torch.float32)
    model(x)
    assert model.backend == "auto" and model.last_paths == ("cpp", "cpp")
    seen = []
    model.layers[1].norm_c.probe = lambda y, t0: seen.append(t0)
    out_probe, _ = model(x)
    assert model.last_paths == ("loop", "loop") and seen == list(range(5))
    model.layers[1].norm_c.probe = None
    out_fast, _ = model(x)
    assert model.last_paths == ("cpp", "cpp")
    torch.testing.assert_close(out_fast, out_probe, rtol=1e-5, atol=1e-6)


def test_paths_not_covered_fall_back_to_the_loop(cpp):
    x = inputs(5, 2, 3, dtype=torch.float32)
    for model in (NormLSTM(3, 4, norm="ln", backend="loop"), NormGRU(3, 4, norm="bn", backend="loop")):
        model(x)
        assert model.last_paths == ("loop",)
    half = NormLSTM(3, 4, norm="ln").to(torch.bfloat16)
    half(x.to(torch.bfloat16))
    assert half.last_paths == ("loop",)
    for cell in (NormLSTM, NormGRU):  # norm none: torch's own kernel, named like every other path
        plain = cell(3, 4, 2, norm="none", bidirectional=True)
        assert plain.fused and plain.last_paths == ()
        plain(x)
        assert plain.last_paths == ("fused", "fused")
        plain(x, lengths=torch.tensor([5, 3]))
        assert plain.last_paths == ("fused", "fused")
        looped = cell(3, 4, 2, norm="none", backend="loop")
        looped(x)
        assert not looped.fused and looped.last_paths == ("loop", "loop")
    function = NormLSTM(3, 4, norm="atn", backend="function")
    function.layers[0].norm_c.eps = 1e-3  # one eps per layer is the norm_lstm kernel's; "function" has no other
    assert fastpath.select(function, x) == "loop"


def test_auto_without_a_build_uses_the_loop(monkeypatch):
    monkeypatch.setattr(fastpath, "_cpp_state", {"ok": False, "error": "no compiler here"})
    model = NormLSTM(3, 4, norm="atn", k=2)
    with pytest.warns(RuntimeWarning, match="could not be built"):
        model(inputs(4, 2, 3, dtype=torch.float32))
    assert model.last_paths == ("loop",)
    forced = NormLSTM(3, 4, norm="atn", k=2, backend="cpp")
    with pytest.raises(RuntimeError, match="could not be built"):
        forced(inputs(4, 2, 3, dtype=torch.float32))


def test_backend_argument_is_checked():
    with pytest.raises(ValueError, match="backend must be one of"):
        NormLSTM(3, 4, norm="ln", backend="fast")
    with pytest.raises(ValueError, match="covers 'ln', 'atn' of NormLSTM"):
        NormLSTM(3, 4, norm="bn", backend="function")
    with pytest.raises(ValueError, match="backend='function' exists for NormLSTM only"):
        NormGRU(3, 4, norm="atn", backend="function")
    assert "backend='loop'" in repr(NormLSTM(3, 4, norm="ln", backend="loop"))


def test_bench_times_the_fast_path_by_default(cpp):
    from atnbench.bench import build_model, get_workload
    from atnbench.bench.timing import path_of

    w = get_workload("adding").with_overrides(T=6, batch=3)
    x, _ = w.make_batch(torch.device("cpu"))
    expected = {"lstm-fused": "fused", "ln": "cpp", "atn": "cpp", "ln-loop": "loop", "atn-loop": "loop",
                "atn-function": "function", "atn-ref": "other"}
    for name, path in expected.items():
        model = build_model(name, w, 3, torch.device("cpu"))
        model(x)
        assert path_of(model) == path, name

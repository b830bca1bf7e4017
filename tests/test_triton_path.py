"""The Triton fast path (atnbench/nn/gpu) equals the plain loop path.

Every norm (LN, ATN, BN, BN-input, BLN, ATN-BN) x LSTM/GRU x (bias inside, batch 3), (outside, 3), (inside, 1),
each run as two segments with the state carried from the first to the second (graph kept): outputs,
final states (h, c, window states), gradients (input, every parameter, through the carried state)
and the running statistics, in float64 to 1e-10. Evaluation with population statistics, inference
without grad, float32, stacking and direction, and the choice of path.

Without a GPU the kernels run in Triton's interpreter (``TRITON_INTERPRET=1``, set here before they
are imported), on CPU tensors, at tiny sizes (T <= 6, H <= 8); with one they run on it.
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

from atnbench.nn import NormGRU, NormLSTM, fastpath, gpu  # noqa: E402
from helpers import randomize, state_tensors

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DT = torch.float64
CELLS = {"lstm": NormLSTM, "gru": NormGRU}
NORMS = [("ln", {}), ("atn", {"k": 3}), ("bn", {}), ("bn-input", {}), ("bln", {}), ("atn-bn", {"k": 2})]


def make(cell, backend, norm, opts, layers=1, din=3, hidden=5, **kw):
    torch.manual_seed(0)
    model = CELLS[cell](din, hidden, layers, norm=norm, backend=backend, **opts, **kw).to(DEVICE, DT)
    return randomize(model, 0)


def inputs(T, B, d=3, seed=1, dtype=DT):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, d, generator=g, dtype=DT)
    return (x * (torch.rand(T, 1, 1, generator=g, dtype=DT) * 2 + 0.3) + 0.5).to(DEVICE, dtype)


tensors_of = state_tensors  # h (c) and the window histories riding on h


def two_segments(model, x, split):
    """Forward over x[:split] from a fresh state, then x[split:] from the state it returned; one
    backward through both. Returns the outputs, final state, gradients and buffers."""
    x = x.clone().requires_grad_()
    first, state = model(x[:split])
    second, final = model(x[split:], state)
    out = torch.cat((first, second))
    g = torch.Generator().manual_seed(2)
    loss = (out * torch.randn(out.shape, generator=g, dtype=DT).to(DEVICE, out.dtype)).sum()
    for i, t in enumerate(tensors_of(final)):
        loss = loss + (t * t).sum() * (0.3 + 0.1 * i)
    grads = torch.autograd.grad(loss, [x, *model.parameters()], allow_unused=True)
    assert any(g is not None and g.abs().sum() > 0 for g in grads)
    return [out, *tensors_of(final), *grads, *model.buffers()]


def assert_same(a, b, rtol=1e-10, atol=1e-10):
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert (u is None) == (v is None)
        if u is not None:
            assert u.shape == v.shape
            torch.testing.assert_close(v, u, rtol=rtol, atol=atol)


# both placements of the bias at a batch of 3, and a batch of 1 (a batch norm's statistics of one row)
# with the default placement: each value of each, in three quarters of the interpreter's time of all four
@pytest.mark.parametrize("bias_inside, batch", [(True, 3), (False, 3), (True, 1)])
@pytest.mark.parametrize("norm, opts", NORMS, ids=[n for n, _ in NORMS])
@pytest.mark.parametrize("cell", CELLS)
def test_equals_the_loop_with_the_state_carried(cell, norm, opts, bias_inside, batch):
    x = inputs(5, batch)  # 2 steps, then 3 from the carried state: ATN's window (k=3) fills and slides
    loop = make(cell, "loop", norm, opts, bias_inside=bias_inside)
    fast = make(cell, "triton", norm, opts, bias_inside=bias_inside)
    a = two_segments(loop, x, 2)
    b = two_segments(fast, x, 2)
    assert fast.last_paths == ("triton",) and loop.last_paths == ("loop",)
    assert_same(a, b)


@pytest.mark.parametrize("cell", CELLS)
@pytest.mark.parametrize("norm, opts", [("bn", {}), ("atn-bn", {"k": 2}), ("atn-bn", {"k": 2, "atn_bn_eval": "batch"}),
                                        ("bln", {"bln_population": (True, False, False, True)})],
                         ids=["bn", "atn-bn", "atn-bn-batch", "bln-mixed"])
def test_eval_with_population_statistics_equals_the_loop(cell, norm, opts):
    """Population statistics of 4 trained steps, then 5 evaluated: beyond the trained ones too."""
    models = [make(cell, backend, norm, opts) for backend in ("loop", "triton")]
    for model in models:
        model(inputs(4, 3, seed=7))
        model.eval()
    a, b = (two_segments(model, inputs(5, 3), 3) for model in models)
    assert models[1].last_paths == ("triton",)
    assert_same(a, b)


def test_inference_without_grad_two_layers_bidirectional():
    x = inputs(5, 3)
    for cell, norm, opts in (("lstm", "atn", {"k": 2}), ("gru", "bln", {})):
        loop = make(cell, "loop", norm, opts, layers=2, bidirectional=True, batch_first=True)
        fast = make(cell, "triton", norm, opts, layers=2, bidirectional=True, batch_first=True)
        with torch.no_grad():
            a = [*tensors_of(loop(x)[1]), loop(x)[0]]
            b = [*tensors_of(fast(x)[1]), fast(x)[0]]
        assert fast.last_paths == ("triton",) * 4
        assert_same(a, b)


@pytest.mark.parametrize("cell, norm", [("lstm", "atn"), ("gru", "bn")])
def test_float32(cell, norm):
    """float32: the Triton path and the loop agree to 1e-5 of each tensor's scale."""
    loop = make(cell, "loop", norm, {"k": 3}).float()
    fast = make(cell, "triton", norm, {"k": 3}).float()
    x = inputs(6, 3, dtype=torch.float32)
    a, b = two_segments(loop, x, 3), two_segments(fast, x, 3)
    for u, v in zip(a, b):
        if u is not None and u.is_floating_point():
            assert (u - v).abs().max().item() <= 1e-5 * max(u.abs().max().item(), 1e-6)


# ------------------------------------------------------------------------------------------ the choice of path

def test_triton_is_chosen_where_it_runs_and_the_loop_elsewhere(monkeypatch):
    x = inputs(4, 2, dtype=torch.float32)
    model = NormLSTM(3, 4, norm="bln", backend="triton").to(DEVICE)
    assert fastpath.select(model, x) == "triton"
    assert fastpath.select(model, x, lengths=torch.tensor([4, 2], device=DEVICE)) == "loop"
    assert fastpath.select(model, x.to(torch.bfloat16)) == "loop"
    model.layers[0].norm_h.probe = lambda y, t0: None
    assert fastpath.select(model, x) == "loop"
    if DEVICE.type == "cpu":
        assert fastpath.select(NormLSTM(3, 4, norm="bln"), x) in ("cpp", "loop")  # "auto" on a CPU: never Triton
        monkeypatch.delenv("TRITON_INTERPRET")
        assert not gpu.runs_on(DEVICE)
        assert fastpath.select(NormLSTM(3, 4, norm="bln", backend="triton"), x) == "loop"


def test_auto_on_cuda_and_triton_missing(monkeypatch):
    cuda = torch.device("cuda")
    assert fastpath._triton_or_loop("auto", cuda) == ("triton" if gpu.runs_on(cuda) else "loop")
    monkeypatch.setattr(gpu, "installed", lambda: False)
    with pytest.raises(RuntimeError, match=r"atnbench\[gpu\]"):
        NormGRU(3, 4, norm="ln", backend="triton").to(DEVICE)(inputs(4, 2, dtype=torch.float32))
    monkeypatch.setattr(fastpath, "_cpp_state", {})
    with pytest.warns(RuntimeWarning, match="Triton is not installed"):
        assert fastpath._triton_or_loop("auto", cuda) == "loop"


def test_backend_argument():
    assert "backend='triton'" in repr(NormLSTM(3, 4, norm="ln", backend="triton"))
    with pytest.raises(ValueError, match="not norm='none'"):
        NormLSTM(3, 4, norm="none", backend="triton")


def test_graph_replay_keys_on_shapes_and_scalars_and_rebuilds_arguments():
    """The CUDA-graph cache's key and static arguments (the replay itself needs a GPU: benchmarks/)."""
    from atnbench.nn.gpu import graph

    a, b = torch.zeros(2, 3), torch.ones(4, dtype=DT)
    args = (a, [None, b], 3, 1e-5)
    assert graph._signature(args) == (((2, 3), torch.float32, a.device), None, ((4,), DT, b.device), 3, 1e-5)
    assert graph._signature(args) != graph._signature((a, [b, None], 3, 1e-5))
    copies = [a + 1, b + 1]
    rebuilt = graph._with_tensors(args, iter(copies))
    assert rebuilt[0] is copies[0] and rebuilt[1][1] is copies[1] and rebuilt[1][0] is None and rebuilt[2:] == (3, 1e-5)
    assert graph.enabled(args) == a.is_cuda


def test_the_graph_cache_holds_a_bench_round_robin(monkeypatch):
    """`bench` interleaves its models: 14 Triton models x (training forward, backward, inference
    forward) come round again and again. Each signature is captured once, not on every call (at 16
    graphs every call re-captured: LN timed 25x cuDNN on an H200, 4.6x with the graphs kept)."""
    from atnbench.nn.gpu import graph

    captured = []

    class Replay:
        def replay(self):
            pass

    def capture(op, args):
        captured.append(graph._signature(args))
        return Replay(), [], [args[0]]

    monkeypatch.setattr(graph.GraphCache, "_capture", staticmethod(capture))
    cache = graph.GraphCache()

    def op(x):
        return [x]

    signatures = [torch.zeros(1, n) for n in range(1, 14 * 3 + 1)]
    for _ in range(3):  # three rounds of the robin
        for x in signatures:
            cache.run(op, (x,))
    assert len(captured) == len(signatures)


def test_tiles_hold_whole_rows_or_columns_and_stay_small():
    """A row norm's program holds whole rows, a column norm's every row of its features, BLN both;
    otherwise a program holds at most ``TILE`` elements (``WINDOW_TILE`` for ATN's input term, whose
    programs run every step in order): fewer elements a program ran 1.7-2x faster on a GPU."""
    from atnbench.nn.gpu import ops

    B, H = 50, 60
    row = ops.Tiling.of((ops.ROW, ops.ROW), B, H, 4)
    assert row.BH >= H and row.grid_hidden == 1 and row.BB * 4 * row.BH <= ops.TILE and row.grid_rows * row.BB >= B
    col = ops.Tiling.of((ops.COL, ops.COL), B, H, 4)
    assert col.BB >= B and col.grid_rows == 1 and col.BB * 4 * col.BH <= ops.TILE and col.grid_hidden * col.BH >= H
    both = ops.Tiling.of((ops.BLN, ops.NONE), B, H, 4)
    assert (both.grid_rows, both.grid_hidden) == (1, 1)
    assert ops.Tiling.of((ops.ROW,), B, 1000, 4).BB == 1  # one row is more than TILE: whole rows still
    chunk, window = ops._sequence_layout(ops.ROW, 45, 200, B, 4 * H)
    assert chunk == 200 and window.BB * window.BH <= ops.WINDOW_TILE and window.BH >= 4 * H
    chunk, each = ops._sequence_layout(ops.ROW, 1, 200, B, 4 * H)
    assert chunk == 1 and each.BB * each.BH <= max(ops.TILE, each.BH)

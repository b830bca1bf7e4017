"""The fast path of NormLSTM: one layer's whole recurrence as one autograd node.

The plain path (``backend="loop"``, ``NormLSTMLayer.forward``) runs the cell step by step in
Python and lets autograd record ~30 nodes per step; at the paper's sizes that bookkeeping, not
arithmetic, is the cost. The fast path computes the recurrence of a layer without recording
anything and differentiates it with a hand-written backward (one reverse loop; for ATN the
adjoint of the running window total is a reverse running sum over k steps, O(1) per step).
The math is written out in ``fast_python.py``. Two implementations:

- ``"cpp"``: C++ (``csrc/norm_lstm.cpp``): the batch rows are split over threads (they are
  independent through the recurrence), each chunk runs all T steps: small GEMMs (W_x x_t,
  W_h h_{t-1}; weight gradients accumulated per thread) and vectorised loops per row.
  Compiled with ``torch.utils.cpp_extension`` on first use (~10-20 s) and cached
  (``TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``). CPU only.
- ``"function"``: the same algorithm with torch ops in Python (any device with float64): the
  readable version, opt-in (it keeps Python's per-op cost: measured slower than the loop for
  LN, 1.2x faster for ATN, far slower than ``"cpp"``; benchmarks/README.md).

Covered: norm ``"ln"`` and ``"atn"`` (any k >= 1) of ``NormLSTM``, bias inside or outside,
affine on or off, float32 and float64, train and eval, any number of layers (it runs per
layer; dropout between layers stays outside), the ATN window state in and out (continuation
equals the whole sequence), gradients w.r.t. the input, every parameter, h0/c0 and the window
state. Variable lengths (a PackedSequence or ``lengths``) run on ``"cpp"``: the kernels hold the
mask, the rows sorted longest first so that each step computes the running ones only
(``fastpath_rnn.padded``; norm_lstm.cpp for LN/ATN-LSTM, norm_rnn.cpp for the rest).
``select`` falls back to the loop path whenever that is not the case: variable lengths on
``"function"`` or ``"triton"``, another norm, a ``probe`` set on any norm of the model, another dtype, MPS, tracing or ``torch.compile``,
``torch.autocast``, ``torch.func`` transforms, a hook on a layer or a module inside one (or on
every module), a window state of an unexpected form, or (for ``"cpp"``) a non-CPU device. The
backward is once-differentiable, which cannot be detected in advance: asked for a second
derivative (``create_graph=True``) the fast path's backward raises an error saying so
(``fastpath_rnn.first_order``); use ``backend="loop"`` for it.

- ``"triton"``: every norm of NormLSTM and NormGRU in Triton kernels (``atnbench/nn/gpu``),
  run by ``fastpath_rnn`` as the C++ norm_rnn kernel is: CUDA (or a CPU under Triton's
  interpreter, for tests).

``backend="auto"`` picks ``"cpp"`` on CPU, ``"triton"`` on CUDA (the loop there, with a warning,
when Triton is not installed), and the loop path on other devices or when the extension cannot be
built (with a warning). ``"function"`` is never chosen automatically. Set ``ATNBENCH_NO_BUILD=1``
to never compile.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Optional

import torch
from torch import Tensor
from atnbench.nn import build, fast_python, fastpath_rnn, gpu
from atnbench.nn.window import history_at

FAST_BACKENDS = ("cpp", "function", "triton")
# The inputs of one layer's recurrence (NormLSTMRecurrence), in order.
GRAD_NAMES = ("x", "w_ih", "b_ih", "h0", "c0", "w_hh", "b_hh", "bias", "gx", "sx", "gh", "sh", "gc", "sc",
              "hist_x", "hist_h", "hist_c")
CSRC = Path(__file__).with_name("csrc")
# The extension's sources (one list: the build compiles these) and the headers they include
# (part of the cache key). norm_lstm.cpp: LN/ATN-LSTM; norm_rnn.cpp: every other norm, LSTM and GRU.
SOURCES = [CSRC / "norm_lstm.cpp", CSRC / "norm_rnn.cpp"]
HEADERS = [CSRC / "kernels.h"]
# The batch is split into chunks of at least GRAIN rows, one per thread (rows are independent).
GRAIN = int(os.environ.get("ATNBENCH_FAST_GRAIN", "16"))

# (cflags, ldflags) tried in order. -fopenmp: ATen's parallel_for is header code, parallel only
# when compiled with OpenMP (it then shares torch's libgomp and thread count).
BUILD_VARIANTS = [(["-O3", "-march=native", "-fopenmp", "-DATN_MVEC"], ["-fopenmp", "-lmvec"]),
                  (["-O3", "-fopenmp"], ["-fopenmp"]),
                  (["-O3", "-fopenmp-simd"], [])]

EXTENSION = build.Extension(
    "atnbench_fast", sources=tuple(SOURCES), variants=tuple((tuple(c), tuple(ld)) for c, ld in BUILD_VARIANTS),
    depends=tuple(HEADERS))

_cpp_state: dict = {}


def build_cpp(verbose: bool = False) -> bool:
    """Load the C++ extension, compiling it on first use (``atnbench.nn.build``); True if its ops
    are available. Tried with glibc's vector math (``-march=native``, libmvec) first, then plain
    ``-O3`` (with and without OpenMP, which only the batch split over threads needs)."""
    if "ok" not in _cpp_state:
        try:
            built = build.load(EXTENSION, verbose=verbose)
            _cpp_state.update(ok=True, name=built.path.stem, flags=list(built.cflags))
        except build.BuildError as e:
            _cpp_state.update(ok=False, error=str(e), disabled=e.disabled)
    return _cpp_state["ok"]


def cpp_available() -> bool:
    return build_cpp()


class _Cpp:
    name = "cpp"

    @staticmethod
    def forward(inputs, ks, eps, save, lengths=None):
        res = torch.ops.atnbench_fast.norm_lstm_forward(*inputs, *ks, eps, save, GRAIN, lengths)
        return tuple(res[:5]), list(res[5:])

    @staticmethod
    def backward(grads, inputs, out, saved, ks, eps, needs, lengths=None):
        x, w_ih, _, h0, c0, w_hh, _, _, gx, _, gh, _, gc, *_ = inputs
        (dx, dw_ih, db_ih, dh0, dc0, dw_hh, db_hh, dz_sum, dgx, dgh, dgc, dsc, hx, hh, hc) = (
            torch.ops.atnbench_fast.norm_lstm_backward(*grads, x, w_ih, h0, c0, w_hh, gx, gh, gc, out, *saved,
                                                       *ks, eps, needs[0], GRAIN, lengths))
        return [dx, dw_ih, db_ih, dh0, dc0, dw_hh, db_hh, dz_sum, dgx, dz_sum, dgh, dz_sum, dgc, dsc, hx, hh, hc]


class _Python:
    name = "function"

    @staticmethod
    def forward(inputs, ks, eps, save):
        return fast_python.forward(*inputs, *ks, eps, save)

    @staticmethod
    def backward(grads, inputs, out, saved, ks, eps, needs):
        return fast_python.backward(grads, *inputs, out, saved, *ks, eps)


IMPLS = {"cpp": _Cpp, "function": _Python}


class _Padded:
    """``_Cpp`` with a padded batch's lengths bound (sorted longest first; norm_lstm.cpp's mask)."""

    name = "cpp"

    def __init__(self, lengths: Tensor):
        self.lengths = lengths

    def forward(self, inputs, ks, eps, save):
        return _Cpp.forward(inputs, ks, eps, save, self.lengths)

    def backward(self, grads, inputs, out, saved, ks, eps, needs):
        return _Cpp.backward(grads, inputs, out, saved, ks, eps, needs, self.lengths)


class NormLSTMRecurrence(torch.autograd.Function):
    """``apply(impl, kx, kh, kc, eps, *inputs)``, inputs in the order of ``GRAD_NAMES``.

    One layer: ``x`` (T, B, D), its weights (``b_ih``, ``b_hh`` inside and ``bias`` outside
    the normalizations, the gains ``g*`` and shifts ``s*`` may each be None), ``h0``/``c0``
    (B, H), and ``hist_*`` the (m <= k-1, B, 2) float64 window states ((0, B, 2) for LN or a
    fresh sequence). Returns ``(out, c_n, hist_x, hist_h, hist_c)``: out (T, B, H) is h of
    every step, the histories are the new window states. Once differentiable.
    """

    @staticmethod
    def forward(ctx, impl, kx, kh, kc, eps, *inputs):
        outputs, saved = impl.forward(list(inputs), (kx, kh, kc), eps, True)
        ctx.impl, ctx.ks, ctx.eps = impl, (kx, kh, kc), eps
        ctx.optional = [t is None for t in inputs]
        ctx.save_for_backward(*[t for t in inputs if t is not None], outputs[0], *saved)
        ctx.n_inputs = len(inputs) - sum(ctx.optional)
        ctx.set_materialize_grads(False)
        return outputs

    @staticmethod
    @fastpath_rnn.first_order
    def backward(ctx, *grads):
        stored = ctx.saved_tensors
        present = iter(stored[: ctx.n_inputs])
        inputs = [None if missing else next(present) for missing in ctx.optional]
        out, saved = stored[ctx.n_inputs], list(stored[ctx.n_inputs + 1:])
        needed = ctx.needs_input_grad[5:]
        result = ctx.impl.backward(list(grads), inputs, out, saved, ctx.ks, ctx.eps, needed)
        return (None, None, None, None, None,
                *[g if need and inp is not None else None for g, need, inp in zip(result, needed, inputs)])


def _run(impl, ks, eps, inputs):
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs):
        return NormLSTMRecurrence.apply(impl, *ks, eps, *inputs)
    return impl.forward(list(inputs), ks, eps, False)[0]


def _history(window: Optional[Tensor], batch: int, like: Tensor) -> Tensor:
    if window is None:
        return like.new_zeros((0, batch, 2), dtype=torch.float64)
    return window.contiguous()


def lstm_layer(layer, x: Tensor, h0: Tensor, c0: Tensor, windows: tuple, path: str,
               lengths: Optional[Tensor] = None):
    """``NormLSTMLayer.forward`` on the fast path ``path`` ("cpp" or "function"); same returns.

    LN/ATN-LSTM layers run this module's kernel (the input term fused in); every other covered
    norm runs ``fastpath_rnn`` (csrc/norm_rnn.cpp)."""
    _require_build(path)
    if path == "triton":
        return fastpath_rnn.layer(layer, x, h0, c0, windows, lengths, gpu.load_ops())
    if not _ln_atn_layer(layer):
        return fastpath_rnn.layer(layer, x, h0, c0, windows, lengths)
    if lengths is not None:  # the rows sorted and the padded outputs zeroed as for norm_rnn.cpp
        return fastpath_rnn.padded(layer, x, h0, c0, windows, lengths,
                                   lambda *args: _ln_atn(layer, *args, IMPLS[path]))
    return _ln_atn(layer, x, h0, c0, windows, None, IMPLS[path])


def _ln_atn(layer, x: Tensor, h0: Tensor, c0: Tensor, windows: tuple, lengths: Optional[Tensor], impl):
    """norm_lstm.cpp's layer: ``(out, h_n, c_n, windows)``; with ``lengths`` (sorted, the longest
    x's length) out is the held h and each ATN window state is the sequence's own."""
    batch = x.shape[1]
    nx, nh, nc = layer.norm_x, layer.norm_h, layer.norm_c
    ks = tuple(getattr(n, "k", 1) for n in (nx, nh, nc))
    hists = tuple(_history(w, batch, x) for w in windows)
    inputs = (x.contiguous(), layer.weight_ih.contiguous(), layer.bias_ih, h0.contiguous(), c0.contiguous(),
              layer.weight_hh.contiguous(), layer.bias_hh, layer.bias,
              nx.weight, nx.bias, nh.weight, nh.bias, nc.weight, nc.bias, *hists)
    out, c, hx, hh, hc = _run(impl if lengths is None else _Padded(lengths.cpu()), ks, float(nx.eps), inputs)
    if not nx.windowed:
        return out, out[-1], c, (None, None, None)
    if lengths is None:
        return out, out[-1], c, (hx, hh, hc)
    return out, out[-1], c, tuple(history_at(every, k, every.shape[0] - x.shape[0] + lengths)
                                  for every, k in zip((hx, hh, hc), ks))


def gru_layer(layer, x: Tensor, h0: Tensor, windows: tuple, path: str, lengths: Optional[Tensor] = None):
    """``NormGRULayer.forward`` on the C++ or Triton fast path (``fastpath_rnn``); same returns."""
    _require_build(path)
    ops = gpu.load_ops() if path == "triton" else None
    out, h, _, new_windows = fastpath_rnn.layer(layer, x, h0, None, windows, lengths, ops)
    return out, h, new_windows


def _require_build(path: str) -> None:
    if path == "triton" and not gpu.installed():
        raise RuntimeError(f"backend='triton' needs Triton: {gpu.INSTALL_HINT}")
    if path == "cpp" and not build_cpp():
        raise RuntimeError("backend='cpp': the C++ extension could not be built:\n" + _cpp_state.get("error", ""))


def _ln_atn_layer(layer) -> bool:
    """An LSTM layer whose three terms all have LN or all ATN-LN with one eps (norm_lstm.cpp)."""
    from atnbench.nn.norms import AssortedTimeNorm, LayerNorm

    norms = layer.norms()
    return (len(norms) == 3 and len({type(n) for n in norms}) == 1
            and type(norms[0]) in (LayerNorm, AssortedTimeNorm) and len({n.eps for n in norms}) == 1)


def kernel_of(model) -> Optional[str]:
    """The C++ kernel that covers every layer of ``model``: ``"norm_lstm"`` (LN/ATN-LSTM),
    ``"norm_rnn"`` (every other norm of ``fastpath_rnn.TERMS``, LSTM and GRU), or None."""
    norms = [n for layer in model.layers for n in layer.norms()]
    if not norms or any(n.probe is not None or (n.weight is None) != (n.bias is None) for n in norms):
        return None
    if all(_ln_atn_layer(layer) for layer in model.layers):
        return "norm_lstm"
    if all(fastpath_rnn.covered(n) for layer in model.layers for n in layer.norms()[1:]):
        return "norm_rnn"
    return None


def _windows_ok(model, x: Tensor, windows) -> bool:
    if windows is None:
        return True
    batch = x.shape[1]
    for layer, ws in zip(model.layers, windows):
        for norm, w in zip(layer.norms(), ws):
            if w is None:
                if norm.windowed:
                    return False
                continue
            if not norm.windowed or not isinstance(w, Tensor) or w.dtype != torch.float64 or w.dim() != 3:
                return False
            expected = norm.initial_state(batch, x.device).shape[1:]  # (B, 2) for ATN-LN, (n, 2) for ATN-BN
            if w.shape[1:] != expected or w.shape[0] > norm.k - 1 or w.device != x.device:
                return False
    return True


def autocasting(x: Tensor) -> bool:
    """Whether ``torch.autocast`` is on for ``x``'s device (False for one it does not know: meta)."""
    try:
        return torch.is_autocast_enabled(x.device.type)
    except RuntimeError:  # "unknown device type for autocast"
        return False


def _hooked(model) -> bool:
    """Whether a hook waits on a layer or a module inside one (legacy ``torch.nn.utils.weight_norm``
    and ``spectral_norm`` recompute a weight in a forward pre-hook; activation capture), or on
    every module (``register_module_forward_hook``): the loop calls the layers as modules."""
    from torch.nn.modules import module as torch_module

    if any(getattr(torch_module, name, None) for name in ("_global_forward_pre_hooks", "_global_forward_hooks",
                                                           "_global_backward_pre_hooks", "_global_backward_hooks")):
        return True
    return any(module._forward_pre_hooks or module._forward_hooks or module._backward_pre_hooks
               or module._backward_hooks for layer in model.layers for module in layer.modules())


def _tracing() -> bool:
    compiling = getattr(torch.compiler, "is_compiling", None)
    return bool((compiling is not None and compiling()) or torch.jit.is_tracing() or torch.jit.is_scripting())


def _triton_or_loop(backend: str, device: torch.device) -> str:
    """The Triton path where its kernels run (CUDA; a CPU under Triton's interpreter), the loop
    elsewhere. ``"triton"`` asked for where it would run but Triton is missing is an error;
    ``"auto"`` on CUDA without Triton warns once and takes the loop."""
    if gpu.runs_on(device):
        return "triton"
    if backend == "triton" and not gpu.installed() and (device.type == "cuda" or gpu.interpreting()):
        raise RuntimeError(f"backend='triton' needs Triton: {gpu.INSTALL_HINT}")
    if backend == "auto" and not gpu.installed() and not _cpp_state.get("triton_warned"):
        _cpp_state["triton_warned"] = True
        warnings.warn_explicit(f"Triton is not installed: NormLSTM/NormGRU on CUDA use the slower loop path "
                               f"({gpu.INSTALL_HINT})", RuntimeWarning, "atnbench", 0)
    return "loop"


def select(model, x: Tensor, windows=None, lengths: Optional[Tensor] = None) -> str:
    """The path a NormLSTM forward takes: ``"cpp"``, ``"function"`` or ``"loop"`` (see module doc).

    Variable-length batches (``lengths``) take the C++ path (the kernels hold each sequence's state
    after its own last step, as the loop does), the loop elsewhere (Triton, ``"function"``).
    """
    backend = model.backend
    if backend not in ("auto", *FAST_BACKENDS) or model.norm not in getattr(model, "fast_norms", ()):
        return "loop"
    if lengths is not None and (backend not in ("auto", "cpp") or x.shape[1] == 0):
        return "loop"  # padded batches: on the C++ kernels only (and with rows)
    if x.dtype not in (torch.float32, torch.float64) or x.device.type == "mps" or x.shape[0] == 0 or _tracing():
        return "loop"
    if autocasting(x):  # its products would reach the kernels in half/bfloat16
        return "loop"
    if torch._C._are_functorch_transforms_active():  # torch.func.grad/vmap/jvp: the kernels' Functions
        return "loop"  # are of the older form, which the transforms refuse
    if _hooked(model):  # the fast path calls no layer as a module: its hooks would never run
        return "loop"
    kernel = kernel_of(model)
    if kernel is None or not _windows_ok(model, x, windows):
        return "loop"
    if backend == "function":
        return "function" if kernel == "norm_lstm" else "loop"
    if lengths is not None and x.device.type != "cpu":
        return "loop"
    if backend == "triton" or (backend == "auto" and x.device.type == "cuda"):
        return _triton_or_loop(backend, x.device)
    if x.device.type != "cpu":
        return "loop"
    if backend == "cpp":
        return "cpp"
    if build_cpp():
        return "cpp"
    warn_unbuilt()
    return "loop"


def warn_unbuilt() -> None:
    """The one line saying the C++ fast path could not be built: once per process, and not where
    ``ATNBENCH_NO_BUILD`` turned it off."""
    if _cpp_state.get("ok") is False and not _cpp_state.get("warned") and not _cpp_state.get("disabled"):
        _cpp_state["warned"] = True
        # One line, not the caller's source line: the warning is about the machine, not the code.
        warnings.warn_explicit(f"the C++ fast path could not be built ({_cpp_state.get('error') or '?'}); "
                               "NormLSTM uses the slower loop path. `atnbench build` retries and shows why.",
                               RuntimeWarning, "atnbench", 0)


def tried() -> bool:
    """Whether this process has tried to load the C++ fast path (built or not)."""
    return "ok" in _cpp_state


def failed_build() -> Optional[dict]:
    """This process's failed build of the C++ fast path (None if it was not tried or it worked),
    for worker processes to take over with ``adopt_failed_build``."""
    return dict(_cpp_state) if _cpp_state.get("ok") is False else None


def adopt_failed_build(state: Optional[dict]) -> None:
    """A parent process's failed build taken as this process's own: not tried again here, and not
    warned about again where the parent warned (a sweep's workers printed one line each)."""
    if state is not None and "ok" not in _cpp_state:
        _cpp_state.update(state)

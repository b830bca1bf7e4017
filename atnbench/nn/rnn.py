"""What NormLSTM and NormGRU share: arguments, layers, states, initialisation.

A normalized recurrent layer normalizes the input term W_x x for all steps at once (one
matmul, statistics in parallel over time) and the recurrent terms step by step with the
normalizations' streams. Stacking, dropout between layers, ``batch_first`` and the states
follow ``torch.nn.LSTM``/``torch.nn.GRU``.

States: without a windowed normalization the state is what ``nn.LSTM`` (``(h, c)``) or
``nn.GRU`` (``h``) returns. With ATN the window of past step statistics is part of the
recurrent state (``WindowedLSTMState`` / ``WindowedGRUState``): passing it back continues the
sequence exactly; ``detach_state`` cuts the graph between truncated-BPTT segments.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor, nn

from atnbench.nn.norms import NormSpec, SequenceNorm
from atnbench.nn.schemes import NormScheme, get_scheme

INITS = ("atn", "torch")
BACKENDS = ("auto", "loop", "fused", "cpp", "function")


class LSTMState(NamedTuple):
    h: Tensor
    c: Tensor


class WindowedLSTMState(NamedTuple):
    h: Tensor
    c: Tensor
    windows: tuple  # per layer: one window history per normalized term (input, hidden, cell)


class WindowedGRUState(NamedTuple):
    h: Tensor
    windows: tuple  # per layer: (input, hidden) window histories


def detach_state(state: Any) -> Any:
    """Detach every tensor of a (nested, possibly named) state tuple."""
    if isinstance(state, Tensor):
        return state.detach()
    if isinstance(state, tuple):
        items = [detach_state(s) for s in state]
        return type(state)(*items) if hasattr(state, "_fields") else tuple(items)
    return state


def init_weights(layer: "NormRecurrentLayer", init: str) -> None:
    """The ATN authors' initialisation or torch's default.

    ``"atn"``: W_x orthogonal, W_h the identity tiled once per gate, biases 0 (gains/shifts of
    the normalizations are set by the normalizations). ``"torch"``: U(-1/sqrt(H), 1/sqrt(H)).
    """
    hidden = layer.hidden_size
    if init == "torch":
        bound = 1.0 / math.sqrt(hidden)
        for p in layer.recurrent_parameters():
            nn.init.uniform_(p, -bound, bound)
        return
    with torch.no_grad():
        nn.init.orthogonal_(layer.weight_ih)
        layer.weight_hh.copy_(torch.eye(hidden).repeat(layer.gates, 1))
        for name in ("bias_ih", "bias_hh", "bias"):
            if getattr(layer, name, None) is not None:
                getattr(layer, name).zero_()


class NormRecurrentLayer(nn.Module):
    """One layer: weights named as in ``nn.LSTM``/``nn.GRU`` and one normalization per term."""

    gates = 1
    terms: tuple[str, ...] = ("input", "hidden")

    def __init__(self, input_size: int, hidden_size: int, scheme: NormScheme, spec: NormSpec,
                 bias: bool, bias_inside: bool):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        width = self.gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(width, input_size))
        self.weight_hh = nn.Parameter(torch.empty(width, hidden_size))
        inside = bias and bias_inside
        self.bias_ih = nn.Parameter(torch.zeros(width)) if inside else None
        self.bias_hh = nn.Parameter(torch.zeros(width)) if inside else None
        self.bias = nn.Parameter(torch.zeros(width)) if bias and not bias_inside else None
        self.norm_x: SequenceNorm = scheme.input(width, spec)
        self.norm_h: SequenceNorm = scheme.hidden(width, spec)

    def recurrent_parameters(self):
        return [p for p in (self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, self.bias) if p is not None]

    def norms(self) -> list[SequenceNorm]:
        return [self.norm_x, self.norm_h]

    def initial_windows(self, batch: int, device: torch.device) -> tuple:
        return tuple(n.initial_state(batch, device) for n in self.norms())

    def input_term(self, x: Tensor, window: Optional[Tensor], lengths: Optional[Tensor]):
        """Normalized W_x x (+ b) for every step at once; the outside bias is folded in here."""
        wx = torch.nn.functional.linear(x, self.weight_ih, self.bias_ih)
        xn, window = self.norm_x(wx, window, lengths)
        if self.bias is not None:
            xn = xn + self.bias
        return xn, window


class NormRecurrent(nn.Module):
    """Stack of normalized recurrent layers with the ``nn.LSTM``/``nn.GRU`` calling convention.

    ``backend``: ``"auto"`` (default), ``"loop"`` (the plain Python recurrence, the reference
    path, always available), ``"fused"`` (torch's kernel, norm="none" only), ``"cpp"`` or
    ``"function"`` (the fast path of ``fastpath.py``, for the norms in ``fast_norms``).
    """

    layer_class: type = NormRecurrentLayer
    torch_class: type = nn.RNNBase
    fast_norms: tuple[str, ...] = ()  # norms that the C++ fast path (backend "cpp") covers
    function_norms: tuple[str, ...] = ()  # norms that the Python fast path (backend "function") covers

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, *, norm: str = "atn",
                 bias_inside: Optional[bool] = None, init: Optional[str] = None, backend: str = "auto",
                 **norm_options):
        super().__init__()
        if input_size < 1 or hidden_size < 1 or num_layers < 1:
            raise ValueError("input_size, hidden_size and num_layers must be positive")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if init is not None and init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(repr(b) for b in BACKENDS)}, got {backend!r}")
        self.scheme = get_scheme(norm)
        init = self.scheme.init if init is None else init
        self.spec = NormSpec(**norm_options)
        if backend == "fused" and norm != "none":
            raise ValueError("backend='fused' (torch's own kernel) exists only for norm='none'")
        fast = {"cpp": self.fast_norms, "function": self.function_norms}.get(backend)
        if fast is not None and norm not in fast:
            covered = ", ".join(repr(n) for n in fast) or "no norm"
            raise ValueError(f"backend={backend!r} (the fast path) covers {covered} of {type(self).__name__}, "
                             f"not norm={norm!r}; use 'auto' or 'loop'")
        self.norm = norm
        self.backend = backend
        self.last_paths: tuple[str, ...] = ()  # the path each layer took in the last forward
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.batch_first, self.dropout = batch_first, dropout
        self.bias_inside = self.scheme.bias_inside if bias_inside is None else bias_inside
        self.windowed = self.scheme.windowed
        self.fused = norm == "none" and backend in ("auto", "fused")
        if self.fused:
            self.rnn = self.torch_class(input_size, hidden_size, num_layers, bias, batch_first, dropout)
            if init == "atn":
                self._init_fused()
            self.layers = nn.ModuleList()
            return
        self.layers = nn.ModuleList(
            self.layer_class(input_size if i == 0 else hidden_size, hidden_size, self.scheme, self.spec,
                             bias, self.bias_inside)
            for i in range(num_layers)
        )
        for layer in self.layers:
            init_weights(layer, init)

    def _init_fused(self) -> None:
        gates = self.layer_class.gates
        with torch.no_grad():
            for name, p in self.rnn.named_parameters():
                if name.startswith("weight_ih"):
                    nn.init.orthogonal_(p)
                elif name.startswith("weight_hh"):
                    p.copy_(torch.eye(self.hidden_size).repeat(gates, 1))
                else:
                    p.zero_()

    def norm_modules(self) -> list[tuple[str, SequenceNorm]]:
        """(name, module) of every normalization, e.g. ``("layer0.hidden", AssortedTimeNorm)``."""
        return [(f"layer{i}.{term}", n) for i, layer in enumerate(self.layers)
                for term, n in zip(layer.terms, layer.norms())]

    def _time_first(self, x: Tensor) -> Tensor:
        if x.dim() != 3:
            raise ValueError(f"expected a 3-d input (seq, batch, feature), got shape {tuple(x.shape)}")
        if x.shape[-1] != self.input_size:
            raise ValueError(f"input has {x.shape[-1]} features, the model expects {self.input_size}")
        return x.transpose(0, 1) if self.batch_first else x

    def _dropout(self, y: Tensor, layer: int) -> Tensor:
        if self.dropout > 0 and self.training and layer < self.num_layers - 1:
            return torch.nn.functional.dropout(y, self.dropout, True)
        return y

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, norm={self.norm!r}, "
                f"k={self.spec.k}, bias_inside={self.bias_inside}, fused={self.fused}, backend={self.backend!r}")

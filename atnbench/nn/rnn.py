"""What NormLSTM and NormGRU share: arguments, layers, states, the forward pass, initialisation.

A normalized recurrent layer normalizes the input term W_x x for all steps at once (one
matmul, statistics in parallel over time) and the recurrent terms step by step with the
normalizations' streams. Stacking, dropout between layers, ``batch_first``, ``bidirectional``,
``PackedSequence`` input and the states follow ``torch.nn.LSTM``/``torch.nn.GRU``.

Layers and directions: ``layers`` holds ``num_layers * num_directions`` layers in the order of
``nn.LSTM``'s ``h_n`` (layer 0 forward, layer 0 reverse, layer 1 forward, ...). The reverse
direction runs the same cell on each sequence reversed within its own length (its ATN window
slides over the reversed sequence, its batch statistics at step s pool every sequence's s-th
step from its end) and its outputs are reversed back; the directions' outputs are concatenated
over features, and a layer above reads both.

Variable lengths (``padding.py``): a ``PackedSequence``, or a padded batch with ``lengths``.
Each sequence's recurrence stops at its own last step: its state is held from there on (the
returned ``h_n``/``c_n`` and ATN window are those of its last step) and its padded outputs are
0, as ``pad_packed_sequence`` gives them. The normalizations see only valid steps (see
``norms.py``).

Parameter names: each layer holds ``weight_ih``, ``weight_hh`` and ``bias_ih``/``bias_hh``
(bias inside the normalizations) or ``bias`` (outside), with ``nn.LSTM``'s shapes and gate
order. ``torch_state_dict()`` names them as ``nn.LSTM``/``nn.GRU`` do (``weight_ih_l0``,
``bias_hh_l1_reverse``, ...), those names are attributes too (the layer's parameter, for
client code that initialises by them), and ``load_torch_state_dict`` reads such names;
``load_state_dict`` also accepts them (a checkpoint of a model built around ``nn.LSTM`` loads
into the same model built around ``NormLSTM``; with a normalization, pass ``strict=False``:
its gains and shifts are not in the checkpoint). A bias outside the normalizations loads as
``bias_ih + bias_hh`` and exports as ``bias_ih = bias, bias_hh = 0`` (exact for the LSTM; for
the GRU's n gate, whose b_hn is scaled by r, only with the bias inside).

States: for every normalization the state is what ``nn.LSTM`` (``(h_n, c_n)``) or ``nn.GRU``
(``h_n``) returns. With ATN the window of past step statistics is part of the recurrent state:
it rides on ``h_n`` (``state.py``), so passing the state back continues the sequence exactly,
and ``h_n.detach()`` (or ``detach_state``) cuts the graph between truncated-BPTT segments.

Pickling (``torch.save(model)``): a module holds its modules, parameters, buffers and plain
values only (the ``nn.LSTM`` names are accepted by overriding ``_load_from_state_dict``, not by
a hook, and the scheme is looked up by name), so ``torch.load`` with ``weights_only=True``
needs nothing but the classes ``serialization.py`` registers.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import warnings
from typing import Optional

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from atnbench.nn import fastpath
from atnbench.nn.norms import NormSpec, SequenceNorm
from atnbench.nn.padding import as_lengths, repack, reverse_padded, step_mask, unpack
from atnbench.registry import NormScheme, fast_norms, get_scheme
from atnbench.nn.state import plain, windows_of, with_windows
from atnbench.nn.window import check_history

INITS = ("atn", "torch")
BACKENDS = ("auto", "loop", "fused", "cpp", "function", "triton")
TORCH_PARAMETER = re.compile(r"(weight|bias)_(ih|hh)_l(\d+)(_reverse)?")  # nn.LSTM's names: weight_hh_l1_reverse


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

    def streams(self, windows: tuple, lengths: Optional[Tensor]) -> list:
        """The step-by-step normalizations of the recurrent terms (all but the input term)."""
        return [n.stream(w, lengths) for n, w in zip(self.norms()[1:], windows[1:])]

    @staticmethod
    def step_masks(steps: int, lengths: Optional[Tensor]) -> list:
        """Per step, (B, 1) bool of the sequences still running (None each step: no padding)."""
        if lengths is None:
            return [None] * steps
        return list(step_mask(lengths, steps).unsqueeze(-1).unbind(0))

    @staticmethod
    def hold(valid: Optional[Tensor], new: Tensor, old: Tensor) -> Tensor:
        """The new state where the sequence still runs, the held one after its last step."""
        return new if valid is None else torch.where(valid, new, old)

    @staticmethod
    def emit(valid: Optional[Tensor], h: Tensor) -> Tensor:
        """The output of a step: h, or 0 at a padded step (as pad_packed_sequence gives)."""
        return h if valid is None else torch.where(valid, h, h.new_zeros(()))

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
    path, always available), ``"fused"`` (torch's kernel, norm="none" only), ``"cpp"``,
    ``"function"`` or ``"triton"`` (the fast path of ``fastpath.py``, for the norms in
    ``fast_norms``; ``"triton"``: the GPU kernels of ``atnbench.nn.gpu``).
    """

    layer_class: type = NormRecurrentLayer
    torch_class: type = nn.RNNBase
    @property
    def fast_norms(self) -> tuple[str, ...]:
        """The norms the C++ (backend "cpp") and Triton fast paths cover: the registry says."""
        return fast_norms()
    function_norms: tuple[str, ...] = ()  # norms that the Python fast path (backend "function") covers
    carried = 1  # state tensors per layer besides the windows: h (GRU), h and c (LSTM)

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, *,
                 norm: str = "atn", bias_inside: Optional[bool] = None, init: Optional[str] = None,
                 backend: str = "auto", device=None, dtype=None, **norm_options):
        super().__init__()
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if isinstance(value, bool) or not isinstance(value, int):  # as nn.LSTM: 4.0 is not a size
                raise TypeError(f"{name} should be of type int, got {type(value).__name__}")
        if input_size < 1 or hidden_size < 1 or num_layers < 1:
            raise ValueError("input_size, hidden_size and num_layers must be positive")
        for name, value in (("bias", bias), ("batch_first", batch_first), ("bidirectional", bidirectional),
                            ("bias_inside", True if bias_inside is None else bias_inside)):
            if not isinstance(value, bool):  # as nn.LSTM: "False" from a quoted config is true, and was taken so
                raise TypeError(f"{name} should be of type bool, got {type(value).__name__} ({value!r})")
        proj_size = norm_options.pop("proj_size", 0)
        if proj_size != 0:  # nn.LSTM's default 0 (no projection) is accepted as given
            raise ValueError(f"proj_size={proj_size!r}: {type(self).__name__} has no projection (nn.LSTM's "
                             "proj_size); leave it 0")
        unknown = sorted(set(norm_options) - {f.name for f in dataclasses.fields(NormSpec)})
        if unknown:
            known = ", ".join(f.name for f in dataclasses.fields(NormSpec))
            raise TypeError(f"{type(self).__name__} got unknown keyword argument(s) {', '.join(unknown)}; "
                            f"besides nn.LSTM's arguments it takes norm, bias_inside, init, backend and "
                            f"the normalization's options: {known}")
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout <= 1.0:
            raise ValueError(f"dropout should be a number in range [0, 1] representing the probability of an "
                             f"element being zeroed, got {dropout!r}")
        if dropout > 0 and num_layers == 1:  # nn.LSTM's warning, word for word
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}")
        if init is not None and init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(repr(b) for b in BACKENDS)}, got {backend!r}")
        scheme = get_scheme(norm)
        init = scheme.init if init is None else init
        self.spec = NormSpec(**norm_options)
        if backend == "fused" and norm != "none":
            raise ValueError("backend='fused' (torch's own kernel) exists only for norm='none'")
        fast = {"cpp": self.fast_norms, "function": self.function_norms, "triton": self.fast_norms}.get(backend)
        if fast is not None and not fast:
            raise ValueError(f"backend={backend!r} exists for NormLSTM only (a Python fast path of LN and ATN); "
                             f"use 'auto' or 'loop'")
        if fast is not None and norm not in fast:
            covered = ", ".join(repr(n) for n in fast) or "no norm"
            raise ValueError(f"backend={backend!r} (the fast path) covers {covered} of {type(self).__name__}, "
                             f"not norm={norm!r}; use 'auto' or 'loop'")
        self.norm = norm
        self.backend = backend
        # the path each layer took in the last forward: a backend's name, or "empty" (a batch of 0)
        self.last_paths: tuple[str, ...] = ()
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.proj_size, self.bias = 0, bool(bias)  # nn.LSTM's attributes, which client code reads
        self.batch_first, self.dropout, self.bidirectional = batch_first, float(dropout), bool(bidirectional)
        self.num_directions = 2 if bidirectional else 1
        self.bias_inside = scheme.bias_inside if bias_inside is None else bias_inside
        self.windowed = scheme.windowed
        self.fused = norm == "none" and backend in ("auto", "fused")
        if self.fused:
            with warnings.catch_warnings():  # its dropout warning was given above, once
                warnings.filterwarnings("ignore", message="dropout option adds dropout")
                self.rnn = self.torch_class(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                                            self.bidirectional)
            if init == "atn":
                self._init_fused()
            self.layers = nn.ModuleList()
        else:
            width = hidden_size * self.num_directions
            self.layers = nn.ModuleList(
                self.layer_class(input_size if i == 0 else width, hidden_size, scheme, self.spec,
                                 bias, self.bias_inside)
                for i in range(num_layers) for _ in range(self.num_directions)
            )
            for layer in self.layers:
                init_weights(layer, init)
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)

    @property
    def windows_made_by(self) -> str:
        """What tells this model's ATN windows from another's, in words: its cell, norm and k (an
        LSTM's windows hold the cell state's terms too, a GRU's do not), and its layout (one
        bidirectional layer holds as many windows, of the same sizes, as two layers of one
        direction) and bias placement (a bias inside the norm is inside its statistics)."""
        layers = f"{self.num_layers} layer{'s' if self.num_layers != 1 else ''}"
        direction = "bidirectional" if self.bidirectional else "unidirectional"
        bias = "bias inside" if self.bias_inside else "bias outside"
        return f"{type(self).__name__} norm={self.norm!r}, k={self.spec.k}, {layers}, {direction}, {bias}"

    @property
    def scheme(self) -> NormScheme:
        """The registry's entry for ``norm`` (looked up, not held: a pickled module holds no functions)."""
        return get_scheme(self.norm)

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
        """(name, module) of every normalization, e.g. ``("layer0.hidden", AssortedTimeNorm)``
        (``"layer0_reverse.hidden"`` for the reverse direction)."""
        return [(f"layer{name}.{term}", n) for name, layer in self._named_layers()
                for term, n in zip(layer.terms, layer.norms())]

    def _named_layers(self):
        """(``"0"``, ``"0_reverse"``, ``"1"``, ...; layer), in the order of ``layers`` and h_n."""
        for index, layer in enumerate(self.layers):
            i, d = divmod(index, self.num_directions)
            yield f"{i}{'_reverse' if d else ''}", layer

    # ------------------------------------------------------------------ nn.LSTM / nn.GRU names

    def torch_state_dict(self) -> dict[str, Tensor]:
        """The recurrent weights named and shaped as in ``nn.LSTM``/``nn.GRU`` (no normalization
        parameters): ``nn.LSTM(...).load_state_dict(model.torch_state_dict())`` works."""
        if self.fused:
            return {name: t.detach().clone() for name, t in self.rnn.state_dict().items()}
        out = {}
        for name, layer in self._named_layers():
            out[f"weight_ih_l{name}"] = layer.weight_ih.detach().clone()
            out[f"weight_hh_l{name}"] = layer.weight_hh.detach().clone()
            if layer.bias_ih is not None:
                out[f"bias_ih_l{name}"] = layer.bias_ih.detach().clone()
                out[f"bias_hh_l{name}"] = layer.bias_hh.detach().clone()
            elif layer.bias is not None:
                out[f"bias_ih_l{name}"] = layer.bias.detach().clone()
                out[f"bias_hh_l{name}"] = torch.zeros_like(out[f"bias_ih_l{name}"])
        return out

    def _internal_names(self, prefix: str, state_dict: dict) -> tuple[dict[str, Tensor], set[str]]:
        """``nn.LSTM``-named entries of ``state_dict`` (under ``prefix``) under this module's names,
        and the keys they replace. A key that is not there is left out, so that load_state_dict
        reports it missing and loads the others, as ``nn.LSTM`` does; a bias outside the
        normalizations needs both of its layer's biases."""
        out, used = {}, set()

        def take(source: str, target: str) -> None:
            if source in state_dict:
                out[target] = state_dict[source]
                used.add(source)

        if self.fused:
            for name in self.rnn.state_dict():
                take(prefix + name, f"{prefix}rnn.{name}")
            return out, used
        for index, (name, layer) in enumerate(self._named_layers()):
            inner = f"{prefix}layers.{index}."
            take(f"{prefix}weight_ih_l{name}", inner + "weight_ih")
            take(f"{prefix}weight_hh_l{name}", inner + "weight_hh")
            if layer.bias_ih is not None:
                take(f"{prefix}bias_ih_l{name}", inner + "bias_ih")
                take(f"{prefix}bias_hh_l{name}", inner + "bias_hh")
            elif layer.bias is not None:
                ih, hh = f"{prefix}bias_ih_l{name}", f"{prefix}bias_hh_l{name}"
                if ih in state_dict and hh in state_dict:
                    out[inner + "bias"] = self._merged_bias(state_dict[ih], state_dict[hh], f"bias_hh_l{name}")
                    used |= {ih, hh}
        return out, used

    def _merged_bias(self, bias_ih: Tensor, bias_hh: Tensor, where: str) -> Tensor:
        """``nn.LSTM``'s two biases as a layer's one, outside the normalizations: only their sum counts."""
        return bias_ih + bias_hh

    def load_torch_state_dict(self, state_dict: dict[str, Tensor]) -> None:
        """Load the recurrent weights of an ``nn.LSTM``/``nn.GRU`` of the same shape (its
        ``state_dict()``); the normalizations keep their parameters. Names must match exactly."""
        expected = set(self.torch_state_dict())
        if set(state_dict) != expected:
            missing, unexpected = sorted(expected - set(state_dict)), sorted(set(state_dict) - expected)
            raise ValueError(f"not the state dict of a {self.torch_class.__name__} of this shape: "
                             f"missing {missing}, unexpected {unexpected}")
        own, renamed = self.state_dict(), self._internal_names("", state_dict)[0]
        for name, value in renamed.items():
            if own[name].shape != value.shape:
                raise ValueError(f"{name}: shape {tuple(value.shape)} where {tuple(own[name].shape)} is expected")
        self.load_state_dict(renamed, strict=False)

    def __getattr__(self, name: str):
        """``nn.LSTM``'s parameter names as attributes (``rnn.bias_ih_l0.data[h:2 * h].fill_(1)``,
        ``nn.init.orthogonal_(rnn.weight_hh_l1_reverse)``): the layer's own parameter, not a copy."""
        try:  # the module's own parameters, buffers and submodules first, as before
            return super().__getattr__(name)
        except AttributeError:
            match = TORCH_PARAMETER.fullmatch(name)
            if match is None:
                raise
        owner, attribute = self._torch_parameter_home(name, match)
        return getattr(owner, attribute)

    def __setattr__(self, name: str, value) -> None:
        """``rnn.weight_hh_l0 = nn.Parameter(...)`` replaces the layer's parameter, as in ``nn.LSTM``
        (registered here under that name, it would be a parameter that nothing reads)."""
        match = TORCH_PARAMETER.fullmatch(name) if name.startswith(("weight_", "bias_")) else None
        if match is None:
            return super().__setattr__(name, value)
        owner, attribute = self._torch_parameter_home(name, match)
        if value is not None and not isinstance(value, nn.Parameter):
            # refused here, before torch's kernel module (norm="none") has taken the tensor into its
            # flat weights and then refused it, leaving a module that computes with it
            home = f"rnn.{name}" if self.fused else \
                f"layers.{next(i for i, layer in enumerate(self.layers) if layer is owner)}.{attribute}"
            raise TypeError(f"cannot assign '{torch.typename(value)}' as parameter '{name}' (torch.nn.Parameter or "
                            f"None expected; torch.func.functional_call takes the layer's name, {home})")
        setattr(owner, attribute, value)

    def _torch_parameter_home(self, name: str, match: re.Match) -> tuple[nn.Module, str]:
        """(module, attribute) holding the parameter ``nn.LSTM`` names ``name``."""
        kind, which, layer, reverse = match.group(1), match.group(2), int(match.group(3)), bool(match.group(4))
        missing = AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        if layer >= self.num_layers or (reverse and not self.bidirectional):
            raise missing
        if self.fused:
            return self.rnn, name
        index = layer * self.num_directions + reverse
        home = self.layers[index]
        if kind == "weight" or home.bias_ih is not None:
            return home, f"{kind}_{which}"
        if home.bias is None:  # bias=False
            raise missing
        raise AttributeError(f"'{type(self).__name__}' with norm={self.norm!r} has one bias per layer, outside the "
                             f"normalizations, not nn.{self.torch_class.__name__}'s two: layers[{index}].bias "
                             f"(torch_state_dict() gives it as bias_ih, with bias_hh 0); bias_inside=True gives the two")

    def register_parameter(self, name: str, param) -> None:
        """Refuse ``nn.LSTM``-named ``NAME_orig`` (``torch.nn.utils.prune`` by the module and
        ``nn.LSTM``'s name registers the weight so before it fails on the alias, leaving a stray
        parameter behind): before anything changes, naming the layer and name that work."""
        match = TORCH_PARAMETER.fullmatch(name[:-len("_orig")]) if name.endswith("_orig") else None
        if match is not None and name not in self._parameters:
            owner, attribute = self._torch_parameter_home(match.group(0), match)
            where = "rnn" if self.fused else f"layers[{next(i for i, layer in enumerate(self.layers) if layer is owner)}]"
            raise AttributeError(f"'{match.group(0)}' is nn.{self.torch_class.__name__}'s name for a weight of "
                                 f"{where}: what changes a parameter by name (torch.nn.utils.prune, weight_norm, "
                                 f"parametrize) takes that module and its name, e.g. "
                                 f"prune.l1_unstructured(model.{where}, {attribute!r}, amount=0.5)")
        super().register_parameter(name, param)

    def flatten_parameters(self) -> None:
        """As ``nn.LSTM.flatten_parameters`` (a no-op unless torch's fused kernel is used)."""
        if self.fused:
            self.rnn.flatten_parameters()

    # ------------------------------------------------------------------ forward

    def forward(self, input, hx=None, lengths=None, *, state=None):
        """``(output, state)`` as ``nn.LSTM``/``nn.GRU``, with their argument names; see the class docstring.

        ``input``: (T, B, input_size) (``batch_first``: (B, T, input_size)) or a ``PackedSequence``
        (then the output is one too, with the same batch order and sizes). ``hx``: the state, as
        ``nn.LSTM``'s (``state=`` is the same argument under its earlier name). ``lengths`` (B,)
        with a padded ``input``: the valid steps of each sequence (right padding).
        """
        if state is not None:
            if hx is not None:
                raise TypeError("pass the state once: hx= or state= (the same argument), not both")
            hx = state
        x, state = input, hx
        packed = x if isinstance(x, PackedSequence) else None
        if packed is not None and lengths is not None:
            raise ValueError("pass either a PackedSequence or a padded batch with lengths, not both")
        if self.fused:
            return self._fused_forward(x, state, lengths)
        if packed is not None:
            x, lengths = unpack(packed)
            self._check_features(x)
        else:
            x = self._time_first(x)
        if x.shape[0] == 0:  # as nn.LSTM refuses it, in words
            raise ValueError("expected a sequence length larger than 0 (the input has no steps)")
        lengths = as_lengths(lengths, x.shape[0], x.shape[1], x.device)
        y, carries, windows = self._stack(x, state, lengths)
        if packed is not None:
            y = repack(y, lengths, packed)
        elif self.batch_first:
            y = y.transpose(0, 1)
        if self.windowed:
            carries[0] = with_windows(carries[0], windows, self.windows_made_by)
            if len(carries) == 1 and self._get_backward_hooks()[0] and not getattr(self, "_hook_warned", False):
                self._hook_warned = True  # once a model, not once a training step
                _warn_hooked_state(self)
        return y, self._pack(carries)

    def _fused_forward(self, x, state, lengths):
        if not isinstance(x, PackedSequence):
            self._check_rank(x)  # nn.LSTM's own would take an unbatched input, which no other norm takes
        self.last_paths = ("fused",) * self.num_layers
        hx = None
        if state is not None:
            carries = self._carries(state)
            hx = tuple(carries) if len(carries) > 1 else carries[0]
        if lengths is None:
            out, final = self.rnn(x, hx)
            return out, self._pack(_as_list(final))
        steps = x.shape[1 if self.batch_first else 0]
        lengths = as_lengths(lengths, steps, x.shape[0 if self.batch_first else 1], x.device)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=self.batch_first, enforce_sorted=False)
        out, final = self.rnn(packed, hx)
        out, _ = pad_packed_sequence(out, batch_first=self.batch_first, total_length=steps)
        return out, self._pack(_as_list(final))

    def _stack(self, x: Tensor, state, lengths: Optional[Tensor]):
        """All layers and directions on a time-first batch: (output, final carries, windows)."""
        batch = x.shape[1]
        if state is None:
            carries, windows = [self._zeros(x) for _ in range(self.carried)], None
        else:
            carries = self._carries(state)
            windows = windows_of(carries[0], self.windows_made_by) if self.windowed else None
            carries = [plain(c) for c in carries]
        for i, carry in enumerate(carries):
            expected = (len(self.layers), batch, self.hidden_size)
            if tuple(carry.shape) != expected:
                raise ValueError(f"state tensor {i} has shape {tuple(carry.shape)}, expected {expected} "
                                 "(num_layers * num_directions, batch, hidden_size)")
            if carry.dtype != x.dtype and not fastpath.autocasting(x):
                raise ValueError(f"state tensor {i} has dtype {carry.dtype}, the input {x.dtype}; give them one dtype")
            if carry.device != x.device:  # as nn.LSTM says it; on the kernels it was torch's words on fake tensors
                raise ValueError(f"state tensor {i} is on {carry.device}, the input on {x.device}; give them one "
                                 f"device (state.to(x.device))")
        if windows is None:
            windows = tuple(layer.initial_windows(batch, x.device) for layer in self.layers)
        else:
            if len(windows) != len(self.layers):
                raise ValueError(f"the state holds windows for {len(windows)} layers, the model has {len(self.layers)}")
            for ws in windows:
                for w in ws:
                    if isinstance(w, Tensor):
                        check_history(w)
        if batch == 0:
            self.last_paths = ("empty",) * len(self.layers)
            return self._empty_batch(x, carries, windows)
        path = fastpath.select(self, x, windows, lengths)
        self.last_paths = (path,) * len(self.layers)
        finals: list[list[Tensor]] = [[] for _ in carries]
        new_windows = []
        y = x
        for i in range(self.num_layers):
            outputs = []
            for d in range(self.num_directions):
                index = i * self.num_directions + d
                inp = y if d == 0 else reverse_padded(y, lengths)
                out, *carry, w = self._run_layer(self.layers[index], inp, [c[index] for c in carries],
                                                 windows[index], lengths, path)
                outputs.append(out if d == 0 else reverse_padded(out, lengths))
                for held, c in zip(finals, carry):
                    held.append(c)
                new_windows.append(w)
            y = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=-1)
            y = self._dropout(y, i)
        return self._handed_out(y, path, lengths), [torch.stack(c) for c in finals], tuple(new_windows)

    def _empty_batch(self, x: Tensor, carries: list[Tensor], windows):
        """A batch of no sequences, answered as ``nn.LSTM`` answers it: an empty output and states,
        in the graph (every parameter's gradient 0). Nothing is normalized, so no statistic
        changes: running statistics and windows stay as they were (torch's BatchNorm leaves its
        running statistics alike on an empty batch)."""
        anchor = x.sum() * 0  # the sums of empty tensors: 0, but they keep x and the weights in the graph
        for parameter in self.parameters():
            anchor = anchor + parameter.sum() * 0
        y = x.new_zeros(x.shape[0], 0, self.num_directions * self.hidden_size) + anchor
        return y, [carry + anchor for carry in carries], windows

    def _run_layer(self, layer, x, carry, windows, lengths, path):
        """One layer on the loop path: ``(output, *final carries, windows)``; cells with a fast
        path override this to dispatch on ``path``."""
        return layer(x, *carry, windows, lengths)

    def _handed_out(self, y: Tensor, path: str, lengths: Optional[Tensor]) -> Tensor:
        """The output the caller receives; a cell whose fast path saves it for backward, where the
        caller's torch module would not, hands out a copy (``NormGRU``)."""
        return y

    # cell-specific: the state's layout (NormLSTM: (h, c), NormGRU: h, as nn.LSTM / nn.GRU)
    def _carries(self, state) -> list[Tensor]:
        """The tensors of a state passed in, in the order of the layers' carries (h first)."""
        raise NotImplementedError

    def _pack(self, carries: list[Tensor]):
        """The state to return from the final carries (h first, windows riding on it)."""
        raise NotImplementedError

    def _zeros(self, x: Tensor) -> Tensor:
        return x.new_zeros(len(self.layers), x.shape[1], self.hidden_size)

    def _check_features(self, x: Tensor) -> None:
        if x.shape[-1] != self.input_size:
            raise ValueError(f"input has {x.shape[-1]} features, the model expects {self.input_size}")
        weight = next(self.parameters(), None)
        if not (x.is_floating_point() or x.is_complex()):  # token ids: model.to(torch.int64), as said below, fails
            raise ValueError(f"input dtype {x.dtype}: a recurrent layer takes floating-point input; convert it "
                             f"(x.float()), or embed token ids first (nn.Embedding)")
        if weight is not None and x.dtype != weight.dtype and not fastpath.autocasting(x):  # as nn.LSTM says it
            raise ValueError(f"input dtype ({x.dtype}) does not match the model's dtype ({weight.dtype}); "
                             f"convert one of them (x.to({weight.dtype}) or model.to({x.dtype}))")

    def _check_rank(self, x: Tensor) -> None:
        if x.dim() != 3:
            layout = "(batch, seq, feature) (batch_first)" if self.batch_first else "(seq, batch, feature)"
            raise ValueError(f"expected a 3-d input {layout}, got shape {tuple(x.shape)}")

    def _time_first(self, x: Tensor) -> Tensor:
        self._check_rank(x)
        self._check_features(x)
        return x.transpose(0, 1) if self.batch_first else x

    def _dropout(self, y: Tensor, layer: int) -> Tensor:
        if self.dropout > 0 and self.training and layer < self.num_layers - 1:
            return torch.nn.functional.dropout(y, self.dropout, True)
        return y

    def _load_from_state_dict(self, state_dict, prefix, *args) -> None:
        """Also read ``nn.LSTM``/``nn.GRU`` keys (``weight_ih_l0``, ...): renamed to this module's
        before loading. An override, not a load_state_dict hook: a hook is held in the module's
        state, and ``torch.load(weights_only=True)`` of a pickled module refuses it. A ``norm="none"``
        model on torch's kernel keeps them under ``rnn.``: read there too, so its checkpoint loads
        into the same model on another backend or with a normalization; and it reads the loop
        backend's ``layers.N.`` keys."""
        if not self.fused and prefix + "rnn.weight_ih_l0" in state_dict:
            for name in [name for name in state_dict if name.startswith(prefix + "rnn.")]:
                state_dict[prefix + name[len(prefix) + len("rnn."):]] = state_dict.pop(name)
        if self.fused and prefix + "layers.0.weight_ih" in state_dict:  # the same model on the loop backend
            self._loop_keys_to_torch(prefix, state_dict)
        if not self.fused:
            self._other_bias_placement(prefix, state_dict)
        if any(key.startswith(prefix) and TORCH_PARAMETER.fullmatch(key[len(prefix):]) for key in state_dict):
            renamed, used = self._internal_names(prefix, state_dict)  # what is there loads, the rest is missing
            for name in used:
                del state_dict[name]
            state_dict.update(renamed)
        super()._load_from_state_dict(state_dict, prefix, *args)

    def _other_bias_placement(self, prefix: str, state_dict) -> None:
        """The loop backend's names of the other bias placement, read as the ``nn.LSTM`` names and a
        fused checkpoint's are (so the backend that saved a checkpoint does not decide whether its
        biases load): ``layers.N.bias_ih`` and ``bias_hh`` into a layer with one bias outside the
        normalizations as their sum; one ``layers.N.bias`` into a model without normalizations
        (``norm="none"``, where inside and outside are the same) as ``bias_ih``, with ``bias_hh`` 0."""
        for index, (name, layer) in enumerate(self._named_layers()):
            inner = f"{prefix}layers.{index}."
            ih, hh, one = inner + "bias_ih", inner + "bias_hh", inner + "bias"
            if layer.bias is not None and one not in state_dict and ih in state_dict and hh in state_dict:
                state_dict[one] = self._merged_bias(state_dict.pop(ih), state_dict.pop(hh), f"{inner}bias_hh")
            elif layer.bias_ih is not None and self.norm == "none" and one in state_dict and ih not in state_dict:
                bias = state_dict.pop(one)
                state_dict[ih], state_dict[hh] = bias, torch.zeros_like(bias)

    def _loop_keys_to_torch(self, prefix: str, state_dict) -> None:
        """``layers.N.weight_ih`` (the loop backend's names) renamed to the fused model's
        ``rnn.weight_ih_l0``; a single ``bias`` (bias inside) is ``bias_ih``, with ``bias_hh`` 0.
        Keys with no counterpart (a normalization's gains) are left for load_state_dict to report."""
        for index in range(self.num_layers * self.num_directions):
            i, d = divmod(index, self.num_directions)
            inner, suffix = f"{prefix}layers.{index}.", f"_l{i}{'_reverse' if d else ''}"
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                if inner + name in state_dict:
                    state_dict[f"{prefix}rnn.{name}{suffix}"] = state_dict.pop(inner + name)
            if inner + "bias" in state_dict:
                bias = state_dict.pop(inner + "bias")
                state_dict[f"{prefix}rnn.bias_ih{suffix}"] = bias
                state_dict[f"{prefix}rnn.bias_hh{suffix}"] = torch.zeros_like(bias)

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"bidirectional={self.bidirectional}, norm={self.norm!r}, k={self.spec.k}, "
                f"bias_inside={self.bias_inside}, fused={self.fused}, backend={self.backend!r}")


def _as_list(final) -> list[Tensor]:
    """``nn.LSTM``'s ``(h_n, c_n)`` or ``nn.GRU``'s ``h_n`` as the list of carries (h first)."""
    return list(final) if isinstance(final, tuple) else [final]


def _warn_hooked_state(model) -> None:
    """A full backward hook hands back every top-level output rebuilt by torch, plain: a GRU's bare
    ``h_n`` loses its windows (an LSTM's ``(h_n, c_n)`` sits one level down, out of the hook's reach)."""
    # explicit, as the C++ build's warning: the line is about the model, and torch's frames sit between
    warnings.warn_explicit(f"{model.windows_made_by}: a full backward hook on this module "
                           f"(register_full_backward_hook) returns h_n rebuilt by torch, without ATN's windows, so "
                           f"passed back it starts them empty; hook the module around it, or the tensors "
                           f"(Tensor.register_hook), to carry them", RuntimeWarning, "atnbench", 0)

"""NormLSTM: a drop-in for ``torch.nn.LSTM`` with a choice of normalization.

The cell is eqs. 14-16 of the ATN paper (and Ba et al.'s LN-LSTM, Cooijmans et al.'s
BN-LSTM, with their normalizations in place of ATN):

    i, f, g, o = N_x(W_x x_t [+ b_x]) + N_h(W_h h_{t-1} [+ b_h]) [+ b]
    c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)
    h_t = sigmoid(o) * tanh(N_c(c_t))

The un-normalized c is carried. Gates are in ``nn.LSTM``'s order (i, f, g, o) so that its
weights load as they are. By default the LSTM bias sits inside the normalization for LN and
ATN, as in the ATN experiments and the authors' code (``bias_inside=True``: N(W_h h + b_h) +
N(W_x x + b_x)); batch normalizations default to Ba et al./Cooijmans et al.'s bias outside
(``bias_inside=False``), since a batch mean cancels any bias inside.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from atnbench.nn import fastpath
from atnbench.nn.norms import SequenceNorm
from atnbench.nn.rnn import NormRecurrent, NormRecurrentLayer
from atnbench.nn.state import LSTMState


class NormLSTMLayer(NormRecurrentLayer):
    gates = 4
    terms = ("input", "hidden", "cell")

    def __init__(self, input_size, hidden_size, scheme, spec, bias, bias_inside):
        super().__init__(input_size, hidden_size, scheme, spec, bias, bias_inside)
        self.norm_c: SequenceNorm = scheme.cell(hidden_size, spec)

    def norms(self):
        return [self.norm_x, self.norm_h, self.norm_c]

    def forward(self, x: Tensor, h: Tensor, c: Tensor, windows: tuple, lengths: Optional[Tensor] = None):
        """One layer over a time-first (T, B, D) batch: eqs. 14-16 of the ATN paper at every step.

        ``lengths``: after its last step a sequence's (h, c) is held and its output is 0.
        """
        xn, window_x = self.input_term(x, windows[0], lengths)
        norm_h, norm_c = self.streams(windows, lengths)
        weight_hh, bias_hh = self.weight_hh, self.bias_hh
        outputs = []
        # unbind, not indexing: indexing makes backward quadratic in T
        for xn_t, valid in zip(xn.unbind(0), self.step_masks(x.shape[0], lengths)):
            gates = xn_t + norm_h(torch.nn.functional.linear(h, weight_hh, bias_hh))  # eq. 14
            i, f, g, o = gates.chunk(4, dim=1)
            c_t = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)  # eq. 15
            h_t = torch.sigmoid(o) * torch.tanh(norm_c(c_t))  # eq. 16
            h, c = self.hold(valid, h_t, h), self.hold(valid, c_t, c)
            outputs.append(self.emit(valid, h_t))
        return torch.stack(outputs), h, c, (window_x, norm_h.state(), norm_c.state())


class NormLSTM(NormRecurrent):
    """``torch.nn.LSTM`` with normalization: ``NormLSTM(input_size, hidden_size, ..., norm="atn", k=10)``.

    Arguments as ``nn.LSTM`` (``input_size, hidden_size, num_layers, bias, batch_first,
    dropout, bidirectional``, ``device``, ``dtype``), plus:

    - ``norm``: ``"none"`` (eqs. 14-16 without N: ``nn.LSTM``), ``"ln"`` (Ba et al.),
      ``"atn"`` (ATN-LN, eqs. 7-9 in eqs. 14-16), ``"atn-bn"`` (ATN on BN, Table 6),
      ``"bn"`` (Cooijmans et al., BN per step on all three terms), ``"bn-input"`` (Laurent et
      al.: the input term only, frame-wise eq. 19 or sequence-wise eqs. 20-21),
      ``"bln"`` (Ziaee & Cano, Algorithm 1 / eqs. 10-17)
    - ``k``, ``eps``, ``affine`` (trainable gain/shift), ``gain_init``, and the other fields of
      ``NormSpec`` (population statistics, BLN flags, BN-input mode).
    - ``bias_inside``: the LSTM bias inside (True) or outside (False) the normalization; None
      takes the scheme's default (see module doc).
    - ``init``: ``"atn"`` (W_x orthogonal, W_h identity tiled per gate, the ATN authors') or
      ``"torch"`` (``nn.LSTM``'s default); None takes the scheme's default: ``"torch"`` for
      ``norm="none"`` (the plain ``nn.LSTM`` baseline), ``"atn"`` for every normalization.
    - ``backend``: ``"auto"`` uses ``nn.LSTM``'s fused kernel for ``norm="none"`` and the fast
      path (``atnbench.nn.fastpath``: the layer's recurrence as one autograd node with a
      hand-written backward, in C++ on CPU) for every norm (each direction of a bidirectional
      layer on its own; padded and packed batches too); any case the fast path does not cover
      (a ``probe`` set on a norm, variable lengths on CUDA, MPS, dtypes other than
      float32/float64, ``torch.autocast``, ``torch.compile``/tracing, ``torch.func`` transforms, a
      hook on a layer such as legacy ``torch.nn.utils.weight_norm``) takes the loop, with the same result. On CUDA ``"auto"`` takes the Triton fast path
      (``atnbench.nn.gpu``: per step one cuBLAS GEMM and one fused kernel, the recurrence replayed
      as a CUDA graph; needs ``pip install 'atnbench[gpu]'``, else the loop with a warning). The
      fast path is once-differentiable: a second derivative (``create_graph=True``) raises there,
      saying so; use ``"loop"`` for it.
      ``"loop"`` forces the Python recurrence (the same cell code as every normalization; the
      reference the fast path is tested against). ``"cpp"`` / ``"function"`` force the C++ /
      Python fast path (``"function"``: LN and ATN only) where it applies (still the loop where it does not);
      ``"triton"`` the Triton kernels (CUDA, or a CPU under ``TRITON_INTERPRET=1``: tests).
      ``last_paths`` records the path each layer took in the last forward (``"empty"``: a batch of
      no sequences, answered as ``nn.LSTM`` answers it, with no statistic changed).

    ``forward(input, hx=None, lengths=None)`` (``nn.LSTM``'s names; ``state=`` is ``hx``'s earlier
    name) returns ``(output, state)``. ``input`` may be a
    ``PackedSequence`` (the output is one then), or a padded batch with ``lengths`` (B,): each
    sequence runs over its own steps only (see ``atnbench.nn.rnn``). The state ``hx`` is ``(h, c)``
    (each ``(num_layers * num_directions, B, H)``) for every norm, as ``nn.LSTM``'s; with a
    windowed normalization (ATN) ``h`` also carries the windows (``atnbench.nn.state``): hand
    the state back (detached or not) to continue the sequences.
    """

    layer_class = NormLSTMLayer
    torch_class = nn.LSTM
    function_norms = ("ln", "atn")
    carried = 2

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None, **options):
        # nn.LSTM's arguments in nn.LSTM's order, positional too; the rest (norm, k, ...) by keyword
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size=proj_size, device=device, dtype=dtype, **options)

    def _run_layer(self, layer, x, carry, windows, lengths, path):
        if path == "loop":
            return layer(x, *carry, windows, lengths)
        return fastpath.lstm_layer(layer, x, *carry, windows, path, lengths)

    def _carries(self, state):
        if isinstance(state, list) and len(state) == 2:  # nn.LSTM takes [h_0, c_0] too
            state = tuple(state)
        if not isinstance(state, tuple) or len(state) != 2 or not all(isinstance(t, Tensor) for t in state):
            raise ValueError("the state of NormLSTM is (h_0, c_0), two tensors, as for nn.LSTM (ATN's windows ride "
                             f"on h_0: pass back the state it returned), got {_describe(state)}")
        return list(state)

    def _pack(self, carries):
        return LSTMState(*carries)


def _describe(state) -> str:
    if isinstance(state, tuple):
        kinds = ", ".join(type(t).__name__ for t in state)
        return f"a tuple of {len(state)}" + (f" ({kinds})" if kinds and len(state) <= 3 else "")
    return f"a {type(state).__name__}"

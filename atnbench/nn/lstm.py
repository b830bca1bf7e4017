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
from atnbench.nn.rnn import LSTMState, NormRecurrent, NormRecurrentLayer, WindowedLSTMState


class NormLSTMLayer(NormRecurrentLayer):
    gates = 4
    terms = ("input", "hidden", "cell")

    def __init__(self, input_size, hidden_size, scheme, spec, bias, bias_inside):
        super().__init__(input_size, hidden_size, scheme, spec, bias, bias_inside)
        self.norm_c: SequenceNorm = scheme.cell(hidden_size, spec)

    def norms(self):
        return [self.norm_x, self.norm_h, self.norm_c]

    def forward(self, x: Tensor, h: Tensor, c: Tensor, windows: tuple, lengths: Optional[Tensor] = None):
        xn, window_x = self.input_term(x, windows[0], lengths)
        norm_h, norm_c = self.norm_h.stream(windows[1]), self.norm_c.stream(windows[2])
        weight_hh, bias_hh = self.weight_hh, self.bias_hh
        outputs = []
        for xn_t in xn.unbind(0):  # unbind, not indexing: indexing makes backward quadratic in T
            gates = xn_t + norm_h(torch.nn.functional.linear(h, weight_hh, bias_hh))
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(norm_c(c))
            outputs.append(h)
        return torch.stack(outputs), h, c, (window_x, norm_h.state(), norm_c.state())


class NormLSTM(NormRecurrent):
    """``torch.nn.LSTM`` with normalization: ``NormLSTM(input_size, hidden_size, ..., norm="atn", k=10)``.

    Arguments as ``nn.LSTM`` (``input_size, hidden_size, num_layers, bias, batch_first,
    dropout``), plus:

    - ``norm``: ``"none" | "ln" | "atn" | "atn-bn" | "bn" | "bn-input" | "bln"``
    - ``k``, ``eps``, ``affine`` (trainable gain/shift), ``gain_init``, and the other fields of
      ``NormSpec`` (population statistics, BLN flags, BN-input mode).
    - ``bias_inside``: the LSTM bias inside (True) or outside (False) the normalization; None
      takes the scheme's default (see module doc).
    - ``init``: ``"atn"`` (W_x orthogonal, W_h identity tiled per gate, the ATN authors') or
      ``"torch"`` (``nn.LSTM``'s default); None takes the scheme's default: ``"torch"`` for
      ``norm="none"`` (the plain ``nn.LSTM`` baseline), ``"atn"`` for every normalization.
    - ``backend``: ``"auto"`` uses ``nn.LSTM``'s fused kernel for ``norm="none"`` and the fast
      path (``atnbench.nn.fastpath``: the layer's recurrence as one autograd node with a
      hand-written backward, in C++ on CPU) for every other norm; any case the fast path does
      not cover (a ``probe`` set on a norm, MPS or CUDA, dtypes other than float32/float64,
      ``torch.compile``/tracing) takes the loop. The fast path
      is once-differentiable: double backward raises there; use ``"loop"`` for it.
      ``"loop"`` forces the Python recurrence (the same cell code as every normalization; the
      reference the fast path is tested against). ``"cpp"`` / ``"function"`` force the C++ /
      Python fast path (``"function"``: LN and ATN only) where it applies (still the loop where it does not).
      ``last_paths`` records the path each layer took in the last forward.

    ``forward(x, state=None, lengths=None)`` returns ``(output, state)``. ``state`` is
    ``(h, c)`` (each ``(num_layers, B, H)``), or ``WindowedLSTMState(h, c, windows)`` for
    windowed normalizations (ATN): hand it back to continue the sequence. ``lengths`` (B,)
    marks unpadded frames for sequence-wise BN.
    """

    layer_class = NormLSTMLayer
    torch_class = nn.LSTM
    fast_norms = ("ln", "atn", "atn-bn", "bn", "bn-input", "bln")
    function_norms = ("ln", "atn")

    def forward(self, x: Tensor, state=None, lengths: Optional[Tensor] = None):
        if self.fused:
            out, (h, c) = self.rnn(x, None if state is None else (state[0], state[1]))
            return out, LSTMState(h, c)
        x = self._time_first(x)
        batch = x.shape[1]
        if state is None:
            zeros = x.new_zeros(self.num_layers, batch, self.hidden_size)
            h0, c0, windows = zeros, zeros, None
        else:
            h0, c0 = state[0], state[1]
            windows = state[2] if len(state) > 2 else None
        if windows is None:
            windows = tuple(layer.initial_windows(batch, x.device) for layer in self.layers)
        path = fastpath.select(self, x, windows)
        self.last_paths = (path,) * len(self.layers)
        hs, cs, new_windows = [], [], []
        y = x
        for i, layer in enumerate(self.layers):
            if path == "loop":
                y, h, c, w = layer(y, h0[i], c0[i], windows[i], lengths)
            else:
                y, h, c, w = fastpath.lstm_layer(layer, y, h0[i], c0[i], windows[i], path, lengths)
            y = self._dropout(y, i)
            hs.append(h)
            cs.append(c)
            new_windows.append(w)
        out = y.transpose(0, 1) if self.batch_first else y
        h, c = torch.stack(hs), torch.stack(cs)
        if self.windowed:
            return out, WindowedLSTMState(h, c, tuple(new_windows))
        return out, LSTMState(h, c)

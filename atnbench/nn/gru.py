"""NormGRU: ``torch.nn.GRU`` with a choice of normalization (ATN on GRUs).

Following Ba et al.'s LN-GRU with ``nn.GRU``'s gate layout (r, z, n):

    a_x = N_x(W_x x_t [+ b_x]) [+ b],   a_h = N_h(W_h h_{t-1} [+ b_h])
    r = sigmoid(a_x^r + a_h^r),   z = sigmoid(a_x^z + a_h^z)
    n = tanh(a_x^n + r * a_h^n),   h_t = (1 - z) * n + z * h_{t-1}

Each of the two terms is normalized over its whole 3H vector (the LSTM normalizes 4H); with
``norm="none"`` this is exactly ``nn.GRU``.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor, nn

from atnbench.nn import fastpath
from atnbench.nn.rnn import NormRecurrent, NormRecurrentLayer, WindowedGRUState


class NormGRULayer(NormRecurrentLayer):
    gates = 3
    terms = ("input", "hidden")

    def forward(self, x: Tensor, h: Tensor, windows: tuple, lengths: Optional[Tensor] = None):
        xn, window_x = self.input_term(x, windows[0], lengths)
        norm_h = self.norm_h.stream(windows[1])
        weight_hh, bias_hh = self.weight_hh, self.bias_hh
        outputs = []
        for xn_t in xn.unbind(0):
            hn = norm_h(torch.nn.functional.linear(h, weight_hh, bias_hh))
            x_r, x_z, x_n = xn_t.chunk(3, dim=1)
            h_r, h_z, h_n = hn.chunk(3, dim=1)
            r = torch.sigmoid(x_r + h_r)
            z = torch.sigmoid(x_z + h_z)
            n = torch.tanh(x_n + r * h_n)
            h = n + z * (h - n)
            outputs.append(h)
        return torch.stack(outputs), h, (window_x, norm_h.state())


class NormGRU(NormRecurrent):
    """``torch.nn.GRU`` with normalization; arguments and states as ``NormLSTM`` (h only)."""

    layer_class = NormGRULayer
    torch_class = nn.GRU
    fast_norms = ("ln", "atn", "atn-bn", "bn", "bn-input", "bln")

    def forward(self, x: Tensor, state=None, lengths: Optional[Tensor] = None):
        if self.fused:
            out, h = self.rnn(x, state[0] if isinstance(state, WindowedGRUState) else state)
            return out, h
        x = self._time_first(x)
        batch = x.shape[1]
        windows = None
        if state is None:
            h0 = x.new_zeros(self.num_layers, batch, self.hidden_size)
        elif isinstance(state, WindowedGRUState):
            h0, windows = state.h, state.windows
        else:
            h0 = state
        if windows is None:
            windows = tuple(layer.initial_windows(batch, x.device) for layer in self.layers)
        path = fastpath.select(self, x, windows)
        self.last_paths = (path,) * len(self.layers)
        hs, new_windows = [], []
        y = x
        for i, layer in enumerate(self.layers):
            if path == "loop":
                y, h, w = layer(y, h0[i], windows[i], lengths)
            else:
                y, h, w = fastpath.gru_layer(layer, y, h0[i], windows[i], path, lengths)
            y = self._dropout(y, i)
            hs.append(h)
            new_windows.append(w)
        out = y.transpose(0, 1) if self.batch_first else y
        h = torch.stack(hs)
        if self.windowed:
            return out, WindowedGRUState(h, tuple(new_windows))
        return out, h

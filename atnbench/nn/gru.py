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
from atnbench.nn.rnn import NormRecurrent, NormRecurrentLayer


class NormGRULayer(NormRecurrentLayer):
    gates = 3
    terms = ("input", "hidden")

    def forward(self, x: Tensor, h: Tensor, windows: tuple, lengths: Optional[Tensor] = None):
        """One layer over a time-first (T, B, D) batch (module doc's equations at every step).

        ``lengths``: after its last step a sequence's h is held and its output is 0.
        """
        xn, window_x = self.input_term(x, windows[0], lengths)
        (norm_h,) = self.streams(windows, lengths)
        weight_hh, bias_hh = self.weight_hh, self.bias_hh
        outputs = []
        for xn_t, valid in zip(xn.unbind(0), self.step_masks(x.shape[0], lengths)):
            hn = norm_h(torch.nn.functional.linear(h, weight_hh, bias_hh))
            x_r, x_z, x_n = xn_t.chunk(3, dim=1)
            h_r, h_z, h_n = hn.chunk(3, dim=1)
            r = torch.sigmoid(x_r + h_r)
            z = torch.sigmoid(x_z + h_z)
            n = torch.tanh(x_n + r * h_n)
            h_t = n + z * (h - n)
            h = self.hold(valid, h_t, h)
            outputs.append(self.emit(valid, h_t))
        return torch.stack(outputs), h, (window_x, norm_h.state())


class NormGRU(NormRecurrent):
    """``torch.nn.GRU`` with normalization; arguments, variable lengths and bidirectional as
    ``NormLSTM``. ``state`` is ``h`` ((num_layers * num_directions, B, H)) for every norm, as
    ``nn.GRU``'s; with a windowed normalization (ATN) it also carries the windows
    (``atnbench.nn.state``)."""

    layer_class = NormGRULayer
    torch_class = nn.GRU

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None, **options):
        # nn.GRU's arguments in nn.GRU's order, positional too; the rest (norm, k, ...) by keyword
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype, **options)

    def _merged_bias(self, bias_ih: Tensor, bias_hh: Tensor, where: str) -> Tensor:
        """nn.GRU's two biases as this GRU's one, outside the normalizations and added to the input
        term: exact for the r and z gates (only their sums count), and for the n gate only where
        b_hn, which nn.GRU applies inside ``r * (W_hn h + b_hn)``, is 0."""
        if bool((bias_hh.chunk(3)[2] != 0).any()):
            raise ValueError(f"{where}: nn.GRU's b_hn (the n gate's hidden bias, applied inside r * (W_hn h + "
                             f"b_hn)) is not 0, and this NormGRU(norm={self.norm!r}) has one bias, outside its "
                             "normalizations, where b_hn has no place; build it with bias_inside=True, or zero b_hn")
        return bias_ih + bias_hh

    def _run_layer(self, layer, x, carry, windows, lengths, path):
        if path == "loop":
            return layer(x, *carry, windows, lengths)
        return fastpath.gru_layer(layer, x, *carry, windows, path, lengths)

    def _handed_out(self, y: Tensor, path: str, lengths: Optional[Tensor]) -> Tensor:
        # nn.GRU's output may be written in place before backward (Dropout(inplace=True),
        # masked_fill_). The fast path's backward reads the output it returned: the last layer's,
        # where one direction and no lengths hand it out as it is (else torch.cat or the padding
        # made a new tensor). That one case gets a copy; NormLSTM, like nn.LSTM, refuses the write.
        if path != "loop" and self.num_directions == 1 and lengths is None and torch.is_grad_enabled() \
                and y.requires_grad:
            return y.clone()
        return y

    def _carries(self, state):
        if not isinstance(state, Tensor):
            raise ValueError("the state of NormGRU is h_0 (a tensor), as for nn.GRU (ATN's windows ride on it), "
                             f"got a {type(state).__name__}")
        return [state]

    def _pack(self, carries):
        return carries[0]

"""A window-rebuilding ATN-LSTM, written the way the ATN authors' released code does it.

The baseline that ``atnbench bench --reference`` times against atnbench's running-sum ATN
(``NormLSTM(norm="atn")``). It is the same model (eqs. 7-9 and 14-16 of Pospisil et al.,
bias inside each normalization, the same initialisation and parameter names), computed the
direct way: every normalized term (W_x x + b_x, W_h h + b_h, c) keeps its last k
pre-activations in a list; at every step the list is ``torch.stack``-ed into a (w, B, n)
window (w = min(t, k)) and the mean and biased variance are taken over window x features.
Work and memory saved for backward therefore grow linearly with k, where the running-sum
version's do not. ``tests/test_bench.py`` checks that both give the same outputs (float64).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from atnbench.nn.state import LSTMState


class WindowATN(nn.Module):
    """ATN-LN by rebuilding the window: stack the last k steps, normalize the newest."""

    def __init__(self, size: int, k: int, eps: float = 1e-5):
        super().__init__()
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k, self.eps = k, eps
        self.weight = nn.Parameter(torch.ones(size))
        self.bias = nn.Parameter(torch.zeros(size))

    def step(self, a: Tensor, window: list[Tensor]) -> Tensor:
        window.append(a)
        if len(window) > self.k:
            window.pop(0)
        stacked = torch.stack(window)  # (w, B, n): rebuilt every step
        mean = stacked.mean(dim=(0, 2))  # eq. 7, per batch row
        var = stacked.var(dim=(0, 2), unbiased=False)  # eq. 8
        y = (a - mean.unsqueeze(-1)) / torch.sqrt(var.unsqueeze(-1) + self.eps)  # eq. 9
        return y * self.weight + self.bias


class ReferenceATNLSTM(nn.Module):
    """Single-layer ATN-LSTM (eqs. 14-16), time-first ``(T, B, input)`` -> ``(T, B, H)``.

    Parameter names follow ``NormLSTM``'s layer (``weight_ih``, ``weight_hh``, ``bias_ih``,
    ``bias_hh``, ``norm_x``, ``norm_h``, ``norm_c``) so ``load_norm_lstm`` copies its weights.
    """

    def __init__(self, input_size: int, hidden_size: int, k: int = 10, eps: float = 1e-5):
        super().__init__()
        self.input_size, self.hidden_size, self.k = input_size, hidden_size, k
        width = 4 * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(width, input_size))
        self.weight_hh = nn.Parameter(torch.empty(width, hidden_size))
        self.bias_ih = nn.Parameter(torch.zeros(width))
        self.bias_hh = nn.Parameter(torch.zeros(width))
        self.norm_x = WindowATN(width, k, eps)
        self.norm_h = WindowATN(width, k, eps)
        self.norm_c = WindowATN(hidden_size, k, eps)
        with torch.no_grad():  # the authors' (and NormLSTM's default) initialisation
            nn.init.orthogonal_(self.weight_ih)
            self.weight_hh.copy_(torch.eye(hidden_size).repeat(4, 1))

    @torch.no_grad()
    def load_norm_lstm(self, model: nn.Module) -> "ReferenceATNLSTM":
        """Copy the weights of a one-layer ``NormLSTM(norm="atn")`` with the same k."""
        layer = model.layers[0]
        if model.norm != "atn" or len(model.layers) != 1 or model.spec.k != self.k:
            raise ValueError("load_norm_lstm needs a one-layer NormLSTM(norm='atn') with the same k")
        self.load_state_dict(layer.state_dict())
        return self

    def forward(self, x: Tensor, state=None):
        batch = x.shape[1]
        h = x.new_zeros(batch, self.hidden_size) if state is None else state[0][0]
        c = x.new_zeros(batch, self.hidden_size) if state is None else state[1][0]
        windows: tuple[list, list, list] = ([], [], [])
        outputs = []
        for x_t in x.unbind(0):
            wx = torch.nn.functional.linear(x_t, self.weight_ih, self.bias_ih)
            wh = torch.nn.functional.linear(h, self.weight_hh, self.bias_hh)
            gates = self.norm_x.step(wx, windows[0]) + self.norm_h.step(wh, windows[1])  # eq. 14
            i, f, g, o = gates.chunk(4, dim=1)  # nn.LSTM's gate order
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)  # eq. 15
            h = torch.sigmoid(o) * torch.tanh(self.norm_c.step(c, windows[2]))  # eq. 16
            outputs.append(h)
        return torch.stack(outputs), LSTMState(h.unsqueeze(0), c.unsqueeze(0))

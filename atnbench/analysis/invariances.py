"""Table 6 of the ATN paper (Appendix B; Ba et al.'s Table 1, Sect. 5.1), measured.

Two levels, both float64 with eps = 0 and no affine transform or bias, so that every invariance
is exact up to rounding (outputs are O(1), rounding ~1e-15):

- ``layer``: Ba et al.'s setting. A layer a^(t) = W x^(t) on a (T, B, d) input, normalized by
  BN (batch statistics per step), LN, ATN-LN, ATN-BN, BLN, or WN (a_i / ||w_i||, Salimans &
  Kingma: mu = 0, sigma = ||w_i||). The output compared is the normalized a.
- ``lstm``: a ``NormLSTM`` (eqs. 14-16, every term normalized, training mode: batch
  statistics) with random h_0, c_0 (so no term starts at exactly 0); the transformation acts
  on the input-to-hidden weights W_x and the inputs x. The output compared is h for every
  step. WN has no LSTM in atnbench and is measured at the layer level only.

The transformations (delta = 2.5; gamma, c random vectors; example B0 and step T0):

- weight matrix re-scaling:    W' = delta W
- weight matrix re-centering:  W' = delta W + 1 gamma^T (the same gamma added to every row, so
  a'_i = delta a_i + gamma^T x: one shift per example and per step, common to all features)
- weight vector re-scaling:    one row of W (one neuron's incoming weights) scaled by delta
- dataset re-scaling:          x' = delta x, every example and step
- dataset re-centering:        x' = x + c, one constant vector for every example and step
- single training case re-scaling:  one example's whole sequence x_B0' = delta x_B0
- input at a single time re-scaling: one example's input at one step, x_B0^(T0)' = delta x_B0^(T0)
- (extra, paper: none) the same with the input at T0 of *every* example re-scaled: the
  whole-batch reading of the last row, under which per-step BN becomes invariant.

A cell is "invariant" when the output moves by less than ``TOLERANCE``; anything measured
above it moves by orders of magnitude more (``clear`` is False if a deviation falls between
``TOLERANCE`` and ``CHANGED``, which would make the Yes/No call unreliable).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable, Optional

import torch
from torch import Tensor

from atnbench.errors import UserError
from atnbench.nn import NormLSTM
from atnbench.nn import functional as F

T, B, D, N, K = 8, 4, 5, 6, 3  # steps, batch, input size, layer width, ATN window
HIDDEN = 4  # LSTM hidden size (gate vector 4 * HIDDEN)
DELTA = 2.5
T0, B0 = 2, 1  # the step / example that the single-time and single-case rows re-scale
TOLERANCE = 1e-9
CHANGED = 1e-4

NORMS = ("bn", "wn", "ln", "atn-bn", "atn-ln", "bln")
LSTM_NORMS = ("bn", "ln", "atn-bn", "atn-ln", "bln")
LEVELS = ("layer", "lstm")
SCHEME = {"atn-ln": "atn"}  # the zoo's name for ATN-LN

PAPER_ROWS = (
    "weight matrix re-scaling",
    "weight matrix re-centering",
    "weight vector re-scaling",
    "dataset re-scaling",
    "dataset re-centering",
    "single training case re-scaling",
    "input at a single time re-scaling",
)
WHOLE_BATCH_ROW = "input at a single time re-scaling (whole batch)"
TRANSFORMATIONS = PAPER_ROWS + (WHOLE_BATCH_ROW,)

_Y, _N = True, False
# Table 6 as printed, columns BN, WN, LN, ATN-BN, ATN-LN; BLN (Ziaee & Cano) is not in it.
TABLE6: dict[str, dict[str, bool]] = {
    row: dict(zip(("bn", "wn", "ln", "atn-bn", "atn-ln"), cells))
    for row, cells in zip(PAPER_ROWS, (
        (_Y, _Y, _Y, _Y, _Y),
        (_N, _N, _Y, _N, _N),
        (_Y, _Y, _N, _Y, _N),
        (_Y, _N, _Y, _Y, _Y),
        (_Y, _N, _N, _Y, _N),
        (_N, _N, _Y, _N, _Y),
        (_N, _N, _Y, _N, _N),
    ))
}


def paper_claim(norm: str, transformation: str) -> Optional[bool]:
    """Table 6's Yes/No, or None where the paper has no cell (BLN, the whole-batch reading)."""
    return TABLE6.get(transformation, {}).get(norm)


@dataclass
class Record:
    level: str
    norm: str
    transformation: str
    invariant: bool  # measured
    paper: Optional[bool]
    max_deviation: float
    clear: bool  # the deviation is far from the threshold (< TOLERANCE or > CHANGED)

    @property
    def agrees(self) -> Optional[bool]:
        return None if self.paper is None else self.paper == self.invariant

    def to_dict(self) -> dict:
        return {**asdict(self), "agrees": self.agrees, "tolerance": TOLERANCE}


@dataclass
class Draw:
    x: Tensor  # (T, B, D)
    W: Tensor  # (rows, D)
    gamma: Tensor  # (D,)
    c: Tensor  # (D,)


def draw(rows: int, seed: int) -> Draw:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, D, generator=g, dtype=torch.float64)
    x = x * (torch.rand(T, 1, 1, generator=g, dtype=torch.float64) * 2 + 0.5)  # norms vary over time
    W = torch.randn(rows, D, generator=g, dtype=torch.float64)
    gamma = torch.randn(D, generator=g, dtype=torch.float64)
    c = torch.randn(D, generator=g, dtype=torch.float64) * 3
    return Draw(x, W, gamma, c)


def transform(transformation: str, d: Draw) -> tuple[Tensor, Tensor]:
    """(W', x') for a transformation (the originals are left untouched)."""
    W, x = d.W.clone(), d.x.clone()
    if transformation == "weight matrix re-scaling":
        W = DELTA * W
    elif transformation == "weight matrix re-centering":
        W = DELTA * W + torch.ones(W.shape[0], 1, dtype=W.dtype) * d.gamma.unsqueeze(0)
    elif transformation == "weight vector re-scaling":
        W[2] = DELTA * W[2]
    elif transformation == "dataset re-scaling":
        x = DELTA * x
    elif transformation == "dataset re-centering":
        x = x + d.c
    elif transformation == "single training case re-scaling":
        x[:, B0] = DELTA * x[:, B0]
    elif transformation == "input at a single time re-scaling":
        x[T0, B0] = DELTA * x[T0, B0]
    elif transformation == WHOLE_BATCH_ROW:
        x[T0] = DELTA * x[T0]
    else:
        raise ValueError(f"unknown transformation {transformation!r}")
    return W, x


_LAYER_NORMS: dict[str, Callable[[Tensor], Tensor]] = {
    "bn": lambda a: F.batch_norm_steps(a, 0.0)[0],
    "ln": lambda a: F.layer_norm(a, 0.0),
    "atn-ln": lambda a: F.assorted_time_norm(a, K, 0.0),
    "atn-bn": lambda a: F.assorted_time_batch_norm(a, K, 0.0),
    "bln": lambda a: F.batch_layer_norm(a, 0.0, None, None)[0],
}


def layer_output(norm: str, W: Tensor, x: Tensor) -> Tensor:
    """The normalized layer: norm(W x) per step (WN: w_i^T x / ||w_i||)."""
    if norm == "wn":
        W = W / W.norm(dim=1, keepdim=True)
        return torch.einsum("nd,tbd->tbn", W, x)
    return _LAYER_NORMS[norm](torch.einsum("nd,tbd->tbn", W, x))


def lstm_output(norm: str, W: Tensor, x: Tensor, seed: int) -> Tensor:
    """h at every step of a float64 NormLSTM with input weights W (4H, D), eps = 0, no bias."""
    torch.manual_seed(seed)
    model = NormLSTM(D, HIDDEN, norm=SCHEME.get(norm, norm), k=K, eps=0.0, affine=False, bias=False, init="torch").double()
    model.train()
    g = torch.Generator().manual_seed(seed + 7)
    h0 = torch.randn(1, B, HIDDEN, generator=g, dtype=torch.float64)
    c0 = torch.randn(1, B, HIDDEN, generator=g, dtype=torch.float64)
    with torch.no_grad():
        model.layers[0].weight_ih.copy_(W)
        out, _ = model(x, (h0, c0))
    return out


def measure(level: str, norm: str, transformation: str, seed: int = 0) -> Record:
    if level not in LEVELS:
        raise UserError(f"unknown level {level!r}; choose one of: {', '.join(LEVELS)}")
    if level == "lstm" and norm not in LSTM_NORMS:
        raise UserError(f"{norm!r} is measured at the layer level only")
    d = draw(N if level == "layer" else 4 * HIDDEN, seed)
    W2, x2 = transform(transformation, d)
    if level == "layer":
        before, after = layer_output(norm, d.W, d.x), layer_output(norm, W2, x2)
    else:
        before, after = lstm_output(norm, d.W, d.x, seed), lstm_output(norm, W2, x2, seed)
    deviation = float((after - before).abs().max())
    return Record(level, norm, transformation, deviation < TOLERANCE, paper_claim(norm, transformation),
                  deviation, deviation < TOLERANCE or deviation > CHANGED)


def measure_all(seed: int = 0, levels: tuple[str, ...] = LEVELS) -> list[Record]:
    """Every (level, norm, transformation) cell."""
    records = []
    for level in levels:
        for norm in (NORMS if level == "layer" else LSTM_NORMS):
            for transformation in TRANSFORMATIONS:
                records.append(measure(level, norm, transformation, seed))
    return records

"""Copying problem, Pospisil et al. (2024), Sect. 4.1.1 (after Hochreiter & Schmidhuber).

Recipe, per sequence (length T + 20, steps 0 .. T + 19):
  input:  steps 0..9 hold 10 symbols drawn uniformly from 1..8; steps 10..T+9 are T zeros;
          step T+10 is the marker 9; steps T+11..T+19 are 9 zeros. One-hot over the 10 input
          classes 0..9, so x is (T + 20, B, 10) float32.
  target: class 0 for steps 0..T+9, then the 10 symbols in order at steps T+10..T+19, so the
          first symbol is due at the marker itself; y is (T + 20, B) int64.
  output: 9 classes (0..8). The marker 9 is never a target, as in the authors' released code
          (n_classes = 9).
  loss:   cross-entropy averaged over all T + 20 steps and the batch.

Baseline: a network without memory outputs 0 with certainty until the marker and guesses
uniformly over 1..8 afterwards: 10 ln(8) / (T + 20), the paper's baseline.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

from atnbench.tasks.registry import TaskSpec, check_T

N_SYMBOLS = 10  # length of the string to copy
N_DATA = 8  # data symbols are 1..N_DATA
MARKER = 9
MIN_T = 1


def make_batch(generator: torch.Generator, batch_size: int, T: int) -> tuple[Tensor, Tensor]:
    """x (T + 20, B, 10) float32 one-hot, y (T + 20, B) int64."""
    check_T("copying", T, MIN_T)
    length = T + 2 * N_SYMBOLS
    symbols = torch.randint(1, N_DATA + 1, (N_SYMBOLS, batch_size), generator=generator)
    tokens = torch.zeros(length, batch_size, dtype=torch.long)
    tokens[:N_SYMBOLS] = symbols
    tokens[T + N_SYMBOLS] = MARKER
    y = torch.zeros(length, batch_size, dtype=torch.long)
    y[T + N_SYMBOLS:] = symbols
    return F.one_hot(tokens, MARKER + 1).float(), y


SPEC = TaskSpec(
    name="copying",
    description="recall 10 symbols from 1..8 after T blank steps, starting at a marker",
    measures="cross-entropy per step over all T+20 steps; below 10*ln(8)/(T+20) means recall",
    input_size=MARKER + 1,
    output_size=N_DATA + 1,
    loss="ce",
    target="all",
    make_batch=make_batch,
    baseline=lambda T: N_SYMBOLS * math.log(N_DATA) / (T + 2 * N_SYMBOLS),
    min_T=MIN_T,
    seq_len=lambda T: T + 2 * N_SYMBOLS,
    reference="Hochreiter & Schmidhuber (1997); Pospisil, Zadorozhnyy & Ye (2024), Sect. 4.1.1",
)

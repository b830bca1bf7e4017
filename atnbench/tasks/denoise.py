"""Denoise task, Pospisil et al. (2024), Sect. 4.1.3 (after Jing et al. 2019, GORU; Foerster et al. 2016).

The paper gives the input length as T: "10 randomly located data points, and the other T - 10
points are considered noise", with a dictionary of n data symbols plus "noise" and "marker".
Recipe implemented here, per sequence of length T (steps 0 .. T - 1), n_data = 8 as in copying:
  alphabet: noise 0, data symbols 1..8, marker 9; one-hot over these 10 classes, so x is
            (T, B, 10) float32.
  input:    10 data symbols drawn uniformly (with repetition) from 1..8, placed at 10 distinct
            positions drawn uniformly from steps 0..T-12 and kept in time order; noise at every
            other step of 0..T-12; the marker at step T-11; noise at steps T-10..T-1.
  target:   class 0 at steps 0..T-11; the 10 data symbols in time order at steps T-10..T-1,
            i.e. right after the marker. y is (T, B) int64; 9 output classes (0..8), since the
            marker is never a target.
  loss:     cross-entropy averaged over all T steps and the batch.
  min_T:    21 (10 data positions need T - 11 >= 10).

Differences from the GORU released code (denoise_task.py), which we do not follow:
  - there "T" is a delay and the sequence is T + 20 long (data among the first T + 9 steps,
    marker at step T + 9); here the sequence is T long, matching the ATN paper's wording;
  - there data symbols are 1..9 and the marker is 10; here 1..8 and 9, like copying;
  - there positions are drawn with replacement, so two data points can land on one step and
    fewer than 10 reach the input while all 10 are still targets; here they are distinct.

Baseline: a network without memory outputs noise with certainty up to the marker and guesses
uniformly over 1..8 afterwards: 10 ln(8) / T.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F

from atnbench.tasks.registry import TaskSpec, check_T

N_POINTS = 10  # data points per sequence
N_DATA = 8  # data symbols are 1..N_DATA; 0 is noise
MARKER = N_DATA + 1
MIN_T = 2 * N_POINTS + 1


def make_batch(generator: torch.Generator, batch_size: int, T: int) -> tuple[Tensor, Tensor]:
    """x (T, B, 10) float32 one-hot, y (T, B) int64."""
    check_T("denoise", T, MIN_T)
    marker_at = T - N_POINTS - 1
    # 10 distinct positions among steps 0..marker_at-1: the first 10 of a random permutation
    scores = torch.rand(batch_size, marker_at, generator=generator)
    positions = scores.argsort(dim=1)[:, :N_POINTS].sort(dim=1).values.T  # (10, B), time order
    symbols = torch.randint(1, N_DATA + 1, (N_POINTS, batch_size), generator=generator)
    tokens = torch.zeros(T, batch_size, dtype=torch.long)
    tokens[positions, torch.arange(batch_size)] = symbols
    tokens[marker_at] = MARKER
    y = torch.zeros(T, batch_size, dtype=torch.long)
    y[marker_at + 1:] = symbols
    return F.one_hot(tokens, MARKER + 1).float(), y


SPEC = TaskSpec(
    name="denoise",
    description="output, after a marker, the 10 data symbols hidden among noise in a length-T input",
    measures="cross-entropy per step over all T steps; below 10*ln(8)/T means recall",
    input_size=MARKER + 1,
    output_size=N_DATA + 1,
    loss="ce",
    target="all",
    make_batch=make_batch,
    baseline=lambda T: N_POINTS * math.log(N_DATA) / T,
    min_T=MIN_T,
    seq_len=lambda T: T,
    reference="Jing et al. (2019) GORU; Foerster et al. (2016); Pospisil, Zadorozhnyy & Ye (2024), Sect. 4.1.3",
)

"""Adding problem, the variant of Pospisil et al. (2024), Sect. 4.1.2 (after Hochreiter & Schmidhuber).

Recipe, per sequence of length T:
  channel 0: T values drawn from U[0, 1);
  channel 1: a marker with exactly one 1 in the first half (steps 0 .. T//2 - 1) and one 1 in
             the second half (steps T//2 .. T - 1), zeros elsewhere;
  target:    the sum of the two marked values, scored by MSE on the last step's output only.

Channel order follows the authors' released code (values first). That code puts the split at
floor((T - 1) / 2) rather than T // 2 (49 instead of 50 for T = 100); the difference moves one
possible marker position and does not change the task.

Baseline: without memory the best constant guess is E[sum] = 1, whose MSE is
Var(U1 + U2) = 2 / 12 = 1/6 for every T.
"""

from __future__ import annotations

import torch
from torch import Tensor

from atnbench.tasks.registry import TaskSpec, check_T

MIN_T = 2


def make_batch(generator: torch.Generator, batch_size: int, T: int) -> tuple[Tensor, Tensor]:
    """x (T, B, 2) float32, y (B,) float32."""
    check_T("adding", T, MIN_T)
    half = T // 2
    values = torch.rand(T, batch_size, generator=generator)
    first = torch.randint(0, half, (batch_size,), generator=generator)
    second = torch.randint(half, T, (batch_size,), generator=generator)
    batch = torch.arange(batch_size)
    markers = torch.zeros(T, batch_size)
    markers[first, batch] = 1.0
    markers[second, batch] = 1.0
    x = torch.stack((values, markers), dim=-1)
    y = values[first, batch] + values[second, batch]
    return x, y


SPEC = TaskSpec(
    name="adding",
    description="sum the two values marked in a length-T sequence of U[0,1) numbers",
    measures="MSE of the last step's prediction of the marked sum; the no-memory baseline is 1/6",
    input_size=2,
    output_size=1,
    loss="mse",
    target="last",
    make_batch=make_batch,
    baseline=lambda T: 1.0 / 6.0,
    min_T=MIN_T,
    seq_len=lambda T: T,
    reference="Hochreiter & Schmidhuber (1997); Pospisil, Zadorozhnyy & Ye (2024), Sect. 4.1.2",
)

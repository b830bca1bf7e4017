"""Where a run's batches come from: generated (synthetic tasks) or read from data (real tasks).

The trainer only sees a ``DataSource``: training batches one at a time, evaluation batches per
split, and a state dict that makes a resumed run draw the same batches as an uninterrupted one.
A batch with ``carry=True`` continues the previous batch's sequences (truncated BPTT on a
language model), so the trainer hands the recurrent state, ATN window included, across.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Optional, Protocol

import torch
from torch import Tensor

from atnbench.errors import UserError
from atnbench.tasks.registry import TaskSpec, batch_generator


# The class target of a padded step of a per-step classification batch: cross_entropy's
# ignore_index, so it is never scored.
PADDED_CLASS = -100


@dataclass
class Batch:
    x: Tensor
    y: Tensor
    carry: bool = False  # continue the recurrent state of the previous batch
    lengths: Optional[Tensor] = None  # (B,) valid steps of a right-padded batch (None: all valid)


class DataSource(Protocol):
    input_size: int
    output_size: int
    vocab_size: Optional[int]  # token-id inputs (an embedding in front of the RNN) or None
    splits: tuple[str, ...]  # evaluation splits, "val" first

    def train_batch(self) -> Batch: ...
    def eval_batches(self, split: str) -> Iterator[Batch]: ...
    def state_dict(self) -> dict: ...
    def load_state_dict(self, state: dict) -> None: ...


class SyntheticSource:
    """Fresh training batches from the task's "train" stream; a fixed validation set from "val"."""

    vocab_size = None
    splits = ("val",)

    def __init__(self, task: TaskSpec, config, device: torch.device):
        self.task, self.config, self.device = task, config, device
        self.input_size, self.output_size = task.input_size, task.output_size
        self.generator = batch_generator(config.seed, "train")
        self.val = list(self._fixed_set(batch_generator(config.seed, "val"), config.val_samples))

    def _fixed_set(self, generator: torch.Generator, samples: int) -> Iterator[Batch]:
        # batches of the training size: batch-statistics norms see the batch size they trained with
        for start in range(0, samples, self.config.batch_size):
            x, y = self.task.make_batch(generator, min(self.config.batch_size, samples - start), self.config.T)
            yield Batch(x.to(self.device), y.to(self.device))

    def train_batch(self) -> Batch:
        x, y = self.task.make_batch(self.generator, self.config.batch_size, self.config.T)
        return Batch(x.to(self.device), y.to(self.device))

    def eval_batches(self, split: str) -> Iterator[Batch]:
        if split != "val":
            raise UserError(f"{self.task.name} has no {split!r} split")
        return iter(self.val)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


def make_source(task: TaskSpec, config, device: torch.device) -> DataSource:
    if task.make_source is not None:
        return task.make_source(config, device)
    return SyntheticSource(task, config, device)


def derived_metric(metric: Optional[str], loss: float, measured: Optional[float]) -> Optional[float]:
    """The task's headline number from its mean cross-entropy (nats), or the accuracy or mean
    absolute error that evaluation ``measured``."""
    if metric == "bpc":
        return loss / math.log(2)
    if metric == "ppl":
        return math.exp(min(loss, 700.0))
    if metric in ("accuracy", "mae"):
        return measured
    return None

"""Task registry: one ``TaskSpec`` per synthetic task, looked up by name.

A spec carries everything a trainer needs to build the model head and score it (sizes, loss,
which steps are scored) and everything a reader needs to judge a loss curve (the no-memory
baseline and the citation), so the trainer never branches on a task's name.
"""

from __future__ import annotations

import hashlib
import importlib
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor

from atnbench.errors import UserError

STREAMS = ("train", "val")


@dataclass(frozen=True)
class TaskSpec:
    name: str
    description: str  # one line
    measures: str  # one line: what the loss number means
    input_size: int
    output_size: int
    loss: str  # "mse" or "ce"
    target: str  # "last": only the last step's output is scored; "all": every step
    baseline: Callable[[int], Optional[float]]
    min_T: int
    seq_len: Callable[[int], int]
    reference: str
    # The two kinds of task, one of these two set: a generated task's batches are a pure function
    # of a torch.Generator (make_batch(generator, batch_size, T) -> x, y); a data task builds a
    # DataSource over its data (make_source(config, device), atnbench/tasks/source.py).
    make_batch: Optional[Callable[[torch.Generator, int, int], tuple[Tensor, Tensor]]] = None
    make_source: Optional[Callable] = None
    metric: Optional[str] = None  # "accuracy", "mae", "bpc" or "ppl", reported beside the loss
    # the keys of a run's ``options`` the task reads (its module's docstring says what each does),
    # besides SCHEDULE_OPTIONS; any other would enter the run id and change no number
    options: tuple[str, ...] = ()
    # a task whose baseline is measured on its validation split (a task of your own from files):
    # baseline_on(T, val_samples) scores the first val_samples sequences, those a run validates on
    baseline_on: Optional[Callable[[int, Optional[int]], Optional[float]]] = None

    def __post_init__(self):
        if (self.make_batch is None) == (self.make_source is None):
            raise UserError(f"task {self.name!r}: give make_batch (a generated task) or make_source "
                            f"(a task over data), exactly one of them")

    def baseline_of(self, T: int, val_samples: Optional[int] = None) -> Optional[float]:
        """The no-memory baseline of a run at length ``T`` that validates on ``val_samples``
        examples (which only a baseline measured on the validation split depends on)."""
        if self.baseline_on is not None:
            return self.baseline_on(T, val_samples)
        return self.baseline(T)

    @property
    def kind(self) -> str:
        return "generated" if self.make_batch is not None else "data"


# the options every task's runs may carry: the learning-rate schedule (atnbench/run/schedule.py)
SCHEDULE_OPTIONS = ("lr_schedule", "asgd_switch")


def batch_generator(seed: int, stream: str) -> torch.Generator:
    """A generator seeded from (seed, stream), so validation data never overlaps training data.

    Hashing keeps the streams unrelated for every seed (seed and seed + 1 would collide if the
    val stream were just an offset). Re-create the "val" generator for each evaluation to score
    the same validation set every time.
    """
    if stream not in STREAMS:
        raise ValueError(f"unknown stream {stream!r}; choose one of: {', '.join(STREAMS)}")
    digest = hashlib.sha256(f"atnbench:{int(seed)}:{stream}".encode()).digest()
    generator = torch.Generator()
    generator.manual_seed(int.from_bytes(digest[:8], "big") >> 1)  # 63 bits: a valid seed
    return generator


def check_T(name: str, T: int, min_T: int) -> None:
    if T < min_T:
        raise UserError(f"T={T} is too short for the {name} task (min_T={min_T})")


# Task name -> the module whose SPEC declares it. Imported on first use, not here: a task module
# imports this one for TaskSpec, so importing them here made an import cycle.
TASK_MODULES = {
    "adding": "atnbench.tasks.adding",
    "copying": "atnbench.tasks.copying",
    "denoise": "atnbench.tasks.denoise",
    "smnist-noise": "atnbench.tasks.smnist_noise",
    "ptb-char": "atnbench.tasks.ptb_char",
    "ptb-word": "atnbench.tasks.ptb_word",
    "wikitext2": "atnbench.tasks.wikitext2",
    "imdb": "atnbench.tasks.imdb",
}


def shipped_task(name: str) -> Optional[TaskSpec]:
    """The task of that name that ships with atnbench; None for any other name (a user's own
    task is found above this module, by ``atnbench.tasks.lookup``)."""
    module = TASK_MODULES.get(name)
    return importlib.import_module(module).SPEC if module is not None else None

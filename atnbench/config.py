"""Run configuration: one typed record of everything that determines a training run.

Resolution order (later wins): built-in defaults < task preset (its ``defaults``, then its
``per_T`` entry, then a named ``variant``) < ``--config FILE`` < command-line flags. The run id
is a hash of the resolved fields that change the numbers (``atnbench.identity``: the thread
count and device type included, the output folder not), so the same config always maps to the
same row of the results store.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Optional

OPTIMIZERS = ("rmsprop", "adam", "sgd", "asgd")


class ConfigError(ValueError):
    """A configuration that cannot run; the message is one readable line."""


@dataclass(frozen=True)
class RunConfig:
    task: str
    T: int
    norm: str = "atn"
    k: int = 10
    eps: float = 1e-5
    affine: bool = True
    bias_inside: Optional[bool] = None
    cell: str = "lstm"
    init: Optional[str] = None  # None: the model's default (schemes.py); "atn" or "torch"
    hidden: int = 128
    layers: int = 1
    batch_size: int = 64
    optimizer: str = "rmsprop"
    lr: float = 1e-3
    momentum: float = 0.0
    steps: int = 1000
    steps_per_epoch: Optional[int] = None
    eval_every: int = 100
    val_samples: int = 1000
    clip: Optional[float] = None
    seed: int = 0
    budget: float = 1.0
    variant: Optional[str] = None
    options: dict = field(default_factory=dict)  # task-specific extras (data paths, permute, ...)
    threads: int = 1  # torch CPU threads: reductions, hence the last bits, depend on it
    device: str = "cpu"  # the device type the run trains on: cpu, cuda or mps

    def __post_init__(self):
        checks = [
            (self.T >= 1, f"T must be >= 1, got {self.T}"),
            (self.k >= 1, f"k must be >= 1, got {self.k}"),
            (self.eps >= 0, f"eps must be >= 0, got {self.eps}"),
            (self.hidden >= 1, f"hidden must be >= 1, got {self.hidden}"),
            (self.layers >= 1, f"layers must be >= 1, got {self.layers}"),
            (self.batch_size >= 1, f"batch size must be >= 1, got {self.batch_size}"),
            (self.lr > 0, f"lr must be > 0, got {self.lr}"),
            (self.momentum >= 0, f"momentum must be >= 0, got {self.momentum}"),
            (self.steps >= 1, f"the run needs at least 1 step, got {self.steps}"),
            (self.eval_every >= 1, f"eval_every must be >= 1, got {self.eval_every}"),
            (self.val_samples >= 1, f"val_samples must be >= 1, got {self.val_samples}"),
            (self.clip is None or self.clip > 0, f"clip must be > 0, got {self.clip}"),
            (0 < self.budget <= 1, f"budget must be in (0, 1], got {self.budget}"),
            (self.optimizer in OPTIMIZERS, f"unknown optimizer {self.optimizer!r}; choose one of: {', '.join(OPTIMIZERS)}"),
            (self.cell in ("lstm", "gru"), f"unknown cell {self.cell!r}; choose lstm or gru"),
            (self.init in (None, "atn", "torch"), f"unknown init {self.init!r}; choose atn or torch"),
            (self.threads >= 1, f"threads must be >= 1, got {self.threads}"),
            (self.device in ("cpu", "cuda", "mps"), f"unknown device type {self.device!r}; choose cpu, cuda or mps"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)

    @property
    def epochs(self) -> Optional[float]:
        return self.steps / self.steps_per_epoch if self.steps_per_epoch else None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @functools.cached_property
    def run_id(self) -> str:
        return run_id(self.to_dict())


FIELDS = {f.name for f in dataclasses.fields(RunConfig)}


def run_id(config: dict[str, Any]) -> str:
    """Deterministic id of a resolved config (see ``atnbench.identity``)."""
    from atnbench.identity import run_id as identity_run_id

    return identity_run_id(config)


def build_config(values: dict[str, Any]) -> RunConfig:
    """A RunConfig from a dict of field values; unknown keys are an error naming the key."""
    unknown = sorted(set(values) - FIELDS)
    if unknown:
        raise ConfigError(f"unknown config key(s): {', '.join(unknown)}; known: {', '.join(sorted(FIELDS))}")
    try:
        return RunConfig(**values)
    except TypeError as err:  # a missing required field
        raise ConfigError(str(err)) from None

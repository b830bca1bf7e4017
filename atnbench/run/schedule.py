"""Learning-rate schedules and the SGD -> averaged SGD switch, declared in ``RunConfig.options``.

    options:
      lr_schedule: {milestones: [80, 90], gamma: 0.1}   # lr x gamma after each milestone epoch
      asgd_switch: {nonmono: 5}                          # AWD-LSTM's non-monotone trigger

``wrap`` returns the optimizer unchanged when neither is set, else a ``ScheduledOptimizer``
that the trainer uses like any optimizer (``zero_grad``, ``step``, ``state_dict``,
``load_state_dict``; the schedule's own state travels in the optimizer's state dict, so a
checkpoint resumes it exactly). The trainer also calls ``evaluated(optimizer, val_loss)``
after each evaluation and evaluates inside ``eval_weights(optimizer)``.

Epochs are passes over the training data as the data source counts them (``source.epoch``),
or ``step / steps_per_epoch`` for a source that does not count. A run shrunk by ``budget``
shrinks its milestones alike (epoch 80 of 150 stays at 53% of the run).

The ASGD switch is AWD-LSTM's (Merity et al. 2018, ``main.py``): after each evaluation, if
more than ``nonmono`` validation losses have been logged and this one is worse than the best
of all but the last ``nonmono``, training continues with ``torch.optim.ASGD(lr, t0=0,
lambd=0)`` at the current learning rate, i.e. the running average of every iterate from then
on; evaluations after the switch score the averaged weights (AWD-LSTM evaluates, and saves,
the average). The criterion is checked at every evaluation, so a preset that follows
AWD-LSTM evaluates once per epoch.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import torch

from atnbench.config import ConfigError


FORMS = {"lr_schedule": "{milestones: [epochs], gamma: factor}", "asgd_switch": "{nonmono: n}"}
KEYS = {"lr_schedule": ("milestones", "gamma"), "asgd_switch": ("nonmono",)}


def check_schedule(options: dict) -> None:
    """ConfigError unless each schedule option given is one ``wrap`` acts on. A value that reads as
    none (``null``, ``false``, ``0``, ``{}``, no milestones) or a key nothing reads (``milestone``)
    would change no number and still enter the run id: another id, and a report row, for the same
    numbers."""
    for name, form in FORMS.items():
        if name not in options:
            continue
        value = options[name]
        if not isinstance(value, dict) or not value:
            raise ConfigError(f"options.{name} must be {form}, got {value!r} (leave it out for none)")
        unread = sorted(str(key) for key in value if key not in KEYS[name])
        if unread:
            raise ConfigError(f"options.{name}: {unread[0]!r} is not read; it takes {form}")
    schedule, switch = options.get("lr_schedule"), options.get("asgd_switch")
    if schedule is not None:
        milestones, gamma = schedule.get("milestones"), schedule.get("gamma", 0.1)
        if not isinstance(milestones, list) or not milestones or not all(_positive(m) for m in milestones):
            raise ConfigError(f"options.lr_schedule.milestones must be a list of epochs (numbers > 0), got "
                              f"{milestones!r}")
        if not _positive(gamma) or gamma == 1:  # 1 leaves the learning rate as it was
            raise ConfigError(f"options.lr_schedule.gamma must be a number > 0 other than 1, got {gamma!r}")
    if switch is not None:
        nonmono = switch.get("nonmono")
        if isinstance(nonmono, bool) or not isinstance(nonmono, int) or nonmono < 1:
            raise ConfigError(f"options.asgd_switch.nonmono must be a whole number >= 1, got {nonmono!r}")


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")


class ScheduledOptimizer:
    def __init__(self, optimizer: torch.optim.Optimizer, params, config, source,
                 lr_schedule: Optional[dict], asgd_switch: Optional[dict]):
        self.inner = optimizer
        self.params = list(params)
        self.config, self.source = config, source
        self.base_lr = config.lr
        self.milestones: list[float] = []
        self.gamma = 1.0
        if lr_schedule:
            try:
                self.milestones = sorted(float(m) * config.budget for m in lr_schedule.get("milestones", []))
                self.gamma = float(lr_schedule.get("gamma", 0.1))
            except (TypeError, ValueError, AttributeError):
                raise ConfigError(f"options.lr_schedule must be {{milestones: [epochs], gamma: factor}}, "
                                  f"got {lr_schedule!r}") from None
        self.nonmono: Optional[int] = None
        if asgd_switch:
            try:
                self.nonmono = int(asgd_switch.get("nonmono", 5))
            except (TypeError, ValueError, AttributeError):
                raise ConfigError(f"options.asgd_switch must be {{nonmono: n}}, got {asgd_switch!r}") from None
            if self.nonmono < 1:
                raise ConfigError(f"options.asgd_switch.nonmono must be >= 1, got {self.nonmono}")
        self.steps = 0
        self.decays = 0
        self.history: list[float] = []
        self.switched_at: Optional[int] = None  # the step after which ASGD took over

    # -- what the trainer calls ------------------------------------------------------------

    @property
    def param_groups(self):
        return self.inner.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.inner.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        self.inner.step()
        self.steps += 1
        self._apply_lr()

    def epoch(self) -> float:
        counted = getattr(self.source, "epoch", None)
        if counted is not None:
            return float(counted)
        if self.config.steps_per_epoch:
            return self.steps / self.config.steps_per_epoch
        raise ConfigError("options.lr_schedule counts epochs, but this task has no steps_per_epoch")

    def _apply_lr(self) -> None:
        if not self.milestones:
            return
        passed = sum(self.epoch() >= m for m in self.milestones)
        if passed != self.decays:
            self.decays = passed
            self._set_lr(self.base_lr * self.gamma ** passed)

    def _set_lr(self, lr: float) -> None:
        for group in self.inner.param_groups:
            group["lr"] = lr

    def evaluated(self, val_loss: float) -> None:
        if self.nonmono is None or self.switched_at is not None:
            return
        n = self.nonmono
        if len(self.history) > n and val_loss > min(self.history[:-n]):
            self._switch()
            self.switched_at = self.steps
        self.history.append(val_loss)

    def _switch(self) -> None:
        lr = self.inner.param_groups[0]["lr"]
        self.inner = torch.optim.ASGD(self.params, lr=lr, t0=0, lambd=0.0)

    @contextlib.contextmanager
    def averaged_weights(self) -> Iterator[None]:
        """After the switch: the parameters hold ASGD's running average inside the block."""
        if self.switched_at is None:
            yield
            return
        saved = []
        with torch.no_grad():
            for p in self.params:
                ax = self.inner.state.get(p, {}).get("ax")
                if ax is not None:
                    saved.append((p, p.detach().clone()))
                    p.copy_(ax)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, value in saved:
                    p.copy_(value)

    # -- checkpoints -----------------------------------------------------------------------

    def state_dict(self) -> dict:
        return {"inner": self.inner.state_dict(), "steps": self.steps, "decays": self.decays,
                "history": list(self.history), "switched_at": self.switched_at}

    def load_state_dict(self, state: dict) -> None:
        self.steps, self.decays = int(state["steps"]), int(state["decays"])
        self.history, self.switched_at = list(state["history"]), state["switched_at"]
        if self.switched_at is not None and not isinstance(self.inner, torch.optim.ASGD):
            self._switch()
        self.inner.load_state_dict(state["inner"])


def wrap(config, optimizer: torch.optim.Optimizer, params, source):
    """The optimizer, scheduled as ``config.options`` asks (unchanged when it asks nothing)."""
    options = config.options or {}
    lr_schedule, asgd_switch = options.get("lr_schedule"), options.get("asgd_switch")
    if not lr_schedule and not asgd_switch:
        return optimizer
    return ScheduledOptimizer(optimizer, params, config, source, lr_schedule, asgd_switch)


def evaluated(optimizer, val_loss: float) -> None:
    """Tell the schedule the latest validation loss (a no-op for a plain optimizer)."""
    if isinstance(optimizer, ScheduledOptimizer):
        optimizer.evaluated(val_loss)


def eval_weights(optimizer):
    """The weights to evaluate: ASGD's average after the switch, else the current ones."""
    if isinstance(optimizer, ScheduledOptimizer):
        return optimizer.averaged_weights()
    return contextlib.nullcontext()

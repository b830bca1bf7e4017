"""Progress of long work: a rich bar on a terminal, plain periodic lines elsewhere (logs, CI).

- a training run: :func:`reporter_for` (the ``train`` reporter protocol: start, step,
  evaluated, finish), titled by :func:`run_label`;
- a list of steps that are not a training run (``bench``'s models and workloads):
  :func:`steps_for`.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column
from rich.text import Text

# The widest the numbers beside a bar get: "loss -1.234e+05  val -1.234e+05", a time "10:00:00"
INFO_WIDTH, TIME_WIDTH, MIN_BAR, MAX_BAR = 31, 8, 10, 40


def _folded(text: str, width: int = 0) -> TextColumn:
    # folded onto a second line, never cut with "…", should a terminal be narrower than planned
    return TextColumn(text, table_column=Column(overflow="fold", min_width=width or None))


def bar_columns(console: Console, title: str, fixed: int) -> tuple[list, int]:
    """The title column (or none: the title then goes on its own line above the bar, where the
    title and ``fixed`` columns of numbers would not fit the terminal beside it) and the bar's
    width: what is left of the terminal, between MIN_BAR and MAX_BAR."""
    width = console.width
    beside = len(title) + 1 + fixed + MIN_BAR <= width
    if not beside:
        console.print(Text(title, style="bold"), soft_wrap=True)
    left = width - fixed - (len(title) + 1 if beside else 0) - 1
    return ([_folded(f"[bold]{title}[/]")] if beside else []), max(MIN_BAR, min(MAX_BAR, left))


def _num(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4g}"


def run_label(config, extra: tuple[str, ...] = ()) -> str:
    """What a run is, for its bar's title and a sweep's lists: "adding T=200 atn k=5 seed=0" (k
    only for a windowed norm; the cell when it is not the LSTM), with the ``extra`` settings a
    sweep varies ("variant=paper-text"; the preset's own protocol reads "variant=default")."""
    from atnbench.evidence.identity import setting_of
    from atnbench.registry import model_name

    parts = [config.task, f"T={config.T}", model_name(config.cell, config.norm)]
    if setting_of(config, "k") is not None:
        parts.append(f"k={config.k}")
    for key in extra:
        value = setting_of(config, key)
        if key == "variant" and value is None:
            value = "default"
        if value is not None:  # None: a setting this run has no use for
            parts.append(f"{key}={value}")
    parts.append(f"seed={config.seed}")
    return " ".join(parts)


def loss_text(loss: Optional[float], val: Optional[float]) -> str:
    """The numbers beside the bar: nothing is shown before it exists (never ``nan``)."""
    if loss is None and val is None:
        return "starting"
    parts = [f"loss {_num(loss)}"] if loss is not None else []
    if val is not None:
        parts.append(f"val {_num(val)}")
    return "  ".join(parts)


class RichReporter:
    """A live bar with step, loss and ETA (written to stderr, so stdout stays clean)."""

    def __init__(self, console: Console, label: str):
        self.console, self.label = console, label
        self.progress: Optional[Progress] = None
        self.task = None
        self.loss: Optional[float] = None
        self.val: Optional[float] = None

    def start(self, run_id, total, done):
        count = 2 * len(str(total)) + 1  # "200/200"
        title, bar = bar_columns(self.console, self.label, count + INFO_WIDTH + 2 * TIME_WIDTH + len("eta") + 5)
        self.progress = Progress(
            *title, BarColumn(bar_width=bar), MofNCompleteColumn(table_column=Column(min_width=count)),
            _folded("{task.fields[info]}"),
            TimeElapsedColumn(table_column=Column(min_width=TIME_WIDTH)), TextColumn("eta"),
            TimeRemainingColumn(table_column=Column(min_width=TIME_WIDTH)),
            console=self.console, transient=False,
        )
        self.progress.start()
        self.task = self.progress.add_task(run_id, total=total, completed=done, info=loss_text(None, None))

    def step(self, step, loss):
        self.loss = loss
        self.progress.update(self.task, completed=step, info=loss_text(self.loss, self.val))

    def evaluated(self, step, train_loss, val_loss):
        self.val = val_loss
        self.progress.update(self.task, completed=step, info=loss_text(self.loss, self.val))

    def finish(self, status):
        if self.progress is not None:
            self.progress.stop()


class PlainReporter:
    """One line per evaluation (and at most one per ``every_s`` seconds), for logs and CI."""

    def __init__(self, stream: TextIO, label: str, every_s: float = 10.0):
        self.stream, self.label, self.every_s = stream, label, every_s
        self.total, self.started, self.last, self.done0 = 0, 0.0, 0.0, 0

    def start(self, run_id, total, done):
        self.total, self.started = total, time.perf_counter()
        self.done0 = done
        print(f"{self.label}: run {run_id}, {total} steps" + (f", resuming at {done}" if done else ""),
              file=self.stream, flush=True)

    def step(self, step, loss):
        pass

    def evaluated(self, step, train_loss, val_loss):
        now = time.perf_counter()
        if now - self.last < self.every_s and step < self.total:
            return
        self.last = now
        rate = (step - self.done0) / max(now - self.started, 1e-9)
        eta = f"eta {(self.total - step) / rate:.0f}s" if rate > 0 else "eta -"
        print(f"{self.label}: step {step}/{self.total}  train {_num(train_loss)}  val {_num(val_loss)}  "
              f"{rate:.1f} steps/s  {eta}", file=self.stream, flush=True)

    def finish(self, status):
        print(f"{self.label}: {status}", file=self.stream, flush=True)


def reporter_for(label: str, quiet: bool = False, stream: Optional[TextIO] = None):
    from atnbench.run.train import SilentReporter

    stream = stream or sys.stderr
    if quiet:
        return SilentReporter()
    if stream.isatty():
        return RichReporter(Console(file=stream), label)
    return PlainReporter(stream, label)


# -- steps that are not a training run (bench) ------------------------------------------------------


class RichSteps:
    """A bar over ``total`` named steps; ``advance(text)`` names the step that starts now."""

    def __init__(self, console: Console, title: str, total: int):
        count = 2 * len(str(total)) + 1
        # the step's text is folded where it is long: the title goes above the bar first
        columns, bar = bar_columns(console, title, count + INFO_WIDTH + TIME_WIDTH + 3)
        self.progress = Progress(*columns, BarColumn(bar_width=bar), MofNCompleteColumn(table_column=Column(min_width=count)),
                                 _folded("{task.description}"), TimeElapsedColumn(table_column=Column(min_width=TIME_WIDTH)),
                                 console=console, transient=True)
        self.task = self.progress.add_task("", total=total)
        self.progress.start()
        self.started = False

    def advance(self, text: str) -> None:
        self.progress.update(self.task, advance=1 if self.started else 0, description=text)
        self.started = True

    def note(self, text: str) -> None:
        self.progress.console.print(text, highlight=False)

    def close(self) -> None:
        self.progress.stop()


class PlainSteps:
    """A line per step, "bench [3/12] adding: atn k=5 rep 1/10", at most one per ``every_s``
    seconds (the first and the last always)."""

    def __init__(self, stream: TextIO, title: str, total: int, every_s: float = 5.0):
        self.stream, self.title, self.total, self.count = stream, title, total, 0
        self.every_s, self.last = every_s, None

    def advance(self, text: str) -> None:
        self.count += 1
        now = time.monotonic()
        if self.last is not None and now - self.last < self.every_s and self.count < self.total:
            return
        self.last = now
        print(f"{self.title} [{self.count}/{self.total}] {text}", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def close(self) -> None:
        pass


class NoSteps:
    def advance(self, text: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def steps_for(title: str, total: int, quiet: bool = False, stream: Optional[TextIO] = None):
    """Progress over ``total`` steps: a bar on a terminal, a line per step elsewhere."""
    stream = stream or sys.stderr
    if quiet:
        return NoSteps()
    if stream.isatty():
        return RichSteps(Console(file=stream), title, total)
    return PlainSteps(stream, title, total)

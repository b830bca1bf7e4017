"""Progress of a training run: a rich bar on a terminal, plain periodic lines elsewhere."""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class RichReporter:
    """A live bar with step, loss and ETA (written to stderr, so stdout stays clean)."""

    def __init__(self, console: Console, label: str):
        self.console, self.label = console, label
        self.progress: Optional[Progress] = None
        self.task = None
        self.val = float("nan")

    def start(self, run_id, total, done):
        self.progress = Progress(
            TextColumn(f"[bold]{self.label}[/]"), BarColumn(), MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]:.4g}  val {task.fields[val]:.4g}"),
            TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
            console=self.console, transient=False,
        )
        self.progress.start()
        self.task = self.progress.add_task(run_id, total=total, completed=done, loss=float("nan"), val=float("nan"))

    def step(self, step, loss):
        self.progress.update(self.task, completed=step, loss=loss)

    def evaluated(self, step, train_loss, val_loss):
        self.progress.update(self.task, completed=step, val=val_loss)

    def finish(self, status):
        if self.progress is not None:
            self.progress.stop()


class PlainReporter:
    """One line per evaluation (and at most one per ``every_s`` seconds), for logs and CI."""

    def __init__(self, stream: TextIO, label: str, every_s: float = 10.0):
        self.stream, self.label, self.every_s = stream, label, every_s
        self.total, self.started, self.last = 0, 0.0, 0.0

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
        eta = (self.total - step) / rate if rate > 0 else float("nan")
        print(f"{self.label}: step {step}/{self.total}  train {train_loss:.5g}  val {val_loss:.5g}  "
              f"{rate:.1f} steps/s  eta {eta:.0f}s", file=self.stream, flush=True)

    def finish(self, status):
        print(f"{self.label}: {status}", file=self.stream, flush=True)


def reporter_for(label: str, quiet: bool = False):
    from atnbench.train import SilentReporter

    if quiet:
        return SilentReporter()
    if sys.stderr.isatty():
        return RichReporter(Console(stderr=True), label)
    return PlainReporter(sys.stderr, label)

"""The live view of a sweep: an overall bar and one line per active run (plain lines off a TTY).

Backends feed it events (``event(run_id, kind, a, b)``, see ``runner.EventReporter``) and each
run's outcome (``finished``). It writes to stderr, so ``--json`` output on stdout stays clean.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

STATUS_STYLE = {"done": "green", "diverged": "yellow", "failed": "red", "interrupted": "yellow"}


def _num(value) -> str:
    return "-" if value is None else f"{value:.4g}"


class SweepView:
    """Rich (``live=True``) or plain-line progress of a sweep."""

    def __init__(self, title: str, total: int, skipped: int, labels: dict[str, str], live: Optional[bool] = None,
                 stream: Optional[TextIO] = None, plain_every_s: float = 60.0):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.title, self.total, self.labels = title, total, labels
        self.finished_count, self.plain_every_s = skipped, plain_every_s
        self.tasks: dict[str, int] = {}
        self.last_line: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self.ended: set[str] = set()  # runs whose outcome is in: a late event from a worker is dropped
        self.progress: Optional[Progress] = None
        if self.live:
            self.progress = Progress(
                TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
                console=Console(file=self.stream), transient=False, refresh_per_second=4,
            )
            self.overall = self.progress.add_task(f"[bold]sweep {title}[/]", total=total, completed=skipped,
                                                  info=self._overall_info())
            self.progress.start()
        else:
            self._line(f"sweep {title}: {total} runs, {skipped} already in the store, {total - skipped} to run")

    def _line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def _overall_info(self) -> str:
        parts = [f"{n} {status}" for status, n in sorted(self.counts.items())]
        return " · ".join(parts)

    def event(self, run_id: str, kind: str, a=None, b=None) -> None:
        if run_id in self.ended:
            return
        label = self.labels.get(run_id, run_id)
        if kind == "start":
            total, done = a, b
            if self.progress is not None:
                if run_id not in self.tasks:
                    self.tasks[run_id] = self.progress.add_task(f"  {label}", total=total, completed=done,
                                                                info="resuming" if done else "")
            else:
                resumed = f", resuming at step {done}" if done else ""
                self._line(f"[{self.finished_count}/{self.total}] {run_id} {label}: started ({total} steps{resumed})")
                self.last_line[run_id] = time.monotonic()
        elif kind == "step" and self.progress is not None and run_id in self.tasks:
            self.progress.update(self.tasks[run_id], completed=a, info=f"loss {_num(b)}")
        elif kind == "eval":
            train_loss, val_loss = b
            if self.progress is not None:
                if run_id in self.tasks:
                    self.progress.update(self.tasks[run_id], completed=a,
                                         info=f"train {_num(train_loss)}  val {_num(val_loss)}")
            elif time.monotonic() - self.last_line.get(run_id, 0.0) >= self.plain_every_s:
                self.last_line[run_id] = time.monotonic()
                self._line(f"  {run_id} {label}: step {a}  train {_num(train_loss)}  val {_num(val_loss)}")

    def finished(self, run_id: str, outcome: dict) -> None:
        status = outcome["status"]
        self.ended.add(run_id)
        if status == "not-started":
            return
        self.counts[status] = self.counts.get(status, 0) + 1
        label = self.labels.get(run_id, run_id)
        detail = outcome.get("error") or (f"min val {_num(outcome.get('min_val_loss'))}"
                                          if outcome.get("min_val_loss") is not None else "")
        if status != "interrupted":
            self.finished_count += 1
        if self.progress is not None:
            task = self.tasks.pop(run_id, None)
            if task is not None:
                self.progress.remove_task(task)
            style = STATUS_STYLE.get(status, "")
            self.progress.console.print(f"[{style}]{status:>11}[/] {run_id} {label}  [dim]{detail}[/]",
                                        highlight=False)
            self.progress.update(self.overall, completed=self.finished_count, info=self._overall_info())
        else:
            self._line(f"[{self.finished_count}/{self.total}] {run_id} {label}: {status}" + (f"  {detail}" if detail else ""))

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


class NoView(SweepView):
    def __init__(self, *args, **kwargs):
        pass

    def event(self, *args, **kwargs):
        pass

    def finished(self, *args, **kwargs):
        pass

    def close(self):
        pass

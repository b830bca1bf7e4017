"""The live view of a sweep: an overall bar and one line per active run (plain lines off a TTY).

Backends feed it events (``event(run_id, kind, a, b)``, see ``runner.EventReporter``) and each
run's outcome (``finished``). It writes to stderr, so ``--json`` output on stdout stays clean.
"""

from __future__ import annotations

import sys
import time
from typing import Optional, TextIO

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from atnbench.run.selection import attained, metric_name
from atnbench.tables import FitTable

STATUS_STYLE = {"done": "green", "diverged": "yellow", "failed": "red", "interrupted": "yellow"}


def _num(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def duration(seconds: float) -> str:
    """"45s", "12m05s", "3h07m"."""
    seconds = max(int(round(seconds)), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def eta_seconds(elapsed: float, finished: int, left: int) -> Optional[float]:
    """Time left at the rate runs have finished in this session (runs at once included), or
    None before the first one finishes."""
    if finished <= 0 or elapsed <= 0:
        return None
    return left * elapsed / finished


def metric_columns(records: list[dict]) -> list[tuple[str, str]]:
    """(record key, column) for the task's own measure (accuracy, MAE, bpc, ...): its best on
    validation and its test value at the evaluation validation chose (``atnbench.run.selection``)."""
    metric = next((r["metric"] for r in records if r.get("metric")), None)
    if metric is None:
        return []
    name = metric_name(metric)
    columns = [(f"val_{metric}", f"best val {name}"), (f"test_{metric}", f"test {name} at best val.")]
    return [(key, column) for key, column in columns if any(r.get(key) is not None for r in records)]


def results_table(records: list[dict], title: str = "finished runs") -> FitTable:
    """One row per run of the sweep that finished (done or diverged): its label, status, min
    validation loss, the task's own measure (accuracy, MAE, bpc...) where it has one, and wall
    time; the lowest min validation loss in bold. Records are the run records of
    ``train.result_record`` (with ``label``); runs not finished are left out."""
    finished = [r for r in records if r.get("status") in ("done", "diverged")]
    measured = metric_columns(finished)
    table = FitTable(title=f"{title} ({len(finished)} of {len(records)})", key_columns=2)
    numeric = ("min val loss", *(column for _, column in measured), "time")
    for column in ("run id", "run", "status", *numeric):
        table.add_column(column, justify="right" if column in numeric else "left", no_wrap=column == "run id")
    losses = [r["min_val_loss"] for r in finished if r.get("min_val_loss") is not None]
    best = min(losses) if losses else None
    for r in finished:
        loss = r.get("min_val_loss")
        loss_text = _num(loss) if loss is None or loss != best else f"[bold green]{_num(loss)}[/]"
        status = r["status"] if r["status"] == "done" else f"[{STATUS_STYLE[r['status']]}]{r['status']}[/]"
        wall = r.get("wall_s")
        table.add_row(r.get("run_id", "-"), escape(r.get("label", "-")), status, loss_text,
                      *(_num(r.get(key)) for key, _ in measured), "-" if wall is None else duration(wall))
    return table


class SweepView:
    """Rich (``live=True``) or plain-line progress of a sweep."""

    def __init__(self, title: str, total: int, skipped: int, labels: dict[str, str], live: Optional[bool] = None,
                 stream: Optional[TextIO] = None, plain_every_s: float = 60.0):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.title, self.total, self.labels = title, total, labels
        self.finished_count, self.plain_every_s = skipped, plain_every_s
        self.skipped, self.started = skipped, time.monotonic()
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

    def _eta_text(self) -> str:
        """"eta 12m05s" from the runs finished in this session; what it waits for before that."""
        left = self.total - self.finished_count
        if left <= 0:
            return ""
        eta = eta_seconds(time.monotonic() - self.started, self.finished_count - self.skipped, left)
        return "eta after the first run" if eta is None else f"eta {duration(eta)}"

    def _overall_info(self) -> str:
        parts = [f"{n} {status}" for status, n in sorted(self.counts.items())]
        eta = self._eta_text()
        return " · ".join(parts + ([eta] if eta else []))

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
        if not outcome.get("error") and outcome.get("val_metric") is not None:
            detail += f"  {attained(outcome['metric']).__name__} val {metric_name(outcome['metric'])} " \
                      f"{_num(outcome['val_metric'])}"
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
            eta = self._eta_text()
            self._line(f"[{self.finished_count}/{self.total}] {run_id} {label}: {status}" + (f"  {detail}" if detail else "")
                       + (f"  ({eta})" if eta else ""))

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

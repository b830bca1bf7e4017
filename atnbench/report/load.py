"""The runs a report reads: a results store opened read-only, its runs selected by the report's
filters (task, T, sweep, norm, age) and aggregated into groups with each task's baseline."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Optional

from atnbench.errors import UserError
from atnbench.store import ResultsStore

RELATIVE_SINCE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: Optional[str]) -> Optional[str | datetime]:
    """An ISO-8601 date/time, or an age such as ``30m``, ``12h``, ``7d``, ``2w``."""
    if text is None:
        return None
    match = RELATIVE_SINCE.match(text)
    if match:
        try:
            return datetime.now(timezone.utc) - timedelta(**{UNITS[match.group(2)]: float(match.group(1))})
        except OverflowError:  # before the year 1: every run is younger
            raise UserError(f"--since {text}: too long ago (ages reach back to the year 1)") from None
    from atnbench.store.results import parse_moment

    try:
        parse_moment(text)
    except ValueError:  # the store would say "not an ISO-8601 date/time", and nothing of ages
        raise UserError(f"--since {text!r}: give an age (30m, 12h, 7d, 2w) or an ISO-8601 date/time "
                        f"(2026-11-25, 2026-11-25T14:00)") from None
    return text


def filters_text(task, T, sweep, norm, since) -> str:
    parts = [f"--{name} {value}" for name, value in (("task", task), ("T", T), ("sweep", sweep), ("norm", norm),
                                                    ("since", since)) if value is not None]
    return " ".join(parts) if parts else "(no filters)"


def check_task(results, task: Optional[str], include: bool = False) -> None:
    """A --task filter that names no task and none of the store's runs is a typo: "unknown task"
    (exit 2), not an empty selection. A task the store holds runs of passes, known here or not (a
    user task not --include'd); the task registry (and torch) is asked only when none match.
    ``include``: the command takes --include (the message names it only then)."""
    if task is None or results.runs(task=task):
        return
    from atnbench.tasks.lookup import get_task, task_names

    try:
        get_task(task)
    except UserError:
        own = "--include DIR or $ATNBENCH_TASKS" if include else "$ATNBENCH_TASKS"
        raise UserError(f"unknown task {task!r}: no task has that name and no run of {results.path} is of it "
                        f"(tasks: {', '.join(task_names())}; one of your own is found through {own})") from None


def load_groups(store: Path, task: Optional[str], T: Optional[int], sweep: Optional[str], norm: Optional[str],
                since: Optional[str]):
    """Open the store (never creating it), select the runs, aggregate them into groups.

    Exits with one line when the store is missing, unusable or empty, or when nothing
    finished matches the filters.
    """
    from atnbench.report.aggregate import RunData, aggregate
    from atnbench.tasks import get_task
    from atnbench.tasks.lookup import task_of
    from atnbench.registry import norm_filter, of_cell

    norm_column, cell = norm_filter(norm) if norm is not None else (None, None)
    if task is not None and not Path(store).is_file():
        get_task(task)  # a typo is "unknown task", before "no store there"
    with ResultsStore.open_read_only(store) as results:  # reading never writes; StoreError: one line
        total = len(results.runs())
        if total == 0:
            raise UserError(f"the results store {results.path} holds no runs yet; record some with `atnbench run` "
                 f"or `atnbench sweep` first")
        check_task(results, task, include=True)
        records = of_cell(results.runs(task=task, T=T, norm=norm_column, sweep=sweep, since=parse_since(since)), cell)
        if sweep is not None and not records and sweep not in results.sweeps():
            known = ", ".join(results.sweeps()) or "none"
            raise UserError(f"no sweep named {sweep!r} in {results.path} (sweeps there: {known})")
        finished = [r for r in records if r.status in ("done", "diverged")]
        if not finished:
            raise UserError(f"no finished runs match {filters_text(task, T, sweep, norm, since)} "
                 f"({len(records)} selected of {total} in {results.path}, none done or diverged)")
        runs = [RunData(record, tuple(results.curve(record.run_id)) if record.status == "done" else ())
                for record in records]
        path = results.path
    baselines = {}
    options = {(r.task, r.T, r.config.get("val_samples")): r.config.get("options") for r in records}
    for key in options:
        try:
            baselines[key] = task_of(key[0], options[key]).baseline_of(key[1], key[2])
        except (ValueError, TypeError):
            pass
    groups = [group for group in aggregate(runs, baselines) if group.rows]
    return groups, path, len(records), total

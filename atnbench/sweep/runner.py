"""What every backend shares: the plan (skip, resume, run), one run's execution, stopping.

Plan: a run the store holds as ``done`` or ``diverged`` is skipped (rerunning it would give the
same numbers); a ``failed`` or ``running`` one (interrupted, crashed) is resumed from its
checkpoint (from scratch if it has none); anything else runs fresh.

Stopping: SIGINT and SIGTERM set a flag (``StopRequest``); the backend passes it on to its
runs, which stop at their next training step by raising ``SweepInterrupted`` inside ``train``
(a ``KeyboardInterrupt``: the run is recorded as failed/"interrupted" with its checkpoint kept),
and no new run starts. A second signal aborts at once. The sweep exits with 128 + the signal
number; the same command resumes it. (The local backend's worker processes also end when the
sweep process dies, however it dies: ``local``, ``lifeline``.)
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from atnbench.config import build_config
from atnbench.store import ResultsStore, RunRecord, environment
from atnbench.sweep.expand import PlannedRun
from atnbench.run.warmup import load_fast_path
from atnbench.evidence.identity import run_id_of

# outcomes of one attempt, besides the store's statuses done / diverged / failed
INTERRUPTED = "interrupted"  # stopped mid-run by a signal: recorded as failed, resumable
NOT_STARTED = "not-started"  # the sweep was stopped before this run began


class SweepInterrupted(KeyboardInterrupt):
    """Raised inside a run's training loop when the sweep is asked to stop."""


@dataclass(frozen=True)
class Job:
    """One run to execute: plain data, so it pickles to a worker process or a Ray task."""

    run_id: str
    config: dict
    label: str
    sweep: str
    resume: bool = False


@dataclass
class SweepOutcome:
    total: int
    skipped: list[tuple[PlannedRun, str]]  # (run, status already in the store)
    stale: list[PlannedRun] = field(default_factory=list)  # held only as made by other code
    outcomes: dict[str, dict] = field(default_factory=dict)  # run_id -> execute()'s result
    jobs: list[Job] = field(default_factory=list)
    signal: Optional[int] = None

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes.values() if o["status"] == status)

    @property
    def failures(self) -> list[tuple[Job, dict]]:
        by_id = {job.run_id: job for job in self.jobs}
        return [(by_id[run_id], o) for run_id, o in self.outcomes.items() if o["status"] == "failed"]

    @property
    def skipped_diverged(self) -> int:
        """Runs of the sweep the store already held as diverged (skipped, but still its result)."""
        return sum(1 for _, status in self.skipped if status.startswith("diverged"))

    @property
    def exit_code(self) -> int:
        """128 + N when stopped by signal N; 1 when any run of the sweep failed or diverged (now or
        in the store), as `atnbench run` exits 1 for its one run; else 0."""
        if self.signal is not None:
            return 128 + self.signal
        return 1 if self.failures or self.count("diverged") or self.skipped_diverged else 0

    def stopped_text(self) -> Optional[str]:
        """The line a sweep stopped by a signal ends with (None where none stopped it)."""
        if self.signal is None:
            return None
        left = self.total - len(self.skipped) - sum(self.count(s) for s in ("done", "diverged", "failed"))
        return (f"stopped by {signal.Signals(self.signal).name}: {left} run(s) left; "
                f"run the same command again to resume")


def plan(runs: list[PlannedRun], store: ResultsStore, sweep: str,
         keep_stale: bool = False) -> tuple[list[Job], list[tuple[PlannedRun, str]], list[PlannedRun]]:
    """Split the sweep into runs to execute and runs the store already finished.

    A finished run found in the store joins this sweep's membership, so ``runs(sweep=...)``
    lists the whole sweep even when its runs came from another sweep or ``atnbench run``.
    A run the store holds only as made by other code (same ``config_key``, another code
    fingerprint, hence another id) counts as done where a canary vouched for that code in its
    class (``atnbench.evidence.equivalence``); otherwise it is *stale*: it runs again under its new id, or with
    ``keep_stale`` the stale run joins the sweep instead. Returns (jobs, skipped, stale).
    """
    from atnbench.evidence.equivalence import finished_equivalent, on_its_data
    from atnbench.evidence.identity import config_key

    finished_elsewhere: dict[str, list[RunRecord]] = {}
    for record in store.runs():
        if record.status in ("done", "diverged") and on_its_data(record):  # stale by code, not by data
            finished_elsewhere.setdefault(config_key(record.config), []).append(record)
    jobs, skipped, stale = [], [], []
    for run in runs:
        status = store.status(run.run_id)
        if status in ("done", "diverged"):
            store.add_to_sweep(sweep, run.run_id)
            skipped.append((run, status))
            continue
        others = finished_elsewhere.get(config_key(run.config.to_dict()), []) if status is None else []
        vouched = finished_equivalent(others, run.config.to_dict())
        if vouched is not None:  # made by other code that a canary showed computes the same numbers
            store.add_to_sweep(sweep, vouched.run_id)
            skipped.append((run, f"{vouched.status} (equivalent code)"))
            continue
        old = others[0] if others else None
        if old is not None:
            stale.append(run)
            if keep_stale:
                store.add_to_sweep(sweep, old.run_id)
                skipped.append((run, f"{old.status} (stale)"))
                continue
        jobs.append(Job(run.run_id, run.config.to_dict(), run.label, sweep, resume=status is not None))
    return jobs, skipped, stale


def execute(job: Job, store: ResultsStore, device: str, reporter) -> dict:
    """Train one job into ``store``; never raises for a run's own failure.

    Returns {"run_id", "status", "error"?, "min_val_loss"?, "steps"?} with status done,
    diverged, failed or interrupted. The data root's copy of a shipped dataset is checked first
    (a Ray worker's machine has its own, and a copy may change while a sweep runs: the sweep's check
    before its first run does not hold for its last; ~0.1 s for PTB).
    """
    from atnbench.run.train import train
    from atnbench.zoo import resolve_device

    config = build_config(job.config)
    if run_id_of(config) != job.run_id:  # a different atnbench version on a worker would hash differently
        raise RuntimeError(f"run id mismatch for {job.label}: {run_id_of(config)} != {job.run_id}")
    try:
        from atnbench.tasks.datacheck import check_root_copy

        check_root_copy(config.task, config.options or {})
        load_fast_path(config)  # a one-time build before the run's clock starts, not inside its timing
        # wait=True: the same run training in another process (a second identical sweep) is
        # waited for, and its result kept, instead of trained twice
        record = train(config, store, resolve_device(device), reporter, resume=job.resume, sweep=job.sweep,
                       wait=True)
        store.add_to_sweep(job.sweep, job.run_id)  # also a run another process finished while we waited for it
    except KeyboardInterrupt:
        return {"run_id": job.run_id, "status": INTERRUPTED}
    except Exception as err:  # noqa: BLE001 - a failing run is recorded and the sweep goes on
        message = f"{type(err).__name__}: {err}".splitlines()[0]
        if store.status(job.run_id) in (None, "running"):  # failed before train could record it
            store.start_run(job.run_id, config.to_dict(), environment(device), sweep=job.sweep)
            store.finish_run(job.run_id, "failed", {}, error=message)
        return {"run_id": job.run_id, "status": "failed", "error": message}
    return outcome_of(job.run_id, record["status"], record, record.get("error"))


def outcome_of(run_id: str, status: str, summary: dict, error: Optional[str] = None) -> dict:
    """A finished run's outcome as ``execute`` returns it, from its summary (or result record)."""
    outcome = {"run_id": run_id, "status": status, **{key: summary.get(key) for key in ("min_val_loss", "steps", "wall_s")}}
    metric = summary.get("metric")
    if metric and summary.get(f"val_{metric}") is not None:  # the task's own measure, as the live view shows it
        outcome.update(metric=metric, val_metric=summary[f"val_{metric}"])
    if error:
        outcome["error"] = error
    return outcome


class EventReporter:
    """A ``train`` reporter that forwards progress as events and stops the run on request.

    ``emit(run_id, kind, a, b)`` receives ("start", total, done), ("step", step, loss) at most
    every ``interval`` seconds, and ("eval", step, (train_loss, val_loss)); ``should_stop()`` is
    asked at every step.
    """

    def __init__(self, run_id: str, emit: Callable[..., None], should_stop: Callable[[], bool],
                 interval: float = 0.25):
        self.run_id, self.emit, self.should_stop, self.interval = run_id, emit, should_stop, interval
        self.last = 0.0

    def start(self, run_id, total, done):
        self.emit(self.run_id, "start", total, done)

    def step(self, step, loss):
        if self.should_stop():
            raise SweepInterrupted
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self.emit(self.run_id, "step", step, loss)

    def evaluated(self, step, train_loss, val_loss):
        self.emit(self.run_id, "eval", step, (train_loss, val_loss))

    def finish(self, status):
        pass  # the backend reports the outcome itself, with the result


class StopRequest:
    """SIGINT/SIGTERM -> a flag (first signal) or an immediate interrupt (second signal).

    The handler only sets attributes (it may run between any two bytecodes, so it takes no
    locks); backends poll ``requested``. ``raise_on_second``: a second signal raises
    ``SweepInterrupted`` in the main thread (used when runs train in this process).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, raise_on_second: bool = False):
        self.signum: Optional[int] = None
        self.hard = False
        self.raise_on_second = raise_on_second
        self._immediate = False
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def _handle(self, signum, frame):
        if self.signum is None:
            self.signum = signum
            if self._immediate:
                raise SweepInterrupted
            return
        self.hard = True
        if self.raise_on_second:
            raise SweepInterrupted

    @contextmanager
    def immediate(self) -> Iterator[None]:
        """A block where the first signal raises ``SweepInterrupted`` at once: work before any run
        (the C++ fast path's build, up to minutes) that has nothing to record when it stops."""
        self._immediate = True
        try:
            yield
        finally:
            self._immediate = False

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
        return False


def mark_lost(store_path: Path, job: Job, message: str) -> None:
    """A run whose worker died without recording it: mark its row failed (resumable)."""
    with ResultsStore(store_path) as store:
        if store.status(job.run_id) in (None, "running"):
            store.start_run(job.run_id, job.config, environment(), sweep=job.sweep)
            store.finish_run(job.run_id, "failed", {}, error=message)

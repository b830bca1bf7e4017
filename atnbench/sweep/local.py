"""Local backend: runs one after another in this process, or N at a time in worker processes.

Who writes the store: each worker process opens the shared SQLite store itself and trains into
it, exactly as ``atnbench run`` does. The store is built for that (WAL journaling, BEGIN
IMMEDIATE with a 30 s busy timeout; a run writes one small row per evaluation), and it keeps
one code path for everything around a run: the curve is visible to readers while the run is
going, an interrupted run leaves its partial curve and its checkpoint in place beside the store,
and a resume (from any backend, or from ``atnbench run --resume``) finds them there. Sending
results back for the parent to write would mean shipping partial curves and checkpoints around
for nothing on one machine; that is what the Ray backend does, because there the workers share
no filesystem with the store.

Threads: every run trains with ``threads`` torch threads (default 1) whatever the number of
workers. On CPU some kernels (LayerNorm's backward among them) sum in a thread-count-dependent
order, so a run's numbers depend, in the last bits, on its thread count; fixing it per run keeps
serial, ``--workers N`` and Ray results identical and a resumed run equal to an uninterrupted
one.

Start method: workers fork from multiprocessing's fork server, a process started fresh (no
torch/OpenMP state inherited from the sweep) that imports torch and the training code once
(``PRELOAD``); a spawned worker spent ~3 s of CPU importing them again, each one. A worker is
the fork server's child, not the sweep's: the server ends when the sweep does, which ends the
workers (``lifeline``). The server keeps the environment and working folder it started with, so
each worker takes the sweep's own when it starts (``_init_worker``), as a spawned one would.
Where there is no fork server (Windows) workers are spawned. The C++ fast path is tried once
here, before the workers start: a build that failed is warned about here, in one line, and
handed to the workers, which neither try it again nor warn (each printed the line, before).

Worker processes end with the sweep, however it ends (``lifeline``): after ``kill -9`` of the
sweep each stops its run cleanly (recorded "interrupted", checkpoint kept) and exits; an idle
worker exits on SIGTERM at once. A worker that ends while the sweep lives breaks the pool
(ProcessPoolExecutor then terminates the others, which record their runs as interrupted); the
sweep reads each lost job's outcome from the store, after waiting for the run's lock, which a
worker holds until it has recorded its run.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import queue as queue_module
from concurrent.futures import FIRST_COMPLETED, CancelledError, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Optional

from atnbench.run.checkpoint import hold_run
from atnbench.store import ResultsStore
from atnbench.sweep.lifeline import Lifeline
from atnbench.sweep.runner import (INTERRUPTED, NOT_STARTED, EventReporter, Job, StopRequest, SweepInterrupted, execute,
                                   mark_lost, outcome_of)


def run_serial(jobs: list[Job], store_path: Path, device: str, threads: int, view, stop: StopRequest) -> dict:
    """Every job in this process, in order; returns run_id -> outcome."""
    import torch

    outcomes: dict[str, dict] = {}
    if not _fast_path_here(jobs, stop):
        return not_started(jobs)
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with ResultsStore(store_path) as store:
            for job in jobs:
                if stop.requested:
                    break
                reporter = EventReporter(job.run_id, view.event, lambda: stop.requested)
                outcome = execute(job, store, device, reporter)
                outcomes[job.run_id] = outcome
                view.finished(job.run_id, outcome)
    except SweepInterrupted:  # a second signal landed between runs
        pass
    finally:
        torch.set_num_threads(previous)
    return {**not_started(jobs), **outcomes}


# -- worker processes ---------------------------------------------------------------------------

_EVENTS = None  # the parent's event queue
_STOP = None  # the parent's stop event
_LIFELINE: Optional[Lifeline] = None  # this worker's signals and tie to the sweep process


def _flush_events() -> None:
    _EVENTS.close()
    _EVENTS.join_thread()


# imported once by the fork server, before it forks any worker
PRELOAD = ("torch", "torch._dynamo", "atnbench.run.train", "atnbench.sweep.local")


# the signals a stop comes by: the fork server ignores them, as it ignores SIGINT once its imports
# (seconds) are done; during them a Ctrl-C killed it with a traceback and the sweep ended
# "error: aborted", exit 1. It ends with the sweep; workers set their own handlers (Lifeline).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def worker_context() -> multiprocessing.context.BaseContext:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))  # no effect once this process's server runs
    _start_fork_server()
    return context


def _start_fork_server() -> None:
    """The fork server started (where it is not yet) ignoring the stop signals, a disposition it
    inherits; here they are blocked meanwhile, so that one sent in that moment waits for this
    process's own handler instead of being lost (Linux queues a blocked signal though ignored)."""
    from multiprocessing import forkserver

    if threading.current_thread() is not threading.main_thread():  # signal.signal works there only
        forkserver.ensure_running()
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS}
    try:
        forkserver.ensure_running()
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _init_worker(events, stop, threads: int, environ: dict, cwd: str, failed_build: Optional[dict] = None) -> None:
    global _EVENTS, _STOP, _LIFELINE
    _EVENTS, _STOP = events, stop
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    from atnbench.nn import fastpath

    fastpath.adopt_failed_build(failed_build)
    # The parent coordinates the stop; a signal here makes the current run stop cleanly, and
    # SIGTERM or the sweep's death also ends this process (see lifeline); its handlers replace
    # the fork server's ignoring of them (``_start_fork_server``).
    _LIFELINE = Lifeline(flush=_flush_events)
    _LIFELINE.install()
    import torch

    torch.set_num_threads(threads)


def _fast_path_here(jobs: list[Job], stop: StopRequest) -> bool:
    """The C++ fast path tried in this process if a job may use it, before any run (the build,
    when one is due, happens once, and a signal stops it at once: a worker's build held the sweep's
    Ctrl-C until it ended); a failure warned about here, once (``fastpath.failed_build`` hands it
    to the workers). False where a signal stopped it."""
    from atnbench.config import build_config
    from atnbench.nn import fastpath
    from atnbench.run.warmup import load_fast_path

    if stop.requested:  # a signal before the build: nothing to build for
        return False
    try:
        with stop.immediate():
            for job in jobs:
                load_fast_path(build_config(job.config))
                if fastpath.tried():
                    break
    except SweepInterrupted:
        return False
    fastpath.warn_unbuilt()
    return True


def not_started(jobs: list[Job]) -> dict:
    """Every job's outcome as never started (resumable: the same command runs them)."""
    return {job.run_id: {"run_id": job.run_id, "status": NOT_STARTED} for job in jobs}


def _should_stop() -> bool:
    return _LIFELINE.stop_run or _STOP.is_set()


def _emit(*event) -> None:
    _EVENTS.put(event)


def _work(job: Job, store_path: str, device: str) -> dict:
    with _LIFELINE.running():
        if _should_stop():
            return {"run_id": job.run_id, "status": NOT_STARTED}
        with ResultsStore(store_path) as store:
            return execute(job, store, device, EventReporter(job.run_id, _emit, _should_stop))


def lost_outcome(store_path: Path, job: Job, message: str, stop: StopRequest) -> dict:
    """The outcome of a job whose worker process ended without returning it, read from the store.

    Waits for the run's lock first: a worker stopped by a signal records its run, then releases
    the lock (the kernel releases it for a worker that was killed). A finished run keeps its
    result; a run interrupted, or never started, while the sweep is stopping is reported so
    (resumable); anything else is a failure: a row still 'running' (or none) is marked failed
    with ``message``.
    """
    with hold_run(store_path, job.run_id, wait=True, quiet=True):  # no other process records it meanwhile
        with ResultsStore(store_path) as store:
            row = store.get_run(job.run_id)
        if row is None or row.status == "running":
            if stop.requested and row is None:
                return {"run_id": job.run_id, "status": NOT_STARTED}
            mark_lost(store_path, job, message)
            return {"run_id": job.run_id, "status": "failed", "error": message}
    if row.status == "failed" and row.error == INTERRUPTED:
        if stop.requested:
            return {"run_id": job.run_id, "status": INTERRUPTED}
        return {"run_id": job.run_id, "status": "failed", "error": f"{INTERRUPTED}: {message}"}
    return outcome_of(job.run_id, row.status, row.summary, row.error)


def _drain(events, view) -> None:
    while True:
        try:
            event = events.get_nowait()
        except (queue_module.Empty, EOFError, OSError):
            return
        view.event(*event)


def run_workers(jobs: list[Job], store_path: Path, device: str, workers: int, threads: int, view,
                stop: StopRequest) -> dict:
    """The jobs on ``workers`` worker processes; returns run_id -> outcome."""
    if not _fast_path_here(jobs, stop):
        return not_started(jobs)
    from atnbench.nn import fastpath

    failed_build = fastpath.failed_build()
    context = worker_context()
    events, stop_event = context.Queue(), context.Event()
    outcomes: dict[str, dict] = {}
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context, initializer=_init_worker,
                               initargs=(events, stop_event, threads, dict(os.environ), os.getcwd(), failed_build))
    futures = {pool.submit(_work, job, str(store_path), device): job for job in jobs}
    pending = set(futures)
    aborted = False
    try:
        while pending:
            done, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
            _drain(events, view)
            for future in done:
                job = futures[future]
                try:
                    outcome = future.result()
                except CancelledError:
                    outcome = {"run_id": job.run_id, "status": NOT_STARTED}
                except BrokenProcessPool as err:
                    outcome = lost_outcome(store_path, job, f"worker process died: {err}".splitlines()[0], stop)
                outcomes[job.run_id] = outcome
                view.finished(job.run_id, outcome)
            if stop.requested and not stop_event.is_set():
                stop_event.set()  # running jobs stop at their next step, queued ones do not start
                for future in pending:
                    future.cancel()
            if stop.hard:
                aborted = True
                for process in list(getattr(pool, "_processes", {}).values()):
                    process.terminate()  # they record their runs as interrupted (resumable) and exit
                for future in pending:
                    outcomes[futures[future].run_id] = {"run_id": futures[future].run_id, "status": "interrupted"}
                break
    finally:
        stop_event.set()  # after an unexpected error too: do not wait for whole runs to finish
        pool.shutdown(wait=not aborted, cancel_futures=True)
        _drain(events, view)
    return outcomes

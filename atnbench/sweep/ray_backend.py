"""Ray backend: each run is a Ray task; the driver alone writes the results store.

A task trains into a scratch store in a temporary folder on whatever node runs it and returns
the run's ``export_record`` (row, curve, sweep membership) and, if the run stopped before the
end, its checkpoint as bytes; the driver imports the record and keeps the checkpoint beside its
store. A resumed run travels the other way: the driver sends its partial record and checkpoint
with the task. So no filesystem is shared, and an interrupted Ray sweep resumes with either
backend.

Progress and stopping go through a small actor (``_Monitor``): tasks post their events to it
and ask it, about twice a second, whether the sweep is stopping.

Set-up across machines: ``ray start --head`` on one, ``ray start --address HEAD:6379`` on the
others (each with atnbench and torch installed), then ``atnbench sweep NAME --backend ray
--address HEAD:6379`` on the head (or any machine that can reach it).

An ``--address`` is tried with a plain TCP connection first (``check_address``), bounded by
``ATNBENCH_RAY_CONNECT_TIMEOUT`` seconds (default 30), before the store is touched: where
nothing listens, ``ray.init`` retries for minutes, ignoring SIGTERM, instead of failing.
"""

from __future__ import annotations

import math
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Optional

from atnbench.config import ConfigError
from atnbench.store import ResultsStore
from atnbench.sweep.runner import NOT_STARTED, EventReporter, Job, StopRequest, execute, mark_lost

INSTALL_HINT = "pip install 'atnbench[ray]'"
CONNECT_TIMEOUT_S = 30.0


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--backend ray needs Ray, which is not installed here: {INSTALL_HINT}") from None
    return ray


def connect_timeout_s() -> float:
    """How long ``check_address`` waits for the cluster's address to answer (seconds)."""
    text = os.environ.get("ATNBENCH_RAY_CONNECT_TIMEOUT", "")
    try:
        value = float(text) if text.strip() else CONNECT_TIMEOUT_S
    except ValueError:
        raise ConfigError(f"ATNBENCH_RAY_CONNECT_TIMEOUT must be a number of seconds, got {text!r}") from None
    if not 0 < value < math.inf:
        raise ConfigError(f"ATNBENCH_RAY_CONNECT_TIMEOUT must be a positive number of seconds, got {text!r}")
    return value


def host_and_port(address: str) -> Optional[tuple[str, int]]:
    """``HOST:PORT`` (or ``ray://HOST:PORT``, ``[IPv6]:PORT``) split; None for the addresses Ray
    resolves itself (``auto``, ``local``)."""
    text = address.strip()
    if text in ("auto", "local"):
        return None
    text = text.split("://", 1)[1] if "://" in text else text
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--address {address!r} is not HOST:PORT (e.g. head:6379)")
    return host.strip("[]"), int(port)


def check_address(address: Optional[str], timeout_s: Optional[float] = None) -> None:
    """One-line ``ConfigError`` naming ``address`` unless something accepts a connection there
    within ``timeout_s`` (default ``connect_timeout_s()``)."""
    where = host_and_port(address) if address else None
    if where is None:
        return
    timeout_s = connect_timeout_s() if timeout_s is None else timeout_s
    try:
        socket.create_connection(where, timeout=timeout_s).close()
    except socket.timeout:
        raise ConfigError(f"cannot connect to a Ray cluster at {address}: no answer within {timeout_s:g} s "
                          f"(ATNBENCH_RAY_CONNECT_TIMEOUT)") from None
    except OSError as err:
        reason = err.strerror or str(err) or type(err).__name__
        raise ConfigError(f"cannot connect to a Ray cluster at {address}: {reason} "
                          f"(is `ray start --head` running there?)") from None


def connect(address: Optional[str]) -> bool:
    """Attach to (or start) Ray; True if this call started the session (shut it down after)."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    try:
        if address:
            ray.init(address=address, logging_level="WARNING")
        else:
            ray.init(include_dashboard=False, logging_level="WARNING")
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = f" at {address}" if address else ""
        raise ConfigError(f"cannot connect to a Ray cluster{where}: {str(err).splitlines()[0]}") from None
    return True


def disconnect() -> None:
    import ray

    ray.shutdown()


class _Monitor:
    """Collects the tasks' progress events for the driver; holds the stop flag."""

    def __init__(self):
        self.events: list[tuple] = []
        self.stop = False

    def emit(self, *event) -> None:
        self.events.append(event)

    def drain(self) -> list[tuple]:
        events, self.events = self.events, []
        return events

    def request_stop(self) -> None:
        self.stop = True

    def stopping(self) -> bool:
        return self.stop


class _StopPoll:
    """Asks the monitor whether to stop, at most every ``interval`` seconds."""

    def __init__(self, monitor, interval: float = 0.5):
        self.monitor, self.interval, self.last, self.value = monitor, interval, 0.0, False

    def __call__(self) -> bool:
        import ray

        now = time.monotonic()
        if not self.value and now - self.last >= self.interval:
            self.last = now
            self.value = ray.get(self.monitor.stopping.remote())
        return self.value


def _checkpoint_path(store: ResultsStore, run_id: str) -> Path:
    from atnbench.checkpoint import checkpoint_file

    return checkpoint_file(store.path, run_id)


def _write_atomic(path: Path, data: bytes) -> None:
    from atnbench.checkpoint import write_atomic

    write_atomic(path, lambda handle: handle.write(data))


def _ray_task(job: Job, record: Optional[dict], checkpoint: Optional[bytes], device: str, threads: int,
              monitor) -> dict:
    """Runs on a Ray worker: train into a scratch store, return the record (and checkpoint)."""
    import torch

    torch.set_num_threads(threads)
    should_stop = _StopPoll(monitor)
    if should_stop():
        return {"outcome": {"run_id": job.run_id, "status": NOT_STARTED}, "record": None, "checkpoint": None}

    def emit(*event):
        monitor.emit.remote(*event)  # fire and forget; one caller's calls arrive in order

    with tempfile.TemporaryDirectory(prefix="atnbench-ray-") as scratch:
        with ResultsStore(Path(scratch) / "scratch.db") as store:
            if record is not None:
                store.import_record(record)
            if checkpoint is not None:
                _write_atomic(_checkpoint_path(store, job.run_id), checkpoint)
            outcome = execute(job, store, device, EventReporter(job.run_id, emit, should_stop))
            exported = store.export_record(job.run_id) if store.status(job.run_id) else None
            path = _checkpoint_path(store, job.run_id)
            saved = path.read_bytes() if path.exists() else None
    return {"outcome": outcome, "record": exported, "checkpoint": saved}


def _keep(store: ResultsStore, job: Job, result: dict) -> None:
    """Driver side: import a task's record and keep (or drop) its checkpoint."""
    if result["record"] is not None:
        store.import_record(result["record"])
    path = _checkpoint_path(store, job.run_id)
    if result["checkpoint"] is not None:
        _write_atomic(path, result["checkpoint"])
    elif result["outcome"]["status"] != NOT_STARTED and path.exists():
        from atnbench.checkpoint import checkpoint_dir, checkpoint_root, discard

        discard(store.path, job.run_id)  # the run finished (or restarted and has no newer checkpoint)
        for folder in (checkpoint_dir(store.path, job.run_id), checkpoint_root(store.path)):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def run_ray(jobs: list[Job], store_path: Path, device: str, threads: int, view, stop: StopRequest) -> dict:
    """The jobs as Ray tasks on the connected cluster; returns run_id -> outcome."""
    ray = import_ray()
    monitor = ray.remote(num_cpus=0)(_Monitor).remote()
    task = ray.remote(_ray_task)
    options = {"num_cpus": threads, "max_retries": 0}
    if device == "cuda":
        options["num_gpus"] = 1
    outcomes: dict[str, dict] = {}
    with ResultsStore(store_path) as store:
        refs = {}
        for job in jobs:
            record = checkpoint = None
            if job.resume and store.status(job.run_id) is not None:
                record = store.export_record(job.run_id)
                path = _checkpoint_path(store, job.run_id)
                checkpoint = path.read_bytes() if path.exists() else None
            refs[task.options(**options).remote(job, record, checkpoint, device, threads, monitor)] = job
        pending, stop_sent = list(refs), False
        while pending:
            ready, pending = ray.wait(pending, num_returns=1, timeout=0.2)
            for event in ray.get(monitor.drain.remote()):
                view.event(*event)
            for ref in ready:
                job = refs[ref]
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayError as err:  # a crashed worker or node, a bug on the worker
                    message = f"Ray task failed: {str(err).strip().splitlines()[-1]}"
                    mark_lost(store_path, job, message)
                    outcome = {"run_id": job.run_id, "status": "failed", "error": message}
                else:
                    _keep(store, job, result)
                    outcome = result["outcome"]
                outcomes[job.run_id] = outcome
                view.finished(job.run_id, outcome)
            if stop.requested and not stop_sent:
                monitor.request_stop.remote()  # running tasks stop at their next step
                stop_sent = True
            if stop.hard:
                for ref in pending:
                    ray.cancel(ref, force=True)
                    outcomes[refs[ref].run_id] = {"run_id": refs[ref].run_id, "status": "interrupted"}
                break
        for event in ray.get(monitor.drain.remote()):
            view.event(*event)
    ray.kill(monitor)
    return outcomes

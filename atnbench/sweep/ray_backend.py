"""Ray backend: each run is a Ray task; the driver alone writes the results store.

A task trains into a scratch store in a temporary folder on whatever node runs it and returns
the run's ``export_record`` (row, curve, sweep membership), its kept weights (best, final) and,
if the run stopped before the end, its checkpoint as bytes; the driver imports the record and
weights and keeps the checkpoint beside its store. A resumed run travels the other way: the
driver sends its partial record, weights and checkpoint with the task. So no filesystem is shared, and an interrupted Ray sweep resumes with either
backend.

Progress and stopping go through a small actor (``_Monitor``): tasks post their events to it
and ask it, about twice a second and from a thread of their own (``_StopPoll``), whether the
sweep is stopping.

Set-up across machines: ``ray start --head`` on one, ``ray start --address HEAD:6379`` on the
others (each with atnbench and torch installed), then ``atnbench sweep NAME --backend ray
--address HEAD:6379`` on the head (or any machine that can reach it).

An ``--address`` is tried with a plain TCP connection first (``check_address``), bounded by
``ATNBENCH_RAY_CONNECT_TIMEOUT`` seconds (default 30), before the store is touched: where
nothing listens, ``ray.init`` retries for minutes, ignoring SIGTERM, instead of failing. Then
Ray's own client asks the cluster for its id, bounded the same way: a cluster that wants a token
(``ray start`` enables token authentication by default since Ray 2.5x) refuses at once, where
``ray.init`` retries for 20 s and then reports only "Failed to connect"; the refusal becomes one
line saying what to set (``check_cluster``, docs/ray.md).

Ray's own log lines stay off the terminal unless ``ATNBENCH_RAY_LOGS=1``: its C++ core writes
to file descriptor 2 while it connects (``ray_output_hidden``), its Python loggers are set to
errors only, and its workers' output is not relayed (``log_to_driver``).

Checkpoints travel as they are made: a task ships each checkpoint of its run, with the run's
record at that moment, to the monitor (``checkpoint.on_save``); the driver writes them into its
store and beside it, as a local run would. A driver killed with -9 (its Ray tasks then end too)
leaves every in-flight run 'running' with its latest checkpoint, and the same sweep command
resumes them, with either backend.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Iterator, Optional

from atnbench.evidence.equivalence import stand_in
from atnbench.run.checkpoint import RunBusy, hold_run, on_save
from atnbench.config import ConfigError
from atnbench.store import MODEL_KINDS, ResultsStore
from atnbench.sweep.runner import (INTERRUPTED, NOT_STARTED, EventReporter, Job, StopRequest, execute, mark_lost,
                                   outcome_of)

INSTALL_HINT = "pip install 'atnbench[ray]'"
CONNECT_TIMEOUT_S = 30.0
LOGS_ENV = "ATNBENCH_RAY_LOGS"  # set (1, yes, true) to see Ray's own log lines
DOCS = "docs/ray.md"
TOKEN_PLACES = "~/.ray/auth_token, RAY_AUTH_TOKEN_PATH or RAY_AUTH_TOKEN"
log = logging.getLogger("atnbench")

SCRATCH_PREFIX = "atnbench-ray-"  # + the task process id + "-": a killed task's folder is found and removed

Models = dict[str, tuple[int, bytes]]  # a run's kept weights: kind (best, final) -> (step, torch.save bytes)


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
    within ``timeout_s`` (default ``connect_timeout_s()``) and, for a ``HOST:PORT``, the Ray
    cluster there takes this driver (``check_cluster``)."""
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
    if "://" not in address:  # ray:// is Ray Client's server, not the cluster's own port
        check_cluster(address, timeout_s)


def ray_logs_shown() -> bool:
    """Whether ``ATNBENCH_RAY_LOGS`` asks for Ray's own log lines on the terminal."""
    return os.environ.get(LOGS_ENV, "").strip().lower() not in ("", "0", "no", "false", "off")


@contextmanager
def ray_output_hidden() -> Iterator[None]:
    """File descriptor 2 goes to a scratch file for the block, unless ``ray_logs_shown()``.

    The descriptor, not a logger: Ray's C++ core writes its lines (``gcs_client.cc ... Failed to
    get cluster ID``, once a second while it retries) straight to it.
    """
    if ray_logs_shown():
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def _token_mode() -> bool:
    return os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "token"


def _first_sentence(err: BaseException) -> str:
    text = " ".join(str(getattr(err, "message", None) or err).split())
    return text.split(". ")[0].rstrip(".") or type(err).__name__


def _authentication_error():
    """Ray's AuthenticationError class; None for a Ray without token authentication."""
    try:
        from ray.exceptions import AuthenticationError
    except ImportError:
        return None
    return AuthenticationError


def refused(address: Optional[str]) -> ConfigError:
    """The one line for a cluster that refused this driver's credentials: what to set.
    ``address`` None: the cluster ``ray.init`` found on this machine (a ``ray start`` here)."""
    cluster = f"the Ray cluster at {address}" if address else "the Ray cluster found on this machine"
    if not _token_mode():
        return ConfigError(f"{cluster} requires token authentication: export RAY_AUTH_MODE=token "
                           f"with the cluster's token in {TOKEN_PLACES} (see {DOCS})")
    return ConfigError(f"{cluster} refused this machine's Ray token: set RAY_AUTH_TOKEN "
                       f"(or RAY_AUTH_TOKEN_PATH) to the cluster's own (`ray get-auth-token` on its head; see {DOCS})")


def _check_token_present() -> None:
    """With RAY_AUTH_MODE=token, a token must be found here: Ray's C++ client aborts the whole
    process (no exception) when it is not."""
    auth_error = _authentication_error()
    if auth_error is None or not _token_mode():
        return
    try:
        from ray._private.authentication.authentication_token_setup import ensure_token_if_auth_enabled
    except ImportError:
        return
    try:
        ensure_token_if_auth_enabled(None, create_token_if_missing=False)
    except auth_error as err:
        raise ConfigError(f"RAY_AUTH_MODE=token is set but Ray finds no token here ({_first_sentence(err)}): put the "
                          f"cluster's token (`ray get-auth-token` on its head) in {TOKEN_PLACES} (see {DOCS})") from None


def check_cluster(address: str, timeout_s: Optional[float] = None) -> None:
    """One-line ``ConfigError`` unless the Ray cluster at ``address`` (``HOST:PORT``) takes this
    driver: asks it for its cluster id with Ray's own client, bounded by ``timeout_s``.

    Needed because ``ray.init`` turns a refused token into 20 s of log lines and "Failed to
    connect to Ray cluster at ...". Where this Ray has no such client (another 2.x), nothing is
    checked here and ``connect`` reports what ``ray.init`` says.
    """
    _check_token_present()
    try:
        from ray._raylet import GcsClient
    except ImportError:
        return
    timeout_s = connect_timeout_s() if timeout_s is None else timeout_s
    outcome: dict[str, BaseException] = {}

    def ask() -> None:
        try:
            GcsClient(address=address)
        except BaseException as err:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = err

    with ray_output_hidden():
        asking = threading.Thread(target=ask, name="atnbench-ray-check", daemon=True)
        asking.start()
        asking.join(timeout_s)
    if asking.is_alive():  # something listens there, but not a Ray cluster that answers
        raise ConfigError(f"cannot connect to a Ray cluster at {address}: Ray did not answer within {timeout_s:g} s "
                          f"(ATNBENCH_RAY_CONNECT_TIMEOUT); is it the port `ray start --head` printed?")
    error = outcome.get("error")
    auth_error = _authentication_error()
    if auth_error is not None and isinstance(error, auth_error):
        raise refused(address) from None
    if error is not None:
        raise ConfigError(f"cannot connect to a Ray cluster at {address}: {_first_sentence(error)}") from None


def connect(address: Optional[str]) -> bool:
    """Attach to (or start) Ray; True if this call started the session (shut it down after)."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    _check_token_present()  # also where no --address was checked: ray.init may find a `ray start` here
    shown = ray_logs_shown()
    # errors only, and no relayed worker output, unless asked for (ATNBENCH_RAY_LOGS)
    quiet = {} if shown else {"logging_level": logging.ERROR, "log_to_driver": False}
    try:
        with ray_output_hidden():
            if address:
                ray.init(address=address, **{"logging_level": "WARNING", **quiet})
            else:
                ray.init(include_dashboard=False, **{"logging_level": "WARNING", **quiet})
    except Exception as err:  # noqa: BLE001 - every way ray.init fails becomes one line
        if _refused_in(err):
            raise refused(address) from None
        where = f" at {address}" if address else ""
        hint = "" if shown else f" ({LOGS_ENV}=1 shows Ray's own log lines)"
        raise ConfigError(f"cannot connect to a Ray cluster{where}: {str(err).strip().splitlines()[0]}{hint}") from None
    return True


def _refused_in(err: Optional[BaseException]) -> bool:
    """Whether an authentication refusal is among ``err``'s causes (ray.init wraps it, or keeps
    only its traceback's text)."""
    auth_error = _authentication_error()
    while err is not None:
        if (auth_error is not None and isinstance(err, auth_error)) or "InvalidAuthToken" in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def disconnect() -> None:
    import ray

    with ray_output_hidden():
        ray.shutdown()


class _Monitor:
    """Collects the tasks' progress events and newest checkpoints for the driver; holds the stop flag."""

    def __init__(self):
        self.events: list[tuple] = []
        self.checkpoints: dict[str, tuple[dict, bytes, Models]] = {}  # run id -> the newest (record, checkpoint, models)
        self.stop = False

    def emit(self, *event) -> None:
        self.events.append(event)

    def drain(self) -> list[tuple]:
        events, self.events = self.events, []
        return events

    def checkpointed(self, run_id: str, record: dict, checkpoint: bytes, models: Models) -> None:
        self.checkpoints[run_id] = (record, checkpoint, models)  # an older one not yet taken is superseded

    def take_checkpoints(self) -> dict[str, tuple[dict, bytes, Models]]:
        taken, self.checkpoints = self.checkpoints, {}
        return taken

    def request_stop(self) -> None:
        self.stop = True

    def stopping(self) -> bool:
        return self.stop


class _StopPoll:
    """Whether the sweep is stopping, as the monitor last said; a thread of its own asks it every
    ``interval`` seconds while in the block.

    Not the task's own thread: a task blocked in ``ray.get`` (or ``ray.wait``) lends its CPU back to
    Ray, which starts another task, in another worker process (importing torch), beside it: asked
    from the task's thread, 6 one-CPU tasks on a 2-CPU cluster ran up to 4 at once in 4 workers;
    asked from a thread, 2 at once in 2. A monitor that cannot be asked (its driver is gone) means stop.
    """

    def __init__(self, monitor, interval: float = 0.5):
        self.monitor, self.interval = monitor, interval
        self.stop, self.asked, self.done = threading.Event(), threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._ask, name="atnbench-stop-poll", daemon=True)

    def _ask(self) -> None:
        import ray

        while not self.done.is_set():
            try:
                stopping = ray.get(self.monitor.stopping.remote())
            except Exception:  # noqa: BLE001 - the monitor (and so the driver) is gone
                stopping = True
            if stopping:
                self.stop.set()
            self.asked.set()
            if stopping:
                return
            self.done.wait(self.interval)

    def __enter__(self) -> "_StopPoll":
        self.thread.start()
        self.asked.wait()  # the first answer before the run starts: a stopping sweep starts nothing
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join(timeout=5)

    def __call__(self) -> bool:
        return self.stop.is_set()


def _checkpoint_path(store: ResultsStore, run_id: str) -> Path:
    from atnbench.run.checkpoint import checkpoint_file

    return checkpoint_file(store.path, run_id)


def _write_atomic(path: Path, data: bytes) -> None:
    from atnbench.run.checkpoint import write_atomic

    write_atomic(path, lambda handle: handle.write(data))


def _models(store: ResultsStore, run_id: str) -> Models:
    return {kind: kept for kind in MODEL_KINDS if (kept := store.model(run_id, kind)) is not None}


def _put_models(store: ResultsStore, run_id: str, models: Models) -> None:
    for kind, (step, weights) in models.items():
        store.save_model(run_id, kind, step, weights)


def _ray_task(job: Job, record: Optional[dict], checkpoint: Optional[bytes], models: Models, device: str,
              threads: int, monitor) -> dict:
    """Runs on a Ray worker: train into a scratch store, return the record (and checkpoint, kept weights)."""
    import torch

    torch.set_num_threads(threads)
    with _StopPoll(monitor) as should_stop:
        if should_stop():
            return {"outcome": {"run_id": job.run_id, "status": NOT_STARTED}, "record": None, "checkpoint": None,
                    "models": {}}
        return _train_in_scratch(job, record, checkpoint, models, device, monitor, should_stop)


def _train_in_scratch(job: Job, record: Optional[dict], checkpoint: Optional[bytes], models: Models, device: str,
                      monitor, should_stop) -> dict:
    """The task's run, trained into a scratch store; its checkpoints shipped to the monitor as they are made."""

    def emit(*event):
        monitor.emit.remote(*event)  # fire and forget; one caller's calls arrive in order

    remove_orphaned_scratch()
    with tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-") as scratch:
        with ResultsStore(Path(scratch) / "scratch.db") as store:
            if record is not None:
                store.import_record(record)
                _put_models(store, job.run_id, models)  # a resumed run's best so far: a later best must beat it
            if checkpoint is not None:
                _write_atomic(_checkpoint_path(store, job.run_id), checkpoint)
            ours = _checkpoint_path(store, job.run_id)

            def ship(path: Path) -> None:  # each checkpoint to the driver as it is made, with the curve so far
                if path == ours:
                    monitor.checkpointed.remote(job.run_id, store.export_record(job.run_id), path.read_bytes(),
                                                _models(store, job.run_id))

            with on_save(ship):
                outcome = execute(job, store, device, EventReporter(job.run_id, emit, should_stop))
            exported = store.export_record(job.run_id) if store.status(job.run_id) else None
            kept = _models(store, job.run_id) if exported is not None else {}
            path = _checkpoint_path(store, job.run_id)
            saved = path.read_bytes() if path.exists() else None
    return {"outcome": outcome, "record": exported, "checkpoint": saved, "models": kept}


def remove_orphaned_scratch(root: Optional[Path] = None) -> int:
    """Remove the scratch folders of Ray tasks whose process is gone (a task killed with SIGKILL
    cannot remove its own); the folder's name carries its process id. Returns how many."""
    import shutil

    import psutil

    removed = 0
    for folder in Path(root or tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*-*"):
        pid = folder.name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or psutil.pid_exists(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed += 1
    return removed


def _keep(store: ResultsStore, job: Job, result: dict) -> None:
    """Driver side: import a task's record and kept weights, and keep (or drop) its checkpoint."""
    if result["record"] is not None:
        store.import_record(result["record"])
        _put_models(store, job.run_id, result["models"])
    path = _checkpoint_path(store, job.run_id)
    if result["checkpoint"] is not None:
        _write_atomic(path, result["checkpoint"])
    elif result["outcome"]["status"] != NOT_STARTED and path.exists():
        from atnbench.run.checkpoint import checkpoint_dir, checkpoint_root, discard

        discard(store.path, job.run_id)  # the run finished (or restarted and has no newer checkpoint)
        for folder in (checkpoint_dir(store.path, job.run_id), checkpoint_root(store.path)):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def _keep_progress(store: ResultsStore, run_id: str, record: dict, checkpoint: bytes, models: Models) -> None:
    """Driver side: an in-flight run's record, kept weights and checkpoint, as its task just made them."""
    store.import_record(record)  # 'running', its curve up to (at least) the checkpoint's step
    _put_models(store, run_id, models)
    _write_atomic(_checkpoint_path(store, run_id), checkpoint)


def in_flight_cap(ray, threads: int) -> int:
    """How many runs the driver keeps submitted at once: each holds its run's lock (an open file
    here), so not a whole sweep's worth; twice the cluster's slots keeps every slot busy."""
    import resource

    slots = int(ray.cluster_resources().get("CPU", 1) // max(1, threads))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    files = soft // 2 if soft != resource.RLIM_INFINITY else 4096
    return max(1, min(2 * max(1, slots), files))


class _Held:
    """The driver's hold on each run's lock (``checkpoint.hold_run``), from before its task is
    sent until its result is kept: another driver, a local sweep or an ``atnbench run`` of the
    same run into the same store waits for it (and it for them), so no run is trained twice."""

    def __init__(self, store_path: Path):
        self.store_path, self.stacks = store_path, {}
        self.said: set[str] = set()

    def take(self, run_id: str) -> bool:
        """Whether the lock is now ours; the first time another process has it, says so in one line."""
        stack = ExitStack()
        try:
            stack.enter_context(hold_run(self.store_path, run_id))
        except RunBusy as busy:
            if run_id not in self.said:
                by = f"another process (pid {busy.pid})" if busy.pid else "another process"
                log.warning(f"run {run_id} is being trained by {by}; waiting for it")
                self.said.add(run_id)
            return False
        self.stacks[run_id] = stack
        return True

    def release(self, run_id: str) -> None:
        stack = self.stacks.pop(run_id, None)
        if stack is not None:
            stack.close()

    def release_all(self) -> None:
        for run_id in list(self.stacks):
            self.release(run_id)


def run_ray(jobs: list[Job], store_path: Path, device: str, threads: int, view, stop: StopRequest) -> dict:
    """The jobs as Ray tasks on the connected cluster; returns run_id -> outcome.

    A job is sent once the driver holds its run's lock (``_Held``); a run another process is
    training waits, and where that process finished it, its result is kept, not trained again
    (as a local sweep's ``train(wait=True)`` does)."""
    ray = import_ray()
    monitor = ray.remote(num_cpus=0)(_Monitor).remote()
    task = ray.remote(_ray_task)
    options = {"num_cpus": threads, "max_retries": 0}
    if device == "cuda":
        options["num_gpus"] = 1
    cap = in_flight_cap(ray, threads)
    outcomes: dict[str, dict] = {}
    held = _Held(store_path)
    with ResultsStore(store_path) as store:
        refs = {}
        queued = list(jobs)  # not yet sent: waiting for a slot or for another process's lock
        settled: set[str] = set()  # runs whose result is in the store: a late checkpoint must not undo it
        started: set[str] = set()  # runs whose task said it began training

        def show(events) -> None:
            for event in events:
                if event[1] == "start":
                    started.add(event[0])
                view.event(*event)

        def settle(job: Job, outcome: dict) -> None:
            settled.add(job.run_id)
            outcomes[job.run_id] = outcome
            view.finished(job.run_id, outcome)

        def send() -> None:
            for job in list(queued):
                if len(refs) >= cap:
                    return
                if not held.take(job.run_id):
                    continue
                queued.remove(job)
                row = store.get_run(job.run_id)
                if row is not None and stand_in([row]) is not None:  # finished by the process we waited for
                    log.warning(f"run {job.run_id} was finished by another process; keeping its result")
                    store.add_to_sweep(job.sweep, job.run_id)  # a finished run found joins the sweep (runner.plan)
                    held.release(job.run_id)
                    settle(job, outcome_of(job.run_id, row.status, row.summary, row.error))
                    continue
                record, checkpoint, models = None, None, {}
                if row is not None:  # resumed: from this sweep's plan, or left by the process we waited for
                    job = replace(job, resume=True)
                    record, models = store.export_record(job.run_id), _models(store, job.run_id)
                    path = _checkpoint_path(store, job.run_id)
                    checkpoint = path.read_bytes() if path.exists() else None
                refs[task.options(**options).remote(job, record, checkpoint, models, device, threads, monitor)] = job

        def keep_checkpoints() -> None:
            for run_id, (record, checkpoint, models) in ray.get(monitor.take_checkpoints.remote()).items():
                if run_id not in settled:
                    _keep_progress(store, run_id, record, checkpoint, models)

        stop_sent = False
        try:
            while refs or queued:
                if not stop.requested:
                    send()
                if refs:
                    ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.2)
                else:  # every job left waits for another process's lock
                    ready = []
                    time.sleep(0.2)
                show(ray.get(monitor.drain.remote()))
                keep_checkpoints()  # before the results that are ready: those supersede them
                for ref in ready:
                    job = refs.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayError as err:  # a crashed worker or node, a bug on the worker
                        message = f"Ray task failed: {str(err).strip().splitlines()[-1]}"
                        mark_lost(store_path, job, message)
                        outcome = {"run_id": job.run_id, "status": "failed", "error": message}
                    else:
                        _keep(store, job, result)
                        outcome = result["outcome"]
                    held.release(job.run_id)
                    settle(job, outcome)
                if stop.requested:
                    for job in queued:  # never sent: resumable, as a local sweep's unstarted runs
                        outcomes[job.run_id] = {"run_id": job.run_id, "status": NOT_STARTED}
                    queued.clear()
                    if not stop_sent:
                        monitor.request_stop.remote()  # running tasks stop at their next step
                        stop_sent = True
                if stop.hard:
                    show(ray.get(monitor.drain.remote()))
                    for ref, job in refs.items():
                        ray.cancel(ref, force=True)
                        status = INTERRUPTED if job.run_id in started else NOT_STARTED  # resumable either way
                        outcomes[job.run_id] = {"run_id": job.run_id, "status": status}
                    break
            show(ray.get(monitor.drain.remote()))
            keep_checkpoints()  # runs cut off by a second signal keep their newest checkpoint
            for run_id, outcome in outcomes.items():  # and are recorded as a local sweep records them
                if outcome["status"] == INTERRUPTED and store.status(run_id) == "running":
                    store.finish_run(run_id, "failed", {}, error=INTERRUPTED)
        finally:
            held.release_all()
    ray.kill(monitor)
    return outcomes

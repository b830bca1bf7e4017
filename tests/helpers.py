"""Small test utilities shared by several test modules."""

import functools

import torch
from atnbench.evidence.identity import run_id_of


def randomize(model, seed=0):
    """Random weights; gains in [0.5, 1.5] and random shifts, so every parameter matters
    (drawn in float64 on the CPU, then cast to each parameter's dtype and device)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            r = torch.rand(p.shape, generator=g, dtype=torch.float64).to(p)
            p.copy_(r + 0.5 if ".norm_" in name and name.endswith("weight") else (r - 0.5) * 1.2)
    return model


def state_tensors(state):
    """Every tensor of a NormLSTM/NormGRU state: h, (c,) then the ATN window histories riding on h."""
    from atnbench.nn.state import windows_of

    carries = [state] if isinstance(state, torch.Tensor) else list(state)
    windows = windows_of(carries[0]) or ()
    return carries + [w for layer in windows for w in layer if w is not None]


def state_like(state, tensors):
    """A state of the layout of ``state`` made of ``tensors`` (in ``state_tensors``' order)."""
    from atnbench.nn.state import LSTMState, windows_of, with_windows

    it = iter(tensors)
    carries = [next(it) for _ in range(1 if isinstance(state, torch.Tensor) else len(state))]
    windows = windows_of(state if isinstance(state, torch.Tensor) else state[0])
    if windows is not None:
        carries[0] = with_windows(carries[0], tuple(tuple(None if w is None else next(it) for w in layer)
                                                    for layer in windows))
    return carries[0] if isinstance(state, torch.Tensor) else LSTMState(*carries)


class Interrupt:
    """A training reporter that interrupts at a given step, as Ctrl-C would."""

    def __init__(self, at):
        self.at = at

    def start(self, run_id, total, done): pass
    def evaluated(self, step, train_loss, val_loss): pass
    def finish(self, status): pass

    def step(self, step, loss):
        if step == self.at:
            raise KeyboardInterrupt


def tiny_sweep(name, norms, ks, steps, seeds=(0, 1), description="a tiny sweep for the tests"):
    """The YAML of a sweep of adding T=8 runs small enough for a test (a grid of norms and k)."""
    return (f"name: {name}\ndescription: {description}\ntask: adding\n"
            f"base: {{T: 8, hidden: 8, batch_size: 4, steps: {steps}, eval_every: 2, val_samples: 8}}\n"
            f"grid:\n  norm: [{', '.join(norms)}]\n  k: [{', '.join(map(str, ks))}]\n"
            f"seeds: [{', '.join(map(str, seeds))}]\n")


def fill_store(path, runs, code=None, budget=0.01):
    """A results store holding known numbers, built through ResultsStore (no training).

    ``runs``: (task, T, norm, k, seed, status, level, sweep) tuples. A run of level L has the
    curve train = [4L, L, 2L], validation = [4L, L/2, L] at steps 100, 200, 300; a 'running' run
    stops after the first point. Configs are the paper presets', so reports treat them as real.
    With ``code`` the runs are made by the code of that fingerprint (their ids under it, and
    ``env.code``); else they carry the running code's ids and no fingerprint. ``budget``: the
    presets' protocol at that fraction.
    """
    from atnbench.evidence.identity import run_id_under
    from atnbench.run.runspec import resolve_run
    from atnbench.store import ResultsStore

    ids = []
    with ResultsStore(path) as store:
        for task, T, norm, k, seed, status, level, sweep in runs:
            flags = {"T": T, "norm": norm, "seed": seed, **({"k": k} if k is not None else {})}
            config = resolve_run(task, flags, budget=budget)
            run_id = run_id_under(config.to_dict(), code) if code else run_id_of(config)
            env = {"device": "cpu", "threads": 1, **({"code": code} if code else {})}
            store.start_run(run_id, config.to_dict(), env, sweep=sweep)
            points = list(zip((100, 200, 300), (4 * level, level, 2 * level), (4 * level, level / 2, level)))
            for step, train, val in points[:1] if status == "running" else points:
                store.log_eval(run_id, step, step / 100, train, val, {"accuracy": 1 - level})
            if status != "running":
                store.finish_run(run_id, status, {"wall_s": 10.0 + seed, "steps_per_s": 100.0 + seed,  # as train
                                                  "min_val_loss": level / 2, "min_train_loss": level,  # writes it
                                                  "best_step": 200})
            ids.append(run_id)
    return ids


# -- processes: the CLI in a process of its own, watched through the store and by pid ----------------


class CliProcess:
    """``atnbench ARGS`` in a new process and session (a signal sent to it reaches it alone),
    stdout and stderr in ``folder/log.txt``. As a context manager: on leaving, it and the
    processes it started (as last seen by ``children()``) are killed where still running, so a
    failed test leaves nothing training."""

    def __init__(self, args, folder):
        import subprocess
        import sys

        self.log_path = folder / "log.txt"
        self._log = open(self.log_path, "w")
        command = [sys.executable, "-c", "from atnbench.cli import app; app(prog_name='atnbench')", *map(str, args)]
        self.popen = subprocess.Popen(command, cwd=folder, stdout=self._log, stderr=subprocess.STDOUT,
                                      start_new_session=True)
        self.seen: list = []

    def children(self) -> list:
        """Its descendants now (psutil processes): workers, a resource tracker."""
        import psutil

        self.seen = psutil.Process(self.popen.pid).children(recursive=True)
        return self.seen

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for process in still_running(self.seen, within=0):
            process.kill()
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        self._log.close()
        return False


def poll_store(db, condition, process, timeout: float = 120.0):
    """Wait until ``condition(connection)`` holds on the (read-only) store; fail if the process ends first.

    Each connection is closed at once: ``with sqlite3.connect(...)`` only commits, and a connection left
    to the garbage collector (Python 3.11's are in reference cycles) keeps this process's map of the
    store's -shm file, a stale index the next connection here would read through."""
    import sqlite3
    import time
    from contextlib import closing

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "the process ended before it could be caught at work"
        if db.exists():
            try:
                with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as conn:
                    if condition(conn):
                        return
            except sqlite3.Error:
                pass  # the schema is not there yet
        time.sleep(0.02)
    raise AssertionError("timed out waiting for the store")


def still_running(processes, within: float) -> list:
    """The psutil ``processes`` still running after up to ``within`` seconds (a zombie, ended but
    not yet reaped by whoever adopted it, has ended)."""
    import time

    import psutil

    def running(process) -> bool:
        try:
            return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + within
    while True:
        left = [process for process in processes if running(process)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def whole_and_resumed(config, folder, kill_at: int, inspect_killed=None):
    """Train ``config`` once uninterrupted and once interrupted at step ``kill_at`` (checkpoints
    every 2 steps) then resumed, in two stores under ``folder``. ``inspect_killed(store)`` sees
    the interrupted store before the resume. Returns (whole, whole_curve, resumed, resumed_curve):
    the summaries and the curves as (step, train, validation, metrics) tuples."""
    from atnbench.store import ResultsStore
    from atnbench.run.train import train

    key = lambda curve: [(p.step, p.train_loss, p.val_loss, p.metrics) for p in curve]  # noqa: E731
    cpu = torch.device("cpu")
    with ResultsStore(folder / "whole.db") as store:
        whole = train(config, store, cpu)
        whole_curve = key(store.curve(run_id_of(config)))
    with ResultsStore(folder / "killed.db") as store:
        try:
            train(config, store, cpu, Interrupt(at=kill_at), checkpoint_every=2)
        except KeyboardInterrupt:
            pass
        else:
            raise AssertionError(f"the run was not interrupted at step {kill_at}")
        if inspect_killed is not None:
            inspect_killed(store)
        resumed = train(config, store, cpu, resume=True)
        resumed_curve = key(store.curve(run_id_of(config)))
    return whole, whole_curve, resumed, resumed_curve


def valid_record(config=None, **fields):
    """A hand-made run record that `store import` accepts: its run id follows from its config
    under this code (records of other code carry env.code)."""
    from atnbench.evidence.identity import code_fingerprint, run_id_under

    config = config if config is not None else {"task": "adding", "T": 8, "norm": "ln"}
    record = {"status": "done", "config": config, "curve": [{"step": 1, "train_loss": 1.0, "val_loss": 0.5}],
              "sweeps": [], **fields}
    return {"run_id": run_id_under(config, code_fingerprint()), **record}


def invoke(*args, **options):
    """Run ``atnbench ARGS...`` in this process (each argument made a string) and return click's
    result: exit_code, stdout, stderr, output. ``options`` go to CliRunner.invoke (env, input,
    terminal_width)."""
    from unittest import mock

    import typer.testing

    from atnbench.cli import app

    # typer's CliRunner builds the click command tree anew on every invoke (0.1 s: 20 of the bad-input
    # matrix's 58 s); a process builds it once, and so do the tests. What changes between calls stays
    # live: a subcommand's registry lists are filled each time it is resolved (Commands.get_command).
    with mock.patch.object(typer.testing, "_get_command", _click_command):
        return typer.testing.CliRunner().invoke(app, [str(arg) for arg in args], **options)


@functools.lru_cache(maxsize=None)
def _click_command(app):
    import typer.main

    return typer.main.get_command(app)


# -- a sweep's results, for comparing two ways of running it ---------------------------------------

def store_snapshot(store) -> dict:
    """Everything a sweep leaves in the store that must not depend on how it ran."""
    from atnbench.store import ResultsStore

    with ResultsStore(store, create=False) as results:
        return {
            run.run_id: {
                "status": run.status, "config": run.config, "sweeps": results.sweeps(run.run_id),
                "curve": [(p.step, p.train_loss, p.val_loss, p.metrics) for p in results.curve(run.run_id)],
                "summary": {k: v for k, v in run.summary.items() if k not in ("wall_s", "steps_per_s")},
            }
            for run in results.runs()
        }


def kept_weights(store) -> dict:
    """run id -> kind -> (step, every tensor's values): the weights a run kept, for comparing."""
    import io

    from atnbench.store import ResultsStore

    kept = {}
    with ResultsStore(store, create=False) as results:
        for run in results.runs():
            for kind in ("best", "final"):
                found = results.model(run.run_id, kind)
                if found is not None:
                    state = torch.load(io.BytesIO(found[1]), weights_only=True)
                    kept.setdefault(run.run_id, {})[kind] = (found[0], {k: v.tolist() for k, v in state.items()})
    return kept

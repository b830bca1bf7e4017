"""`sweep --backend ray` against a real cluster: `ray start --head` in a process of its own, on
loopback, with token authentication (Ray's default since 2.5x), not one `ray.init` starts.

The cluster (module fixture) is started once with `--block`, in a new process group, and stopped
by SIGTERM to that group (SIGKILL if it lingers); never with `ray stop`, which would stop every
Ray cluster on the machine. Its token is made here and given through RAY_AUTH_TOKEN, so nothing
is read from or written to ~/.ray. The refused drivers and the killed one are CLI processes of
their own (what they print to the terminal is checked); the others drive from this process,
which reads Ray's token settings again first (Ray reads them once per process). Runs are tiny
(adding T=8, hidden 8, the plain LSTM: no C++ build on the workers). Measured alone on an idle
2-core VM (Intel Xeon, AVX-512): 35 s wall.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import pytest

from atnbench.store import ResultsStore
from helpers import CliProcess, invoke, kept_weights, poll_store, store_snapshot, tiny_sweep

pytestmark = [pytest.mark.ray, pytest.mark.slow]
pytest.importorskip("ray")

START_S = 90  # a loaded 2-core machine takes ~7 s to start a head, sometimes 20 s

# one run long enough (seconds) to be caught after its first checkpoint (step 50, the 2nd evaluation)
LONG = """\
name: raykill
description: one run killed mid-way and resumed
task: adding
base: {T: 8, hidden: 8, batch_size: 4, eval_every: 25, val_samples: 8}
runs:
  - {norm: none, steps: 1200}
seeds: [0]
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ray_command() -> str:
    beside = Path(sys.executable).with_name("ray")  # the venv's, where Ray was installed
    found = str(beside) if beside.exists() else shutil.which("ray")
    assert found, "Ray is importable but its `ray` command is not on PATH"
    return found


class Cluster:
    def __init__(self, address: str, token: str):
        self.address, self.token = address, token

    def env(self, **changes) -> dict:
        """This process's environment without Ray's token settings, then ``changes``."""
        env = {key: value for key, value in os.environ.items()
               if key not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS",
                              "ATNBENCH_RAY_LOGS")}
        env.update(changes)
        return env

    def authorized(self) -> dict:
        return self.env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.token)


@pytest.fixture(scope="module")
def cluster():
    port, token = free_port(), secrets.token_hex(32)
    folder = Path(tempfile.mkdtemp(prefix="ar", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update(RAY_AUTH_TOKEN=token, RAY_USAGE_STATS_ENABLED="0")  # RAY_AUTH_MODE unset: Ray's default, token
    log = open(folder / "ray-start.log", "w")
    head = subprocess.Popen(
        [ray_command(), "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=2", "--include-dashboard=false", f"--dashboard-port={free_port()}",
         f"--dashboard-agent-listen-port={free_port()}",
         "--object-store-memory=100000000", f"--temp-dir={folder}", "--disable-usage-stats"],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + START_S
        while "Ray runtime started" not in (folder / "ray-start.log").read_text():
            assert head.poll() is None, (folder / "ray-start.log").read_text()
            assert time.monotonic() < deadline, "ray start --head did not start within %d s" % START_S
            time.sleep(0.2)
        yield Cluster(f"127.0.0.1:{port}", token)
    finally:
        stop(head)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


def stop(head: subprocess.Popen) -> None:
    """SIGTERM to `ray start --block`: it stops what it started, then exits; SIGKILL to its
    process group for anything still there after that."""
    try:
        head.send_signal(signal.SIGTERM)
        head.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(head.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    head.wait()


def sweep_command(path: Path, store: Path, address: str) -> list[str]:
    return [sys.executable, "-c", "from atnbench.cli import app; app(prog_name='atnbench')", "sweep", str(path),
            "--backend", "ray", "--address", address, "--store", str(store), "--device", "cpu"]


def read_ray_settings_again() -> None:
    """Ray reads RAY_AUTH_MODE and the token once per process and keeps them; what Ray itself
    calls after changing them (``_enable_token_auth``, ``ensure_token_if_auth_enabled``)."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


# what to set, by what the driver lacks; and Ray's own lines only when asked for
@pytest.mark.parametrize("changes, expected", [
    ({}, "requires token authentication: export RAY_AUTH_MODE=token"),
    ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": "/nonexistent/token"}, "Ray finds no token here"),
    ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "not-the-token", "ATNBENCH_RAY_LOGS": "1"},
     "refused this machine's Ray token: set RAY_AUTH_TOKEN"),
], ids=["no-auth-mode", "no-token", "wrong-token-with-ray-logs"])
def test_a_token_cluster_refuses_in_one_line_saying_what_to_set(cluster, tmp_path, changes, expected):
    path, store = tmp_path / "long.yaml", tmp_path / "r.db"
    path.write_text(LONG)
    done = subprocess.run(sweep_command(path, store, cluster.address), env=cluster.env(**changes), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert lines[-1].startswith("error: ") and expected in lines[-1], lines
    assert "docs/ray.md" in lines[-1] and "Traceback" not in done.stderr
    ray_lines = [line for line in lines[:-1] if "gcs_client" in line]
    if "ATNBENCH_RAY_LOGS" in changes:
        # asked for: Ray's own lines are there, from one attempt (ray.init retries 20 times, a line a second)
        assert 1 <= len(ray_lines) <= 2, done.stderr
    else:
        assert len(lines) == 1, done.stderr  # Ray's gcs_client lines stay off the terminal
    assert not store.exists()


def test_a_ray_sweep_killed_with_sigkill_resumes_its_run_from_the_checkpoint_shipped_back(cluster, tmp_path,
                                                                                           monkeypatch):
    path, store = tmp_path / "long.yaml", tmp_path / "r.db"
    path.write_text(LONG)
    checkpoints = store.with_name(store.name + "-checkpoints")

    def checkpointed(conn: sqlite3.Connection) -> bool:
        row = conn.execute("SELECT status FROM runs").fetchone()
        return row == ("running",) and any(checkpoints.glob("*/checkpoint.pt"))

    for key in ("RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS", "ATNBENCH_RAY_LOGS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # CliProcess passes this process's environment on
    monkeypatch.setenv("RAY_AUTH_TOKEN", cluster.token)
    with CliProcess(sweep_command(path, store, cluster.address)[3:], tmp_path) as sweep:
        poll_store(store, checkpointed, sweep.popen, timeout=60)
        helpers = sweep.children()  # the driver's own helper processes: none may touch the store after it
        sweep.popen.kill()  # -9: nothing on the driver's side records anything more
        sweep.popen.wait(timeout=10)
        for process in helpers:
            try:
                process.kill()
                process.wait(timeout=10)
            except Exception:  # noqa: BLE001 - gone already
                pass
        killed_log = sweep.log()
    assert only_ours(killed_log), killed_log  # Ray's own lines stayed off the terminal

    with ResultsStore(store, create=False) as results:
        [run] = results.runs()
        assert run.status == "running"  # as the driver last heard; the next sweep resumes it
        at = max(point.step for point in results.curve(run.run_id))
        assert at >= 50 and (results.checkpoint_dir(run.run_id) / "checkpoint.pt").exists()

    read_ray_settings_again()  # the token set above, for this process's driver (the killed one had its own)
    try:
        resumed = invoke(*sweep_command(path, store, cluster.address)[3:])
    finally:
        monkeypatch.undo()
        read_ray_settings_again()
    assert resumed.exit_code == 0, resumed.output
    assert f"resuming at step {at})" in resumed.stderr, resumed.stderr  # from the shipped checkpoint, not scratch
    assert only_ours(resumed.stderr), resumed.stderr

    reference = tmp_path / "reference.db"  # the same sweep, uninterrupted, in this process
    result = invoke("sweep", str(path), "--store", str(reference), "--workers", "1", "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert numbers(store) == numbers(reference)
    with closing(sqlite3.connect(store)) as conn:  # closed here: none left open in this process
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert not checkpoints.exists()  # the finished run's checkpoint is gone from the driver's side too


def only_ours(text: str) -> bool:
    """Every line is the sweep's own (its header and progress lines), none Ray's."""
    lines = [line for line in text.splitlines() if line.strip()]
    return bool(lines) and all(re.match(r"sweep raykill|\[\d+/\d+\] ", line) for line in lines)


def numbers(store: Path) -> list:
    with ResultsStore(store, create=False) as results:
        return [(run.run_id, run.status, [(p.step, p.train_loss, p.val_loss) for p in results.curve(run.run_id)],
                 {key: value for key, value in run.summary.items() if key not in ("wall_s", "steps_per_s")})
                for run in results.runs()]


# holds a run's lock (as another driver would) until the store holds N finished runs, then writes the
# reference store's result of that run (record and kept weights, in no sweep) and lets go
HOLDER = """
import sys, time
from atnbench.run.checkpoint import hold_run
from atnbench.store import MODEL_KINDS, ResultsStore
store, reference, run_id, others = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with hold_run(store, run_id):
    print("held", flush=True)
    while True:
        with ResultsStore(store) as results:
            if sum(run.status == "done" for run in results.runs()) >= others:
                break
        time.sleep(0.1)
    with ResultsStore(reference, create=False) as theirs, ResultsStore(store) as results:
        record = theirs.export_record(run_id)
        record["sweeps"] = []  # trained outside any sweep, as `atnbench run` does
        results.import_record(record)
        for kind in MODEL_KINDS:
            if (kept := theirs.model(run_id, kind)) is not None:
                results.save_model(run_id, kind, *kept)
"""

# 2 seeds x (lstm, ln, atn k=3, atn k=5): k does not split the lstm and ln runs
TINY = tiny_sweep("tiny", ["none", "ln", "atn"], [3, 5], steps=6)


def test_the_ray_backend_writes_what_the_local_backend_writes(cluster, tmp_path, monkeypatch):
    """Eight runs as Ray tasks, driven from this process, one of them interrupted here after its
    first checkpoint: the task resumes it, and the store holds what a serial sweep writes. Another
    run is held by another process (its lock, as a second driver or `atnbench run` holds it) until
    the seven others are done, then finished there: the driver waited, kept that result and made
    the run the sweep's."""
    import torch

    from atnbench.evidence.identity import run_id_of
    from atnbench.run.train import train
    from atnbench.sweep import expand, load_sweep
    from helpers import Interrupt

    path, store, reference = tmp_path / "tiny.yaml", tmp_path / "r.db", tmp_path / "reference.db"
    path.write_text(TINY)
    serial = invoke("sweep", path, "--store", reference, "--workers", "1", "--device", "cpu")
    assert serial.exit_code == 0, serial.output

    interrupted = expand(load_sweep(path))[1].config  # ln, seed 0
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ResultsStore(store) as results, pytest.raises(KeyboardInterrupt):
            train(interrupted, results, torch.device("cpu"), Interrupt(at=5), sweep="tiny")
    finally:
        torch.set_num_threads(previous)

    held_id = run_id_of(expand(load_sweep(path))[2].config)  # atn k=3, seed 0: trained "elsewhere"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store), str(reference), held_id, "7"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"

    for key in ("RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS", "ATNBENCH_RAY_LOGS"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", cluster.token)
    read_ray_settings_again()  # this process read them when it first imported Ray, before they were set
    try:
        result = invoke("sweep", path, "--store", store, "--backend", "ray", "--address", cluster.address,
                        "--device", "cpu", "--format", "json")
    finally:
        monkeypatch.undo()
        read_ray_settings_again()
        if holder.poll() is None:  # the sweep failed before finishing the others
            holder.kill()
    assert holder.wait() == 0
    assert result.exit_code == 0, result.output
    said = " ".join(result.stderr.split())
    assert f"run {held_id} is being trained by another process (pid {holder.pid}); waiting for it" in said, said
    assert f"run {held_id} was finished by another process; keeping its result" in said, said
    with ResultsStore(store, create=False) as ours, ResultsStore(reference, create=False) as theirs:
        assert ours.get_run(held_id).summary["wall_s"] == theirs.get_run(held_id).summary["wall_s"]  # not trained again
    counts = json.loads(result.stdout)["counts"]
    assert counts["done"] == 8 and counts["skipped"] == 0
    assert store_snapshot(store) == store_snapshot(reference)
    expected = kept_weights(reference)
    assert len(expected) == 8 and all(set(kinds) == {"best", "final"} for kinds in expected.values())
    assert kept_weights(store) == expected  # the resumed run's best from before its interruption included
    with ResultsStore(store, create=False) as results:
        assert not (results.checkpoint_dir(run_id_of(interrupted)) / "checkpoint.pt").exists()


def test_the_scratch_folder_of_a_killed_ray_task_is_removed_by_the_next_task(tmp_path):
    import subprocess
    import sys

    from atnbench.sweep.ray_backend import SCRATCH_PREFIX, remove_orphaned_scratch

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    orphan = tmp_path / f"{SCRATCH_PREFIX}{gone.pid}-abc"  # its task process no longer exists
    live = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-def"  # a task still running (this process)
    other = tmp_path / "atnbench-ray-check"  # not a scratch folder's name: left alone
    for folder in (orphan, live, other):
        folder.mkdir()
        (folder / "scratch.db").write_bytes(b"x")
    assert remove_orphaned_scratch(tmp_path) == 1
    assert not orphan.exists() and live.exists() and other.exists()

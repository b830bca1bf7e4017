"""The C++ build (atnbench/nn/build.py) survives kills and concurrency and is one per install.

Each test uses a fresh extension root (``TORCH_EXTENSIONS_DIR`` under tmp_path) and, but for
the last, a tiny library (``SPIN_SOURCE``, ~1 s of compiling, slow on purpose so a build can be
killed midway) instead of the fast path itself (~20-60 s), so that the whole file costs a few
small compiles. Processes are real subprocesses, killed as ``timeout -s KILL`` would: the
Python process alone, its compiler children left running.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from atnbench.nn import build
from helpers import invoke

ROOT = Path(__file__).resolve().parents[1]
# A guard against a hang (the bug this file is about), not a speed requirement.
HANG_S = 300

SPIN_SOURCE = """
// Compiles slowly on purpose (a constexpr loop), so that a test can kill the build midway.
constexpr unsigned long spin(unsigned long n) {
  unsigned long x = 1;
  for (unsigned long i = 0; i < n; ++i) x = x * 6364136223846793005ul + i;
  return x;
}
constexpr unsigned long kept = spin(200000ul);
extern "C" unsigned long atnbench_spin() { return kept; }
"""
SPIN_VALUE = 1
for _i in range(200000):
    SPIN_VALUE = (SPIN_VALUE * 6364136223846793005 + _i) % 2**64

# Loads the test library (building it if needed), calls it, prints what it used.
DRIVER = """
import ctypes, sys
from pathlib import Path
from atnbench.nn import build
built = build.load(build.Extension("spin", sources=(Path(sys.argv[1]),), label="the test library"))
lib = ctypes.CDLL(str(built.path))
lib.atnbench_spin.restype = ctypes.c_ulong
print(build.__file__, built.path, built.built_now, lib.atnbench_spin())
"""


def env_for(ext_root: Path, pythonpath: Path = ROOT) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ATNBENCH_NO_BUILD", "ATNBENCH_BUILD_WAIT")}
    env.update(TORCH_EXTENSIONS_DIR=str(ext_root), PYTHONPATH=str(pythonpath))
    return env


def start(ext_root: Path, source: Path, pythonpath: Path = ROOT) -> subprocess.Popen:
    # Run from pythonpath (`python -c` imports from its working folder first); its own session, so
    # that the test can clean up the compilers a kill leaves behind.
    return subprocess.Popen([sys.executable, "-c", DRIVER, str(source)], env=env_for(ext_root, pythonpath), cwd=pythonpath,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen) -> tuple[str, str]:
    try:
        stdout, stderr = proc.communicate(timeout=HANG_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"a build process hung for {HANG_S} s")
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    return stdout, stderr


def reported(stdout: str) -> tuple[Path, Path, bool]:
    """(the build module it imported, the library it loaded, whether it built it) checking the call."""
    module, lib, built_now, value = stdout.split()
    assert int(value) == SPIN_VALUE  # the library really runs
    return Path(module), Path(lib), built_now == "True"


def log_lines(ext_root: Path, kind: str) -> list[str]:
    return [ln for log in ext_root.glob("atnbench-*/build.log") for ln in log.read_text().splitlines()
            if f" {kind} " in ln]


@pytest.fixture
def spin_source(tmp_path) -> Path:
    path = tmp_path / "spin.cpp"
    path.write_text(SPIN_SOURCE)
    return path


def kill_mid_build(proc: subprocess.Popen, sig: int) -> None:
    """Wait for ``proc`` to announce its build, then send it ``sig`` (its children live on)."""
    watchdog = threading.Timer(HANG_S, lambda: os.killpg(proc.pid, signal.SIGKILL))
    watchdog.start()
    try:
        line = proc.stderr.readline()
    finally:
        watchdog.cancel()
    assert "building the test library (one time" in line, line
    proc.send_signal(sig)
    proc.wait()
    assert proc.returncode == -sig
    proc.stdout.close()
    proc.stderr.close()


@pytest.mark.slow
def test_kills_during_the_build_do_not_block_the_next_process(tmp_path, spin_source):
    ext_root = tmp_path / "ext"
    killed = []
    try:
        for sig in (signal.SIGKILL, signal.SIGTERM):
            proc = start(ext_root, spin_source)
            killed.append(proc)
            kill_mid_build(proc, sig)
            assert not list(ext_root.glob("atnbench-*/spin_*.so")), "killed after its build had finished"
        stdout, stderr = finish(start(ext_root, spin_source))
    finally:
        for proc in killed:  # the compilers the kills orphaned
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    _, lib, built_now = reported(stdout)
    assert built_now and lib.exists()
    assert "waiting" not in stderr  # the kernel released the killed processes' lock
    assert stderr.count("building the test library (one time") == 1
    assert len(log_lines(ext_root, "built")) == 1
    assert not list(lib.parent.glob("tmp-*"))  # the killed builds' folders were removed


@pytest.mark.slow
def test_two_processes_started_together_build_once_and_both_run(tmp_path, spin_source):
    ext_root = tmp_path / "ext"
    first, second = start(ext_root, spin_source), start(ext_root, spin_source)
    (out1, err1), (out2, err2) = finish(first), finish(second)
    (_, lib1, built1), (_, lib2, built2) = reported(out1), reported(out2)
    assert lib1 == lib2
    assert [built1, built2].count(True) == 1
    assert (err1 + err2).count("building the test library (one time") == 1
    assert len(log_lines(ext_root, "built")) == 1


def clone(tmp_path: Path, name: str) -> Path:
    """A copy of this checkout's package, as a second clone of the repository would hold."""
    target = tmp_path / name
    shutil.copytree(ROOT / "atnbench", target / "atnbench", ignore=shutil.ignore_patterns("__pycache__"))
    (target / "spin.cpp").write_text(SPIN_SOURCE)
    return target


@pytest.mark.slow
def test_two_clones_used_alternately_build_once_each(tmp_path):
    ext_root = tmp_path / "ext"
    clones = [clone(tmp_path, "clone_a"), clone(tmp_path, "clone_b")]
    seen = {}
    for c in (*clones, clones[0]):  # a, b, then a again: a ping-pong would rebuild a's library now
        module, lib, built_now = reported(finish(start(ext_root, c / "spin.cpp", pythonpath=c))[0])
        assert module.is_relative_to(c)  # this clone's code ran
        assert built_now == (c not in seen)
        if c not in seen:
            seen[c] = (lib, lib.stat().st_mtime_ns)
        else:
            assert (lib, lib.stat().st_mtime_ns) == seen[c]  # not rebuilt after the other clone's build
    (lib_a, _), (lib_b, _) = seen.values()
    assert lib_a.parent != lib_b.parent  # one folder per install
    built = log_lines(ext_root, "built")
    assert len(built) == 2
    assert {re.search(r"built (\S+)", ln).group(1) for ln in built} == {lib_a.name}  # same source, same name


def test_a_failed_variant_is_remembered_and_the_next_one_used(tmp_path, spin_source, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    ext = build.Extension("spinvariants", sources=(spin_source,), label="the test library",
                          variants=((("-fno-such-flag-atnbench",), ()), ((), ())))
    built = build.load(ext)
    assert built.cflags == () and built.built_now
    assert capsys.readouterr().err.count("building the test library (one time") == 1
    failed = log_lines(tmp_path / "ext", "failed")
    assert len(failed) == 1 and "-fno-such-flag-atnbench" in failed[0]
    again = build.load(ext)  # neither retried nor rebuilt
    assert again.path == built.path and not again.built_now
    assert capsys.readouterr().err == ""
    assert len(log_lines(tmp_path / "ext", "failed")) == 1
    build.load(ext, retry=True)  # `atnbench build`: the failed variant is tried again
    assert len(log_lines(tmp_path / "ext", "failed")) == 2
    assert len(log_lines(tmp_path / "ext", "built")) == 1


def test_no_build_disables_the_extension(tmp_path, spin_source, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("ATNBENCH_NO_BUILD", "1")
    with pytest.raises(build.BuildError, match="ATNBENCH_NO_BUILD") as info:
        build.load(build.Extension("spin", sources=(spin_source,)))
    assert info.value.disabled
    assert not (tmp_path / "ext").exists()


def test_a_fast_path_that_cannot_build_falls_back_with_one_warning_line(tmp_path):
    env = env_for(tmp_path / "ext")
    env["CXX"] = "/bin/false"  # a compiler that fails everything
    script = ("import torch\nfrom atnbench.nn import NormLSTM\nm = NormLSTM(3, 4, norm='atn', k=2)\n"
              "m(torch.randn(4, 2, 3)); m(torch.randn(4, 2, 3)); print(m.last_paths)")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 0 and proc.stdout.strip() == "('loop',)"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2, proc.stderr
    assert "building the C++ fast path (one time" in lines[0]
    assert "RuntimeWarning: the C++ fast path could not be built" in lines[1]


def test_build_command_says_why_it_cannot_build(tmp_path, monkeypatch):


    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("ATNBENCH_NO_BUILD", "1")
    disabled = invoke("build")
    assert disabled.exit_code == 2 and disabled.stderr.strip().splitlines() == [
        "error: ATNBENCH_NO_BUILD is set: unset it to build the C++ fast path"]
    monkeypatch.delenv("ATNBENCH_NO_BUILD")
    monkeypatch.setenv("CXX", "/bin/false")
    failed = invoke("build")
    assert failed.exit_code == 1
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 2 and "building the C++ fast path" in lines[0]
    assert lines[1].startswith("error: the C++ fast path could not be built: ") and ".failed)" in lines[1]


def test_the_build_root_is_torchs_without_importing_its_build_module(monkeypatch, tmp_path):
    """``build.root`` finds torch's extension folder as ``get_default_build_root`` does (it reads
    torch's own cache-folder rule instead of importing torch.utils.cpp_extension, which pulls in
    setuptools for every process that only loads a built library)."""
    from torch.utils.cpp_extension import get_default_build_root

    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    assert build.root() == Path(get_default_build_root())
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the rule follows torch's, not a copy of it
    assert build.root() == Path(get_default_build_root()) == (tmp_path / "cache" / "torch_extensions").resolve()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    assert build.root() == tmp_path / "ext"

"""User errors and bugs apart: what the user can fix is one line and exit 2; anything else is a
bug, exit 1, one summary line naming the file that holds its traceback."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from atnbench.config import ConfigError
from atnbench.data.common import DataUnavailable
from atnbench.errors import UserError
from atnbench.store import StoreError
from helpers import invoke

BUG_LINE = re.compile(r"^error: internal error \(a bug in atnbench, not in your input\): (\w+): (.*); "
                      r"the traceback is in (\S+)$")


@pytest.fixture
def temp_dir(tmp_path, monkeypatch):
    """The temp folder, where bug reports go, is a fresh folder of this test's own."""
    folder = tmp_path / "temp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _raiser(error: BaseException):
    def raise_it(*args, **kwargs):
        raise error
    return raise_it


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("error", [ValueError("a number went wrong"), KeyError("no_such_key"),
                                   TypeError("not callable"), ZeroDivisionError("division by zero")])
def test_a_bug_exits_1_with_one_line_and_the_traceback_in_a_file(error, temp_dir, monkeypatch):
    monkeypatch.setattr("atnbench.registry.model_flags", _raiser(error))
    result = invoke("models", terminal_width=200)
    assert result.exit_code == 1
    lines = _lines(result.output)
    assert len(lines) == 1, result.output
    match = BUG_LINE.match(lines[0])
    assert match, lines[0]
    assert match.group(1) == type(error).__name__
    assert str(error).strip("'") in match.group(2)
    written = Path(match.group(3))
    assert written.parent == temp_dir and written.is_file()
    report = written.read_text()
    assert "Traceback (most recent call last)" in report
    assert "raise_it" in report  # the frame that raised
    assert f"{type(error).__name__}: " in report.splitlines()[-1]
    assert "in models" in report  # the command's own frame is in the report


def test_each_bug_gets_its_own_report(temp_dir, monkeypatch):
    monkeypatch.setattr("atnbench.registry.model_flags", _raiser(ValueError("first")))
    invoke("models")
    monkeypatch.setattr("atnbench.registry.model_flags", _raiser(ValueError("second")))
    invoke("models")
    reports = sorted(temp_dir.iterdir())
    assert len(reports) == 2
    assert {report.read_text().splitlines()[-1] for report in reports} == {"ValueError: first", "ValueError: second"}


@pytest.mark.parametrize("error", [UserError("--thing 3 is out of range: give 1 to 2"),
                                   ConfigError("--thing 3 is out of range: give 1 to 2"),
                                   StoreError("--thing 3 is out of range: give 1 to 2"),
                                   DataUnavailable("--thing 3 is out of range: give 1 to 2")])
def test_a_user_error_exits_2_with_one_line_and_no_report(error, temp_dir, monkeypatch):
    monkeypatch.setattr("atnbench.registry.model_flags", _raiser(error))
    result = invoke("models", terminal_width=200)
    assert result.exit_code == 2
    assert _lines(result.output) == ["error: --thing 3 is out of range: give 1 to 2"]
    assert list(temp_dir.iterdir()) == []


def test_usage_errors_stay_exit_2(temp_dir):
    result = invoke("models", "--no-such-flag", terminal_width=200)
    assert result.exit_code == 2
    assert len(_lines(result.output)) == 1 and "no-such-flag" in result.output
    assert list(temp_dir.iterdir()) == []


BOOM = ("import atnbench.registry as registry\n"
        "def boom(entry): raise KeyError('no_such_key')\n"
        "registry.model_flags = boom\n"
        "from atnbench.cli import app\n"
        "app(prog_name='atnbench')\n")


def _console_script(tmp_path, debug: str):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TMPDIR": str(tmp_path), "ATNBENCH_DEBUG": debug,
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    return subprocess.run([sys.executable, "-c", BOOM, "models"], capture_output=True, text=True, env=env, timeout=120)


def test_a_bug_in_a_process_names_its_report_on_stderr(tmp_path):
    done = _console_script(tmp_path, "0")
    assert done.returncode == 1
    assert done.stdout == ""
    lines = _lines(done.stderr)
    assert len(lines) == 1 and BUG_LINE.match(lines[0]), done.stderr
    written = Path(BUG_LINE.match(lines[0]).group(3))
    assert written.parent == tmp_path
    assert "Traceback (most recent call last)" in written.read_text()
    assert written.read_text().splitlines()[-1] == "KeyError: 'no_such_key'"


def test_atnbench_debug_prints_the_traceback(tmp_path):
    done = _console_script(tmp_path, "1")
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert done.stderr.splitlines()[-1] == "KeyError: 'no_such_key'"
    assert "internal error" not in done.stderr
    assert not list(tmp_path.glob("atnbench-bug-*"))


def test_a_deleted_working_folder_is_one_line_naming_it(tmp_path):
    """Started from a folder that is gone, torch's import ended the process from inside MKL ("Intel
    oneMKL FATAL ERROR: Cannot load libtorch_cpu.so", exit 2); deleted during a command, what
    os.getcwd() raises reached the user as a bare "No such file or directory"."""
    import os

    from atnbench.cli.app import _first_line

    gone = tmp_path / "gone"
    gone.mkdir()
    script = "from atnbench.cli import app; app(prog_name='atnbench')"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(f"cd {gone} && rmdir {gone} && {sys.executable} -c \"{script}\" run adding --T 5 -q",
                          shell=True, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr.splitlines() == [
        "error: the working folder this command started in was deleted; run it from a folder that exists"]
    version = subprocess.run(f"mkdir {gone} && cd {gone} && rmdir {gone} && {sys.executable} -c \"{script}\" --version",
                             shell=True, capture_output=True, text=True, env=env, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("atnbench "), version.stderr  # help and version work
    here = os.getcwd()
    gone.mkdir()
    os.chdir(gone)
    try:
        gone.rmdir()
        said = _first_line(FileNotFoundError(2, "No such file or directory"))
    finally:
        os.chdir(here)
    assert said == ("No such file or directory: the working folder this command started in was deleted; run it "
                    "from a folder that exists")
    assert _first_line(FileNotFoundError(2, "No such file or directory")) == "No such file or directory"

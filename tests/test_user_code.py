"""A task from code (``module: file.py:SPEC``) as hostile as users write it (#40): whatever their
code does (raise, exit, end the process, interrupt itself, hand back the wrong thing, print), the
command says one ``error:`` line naming their file and function, exits 2, and leaves no store.
Plus the flags and task-file mistakes of #40 that sit next to it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import invoke as shared_invoke
from atnbench.evidence.identity import run_id_of

HEADER = '''import os, sys, torch
from atnbench.tasks import TaskSpec

def make_batch(generator, batch_size, T):
    x = torch.randn(T, batch_size, 2, generator=generator)
    return x, x[:, :, 0].sum(0)

def spec(**changes):
    fields = dict(name="sum", description="d", measures="m", input_size=2, output_size=1, loss="mse",
                  target="last", baseline=lambda T: float(T), min_T=1, seq_len=lambda T: T, reference="r",
                  make_batch=make_batch)
    return TaskSpec(**{**fields, **changes})
'''
TASK_FILE = "module: code.py:SPEC\ndefault_T: 6\ndefaults: {hidden: 4, steps: 2, eval_every: 2, val_samples: 8, " \
            "batch_size: 4}\n"


def batch(body: str) -> str:
    """A module whose make_batch is ``mb`` with ``body``."""
    return f"def mb(generator, batch_size, T):\n    {body}\nSPEC = spec(make_batch=mb)\n"


# (module code after HEADER, what the one error line says after the file's name)
CASES = {
    "import raises": ("raise RuntimeError('boom')\n", "(importing it): raised RuntimeError: boom"),
    "import sys.exit(0)": ("sys.exit(0)\n", "(importing it): called sys.exit(0)"),
    "import sys.exit(3)": ("sys.exit(3)\n", "(importing it): called sys.exit(3)"),
    "import KeyboardInterrupt": ("raise KeyboardInterrupt\n", "(importing it): raised KeyboardInterrupt"),
    "make_batch raises": (batch("raise ValueError('nope')"), "mb(): raised ValueError: nope"),
    "make_batch sys.exit(0)": (batch("sys.exit(0)"), "mb(): called sys.exit(0)"),
    "make_batch sys.exit(3)": (batch("sys.exit(3)"), "mb(): called sys.exit(3)"),
    "make_batch KeyboardInterrupt": (batch("raise KeyboardInterrupt"), "mb(): raised KeyboardInterrupt"),
    "make_batch None": (batch("return None"), "mb(): returned None; expected a tuple (x, y)"),
    "make_batch 3 values": (batch("return 1, 2, 3"), "mb(): returned a tuple of 3"),
    "make_batch numpy": (batch("import numpy; return numpy.zeros((T, batch_size, 2)), torch.zeros(batch_size)"),
                         "mb(): returned x as a ndarray; expected a torch tensor"),
    "3 steps for any T": (batch("x = torch.randn(3, batch_size, 2); return x, x[:, :, 0].sum(0)"),
                          "mb(): x has shape (3, 4, 2) for batch_size=4, T=6; expected (6, 4, 2)"),
    "x channels": (batch("return torch.zeros(T, batch_size, 3), torch.zeros(batch_size)"),
                   "x has shape (6, 4, 3)"),
    "x dtype": (batch("return torch.zeros(T, batch_size, 2, dtype=torch.long), torch.zeros(batch_size)"),
                "x has dtype torch.int64"),
    "y batch": (batch("return torch.zeros(T, batch_size, 2), torch.zeros(batch_size + 1)"),
                "y has shape (5,) for batch_size=4, T=6; expected (4,)"),
    "y nan": (batch("return torch.zeros(T, batch_size, 2), torch.full((batch_size,), float('nan'))"),
              "y holds NaN or infinity"),
    "ce float target": ("SPEC = spec(loss='ce', output_size=3)\n", "make_batch(): y has dtype torch.float32; loss 'ce'"),
    "ce class out of range": (batch("return torch.zeros(T, batch_size, 2), torch.full((batch_size,), 7)")
                              .replace("spec(make_batch=mb)", "spec(make_batch=mb, loss='ce', output_size=3)"),
                              "y holds class 7; classes are 0..2"),
    "ce every label ignored": (batch("return torch.zeros(T, batch_size, 2), torch.full((batch_size,), -100)")
                               .replace("spec(make_batch=mb)", "spec(make_batch=mb, loss='ce', output_size=3)"),
                               "y holds no scored class (every label is -100"),
    "x past float32": (batch("x = torch.full((T, batch_size, 2), 1e300, dtype=torch.float64); return x, x[-1, :, 0]"),
                       "mb(): x holds 1e+300, past float32's range"),
    "y past float32": (batch("return torch.zeros(T, batch_size, 2), torch.full((batch_size,), -1e300, dtype=torch.float64)"),
                       "mb(): y holds 1e+300, past float32's range"),
    "make_batch CancelledError": (batch("import asyncio; raise asyncio.CancelledError('gave up')"),
                                  "mb(): raised CancelledError: gave up"),
    "make_batch GeneratorExit": (batch("raise GeneratorExit"), "mb(): raised GeneratorExit"),
    "import a BaseException of its own": ("class Stop(BaseException):\n    pass\nraise Stop('halt')\n",
                                          "(importing it): raised Stop: halt"),
    "target middle": ("SPEC = spec(target='middle')\n", "SPEC: TaskSpec target: expected 'last' or 'all', got 'middle'"),
    "input_size 0": ("SPEC = spec(input_size=0)\n", "SPEC: TaskSpec input_size: expected a whole number >= 1, got 0"),
    "output_size 0": ("SPEC = spec(output_size=0)\n", "TaskSpec output_size"),
    "ce one class": ("SPEC = spec(loss='ce', output_size=1)\n",
                     "TaskSpec output_size: expected at least 2 classes for loss 'ce'"),
    "loss hinge": ("SPEC = spec(loss='hinge')\n", "SPEC: TaskSpec loss: expected 'mse' or 'ce', got 'hinge'"),
    "metric": ("SPEC = spec(metric='f1')\n", "TaskSpec metric"),
    "seq_len text": ("SPEC = spec(seq_len=lambda T: 'x')\n", "<lambda>(): returned 'x' for T=6"),
    "baseline raises": ("SPEC = spec(baseline=lambda T: 1 / 0)\n", "<lambda>(): raised ZeroDivisionError"),
    "baseline text": ("SPEC = spec(baseline=lambda T: 'low')\n", "returned 'low' for T=6; expected a finite number"),
    "make_source raises": ("def src(config, device):\n    raise OSError('no disk')\n"
                           "SPEC = spec(make_batch=None, make_source=src)\n", "src(): raised OSError: no disk"),
    "make_source None": ("SPEC = spec(make_batch=None, make_source=lambda config, device: None)\n",
                         "<lambda>(): returned a source whose input_size is None"),
}


@pytest.fixture(autouse=True)
def _no_user_folders(monkeypatch):
    monkeypatch.setenv("ATNBENCH_TASKS", "")
    monkeypatch.delenv("ATNBENCH_DEBUG", raising=False)


def _task(folder: Path, code: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "code.py").write_text(HEADER + code)
    (folder / "mine.yaml").write_text(TASK_FILE)
    return folder


def invoke(*args):
    return shared_invoke(*args, terminal_width=200)


def one_error(result, code: int = 2) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == code, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.stdout + result.stderr and "a bug in atnbench" not in result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("command", ["run", "tasks check"])
@pytest.mark.parametrize("case", list(CASES))
def test_user_code_fails_as_the_users_error(tmp_path, monkeypatch, case, command):
    code, message = CASES[case]
    folder = _task(tmp_path / f"t-{abs(hash(case))}", code)
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "s.db"
    args = ["run", "mine", "--store", store] if command == "run" else ["tasks", "check", "mine"]
    line = one_error(invoke(*args, "--include", folder))
    named = next(file for file in (folder / "code.py", "code.py") if str(file) in line)  # their file, by its path
    assert named and message in line, line
    assert not store.exists()  # refused before the store is opened: no row, no checkpoint


def test_the_boundary_covers_enough_cases():
    assert len(CASES) >= 25


@pytest.mark.parametrize("code, message", [
    ("os._exit(0)\nSPEC = spec()\n", "(importing it): called os._exit(0)"),
    (batch("os._exit(0)"), "mb(): called os._exit(0)"),
])
def test_os_exit_in_user_code_is_an_error_not_a_silent_success(tmp_path, code, message):
    """os._exit ends a process past every ``except``: in a real process, run must not exit 0."""
    folder = _task(tmp_path / "t", code)
    env = {**os.environ, "ATNBENCH_TASKS": str(folder), "ATNBENCH_NO_BUILD": "1"}
    env.pop("ATNBENCH_DEBUG", None)
    done = subprocess.run([sys.executable, "-m", "atnbench", "run", "mine", "--store", str(tmp_path / "s.db")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and str(folder / "code.py") in lines[0] and message in lines[0], lines


def test_a_user_modules_print_stays_out_of_json_output(tmp_path, monkeypatch):
    folder = _task(tmp_path / "t", "print('hello from my module')\nSPEC = spec()\n")
    monkeypatch.chdir(tmp_path)
    result = invoke("run", "mine", "--include", folder, "--store", tmp_path / "s.db", "--format", "json")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)  # the whole of stdout is the one record
    assert record["status"] == "done" and "hello from my module" in result.stderr


def test_a_real_interrupt_while_user_code_runs_stays_an_interrupt():
    """Ctrl-C (or kill) arriving while the user's code runs is an interruption (the run resumes),
    not the user's KeyboardInterrupt; one the code raises itself is its error."""
    from atnbench.tasks.usercode import UserCodeError, calling

    # Python's own SIGINT handler, as atnbench's process has it: pytest-xdist's workers ignore SIGINT
    # (Ctrl-C is their controller's), so without this the test passed or failed with what ran before it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt) as raised:
            with calling("f.py: g()"):
                os.kill(os.getpid(), signal.SIGINT)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:  # the handler runs between bytecodes
                    pass
        assert raised.type is KeyboardInterrupt
        with pytest.raises(UserCodeError, match="f.py: g\\(\\): raised KeyboardInterrupt"):
            with calling("f.py: g()"):
                raise KeyboardInterrupt
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as it was
    finally:
        signal.signal(signal.SIGINT, previous)


def test_os_exit_is_restored_after_user_code():
    from atnbench.tasks import usercode

    real = os._exit
    with pytest.raises(usercode.UserCodeError):
        with usercode.calling("f.py: g()"):
            assert os._exit is not real
            os._exit(4)
    assert os._exit is real


def test_a_good_task_from_code_is_checked_and_runs(tmp_path, monkeypatch):
    """The checks pass a right task: tasks check shows it, and its batches are what it made."""
    folder = _task(tmp_path / "t", "SPEC = spec()\n")
    result = invoke("tasks", "check", "mine", "--include", folder)
    assert result.exit_code == 0 and "ok: run it with" in result.stdout, result.stderr
    from atnbench.run.runspec import resolve_run
    from atnbench.tasks.registry import batch_generator
    from atnbench.tasks.lookup import task_of

    monkeypatch.setenv("ATNBENCH_TASKS", str(folder))
    config = resolve_run("mine", {})
    x, y = task_of("mine", config.options).make_batch(batch_generator(0, "train"), 4, 6)
    import torch

    expected = torch.randn(6, 4, 2, generator=batch_generator(0, "train"))
    assert torch.equal(x, expected) and torch.equal(y, expected[:, :, 0].sum(0))


def test_a_run_whose_task_file_was_moved_says_no_such_file_not_that_its_code_raised(tmp_path):
    folder = _task(tmp_path / "t", "SPEC = spec()\n")
    store = tmp_path / "s.db"
    ran = invoke("run", "mine", "--include", folder, "--T", "6", "--hidden", "4", "--iters", "2", "--store", store,
                 "--format", "json")
    assert ran.exit_code == 0, ran.output
    (folder / "code.py").rename(tmp_path / "elsewhere.py")
    message = one_error(invoke("evaluate", json.loads(ran.stdout)["run_id"], "--store", store))
    assert f"{folder / 'code.py'}: no such file: task 'mine' is written in Python there" in message, message


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16"])
def test_a_batch_of_another_float_dtype_is_cast_to_float32(tmp_path, dtype):
    """x from torch.tensor(numpy array) is float64: cast to the model's dtype, not an internal error."""
    body = f"x = torch.randn(T, batch_size, 2, generator=generator).to(torch.{dtype}); return x, x[:, :, 0].sum(0)"
    folder = _task(tmp_path / "t", batch(body))
    result = invoke("run", "mine", "--include", folder, "--store", tmp_path / "s.db", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "done"


SOURCE_OF_INTS = """from atnbench.tasks.source import Batch

class Src:
    input_size, output_size, vocab_size, splits = 2, 2, None, ("val",)
    def __init__(self, config, device):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(6, 4, 2, generator=g)
        self.y = (self.x[:, :, 0].sum(0) > 0).to(torch.{dtype})
    def train_batch(self):
        return Batch(self.x, self.y)
    def eval_batches(self, split):
        yield Batch(self.x, self.y)
    def state_dict(self):
        return {{}}
    def load_state_dict(self, state):
        pass

SPEC = spec(make_batch=None, make_source=Src, loss='ce', output_size=2)
"""


@pytest.mark.parametrize("dtype", ["int32", "int16", "int8", "uint8", "uint16", "uint64"])
@pytest.mark.parametrize("kind", ["make_batch", "make_source"])
def test_class_indices_of_any_integer_dtype_train_as_torch_long(tmp_path, dtype, kind):
    """int32 labels passed `tasks check` and then stopped the run as "a bug in atnbench" (cross-entropy
    takes int64), from make_batch and from a data source (review); uint16 and wider ones stopped the
    check itself (torch has no min() of them; QA): cast as float dtypes are, the run trains."""
    body = (f"x = torch.randn(T, batch_size, 2, generator=generator); "
            f"return x, (x[:, :, 0].sum(0) > 0).to(torch.{dtype})")
    code = (f"def mb(generator, batch_size, T):\n    {body}\nSPEC = spec(make_batch=mb, loss='ce', output_size=2)\n"
            if kind == "make_batch" else SOURCE_OF_INTS.format(dtype=dtype))
    folder = _task(tmp_path / "t", code)
    result = invoke("run", "mine", "--include", folder, "--store", tmp_path / "s.db", "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "done"


@pytest.mark.parametrize("kind", ["make_batch", "make_source"])
@pytest.mark.parametrize("label, said", [
    ("7", "y holds class 7; classes are 0..1"),  # a source's were never checked: "a bug in atnbench" (QA)
    ("2 ** 64 - 100", "y holds a torch.uint64 value past int64's range"),  # wrapped to -100, unscored (QA)
])
def test_labels_that_are_no_class_are_refused_before_a_store_is_written(tmp_path, kind, label, said):
    body = ("x = torch.randn(T, batch_size, 2, generator=generator); "
            f"y = torch.tensor([{label}] + [1] * (batch_size - 1), dtype=torch.uint64); return x, y")
    code = (f"def mb(generator, batch_size, T):\n    {body}\nSPEC = spec(make_batch=mb, loss='ce', output_size=2)\n"
            if kind == "make_batch" else
            SOURCE_OF_INTS.format(dtype="uint64").replace("self.y = (self.x[:, :, 0].sum(0) > 0).to(torch.uint64)",
                                                          f"self.y = torch.tensor([{label}, 1, 0, 1], dtype=torch.uint64)"))
    folder = _task(tmp_path / "t", code)
    for args in (("tasks", "check", "mine"), ("run", "mine", "--store", tmp_path / "s.db")):
        line = one_error(invoke(*args, "--include", folder))
        assert said in line, line
    assert not (tmp_path / "s.db").exists()


# -- flags and task files next to it (#40) -------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["run", "adding", "--norm", "atm"], "unknown norm 'atm'; did you mean atn?"),
    (["run", "adding", "--norm", "blnn"], "did you mean bln?"),
    (["run", "adding", "--epochs", "-1", "--iters", "3"], "epochs must be > 0"),
    (["run", "adding", "--epochs", "0", "--iters", "3"], "epochs must be > 0"),
    (["report", "--norm", "atm"], "did you mean atn?"),
])
def test_flags_are_refused_with_the_right_name(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    line = one_error(invoke(*args, "--store", tmp_path / "s.db"))
    assert message in line, line
    assert not (tmp_path / "s.db").exists()


def test_norm_names_are_case_insensitive():
    from atnbench.run.runspec import resolve_run

    assert run_id_of(resolve_run("adding", {"norm": "LN"})) == run_id_of(resolve_run("adding", {"norm": "ln"}))
    assert resolve_run("adding", {"norm": "ATN"}).norm == "atn"


def test_a_sweep_file_norm_says_did_you_mean(tmp_path):
    sweep = tmp_path / "s.yaml"
    sweep.write_text("description: d\ntask: adding\nbase: {T: 8, steps: 1}\ngrid: {norm: [ln, atm]}\n")
    line = one_error(invoke("sweep", sweep, "--dry-run", "--store", tmp_path / "s.db"))
    assert "grid.norm" in line and "did you mean atn?" in line


@pytest.mark.parametrize("command", ["run", "tasks check", "sweep"])
def test_a_task_file_named_like_a_shipped_task_is_refused_alike(tmp_path, monkeypatch, command):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "adding.yaml").write_text("module: code.py:SPEC\ndefault_T: 6\n")
    (tmp_path / "s.yaml").write_text("description: d\ntask: adding\nbase: {T: 8, steps: 1}\ngrid: {norm: [ln]}\n")
    monkeypatch.chdir(tmp_path)
    args = {"run": ["run", "adding", "--store", tmp_path / "s.db"], "tasks check": ["tasks", "check", "adding"],
            "sweep": ["sweep", tmp_path / "s.yaml", "--dry-run", "--store", tmp_path / "s.db"]}[command]
    line = one_error(invoke(*args, "--include", folder))
    assert f"{folder / 'adding.yaml'}: 'adding' is a shipped task" in line and "rename the file" in line
    listed = invoke("tasks", "--include", folder)
    assert listed.exit_code == 0 and "is a shipped task" in " ".join(listed.stdout.split())


@pytest.mark.parametrize("layer", ["defaults: {options: {foo: 1}}", "variants: {v: {options: {foo: 1}}}",
                                   "per_T: {6: {options: {foo: 1}}}"])
def test_an_unknown_option_in_a_task_file_is_refused(tmp_path, layer):
    folder = _task(tmp_path / "t", "SPEC = spec()\n")
    (folder / "mine.yaml").write_text(f"module: code.py:SPEC\ndefault_T: 6\n{layer}\n")
    line = one_error(invoke("tasks", "check", "mine", "--include", folder))
    assert "mine.yaml" in line and ".options.foo': unknown option" in line, line


@pytest.mark.parametrize("args", [
    ["run", "adding", "--layers", "100000", "--T", "8", "--batch-size", "4", "--hidden", "8", "--val-samples", "8"],
    ["sweep", "{sweep}", "--layers", "5000", "--T", "8", "--hidden", "8"],
])
def test_a_model_too_deep_to_build_in_seconds_is_refused_before_building(tmp_path, monkeypatch, args):
    """100,000 small layers fit in memory (the memory check passed them) but took minutes to
    build: refused at once, before a store is opened."""
    import time

    sweep = tmp_path / "s.yaml"
    sweep.write_text("description: d\ntask: adding\nbase: {T: 8, steps: 1, batch_size: 4, val_samples: 8}\n"
                     "grid: {norm: [ln]}\n")
    monkeypatch.chdir(tmp_path)
    started = time.perf_counter()
    line = one_error(invoke(*[str(sweep) if a == "{sweep}" else a for a in args], "--store", tmp_path / "s.db"))
    assert "stacked layers (--layers); at most 1,000" in line and time.perf_counter() - started < 30
    assert not (tmp_path / "s.db").exists()


def test_a_task_from_code_keeps_its_run_ids_when_its_folder_moves(tmp_path):
    """The file enters a run's id by its contents, as data files do: a copy elsewhere (another
    checkout, a collaborator's machine) makes the same runs; other contents make other runs."""
    store = tmp_path / "s.db"
    args = ("--T", "6", "--hidden", "4", "--iters", "2", "--store", store, "--format", "json")
    first = invoke("run", "mine", "--include", _task(tmp_path / "a", "SPEC = spec()\n"), *args)
    assert first.exit_code == 0, first.output
    again = invoke("run", "mine", "--include", _task(tmp_path / "b", "SPEC = spec()\n"), *args)
    assert again.exit_code == 0 and "not training again" in again.stderr, again.output
    assert json.loads(again.stdout)["run_id"] == json.loads(first.stdout)["run_id"]
    other = invoke("run", "mine", "--include", _task(tmp_path / "c", "SPEC = spec(min_T=2)\n"), *args)
    assert other.exit_code == 0 and "not training again" not in other.stderr, other.output
    assert json.loads(other.stdout)["run_id"] != json.loads(first.stdout)["run_id"]

    # the first run as stored under the earlier rule (its folder's path in its id): the same run still
    from atnbench.evidence import identity

    assert invoke("store", "export", tmp_path / "e.jsonl", "--store", store, "--task", "mine").exit_code == 0
    record = json.loads((tmp_path / "e.jsonl").read_text().splitlines()[0])
    earlier = identity.run_ids_under(record["config"], identity.code_fingerprint())[1]
    (tmp_path / "e.jsonl").write_text(json.dumps({**record, "run_id": earlier}) + "\n")
    assert invoke("store", "import", tmp_path / "e.jsonl", "--store", tmp_path / "old.db").exit_code == 0
    old = invoke("run", "mine", "--include", tmp_path / "a", *args[:6], "--store", tmp_path / "old.db")
    assert old.exit_code == 0, old.output
    assert f"as run {earlier}, its id under an earlier rule of run identity" in old.stderr.replace("\n", "")


# A run id given under the rule before 2026-11-27, when a task from code entered by its file's path
# too: this task at this path, under code fingerprint 0123456789abcdef (computed by that code).
EARLIER_RULE_ID, EARLIER_RULE_FOLDER = "4bcd5e6281fa", Path("/tmp/atnbench-legacy-id/t")


def test_a_run_stored_under_the_earlier_rule_of_identity_stays_the_same_run(monkeypatch):
    from atnbench.evidence import identity, records
    from atnbench.evidence.equivalence import on_its_data
    from atnbench.run.runspec import resolve_run
    from atnbench.store import RunRecord

    EARLIER_RULE_FOLDER.parent.mkdir(exist_ok=True)
    folder = _task(EARLIER_RULE_FOLDER, "SPEC = spec()\n")
    try:
        monkeypatch.setenv("ATNBENCH_TASKS", str(folder))
        config = resolve_run("mine", {}).to_dict()
        code = "0123456789abcdef"
        ids = identity.run_ids_under(config, code)
        assert ids[0] == identity.run_id_under(config, code) != EARLIER_RULE_ID and ids[1] == EARLIER_RULE_ID
        assert len(identity.config_keys(config)) == 2 and identity.config_keys(config)[0] == identity.config_key(config)
        record = {"run_id": EARLIER_RULE_ID, "status": "done", "config": config, "env": {"code": code},
                  "curve": [{"step": 2, "train_loss": 1.0, "val_loss": 0.5}], "sweeps": []}
        assert records.problem(record) is None  # store import and merge take it
        assert records.problem({**record, "run_id": "4bcd5e6281fb"}).startswith("run_id: 4bcd5e6281fb does not follow")
        stored = RunRecord(run_id=EARLIER_RULE_ID, task="mine", T=6, norm="atn", k=10, seed=0, budget=1.0,
                           status="done", config=config, env={"code": code}, summary={}, error=None,
                           created_at="", updated_at="")
        assert on_its_data(stored)  # a sweep and `run` let it stand for its experiment
        from types import SimpleNamespace

        from atnbench.sweep.confirm import in_plan

        planned = SimpleNamespace(config=resolve_run("mine", {}))  # a study planned under the earlier rule
        assert in_plan([planned], code, {EARLIER_RULE_ID}) == [planned]
        (folder / "code.py").write_text(HEADER + "SPEC = spec(min_T=2)\n")
        assert not on_its_data(stored) and records.problem(record).startswith("run_id: ")  # other contents
    finally:
        shutil.rmtree(EARLIER_RULE_FOLDER.parent, ignore_errors=True)


def test_the_files_a_task_from_code_reads_enter_its_run_ids_when_it_says_so(tmp_path):
    """`reads:` names the data the code reads: a changed file makes a new run (without it the old
    run would be found and its numbers given for other data), and `evaluate` of the old run refuses
    to score its model on the changed file, as for a task from data files."""
    folder = _task(tmp_path / "t", "import numpy\nSCALE = float(numpy.load(__file__[:-7] + 'data/scale.npy'))\n"
                   "SPEC = spec(make_batch=lambda g, b, T: (lambda x: (x, x[:, :, 0].sum(0)))"
                   "(SCALE * torch.randn(T, b, 2, generator=g)))\n")
    (folder / "data").mkdir()
    import numpy

    numpy.save(folder / "data" / "scale.npy", numpy.array(1.0))
    (folder / "mine.yaml").write_text(TASK_FILE + "reads: [data]\n")
    store = tmp_path / "s.db"
    args = ("run", "mine", "--include", folder, "--T", "6", "--iters", "2", "--store", store, "--format", "json")
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    numpy.save(folder / "data" / "scale.npy", numpy.array(2.0))
    second = invoke(*args)
    assert second.exit_code == 0 and "not training again" not in second.stderr, second.output
    old_id = json.loads(first.stdout)["run_id"]
    assert json.loads(second.stdout)["run_id"] != old_id
    refused = one_error(invoke("evaluate", old_id, "--store", store))
    assert f"one or more of {folder / 'code.py'}, {folder / 'data'} hold other contents" in refused
    # a store inside the data the task reads would change it while the run writes: the run ended
    # under another id than it printed, its summary lost (exit 0); refused before any work
    inside = folder / "data" / "runs" / "s.db"
    for command in (args[:-4] + ("--store", inside), ("sweep", "norm-ablation", "--task", "mine", "--include", folder,
                                                      "--T", "6", "--iters", "2", "--store", inside)):
        said = one_error(invoke(*command))
        assert f"results store {inside} is inside {folder / 'data'}, which task mine reads" in said, said
    assert not inside.parent.exists()

    (folder / "mine.yaml").write_text(TASK_FILE + "reads: [data, nowhere.npy]\n")
    assert f"key 'reads': no such file or folder {folder / 'nowhere.npy'}" in one_error(invoke(*args))
    (folder / "mine.yaml").write_text("problem: sequence-regression\ndata: {train: data/scale.npy}\nreads: [data]\n")
    assert "key 'reads': for a task from code (module:)" in one_error(invoke(*args))

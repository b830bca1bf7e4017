"""The one boundary where a user's task code runs (``module: file.py:SPEC``).

Everything the user's Python does for atnbench passes through :func:`calling`: importing their
module, their ``make_batch``, ``make_source``, ``seq_len`` and ``baseline``, and a DataSource's
batches. Whatever goes wrong in there is the user's to fix, so it leaves as one
:class:`UserCodeError` naming their file and function (exit 2), never as "a bug in atnbench":

* an exception, ``sys.exit(n)`` (any n: a task's code must return, not end the command) and
  ``os._exit(n)``, which no ``except`` catches, so it is replaced while the user's code runs;
* a ``KeyboardInterrupt`` the code raised itself; Ctrl-C or ``kill`` arriving meanwhile stays an
  interruption (the run is recorded as interrupted and resumes);
* what it printed goes to stderr, so ``--format json`` output stays one JSON document.

What it hands back is checked too (:func:`check_spec`, :func:`check_batch`): a TaskSpec field
out of range, or a batch of the wrong type, shape or dtype (3 steps when T asks for 10) is
refused before it reaches the model. Code that ends the process below Python (``ctypes``,
``os.kill`` of itself) is beyond any check in the same process; docs/adding-a-task.md says so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from atnbench.config import ConfigError

LOSSES = ("mse", "ce")  # what train.task_loss computes
TARGETS = ("last", "all")  # which steps are scored
METRICS = (None, "accuracy", "mae", "bpc", "ppl")
IGNORED_CLASS = -100  # cross_entropy's ignore_index: a step that is not scored


class UserCodeError(ConfigError):
    """The user's task code failed or returned something unusable; one line naming it."""


class _ProcessExit(BaseException):
    """``os._exit`` called by the user's code, raised instead of ending the process."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


_inside = threading.local()
_real_exit = os._exit
_running = [0]  # threads inside the boundary now: os._exit is the real one again when none is
_lock = threading.Lock()


def _exit_while_inside(code=0):
    # only the thread running the user's code is stopped; another thread's os._exit is real, and
    # so is a forked child's (multiprocessing ends its children with os._exit)
    if getattr(_inside, "depth", 0) and getattr(_inside, "pid", None) == os.getpid():
        raise _ProcessExit(code)
    _real_exit(code)


class _NoteSignals:
    """Remembers whether SIGINT/SIGTERM arrived while the user's code ran (main thread only), so
    an interrupt from outside is told apart from a KeyboardInterrupt the code raised."""

    def __init__(self):
        self.arrived, self.previous = False, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                handler = signal.getsignal(sig)
                if callable(handler):  # SIG_DFL/SIG_IGN raise nothing: left alone
                    self.previous[sig] = handler
                    signal.signal(sig, self._note)
        return self

    def _note(self, signum, frame):
        self.arrived = True
        self.previous[signum](signum, frame)

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        return False


def where(function: Any, fallback: str) -> str:
    """``FILE: NAME()`` of a user's function (the file it is defined in, else ``fallback``)."""
    code = getattr(function, "__code__", None)
    file = code.co_filename if code is not None and Path(code.co_filename).is_file() else fallback
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return f"{file}: {name}()"


@contextlib.contextmanager
def calling(place: str) -> Iterator[None]:
    """Run the user's code at ``place`` (``FILE: FUNCTION()``); see the module docstring."""
    _inside.depth, _inside.pid = getattr(_inside, "depth", 0) + 1, os.getpid()
    with _lock:
        _running[0] += 1
        os._exit = _exit_while_inside
    signals = _NoteSignals()
    try:
        with signals, contextlib.redirect_stdout(sys.stderr):
            yield
    except UserCodeError:
        raise
    except _ProcessExit as stop:
        raise UserCodeError(f"{place}: called os._exit({stop.code}); a task's code must return, not end the "
                            f"process") from None
    except SystemExit as stop:
        raise UserCodeError(f"{place}: called sys.exit({stop.code!r}); a task's code must return, not exit") from None
    except KeyboardInterrupt:
        if signals.arrived:  # Ctrl-C or kill while it ran: an interruption, as anywhere else
            raise
        raise UserCodeError(f"{place}: raised KeyboardInterrupt") from None
    # BaseException: asyncio.CancelledError, GeneratorExit or a class of its own are the code's too
    except BaseException as error:  # noqa: BLE001 - whatever the user's code raised is theirs to fix
        said = str(error).strip().splitlines()
        raise UserCodeError(f"{place}: raised {type(error).__name__}" + (f": {said[0]}" if said else "")) from None
    finally:
        _inside.depth -= 1
        with _lock:
            _running[0] -= 1
            if not _running[0]:
                os._exit = _real_exit


def call(function: Callable, fallback: str, *args):
    with calling(where(function, fallback)):
        return function(*args)


# --- what the code hands back ---------------------------------------------------------------------

def _whole(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def check_spec(spec, place: str) -> None:
    """A TaskSpec's fields within what the trainer computes; UserCodeError naming the field."""
    problems = [
        (not _whole(spec.input_size, 1), "input_size", "a whole number >= 1", spec.input_size),
        (not _whole(spec.output_size, 1), "output_size", "a whole number >= 1", spec.output_size),
        (spec.loss == "ce" and _whole(spec.output_size, 1) and spec.output_size < 2, "output_size",
         "at least 2 classes for loss 'ce' (one class leaves nothing to learn: its loss is 0)", spec.output_size),
        (spec.loss not in LOSSES, "loss", " or ".join(map(repr, LOSSES)), spec.loss),
        (spec.target not in TARGETS, "target", " or ".join(map(repr, TARGETS)), spec.target),
        (not _whole(spec.min_T, 1), "min_T", "a whole number >= 1", spec.min_T),
        (spec.metric not in METRICS, "metric", ", ".join(map(repr, METRICS[1:])) + " or None", spec.metric),
        (not callable(spec.seq_len), "seq_len", "a function of T", spec.seq_len),
        (not callable(spec.baseline), "baseline", "a function of T", spec.baseline),
        (spec.make_batch is not None and not callable(spec.make_batch), "make_batch", "a function", spec.make_batch),
        (spec.make_source is not None and not callable(spec.make_source), "make_source", "a function",
         spec.make_source),
    ]
    for bad, field, expected, got in problems:
        if bad:
            raise UserCodeError(f"{place}: TaskSpec {field}: expected {expected}, got {got!r}")


def seq_len(spec, T: int, fallback: str) -> int:
    steps = call(spec.seq_len, fallback, T)
    if not _whole(steps, 1):
        raise UserCodeError(f"{where(spec.seq_len, fallback)}: returned {steps!r} for T={T}; expected a whole "
                            f"number >= 1 (the steps of a sequence)")
    return steps


def expected_y(spec, steps: int, batch: int) -> tuple[int, ...]:
    """The shape of y the loss scores: (B,) or (steps, B) per class index or one-output
    regression, with the outputs as a last axis for a regression of several."""
    shape = (batch,) if spec.target == "last" else (steps, batch)
    return shape if spec.loss == "ce" or spec.output_size == 1 else (*shape, spec.output_size)


def check_batch(spec, result: Any, batch: int, T: int, place: str, steps: int) -> tuple:
    """``make_batch(generator, batch, T)``'s result: (x, y) tensors as the TaskSpec says, its
    floating-point x (and regression y) as float32, the model's dtype, and class indices of any
    integer dtype as torch.long, which cross-entropy takes (int32 stopped the run past the check)."""
    if not (isinstance(result, tuple) and len(result) == 2):
        raise UserCodeError(f"{place}: returned {_kind(result)}; expected a tuple (x, y) of two torch tensors")
    x, y = result
    for name, value in (("x", x), ("y", y)):
        if not isinstance(value, torch.Tensor):
            raise UserCodeError(f"{place}: returned {name} as {_kind(value)}; expected a torch tensor")
    if tuple(x.shape) != (steps, batch, spec.input_size):
        raise UserCodeError(f"{place}: x has shape {tuple(x.shape)} for batch_size={batch}, T={T}; expected "
                            f"{(steps, batch, spec.input_size)} (seq_len(T), batch_size, input_size)")
    if not x.is_floating_point():
        raise UserCodeError(f"{place}: x has dtype {x.dtype}; expected a floating-point dtype (torch.float32)")
    wanted = expected_y(spec, steps, batch)
    if tuple(y.shape) != wanted:
        what = "class indices" if spec.loss == "ce" else f"{spec.output_size} output(s)"
        raise UserCodeError(f"{place}: y has shape {tuple(y.shape)} for batch_size={batch}, T={T}; expected {wanted} "
                            f"({what}, target={spec.target!r})")
    if spec.loss == "ce":
        if not _integer(y):
            raise UserCodeError(f"{place}: y has dtype {y.dtype}; loss 'ce' takes class indices (torch.long)")
        y = _as_long(y, place)
        _check_classes(spec, y, place)
        return _as_float32(x, "x", place), y
    if not y.is_floating_point():
        raise UserCodeError(f"{place}: y has dtype {y.dtype}; loss 'mse' takes a floating-point target")
    return _as_float32(x, "x", place), _as_float32(y, "y", place)


def _as_long(y: torch.Tensor, place: str) -> torch.Tensor:
    """Class indices as torch.long, before they are checked (torch has no min() of uint16..uint64).
    A uint64 past int64's range would wrap to a negative class, even to -100 (unscored): refused."""
    cast = y.long()
    if y.dtype == torch.uint64 and bool((cast < 0).any()):
        raise UserCodeError(f"{place}: y holds a torch.uint64 value past int64's range (above {2 ** 63 - 1}); "
                            f"classes are 0..<output_size>")
    return cast


def _integer(y: torch.Tensor) -> bool:
    return not (y.is_floating_point() or y.is_complex() or y.dtype == torch.bool)


def _check_classes(spec, y: torch.Tensor, place: str) -> None:
    scored = y[y != IGNORED_CLASS]
    if not scored.numel():  # cross-entropy over no label is 0/0: the run's loss would be nan
        raise UserCodeError(f"{place}: y holds no scored class (every label is {IGNORED_CLASS}, the ignored "
                            f"value); classes are 0..{spec.output_size - 1}")
    if int(scored.min()) < 0 or int(scored.max()) >= spec.output_size:
        raise UserCodeError(f"{place}: y holds class {int(scored.min()) if int(scored.min()) < 0 else int(scored.max())}"
                            f"; classes are 0..{spec.output_size - 1} (output_size={spec.output_size})")


def _as_float32(value: torch.Tensor, name: str, place: str) -> torch.Tensor:
    """A floating-point tensor as float32 (float64 from NumPy, or half, would stop the model,
    which computes in float32); a value float32 cannot hold is refused, not made infinite."""
    if not value.is_floating_point():
        return value
    if not bool(torch.isfinite(value).all()):
        raise UserCodeError(f"{place}: {name} holds NaN or infinity")
    if value.dtype == torch.float64 and bool((value.abs() > torch.finfo(torch.float32).max).any()):
        raise UserCodeError(f"{place}: {name} holds {float(value.abs().max()):g}, past float32's range "
                            f"(±{torch.finfo(torch.float32).max:.3g}), which the model computes in; rescale it")
    return value.float()


def _kind(value: Any) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return "None" if value is None else f"a {type(value).__name__}"


# --- the TaskSpec that runs through the boundary -------------------------------------------------

def guarded(spec, file: str, obj: str):
    """``spec`` checked, with every function of the user's called through the boundary and every
    batch it makes checked (what the trainer calls is then always the user's, checked)."""
    check_spec(spec, f"{file}: {obj}")
    make_batch, make_source, length, baseline = spec.make_batch, spec.make_source, spec.seq_len, spec.baseline

    def checked_seq_len(T):
        return seq_len(dataclasses.replace(spec, seq_len=length), T, file)

    def checked_batch(generator, batch_size, T):
        place = where(make_batch, file)
        result = call(make_batch, file, generator, batch_size, T)
        return check_batch(spec, result, batch_size, T, place, checked_seq_len(T))

    def checked_baseline(T):
        value = call(baseline, file, T)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise UserCodeError(f"{where(baseline, file)}: returned {value!r} for T={T}; expected a finite number "
                                f"(the no-memory loss) or None")
        return value

    def checked_source(config, device):
        source = call(make_source, file, config, device)
        return GuardedSource(source, where(make_source, file), file, spec=spec)

    return dataclasses.replace(spec, seq_len=checked_seq_len, baseline=checked_baseline,
                               make_batch=checked_batch if make_batch is not None else None,
                               make_source=checked_source if make_source is not None else None)


class GuardedSource:
    """A user's DataSource whose calls run through the boundary (its sizes checked once)."""

    def __init__(self, source: Any, place: str, file: str, spec: Any = None):
        for name in ("input_size", "output_size"):
            if not _whole(getattr(source, name, None), 1):
                raise UserCodeError(f"{place}: returned a source whose {name} is {getattr(source, name, None)!r}; "
                                    f"expected a whole number >= 1")
        if "val" not in tuple(getattr(source, "splits", ()) or ()):
            raise UserCodeError(f"{place}: returned a source without a 'val' split (splits: "
                                f"{getattr(source, 'splits', None)!r})")
        self._source, self._file, self._spec = source, file, spec

    def __getattr__(self, name):
        return getattr(self._source, name)

    def _call(self, name: str, *args):
        method = getattr(self._source, name)
        return call(method, self._file, *args)

    def train_batch(self):
        return self._as_classes(self._call("train_batch"), "train_batch")

    def _as_classes(self, batch, method: str):
        """A ``ce`` task's integer labels of any dtype as torch.long, checked to be classes, as
        ``check_batch`` casts and checks a generated task's (cross-entropy takes no other)."""
        y = getattr(batch, "y", None)
        if self._spec is None or self._spec.loss != "ce" or not isinstance(y, torch.Tensor) or not _integer(y):
            return batch
        place = where(getattr(self._source, method), self._file)
        cast = _as_long(y, place)
        _check_classes(self._spec, cast, place)
        return dataclasses.replace(batch, y=cast) if cast is not y and dataclasses.is_dataclass(batch) else batch

    def eval_batches(self, split: str):
        batches = self._call("eval_batches", split)
        place = where(getattr(self._source, "eval_batches"), self._file)
        iterator = iter(batches)
        while True:
            with calling(place):
                batch = next(iterator, None)
            if batch is None:
                return
            yield self._as_classes(batch, "eval_batches")

    def state_dict(self) -> dict:
        return self._call("state_dict")

    def load_state_dict(self, state: dict) -> None:
        self._call("load_state_dict", state)


def probe(spec, config) -> None:
    """One batch of a generated user task at the run's batch size and T, made and checked now
    (a fresh generator: the run's own draws are untouched), so its code fails before a store is
    opened. A data task's source is built once, as a run builds it, and its first batch checked."""
    from atnbench.tasks.registry import batch_generator

    spec.baseline(config.T)  # reported after the training: asked now
    if spec.make_batch is not None:
        spec.make_batch(batch_generator(config.seed, "train"), config.batch_size, config.T)
    else:  # and its first batch, checked (labels that are no class) on this instance, not the run's
        spec.make_source(config, torch.device("cpu")).train_batch()

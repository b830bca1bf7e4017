"""The typer application and what every command shares: consoles, one-line errors, exit codes.

Exit codes (also in ``atnbench --help`` and the README's "Exit codes"):
0 success; 1 a run failed or diverged, a check failed, or the work could not be done now (the
same run is training in another process), or a bug in atnbench: one line naming the file its
traceback was written to (any exception other than :class:`atnbench.errors.UserError` and the OS's
word on a path the user named); 2 bad usage or input (an unknown option, a value out
of range, an on/off flag given both ways, an unusable config, store, data file, kept model or
output path, no runs matching the filters); 130 interrupted (Ctrl-C); a run or sweep stopped by
a signal exits 128 + its number (SIGTERM: 143); 141 the reader of the output went away
(``atnbench ... | head``), as a command killed by SIGPIPE.

Width, one rule for every command (``out`` and ``err``, both :class:`Output`): in a terminal,
the terminal's width; piped or redirected (a file, ``| less``, ``| grep``), plain text without
colour codes, as wide as the content: every table row on one line, no text wrapped. $COLUMNS,
where set, is the width in both cases. Tables fit whatever width they get without cutting a
value (``atnbench.tables.FitTable``). ``--help`` is typer's: its panels are 80 columns wide piped
(panels as wide as their longest line would be thousands of box characters); $COLUMNS widens them.
"""

from __future__ import annotations

import errno
import functools
import io
import logging
import math
import os
import signal
import sqlite3
import sys
import tempfile
import threading
import traceback
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Iterator, Optional

import typer

from rich.text import Text
from typer.core import TyperGroup

from atnbench.config import ConfigError
from atnbench.errors import UserError
from atnbench.limits import INT_MAX

try:  # typer >= 0.17 carries its own copy of click; older typer uses the click package
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as click_errors

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_CODES_HELP = ("Exit codes: 0 success; 1 a run failed or diverged, a check failed, the same run is "
                   "training elsewhere, or a bug in atnbench (its traceback written to a file); 2 bad usage or input; "
                   "130 interrupted (143 by SIGTERM); 141 the output's reader went away (| head). "
                   "ATNBENCH_DEBUG=1 shows tracebacks.")

from atnbench.tables import err, out, say  # noqa: E402,F401 - the consoles every command prints to

from atnbench.cli import helpfmt  # noqa: E402 - help that reads at 80 columns, before any command is drawn

helpfmt.install()


class _NoteHandler(logging.Handler):
    """atnbench's warnings (a checkpoint set aside, a run started fresh) as one line each."""

    def emit(self, record: logging.LogRecord) -> None:
        say(err, _one_line(record.getMessage()), prefix="note: ", style="yellow")


_library_log = logging.getLogger("atnbench")
if not any(isinstance(handler, _NoteHandler) for handler in _library_log.handlers):
    _library_log.addHandler(_NoteHandler())
    _library_log.propagate = False


def debugging() -> bool:
    """ATNBENCH_DEBUG=1: keep Python tracebacks instead of one-line errors (for bug reports)."""
    return os.environ.get("ATNBENCH_DEBUG", "") not in ("", "0")


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip())


_TYPE_WORDS = {"int": "INTEGER", "float": "FLOAT", "str": "TEXT", "path": "PATH", "file": "PATH",
               "directory": "PATH", "bool": ""}


def _metavar(param, ctx) -> None:
    """Help shows click's words for a value (INTEGER, FLOAT, PATH, TEXT, [a|b]) and nothing after
    a flag, where typer >= 0.2x shows <int>, <path> and <bool> (older typer shows click's own)."""
    kind = getattr(param, "param_type_name", None)
    display_type = getattr(param, "display_type", None)
    if kind not in ("option", "argument") or display_type is None or param.metavar is not None:
        return
    shown = display_type(ctx).strip("<>")
    if shown.startswith("list[") and shown.endswith("]"):  # an argument taking several values: their type
        shown = shown[len("list["):-1]
    word = "" if getattr(param, "is_flag", False) else _TYPE_WORDS.get(
        shown, f"[{shown}]" if "|" in shown else shown.upper())
    if kind == "option":
        param.metavar = word
    else:  # an argument's metavar is its name in help; only its type column changes
        param.display_type_rich = lambda ctx: word
        # and in the usage line click's TASK / [TASK], where typer >= 0.2x writes {task} / [task]
        name = param.name.upper() + ("..." if param.nargs != 1 else "")
        param._usage_display_name = lambda: name if param.required else f"[{name}]"


class Commands(TyperGroup):
    """atnbench's commands: help with real metavariables (INTEGER, PATH, [a|b]) and the registries'
    lists (``atnbench.cli.help_lists``), and click's usage
    errors (a bad option, a missing argument) as one line, exit code 2.

    typer would draw a multi-line panel; every other error of atnbench is one line, and
    scripts that read stderr should not have to tell the two apart.
    """

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for param in params:
            _metavar(param, ctx)
        return params

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is not None:
            from atnbench.cli.help_lists import fill_when_shown

            for param in command.get_params(ctx):
                _metavar(param, ctx)
            fill_when_shown(command)  # lists the registries know, as they are when the help is drawn
        return command

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        from atnbench.cli.arguments import refusal

        reason = refusal(name, command, rest, ctx) if command is not None else None
        if reason:  # what click would silently resolve (an on/off pair both ways): a usage error
            raise click_errors.UsageError(reason)
        return name, command, rest

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if sys.stdout is None:  # the caller closed it (`>&-`): Python leaves None, and a first print failed as a bug
            sys.stdout = ClosedOutput()
        if not standalone_mode or debugging():
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            sys.stdout.flush()  # here, not at exit: a reader gone (`| head`) is a BrokenPipeError we can answer
        except BrokenPipeError:  # the reader went away (`| head`): exit 141, without a word
            out.on_broken_pipe()
        except SystemExit as exiting:
            if isinstance(exiting.__context__, BrokenPipeError):  # rich and click end so when the help's
                out.on_broken_pipe()  # reader went away, with 1, the code of a failure
            raise
        except click_errors.ClickException as error:
            if type(error).__name__ == "NoArgsIsHelpError":  # `atnbench` or a group alone: the help
                error.show()
                sys.exit(EXIT_OK)
            where = getattr(getattr(error, "ctx", None), "command_path", None)
            usage = isinstance(error, click_errors.UsageError)
            _print_error(_one_line(error.format_message()) + (f" (see {where} --help)" if where and usage else ""))
            sys.exit(EXIT_USAGE if usage else error.exit_code)
        except typer.Abort:
            _print_error("aborted")
            sys.exit(EXIT_FAILED)
        except OSError as error:  # the help or version not written (a full disk): as a command's own output
            _print_error(_first_line(error))
            sys.exit(EXIT_FAILED)
        except Exception as error:  # not the user's doing (those are one line, exit 2): a bug
            _print_error(bug_summary(error, write_traceback(error)))
            sys.exit(EXIT_FAILED)
        sys.exit(code if isinstance(code, int) else EXIT_OK)


class ClosedOutput(io.TextIOBase):
    """Standard output the caller closed (`>&-`): a command that prints nothing runs as it would,
    and the first write fails as a write to a closed descriptor does (EBADF), one line, exit 1."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed; send it somewhere, such as >/dev/null")

    def flush(self) -> None:
        pass  # nothing was written; at exit too


def write_traceback(error: BaseException) -> Optional[Path]:
    """The traceback of ``error`` in a new file under the temp folder (None where none can be written)."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        handle, name = tempfile.mkstemp(prefix="atnbench-bug-", suffix=".txt")
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(f"atnbench {version('atnbench')}: {' '.join(sys.argv)}\n\n{text}")
    except OSError:
        return None
    return Path(name)


def bug_summary(error: BaseException, written: Optional[Path]) -> str:
    """One line for a bug: what was raised, and where its traceback is (the report to file)."""
    where = (f"the traceback is in {written}" if written is not None
             else "no traceback file could be written; ATNBENCH_DEBUG=1 prints it")
    return (f"internal error (a bug in atnbench, not in your input): {type(error).__name__}: "
            f"{_first_line(error)}; {where}")


def _version(value: bool) -> None:
    if value:
        out.print(f"atnbench {version('atnbench')}", highlight=False)
        raise typer.Exit()


app = typer.Typer(
    cls=Commands,
    help="Benchmark and ablate normalization in recurrent networks: does Assorted-Time "
         "Normalization (ATN) beat LayerNorm, BatchNorm and Batch-Layer Norm on your task, "
         "for which window k, and at what cost?\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)



@app.callback()
def main(
    show_version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print atnbench's version and exit."),
) -> None:
    # The app's help is Typer(help=...) above (with the exit codes); this callback only adds --version.
    pass


def _user_errors() -> tuple[type[BaseException], ...]:
    # What a user can fix: atnbench's own type, and the OS's word on a path the user named (a file
    # that is not there, a folder where a file should be, no permission). Anything else is a bug.
    return (UserError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError,
            PermissionError)


def finite(value):
    """typer callback for float options: NaN and infinity are refused where they are typed."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number, got {value}")
    return value


def _failures() -> tuple[type[BaseException], ...]:
    from atnbench.run.checkpoint import RunBusy
    from atnbench.store.errors import StoreBusy

    return (RunBusy, StoreBusy, OSError, sqlite3.OperationalError)


@dataclass
class Interrupt:
    """Which signal interrupted the block of ``sigterm_interrupts`` (Ctrl-C's SIGINT unless told)."""

    signum: int = signal.SIGINT


@contextmanager
def sigterm_interrupts() -> Iterator[Interrupt]:
    """SIGTERM interrupts the block as Ctrl-C does (a KeyboardInterrupt where the main thread is),
    so whatever the block records on Ctrl-C it records on ``kill`` too; the exit code is then
    128 + ``interrupt.signum``. Outside the main thread (no handlers there) it changes nothing."""
    interrupt = Interrupt()

    def raise_interrupt(signum, frame):
        interrupt.signum = signum
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield interrupt
        return
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield interrupt
    finally:
        signal.signal(signal.SIGTERM, previous)


def _print_error(message: str) -> None:
    err.print(Text("error: ", style="bold red") + Text(message), soft_wrap=True, highlight=False)


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """Print one readable line to stderr and exit non-zero (2: bad usage or input)."""
    _print_error(_one_line(message))
    raise typer.Exit(code)


def command_group(name: str, help: str, **settings) -> typer.Typer:
    """A sub-command group of ``atnbench`` (``runs``, ``store``, ``data``, ``tasks``): atnbench's
    one-line usage errors, Rich help, and the group's help when it is called bare."""
    group = typer.Typer(cls=Commands, help=help, **{"no_args_is_help": True, "rich_markup_mode": "rich", **settings})
    app.add_typer(group, name=name)
    return group


def user_errors(command):
    """Turn a user's mistake into one line and exit code 2 (ATNBENCH_DEBUG=1 keeps tracebacks).

    Every command's whole numbers are checked first (:func:`check_whole_numbers`): click takes
    any Python int, SQLite and torch only 64-bit ones.

    A run refused because it is training elsewhere, a full disk or another OS failure while
    working is one line and exit code 1: the input was fine, the work could not be done.
    """

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        if not _working_folder_exists():  # torch's import would end the process (MKL: "FATAL ERROR", exit 2)
            fail("the working folder this command started in was deleted; run it from a folder that exists")
        try:
            check_whole_numbers(kwargs)
            return command(*args, **kwargs)
        except _user_errors() as error:
            if debugging():
                raise
            fail(_first_line(error))
        except BrokenPipeError:  # the reader went away: not a failure of the work (click would exit 1)
            out.on_broken_pipe()
        except _failures() as error:
            if debugging():
                raise
            fail(_first_line(error), code=EXIT_FAILED)

    return wrapper


def check_whole_numbers(values: dict) -> None:
    """A command's whole numbers within what SQLite and torch take (64 bits), named by flag: click
    takes --k 1000000000000000000000, and something deep inside would overflow with a traceback."""
    for name, value in values.items():
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > INT_MAX:
            raise ConfigError(f"--{name.replace('_', '-')} {value} is out of range: whole numbers go up to {INT_MAX}")


def _first_line(error: BaseException) -> str:
    message = str(error)
    if isinstance(error, OSError) and error.strerror:  # "[Errno 21] ...: 'x'" -> readable
        message = f"{error.filename}: {error.strerror}" if error.filename else error.strerror
        if isinstance(error, FileNotFoundError) and not error.filename and not _working_folder_exists():
            # what os.getcwd() raises (inside torch's import, say) once the folder it ran from is gone
            message = (f"{message}: the working folder this command started in was deleted; run it from a "
                       f"folder that exists")
    return message.splitlines()[0] if message.strip() else type(error).__name__


def _working_folder_exists() -> bool:
    try:
        os.getcwd()
    except FileNotFoundError:
        return False
    return True

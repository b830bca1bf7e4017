"""The typer application and what every command shares: consoles and one-line errors."""

from __future__ import annotations

import functools
import os
import sys
from importlib.metadata import version

import typer
from typer.core import TyperGroup
from rich.console import Console
from rich.text import Text

from atnbench.config import ConfigError

# click's exceptions, whether typer vendors click (0.2x) or uses the click package (older)
_CLICK = {cls.__name__: cls for cls in typer.BadParameter.__mro__}
UsageError, ClickException = _CLICK["UsageError"], _CLICK["ClickException"]


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
    word = "" if getattr(param, "is_flag", False) else _TYPE_WORDS.get(
        shown, f"[{shown}]" if "|" in shown else shown.upper())
    if kind == "option":
        param.metavar = word
    else:  # an argument's metavar is its name in help; only its type column changes
        param.display_type_rich = lambda ctx: word


class Commands(TyperGroup):
    """atnbench's commands: help with real metavariables, and a mistake on the command line
    (an unknown option, a value of the wrong type) as one line and exit 2, like every other
    user error (click would print a usage panel)."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for param in params:
            _metavar(param, ctx)
        return params

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is not None:
            for param in command.get_params(ctx):
                _metavar(param, ctx)
        return command

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except UsageError as error:
            if type(error).__name__ == "NoArgsIsHelpError":  # `atnbench` alone: the help, as typer does
                print(error.ctx.get_help())
                sys.exit(0)
            hint = f" (see {error.ctx.command_path} --help)" if error.ctx is not None else ""
            err.print(Text("error: ", style="bold red") + Text(error.format_message() + hint), soft_wrap=True)
            sys.exit(error.exit_code)
        except ClickException as error:
            err.print(Text("error: ", style="bold red") + Text(error.format_message()), soft_wrap=True)
            sys.exit(error.exit_code)
        except typer.Abort:
            err.print("Aborted!")
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)


def _version(value: bool) -> None:
    if value:
        out.print(f"atnbench {version('atnbench')}", highlight=False)
        raise typer.Exit()


app = typer.Typer(
    cls=Commands,
    help="Benchmark and ablate normalization in recurrent networks: does Assorted-Time "
         "Normalization (ATN) beat LayerNorm, BatchNorm and Batch-Layer Norm on your task, "
         "for which window k, and at what cost?",
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
    """Benchmark and ablate normalization in recurrent networks: does Assorted-Time Normalization
    (ATN) beat LayerNorm, BatchNorm and Batch-Layer Norm on your task, for which window k, and at
    what cost?"""

out = Console()
err = Console(stderr=True)

# What a user can get wrong; anything else is a bug and keeps its traceback.
USER_ERRORS = (ConfigError, ValueError, FileNotFoundError, NotADirectoryError, PermissionError)


def fail(message: str, code: int = 2) -> None:
    """Print one readable line to stderr and exit non-zero."""
    err.print(Text("error: ", style="bold red") + Text(str(message)), soft_wrap=True)
    raise typer.Exit(code)


def user_errors(command):
    """Turn a user's mistake into one line and exit code 2 (ATNBENCH_DEBUG=1 keeps tracebacks)."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except USER_ERRORS as error:
            if os.environ.get("ATNBENCH_DEBUG"):
                raise
            message = str(error)
            fail(message.splitlines()[0] if message else type(error).__name__)

    return wrapper

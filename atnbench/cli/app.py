"""The typer application and what every command shares: consoles and one-line errors."""

from __future__ import annotations

import functools
import os

import typer
from rich.console import Console
from rich.text import Text

from atnbench.config import ConfigError

app = typer.Typer(
    help="Benchmark and ablate normalization in recurrent networks: does Assorted-Time "
         "Normalization (ATN) beat LayerNorm, BatchNorm and Batch-Layer Norm on your task, "
         "for which window k, and at what cost?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

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

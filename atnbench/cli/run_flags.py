"""Options generated from one declaration: the run flags of ``run`` and ``sweep``
(``atnbench.settings``) and the run filters of the commands that read a store.

``@with_settings(SETTINGS, after="name")`` gives a command function taking ``**settings`` one
typer option per declared setting, placed after its parameter ``after`` (typer reads a
function's ``__signature__``); the function receives them by their parameter names and turns
them into a run's flags with :func:`config_flags`.
"""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Callable, Optional

import typer

from atnbench.cli.app import finite
from atnbench.cli import options
from atnbench.settings import RunSetting

CHECKS: dict[str, Callable] = {"": None, "finite": finite, "seed": options.seed_in_range}


def option(setting: RunSetting, help: str) -> inspect.Parameter:
    """The typer option of one setting: off unless given (None: the preset's value)."""
    info = typer.Option(None, *setting.flags, help=help, callback=CHECKS[setting.check], metavar=setting.metavar)
    return inspect.Parameter(setting.param, inspect.Parameter.KEYWORD_ONLY, default=info,
                             annotation=Optional[setting.type])


def add_options(command, declared: list[inspect.Parameter], after: Optional[str]):
    """``command`` with the ``declared`` options in its signature, after its parameter ``after``
    (first where None); they reach it through its ``**`` parameter."""
    hints = typing.get_type_hints(command, include_extras=True)  # the command's own names: options.Config
    own = [parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY,
                             annotation=hints.get(parameter.name, parameter.annotation))
           for parameter in inspect.signature(command).parameters.values()
           if parameter.kind is not inspect.Parameter.VAR_KEYWORD]
    at = 0 if after is None else next(i for i, parameter in enumerate(own) if parameter.name == after) + 1

    @functools.wraps(command)
    def with_options(**values):
        return command(**values)

    with_options.__signature__ = inspect.Signature(own[:at] + declared + own[at:])
    return with_options


def with_settings(settings: tuple[RunSetting, ...], after: str, sweep: bool = False):
    """Add ``settings`` as options to a command (``sweep``: with their sweep help) after ``after``."""
    return lambda command: add_options(
        command, [option(setting, setting.sweep_help if sweep else setting.help) for setting in settings], after)


# the filters of the commands that read stored runs, one declaration each (atnbench.cli.options)
FILTERS = {"task": options.TaskFilter, "T": options.TFilter, "norm": options.NormFilter,
           "status": options.StatusFilter, "sweep": options.SweepFilter, "since": options.SinceFilter}


def with_filters(*names: str):
    """Add the run filters ``names`` (in that order) as a command's first options."""
    return lambda command: add_options(
        command, [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=FILTERS[name])
                  for name in names], None)


def config_flags(settings: tuple[RunSetting, ...], values: dict, task_options: Callable[..., Optional[dict]]) -> dict:
    """The run flags (RunConfig keys) of a command's setting values: --iters as ``steps`` (and
    ``epochs`` dropped where --iters is given), the data flags as one ``options`` mapping."""
    flags = {setting.config_key: values[setting.param] for setting in settings
             if setting.in_flags and setting.config_key != "options"}
    if flags.get("steps") is not None:
        if flags.get("epochs") is not None:  # overridden, but still a value the user typed: never a bad one
            from atnbench.config import check_values

            check_values({"epochs": flags["epochs"]}, "--epochs")
        flags["epochs"] = None
    flags["options"] = task_options(values.get("data_dir"), values.get("data_files"), values.get("permute"))
    return flags


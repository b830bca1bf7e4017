"""Lists in option help that a registry knows, filled in each time a command's help is shown.

An option's help names a list by a placeholder (``"Normalization: {norms}."``); ``fill`` puts
the registry's entries there as they are now, so a normalization registered at run time, or the
bench models it brings, is listed without editing any help text. Typer fixes an option's help
when the command is declared, hence the placeholder rather than a computed string.
"""

from __future__ import annotations

import re
from typing import Callable


def _norms() -> str:
    """Every registered normalization, each with its aliases: "none|lstm, ln, atn, ..."."""
    from atnbench.registry import NORM_ALIASES, SCHEMES

    aliases: dict[str, list[str]] = {}
    for alias, norm in NORM_ALIASES.items():
        aliases.setdefault(norm, []).append(alias)
    return ", ".join("|".join([name, *aliases.get(name, [])]) for name in SCHEMES)


def _bench_models() -> str:
    """Every bench model, a model's plain-loop twin ("NAME-loop") folded into one remark."""
    from atnbench.bench.workloads import models

    names = list(models())
    looped = [name for name in names if name.endswith("-loop") and name.removesuffix("-loop") in names]
    shown = [name for name in names if name not in looped]
    return ", ".join(shown) + ("; each normalized model also as NAME-loop (the plain Python loop)" if looped else "")


HELP_LISTS: dict[str, Callable[[], str]] = {"norms": _norms, "bench_models": _bench_models}
PLACEHOLDER = re.compile(r"\{(" + "|".join(HELP_LISTS) + r")\}")


def fill(text: str) -> str:
    """``text`` with each placeholder replaced by its list as the registries hold it now."""
    return PLACEHOLDER.sub(lambda match: HELP_LISTS[match[1]](), text)


def fill_when_shown(command) -> None:
    """Fill ``command``'s option help when its help is drawn, not when it is merely looked up: bench's
    models are torch code, which a run that is refused, or a shell completion, need not wait for."""
    if "format_help" in vars(command):  # already set up (a command is looked up again and again)
        return
    draw = command.format_help

    def format_help(ctx, formatter):
        for param in command.get_params(ctx):
            fill_param_help(param)
        return draw(ctx, formatter)

    command.format_help = format_help


def fill_param_help(param) -> None:
    """Fill a click parameter's help from the template it was declared with (kept on the
    parameter, so the next help shows the registries as they are then)."""
    template = getattr(param, "help_template", None) or getattr(param, "help", None)
    if template and PLACEHOLDER.search(template):
        param.help_template = template
        param.help = fill(template)

"""What click's parser lets through, refused before a command starts.

click keeps the last of an on/off pair (``--affine --no-affine`` is ``--no-affine``), takes
whatever follows an option as its value (``--variant --store x.db`` sets the variant to
``--store`` and leaves ``x.db`` as a stray argument), and runs a command with flags it then
ignores (``stats --from-run X --k 5``: the run's own k). Each is a mistake a user would rather
hear about than have silently resolved: one line naming the flags.
"""

from __future__ import annotations

from typing import Optional


def _options(command) -> list:
    return [param for param in getattr(command, "params", []) if getattr(param, "param_type_name", "") == "option"]


def both_ways(command, args: list[str]) -> Optional[str]:
    """Why ``args`` are refused when they give an on/off flag both ways (--affine --no-affine)."""
    given = set(args[:args.index("--")] if "--" in args else args)
    for param in _options(command):
        on, off = [opt for opt in param.opts if opt in given], [opt for opt in param.secondary_opts if opt in given]
        if on and off:
            return f"{on[0]} and {off[0]} both given; give one"
    return None


def option_as_value(command, args: list[str]) -> Optional[str]:
    """Why ``args`` are refused when an option's value is another option (--variant --store x)."""
    params = _options(command)
    names = {opt for param in params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}
    takes_value = {opt for param in params if not getattr(param, "is_flag", False) and not getattr(param, "count", False)
                   for opt in param.opts}
    for option, following in zip(args, args[1:]):
        if option == "--":
            break
        if option in takes_value and following in names:
            return f"{option} needs a value, got the option {following}"
    return None


# flags that another flag makes idle, by command: given together, one of them would be ignored
IDLE_BESIDE: dict[str, dict[str, tuple[str, ...]]] = {
    "stats": {"--from-run": ("--k", "--T", "--iters", "--seed", "--hidden", "--batch-size")},  # the run's own
    "reproduce": {"--dry-run": ("--report-only",)},  # the plan, or the report: one at a time
}


def idle(words: list[str], args: list[str]) -> Optional[str]:
    """Why ``args`` are refused when they give a flag that another one makes idle."""
    given = {arg.split("=", 1)[0] for arg in (args[:args.index("--")] if "--" in args else args)}
    for flag, idled in IDLE_BESIDE.get(" ".join(words), {}).items():
        ignored = [name for name in idled if name in given]
        if flag in given and ignored:
            return f"{', '.join(ignored)} would be ignored with {flag}; give one or the other"
    return None


def leaf_command(command, args: list[str], ctx) -> tuple:
    """The command ``args`` name under a group (``runs show``), the arguments left for it and
    the words that named it."""
    words = []
    while hasattr(command, "get_command") and args:
        sub = command.get_command(ctx, args[0])
        if sub is None:
            break
        command, args, words = sub, args[1:], [*words, args[0]]
    return command, args, words


def refusal(name: str, command, args: list[str], ctx) -> Optional[str]:
    """The first reason to refuse ``args`` for the command ``name`` (a group: the sub-command
    they name), with where to read its help."""
    leaf, rest, words = leaf_command(command, list(args), ctx)
    reason = both_ways(leaf, rest) or option_as_value(leaf, rest) or idle([name, *words], rest)
    return reason and f"{reason} (see {' '.join([ctx.command_path, name, *words])} --help)"

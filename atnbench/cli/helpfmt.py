"""``--help`` that reads at 80 columns (#40): nothing cut, no description broken mid-sentence.

typer draws options as one table row each, its name column as wide as the widest flag pair
(``--bias-inside --bias-outside``): at 80 columns that left ~17 columns for the descriptions, cut
names such as ``--checkpoint-every`` to ``--checkpoint-eve…`` and ran ``run --help`` to 198 lines.
Below :data:`STACKED_BELOW` columns each option is drawn on its own line instead (its flags and
value type, whole) with its description underneath, across the full width. A command's line in a
group's list is its help's first paragraph joined into one, and so is each paragraph of a
command's description (rich markup mode keeps a docstring's line breaks, which broke those lines
mid-sentence: "picks the sweep's" alone on a line); a line that starts a list item ("- ") or a
paragraph marked ``\b`` (click's "keep my line breaks") keeps its break.

typer has no setting for these, so its drawing functions are replaced here, once, keeping
typer's own option table for wide terminals.
"""

from __future__ import annotations

import inspect

from rich.console import Group
from rich.padding import Padding
from rich.panel import Panel
from rich.text import Text

STACKED_BELOW = 100  # columns: from here up, typer's table leaves room enough for descriptions
INDENT = 4


def _stacked_panel(rich_utils, *, name, params, ctx, markup_mode, console) -> None:
    rows = []
    for param in params:
        names = [opt for opt in param.opts]
        if isinstance(param, rich_utils.TyperArgument):
            names = [param.display_name_raw + ("..." if param.metavar is None and param.nargs != 1 else "")]
        flags = ", ".join(names + ([" / ".join(param.secondary_opts)] if param.secondary_opts else []))
        head = Text("* " if param.required else "  ", style=rich_utils.STYLE_REQUIRED_SHORT)
        head.append(flags, style="bold cyan")
        shown = param.display_type_rich(ctx=ctx)
        if shown:
            head.append(" " + shown, style=rich_utils.STYLE_TYPES)
        limits = param._get_number_range_help_str()
        if limits:
            head.append(" " + rich_utils.RANGE_STRING.format(limits), style=rich_utils.STYLE_TYPES)
        head.overflow = "fold"
        rows += [head, Padding(rich_utils._get_parameter_help(param=param, ctx=ctx, markup_mode=markup_mode),
                               (0, 0, 0, INDENT))]
    if rows:
        console.print(Panel(Group(*rows), border_style=rich_utils.STYLE_OPTIONS_PANEL_BORDER, title=name,
                            title_align=rich_utils.ALIGN_OPTIONS_PANEL))


def joined_paragraphs(paragraphs: list[str], markup_mode=None) -> str:
    """Paragraphs with each one's line breaks joined (list items and ``\b`` paragraphs kept)."""
    joined = []
    for paragraph in paragraphs:
        if paragraph.lstrip().startswith("\b"):
            joined.append(paragraph)
            continue
        lines: list[str] = []
        for line in paragraph.splitlines():
            if lines and not line.lstrip().startswith(("- ", "* ")):
                lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
            else:
                lines.append(line.rstrip())
        joined.append("\n".join(lines))
    return "\n\n".join(joined)


def install() -> None:
    """Replace typer's option panel (narrow terminals), command summary and paragraph joining."""
    try:
        from typer import rich_utils
    except ImportError:  # pragma: no cover - typer without rich: its plain help wraps anyway
        return
    if getattr(rich_utils, "_atnbench_help", False):
        return
    table_panel, summary = rich_utils._print_options_panel, rich_utils._make_command_help

    def options_panel(*, name, params, ctx, markup_mode, console):
        if console.width >= STACKED_BELOW:
            return table_panel(name=name, params=params, ctx=ctx, markup_mode=markup_mode, console=console)
        return _stacked_panel(rich_utils, name=name, params=params, ctx=ctx, markup_mode=markup_mode,
                              console=console)

    def command_help(*, help_text, markup_mode):
        first, *rest = inspect.cleandoc(help_text).split("\n\n")
        return summary(help_text=" ".join(first.split()), markup_mode=markup_mode)

    rich_utils._print_options_panel, rich_utils._make_command_help = options_panel, command_help
    if hasattr(rich_utils, "_fix_linebreaks"):  # typer 0.29 has it; versions without it join the breaks themselves
        rich_utils._fix_linebreaks = joined_paragraphs
    rich_utils._atnbench_help = True

"""Tables that fit the width they are printed at and never cut a value.

rich fits a table too wide for its console by squeezing every column that may wrap, down to
less than its longest word, and then cutting cells with '…': T=100 and T=200 both read '1…',
'ptb-char' reads 'ptb-cha r'. A :class:`FitTable` is a rich ``Table`` that, at the width it is
printed at, takes the first of these forms that fits:

1. the table as built, every cell on one line;
2. the same table with one space between columns and cells wrapped between words: each column
   keeps at least its longest word (a column marked ``no_wrap`` keeps its cells whole), the
   widest columns give way first;
3. the same with the columns whose value is one and the same in every row taken out of the
   table and named once under it ("every row: task copying · steps 4000"), a legend;
4. stacked: a block per row, its key columns (the first ``key_columns``) as a heading and
   every other column under it as "header  value", one line each.

Title and caption are lines of their own, wrapped between words at the full width. So no
number, id or word is broken across lines or shortened; the only thing ever folded is a single
word wider than the whole line (a very long path).
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from typing import Optional

from rich import box
from rich.console import Console, ConsoleDimensions, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

# atnbench's tables look alike: a rule under the header, no frame, title and caption on the left
# ("default": not padded with spaces to the table's width)
LOOK = dict(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="default", title_style="bold",
            caption_justify="default")
NATURAL = 100_000  # a width no table of atnbench reaches: columns measured at it are at their widest
LEGEND_SEPARATOR = " · "


@dataclass(frozen=True)
class _Row:
    cells: tuple
    style: object
    end_section: bool


def text_of(cell: RenderableType, console: Console) -> Text:
    """A cell as rich draws it in a table (a string is console markup)."""
    if cell is None:
        return Text("")
    if isinstance(cell, str):
        return console.render_str(cell, highlight=False)
    if isinstance(cell, Text):
        return cell
    return Text(str(cell))


def _label(header: RenderableType, console: Console) -> Text:
    """A column's header on one line (stacked headers such as 'mean\\nstd_t' become 'mean std_t')."""
    text = text_of(header, console).copy()
    return Text(" ").join(Text(part.strip()) for part in text.plain.split("\n") if part.strip()) \
        if "\n" in text.plain else text


class FitTable(Table):
    """A rich Table drawn in the first form that fits its width (see the module docstring).

    Build it as a rich Table (``add_column``, ``add_row``); ``key_columns`` leading columns name
    a row in the stacked form; ``lift=False`` keeps constant columns in the table. Keyword
    options default to atnbench's look (``LOOK``)."""

    def __init__(self, *headers, key_columns: int = 1, lift: bool = True, **options):
        self._options = {**LOOK, **options}
        super().__init__(*headers, **self._options)
        self.key_columns = key_columns
        self.lift = lift
        self._columns_given: list[tuple] = []
        self._rows_given: list[_Row] = []

    def add_column(self, header: RenderableType = "", footer: RenderableType = "", **options) -> None:
        super().add_column(header, footer, **options)
        self._columns_given.append((header, footer, options))

    def add_row(self, *cells: Optional[RenderableType], style=None, end_section: bool = False) -> None:
        super().add_row(*cells, style=style, end_section=end_section)
        padded = tuple(cells) + ("",) * (len(self.columns) - len(cells))
        self._rows_given.append(_Row(padded, style, end_section))

    # -- the forms ---------------------------------------------------------------------------------

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for form, may_wrap in self._forms(console):
            widths = form._widths(console, options, may_wrap)
            if widths is not None:
                yield from form._drawn(widths, console, options)
                return
        yield self._stacked(console)

    def _forms(self, console: Console):
        """(table, whether its cells may wrap) to try in order: as built, on one line each; then
        with one space between columns (the box's divider) where it has one, cells wrapping;
        then that without the constant columns, which the caption names once."""
        yield self, False
        tight = {"padding": (0, 0)} if self.box is not None else {}
        everything = range(len(self.columns))
        yield (self._variant(everything, self.caption, **tight) if tight else self), True
        constant = self._constant_columns(console) if self.lift else []
        if constant:
            legend = self._legend(constant, console)
            caption = Text.assemble(text_of(self.caption, console), "\n", legend) if self.caption else legend
            yield self._variant([i for i in everything if i not in constant], caption, **tight), True

    def _variant(self, kept, caption, **options) -> "FitTable":
        """This table with only the columns ``kept``, another caption and other options."""
        variant = FitTable(key_columns=self.key_columns, lift=False,
                           **{**self._options, "title": self.title, "caption": caption, **options})
        for i in kept:
            header, footer, column_options = self._columns_given[i]
            variant.add_column(header, footer, **column_options)
        for row in self._rows_given:
            variant.add_row(*(row.cells[i] for i in kept), style=row.style, end_section=row.end_section)
        return variant

    def _widths(self, console: Console, options: ConsoleOptions, may_wrap: bool) -> Optional[list[int]]:
        """Each column's width (padding included) so that the table fits with every cell on one
        line, or (``may_wrap``) with every column keeping its longest word (its longest cell
        where no_wrap); None when it cannot fit so."""
        room = options.max_width - self._extra_width
        natural = options.update_width(NATURAL)
        ranges = [self._measure_column(console, natural, column) for column in self.columns]
        widths = [r.maximum for r in ranges]
        least = [r.maximum if column.no_wrap or not may_wrap else r.minimum
                 for r, column in zip(ranges, self.columns)]
        if sum(least) > room:
            return None
        while sum(widths) > room:  # the widest column that can still wrap gives way first
            widest = max((i for i in range(len(widths)) if widths[i] > least[i]), key=lambda i: widths[i])
            widths[widest] -= 1
        return widths

    def _drawn(self, widths: list[int], console: Console, options: ConsoleOptions) -> RenderResult:
        """The table at these column widths; its title and caption on lines of their own, wrapped
        at the full width rather than the table's."""
        fitted = Table(**{**self._options, "title": None, "caption": None})
        for i, ((header, footer, column_options), width) in enumerate(zip(self._columns_given, widths)):
            fitted.add_column(header, footer, **{**column_options, "width": width - self._get_padding_width(i),
                                                 "overflow": "fold", "max_width": None, "min_width": None})
        for row in self._rows_given:
            fitted.add_row(*row.cells, style=row.style, end_section=row.end_section)
        if self.title:
            yield self._title_text(console)
        yield fitted
        if self.caption:
            yield self._caption_text(console)

    def _title_text(self, console: Console) -> Text:
        title = text_of(self.title, console).copy()
        title.stylize(self.title_style or "table.title")
        return title

    def _caption_text(self, console: Console) -> Text:
        caption = text_of(self.caption, console).copy()
        caption.stylize(self.caption_style or "table.caption")
        return caption

    def _constant_columns(self, console: Console) -> list[int]:
        """The columns (past the key columns) with one and the same non-empty value in every row."""
        if len(self._rows_given) < 2:
            return []
        constant = []
        for i in range(self.key_columns, len(self.columns)):
            values = {text_of(row.cells[i], console).plain for row in self._rows_given}
            if len(values) == 1 and values != {""}:
                constant.append(i)
        return constant

    def _legend(self, columns: list[int], console: Console) -> Text:
        legend = Text("every row: ", style="dim")
        for n, i in enumerate(columns):
            if n:
                legend.append(LEGEND_SEPARATOR, style="dim")
            legend.append_text(_label(self.columns[i].header, console))
            legend.append(" ")
            legend.append_text(text_of(self._rows_given[0].cells[i], console))
        return legend

    def _stacked(self, console: Console) -> Group:
        """A block per row: its key columns as a heading, every other column as 'header  value'."""
        constant = self._constant_columns(console) if self.lift else []
        parts: list[RenderableType] = []
        if self.title:
            parts.append(self._title_text(console))
        others = [i for i in range(self.key_columns, len(self.columns)) if i not in constant]
        labels = {i: _label(self.columns[i].header, console) for i in others}
        for row in self._rows_given:
            heading = Text("  ").join(text for text in (text_of(row.cells[i], console)
                                                          for i in range(self.key_columns)) if text.plain)
            heading.stylize("bold")
            if row.style:
                heading.stylize(row.style)
            pairs = Table.grid(padding=(0, 2))
            pairs.add_column(no_wrap=True, style="dim")
            pairs.add_column(overflow="fold")
            for i in others:
                value = text_of(row.cells[i], console)
                if value.plain.strip():
                    pairs.add_row(labels[i], value, style=row.style)
            parts += [heading, Padding(pairs, (0, 0, 0, 2), expand=False)]
        if self.caption:
            parts.append(self._caption_text(console))
        if constant:
            parts.append(self._legend(constant, console))
        return Group(*parts)


# --- the consoles every command prints to (the width rule of atnbench.cli.app) -----------------

UNBOUNDED = 100_000  # "as wide as the content": rich needs a number, and no line comes near this one


class Output(Console):
    """A console that follows the width rule of the module docstring.

    rich reads $COLUMNS once, when a console is made, and assumes 80 columns off a terminal;
    this one reads $COLUMNS at each print and gives piped output all the width it needs."""

    def __init__(self, **options):
        super().__init__(**options)
        if "width" not in options:
            self._width = None  # rich took $COLUMNS here, once; ``size`` reads it at each print

    @property
    def size(self) -> ConsoleDimensions:
        columns = os.environ.get("COLUMNS", "")
        if self._width is None and not columns.isdigit() and not self.is_terminal:
            return ConsoleDimensions(UNBOUNDED, Console.size.fget(self).height)
        return Console.size.fget(self)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)

    def on_broken_pipe(self) -> None:
        """The reader closed the pipe (``atnbench ... | head``): rich exits 1, the code atnbench
        gives a failed run; end as a command killed by SIGPIPE does (128 + 13), without a word."""
        import signal
        import sys

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the flush at exit would fail again
        raise SystemExit(128 + signal.SIGPIPE)


out = Output()
err = Output(stderr=True)


def say(console: Output, message: str, prefix: str = "", style: str = "") -> None:
    """A message wrapped between words at the console's width (a terminal's, or $COLUMNS), its
    later lines indented; a word longer than a line (a path) stays whole. Piped: one line."""
    width = console.size.width
    lines = [prefix + message] if width >= UNBOUNDED else textwrap.wrap(
        prefix + message, width=width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
    text = Text("\n".join(lines) or prefix)
    text.stylize(style, 0, len(prefix))
    console.print(text, soft_wrap=True, highlight=False)

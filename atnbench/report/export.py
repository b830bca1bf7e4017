"""Report outputs: the terminal table as text, Markdown, LaTeX (for pasting into a paper),
CSV and JSON (numbers in natural units at full precision, for further analysis)."""

from __future__ import annotations

import csv
import io
import json
from typing import Optional

from rich.console import Console

from atnbench.errors import UserError
from atnbench.report.render import (
    AT_BASELINE_MARK,
    NOT_COMPARABLE_MARK,
    ORDER_MARK,
    Cell,
    Row,
    TableView,
    column_scale,
    header_caption,
    mean_pm_std,
    ratio_text,
    rich_view,
    seeds_text,
    table_width,
)

from atnbench.run.outputs import SUFFIX_FORMATS

FORMATS = ("table", "markdown", "csv", "json", "latex")
SUFFIXES = {**SUFFIX_FORMATS, ".txt": "table"}  # a .txt file takes any format; without --format, the table


def format_for(fmt: Optional[str], output: Optional[str]) -> str:
    """The format asked for, else the one the output file's suffix names, else ``table``."""
    if fmt is not None:  # any case, as every command's --format
        if fmt.lower() not in FORMATS:
            raise UserError(f"unknown --format {fmt!r}; choose one of: {', '.join(FORMATS)}")
        return fmt.lower()
    if output is not None:
        from pathlib import Path

        return SUFFIXES.get(Path(output).suffix.lower(), "table")
    return "table"


def export(views: list[TableView], fmt: str, meta: Optional[dict] = None, width: int = 100) -> str:
    if fmt == "table":
        return to_text(views, width)
    if fmt == "markdown":
        return to_markdown(views)
    if fmt == "csv":
        return to_csv(views)
    if fmt == "json":
        return to_json(views, meta)
    if fmt == "latex":
        return to_latex(views)
    raise UserError(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")


def _with_paper(view: TableView, column) -> bool:
    return view.paper_table is not None and column.paper is not None


# -- plain text ------------------------------------------------------------------------------------


def to_text(views: list[TableView], width: int = 100) -> str:
    """The terminal tables as plain text, each as wide as it needs to be (at least ``width``)."""
    console = Console(file=io.StringIO(), record=True, width=width, color_system=None, force_terminal=False)
    console.width = max([width] + [table_width(console, view) for view in views])
    for view in views:
        console.print(rich_view(view, plain=True))
    return console.export_text()


# -- Markdown --------------------------------------------------------------------------------------


def _md_cell(view: TableView, cell: Cell, text: str) -> str:
    return f"**{text}**" if cell.best and text != "-" else text


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _header(view: TableView, model: str, seeds: str) -> list[str]:
    """Column titles of a table: the row label, each column (with the paper's beside it), seeds."""
    header = ["k" if view.kind == "k-ablation" else model]
    for column in view.columns:
        header.append(column.label)
        if _with_paper(view, column):
            header += [f"paper {column.paper}", "ours/paper"]
    return header + [seeds]


def to_markdown(views: list[TableView]) -> str:
    blocks = []
    for view in views:
        header = _header(view, "model", "seeds")
        lines = [f"### {view.title}", "", f"_{header_caption(view)}" +
                 (f"; paper: {view.paper_table}_" if view.paper_table else "_"), "",
                 _md_row(header), "|" + "|".join(["---"] + [":---:"] * (len(header) - 2) + ["---:"]) + "|"]
        for row in view.rows:
            cells = [f"_{row.label}_" if row.kind == "baseline" else _marked(row)]
            for column in view.columns:
                cell = row.cells[column.key]
                text = _md_cell(view, cell, mean_pm_std(cell.mean, cell.std, column_scale(view, column), n=cell.n,
                                                        of=len(row.seeds)))
                if cell.order_differs and not _with_paper(view, column):
                    text += f" {ORDER_MARK}"
                cells.append(text)
                if _with_paper(view, column):
                    cells.append(mean_pm_std(cell.paper_mean, cell.paper_std, column_scale(view, column))
                                 if cell.paper_mean is not None else "")
                    cells.append(_ratio_with_marks(view, cell))
            cells.append(seeds_text(row))
            lines.append(_md_row(cells))
        notes = _notes(view)
        if notes:
            lines.append("")
            lines += [f"- {note}" for note in notes]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _ratio_with_marks(view: TableView, cell: Cell) -> str:
    if cell.paper_mean is None:
        return ""
    text = ratio_text(cell)
    if not view.comparable:
        text += NOT_COMPARABLE_MARK
    if cell.order_differs:
        text += f" {ORDER_MARK}"
    return text


def _notes(view: TableView) -> list[str]:
    notes = []
    if view.reduced and not any(note.startswith(NOT_COMPARABLE_MARK) for note in view.notes):
        notes.append(f"{view.protocol}: {view.budget:g} of {view.protocol_source}; "
                     f"not comparable with full-protocol numbers")
    return notes + list(view.notes)


# -- LaTeX -----------------------------------------------------------------------------------------

_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}"}
_LATEX_SYMBOLS = {"±": r"$\pm$", "×": r"$\times$", ORDER_MARK: r"$\updownarrow$", NOT_COMPARABLE_MARK: r"$^\dagger$",
                  "≠": r"$\neq$", "≈": r"$\approx$", "·": r"$\cdot$", "—": "---", "–": "--", "<": r"$<$", ">": r"$>$"}


def latex_escape(text: str) -> str:
    out = []
    for char in text:
        out.append(_LATEX_ESCAPES.get(char) or _LATEX_SYMBOLS.get(char) or char)
    return "".join(out)


def _latex_number(scale: float, best: bool, mean, std, n: Optional[int] = None) -> str:
    if mean is None:
        return "--"
    text = mean_pm_std(mean, std, scale, pm=r"\pm", n=n)
    return f"$\\mathbf{{{text}}}$" if best else f"${text}$"


def to_latex(views: list[TableView]) -> str:
    blocks = ["% atnbench report -- needs \\usepackage{booktabs}"]
    for view in views:
        header = _header(view, "Model", "Seeds")
        spec = "l" + "c" * (len(header) - 2) + "r"
        scale = f" ($\\times 10^{{{view.exponent}}}$)" if view.exponent else ""
        caption = latex_escape(f"{view.title}. {view.measure}") + scale + latex_escape(
            ", mean ± std over seeds" + (f"; paper: {view.paper_table}" if view.paper_table else "") + ".")
        lines = [r"\begin{table}[t]", r"\centering", f"\\caption{{{caption}}}", f"\\begin{{tabular}}{{{spec}}}",
                 r"\toprule", " & ".join(latex_escape(h) for h in header) + r" \\", r"\midrule"]
        for row in view.rows:
            if row.kind == "baseline":
                lines.append(r"\midrule")
            cells = [latex_escape(_paper_name(row))]
            for column in view.columns:
                cell = row.cells[column.key]
                text = _latex_number(column_scale(view, column), cell.best, cell.mean, cell.std, cell.n)
                if cell.order_differs and not _with_paper(view, column):
                    text += r" $\updownarrow$"
                cells.append(text)
                if _with_paper(view, column):
                    cells.append(_latex_number(column_scale(view, column), False, cell.paper_mean, cell.paper_std)
                                 if cell.paper_mean is not None else "")
                    cells.append(latex_escape(_ratio_with_marks(view, cell)))
            cells.append(latex_escape(seeds_text(row)))
            lines.append(" & ".join(cells) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}"]
        for note in _notes(view):
            lines.append(f"\\par\\smallskip{{\\footnotesize {latex_escape(note)}}}")
        lines.append(r"\end{table}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def _marked(row: Row, name: Optional[str] = None) -> str:
    """A model row's name with the mark of a row at the baseline, which the table's note explains."""
    return (name or row.label) + (f" {AT_BASELINE_MARK}" if row.at_baseline else "")


def _paper_name(row: Row) -> str:
    names = {"lstm": "LSTM", "ln": "LN", "atn": "ATN"}
    if row.kind == "model" and row.label in names:
        return _marked(row, names[row.label])
    return _marked(row) if row.kind == "model" else row.label


# -- CSV and JSON ----------------------------------------------------------------------------------


def view_record(view: TableView) -> dict:
    """One table as plain data: numbers in natural units (not scaled), full precision."""
    return {
        "kind": view.kind,
        "title": view.title,
        "task": view.task,
        "T": view.T,
        "budget": view.budget,
        "reduced_budget": view.reduced,
        "protocol": view.protocol,
        "variant": view.variant,
        "measure": view.measure,
        "display_scale": view.scale,
        "paper": view.paper_table,
        "comparable_with_paper": view.comparable if view.paper_table else None,
        "columns": [{"key": c.key, "label": c.label, "paper_column": c.paper,
                     "display_scale": c.scale if c.scale is not None else view.scale,
                     "higher_is_better": c.higher_better} for c in view.columns],
        "rows": [
            {
                "label": row.label,
                "kind": row.kind,
                "model": row.model,
                "k": row.k,
                "seeds": list(row.seeds),
                "n_seeds": len(row.seeds),
                "diverged": row.diverged,
                "paper_model": row.paper_model,
                "at_baseline": row.at_baseline,
                "cells": {
                    key: {"mean": cell.mean, "std": cell.std, "n": cell.n, "best": cell.best,
                          "paper_mean": cell.paper_mean, "paper_std": cell.paper_std, "ratio": cell.ratio,
                          "order_differs": cell.order_differs}
                    for key, cell in row.cells.items()
                },
                "cost": {name: {"mean": stat.mean, "std": stat.std, "n": stat.n} for name, stat in row.cost.items()},
            }
            for row in view.rows
        ],
        "notes": _notes(view),
    }


def to_json(views: list[TableView], meta: Optional[dict] = None) -> str:
    data = {"atnbench_report": 1, **(meta or {}), "tables": [view_record(view) for view in views]}
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


CSV_FIELDS = ("table", "kind", "task", "T", "budget", "reduced_budget", "variant", "measure", "paper",
              "comparable_with_paper", "row", "row_kind", "model", "k", "n_seeds", "seeds", "diverged")


def to_csv(views: list[TableView]) -> str:
    """One line per table row; per column ``<key>_mean``, ``<key>_std``, ``<key>_n`` (natural
    units, full precision) and, with the paper, ``<key>_paper_mean``, ``_paper_std``, ``_ratio``,
    ``_order_differs``; then the cost (wall time, steps/s)."""
    fields = list(CSV_FIELDS)
    lines = []
    for index, view in enumerate(views, start=1):
        for row in view.rows:
            line = {
                "table": index, "kind": view.kind, "task": view.task, "T": view.T, "budget": view.budget,
                "reduced_budget": view.reduced, "variant": view.variant or "", "measure": view.measure,
                "paper": view.paper_table or "",
                "comparable_with_paper": "" if view.paper_table is None else view.comparable,
                "row": row.label, "row_kind": row.kind, "model": row.model or "",
                "k": "" if row.k is None else row.k, "n_seeds": len(row.seeds),
                "seeds": ";".join(map(str, row.seeds)), "diverged": row.diverged,
            }
            for column in view.columns:
                cell = row.cells[column.key]
                values = {"mean": cell.mean, "std": cell.std, "n": cell.n}
                if _with_paper(view, column):
                    values.update(paper_mean=cell.paper_mean, paper_std=cell.paper_std, ratio=cell.ratio,
                                  order_differs=cell.order_differs)
                for name, value in values.items():
                    key = f"{column.key}_{name}"
                    if key not in fields:
                        fields.append(key)
                    line[key] = "" if value is None else value
            for name, stat in row.cost.items():
                for part in ("mean", "std"):
                    key = f"{name}_{part}"
                    if key not in fields:
                        fields.append(key)
                    value = getattr(stat, part)
                    line[key] = "" if value is None else value
            lines.append(line)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(lines)
    return buffer.getvalue()

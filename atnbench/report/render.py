"""Report tables: groups become ``TableView``s in the form of the paper's tables, and rich
tables for the terminal.

A ``TableView`` is format-neutral (numbers in natural units plus flags: best, paper value,
ratio, ordering differs, comparable) so that the terminal, Markdown, LaTeX, CSV and JSON
outputs (``export.py``) all say the same thing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Optional

from rich import box
from rich.console import Group as RichGroup
from rich.table import Table
from rich.text import Text

from atnbench.report.aggregate import (
    STAT_LABELS,
    COST_STATS,
    Group,
    KAblation,
    ModelRow,
    Stat,
    budget_label,
    definitions,
    higher_is_better,
    mean_std,
)
from atnbench.report.paper import (
    UNCHECKED,
    PaperTable,
    convert,
    k_order_statement,
    order_differences,
    own_task,
    paper,
    paper_row_for,
    protocol_label,
    row_differences,
)
from atnbench.report.verdicts import DEFAULT_MARGIN, at_baseline, baseline_note, baseline_values, baseline_words

ORDER_MARK = "⇅"
AT_BASELINE_MARK = "≈"  # the row learned nothing (verdicts.at_baseline)
NOT_COMPARABLE_MARK = "†"
DEFAULT_COLUMNS = ("min_train_loss", "min_val_loss")
FINAL_COLUMNS = ("final_train_loss", "final_val_loss")
COLUMN_LABELS = STAT_LABELS
ACCURACY_COLUMNS = {"max_val_accuracy": "max validation accuracy"}  # test accuracy: at best val. only
# regression tasks of the user's: MAE in the targets' own units (never standardized), shown in the
# view's one scale with the MSE columns, so every number of a regression table reads alike
MAE_COLUMNS = {"min_val_mae": "min validation MAE"}
PAPER_NAMES = {"lstm": "LSTM", "ln": "LN", "atn": "ATN"}


@dataclass
class Column:
    key: str  # our statistic, e.g. min_train_loss
    label: str  # "min train"
    paper: Optional[str] = None  # the paper's column name ("Train") when compared
    scale: Optional[float] = None  # its own display scale (accuracy: 1), else the view's
    higher_better: bool = False  # accuracy: the best is the highest


@dataclass
class Cell:
    mean: Optional[float]
    std: Optional[float]
    n: int
    best: bool = False
    paper_mean: Optional[float] = None
    paper_std: Optional[float] = None
    ratio: Optional[float] = None  # ours / paper, of the means
    order_differs: bool = False


@dataclass
class Row:
    label: str
    kind: str  # "model", "reference" (k-ablation: the models without a window) or "baseline"
    model: Optional[str] = None
    k: Optional[int] = None
    seeds: tuple = ()
    diverged: int = 0
    cells: dict[str, Cell] = field(default_factory=dict)
    cost: dict[str, Stat] = field(default_factory=dict)
    paper_model: Optional[str] = None
    at_baseline: Optional[bool] = None  # None: the task has no baseline
    stale: bool = False  # made by other code than the running atnbench's (no canary vouched for it)


@dataclass
class TableView:
    kind: str  # "models" or "k-ablation"
    title: str
    task: str
    T: Optional[int]
    budget: float
    variant: Optional[str]
    measure: str  # "cross-entropy loss", "MSE loss", "bits per character (bpc)", ...
    scale: float  # values are displayed as value / scale
    columns: list[Column]
    rows: list[Row]
    protocol: str = "full protocol"  # or "reduced budget (5%)", "own protocol" (see paper.protocol_label)
    own_task: bool = False  # a user's task: its protocol is the task file's defaults, no paper's
    paper_table: Optional[str] = None  # "Table 1, T=100" when the paper's values are shown
    comparable: bool = True  # False: reduced budget or another protocol, the comparison is flagged
    notes: list[str] = field(default_factory=list)

    @property
    def reduced(self) -> bool:
        return self.budget < 1

    @property
    def protocol_source(self) -> str:
        """Whose protocol a budget is a share of: the paper's, or a user task's own defaults."""
        return f"the defaults of task {self.task}" if self.own_task else "the paper's protocol"

    @property
    def exponent(self) -> int:
        return int(round(math.log10(self.scale))) if self.scale > 0 else 0


# -- building views ------------------------------------------------------------------------------


def measure_of(task: str, options: Optional[dict] = None) -> str:
    try:
        from atnbench.tasks.lookup import task_of

        spec = task_of(task, options)
    except ValueError:
        return "loss"
    if spec.metric == "mae":  # a user's regression task: its MAE columns share the MSE's scale
        return "MSE loss and MAE, in the targets' units"
    return {"ce": "cross-entropy loss", "mse": "MSE loss"}.get(spec.loss, "loss")


def group_options(group: Group) -> Optional[dict]:
    """A run's task options of the group (a user task's definition travels in them)."""
    return next((run.record.config.get("options") for runs in group.runs.values() for run in runs), None)


def auto_scale(values: list[Optional[float]]) -> float:
    """A power of ten that shows the smallest positive value as d.ddd (1 for values >= 1)."""
    positive = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not positive:
        return 1.0
    exponent = math.floor(math.log10(min(positive)))
    return 10.0 ** min(0, exponent)


def _stat_for(row: ModelRow, key: str, table: Optional[PaperTable]) -> Stat:
    """Our statistic for a column; derived from the loss when the run did not record it."""
    stat = row.stats.get(key)
    if stat is not None and stat.n:
        return stat
    if table is not None and key in table.from_loss:
        source, how = table.from_loss[key]
        loss = row.stats.get(source)
        if loss is not None and loss.n:
            return mean_std([convert(v, how) for v in loss.values])
    return stat or Stat(None, None, 0, ())


def _seed_rows(rows: list[ModelRow], columns: list[Column], table: Optional[PaperTable], kind: str,
               label=lambda row: row.label, baseline=lambda label: None,
               margin: float = DEFAULT_MARGIN) -> list[Row]:
    """``baseline``: row label -> the baseline it is judged against (``Group.baseline_of``)."""
    out = []
    for row in rows:
        cells = {}
        for column in columns:
            stat = _stat_for(row, column.key, table)
            cells[column.key] = Cell(stat.mean, stat.std, stat.n)
        out.append(Row(label=label(row), kind=kind, model=row.model, k=row.k, seeds=row.seeds,
                       diverged=len(row.diverged_seeds), cells=cells,
                       cost={name: row.stats[name] for name in COST_STATS if name in row.stats},
                       at_baseline=at_baseline(baseline_values(row)[1], baseline(row.label), margin),
                       stale=row.stale))
    return out


def _mark_best(rows: list[Row], columns: list[Column]) -> None:
    """The best mean of each column, among the rows of current code where there are any: a stale
    row's number is not this code's (`report --paper` will not compare it either)."""
    models = [r for r in rows if r.kind != "baseline"]
    models = [r for r in models if not r.stale] or models
    for column in columns:
        means = [r.cells[column.key].mean for r in models if r.cells[column.key].mean is not None]
        if not means:
            continue
        low = max(means) if column.higher_better else min(means)
        for r in models:
            if r.cells[column.key].mean == low:
                r.cells[column.key].best = True


def _baseline_row(group: Group, columns: list[Column]) -> Optional[Row]:
    if group.baseline is None:
        return None
    loss_columns = [c for c in columns if c.key.endswith("_loss")]
    if not loss_columns:
        return None
    cells = {c.key: Cell(group.baseline if c in loss_columns else None, None, 0) for c in columns}
    label = "baseline (10·ln 8/(T+20))" if group.task == "copying" else f"baseline ({baseline_words(group.task)})"
    return Row(label=label, kind="baseline", cells=cells)


def _title(group: Group, what: str, leave_out: tuple[str, ...] = ()) -> tuple[str, list[str], str]:
    """The table's title, notes on how its runs differ from the paper's protocol (but in the
    settings ``leave_out`` names, which the table varies), and the protocol label."""
    label, differences = protocol_label(group)
    differences = [text for text in differences if text.split(" ", 1)[0] not in leave_out]
    parts = [f"{group.task}, T={group.T}" if group.T is not None else group.task]
    if group.variant:
        parts.append(f"variant {group.variant}")
    parts.append(label)
    preset = f"the defaults of task {group.task}" if own_task(group) else "the paper's preset"
    checked = [text for text in differences if text != UNCHECKED]
    notes = [f"protocol differs from {preset}: {'; '.join(checked)}"] if checked else []
    if len(checked) < len(differences):
        notes.append(UNCHECKED)
    return f"{what}: " + ", ".join(parts), notes, label


def _add_paper(view: TableView, group: Group, table: PaperTable) -> None:
    """Set the paper's values beside ours, the ratios, and ordering marks; flag what is not
    comparable (a reduced budget, or runs that differ from the paper's protocol)."""
    view.paper_table = table.label
    compared, differences = [], row_differences(group)
    for row in view.rows:
        if row.kind != "model":
            continue
        source = group.row(row.label)
        row.paper_model = paper_row_for(table, group, source) if source is not None else None
        if row.paper_model is None:
            continue
        why = list(differences.get(row.label) or [])
        if source.stale:
            why.append("made by other code (stale)")
        if why:  # only rows with the paper's settings are set beside the paper's numbers
            view.notes.append(f"{row.label}: not compared with {table.label}: {'; '.join(why)}")
            row.paper_model = None
        else:
            compared.append(row)
    for column in view.columns:
        if column.paper is None:
            continue
        ours, theirs = {}, {}
        for row in compared:
            value = table.value(row.paper_model, column.paper)
            cell = row.cells[column.key]
            if value is None:
                continue
            cell.paper_mean, cell.paper_std = value
            if cell.mean is not None and value[0]:
                if not group.reduced:  # a shorter run's ratio to a full-protocol minimum measures the budget
                    cell.ratio = cell.mean / value[0]
                ours[row.paper_model], theirs[row.paper_model] = cell.mean, value[0]
        differs = order_differences(ours, theirs)
        for row in compared:
            row.cells[column.key].order_differs = row.paper_model in differs
        if differs:
            view.notes.append(
                f"{ORDER_MARK} {column.label}: our ordering {_order_text(ours)} differs from the paper's "
                f"{_order_text(theirs)}")
    reasons = []
    if group.reduced:
        reasons.append(f"{budget_label(group.budget)}: the paper's numbers are full-protocol (no ratio shown)")
    if not is_default_variant(group.task, group.variant):
        reasons.append(f"preset variant {group.variant}: the paper's numbers come from the task's default protocol")
    if reasons:
        view.comparable = False
        view.notes.append(f"{NOT_COMPARABLE_MARK} not comparable with {table.label}: " + "; ".join(reasons))
    if not compared:
        view.notes.append(f"no row of ours matches a row of the paper's {table.label} (LSTM, LN, ATN k={table.k})")


def is_default_variant(task: str, variant: Optional[str]) -> bool:
    """No variant, or a variant that changes nothing of the task's default preset (an alias)."""
    if variant is None:
        return True
    from atnbench.presets import resolve_preset
    from atnbench.tasks.lookup import load_task_preset

    try:
        preset = load_task_preset(task)
        return resolve_preset(preset, preset.default_T, variant) == resolve_preset(preset, preset.default_T, None)
    except Exception:  # noqa: BLE001 - no preset: nothing says the variant is the paper's
        return False


def _note_baseline(view: TableView, group: Group, margin: float) -> None:
    note = baseline_note(group, margin)
    if note is not None:
        view.notes.append(note)


def _order_text(values: dict[str, float]) -> str:
    return " < ".join(PAPER_NAMES.get(m, m) for m in sorted(values, key=lambda m: (values[m], m)))


def _test_at_best_val(group: Group) -> Optional[str]:
    """The test statistic at the best validation evaluation, in the task's own measure (bpc,
    perplexity, accuracy) where the runs recorded it, else as a loss; None without test scores."""
    from atnbench.tasks.lookup import task_of

    try:
        metric = task_of(group.task, group_options(group)).metric
    except ValueError:  # a task no longer found: its loss alone
        metric = None
    for key in ([f"test_{metric}_at_best_val"] if metric else []) + ["test_loss_at_best_val"]:
        if any(row.stats.get(key) is not None and row.stats[key].n for row in group.rows):
            return key
    return None


def group_view(group: Group, with_paper: bool = False, final: bool = False,
               baseline_margin: float = DEFAULT_MARGIN) -> TableView:
    """The paper-style table of one group: a row per model, the baseline, best marked."""
    table = paper().table_for(group.task, group.T)
    if table is not None:
        columns = [Column(key, COLUMN_LABELS.get(key, key.replace("_", " ")), name)
                   for name, key in table.columns.items()]
        if not with_paper:
            for column in columns:
                column.paper = None
        measure = table.measure
    else:
        columns = [Column(key, COLUMN_LABELS[key]) for key in DEFAULT_COLUMNS]
        measure = measure_of(group.task, group_options(group))
        for key, label in {**ACCURACY_COLUMNS, **MAE_COLUMNS}.items():  # tasks scored by accuracy or MAE
            if any(row.stats.get(key) is not None and row.stats[key].n for row in group.rows):
                accuracy = key in ACCURACY_COLUMNS  # accuracy keeps its own scale; MAE shares the MSE's (one scale)
                columns.append(Column(key, label, scale=1.0 if accuracy else None, higher_better=accuracy))
    at_best = _test_at_best_val(group)
    if at_best is not None and at_best not in [c.key for c in columns]:  # a paper's Test column may be it
        accuracy = higher_is_better(at_best.removesuffix("_at_best_val"))  # accuracy keeps its own scale, as above
        columns.append(Column(at_best, COLUMN_LABELS[at_best], scale=1.0 if accuracy else None, higher_better=accuracy))
    if final:
        columns += [Column(key, COLUMN_LABELS[key]) for key in FINAL_COLUMNS if key not in [c.key for c in columns]]
    rows = _seed_rows(group.rows, columns, table, "model", baseline=group.baseline_of, margin=baseline_margin)
    _mark_best(rows, columns)
    baseline = _baseline_row(group, columns)
    if table is not None:  # the paper's own scale, so the two read side by side
        scale = table.scale
    else:
        scale = auto_scale([r.cells[c.key].mean for r in rows for c in columns if c.scale is None])
    title, protocol_notes, protocol = _title(group, "attained minima")
    view = TableView(kind="models", title=title, task=group.task, T=group.T,
                     budget=group.budget, variant=group.variant, measure=measure, scale=scale, protocol=protocol,
                     columns=columns, rows=rows + ([baseline] if baseline else []),
                     notes=list(group.notes) + ([] if with_paper and table is not None else protocol_notes))
    _note_baseline(view, group, baseline_margin)
    view.own_task = own_task(group)
    view.notes.append(definitions((c.key for c in columns), view.own_task))
    if with_paper:
        if table is not None:
            _add_paper(view, group, table)
        else:
            view.notes.append(f"the paper has no table for {group.task}"
                              + (f" at T={group.T}" if group.T is not None else ""))
    return view


def k_ablation_view(view_data: KAblation, with_paper: bool = False,
                    baseline_margin: float = DEFAULT_MARGIN) -> TableView:
    """k against loss for one windowed model, the other models as reference rows."""
    group = view_data.group
    columns = [Column(key, COLUMN_LABELS[key]) for key in DEFAULT_COLUMNS + FINAL_COLUMNS]
    marks = dict(baseline=group.baseline_of, margin=baseline_margin)
    rows = _seed_rows(view_data.rows, columns, None, "model", label=lambda row: row.k_label, **marks)
    refs = _seed_rows(view_data.references, columns, None, "reference", label=lambda row: row.label, **marks)
    _mark_best(rows + refs, columns)
    baseline = _baseline_row(group, columns)
    table = paper().table_for(group.task, group.T)
    scale = table.scale if table is not None and table.columns.get("Train") == "min_train_loss" else \
        auto_scale([r.cells[c.key].mean for r in rows + refs for c in columns])
    title, protocol_notes, protocol = _title(group, f"k-ablation of {view_data.model}", leave_out=("k",))
    view = TableView(kind="k-ablation", title=title, task=group.task,
                     T=group.T, budget=group.budget, variant=group.variant, measure=measure_of(group.task, group_options(group)),
                     scale=scale, protocol=protocol, columns=columns, rows=rows + refs + ([baseline] if baseline else []),
                     notes=list(group.notes) + [n.replace("protocol differs", "protocol (besides k) differs")
                                                for n in protocol_notes])
    _note_baseline(view, group, baseline_margin)
    view.own_task = own_task(group)
    view.notes.append(definitions((c.key for c in columns), view.own_task))
    if with_paper:
        statement = k_order_statement(view_data)
        if statement is None:
            view.notes.append("the paper reports no k-ablation for this task and T (Fig. 7 is copying, T=100)")
        else:
            view.paper_table = f"Fig. {statement['figure']}"
            ours = " < ".join(f"k={k}" for k in statement["ours"])
            theirs = " < ".join(f"k={k}" for k in statement["paper"])
            mark = f" {ORDER_MARK} differs" if statement["order_differs"] else " (same)"
            view.notes.append(f"Fig. {statement['figure']} (paper, text of Sect. 5.3): {theirs}, every k below "
                              f"LN and LSTM; ours (min validation): {ours}{mark}")
            if statement["atn_not_below"]:
                view.notes.append(f"{ORDER_MARK} some ATN k is not below "
                                  + ", ".join(PAPER_NAMES.get(m, m) for m in statement["atn_not_below"])
                                  + " (the paper: every k is)")
            if statement["order_differs"]:
                ranks = {k: i for i, k in enumerate(statement["ours"])}
                for row in rows:
                    if row.k in ranks and statement["paper"].index(row.k) != ranks[row.k]:
                        row.cells["min_val_loss"].order_differs = True
            if group.reduced:
                view.comparable = False
                view.notes.append(f"{NOT_COMPARABLE_MARK} {budget_label(group.budget)}: "
                                  f"the paper's Fig. {statement['figure']} is full-protocol")
    return view


# -- number formatting ---------------------------------------------------------------------------

SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def scale_text(view: TableView, unicode: bool = True) -> str:
    """"×10⁻³" (or "x10^-3"); empty for a scale of 1."""
    if view.exponent == 0:
        return ""
    if unicode:
        return "×10" + str(view.exponent).translate(SUPERSCRIPT)
    return f"x10^{view.exponent}"


def column_scale(view: TableView, column: Column) -> float:
    return column.scale if column.scale is not None else view.scale


def number(value: Optional[float], scale: float, digits: int = 3) -> str:
    return "-" if value is None else f"{value / scale:.{digits}f}"


def seed_ranges(seeds: Iterable[Optional[int]]) -> str:
    """Seeds as ranges: [0, 1, 2, 5] -> "0-2, 5"."""
    ranges: list[list[int]] = []
    for seed in sorted({seed for seed in seeds if seed is not None}):
        if ranges and seed == ranges[-1][1] + 1:
            ranges[-1][1] = seed
        else:
            ranges.append([seed, seed])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in ranges)


def mean_pm_std(mean: Optional[float], std: Optional[float], scale: float, pm: str = "±", n: Optional[int] = None,
                of: Optional[int] = None) -> str:
    """"1.677 ± 0.006" in the view's scale; "1.677" for a single seed (no std: the seeds column
    says 1) and for a number that is no mean (n=0: the baseline); "(n=2)" after it where the mean
    is of fewer seeds than the row's ``of`` (a run without that number, as a final loss it lacks)."""
    if mean is None:
        return "-"
    fewer = f" (n={n})" if n and of and n < of else ""
    if n == 0 or std is None:
        return number(mean, scale) + fewer
    return f"{number(mean, scale)} {pm} {number(std, scale)}{fewer}"


def ratio_text(cell: Cell) -> str:
    return "-" if cell.ratio is None else f"{cell.ratio:.2f}×"


def seeds_text(row: Row) -> str:
    if row.kind == "baseline":
        return ""
    text = str(len(row.seeds))
    if row.diverged:
        text += f" (+{row.diverged} diverged)"
    return text


def header_caption(view: TableView) -> str:
    scale = scale_text(view)
    return f"{view.measure}{' ' + scale if scale else ''}, mean ± std over seeds (std: sample, ddof=1)"


# -- rich ------------------------------------------------------------------------------------------


def rich_table(view: TableView, plain: bool = False) -> Table:
    """``plain``: for output without colour, the best cells carry a ``*`` instead of bold green."""
    with_paper = view.paper_table is not None and any(c.paper for c in view.columns)
    caption = [header_caption(view)]
    if view.paper_table:
        caption.append(f"paper: {view.paper_table}")
    table = Table(title=view.title, caption=" · ".join(caption), box=box.SIMPLE_HEAD, title_style="bold",
                  caption_justify="left")
    first = "k" if view.kind == "k-ablation" else "model"
    table.add_column(first, style="bold")
    for column in view.columns:
        table.add_column(column.label, justify="right")
        if with_paper and column.paper:
            table.add_column(f"paper {column.paper}", justify="right", style="cyan")
            table.add_column("ours/paper", justify="right")
    table.add_column("seeds", justify="right")
    for row in view.rows:
        style = "dim italic" if row.kind == "baseline" else ("dim" if row.kind == "reference" else None)
        cells: list = [Text(row.label + (f" {AT_BASELINE_MARK}" if row.at_baseline else ""))]
        for column in view.columns:
            cells.extend(_cell_texts(view, row, column, plain, with_paper))
        cells.append(Text(seeds_text(row), style="red" if row.diverged else ""))
        table.add_row(*cells, style=style)
    return table


def _cell_texts(view: TableView, row: Row, column: Column, plain: bool, with_paper: bool) -> list[Text]:
    """Ours, and with the paper: the paper's value and ours/paper, as rich_table shows them."""
    cell = row.cells[column.key]
    ours = Text(mean_pm_std(cell.mean, cell.std, column_scale(view, column), n=cell.n, of=len(row.seeds)))
    if cell.best:
        ours.stylize("bold green")
        if plain:
            ours.append("*")
    if not (with_paper and column.paper):
        if cell.order_differs:
            ours.append(f" {ORDER_MARK}", style="magenta")
        return [ours]
    paper = Text(mean_pm_std(cell.paper_mean, cell.paper_std, column_scale(view, column))
                 if cell.paper_mean is not None else "", style="cyan")
    ratio = Text("" if cell.paper_mean is None else ratio_text(cell))
    if cell.paper_mean is not None and not view.comparable:
        ratio.append(NOT_COMPARABLE_MARK)
        ratio.stylize("yellow")
    if cell.order_differs:
        ratio.append(f" {ORDER_MARK}", style="magenta")
    return [ours, paper, ratio]


def stacked_table(view: TableView, plain: bool = False) -> Table:
    """The same numbers for a narrow terminal (80 columns): each model on a line of its own
    (with its seeds), its statistics stacked under it, one line each, so no header is cut and
    no value wraps."""
    with_paper = view.paper_table is not None and any(c.paper for c in view.columns)
    caption = [header_caption(view)] + ([f"paper: {view.paper_table}"] if view.paper_table else [])
    table = Table(title=view.title, caption=" · ".join(caption), box=box.SIMPLE_HEAD, title_style="bold",
                  caption_justify="left", pad_edge=False)
    indent = max(len(column.label) for column in view.columns) + 2  # every statistic's name on one line
    table.add_column(("k" if view.kind == "k-ablation" else "model") + " / statistic", overflow="fold",
                     min_width=max(indent, 17))
    table.add_column("ours", justify="right", no_wrap=True)
    if with_paper:
        table.add_column("paper", justify="right", no_wrap=True)
        table.add_column("ours/paper", justify="right", no_wrap=True)
    blank = [Text("")] * (3 if with_paper else 1)
    for row in view.rows:
        style = "dim italic" if row.kind == "baseline" else ("dim" if row.kind == "reference" else None)
        label = Text(row.label + (f" {AT_BASELINE_MARK}" if row.at_baseline else ""), style="bold")
        if row.kind == "baseline":  # one number, the same in every column
            value = next((row.cells[c.key] for c in view.columns if row.cells[c.key].mean is not None), None)
            ours = Text(mean_pm_std(value.mean, None, view.scale, n=0)) if value else Text("-")
            table.add_row(label, ours, *blank[1:], style=style, end_section=True)
            continue
        seeds = len(row.seeds)
        label.append(f" · {seeds} seed{'s' if seeds != 1 else ''}", style="not bold")
        if row.diverged:
            label.append(f" (+{row.diverged} diverged)", style="red")
        table.add_row(label, *blank, style=style)
        for i, column in enumerate(view.columns):
            texts = _cell_texts(view, row, column, plain, with_paper)
            texts += blank[len(texts):]
            table.add_row(Text("  " + column.label), *texts, style=style, end_section=i == len(view.columns) - 1)
    return table


def rich_view(view: TableView, plain: bool = False, width: Optional[int] = None, console=None):
    """The table with its notes (reduced budget, ordering, protocol) below it. Given the
    ``width`` it must fit (and the ``console`` to measure with), a table too wide for it is
    stacked (:func:`stacked_table`) rather than cut or wrapped."""
    too_wide = width is not None and console is not None and table_width(console, view) > width
    parts: list = [stacked_table(view, plain) if too_wide else rich_table(view, plain)]
    marked = {column.higher_better for row in view.rows for column in view.columns
              if row.cells.get(column.key) is not None and row.cells[column.key].best}
    if plain and marked:  # a legend of a mark the table shows, in its columns' sense
        best = "(lowest loss, highest accuracy)" if len(marked) == 2 else "(highest)" if True in marked else "(lowest)"
        parts.append(Text(f"  * the best {best} mean of its column"))
    if view.reduced and not any(note.startswith(NOT_COMPARABLE_MARK) for note in view.notes):
        parts.append(Text(f"  {view.protocol}: {view.budget:g} of {view.protocol_source}; "
                          f"not comparable with full-protocol numbers", style="yellow"))
    for note in view.notes:
        style = "yellow" if note.startswith(NOT_COMPARABLE_MARK) else ("magenta" if note.startswith(ORDER_MARK) else "dim")
        parts.append(Text(f"  {note}", style=style))
    parts.append(Text(""))
    return RichGroup(*parts)


def table_width(console, view: TableView) -> int:
    """The width the view's table needs to keep every cell on one line."""
    return console.measure(rich_table(view, plain=True), options=console.options.update(width=10_000)).maximum

"""``atnbench runs list | show | compare | delete | export``: the runs of a results store one by one.

Wherever a run id is asked for, a unique prefix of it will do. Every command but ``delete``
only reads the store.
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from atnbench.cli import options
from atnbench.cli.run_flags import with_filters
from atnbench.run.checkpoint import RunBusy, held_here, hold_run
from atnbench.cli.app import command_group, EXIT_FAILED, err, fail, out, sigterm_interrupts, user_errors
from atnbench.report.load import check_task, parse_since
from atnbench.errors import UserError
from atnbench.run.outputs import RUNS_LIST, check_keeps_runs, check_output_file, check_suffix_format
from atnbench.cli.store_cmd import check_status, check_sweep, open_store
from atnbench.run.selection import selected_summary
from atnbench.store import EvalPoint, MalformedRow, ResultsStore, RunRecord, StoreError, check_store_path
from atnbench.tables import FitTable

runs_app = command_group("runs", "List, show, compare, delete and export the runs of a results store.")

IDS_HELP = "Run ids, or unique prefixes of them."
STATUS_STYLE = {"done": "green", "diverged": "yellow", "failed": "red", "running": "cyan"}
# a row recorded 'running' that no process here is training (killed with -9, or trained by a Ray sweep elsewhere)
ORPHAN = "running?"
ORPHAN_NOTE = ("recorded running, but no process on this machine is training it: killed? the command that "
               "started it resumes it (a Ray sweep's runs train on other machines)")
SPARKS = "▁▂▃▄▅▆▇█"
EXPORT_FORMATS = ("csv", "json")


# -- shared pieces ---------------------------------------------------------------------------------


def resolve_ids(results: ResultsStore, given: list[str]) -> list[str]:
    """Full run ids for ids or unique prefixes, in the order given, each once.

    An unknown or ambiguous prefix is a ValueError (one line, exit 2)."""
    return list(dict.fromkeys(results.resolve_id(text) for text in given))


def fmt(value, digits: int = 5) -> str:
    """A cell: '-' for missing, short floats, JSON for lists and mappings (a space after each
    ',' and ':', so that a narrow table wraps it between entries)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def model_label(run: RunRecord) -> str:
    """The model as the report names it, with the window for windowed norms: 'atn k=25'."""
    from atnbench.registry import get_scheme, model_name

    name = model_name(run.config.get("cell", "lstm"), run.norm)  # from the config, as the report: never the summary's copy
    try:
        windowed = get_scheme(run.norm).windowed
    except (ValueError, KeyError, TypeError):
        windowed = False
    return f"{name} k={run.k}" if windowed and run.k is not None else str(name)


def _status(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def _select(results: ResultsStore, task, T, norm, status, sweep, since) -> list[RunRecord]:
    from atnbench.registry import norm_filter, of_cell

    check_status(status)
    check_sweep(results, sweep)
    check_task(results, task)
    stored, cell = norm_filter(norm) if norm else (None, None)
    return of_cell(results.runs(task=task, T=T, norm=stored, status=status, sweep=sweep, since=parse_since(since)),
                   cell)


def sparkline(values: list[Optional[float]], width: int = 48) -> str:
    """A one-line plot of a series: eight bar heights, log-scaled when the values span a decade or
    more; missing (non-finite) points are blanks. Long series are thinned to width points."""
    if len(values) > width:
        values = [values[round(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return " " * len(values)
    log = min(finite) > 0 and max(finite) / min(finite) >= 10
    scale = (lambda v: math.log10(v)) if log else (lambda v: v)
    low, high = scale(min(finite)), scale(max(finite))
    span = high - low or 1.0
    return "".join(" " if v is None or not math.isfinite(v)
                   else SPARKS[round((scale(v) - low) / span * (len(SPARKS) - 1))] for v in values)


def _thin(points: list, limit: int) -> list:
    """At most limit points, evenly spaced, first and last kept (limit 0: all)."""
    if limit <= 0 or len(points) <= limit:
        return points
    if limit == 1:
        return [points[-1]]
    return [points[round(i * (len(points) - 1) / (limit - 1))] for i in range(limit)]


# -- list ------------------------------------------------------------------------------------------

def _setting_text(config: dict, key: str) -> str:
    from atnbench.config import setting_default

    value = config[key] if key in config else setting_default(key)  # stored before the setting existed
    if key == "bias_inside":  # None: the norm's own placement, named as such
        from atnbench.registry import get_scheme

        try:
            value = get_scheme(config.get("norm")).bias_inside if value is None else value
        except (ValueError, KeyError, TypeError):
            pass
        return "bias inside" if value else "bias outside"
    return f"{key}={value}"


def _what_tells_apart(runs: list) -> dict[str, str]:
    """run id -> the settings in which it differs from runs that list alike (task, T, model,
    seed, budget): two LN runs of other bias placements otherwise read as one run twice."""
    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault((run.task, run.T, model_label(run), run.seed, run.budget), []).append(run)
    apart = {}
    for group in (g for g in groups.values() if len(g) > 1):
        keys = sorted({key for run in group for key in run.config}
                      - {"task", "T", "norm", "k", "seed", "budget"})
        differ = [key for key in keys if len({json.dumps(_setting_text(run.config, key)) for run in group}) > 1]
        for run in group:
            apart[run.run_id] = ", ".join(_setting_text(run.config, key) for key in differ) or "same settings, other code"
    return apart



def _as_json(run) -> dict:
    """One run of `runs list --format json`."""
    keys = ("run_id", "task", "T", "norm", "k", "seed", "budget", "status", "created_at", "updated_at")
    return {**{key: getattr(run, key) for key in keys}, "model": model_label(run),
            "min_val_loss": run.summary.get("min_val_loss")}


@runs_app.command("list")
@user_errors
@with_filters("task", "T", "norm", "status", "sweep", "since")
def list_cmd(
    ids: bool = typer.Option(False, "--ids", help="Only the run ids, one a line (for scripts)."),
    # -q meant --ids here, where every other command's -q means "no progress output"
    quiet_old: bool = typer.Option(False, "--quiet", "-q", hidden=True, help="Deprecated: use --ids."),
    fmt_: Annotated[Optional[str], options.output_format(("table", "json"), "; json: one object per run")] = None,
    store: options.Store = options.STORE,
    **filters,
):
    """The runs of the store, oldest first, one line each.

    Example: [bold]atnbench runs list --task adding --status done[/]  ·  [bold]atnbench runs list --since 1d[/]
    """
    task, T, norm, status, sweep, since = (filters[key] for key in ("task", "T", "norm", "status", "sweep", "since"))
    ids = options.deprecated(quiet_old, "-q/--quiet", "--ids", ids)
    json_out = options.check_format(fmt_, ("table", "json")) == "json"
    if ids and json_out:  # one would be ignored: it printed whole objects without a word
        raise UserError("--ids prints one run id a line, --format json one object a run; give one or the other")
    with open_store(store) as results:
        runs = _select(results, task, T, norm, status, sweep, since)
        total = len(results.run_ids())
        path = results.path
    if json_out:
        print(json.dumps([_as_json(run) for run in runs]))
        return
    if ids:
        for run in runs:
            sys.stdout.write(run.run_id + "\n")
        return
    if not runs:
        err.print(Text(f"no runs match ({total} in {path})"), soft_wrap=True)
        return
    reduced = any(run.budget is not None and run.budget < 1 for run in runs)
    apart = _what_tells_apart(runs)
    table = FitTable(collapse_padding=True, lift=False)  # a list of runs keeps its columns
    table.add_column("id", no_wrap=True)
    table.add_column("task")
    table.add_column("T", justify="right")
    table.add_column("model")
    table.add_column("seed", justify="right")
    if reduced:
        table.add_column("budget", justify="right")
    if apart:
        table.add_column("setting")
    table.add_column("status")
    table.add_column("min val", justify="right")
    table.add_column("created", no_wrap=True)  # a date and its time on one line
    orphans = {run.run_id for run in runs if run.status == "running" and not held_here(path, run.run_id)}
    for run in runs:
        cells = [run.run_id, str(run.task), fmt(run.T), model_label(run), fmt(run.seed)]
        if reduced:
            cells.append(fmt(run.budget, 3))
        if apart:
            cells.append(apart.get(run.run_id, ""))
        status = Text(ORPHAN, style="yellow") if run.run_id in orphans else _status(run.status)
        cells += [status, fmt(run.summary.get("min_val_loss"), 4), run.created_at[:16].replace("T", " ")]
        table.add_row(*cells)
    out.print(table)
    if orphans:
        out.print(Text(f"{ORPHAN} {ORPHAN_NOTE}", style="dim"))  # wrapped: the table's width
    out.print(Text(f"{len(runs)} of {total} runs in {path}", style="dim"), soft_wrap=True)


# -- show ------------------------------------------------------------------------------------------


def _pairs_table(title: str, mapping: dict) -> FitTable:
    table = FitTable(title=title, show_header=False, box=None, lift=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key in sorted(mapping):
        table.add_row(Text(key), Text(fmt(mapping[key])))  # Text: a value such as "[ab12]" is no markup
    return table


def curve_table(points, limit: int) -> FitTable:
    shown = _thin(points, limit)
    metrics = sorted({key for point in points for key in point.metrics})
    note = f" ({len(shown)} of {len(points)} points; --points 0 for all)" if len(shown) < len(points) else ""
    table = FitTable(title=f"curve{note}", lift=False)
    for name in ("step", "wall s", "train loss", "val loss", *metrics):
        table.add_column(name, justify="right")
    for point in shown:
        table.add_row(str(point.step), fmt(point.wall_s, 4), fmt(point.train_loss), fmt(point.val_loss),
                      *(fmt(point.metrics.get(key)) for key in metrics))
    return table


def text_plot(points) -> Text:
    """Train and validation loss as sparklines with their first, last and lowest values."""
    text = Text()
    for name, attr in (("train", "train_loss"), ("val", "val_loss")):
        values = [getattr(point, attr) for point in points]
        finite = [v for v in values if v is not None and math.isfinite(v)]
        if not finite:
            continue
        first, last = values[0], values[-1]
        text.append(f"{name:<6}", style="bold")
        text.append(sparkline(values), style="green" if name == "val" else "blue")
        text.append(f"  {fmt(first, 3)} → {fmt(last, 3)}  (min {fmt(min(finite), 3)})\n")
    if points:
        text.append(f"{'':<6}steps {points[0].step} … {points[-1].step}", style="dim")
    return text


@runs_app.command("show")
@user_errors
def show_cmd(
    run_id: str = typer.Argument(..., help="Run id, or a unique prefix of it."),
    points: int = typer.Option(25, "--points", help="Curve rows to print, evenly spaced (0: every point)."),
    chart: Optional[bool] = typer.Option(None, "--chart/--no-chart", help="Draw the curve as text (default: in a terminal)."),
    fmt_: Annotated[Optional[str], options.output_format(("table", "json"), "; json: the run as `store export` "
                                                                           "writes it (config, env, summary, curve)")] = None,
    store: options.Store = options.STORE,
):
    """One run: its config, environment, summary and curve.

    Example: [bold]atnbench runs show 3fa2[/]
    """
    if points < 0:
        raise UserError(f"--points must be >= 0 (0: every point), got {points}")
    with open_store(store) as results:
        (full,) = resolve_ids(results, [run_id])
        run, curve, sweeps = results.get_run(full), results.curve(full), results.sweeps(full)
        path = results.path
        record = results.export_record(full) if options.check_format(fmt_, ("table", "json")) == "json" else None
    if record is not None:
        record["summary"] = selected_summary(record["summary"], curve)
        print(json.dumps(record))
        return
    header = Text.assemble((f"run {run.run_id}", "bold"), "  ", _status(run.status),
                           f"  {run.task} T={run.T} {model_label(run)} seed={run.seed} budget={fmt(run.budget, 3)}")
    out.print(header)
    out.print(Text(f"created {run.created_at}  updated {run.updated_at}  sweeps: {', '.join(sweeps) or '-'}",
                   style="dim"))
    if run.error:
        out.print(Text(f"error: {run.error}", style="red"), soft_wrap=True)
    out.print(_pairs_table("config", run.config))
    out.print(_pairs_table("environment", run.env))
    if run.summary:  # test numbers at the evaluation validation chose, also in a summary stored before that rule
        out.print(_pairs_table("summary", selected_summary(run.summary, curve)))
    else:
        unfinished = (" (the run has not finished)" if held_here(path, run.run_id) else f" ({ORPHAN_NOTE})") \
            if run.status == "running" else ""
        out.print(Text("summary: none" + unfinished, style="dim"))
    if not curve:
        out.print(Text("curve: no evaluations recorded", style="dim"))
        return
    out.print(curve_table(curve, points))
    if chart if chart is not None else out.is_terminal:
        out.print(text_plot(curve))


# -- compare ---------------------------------------------------------------------------------------


def settings_as_read(run: RunRecord) -> tuple[dict, set[str]]:
    """A run's config as a reader names it (``identity.setting_of``: the bias placement resolved
    to the norm's default), and the settings it has no use for (k for a norm without a window,
    eps and the bias placement for the plain LSTM, momentum for Adam)."""
    from atnbench.config import build_config
    from atnbench.evidence.identity import setting_of, uses

    try:
        config = build_config(run.config)
    except (ValueError, TypeError):  # a config of an older atnbench: every setting shown as stored
        return dict(run.config), set()
    unused = {key for key in run.config if hasattr(config, key) and not uses(config, key)}
    return {key: setting_of(config, key) if hasattr(config, key) and key not in unused else value
            for key, value in run.config.items()}, unused


def side_by_side(title: str, ids: list[str], mappings: list[dict], only_diff: bool,
                 unused: Optional[list[set[str]]] = None) -> FitTable:
    """Keys down, runs across; a key whose values differ is marked '*' and highlighted. A key in
    a run's ``unused`` set shows '-' there and is no difference: only the runs that use a
    setting can differ in it."""
    unused = unused or [set() for _ in mappings]
    table = FitTable(title=title, key_columns=2, lift=False)
    table.add_column("", no_wrap=True, width=1)
    table.add_column("key", style="bold", no_wrap=True)
    for run_id in ids:
        table.add_column(run_id)
    for key in sorted(set().union(*mappings)):
        values = ["-" if key in skip else fmt(mapping.get(key)) for mapping, skip in zip(mappings, unused)]
        differs = len({value for value, skip in zip(values, unused) if key not in skip}) > 1
        if only_diff and not differs:
            continue
        table.add_row("*" if differs else "", Text(key), *map(Text, values), style="bold yellow" if differs else None)
    return table


def compare_figure(runs: list[RunRecord], curves: list[list], path: Path) -> None:
    """Train and validation curves of every run on one figure (two panels), saved to path, in
    the report's style (colour-blind-safe colours, a line style and marker per run, the legend
    beside the panels)."""
    import matplotlib
    from matplotlib import ticker
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from atnbench.report.style import RC, log_axis, markevery, styles_for

    labels = [f"{run.run_id} {model_label(run)} seed={run.seed}" for run in runs]
    styles = styles_for((label, run.norm if run.norm not in (None, "none") else "lstm") for label, run in zip(labels, runs))
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(11, 4.2), layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, 2, sharex=True)
        for ax, (attr, title) in zip(axes, (("train_loss", "training loss"), ("val_loss", "validation loss"))):
            for label, curve in zip(labels, curves):
                pts = [(p.step, getattr(p, attr)) for p in curve if getattr(p, attr) is not None]
                if pts:
                    ax.plot(*zip(*pts), ms=4, markevery=markevery(len(pts)), label=label, **styles[label].line())
            values = [v for curve in curves for p in curve for v in [getattr(p, attr)] if v is not None]
            if values and min(values) > 0:
                log_axis(ax)
            ax.set(title=title, xlabel="training step (optimizer updates)", ylabel="loss")
            ax.xaxis.set_major_locator(ticker.MaxNLocator(nbins=5, integer=True))  # labels apart at 20,000+ steps
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles, names, loc="outside right center", fontsize=8)
        tasks = sorted({f"{run.task} T={run.T}" for run in runs})
        fig.suptitle(f"atnbench runs compare: {', '.join(tasks)}", fontweight="bold")
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=150)


@runs_app.command("compare")
@user_errors
def compare_cmd(
    run_ids: list[str] = typer.Argument(..., help=IDS_HELP + " At least two."),
    only_diff: bool = typer.Option(False, "--diff", help="Only the keys whose values differ (among the runs that use them)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw the curves on one figure into this file (.png, .svg, .pdf)."),
    store: options.Store = options.STORE,
):
    """Runs side by side: config, environment and summary (differing keys marked *), curves with --plot.

    The config is shown as the runs use it: '-' where a run has no use for a setting (k for a norm
    without a window, eps for the plain LSTM), and a key differs (*) only among the runs that use
    it. `runs show` gives each run's config as stored.

    Example: [bold]atnbench runs compare 3fa2 81c0 --plot cmp.png[/]
    """
    if plot is not None and plot.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise UserError(f"--plot {plot}: give a .png, .svg or .pdf file")
    if plot is not None:
        check_output_file(plot, "--plot")  # before the tables: a bad path is the only output
    with open_store(store) as results:
        ids = resolve_ids(results, run_ids)
        if len(ids) < 2:
            raise UserError("compare needs at least two different runs")
        runs = [results.get_run(run_id) for run_id in ids]
        curves = [results.curve(run_id) for run_id in ids]
        sweeps = [results.sweeps(run_id) for run_id in ids]
    basics = [{"status": run.status, "sweeps": ", ".join(s) or "-", "created": run.created_at[:19].replace("T", " "),
               "curve points": len(curve)} for run, s, curve in zip(runs, sweeps, curves)]
    settings, unused = zip(*(settings_as_read(run) for run in runs))
    for title, mappings in (("run", basics), ("config", list(settings)),
                            ("environment", [run.env for run in runs]), ("summary", [selected_summary(run.summary, curve) for run, curve in zip(runs, curves)])):
        table = side_by_side(title, ids, mappings, only_diff, list(unused) if title == "config" else None)
        out.print(table if table.row_count else Text(f"{title}: no differences", style="dim"))
    if plot is not None:
        compare_figure(runs, curves, plot)
        out.print(Text(f"wrote {plot}"), soft_wrap=True)


# -- delete ----------------------------------------------------------------------------------------


@runs_app.command("delete")
@user_errors
def delete_cmd(
    run_ids: list[str] = typer.Argument(..., help=IDS_HELP),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask."),
    store: options.Store = options.STORE,
):
    """Delete runs: their rows, curves, sweep memberships, checkpoints and kept models.

    Asks first unless --yes; answering no deletes nothing and exits with 1. A run that is
    training now (by `atnbench run` or a sweep) cannot be deleted: the command then deletes
    none of the runs it names and exits with 1, naming the run and the process training it.

    Example: [bold]atnbench runs list --ids --status failed | xargs -r atnbench runs delete --yes[/]
    """
    try:  # a store we may not write is refused before the question, not after it
        check_store_path(Path(store).expanduser().absolute(), create=False, write=True)
    except StoreError as error:
        fail(str(error))
    with open_store(store) as reading:  # read-only until confirmed: a typo or a "no" leaves the file as it was
        ids = resolve_ids(reading, run_ids)
        lines = [_listed(reading, run_id) for run_id in ids]
        where = reading.path
    with sigterm_interrupts() as interrupt:  # SIGTERM as Ctrl-C: the locks taken so far are let go
        try:
            with ExitStack() as locks:  # a run training now: refused before the list and the question
                _hold_runs(locks, where, ids)
        except KeyboardInterrupt:
            err.print("interrupted: nothing deleted")
            raise typer.Exit(128 + interrupt.signum) from None
    for line in lines:
        out.print(Text(line))
    if not yes:
        answered = sys.stdin is not None  # none at all where the caller closed it (`<&-`): input() would raise
        try:
            confirmed = answered and typer.confirm(f"Delete {len(ids)} run{'s' if len(ids) != 1 else ''} "
                                                   f"from {where}?", default=False)
        except typer.Abort:  # no answer (stdin at its end)
            answered, confirmed = False, False
        if not confirmed:
            err.print("nothing deleted" if answered else "nothing deleted: no answer on stdin (--yes deletes without asking)")
            raise typer.Exit(1)
    path, folders = _delete(store, ids, where)
    out.print(Text(f"deleted {len(ids)} run{'s' if len(ids) != 1 else ''} from {path}"
                   + (f" and {folders} checkpoint folder{'s' if folders != 1 else ''}" if folders else "")),
              soft_wrap=True)


def _listed(results: ResultsStore, run_id: str) -> str:
    """A run as `runs delete` lists it before asking; a damaged row (its JSON unreadable) by its id
    and the damage: deleting it needs nothing of what is damaged."""
    try:
        run = results.get_run(run_id)
    except MalformedRow as damage:
        return f"{run_id}  (a damaged row: {str(damage).split(': ', 1)[-1]})"
    return f"{run.run_id}  {run.task} T={run.T} {model_label(run)} seed={run.seed}  {run.status}"


def _delete(store: Path, ids: list[str], where: Path) -> tuple[Path, int]:
    """Every row in one transaction (a kill or Ctrl-C deletes all or none of them; SIGTERM is a
    Ctrl-C here, so the locks and their files are let go), then the checkpoint folders, which only
    the rows named. Returns (the store's path, the checkpoint folders removed)."""
    deleted = False
    with sigterm_interrupts() as interrupt:
        try:
            with ExitStack() as locks, open_store(store, write=True) as results:
                _hold_runs(locks, results.path, ids)  # held while deleting: none of them starts training meanwhile
                with results.batch():
                    for run_id in ids:
                        results.delete_run(run_id)  # curve, memberships and kept models cascade
                deleted, folders = True, 0
                for run_id in ids:
                    checkpoints = results.checkpoint_dir(run_id)
                    if checkpoints.is_dir():
                        shutil.rmtree(checkpoints)
                        folders += 1
                return results.path, folders
        except KeyboardInterrupt:
            err.print(f"interrupted: the {len(ids)} runs are deleted; some of their checkpoint folders may be left in "
                      f"{where}-checkpoints" if deleted else "interrupted: nothing deleted", soft_wrap=True)
            raise typer.Exit(128 + interrupt.signum) from None


def _hold_runs(locks: ExitStack, store_path: Path, ids: list[str]) -> None:
    """Take every run's lock (``checkpoint.hold_run``) into ``locks``. A run another process is
    training refuses the whole command in one line, exit 1 (the locks taken so far go back)."""
    for run_id in ids:
        try:
            locks.enter_context(hold_run(store_path, run_id))
        except RunBusy as busy:
            by = f"process {busy.pid}" if busy.pid else "another process"
            others = f"; none of the {len(ids)} runs named is deleted" if len(ids) > 1 else ""
            fail(f"run {run_id} is training (by {by} on {store_path}): not deleted{others}; stop that process "
                 f"or let the run finish first", code=EXIT_FAILED)


# -- export ----------------------------------------------------------------------------------------


def _flat(prefix: str, mapping: dict) -> dict:
    return {f"{prefix}.{key}": (json.dumps(value, sort_keys=True, separators=(",", ":"))
                                if isinstance(value, (dict, list)) else value)
            for key, value in mapping.items()}


def runs_csv(records: list[dict]) -> str:
    """One row per run: id, status, dates, sweeps, then config.*, summary.*, env.* columns."""
    rows = [{"run_id": r["run_id"], "status": r["status"], "error": r["error"], "created_at": r["created_at"],
             "updated_at": r["updated_at"], "sweeps": ";".join(r["sweeps"]), "curve_points": len(r["curve"]),
             **_flat("config", r["config"]), **_flat("summary", r["summary"]), **_flat("env", r["env"])}
            for r in records]
    return _csv(rows)


def curves_csv(records: list[dict]) -> str:
    """One row per curve point, with the run's id, task, T, norm, k, seed and budget."""
    rows = []
    for r in records:
        for point in r["curve"]:
            rows.append({"run_id": r["run_id"], "task": r["task"], "T": r["T"], "norm": r["norm"], "k": r["k"],
                         "seed": r["seed"], "budget": r["budget"], "step": point["step"], "wall_s": point["wall_s"],
                         "train_loss": point["train_loss"], "val_loss": point["val_loss"],
                         **{f"metrics.{key}": value for key, value in point["metrics"].items()}})
    return _csv(rows)


def _csv(rows: list[dict]) -> str:
    if not rows:
        return ""
    columns = list(dict.fromkeys(key for row in rows for key in row))  # first-seen order
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


@runs_app.command("export")
@user_errors
@with_filters("task", "T", "norm", "status", "sweep", "since")
def export_cmd(
    fmt_: Annotated[Optional[str], options.output_format(("csv", "json"), ", or what --output's suffix says")] = None,
    curves: bool = typer.Option(False, "--curves", help="CSV: one row per curve point instead of one per run (JSON always has both)."),
    output: Annotated[Optional[Path], options.output_file("the runs (instead of stdout)")] = None,
    store: options.Store = options.STORE,
    **filters,
):
    """Runs and their curves as CSV or JSON, for a spreadsheet or your own analysis.

    CSV: one row per run (config.*, summary.*, env.* columns), or with --curves one row per curve point.

    JSON: a list of runs, each with its config, summary, environment, sweeps and curve.

    To move runs to another store, use [bold]atnbench store export[/].

    Example: [bold]atnbench runs export --task adding -o adding.csv[/]  ·  [bold]atnbench runs export -f json --sweep table2-adding[/]
    """
    task, T, norm, status, sweep, since = (filters[key] for key in ("task", "T", "norm", "status", "sweep", "since"))
    suffix = output.suffix.lstrip(".").lower() if output is not None else ""
    named = fmt_ is not None
    fmt_ = (fmt_ or (suffix if suffix in EXPORT_FORMATS else "csv")).lower()
    if fmt_ not in EXPORT_FORMATS:
        raise UserError(f"unknown --format {fmt_!r}; choose one of: {', '.join(EXPORT_FORMATS)}")
    if output is not None:
        if named:  # else the format is the suffix's, or the suffix is refused below
            check_suffix_format(output, fmt_, EXPORT_FORMATS)
        check_output_file(output, "--output", store=store, export=RUNS_LIST)  # never the store it reads
    if not named and suffix and suffix not in EXPORT_FORMATS:  # .jsonl, .tsv: a format this does not write
        moving = "; JSON Lines, to move runs to another store, is `atnbench store export`'s" if suffix == "jsonl" else ""
        raise UserError(f"--output {output}: runs export writes csv or json, which a .{suffix} file would not hold{moving}; "
                        f"give the file a .csv or .json suffix, or name the format with --format")
    with open_store(store) as results:
        records = [results.export_record(run.run_id) for run in _select(results, task, T, norm, status, sweep, since)]
        if not records:  # an empty CSV has not even a header (its columns come from the runs): said here
            err.print(Text(f"no runs match ({len(results.run_ids())} in {results.path})"), soft_wrap=True)
    for record in records:  # test numbers at validation's pick, as `runs show` and `evaluate` give them
        record["summary"] = selected_summary(record["summary"], [EvalPoint(**point) for point in record["curve"]])
    if fmt_ == "json":
        text = json.dumps([{k: v for k, v in r.items() if k != "schema_version"} for r in records],
                          indent=1, allow_nan=False) + "\n"
    else:
        text = curves_csv(records) if curves else runs_csv(records)
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    check_keeps_runs(output, "--output", {record["run_id"] for record in records})
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    err.print(Text(f"wrote {len(records)} run{'s' if len(records) != 1 else ''} to {output}"), soft_wrap=True)

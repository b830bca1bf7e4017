"""``atnbench report`` (the paper's tables from the results store, exports, figures) and
``atnbench plot`` (the figures only)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from atnbench.cli import options
from atnbench.cli.run_flags import with_filters
from atnbench.cli.app import app, err, fail, out, user_errors
from atnbench.report.load import filters_text, load_groups
from atnbench.report.verdicts import RULE
from atnbench.store import ResultsStore

def _is_k_sweep(sweep: Optional[str]) -> bool:
    return sweep is not None and sweep.startswith("k-")


def _write_plots(groups, out_dir: Path, k_view: bool, say) -> list[Path]:
    from atnbench.report.plots import NothingToPlot, write_plots

    try:
        paths = write_plots(groups, out_dir, k_ablation=True if k_view else None)
    except NothingToPlot as nothing:
        err.print(str(nothing))
        return []
    for path in paths:
        say(f"wrote {path}")
    return paths


@app.command()
@user_errors
@with_filters("task", "T", "sweep", "norm", "since")
def report(
    paper: bool = typer.Option(False, "--paper", help="Set the paper's published values (Tables 1-5) beside ours, with the ratio ours/paper."),
    by_k: bool = typer.Option(False, "--by-k", help="Show loss against the ATN window k (the k-ablation view) whatever the sweep."),
    final: bool = typer.Option(False, "--final", help="Also show the final (last evaluation) losses."),
    fmt: Annotated[Optional[str], options.output_format(("table", "markdown", "csv", "json", "latex"),
                                                        ", or what --output's suffix says")] = None,
    output: Annotated[Optional[Path], options.output_file("the report (instead of the terminal)")] = None,
    plots_dir: Annotated[Optional[Path], options.out_dir("the figures (PNG and SVG), also written when given")] = None,
    verdicts: bool = typer.Option(False, "--verdicts", help="Also judge the paper's claims on these runs. Each comparison shows n, means and CIs, Hedges' g, P(lower < higher) with a bootstrap interval, the seeds that left the baseline, Welch's p (and m·p, m the claims file's comparisons), the processor classes of the seeds and the seeds per side 80% power would need. " + RULE),
    baseline_margin: float = typer.Option(0.05, "--baseline-margin", help="A row is 'at baseline' (learned nothing) when no seed gets more than this fraction below the task's no-memory baseline."),
    claims_file: Optional[Path] = typer.Option(None, "--claims", metavar="FILE", help="Test your own claims (a YAML file like atnbench/report/paper_claims.yaml: 'ATN < LN on my task') instead of the paper's; implies --verdicts."),
    store: options.Store = options.STORE,
    include: options.Include = None,
    plots_old: Optional[Path] = options.deprecated_flag("--plots", "--out-dir", metavar="DIR"),
    **filters,
):
    """The results store as the ATN paper's tables, with the paper's values beside ours.

    One row per model and setting (runs that differ in nothing but the seed), min train and min
    validation loss as mean ± std over seeds, the best per column in bold green. Statistics:
    [bold]min train[/] = the lowest, over evaluations, of the mean training-minibatch loss since
    the previous evaluation (the paper's attained minimum); [bold]min validation[/] = the lowest
    validation loss over evaluations; [bold]final[/] = at the last evaluation; [bold]test at best
    val.[/] = the test loss at the evaluation with the lowest validation loss (real-data tasks).

    Example: [bold]atnbench report --task copying --paper[/]  ·  [bold]atnbench report --sweep k-ablation --out-dir figs[/]
    """
    task, T, sweep, norm, since = (filters[key] for key in ("task", "T", "sweep", "norm", "since"))
    from atnbench.report.aggregate import k_ablations
    from atnbench.report.export import export, format_for
    from atnbench.report.render import group_view, k_ablation_view, rich_view

    from atnbench.run.outputs import check_output_dir, check_output_file
    from atnbench.report.verdicts import check_margin, read_family

    plots = options.deprecated(plots_old, "--plots", "--out-dir", plots_dir)
    fmt = format_for(fmt, str(output) if output is not None else None)
    margin = check_margin(baseline_margin)
    verdicts = verdicts or claims_file is not None
    user_claims = read_family(claims_file) if claims_file is not None else None  # a bad file: one line, now
    if verdicts and fmt not in ("table", "markdown", "json"):
        fail(f"--verdicts: choose --format table, markdown or json (not {fmt})")
    if output is not None:
        check_output_file(output, "--output", store=store)
    if plots is not None:
        check_output_dir(plots, "--plots" if plots_old is not None else "--out-dir")
    groups, path, selected, total = load_groups(store, task, T, sweep, norm, since)
    k_view = by_k or _is_k_sweep(sweep)
    views = []
    if k_view:
        views = [k_ablation_view(view, with_paper=paper, baseline_margin=margin) for view in k_ablations(groups)]
        if not views:
            err.print("no ATN runs with a window k among the selected runs; showing the model tables instead")
    if not views:
        views = [group_view(group, with_paper=paper, final=final, baseline_margin=margin) for group in groups]

    to_stdout = output is None and fmt != "table"  # machine-readable output owns stdout
    console = err if to_stdout else out

    def say(message: str) -> None:
        console.print(Text(message), soft_wrap=True)

    meta = {"store": str(path), "filters": {"task": task, "T": T, "sweep": sweep, "norm": norm, "since": since},
            "paper": paper, "runs_selected": selected, "runs_in_store": total}
    plans = _studies(path) if verdicts else []
    claims = _verdicts(groups, margin, user_claims, plans) if verdicts else None
    if claims is not None and fmt == "json":
        from dataclasses import asdict

        from atnbench.report.verdict_tables import verdict_records

        meta["verdicts"] = verdict_records(*claims)
        meta["studies"] = [asdict(plan) for plan in plans]
    if output is not None:
        text = export(views, fmt, meta) + (_verdicts_markdown(claims, plans, user_claims) if claims and fmt == "markdown" else "")
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
        say(f"wrote {output}")
    elif fmt == "table":
        out.print(Text(f"atnbench report · {path} · {selected} of {total} runs selected "
                       f"{filters_text(task, T, sweep, norm, since)}", style="dim"), soft_wrap=True)
        # the one width rule (cli.app): piped, the tables get the width they need; in a
        # terminal a table too wide for it is stacked (render.stacked_table)
        for view in views:
            out.print(rich_view(view, plain=out.color_system is None, width=out.width, console=out))
        if claims is not None:
            from atnbench.report.verdict_tables import rich_verdicts

            out.print(rich_verdicts(*claims, family_name=user_claims.name if user_claims else None))
            for plan in plans:
                out.print(Text(plan.line(), style="dim"), soft_wrap=True)
    else:
        sys.stdout.write(export(views, fmt, meta) + (_verdicts_markdown(claims, plans, user_claims) if claims and fmt == "markdown" else ""))
        sys.stdout.flush()
    if plots is not None:
        _write_plots(groups, plots, k_view, say)


def _verdicts(groups, margin: float, family=None, studies=()):
    """(results, claims without runs) for the paper's claims (or the user's) on these groups and
    the studies the store records."""
    from atnbench.report.verdicts import evaluate, paper_family

    return evaluate(family if family is not None else paper_family(), groups, margin=margin, studies=studies)


def _verdicts_markdown(claims, plans, family=None) -> str:
    from atnbench.report.verdict_tables import markdown_verdicts

    return ("\n" + markdown_verdicts(*claims, family_name=family.name if family else None)
            + "".join(f"\n- {plan.line()}\n" for plan in plans))


def _studies(path: Path) -> list:
    """The studies the store records (``sweep --until-decided``)."""
    from atnbench.report import study

    with ResultsStore.open_read_only(path) as results:
        return study.load(results)


@app.command()
@user_errors
@with_filters("task", "T", "sweep", "norm", "since")
def plot(
    by_k: bool = typer.Option(False, "--by-k", help="Draw the k-ablation figure even with a single k."),
    out_dir: Annotated[Optional[Path], options.out_dir("the PNG and SVG files (default: atnbench-results/plots)")] = None,
    store: options.Store = options.STORE,
    bench: Optional[Path] = typer.Option(None, "--bench", metavar="FILE", dir_okay=False,
                                         help="Also draw the cost figure from these `atnbench bench --output` "
                                              "records (JSON); alone, only that figure."),
    out_old: Optional[Path] = options.deprecated_flag("--out", "--out-dir", metavar="DIR"),
    **filters,
):
    """Write the figures only: loss curves, the k-ablation and the cost per model.

    Loss curves per task and T (mean and min-max band over seeds, the paper's minima as
    stars), the k-ablation (loss against k, LN and LSTM as references, the paper's k) and,
    from `atnbench bench` records, the cost per model.

    Example: [bold]atnbench plot --task copying --out-dir figs[/]  ·  [bold]atnbench bench --output b.json && atnbench plot --bench b.json[/]
    """
    task, T, sweep, norm, since = (filters[key] for key in ("task", "T", "sweep", "norm", "since"))
    from atnbench.run.outputs import check_output_dir
    from atnbench.report.plots import cost_figure, read_bench_records

    out_dir = options.deprecated(out_old, "--out", "--out-dir", out_dir) or Path("atnbench-results") / "plots"
    check_output_dir(out_dir, "--out" if out_old is not None else "--out-dir")
    say = lambda message: out.print(Text(message), soft_wrap=True)  # noqa: E731
    # Every input is read before anything is written: a bad store after --bench leaves no files.
    records = read_bench_records(bench) if bench is not None else None
    only_cost = records is not None and (task, T, sweep, norm, since) == (None,) * 5 and not Path(store).is_file()
    groups = None if only_cost else load_groups(store, task, T, sweep, norm, since)[0]
    paths = []
    if records is not None:
        paths += cost_figure(records, out_dir)
        for path in paths:
            say(f"wrote {path}")
    if groups is not None:
        paths += _write_plots(groups, out_dir, by_k or _is_k_sweep(sweep), say)
    if not paths:
        raise typer.Exit(1)

"""``atnbench report`` (the paper's tables from the results store, exports, figures) and
``atnbench plot`` (the figures only). The flags, parsed; the work is ``atnbench.report.command``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from atnbench.cli import options
from atnbench.cli.app import app, out, user_errors
from atnbench.cli.run_flags import with_filters
from atnbench.report.rule import RULE

Paper = Annotated[bool, typer.Option(
    "--paper", help="Set the paper's published values (Tables 1-5) beside ours, with the ratio ours/paper.")]
ByK = Annotated[bool, typer.Option(
    "--by-k", help="Show loss against the ATN window k (the k-ablation view, final losses included) whatever the sweep.")]
Final = Annotated[bool, typer.Option("--final", help="Also show the final (last evaluation) losses.")]
Format = Annotated[Optional[str], options.output_format(("table", "markdown", "csv", "json", "latex"),
                                                        ", or what --output's suffix says")]
Output = Annotated[Optional[Path], options.output_file("the report (instead of the terminal)")]
PlotsDir = Annotated[Optional[Path], options.out_dir("the figures (PNG and SVG), also written when given")]
Verdicts = Annotated[bool, typer.Option(
    "--verdicts", help="Also judge the paper's claims on these runs. Each comparison shows n, means and CIs, Hedges' g, "
                       "P(lower < higher) with a bootstrap interval, the seeds that left the baseline, Welch's p (and "
                       "m·p, m the claims file's comparisons), the processor classes of the seeds and the seeds per "
                       "side 80% power would need. " + RULE)]
BaselineMargin = Annotated[float, typer.Option(
    "--baseline-margin", help="A row is 'at baseline' (learned nothing) when no seed gets more than this fraction "
                              "below the task's no-memory baseline.")]
Claims = Annotated[Optional[Path], typer.Option(
    "--claims", metavar="FILE", help="Test your own claims (a YAML file like atnbench/report/paper_claims.yaml: "
                                     "'ATN < LN on my task') instead of the paper's; implies --verdicts.")]


@app.command()
@user_errors
@with_filters("task", "T", "sweep", "norm", "since")
def report(paper: Paper = False, by_k: ByK = False, final: Final = False, fmt: Format = None, output: Output = None,
           plots_dir: PlotsDir = None, verdicts: Verdicts = False, baseline_margin: BaselineMargin = 0.05,
           claims_file: Claims = None, store: options.Store = options.STORE, include: options.Include = None,
           plots_old: Optional[Path] = options.deprecated_flag("--plots", "--out-dir", metavar="DIR"), **filters):
    """The results store as the ATN paper's tables, with the paper's values beside ours.

    One row per model and setting (runs that differ in nothing but the seed), min train and min
    validation loss as mean ± std over seeds, the best per column in bold green. Statistics:
    [bold]min train[/] = the lowest, over evaluations, of the mean training-minibatch loss since
    the previous evaluation (the paper's attained minimum); [bold]min validation[/] = the lowest
    validation loss over evaluations; [bold]final[/] = at the last evaluation; [bold]test at best
    val.[/] = the test loss at the evaluation with the lowest validation loss (real-data tasks).

    Example: [bold]atnbench report --task copying --paper[/]  ·  [bold]atnbench report --sweep k-ablation --out-dir figs[/]
    """
    # a missing store is left to report.load: every flag (a norm or task typo, the claims file) is named first
    options.check_store_early(store)
    from atnbench.report.command import ReportRequest, report_command

    report_command(ReportRequest(
        store=store, filters=filters, paper=paper, by_k=by_k, final=final, fmt=fmt, output=output,
        plots=options.deprecated(plots_old, "--plots", "--out-dir", plots_dir),
        plots_flag="--plots" if plots_old is not None else "--out-dir", verdicts=verdicts,
        baseline_margin=baseline_margin, claims_file=claims_file))


@app.command()
@user_errors
@with_filters("task", "T", "sweep", "norm", "since")
def plot(
    by_k: bool = typer.Option(False, "--by-k", help="Draw the k-ablation figure even with a single k."),
    out_dir: Annotated[Optional[Path], options.out_dir("the PNG and SVG files (default: atnbench-results/plots)")] = None,
    store: options.Store = options.STORE,
    bench: Optional[Path] = typer.Option(None, "--bench", metavar="FILE", dir_okay=False,
                                         help="Also draw the cost figure from these `atnbench bench --output` "
                                              "records (JSON); alone (no filter, no --store), only that figure."),
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
    from atnbench.report.command import is_k_sweep, write_figures
    from atnbench.report.load import load_groups
    from atnbench.report.plots import cost_figure, read_bench_records

    out_dir = options.deprecated(out_old, "--out", "--out-dir", out_dir) or Path("atnbench-results") / "plots"
    check_output_dir(out_dir, "--out" if out_old is not None else "--out-dir")
    say = lambda message: out.print(Text(message), soft_wrap=True)  # noqa: E731
    # Every input is read before anything is written: a bad store after --bench leaves no files.
    records = read_bench_records(bench) if bench is not None else None
    # the cost figure alone where no store or filter was named (the help's "alone"), whether or not
    # the default store is there; a store named and not there is one line, as elsewhere
    default_store = Path(store).expanduser().absolute() == Path(options.STORE).absolute()
    only_cost = records is not None and (task, T, sweep, norm, since) == (None,) * 5 and default_store
    groups = None if only_cost else load_groups(store, task, T, sweep, norm, since)[0]
    paths = []
    if records is not None:
        paths += cost_figure(records, out_dir)
        for path in paths:
            say(f"wrote {path}")
    if groups is not None:
        paths += write_figures(groups, out_dir, by_k or is_k_sweep(sweep), say)
    if not paths:
        raise typer.Exit(1)

"""``atnbench stats``, ``atnbench invariances`` and ``atnbench gradcheck``: why ATN behaves differently."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.text import Text

from atnbench.cli import options
from atnbench.cli.app import app, finite, out, user_errors
from atnbench.cli.run_flags import with_settings
from atnbench.errors import UserError
from atnbench.settings import RUN_SETTINGS
from atnbench.tables import FitTable


Iters = Annotated[int, typer.Option("--iters", help="Training steps before the recorded iteration (0: at initialisation).")]
Hidden = Annotated[Optional[int], typer.Option("--hidden", help="Hidden size (default: the adding preset's, 60).")]
BatchSize = Annotated[Optional[int], typer.Option("--batch-size", help="Batch size (default: the preset's, 50).")]
StatsOut = Annotated[Optional[Path], options.out_dir("the figures and CSV (default: atnbench-results/stats)")]
BIAS_PLACEMENT = tuple(setting for setting in RUN_SETTINGS if setting.param == "bias_inside")  # run's own flag
# the one --store, read only with --from-run here: said in the help, not found out from a refusal
RunsStore = Annotated[Path, typer.Option("--store", metavar="PATH", parser=options.store_path,
                                         help="Results database (SQLite) that holds the --from-run runs.")]
FromRun = Annotated[Optional[list[str]], typer.Option(
    "--from-run", metavar="RUN_ID", help="Use this finished run's kept model (its best-validation weights) instead of "
                                         "training (repeatable; an id prefix is enough).")]


@app.command()
@user_errors
@with_settings(BIAS_PLACEMENT, after="quiet")
def stats(k: Annotated[str, options.k_list(", compared with LN")] = "5,25,55",
          T: Annotated[int, typer.Option("--T", min=1, help="Adding-problem sequence length.")] = 75,
          iters: Iters = 100, seed: options.Seed = 0, hidden: Hidden = None, batch_size: BatchSize = None,
          out_dir: StatsOut = None, store: RunsStore = options.STORE, from_run: FromRun = None,
          device: options.Device = options.DEVICE, threads: options.Threads = options.THREADS,
          quiet: options.Quiet = False,
          out_old: Optional[Path] = options.deprecated_flag("--out", "--out-dir", metavar="DIR"), **settings):
    """Post-normalization mean and variance over time (ATN paper Sect. 5.2, Fig. 6).

    Trains LN and ATN(k) LSTMs without trainable gain/bias on the adding problem (a short budget:
    --iters), then records one training iteration through probes on every normalization.

    Where the LSTM bias sits is a reading of Sect. 5.2: inside by default (the earlier experiments'
    placement), outside with --bias-outside (eq. 14's).

    Example: [bold]atnbench stats --k 5,25,55 --T 75 --iters 100[/]
    """
    from atnbench.analysis.command import StatsRequest, stats_command

    options.check_threads(threads)
    if store != options.STORE and not from_run:  # a store given to be read, and nothing would read it
        raise UserError(f"--store {store}: stats reads a store only with --from-run RUN_ID (that run's kept "
                        "model); without it, it trains its own models and reads no store")
    bias_inside = settings["bias_inside"]
    if from_run and bias_inside is not None:
        raise UserError("--bias-inside/--bias-outside places the bias of the models stats trains; a --from-run "
                        "model keeps its own placement: give one of the two")
    stats_command(StatsRequest(
        windows=options.whole_numbers(k, "--k"), T=T, iters=iters, seed=seed, hidden=hidden, batch_size=batch_size,
        out_dir=Path(options.deprecated(out_old, "--out", "--out-dir", out_dir) or Path("atnbench-results") / "stats"),
        out_flag="--out" if out_old is not None else "--out-dir", store=store, from_run=from_run, device=device,
        threads=threads, quiet=quiet, bias_inside=bias_inside))


@app.command()
@user_errors
def invariances(
    fmt: Annotated[Optional[str], options.output_format(("table", "json"), "; json: only the list of records")] = None,
    seed: options.Seed = 0,
    json_old: bool = options.deprecated_flag("--json", "--format json", is_flag=True),
):
    """Table 6 of the ATN paper (Appendix B), measured: which transformations leave each norm's output unchanged.

    Layer level: norm(W x) as in Ba et al.'s Table 1; LSTM level: a NormLSTM's h with the
    transformation on W_x and x. float64, eps 0; paper's claim beside each measured cell.
    """
    from atnbench.analysis import invariances as inv

    fmt = options.check_format(options.deprecated("json" if json_old else None, "--json", "--format json", fmt),
                               ("table", "json"))
    records = inv.measure_all(seed)
    if fmt == "json":
        print(json.dumps([r.to_dict() for r in records]))
        return
    disagreements = [r for r in records if r.agrees is False]
    for level in inv.LEVELS:
        out.print(invariance_table(level, [r for r in records if r.level == level]))
    if disagreements:
        out.print(Text(f"{len(disagreements)} measured cell(s) disagree with Table 6:", style="bold red"))
        for r in disagreements:
            out.print(f"  {r.level} {r.norm}: {r.transformation}: measured "
                      f"{'Yes' if r.invariant else 'No'}, paper {'Yes' if r.paper else 'No'}")
    else:
        out.print("every measured cell with a claim in Table 6 agrees with the paper")


def invariance_table(level: str, records: list) -> FitTable:
    """Table 6 at one level: a row per transformation, a column per norm, each cell measured /
    the paper's claim over the largest output change."""
    from atnbench.analysis import invariances as inv

    norms = list(dict.fromkeys(r.norm for r in records))
    what = "norm(W x), Ba et al.'s layer" if level == "layer" else "NormLSTM output h, transformation on W_x and x"
    table = FitTable(title=f"Table 6 measured: {level} level ({what})", lift=False,
                     caption=f"each cell: measured / paper's claim (-: none), then the max |output change|; "
                             f"invariant = change < {inv.TOLERANCE:g}; ! (red): disagrees with the paper")
    table.add_column("transformation")
    for norm in norms:
        table.add_column(norm.upper(), justify="center")
    for transformation in inv.TRANSFORMATIONS:
        cells = []
        for norm in norms:
            r = next(x for x in records if x.norm == norm and x.transformation == transformation)
            measured = "Yes" if r.invariant else "No"
            paper = "-" if r.paper is None else ("Yes" if r.paper else "No")
            style = "bold white on red" if r.agrees is False else ("green" if r.agrees else "")
            # "!" marks a disagreement in words too: piped (no colour) it was told by colour only
            cell = Text(("!" if r.agrees is False else "") + measured, style=style)
            cell.append(f"/{paper}", style=style or "dim")
            cell.append(f"\n{r.max_deviation:.0e}", style="dim")
            if not r.clear:
                cell.append(" ?", style="yellow")
            cells.append(cell)
        table.add_row(transformation, *cells)
    return table


@app.command()
@user_errors
def gradcheck(
    k: Annotated[str, options.k_list()] = "1,3,7",
    T: int = typer.Option(20, "--T", help="Sequence length."),
    n: int = typer.Option(8, "--n", help="Features per step."),
    eps: float = typer.Option(1e-5, "--eps", help="Epsilon inside the square root.", callback=finite),
    seed: options.Seed = 0,
    tol: float = typer.Option(1e-8, "--tol", help="Largest error that passes.", callback=finite),
):
    """Proposition 1 (eqs. 11-13, in the form of eq. A10): closed-form dy_i(t)/da_i(t-m) vs autograd, float64.

    Prints the maximum error per m; exit code 1 if any exceeds --tol.
    """
    from atnbench.analysis.gradcheck import check
    from atnbench.run.resources import Estimate, check_fits

    if T < 1:
        raise UserError(f"--T must be >= 1, got {T}")
    if n < 1:
        raise UserError(f"--n must be >= 1, got {n}")
    if eps < 0:
        raise UserError(f"--eps must be >= 0, got {eps}")
    if tol < 0:
        raise UserError(f"--tol must be >= 0, got {tol}")
    windows = options.whole_numbers(k, "--k")
    # autograd's full Jacobian dy/da: (T n)^2 float64 entries, plus the closed form's and a copy
    check_fits(Estimate(3 * 8 * (T * n) ** 2, f"T={T}, n={n}: a (T n) x (T n) Jacobian in float64"))
    results = [check(window, T, n, eps, seed) for window in windows]
    table = FitTable(title=f"Proposition 1 vs autograd (float64, T={T}, n={n}, eps={eps:g})", key_columns=2,
                     caption="error = max over t, i of |closed form - autograd|; eq. 13 as typeset "
                             "(bracket closed early) for comparison")
    for column in ("k", "m", "entries", "max error (A10)", "max error (eq. 13 typeset)"):
        table.add_column(column, justify="right")
    errors = [e.max_error for result in results for e in result.per_m]
    for result in results:
        for e in result.per_m:
            style = "" if e.max_error <= tol else "bold red"  # NaN too: it passes no tolerance
            table.add_row(str(e.k), str(e.m), str(e.entries), Text(f"{e.max_error:.2e}", style=style),
                          f"{e.typeset_max_error:.2e}")
    out.print(table)
    worst, outside = _worst(errors), _worst([r.outside_window_max for r in results])
    out.print(f"max |dy(t)/da(u)| outside the window (u > t or u <= t-k): {outside:.2e}")
    passed = worst <= tol and outside <= tol
    out.print(Text(f"{'PASS' if passed else 'FAIL'}: max error {worst:.2e} (tolerance {tol:g})",
                   style="bold green" if passed else "bold red"))
    if not passed:
        raise typer.Exit(1)


def _worst(errors: list[float]) -> float:
    """The largest error, NaN where any is NaN (``max`` would pass over it: NaN compares false)."""
    return next((e for e in errors if math.isnan(e)), max(errors, default=0.0))

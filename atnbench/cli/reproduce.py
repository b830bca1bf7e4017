"""``atnbench reproduce``: the ATN paper's evaluation in one resumable command, and its report."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.text import Text

from atnbench.cli import options
from atnbench.cli.app import app, err, fail, finite, out, say, user_errors
from atnbench.errors import UserError
from atnbench.reproduce import PARTS
from atnbench.tables import FitTable

DEFAULT_SEEDS = "0,1,2"


@app.command()
@user_errors
def reproduce(
    seeds: options.Seeds = None,
    seeds_for_power: Optional[float] = typer.Option(
        None, "--seeds-for-power", metavar="POWER", callback=finite,
        help="Plan each part's seeds from the store's pilot runs (see `atnbench sweep --help`); a part "
             "without pilot runs keeps the default seeds."),
    max_seeds: int = typer.Option(40, "--max-seeds", min=2, help="The most seeds --seeds-for-power may plan."),
    budget: Optional[str] = typer.Option(None, "--budget", help="Fraction (0, 1] of each part's protocol: 0.25 for every part, or a default and per-part values, e.g. 0.25,table1-copying=1 (default: 1, the full protocol)."),
    only: Optional[str] = typer.Option(None, "--only", help=f"Comma list of parts: {', '.join(PARTS)} (the real-data parts run where their data is prepared)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", help="Runs at once in local processes (default: cores / threads)."),
    threads: options.Threads = options.THREADS,
    backend: str = typer.Option("local", "--backend", help="local (this machine) or ray (a Ray cluster)."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address HOST:PORT."),
    device: options.Device = options.DEVICE,
    store: options.Store = options.STORE,
    out_dir: Annotated[Path, options.out_dir("report.md, report.html and the figures")] = Path("atnbench-results") / "report",
    dry_run: bool = typer.Option(False, "--dry-run", help="Show each part's runs, what the store holds and a rough cost; run nothing."),
    report_only: bool = typer.Option(False, "--report-only", help="Write the report from what the store holds; run nothing."),
    keep_stale: bool = typer.Option(False, "--keep-stale", help="Count finished runs made by other code instead of re-running them."),
    quiet: options.Quiet = False,
):
    """Run the ATN paper's evaluation (Tables 1-3, the k-ablation, the normalization comparison,
    the bias placement; Table 4 and Fig. 5 where their data is prepared) and write a report
    folder: Markdown with figures and one self-contained HTML file, the paper's values beside
    ours and verdicts on its claims.

    Resumable: run the same command again after an interruption; finished runs are skipped.

    Example: [bold]atnbench reproduce --budget 0.05 --seeds 0,1 --dry-run[/]
    """
    from atnbench.outputs import check_output_dir
    from atnbench.reproduce import available, parse_budgets, plan, select_parts
    from atnbench.sweep import load_sweep, parse_seeds, run_sweep
    from atnbench.zoo import resolve_device

    # every input checked before the first note or run: a mistake is one line, and found now
    if seeds_for_power is not None and seeds is not None:
        fail("--seeds-for-power plans the seeds; give it or --seeds, not both")
    seed_list = parse_seeds(seeds if seeds is not None else DEFAULT_SEEDS)
    options.check_threads(threads)
    default_budget, per_part = parse_budgets(budget)
    selected = select_parts(only)
    options.check_backend(backend, address, workers)
    if backend == "ray":
        from atnbench.sweep import ray_backend

        ray_backend.import_ray()  # the install hint now, not after the first part's header
        if not (dry_run or report_only):
            ray_backend.check_address(address)  # and an address where no cluster listens
    overrides = {"threads": threads, "device": resolve_device(device).type}
    # a report needs only the store: the real-data parts' data matters only for running them
    parts, missing = (selected, []) if report_only else available(selected)
    if not parts:
        fail("no part can run here: " + "; ".join(why for _, why in missing))
    planned = plan(parts, seed_list, default_budget, per_part, overrides)
    if seeds_for_power is not None:
        planned = _with_planned_seeds(planned, store, seeds_for_power, max_seeds, not (dry_run or report_only),
                                      lambda part, seeds: plan([part], seeds, default_budget, per_part, overrides))
    check_output_dir(out_dir, "--out-dir")
    _check_store(store, write=not (dry_run or report_only), must_exist=report_only)
    for part, why in missing:
        say(err, f"part {part.name} left out: {why}", prefix="note: ")
    if dry_run:
        _dry_run(planned, store)
        return
    if not report_only:
        failed = 0
        for item in planned:
            if not quiet:
                err.print(f"[bold]{item.part.name}[/]: {len(item.runs)} runs at budget {item.budget:g} "
                          f"({item.part.what})")
            result = run_sweep(load_sweep(item.part.name), item.runs, store, backend=backend, workers=workers,
                               threads=threads, device=device, address=address, quiet=quiet, keep_stale=keep_stale)
            failed += len(result.failures)
            if result.signal is not None:
                err.print("stopped: run the same command again to resume")
                raise typer.Exit(result.exit_code)
    from atnbench.report.document import write_report

    command = "atnbench " + " ".join(shlex.quote(arg) for arg in sys.argv[1:]) if sys.argv[1:] else "atnbench reproduce"
    md_path, html_path = write_report(store, planned, out_dir, [command])
    out.print(f"report: {md_path} and {html_path}", highlight=False, soft_wrap=True)
    if not report_only and failed:
        fail(f"{failed} run(s) failed; see `atnbench runs list --status failed`", code=1)


def _with_planned_seeds(planned: list, store: Path, power: float, max_seeds: int, record_it: bool, replan) -> list:
    """Each part with the seeds its claims need (atnbench.report.plan); a part without pilot runs
    in the store keeps the default seeds, with a note."""
    from atnbench.report import plan as planning
    from atnbench.sweep import load_sweep

    out = []
    for item in planned:
        try:
            seeds, line = planning.seeds_for(store, item.part.name, load_sweep(item.part.name).task,
                                             {run.config.T for run in item.runs}, power, max_seeds, record_it)
        except UserError as error:
            say(err, f"part {item.part.name}: {error}; it keeps seeds {DEFAULT_SEEDS}", prefix="note: ")
            out.append(item)
            continue
        err.print(Text(f"{item.part.name}: {line}"), soft_wrap=True)
        out += replan(item.part, seeds)
    return out


def _check_store(store: Path, write: bool, must_exist: bool) -> None:
    """The store's problems as one line before anything runs or is written. Training creates a
    missing store (as the first part's sweep would, after its header line); a dry run only reads
    it (none yet: nothing is in it); --report-only reads it and needs it."""
    from atnbench.store import ResultsStore, StoreMissing

    if write:
        ResultsStore(store).close()
        return
    try:
        ResultsStore.open_read_only(store).close()
    except StoreMissing:
        if must_exist:
            raise


def _dry_run(planned, store: Path) -> None:
    from atnbench.cli.sweep import _duration, _store_statuses
    from atnbench.sweep import estimate, measured_rates

    rates = measured_rates(store)
    table = FitTable(title="atnbench reproduce: the plan", lift=False)
    for column in ("part", "what", "budget", "runs", "in store", "left", "cost (1 thread)"):
        table.add_column(column, justify="right" if column in ("budget", "runs", "in store", "left") else "left",
                         no_wrap=column == "part")
    every_left = []
    for item in planned:
        statuses = _store_statuses(store, item.runs)
        left = [run.config for run in item.runs if statuses.get(run.run_id) not in ("done", "diverged")]
        every_left += left
        cost = estimate(left, rates)
        table.add_row(item.part.name, item.part.what, f"{item.budget:g}", str(len(item.runs)),
                      str(len(item.runs) - len(left)), str(len(left)),
                      _duration(cost.seconds) + ("" if cost.measured == cost.runs else " (rough)"))
    overall = estimate(every_left, rates)
    table.caption = f"left to run: {_duration(overall.seconds)} of single-thread CPU time ({overall.note()})"
    out.print(table)

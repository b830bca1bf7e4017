"""``atnbench reproduce``: the ATN paper's evaluation in one resumable command, and its report.
The flags, parsed; the work is ``atnbench.reproduce.command``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from atnbench.cli import options
from atnbench.cli.app import app, finite, user_errors
from atnbench.cli.sweep import Backend, PlanOnly, Workers
from atnbench.reproduce.command import ReproduceRequest, reproduce_command
from atnbench.reproduce.parts import PARTS

UntilDecided = Annotated[bool, typer.Option(
    "--until-decided", help="Run each part whose sweep holds claims of the paper as a confirmatory study (see "
                            "`atnbench sweep --help`): a plan recorded before its runs, fresh seeds in looks, each look "
                            "recorded; a part without claims at its protocol keeps its seeds.")]
Looks = Annotated[Optional[str], typer.Option(
    "--looks", metavar="N,N,...", help="Seeds per configuration at each look (default 6,12,18,24,30).")]
SeedsForPower = Annotated[Optional[float], typer.Option(
    "--seeds-for-power", metavar="POWER", callback=finite,
    help="Size each part's study from the store's pilot runs (see `atnbench sweep --help`); implies --until-decided.")]
MaxSeeds = Annotated[int, typer.Option("--max-seeds", min=5, help="The most seeds --seeds-for-power may plan.")]
Budget = Annotated[Optional[str], typer.Option(
    "--budget", "--scale", help="Fraction (0, 1] of each part's protocol: 0.25 for every part, or a default and per-part values, "
                     "e.g. 0.25,table1-copying=1 (default: 1, the full protocol).")]
Only = Annotated[Optional[str], typer.Option(
    "--only", help=f"Comma list of parts: {', '.join(PARTS)} (the real-data parts run where their data is prepared).")]
Address = Annotated[Optional[str], typer.Option(
    "--address", help="Ray cluster address HOST:PORT. A token-authenticated cluster (Ray's default) needs "
                      "RAY_AUTH_MODE=token and its token: docs/ray.md. Ray's own log lines are hidden; "
                      "ATNBENCH_RAY_LOGS=1 shows them.")]
OutDir = Annotated[Path, options.out_dir("report.md, report.html and the figures")]
DryRun = Annotated[bool, typer.Option(
    "--dry-run", help="Show each part's runs, what the store holds and a rough cost; run nothing.")]
ReportOnly = Annotated[bool, typer.Option("--report-only", help="Write the report from what the store holds; run nothing.")]
KeepStale = Annotated[bool, typer.Option(
    "--keep-stale", help="Count finished runs made by other code instead of re-running them.")]


@app.command()
@user_errors
def reproduce(seeds: options.Seeds = None, until_decided: UntilDecided = False, looks: Looks = None,
              seeds_for_power: SeedsForPower = None, max_seeds: MaxSeeds = 40, budget: Budget = None, only: Only = None,
              workers: Workers = None, threads: options.Threads = options.THREADS, backend: Backend = "local",
              address: Address = None, device: options.Device = options.DEVICE, store: options.Store = options.STORE,
              out_dir: OutDir = Path("atnbench-results") / "report", dry_run: DryRun = False,
              plan_only: PlanOnly = False, report_only: ReportOnly = False, keep_stale: KeepStale = False, quiet: options.Quiet = False):
    """Run the ATN paper's evaluation (Tables 1-3, the k-ablation, the normalization comparison,
    the bias placement; Table 4 and Fig. 5 where their data is prepared) and write a report
    folder: Markdown with figures and one self-contained HTML file, the paper's values beside
    ours and verdicts on its claims.

    Resumable: run the same command again after an interruption; finished runs are skipped.

    Example: [bold]atnbench reproduce --budget 0.05 --seeds 0,1 --dry-run[/]
    """
    options.check_store_early(store)
    options.check_threads(threads)
    options.check_backend(backend, address, workers)
    code = reproduce_command(ReproduceRequest(
        store=store, out_dir=out_dir, seeds=seeds, until_decided=until_decided, looks=looks,
        seeds_for_power=seeds_for_power, max_seeds=max_seeds, budget=budget, only=only, workers=workers,
        threads=threads, backend=backend, address=address, device=device, dry_run=dry_run, plan_only=plan_only,
        report_only=report_only,
        keep_stale=keep_stale, quiet=quiet))
    if code:
        raise typer.Exit(code)

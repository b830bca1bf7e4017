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
from atnbench.reproduce.parts import PARTS
from atnbench.tables import FitTable

DEFAULT_SEEDS = "0,1,2"


@app.command()
@user_errors
def reproduce(
    seeds: options.Seeds = None,
    until_decided: bool = typer.Option(
        False, "--until-decided",
        help="Run each part whose sweep holds claims of the paper as a confirmatory study (see `atnbench sweep "
             "--help`): a plan recorded before its runs, fresh seeds in looks, each look recorded; a part "
             "without claims at its protocol keeps its seeds."),
    looks: Optional[str] = typer.Option(None, "--looks", metavar="N,N,...",
                                        help="Seeds per configuration at each look (default 6,12,18,24,30)."),
    seeds_for_power: Optional[float] = typer.Option(
        None, "--seeds-for-power", metavar="POWER", callback=finite,
        help="Size each part's study from the store's pilot runs (see `atnbench sweep --help`); implies "
             "--until-decided."),
    max_seeds: int = typer.Option(40, "--max-seeds", min=5, help="The most seeds --seeds-for-power may plan."),
    budget: Optional[str] = typer.Option(None, "--budget", help="Fraction (0, 1] of each part's protocol: 0.25 for every part, or a default and per-part values, e.g. 0.25,table1-copying=1 (default: 1, the full protocol)."),
    only: Optional[str] = typer.Option(None, "--only", help=f"Comma list of parts: {', '.join(PARTS)} (the real-data parts run where their data is prepared)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", help="Runs at once in local processes (default: cores / threads)."),
    threads: options.Threads = options.THREADS,
    backend: str = typer.Option("local", "--backend", help="local (this machine) or ray (a Ray cluster)."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address HOST:PORT. A token-authenticated cluster "
                                          "(Ray's default) needs RAY_AUTH_MODE=token and its token: docs/ray.md. Ray's own log "
                                          "lines are hidden; ATNBENCH_RAY_LOGS=1 shows them."),
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
    from atnbench.run.outputs import check_output_dir
    from atnbench.reproduce.parts import available, parse_budgets, plan, select_parts
    from atnbench.sweep import load_sweep, parse_seeds, run_sweep
    from atnbench.zoo import resolve_device

    # every input checked before the first note or run: a mistake is one line, and found now
    until_decided = until_decided or seeds_for_power is not None
    if until_decided and seeds is not None:
        fail("--until-decided runs each study's own fresh seeds; give it or --seeds, not both")
    if looks is not None and not until_decided:
        fail("--looks plans a study: give it with --until-decided")
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
    studies = {}
    if until_decided:
        planned, studies = _as_studies(planned, store, looks, seeds_for_power, max_seeds, dry_run or report_only,
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
            def run_these(runs, item=item):
                return run_sweep(load_sweep(item.part.name), runs, store, backend=backend, workers=workers,
                                 threads=threads, device=device, address=address, quiet=quiet, keep_stale=keep_stale)

            if item.part.name in studies:
                from atnbench.sweep import confirm

                code = confirm.run(studies[item.part.name], item.runs, Path(store), run_these,
                                   lambda line: err.print(Text(line), soft_wrap=True))
                failed += bool(code)
                continue
            result = run_these(item.runs)
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


def _as_studies(planned: list, store: Path, looks: Optional[str], power: Optional[float], max_seeds: int,
                dry_run: bool, replan) -> tuple[list, dict]:
    """Each part whose sweep holds claims of the paper as a study (atnbench.sweep.confirm), its
    plan said on stderr; a part without such claims keeps its seeds, with a note."""
    from dataclasses import replace

    from atnbench.report.claims import paper_family
    from atnbench.sweep import confirm, load_sweep

    out, studies = [], {}
    for item in planned:
        def expand_seeds(seeds, part=item.part):
            return [run for part_plan in replan(part, tuple(seeds)) for run in part_plan.runs]

        try:
            study, runs = confirm.prepare(item.part.name, load_sweep(item.part.name).task, expand_seeds, store,
                                          paper_family(), looks, None, power, max_seeds, dry_run,
                                          lambda line, name=item.part.name: err.print(Text(f"{name}: {line}"),
                                                                                      soft_wrap=True))
        except UserError as error:
            say(err, f"part {item.part.name}: {error}; it keeps seeds {DEFAULT_SEEDS}", prefix="note: ")
            out.append(item)
            continue
        studies[item.part.name] = study
        out.append(replace(item, runs=runs))
    return out, studies


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
    from atnbench.sweep.command import _duration, _store_statuses
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

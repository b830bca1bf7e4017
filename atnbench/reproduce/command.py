"""``atnbench reproduce`` below its flags: every input checked, the parts planned (as studies
where asked), run one after another, and the report written. The command
(``atnbench.cli.reproduce``) parses the flags into a :class:`ReproduceRequest` and calls
:func:`reproduce_command`."""

from __future__ import annotations

import shlex
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from rich.text import Text

from atnbench.errors import UserError
from atnbench.tables import FitTable, err, out, say

DEFAULT_SEEDS = "0,1,2"


@dataclass(frozen=True)
class ReproduceRequest:
    """What ``atnbench reproduce`` was asked, its flags parsed."""

    store: Path
    out_dir: Path
    seeds: Optional[str] = None
    until_decided: bool = False
    looks: Optional[str] = None
    seeds_for_power: Optional[float] = None
    max_seeds: int = 40
    budget: Optional[str] = None
    only: Optional[str] = None
    workers: Optional[int] = None
    threads: int = 1
    backend: str = "local"
    address: Optional[str] = None
    device: str = "auto"
    dry_run: bool = False
    plan_only: bool = False
    report_only: bool = False
    keep_stale: bool = False
    quiet: bool = False


def reproduce_command(request: ReproduceRequest) -> int:
    """Check, plan, run and report; the exit code (1 where a run failed; a signal's code where one
    stopped a part)."""
    from atnbench.report.document import write_report

    planned, studies = _plan(request)
    if request.dry_run or request.plan_only:
        _dry_run(planned, request.store, request.keep_stale, studied=set(studies))
        return 0
    failed = 0
    if not request.report_only:
        failed, code = _run_parts(request, planned, studies)
        if code:
            return code
    command = "atnbench " + " ".join(shlex.quote(arg) for arg in sys.argv[1:]) if sys.argv[1:] else "atnbench reproduce"
    md_path, html_path = write_report(request.store, planned, request.out_dir, [command])
    out.print(f"report: {md_path} and {html_path}", highlight=False, soft_wrap=True)
    if not request.report_only and failed:
        say(err, f"{failed} run(s) failed; see `atnbench runs list --status failed`", prefix="error: ", style="bold red")
        return 1
    return 0


def _plan(request: ReproduceRequest):
    """Every input checked before the first note or run (a mistake is one line, found now); the
    parts that can run here, planned, as studies where asked."""
    from atnbench.reproduce.parts import available, parse_budgets, plan, select_parts
    from atnbench.run.outputs import check_output_dir
    from atnbench.sweep import parse_seeds
    from atnbench.zoo import resolve_device

    until_decided = request.until_decided or request.seeds_for_power is not None
    if until_decided and request.seeds is not None:
        raise UserError("--until-decided runs each study's own fresh seeds; give it or --seeds, not both")
    if (request.looks is not None or request.plan_only) and not until_decided:
        raise UserError("--looks and --plan-only plan a study: give them with --until-decided")
    if request.plan_only and request.report_only:
        raise UserError("--plan-only records plans; --report-only writes the report: give one")
    seed_list = parse_seeds(request.seeds if request.seeds is not None else DEFAULT_SEEDS)
    default_budget, per_part = parse_budgets(request.budget)
    selected = select_parts(request.only)
    if request.backend == "ray":
        from atnbench.sweep import ray_backend

        ray_backend.import_ray()  # the install hint now, not after the first part's header
        if not (request.dry_run or request.report_only):
            ray_backend.check_address(request.address)  # and an address where no cluster listens
    overrides = {"threads": request.threads, "device": resolve_device(request.device).type}
    # a report needs only the store: the real-data parts' data matters only for running them
    parts, missing = (selected, []) if request.report_only else available(selected)
    if not parts:
        raise UserError("no part can run here: " + "; ".join(why for _, why in missing))
    planned = plan(parts, seed_list, default_budget, per_part, overrides)
    studies = {}
    if until_decided:
        planned, studies = _as_studies(planned, request.store, request.looks, request.seeds_for_power,
                                       request.max_seeds, request.dry_run or request.report_only,
                                       lambda part, seeds: plan([part], seeds, default_budget, per_part, overrides),
                                       shown=request.dry_run or request.plan_only)
    check_output_dir(request.out_dir, "--out-dir")
    _check_store(request.store, write=not (request.dry_run or request.report_only), must_exist=request.report_only)
    for part, why in missing:
        say(err, f"part {part.name} left out: {why}", prefix="note: ")
    return planned, studies


def _run_parts(request: ReproduceRequest, planned, studies) -> tuple[int, int]:
    """Each part's sweep (or study) in turn: (runs that failed, the exit code of a signal that
    stopped a part, else 0)."""
    from atnbench.sweep import load_sweep, run_sweep

    failed = 0
    for item in planned:
        if not request.quiet:
            err.print(f"[bold]{item.part.name}[/]: {len(item.runs)} runs at budget {item.budget:g} ({item.part.what})")

        def run_these(runs, item=item):
            return run_sweep(load_sweep(item.part.name), runs, request.store, backend=request.backend,
                             workers=request.workers, threads=request.threads, device=request.device,
                             address=request.address, quiet=request.quiet, keep_stale=request.keep_stale)

        if item.part.name in studies:
            from atnbench.sweep import confirm

            code = confirm.run_all(studies[item.part.name], Path(request.store), run_these,
                                   lambda line: err.print(Text(line), soft_wrap=True))
            if code >= 128:
                err.print("stopped: run the same command again to resume")
                return failed, code
            failed += bool(code)
            continue
        result = run_these(item.runs)
        failed += len(result.failures)
        if result.signal is not None:
            err.print("stopped: run the same command again to resume")
            return failed, result.exit_code
    return failed, 0


def _as_studies(planned: list, store: Path, looks: Optional[str], power: Optional[float], max_seeds: int,
                dry_run: bool, replan, shown: bool = False) -> tuple[list, dict]:
    """Each part whose sweep holds claims of the paper as a study (atnbench.sweep.confirm), its
    plan said on stderr; a part without such claims keeps its seeds, with a note. ``shown``: the
    parts' runs are those the studies' looks left may still ask for (none once a study is over),
    as `sweep --until-decided --dry-run` counts them."""
    from dataclasses import replace

    from atnbench.report.claims import paper_family
    from atnbench.sweep import confirm, load_sweep

    out, studies = [], {}
    for item in planned:
        def expand_seeds(seeds, part=item.part):
            return [run for part_plan in replan(part, tuple(seeds)) for run in part_plan.runs]

        spec = load_sweep(item.part.name)
        try:
            found = confirm.prepare(item.part.name, spec.task, spec.varied, expand_seeds, store, paper_family(), looks,
                                    None, power, max_seeds, dry_run,
                                    lambda line, name=item.part.name: err.print(Text(f"{name}: {line}"),
                                                                                soft_wrap=True))
        except UserError as error:
            say(err, f"part {item.part.name}: {error}; it keeps seeds {DEFAULT_SEEDS}", prefix="note: ")
            out.append(item)
            continue
        studies[item.part.name] = found
        out.append(replace(item, runs=[run for study, runs in found
                                       for run in (confirm.still_needed(study, runs) if shown else runs)]))
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


def _dry_run(planned, store: Path, keep_stale: bool = False, studied: set = frozenset()) -> None:
    """The plan's table; a part in ``studied`` runs a study, and counts the runs its looks left may
    still ask for (none once it is over), not those its looks used."""
    from atnbench.sweep.command import is_finished, store_statuses
    from atnbench.sweep.estimate import cpu_time_text
    from atnbench.sweep import estimate, measured_rates

    rates = measured_rates(store)
    table = FitTable(title="atnbench reproduce: the plan", lift=False)
    for column in ("part", "what", "budget", "runs", "in store", "left", "cost (1 thread)"):
        table.add_column(column, justify="right" if column in ("budget", "runs", "in store", "left") else "left",
                         no_wrap=column == "part")
    every_left = {}  # run id -> config: a run two parts share (table 1's in k-ablation) runs, and costs, once
    for item in planned:
        statuses = store_statuses(store, item.runs, keep_stale)  # as the parts will count them
        left = {run.run_id: run.config for run in item.runs if not is_finished(statuses.get(run.run_id))}
        every_left.update(left)
        cost = estimate(list(left.values()), rates)
        table.add_row(item.part.name + (" (study)" if item.part.name in studied else ""), item.part.what,
                      f"{item.budget:g}", str(len(item.runs)),
                      str(len(item.runs) - len(left)), str(len(left)),
                      cpu_time_text(cost.seconds) + ("" if cost.measured == cost.runs else " (rough)"))
    overall = estimate(list(every_left.values()), rates)
    parts_of = Counter(run_id for item in planned for run_id in {run.run_id for run in item.runs})
    shared = sum(1 for n in parts_of.values() if n > 1)
    count = f" in {len(every_left)} run{'s' if len(every_left) != 1 else ''}" if every_left else ""
    table.caption = (f"left to run: {cpu_time_text(overall.seconds)} of single-thread CPU time{count} "
                     f"({overall.note()})" + (f"; {shared} run{'s are' if shared != 1 else ' is'} in more than one "
                                             f"part (up to {max(parts_of.values())}), each counted once" if shared else "")
                     + ("; (study): the runs its looks left may still ask for, none once it is over (the runs its "
                        "looks used are not counted)" if studied else ""))
    out.print(table)

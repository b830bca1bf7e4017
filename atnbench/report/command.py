"""``atnbench report`` below its flags: the selected runs as the paper's tables (the terminal, or
an export), the verdicts on a claims file and the studies, and the figures. The command
(``atnbench.cli.report``) parses the flags into a :class:`ReportRequest` and calls
:func:`report_command`."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from rich.text import Text

from atnbench.errors import UserError
from atnbench.report.load import filters_text, load_groups
from atnbench.store import ResultsStore
from atnbench.tables import err, out

log = logging.getLogger("atnbench")  # its warnings print as "note:" lines (cli.app)


@dataclass(frozen=True)
class ReportRequest:
    """What ``atnbench report`` was asked, its flags parsed."""

    store: Path
    filters: dict = field(default_factory=dict)  # task, T, sweep, norm, since
    paper: bool = False
    by_k: bool = False
    final: bool = False
    fmt: Optional[str] = None
    output: Optional[Path] = None
    plots: Optional[Path] = None
    plots_flag: str = "--out-dir"
    verdicts: bool = False
    baseline_margin: float = 0.05
    claims_file: Optional[Path] = None


def report_command(request: ReportRequest) -> None:
    """Every input checked (format, margin, claims file, output paths) before anything is read
    or written; then the tables, the verdicts where asked, and the figures."""
    from atnbench.report.export import FORMATS, export, format_for
    from atnbench.report.claims import check_claim_tasks
    from atnbench.report.verdicts import check_margin, read_family
    from atnbench.run.outputs import check_output_dir, check_output_file, check_suffix_format

    filters, output = request.filters, request.output
    fmt = format_for(request.fmt, str(output) if output is not None else None)
    margin = check_margin(request.baseline_margin)
    verdicts = request.verdicts or request.claims_file is not None
    user_claims = read_family(request.claims_file) if request.claims_file is not None else None  # bad: one line, now
    if verdicts and fmt not in ("table", "markdown", "json"):
        raise UserError(f"--verdicts: choose --format table, markdown or json (not {fmt})")
    if output is not None:
        check_suffix_format(output, fmt, FORMATS)
        check_output_file(output, "--output", store=request.store)
    if request.plots is not None:
        check_output_dir(request.plots, request.plots_flag)
    groups, path, selected, total = load_groups(request.store, *(filters.get(key) for key in FILTERS))
    if user_claims is not None:
        check_claim_tasks(user_claims, request.claims_file, {group.task for group in groups})
        _check_claim_stats(user_claims, request.claims_file, groups)
    k_view = request.by_k or is_k_sweep(filters.get("sweep"))
    views = _views(request, groups, k_view, margin)
    console = err if output is None and fmt != "table" else out  # machine-readable output owns stdout

    def say(message: str) -> None:
        console.print(Text(message), soft_wrap=True)

    meta = {"store": str(path), "filters": {key: filters.get(key) for key in FILTERS}, "paper": request.paper,
            "runs_selected": selected, "runs_in_store": total}
    plans = _studies(path) if verdicts else []
    if verdicts:
        _note_other_versions(plans, user_claims)
    claims = _verdicts(groups, margin, user_claims, plans, _study_runs(path, plans)) if verdicts else None
    if claims is not None and fmt == "json":
        from dataclasses import asdict

        from atnbench.report.verdict_tables import verdict_records

        meta["verdicts"] = verdict_records(*claims)
        meta["studies"] = [asdict(plan) for plan in plans]
    verdict_text = _verdicts_markdown(claims, plans, user_claims) if claims and fmt == "markdown" else ""
    if claims and fmt == "table" and output is not None:  # the file holds what the terminal shows
        verdict_text = _verdicts_text(claims, plans, user_claims)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(export(views, fmt, meta) + verdict_text, encoding="utf-8")
        say(f"wrote {output}")
    elif fmt == "table":
        _print_tables(views, claims, plans, user_claims, f"atnbench report · {path} · {selected} of {total} runs "
                      f"selected {filters_text(*(filters.get(key) for key in FILTERS))}")
    else:
        sys.stdout.write(export(views, fmt, meta) + verdict_text)
        sys.stdout.flush()
    if request.plots is not None:
        write_figures(groups, request.plots, k_view, say)


FILTERS = ("task", "T", "sweep", "norm", "since")


def _views(request: ReportRequest, groups, k_view: bool, margin: float) -> list:
    """The k-ablation views where asked (or the sweep is one) and there are ATN runs with a k;
    otherwise one view per group."""
    from atnbench.report.aggregate import k_ablations
    from atnbench.report.render import group_view, k_ablation_view

    views = []
    if k_view:
        views = [k_ablation_view(view, with_paper=request.paper, baseline_margin=margin) for view in k_ablations(groups)]
        if not views:
            err.print("no ATN runs with a window k among the selected runs; showing the model tables instead")
    return views or [group_view(group, with_paper=request.paper, final=request.final, baseline_margin=margin)
                     for group in groups]


def _note_other_versions(plans, user_claims) -> None:
    """A study planned for another version of this claims file (same name, other digest: claims
    added or changed after it was planned, so another m) decides nothing here: said, once each."""
    from atnbench.report.verdicts import paper_family

    family = user_claims if user_claims is not None else paper_family()
    for plan in plans:
        if plan.family == family.name and not family.planned(plan.family_digest):
            log.warning(f"study {plan.name} was planned for another version of {family.name} (m = {plan.m}, "
                        f"digest {plan.family_digest[:12]}, this file's {family.tests_digest[:12]}): its looks decide "
                        f"nothing for this file, whose runs are numbers only")


def _print_tables(views, claims, plans, user_claims, heading: str) -> None:
    """The tables on the terminal, under one dim line naming the store and the filters. The one
    width rule (cli.app): piped, the tables get the width they need; in a terminal a table too
    wide for it is stacked (render.stacked_table)."""
    from atnbench.report.render import rich_view

    out.print(Text(heading, style="dim"), soft_wrap=True)
    for view in views:
        out.print(rich_view(view, plain=out.color_system is None, width=out.width, console=out))
    if claims is not None:
        from atnbench.report.verdict_tables import rich_verdicts

        out.print(rich_verdicts(*claims, family_name=user_claims.name if user_claims else None))
        for plan in plans:
            out.print(Text(plan.line(), style="dim"), soft_wrap=True)


def is_k_sweep(sweep: Optional[str]) -> bool:
    return sweep is not None and sweep.startswith("k-")


def write_figures(groups, out_dir: Path, k_view: bool, say) -> list[Path]:
    from atnbench.report.plots import NothingToPlot, write_plots

    try:
        paths = write_plots(groups, out_dir, k_ablation=True if k_view else None)
    except NothingToPlot as nothing:
        err.print(str(nothing))
        return []
    for path in paths:
        say(f"wrote {path}")
    return paths


def _verdicts(groups, margin: float, family=None, studies=(), study_runs=None):
    """(results, claims without runs) for the paper's claims (or the user's) on these groups and
    the studies the store records."""
    from atnbench.report.verdicts import evaluate, paper_family

    return evaluate(family if family is not None else paper_family(), groups, margin=margin, studies=studies,
                    study_runs=study_runs)


def _verdicts_markdown(claims, plans, family=None) -> str:
    from atnbench.report.verdict_tables import markdown_verdicts

    return ("\n" + markdown_verdicts(*claims, family_name=family.name if family else None)
            + "".join(f"\n- {plan.line()}\n" for plan in plans))


def _verdicts_text(claims, plans, family=None, width: int = 200) -> str:
    """The verdict table and the studies' lines as plain text, for a table-format ``--output``."""
    import io

    from rich.console import Console

    from atnbench.report.verdict_tables import rich_verdicts

    console = Console(file=io.StringIO(), record=True, width=width, color_system=None, force_terminal=False)
    console.print(rich_verdicts(*claims, family_name=family.name if family else None))
    for plan in plans:
        console.print(Text(plan.line()), soft_wrap=True)
    return "\n" + console.export_text()


def _studies(path: Path) -> list:
    """The studies the store records (``sweep --until-decided``)."""
    from atnbench.report import study

    with ResultsStore.open_read_only(path) as results:
        return study.load(results)


def _study_runs(path: Path, plans) -> dict:
    """run id -> RunData of every run a study planned or a look used, whatever the report's
    filters select: a study's row shows the numbers its looks decided on, or none."""
    from atnbench.report.aggregate import RunData

    found = {}
    with ResultsStore.open_read_only(path) as results:
        for plan in plans:
            for run_id in plan.all_runs():
                record = results.get_run(run_id) if run_id not in found else None
                if record is not None:
                    found[run_id] = RunData(record, tuple(results.curve(run_id)))
    return found


def _check_claim_stats(family, path: Path, groups) -> None:
    """A claim on a statistic its task's runs here never report (``max_val_accuracy`` of a
    regression) would show as "no runs" beside the runs it has: one line, naming what they report."""
    from atnbench.report.aggregate import run_values

    reported: dict[str, set[str]] = {}
    for group in groups:
        for runs in group.runs.values():
            for run in runs:
                if run.record.status == "done":
                    reported.setdefault(group.task, set()).update(run_values(run))
    for claim in family.claims:
        stats = reported.get(claim.task)
        if stats and claim.stat not in stats:
            from atnbench.report.claims import KNOWN_STATS

            offered = ", ".join(sorted(stats & KNOWN_STATS))
            raise UserError(f"--claims {path}: claim {claim.id!r}: the runs of {claim.task!r} here do not report "
                            f"{claim.stat!r}; they report {offered}")

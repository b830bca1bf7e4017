"""The verdicts (``verdicts.py``) as a rich table, Markdown and plain records (JSON)."""

from __future__ import annotations

from typing import Optional

from rich import box
from rich.console import Group as RichGroup
from rich.table import Table
from rich.text import Text

from atnbench.report.aggregate import STAT_LABELS, budget_label
from atnbench.report.verdicts import (
    CONTRADICTED,
    INCONCLUSIVE,
    LEVEL,
    REPRODUCED,
    UNINFORMATIVE,
    CellSummary,
    Claim,
    ClaimResult,
    Comparison,
)

STYLES = {REPRODUCED: "bold green", CONTRADICTED: "bold red", INCONCLUSIVE: "yellow", UNINFORMATIVE: "dim"}
HEADERS = ("claim", "runs", "comparison", "lower: mean ± std [95% CI] (n)", "higher: mean ± std [95% CI] (n)",
           "difference [95% CI]", "p", "verdict")
FOOTNOTE = (f"mean ± sample std (ddof 1) over seeds; [..]: {LEVEL:.0%} t interval of the mean; difference: "
            f"lower − higher with its {LEVEL:.0%} Welch CI; p: Welch's t-test, two-sided. Reproduced: p < 0.05 in "
            f"the claimed direction and the seeds do not overlap; uninformative: both rows at the no-memory "
            f"baseline (no model learned).")


def _g(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.4g}"


def cell_text(cell: CellSummary) -> str:
    if cell.n == 0:
        return "no runs"
    text = f"{_g(cell.mean)} ± {_g(cell.std)}"
    if cell.ci is not None:
        text += f" [{_g(cell.ci[0])}, {_g(cell.ci[1])}]"
    return f"{text} (n={cell.n})"


def diff_text(comparison: Comparison) -> str:
    if comparison.diff is None:
        return "-"
    return f"{_g(comparison.diff)} [{_g(comparison.diff_ci[0])}, {_g(comparison.diff_ci[1])}]"


def runs_text(result: ClaimResult) -> str:
    group = result.group
    parts = [f"{group.task} T={group.T}", f"variant {group.variant}" if group.variant else "preset default",
             budget_label(group.budget)]
    return ", ".join(parts)


def comparison_text(comparison: Comparison) -> str:
    return f"{comparison.better} < {comparison.worse} ({STAT_LABELS.get(comparison.stat, comparison.stat)})"


def rows(result: ClaimResult, with_source: bool = True) -> list[list[str]]:
    """One line per comparison; the claim, its runs and its overall verdict on the first."""
    lines = []
    claim = result.claim
    for i, comparison in enumerate(result.comparisons):
        first = i == 0
        lines.append([
            (f"{claim.text} ({claim.source})" if with_source else f"{claim.id}: {claim.text}") if first else "",
            runs_text(result) if first else "",
            comparison_text(comparison), cell_text(comparison.a), cell_text(comparison.b), diff_text(comparison),
            "-" if comparison.p_value is None else f"{comparison.p_value:.3g}",
            comparison.verdict + (f" ({comparison.reason})" if comparison.verdict == INCONCLUSIVE else ""),
        ])
    for missing in result.missing:
        lines.append(["", "", missing, "no runs", "", "", "", ""])
    if len(result.comparisons) + len(result.missing) > 1:
        lines.append(["", "", "claim as a whole", "", "", "", "",
                      result.verdict + (" (not every comparison has runs)" if result.missing else "")])
    return lines


def rich_verdicts(results: list[ClaimResult], not_run: list[Claim]) -> RichGroup:
    parts: list = [verdict_table(results), Text(FOOTNOTE, style="dim")]
    if not_run:
        parts.append(Text("  claims without runs here: " + ", ".join(c.id for c in not_run), style="dim"))
    parts.append(Text(""))
    return RichGroup(*parts)


def verdicts_width(console, results: list[ClaimResult]) -> int:
    """The width the verdict table needs to keep its number and verdict cells on one line."""
    return console.measure(verdict_table(results), options=console.options.update(width=10_000)).maximum


def verdict_table(results: list[ClaimResult]) -> Table:
    table = Table(title="verdicts on the paper's claims", box=box.SIMPLE_HEAD, title_style="bold")
    for i, header in enumerate(HEADERS):  # the claim, runs and comparison wrap; numbers and verdicts never
        table.add_column(header, overflow="fold", max_width=(34, 26, 30)[i] if i < 3 else None, no_wrap=i >= 3)
    for result in results:
        for line in rows(result, with_source=False):
            verdict = line[-1]
            style = next((s for v, s in STYLES.items() if verdict.startswith(v)), "")
            table.add_row(*line[:-1], Text(verdict, style=style))
        table.add_section()
    return table


def markdown_verdicts(results: list[ClaimResult], not_run: list[Claim]) -> str:
    lines = ["## Verdicts on the paper's claims", "", "| " + " | ".join(HEADERS) + " |",
             "|" + "---|" * len(HEADERS)]
    for result in results:
        for line in rows(result):
            cells = [cell.replace("|", "\\|") for cell in line]
            if cells[-1]:  # every verdict stands out (the HTML report colours it by kind)
                cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", FOOTNOTE]
    if not_run:
        lines += ["", "Claims without runs here: " + ", ".join(c.id for c in not_run) + "."]
    return "\n".join(lines) + "\n"


def _cell_record(cell: CellSummary) -> dict:
    return {"n": cell.n, "mean": cell.mean, "std": cell.std,
            "ci95": list(cell.ci) if cell.ci is not None else None, "values": list(cell.values)}


def verdict_records(results: list[ClaimResult], not_run: list[Claim]) -> dict:
    """Plain data for JSON: every claim with its runs, comparisons, tests and verdicts."""
    return {
        "interval": f"{LEVEL:.0%} t interval of the mean", "test": "Welch's t-test, two-sided",
        "claims": [
            {"id": r.claim.id, "claim": r.claim.text, "source": r.claim.source, "task": r.group.task,
             "T": r.group.T, "variant": r.group.variant, "budget": r.group.budget, "baseline": r.group.baseline,
             "verdict": r.verdict, "missing": list(r.missing),
             "comparisons": [{"lower": c.better, "higher": c.worse, "stat": c.stat, "test": c.test,
                              "lower_cell": _cell_record(c.a), "higher_cell": _cell_record(c.b),
                              "difference": c.diff, "difference_ci95": list(c.diff_ci) if c.diff_ci else None,
                              "p_value": c.p_value, "verdict": c.verdict, "reason": c.reason}
                             for c in r.comparisons]}
            for r in results
        ],
        "not_run": [c.id for c in not_run],
    }

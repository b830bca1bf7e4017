"""The verdicts (``verdicts.py``) as a rich table, Markdown and plain records (JSON)."""

from __future__ import annotations

from typing import Optional

from rich.console import Group as RichGroup
from rich.text import Text

from atnbench.report.aggregate import STAT_LABELS, higher_is_better
from atnbench.tables import FitTable
from atnbench.report.verdicts import (
    CONTRADICTED,
    DEFAULT_MARGIN,
    EQUIVALENT,
    EXPLORATORY,
    INCONCLUSIVE,
    LEVEL,
    MIN_SEEDS,
    OPEN,
    POWER,
    REPRODUCED,
    RULE,
    TOO_FEW,
    UNINFORMATIVE,
    CellSummary,
    Claim,
    ClaimResult,
    Comparison,
    baseline_words,
)

STYLES = {REPRODUCED: "bold green", CONTRADICTED: "bold red", EQUIVALENT: "bold cyan", INCONCLUSIVE: "yellow",
          OPEN: "yellow", UNINFORMATIVE: "dim", TOO_FEW: "dim", EXPLORATORY: "dim"}
WITH_REASON = (INCONCLUSIVE, OPEN, TOO_FEW)
HEADERS = ("claim", "runs", "comparison", "lower: mean ± std [95% CI] (n)", "higher: mean ± std [95% CI] (n)",
           "difference [95% CI]", "g", "P(lower < higher) [95% CI]", "left baseline", "p (m·p)", "processors",
           f"seeds for {POWER:.0%} power", "verdict")
FOOTNOTE = (f"mean ± sample std (ddof 1) over seeds; [..]: {LEVEL:.0%} t interval of the mean; difference: "
            f"lower − higher with its {LEVEL:.0%} Welch CI; g: Hedges' g of the difference (exact small-sample "
            f"correction); P(lower < higher): the probability that a seed of the claimed-lower row ends below a "
            f"seed of the other (ties half), {LEVEL:.0%} stratified-bootstrap interval, from {MIN_SEEDS} seeds a "
            f"side; left baseline: seeds more than {DEFAULT_MARGIN:.0%} below the no-memory baseline (not the "
            f"claim's equivalence margin), lower row; higher "
            f"row, with Clopper-Pearson {LEVEL:.0%} intervals; p: Welch's t-test, two-sided, and m·p with m the "
            f"claims file's distinct comparisons (the family); processors: the processor classes of each side's "
            f"seeds (sides that mix classes differently are tested stratified by class); seeds for {POWER:.0%} "
            f"power: per side, Welch's test at 0.05/m at the observed difference and spread, with the seeds at "
            f"the two ends of the difference's interval (a pilot estimate, for planning). Rule: {RULE}")

# an accuracy's rows keep their own values, so the words of FOOTNOTE (made for losses) need their reading
ACCURACY_NOTE = ("On a statistic where higher is better (an accuracy), \"lower\" is the row claimed better: its "
                 "column shows its own values (the higher), the difference is lower − higher as shown (positive "
                 "where the claim holds), and P(lower < higher) is the probability that a seed of it beats a seed "
                 "of the other.")


def footnote(results: list[ClaimResult]) -> str:
    """FOOTNOTE, its baseline named as the table's tasks name it (a task of your own's is the
    no-information guess's, ``baseline_words``), and how to read a comparison on an accuracy where
    the table holds one."""
    accuracy = any(higher_is_better(c.stat) for result in results for c in result.comparisons)
    words = {baseline_words(result.group.task) for result in results}
    text = FOOTNOTE
    if "no information" in words:  # the published tables (shipped tasks) keep their words
        named = "no-information" if words == {"no information"} else "no-memory (no-information on a task of your own)"
        text = text.replace("no-memory baseline", f"{named} baseline")
    return text + (" " + ACCURACY_NOTE if accuracy else "")


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
    if comparison.diff_ci is None:  # no stratum to test in (the reason says so)
        return f"{_g(comparison.diff)} (not tested)"
    return f"{_g(comparison.diff)} [{_g(comparison.diff_ci[0])}, {_g(comparison.diff_ci[1])}]"


def improve_text(comparison: Comparison) -> str:
    if comparison.p_improve is None:
        return "-"
    lo, hi = comparison.p_improve_ci
    return f"{comparison.p_improve:.2f} [{lo:.2f}, {hi:.2f}]"


def exits_text(comparison: Comparison) -> str:
    if comparison.left_baseline is None:
        return "-"
    return "; ".join(f"{e.left}/{e.n} [{e.ci[0]:.2f}, {e.ci[1]:.2f}]" for e in comparison.left_baseline)


def p_text(comparison: Comparison) -> str:
    if comparison.p_value is None:
        return "-"
    if comparison.p_adjusted is None or comparison.tested_with == 1:
        return f"{comparison.p_value:.3g}"
    return f"{comparison.p_value:.3g} ({comparison.p_adjusted:.3g})"


def processors_text(comparison: Comparison) -> str:
    sides = ["+".join(f"{name} {n}" for name, n in side.items()) or "-" for side in comparison.classes]
    return "; ".join(sides) + (" (stratified)" if comparison.stratified else "")


def _seeds(n: int) -> str:
    from atnbench.report.verdicts import MAX_PLANNED_SEEDS

    return f"> {MAX_PLANNED_SEEDS:,}" if n > MAX_PLANNED_SEEDS else str(n)


def planned_text(comparison: Comparison) -> str:
    n = comparison.seeds_for_power
    if n is None:
        return "-"
    if comparison.seeds_interval is None:
        return _seeds(n)
    return f"{_seeds(n)} [{_seeds(comparison.seeds_interval[0])}, {_seeds(comparison.seeds_interval[1])}]"


def runs_text(result: ClaimResult) -> str:
    from atnbench.report.paper import protocol_label  # as the tables' titles say it: own protocol too
    from atnbench.tasks.registry import TASK_MODULES

    group = result.group
    # a shipped task's preset variant; a task of your own has none (its runs' settings are the
    # protocol label's to say: "the task file's defaults" here read as one, against the footnote)
    variant = f"variant {group.variant}" if group.variant else ("preset default" if group.task in TASK_MODULES else None)
    parts = [f"{group.task} T={group.T}", variant, protocol_label(group)[0],
             result.design + (f", {result.seeds}" if result.seeds else "")]
    return ", ".join(part for part in parts if part)


def verdict_text(comparison: Comparison) -> str:
    if comparison.verdict in WITH_REASON or (comparison.look and comparison.verdict != OPEN):
        return f"{comparison.verdict} ({comparison.reason})"
    return comparison.verdict


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
            _g(comparison.hedges_g), improve_text(comparison), exits_text(comparison), p_text(comparison),
            processors_text(comparison), planned_text(comparison), verdict_text(comparison),
        ])
    for missing in result.missing:  # "A < B", or "A < B: why its rows are not one pair"
        first = not lines  # no comparison above it: the claim and its runs on this line
        lines.append([(f"{claim.text} ({claim.source})" if with_source else f"{claim.id}: {claim.text}") if first else "",
                      runs_text(result) if first else "",
                      missing, "not compared" if ": " in missing else "no runs"] + [""] * (len(HEADERS) - 4))
    if len(result.comparisons) + len(result.missing) > 1:
        lines.append(["", "", "claim as a whole"] + [""] * (len(HEADERS) - 4) + [
                      result.verdict + (" (not every comparison has runs)" if result.missing else "")])
    return lines


def title_for(family_name: Optional[str]) -> str:
    """"verdicts on the paper's claims", or on the claims of the user's file."""
    from atnbench.report.claims import CLAIMS_FILE

    if family_name in (None, CLAIMS_FILE.name):
        return "verdicts on the paper's claims"
    return f"verdicts on the claims of {family_name}"


def rich_verdicts(results: list[ClaimResult], not_run: list[Claim], family_name: Optional[str] = None) -> RichGroup:
    parts: list = [verdict_table(results, title_for(family_name)), Text(footnote(results), style="dim")]
    if not_run:
        parts.append(Text("  claims without runs here: " + ", ".join(c.id for c in not_run), style="dim"))
    parts.append(Text(""))
    return RichGroup(*parts)


def verdicts_width(console, results: list[ClaimResult]) -> int:
    """The width the verdict table needs to keep its number and verdict cells on one line."""
    return console.measure(verdict_table(results), options=console.options.update(width=10_000)).maximum


def verdict_table(results: list[ClaimResult], title: str = "verdicts on the paper's claims") -> FitTable:
    """Wide (one line per comparison) where the width allows; otherwise wrapped between words or
    stacked one block per comparison (atnbench.tables): a number or a verdict is never cut."""
    table = FitTable(title=title, key_columns=3, lift=False)
    for i, header in enumerate(HEADERS):  # the claim, runs and comparison wrap; numbers and verdicts never
        table.add_column(header, no_wrap=3 <= i < len(HEADERS) - 1)
    for result in results:
        lines = rows(result, with_source=False)
        for j, line in enumerate(lines):
            verdict = line[-1]
            style = next((s for v, s in STYLES.items() if verdict.startswith(v)), "")
            table.add_row(*line[:-1], Text(verdict, style=style), end_section=j == len(lines) - 1)
    return table


def markdown_verdicts(results: list[ClaimResult], not_run: list[Claim], family_name: Optional[str] = None) -> str:
    title = title_for(family_name)
    lines = [f"## {title[0].upper()}{title[1:]}", "", "| " + " | ".join(HEADERS) + " |",
             "|" + "---|" * len(HEADERS)]
    for result in results:
        for line in rows(result):
            cells = [cell.replace("|", "\\|") for cell in line]
            if cells[-1]:  # every verdict stands out (the HTML report colours it by kind)
                cells[-1] = f"**{cells[-1]}**"
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", footnote(results)]
    if not_run:
        lines += ["", "Claims without runs here: " + ", ".join(c.id for c in not_run) + "."]
    return "\n".join(lines) + "\n"


def _cell_record(cell: CellSummary) -> dict:
    return {"n": cell.n, "mean": cell.mean, "std": cell.std,
            "ci95": list(cell.ci) if cell.ci is not None else None, "values": list(cell.values)}


def _claim_baseline(result: ClaimResult) -> Optional[float]:
    """The baseline the claim's comparisons judged their sides against: the group's, unless rows
    on other validation subsets were judged against their own (then each comparison says which)."""
    judged = {value for c in result.comparisons for value in c.baselines if value is not None}
    return judged.pop() if len(judged) == 1 else (result.group.baseline if not judged else None)


def verdict_records(results: list[ClaimResult], not_run: list[Claim]) -> dict:
    """Plain data for JSON: every claim with its runs, comparisons, tests and verdicts."""
    return {
        "interval": f"{LEVEL:.0%} t interval of the mean", "test": "Welch's t-test, two-sided; m·p over the claims file",
        "rule": RULE,
        "claims": [
            {"id": r.claim.id, "claim": r.claim.text, "source": r.claim.source, "task": r.group.task,
             "T": r.group.T, "variant": r.group.variant, "budget": r.group.budget, "baseline": _claim_baseline(r),
             "verdict": r.verdict, "missing": list(r.missing), "design": r.design, "seeds": r.seeds,
             "comparisons": [{"lower": c.better, "higher": c.worse, "stat": c.stat, "test": c.test,
                              "baselines": list(c.baselines),
                              "lower_cell": _cell_record(c.a), "higher_cell": _cell_record(c.b),
                              "difference": c.diff, "difference_ci95": list(c.diff_ci) if c.diff_ci else None,
                              "p_value": c.p_value, "p_family": c.p_adjusted, "m": c.tested_with,
                              "processor_classes": [dict(side) for side in c.classes],
                              "code_fingerprints": [list(side) for side in c.codes], "stratified": c.stratified,
                              "look": c.look,
                              "seeds_for_power_interval": list(c.seeds_interval) if c.seeds_interval else None,
                              "hedges_g": c.hedges_g, "p_improvement": c.p_improve,
                              "p_improvement_ci95": list(c.p_improve_ci) if c.p_improve_ci else None,
                              "left_baseline": None if c.left_baseline is None else [
                                  {"left": e.left, "n": e.n, "ci95": list(e.ci)} for e in c.left_baseline],
                              f"seeds_for_{POWER:.0%}_power".replace("%", "pct"): c.seeds_for_power,
                              "verdict": c.verdict, "reason": c.reason}
                             for c in r.comparisons]}
            for r in results
        ],
        "not_run": [c.id for c in not_run],
    }

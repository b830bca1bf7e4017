"""The reproduction report as a folder: ``report.md`` with PNG figures beside it, and
``report.html``, one self-contained file (figures embedded, no outside requests) that reads on a
phone and prints.

Its content: for each part of the evaluation, the paper-form tables with the paper's values
beside ours (``atnbench report --paper``), the k-ablation views, the figures and, where the
verdict module is present, the statistical verdicts on the paper's claims; then how it was
made: the exact commands, the versions, the machine, the code revision and fingerprint.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from atnbench.report.aggregate import RunData, aggregate, k_ablations
from atnbench.report.export import to_markdown
from atnbench.report.plots import NothingToPlot, Subset, write_plots
from atnbench.report.render import group_view, k_ablation_view, seed_ranges
from atnbench.store import ResultsStore, environment

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 72rem;
       padding: 1rem; line-height: 1.45; color: #1b1b1b; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.3rem; border-bottom: 1px solid #ccc; margin-top: 2rem; }
h3 { font-size: 1.05rem; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5rem 0; font-variant-numeric: tabular-nums; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
img { max-width: 100%; height: auto; display: block; margin: 0.5rem 0; }
code, pre { font-size: 0.85rem; background: #f4f4f4; }
pre { padding: 0.5rem; overflow-x: auto; white-space: pre-wrap; }
.verdict-reproduced { color: #1a7f37; font-weight: 600; } .verdict-contradicted { color: #b42318; font-weight: 600; }
.verdict-inconclusive, .verdict-uninformative, .verdict-open { color: #8a6d00; font-weight: 600; } .verdict-equivalent { color: #0b6e99; font-weight: 600; } .verdict-exploratory { color: #555; font-weight: 600; }
@media print { body { max-width: none; } .table-wrap { overflow: visible; } a { color: inherit; } }
/* On a phone a wide table becomes one card per row, each cell named by its column. */
@media screen and (max-width: 40rem) {
  .table-wrap table, .table-wrap tbody, .table-wrap tr, .table-wrap td { display: block; width: auto; }
  .table-wrap thead { position: absolute; left: -9999px; }
  .table-wrap tr { border-bottom: 2px solid #bbb; padding: 0.3rem 0; }
  .table-wrap td { border: none; text-align: left !important; white-space: normal; padding: 0.1rem 0.2rem; }
  .table-wrap td:empty { display: none; }
  .table-wrap td[data-label]:not([data-label=""])::before { content: attr(data-label) ": "; color: #555; }
}
"""


@dataclass
class Section:
    title: str
    what: str
    markdown: str
    figures: list[Path] = field(default_factory=list)


def part_records(store: ResultsStore, planned) -> list:
    """A planned part's stored runs: those its sweep made (at any budget or seeds), and every
    run its plan names, whichever sweep or command made it (the same experiment, the same id)."""
    records = {r.run_id: r for r in store.runs(sweep=planned.part.name)}
    for run in planned.runs:
        if run.run_id not in records and (record := store.get_run(run.run_id)) is not None:
            records[run.run_id] = record
    return list(records.values())


def part_sections(store: ResultsStore, planned_parts: list, figures_dir: Path) -> list[Section]:
    """One section per part: its tables (with the paper's values) and its figures."""
    sections = []
    for planned in planned_parts:
        part = planned.part
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in part_records(store, planned)]
        if not any(r.record.status in ("done", "diverged") for r in runs):
            sections.append(Section(part.name, part.what, "_No finished runs yet._\n"))
            continue
        groups = aggregate(runs)
        views = [group_view(group, with_paper=True) for group in groups]
        views += [k_ablation_view(view, with_paper=True) for view in k_ablations(groups)
                  if len({row.k for row in view.rows}) > 1]
        figures = [p for p in part_figures(store, part.name, runs, groups, figures_dir / part.name)
                   if p.suffix == ".png"]
        sections.append(Section(part.name, part.what, to_markdown(views), figures))
    return sections


def part_figures(store: ResultsStore, sweep: str, runs: list, groups: list, out_dir: Path) -> list[Path]:
    """A part's figures over every stored run; where a confirmatory study of its sweep has taken
    looks, also over the runs those looks used, alone (the pooled figures then say they pool)."""
    from atnbench.report import study

    looked = [s for s in study.load(store) if (s.sweep or s.name) == sweep and s.recorded]
    used_by = {kept.name: kept.runs_looked_at() for kept in looked}
    in_a_study = set().union(*used_by.values())
    figures = []
    for group in groups:  # a group a study drew from says that it pools; the others are drawn as always
        ids = {run.record.run_id for group_runs in group.runs.values() for run in group_runs}
        seeds = seed_ranges(run.record.seed for group_runs in group.runs.values() for run in group_runs)
        pooled = Subset("", f"every stored seed ({seeds}): exploratory and confirmatory runs pooled") \
            if ids & in_a_study else None
        figures += _figures([group], out_dir, pooled)
    for kept in looked:
        used = used_by[kept.name]
        chosen = [r for r in runs if r.record.run_id in used]
        elsewhere = sorted(used - {r.record.run_id for r in chosen})  # made outside the part's sweep
        chosen += [RunData(record, tuple(store.curve(run_id))) for run_id in elsewhere
                   if (record := store.get_run(run_id)) is not None]
        looks = len(kept.recorded)
        title = (f"confirmatory study {kept.name}: only the runs its {looks} look{'s' if looks > 1 else ''} used "
                 f"(seeds {seed_ranges(r.record.seed for r in chosen)})")
        figures += _figures(aggregate(chosen), out_dir, Subset(f"study-{kept.name}", title))
    return figures


def _figures(groups: list, out_dir: Path, subset: Optional[Subset]) -> list[Path]:
    try:
        return write_plots(groups, out_dir, subset=subset)
    except NothingToPlot:
        return []


def provenance(commands: list[str]) -> str:
    env = environment()
    from atnbench.evidence.identity import code_fingerprint

    lines = ["## How this report was made", "", "Commands:", "", "```bash", *commands, "```", "",
             f"- atnbench {env['atnbench_version']}, revision `{env['atnbench_revision']}`, "
             f"code fingerprint `{code_fingerprint()}`",
             f"- torch {env['torch']}, Python {env['python']}",
             f"- machine: {env['platform']}, {env['processor']} ({env['cpu_capability']})",
             f"- written {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}"]
    return "\n".join(lines) + "\n"


def verdicts_markdown(store: ResultsStore, planned_parts: list, margin: Optional[float] = None) -> Optional[str]:
    """The verdicts on the paper's claims (``atnbench.report.verdicts``) over the finished runs of
    the parts (``part_records``), as Markdown; None when no claim has runs."""
    from atnbench.report.verdict_tables import markdown_verdicts
    from atnbench.report import study
    from atnbench.report.verdicts import DEFAULT_MARGIN, evaluate, paper_family

    records = {r.run_id: r for planned in planned_parts for r in part_records(store, planned)}
    runs = [RunData(r, tuple(store.curve(r.run_id))) for r in records.values()]
    if not any(r.record.status in ("done", "diverged") for r in runs):
        return None
    results, not_run = evaluate(paper_family(), aggregate(runs), margin=DEFAULT_MARGIN if margin is None else margin,
                                studies=study.load(store))
    return markdown_verdicts(results, not_run) if results else None


def write_report(store_path: Path, planned_parts: list, out_dir: Path, commands: list[str],
                 title: str = "atnbench: reproducing the ATN paper") -> tuple[Path, Path]:
    """Write ``report.md`` (+ figures/) and a self-contained ``report.html`` for the planned parts
    (``atnbench.reproduce.parts.PlannedPart``); returns both paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with ResultsStore.open_read_only(store_path) as store:
        sections = part_sections(store, planned_parts, out_dir / "figures")
        verdicts = verdicts_markdown(store, planned_parts)
    _drop_earlier_figures(out_dir / "figures", [figure for section in sections for figure in section.figures])
    blocks = [f"# {title}", ""]
    if verdicts:
        blocks += [verdicts, ""]  # it has its heading
    for section in sections:
        blocks += [f"## {section.title}", "", f"_{section.what}_", "", section.markdown]
        for figure in section.figures:
            blocks += [f"![{figure.stem}]({figure.relative_to(out_dir).as_posix()})", ""]
    blocks.append(provenance(commands))
    markdown_text = "\n".join(blocks)
    md_path = out_dir / "report.md"
    md_path.write_text(markdown_text)
    html_path = out_dir / "report.html"
    html_path.write_text(to_html(markdown_text, out_dir, title))
    return md_path, html_path


FIGURE_NAMES = ("curves_*", "kablation_*")  # the names write_plots gives


def _drop_earlier_figures(folder: Path, written: list[Path]) -> None:
    """The report's figures/ holds this report's figures only: one an earlier report left there
    (another store, budget or part) would be read as this report's by anyone browsing it."""
    kept = {figure.with_suffix(suffix) for figure in written for suffix in (".png", ".svg")}
    for pattern in FIGURE_NAMES:
        for suffix in (".png", ".svg"):
            for found in folder.rglob(pattern + suffix):
                if found not in kept:
                    found.unlink()


def _label_cells(table: re.Match) -> str:
    """Every body cell of an HTML table gets its column's title as ``data-label``: the narrow
    screen layout (CSS) shows it beside the value when rows are stacked."""
    titles = [html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
              for cell in re.findall(r"<th[^>]*>(.*?)</th>", table.group(0), flags=re.S)]

    def label_row(row: re.Match) -> str:
        names = iter(titles)
        return re.sub(r"<td(?=[\s>])", lambda _: f'<td data-label="{html.escape(next(names, ""), quote=True)}"',
                      row.group(0))

    return re.sub(r"<tr>.*?</tr>", label_row, table.group(0), flags=re.S)


def to_html(markdown_text: str, base: Path, title: str) -> str:
    """One HTML file: the Markdown rendered, tables stacked into one card per row on narrow
    screens (scrollable where even that is too wide), every figure
    embedded as a data URI (nothing is fetched when it is opened)."""
    import markdown

    body = markdown.markdown(markdown_text, extensions=["tables", "fenced_code"])
    body = re.sub(r"<table>.*?</table>", _label_cells, body, flags=re.S)
    body = re.sub(r"<table>", '<div class="table-wrap"><table>', body).replace("</table>", "</table></div>")
    for verdict in ("reproduced", "contradicted", "equivalent", "inconclusive", "uninformative", "exploratory", "open"):
        body = body.replace(f"<strong>{verdict}", f'<strong class="verdict-{verdict}">{verdict}')

    def embed(match: re.Match) -> str:
        path = base / html.unescape(match.group(1))
        if not path.is_file():
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode()
        return f'src="data:image/png;base64,{data}"'

    body = re.sub(r'src="([^"]+\.png)"', embed, body)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n")

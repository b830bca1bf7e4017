"""Numbers in prose that cannot drift: the tables README.md and results/README.md quote are
rendered from the published runs, between markers, by ``scripts/publish_results.sh``.

A block is ``<!-- generated:KIND key=value ... -->`` ... ``<!-- /generated -->``; its inside is
replaced by what KIND renders from a store (the one imported from results/runs.jsonl):

- ``verdicts``: one line per claim and protocol: its verdict and the p (and m·p) of each
  comparison, with the seeds a side;
- ``table task=copying T=100 [variant=paper-text] [budget=0.25]``: the paper-style table of that
  group (means ± std over seeds, the paper's values, seeds), as ``atnbench report --paper``;
- ``inventory``: per sweep, its runs, models, seeds, budgets and the code that made them.

Prose around the blocks interprets; every number in a block comes from the runs, and
``tests/test_published.py`` fails when a committed block differs from what the runs give.

    python -m atnbench.report.prose --store STORE FILE...
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Callable, Optional

from atnbench.errors import UserError

BLOCK = re.compile(r"(<!-- generated:(?P<spec>[^>]*?) -->\n)(?P<body>.*?)(<!-- /generated -->)", re.S)


def _args(text: str) -> tuple[str, dict[str, str]]:
    kind, *pairs = text.split()
    values = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise UserError(f"generated block {text!r}: expected key=value, got {pair!r}")
        values[key] = value
    return kind, values


def _groups(store: Path):
    from atnbench.report.load import load_groups

    return load_groups(store, None, None, None, None, None)[0]


def render_table(groups, task: str, T: str, variant: Optional[str] = None, budget: Optional[str] = None) -> str:
    from atnbench.report.export import to_markdown
    from atnbench.report.render import group_view

    chosen = [g for g in groups if g.task == task and g.T == int(T) and (g.variant or None) == variant
              and g.budget == (float(budget) if budget is not None else 1.0)]
    if len(chosen) != 1:
        raise UserError(f"generated table task={task} T={T} variant={variant} budget={budget}: "
                        f"{len(chosen)} groups in the runs match (need exactly 1)")
    text = to_markdown([group_view(chosen[0], with_paper=True)])
    return text.split("\n", 2)[2]  # the block's own heading stands in the prose


def render_verdicts(groups, store: Optional[Path] = None) -> str:
    from atnbench.report.paper import protocol_label
    from atnbench.report.verdicts import evaluate, paper_family

    results, _ = evaluate(paper_family(), groups, studies=_studies(store))
    lines = ["| claim of the paper | runs | seeds a side | verdict | p (m·p) of each comparison |",
             "|---|---|---|---|---|"]
    for result in results:
        group = result.group
        runs = ", ".join(filter(None, [f"variant {group.variant}" if group.variant else None,
                                       protocol_label(group)[0], result.design, result.seeds or None]))
        seeds = sorted({n for c in result.comparisons for n in (c.a.n, c.b.n)})
        counted = "-" if not seeds else f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])  # none: all stale
        p = ", ".join("-" if c.p_value is None else f"{c.p_value:.2g} ({c.p_adjusted:.2g})" for c in result.comparisons)
        lines.append(f"| {result.claim.text} | {runs} | {counted} | {result.verdict} | {p} |")
    return "\n".join(lines) + "\n"


def _studies(store: Optional[Path]) -> list:
    from atnbench.report import study
    from atnbench.store import ResultsStore

    if store is None:
        return []
    with ResultsStore.open_read_only(store) as results:
        return study.load(results)


def render_studies(store: Optional[Path]) -> str:
    """Every recorded study: its plan in one line, each comparison's state after its last look,
    and what the study has left to run to its last look at the most (on its first row)."""
    found = _studies(store)
    if not found:
        return "No study (`sweep --until-decided`) is recorded yet.\n"
    from atnbench.sweep.estimate import cpu_time_text
    from atnbench.sweep.confirm import left_to_run

    lines = ["| study | comparison | claims | looks taken | state | at seeds a side | next look | study left to its "
             "last look (1 thread) |", "|---|---|---|---|---|---|---|---|"]
    runs = seconds = 0.0
    unpriced = []
    for study in found:
        cost = left_to_run(study, store) if study.next_look() is not None else None
        if cost is not None:
            left = f"{cost.runs} runs, {cpu_time_text(cost.seconds)}" + ("" if cost.measured == cost.runs else " (rough)")
            runs, seconds = runs + cost.runs, seconds + cost.seconds
        elif study.next_look() is None:
            left = "over"
        else:
            left = "?"
            unpriced.append(study.name)
        decided = study.decisions()
        for i, planned in enumerate(study.comparisons):
            entry = decided.get((planned.lower, planned.higher))
            state = "no look yet" if entry is None else entry["decision"]
            at = "-" if entry is None else str(study.looks[entry["look"] - 1])
            taken = f"{len(study.recorded)} of {len(study.looks)}"
            nxt = "-" if entry is not None and entry["decision"] != "open" else (
                str(study.looks[len(study.recorded)]) if len(study.recorded) < len(study.looks) else "-")
            lines.append(f"| `{study.name}` ({study.processor}, from seed {study.first_seed}, planned "
                         f"{study.planned_at[:10]}) | {planned.lower} < {planned.higher} | {', '.join(planned.claims)} "
                         f"| {taken} | {state} | {at} | {nxt} | {left if i == 0 else '″'} |")
    lines += ["", f"Left to every study's last look, at the most: {runs:.0f} runs, {cpu_time_text(seconds)} of "
                  f"single-thread CPU time (priced from the measured runs of the same experiments where the runs "
                  f"hold them, else by the rough model){'; not priced here: ' + ', '.join(unpriced) if unpriced else ''}."]
    return "\n".join(lines) + "\n"


def render_inventory(store: Path) -> str:
    from atnbench.registry import is_windowed
    from atnbench.report.render import seed_ranges
    from atnbench.store import ResultsStore
    from atnbench.registry import model_name

    lines = ["| sweep | runs | models | seeds | budget | code |", "|---|---:|---|---|---|---|"]
    with ResultsStore.open_read_only(store) as results:
        for sweep in results.sweeps():
            runs = [r for r in results.runs(sweep=sweep) if r.status in ("done", "diverged")]
            if not runs:
                continue
            models = dict.fromkeys(model_name(r.config.get("cell", "lstm"), r.norm) + (f" k={r.k}" if r.k and is_windowed(r.norm) else "")
                                   for r in runs)
            seeds = sorted({r.seed for r in runs})
            budgets = sorted({r.budget if r.budget is not None else 1.0 for r in runs})
            codes = sorted({(r.env or {}).get("code", "?") for r in runs})
            lines.append(f"| `{sweep}` | {len(runs)} | {', '.join(models)} | {seed_ranges(seeds)} | "
                         f"{', '.join(f'{b:g}' for b in budgets)} | {', '.join(f'`{c}`' for c in codes)} |")
    return "\n".join(lines) + "\n"


def fill(text: str, groups, store: Optional[Path] = None) -> str:
    """``text`` with every generated block rendered anew (``inventory`` needs the store)."""
    renderers: dict[str, Callable[..., str]] = {
        "verdicts": lambda: render_verdicts(groups, store),
        "studies": lambda: render_studies(store),
        "table": lambda **kw: render_table(groups, **kw),
        "inventory": lambda: render_inventory(store),
    }

    def one(match: re.Match) -> str:
        kind, values = _args(match.group("spec"))
        if kind not in renderers:
            raise UserError(f"generated block {match.group('spec')!r}: unknown kind {kind!r} ({', '.join(renderers)})")
        return match.group(1) + renderers[kind](**values) + match.group(4)

    return BLOCK.sub(one, text)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("files", type=Path, nargs="+")
    args = parser.parse_args(argv)
    groups = _groups(args.store)
    for path in args.files:
        path.write_text(fill(path.read_text(), groups, args.store))


if __name__ == "__main__":
    main()

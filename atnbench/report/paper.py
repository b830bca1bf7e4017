"""The ATN paper's published numbers (Tables 1-5, Fig. 7's stated ordering) and the
comparisons made with them: ours/paper ratios, model orderings, protocol checks.

The numbers live in ``paper_values.yaml`` beside this module, in natural units with the scale
the paper prints them in, so they can be checked against the paper line by line.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import yaml

from atnbench.registry import is_windowed
from atnbench.report.aggregate import (
    Group,
    KAblation,
    ModelRow,
    budget_label,
)

PAPER_FILE = Path(__file__).resolve().parent / "paper_values.yaml"
PAPER_MODELS = ("lstm", "ln", "atn")
# Fields of a run's config compared with the paper preset's; a difference is named in the report.
PROTOCOL_FIELDS = ("hidden", "layers", "batch_size", "optimizer", "lr", "momentum", "steps", "clip", "eps", "affine",
                   "bias_inside", "init")

# On a task of your own its file's defaults fix the evaluation too: the validation sequences scored
# and early stopping (the shipped presets' are left out: theirs follow the budget and the paper)
OWN_TASK_FIELDS = ("val_samples", "patience")


@dataclass(frozen=True)
class PaperTable:
    table: int
    title: str
    task: str
    measure: str
    T: Optional[int]
    k: Optional[int]
    scale: float
    columns: dict[str, str]  # the paper's column name -> our statistic
    rows: dict[str, dict[str, tuple[float, float]]]  # model -> column -> (mean, std), natural units
    from_loss: dict[str, tuple[str, str]]  # statistic -> (loss statistic, "bits" | "perplexity")

    def value(self, model: str, column: str) -> Optional[tuple[float, float]]:
        return self.rows.get(model, {}).get(column)

    @property
    def label(self) -> str:
        return f"Table {self.table}" + (f", T={self.T}" if self.T is not None else "")


@dataclass(frozen=True)
class PaperKAblation:
    figure: int
    task: str
    T: int
    ks: tuple[int, ...]
    k_order: tuple[int, ...]  # best first
    below: tuple[str, ...]  # every ATN k is below these models


@dataclass(frozen=True)
class Paper:
    source: str
    tables: tuple[PaperTable, ...]
    k_ablation: Optional[PaperKAblation]

    def table_for(self, task: str, T: Optional[int]) -> Optional[PaperTable]:
        """The paper's table for this task and T (a table with T null fits every T)."""
        for table in self.tables:
            if table.task == task and table.T == T:
                return table
        for table in self.tables:
            if table.task == task and table.T is None:
                return table
        return None


def _pair(where: str, value) -> tuple[float, float]:
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise ValueError(f"{PAPER_FILE.name}: {where}: expected [mean, std] as two numbers, got {value!r}")
    return float(value[0]), float(value[1])


def load_paper(path: Path = PAPER_FILE) -> Paper:
    """Read and check the paper values file."""
    data = yaml.safe_load(Path(path).read_text())
    tables = []
    for entry in data["tables"]:
        where = f"table {entry.get('table')} T={entry.get('T')}"
        scale = entry["scale"]
        if not isinstance(scale, (int, float)) or scale <= 0:
            raise ValueError(f"{PAPER_FILE.name}: {where}: scale must be a positive number, got {scale!r}")
        columns = dict(entry["columns"])
        rows = {}
        for model, cells in entry["rows"].items():
            unknown = set(cells) - set(columns)
            if unknown:
                raise ValueError(f"{PAPER_FILE.name}: {where}: row {model} has unknown column(s) {sorted(unknown)}")
            rows[model] = {column: _pair(f"{where} {model} {column}", value) for column, value in cells.items()}
        tables.append(PaperTable(
            table=int(entry["table"]), title=entry["title"], task=entry["task"], measure=entry["measure"],
            T=entry.get("T"), k=entry.get("k"), scale=float(scale), columns=columns, rows=rows,
            from_loss={stat: tuple(how) for stat, how in (entry.get("from_loss") or {}).items()},
        ))
    kab = data.get("k_ablation")
    k_ablation = None
    if kab:
        k_ablation = PaperKAblation(figure=int(kab["figure"]), task=kab["task"], T=int(kab["T"]),
                                    ks=tuple(kab["ks"]), k_order=tuple(kab["k_order"]), below=tuple(kab["below"]))
    return Paper(source=data["source"], tables=tuple(tables), k_ablation=k_ablation)


@functools.lru_cache(maxsize=1)
def paper() -> Paper:
    return load_paper()


# -- our numbers for a paper column ------------------------------------------------------------


def convert(value: Optional[float], how: str) -> Optional[float]:
    """A cross-entropy in nats as bits (``bits``) or as perplexity (``perplexity``)."""
    if value is None:
        return None
    if how == "bits":
        return value / math.log(2)
    if how == "perplexity":
        return math.exp(value)
    raise ValueError(f"unknown conversion {how!r}")


def paper_row_for(table: PaperTable, group: Group, row: ModelRow) -> Optional[str]:
    """Which of the paper's rows (lstm, ln, atn) our row is compared with, if any.

    ATN rows are matched on k: with several k in the group only the paper's k is compared; a
    lone ATN row is compared whatever its k (the report notes a different k).
    """
    if row.cell != "lstm" or row.model not in table.rows:
        return None
    if is_windowed(row.norm):
        same_model = [r for r in group.rows if r.model == row.model]
        if len(same_model) > 1 and table.k is not None and row.k != table.k:
            return None
    return row.model


def ordering(values: dict[str, float]) -> list[str]:
    """Models sorted best (lowest) first."""
    return sorted(values, key=lambda model: (values[model], model))


def order_differences(ours: dict[str, float], theirs: dict[str, float]) -> set[str]:
    """Models whose rank among the models both sides have differs between ours and the paper's."""
    common = [m for m in ours if m in theirs and ours[m] is not None and theirs[m] is not None]
    our_order = ordering({m: ours[m] for m in common})
    their_order = ordering({m: theirs[m] for m in common})
    return {m for m, n in zip(our_order, their_order) if m != n}


# -- protocol checks -------------------------------------------------------------------------------


def own_task(group: Group) -> bool:
    """A user's task (its definition travels in its runs' options): its protocol is the user's
    own defaults (the task file's), and no paper has numbers for it."""
    return any("user_task" in (run.record.config.get("options") or {}) for runs in group.runs.values() for run in runs)


# a task of your own whose task file is not found here (no --include): its runs' protocol, the
# file's defaults, cannot be read, so no row is said to follow it ("full protocol")
UNCHECKED = "protocol unchecked: the task's file is not found here (--include DIR)"


def row_differences(group: Group) -> dict[str, list[str]]:
    """Per row label: how its runs differ from the task preset's full protocol (the paper's),
    field by field, e.g. ``steps 40 (paper 4000)`` or ``bias outside (paper: bias inside)``; the
    preset's steps are first scaled by the group's budget, which is reported on its own. A k
    that differs is named only for a lone ATN row: where a model has several k, k is what is
    being varied. Empty lists when the runs follow the preset; [UNCHECKED] where its preset is not found.
    On a user's task the preset is the task file's defaults: ``lr 0.001 (default 0.003)``."""
    return {label: list(differences.values()) for label, differences in row_difference_fields(group).items()}


def row_difference_fields(group: Group) -> dict[str, dict[str, str]]:
    """``row_differences`` keyed by field: per row label, field name (``hidden``, ``k``,
    ``bias_inside``; UNCHECKED for a preset not found) -> its text."""
    from atnbench.run.runspec import resolve_run

    presets: dict[tuple, Optional[dict]] = {}
    found: dict[str, dict[str, str]] = {}
    own = own_task(group)
    for label, runs in group.runs.items():
        row = group.row(label)
        ablated = row is not None and len({r.k for r in group.rows if r.model == row.model}) > 1
        seen: dict[str, tuple[set, object]] = {}
        for run in runs:
            config = run.record.config
            key = (config.get("norm"), config.get("cell"))
            if key not in presets:
                try:
                    flags = {"T": group.T, "norm": key[0], "cell": key[1]}
                    presets[key] = resolve_run(group.task, flags, variant=group.variant, budget=1.0).to_dict()
                    if own:  # the validation set and patience as the budget sets them (val_samples shrinks with it)
                        at_budget = resolve_run(group.task, flags, variant=group.variant, budget=group.budget)
                        presets[key].update({name: getattr(at_budget, name) for name in OWN_TASK_FIELDS})
                except Exception:  # noqa: BLE001 - no preset for this task: nothing to check against
                    presets[key] = None
            expected = presets[key]
            if expected is None:
                seen.setdefault(UNCHECKED, (set(), None))  # not "follows it": nothing to check against
                continue
            fields = list(PROTOCOL_FIELDS) + (list(OWN_TASK_FIELDS) if own else []) + \
                (["k"] if is_windowed(config.get("norm")) and not ablated else [])
            for name in fields:
                want, have = expected.get(name), config.get(name)
                if name == "steps" and isinstance(want, int):
                    want = max(1, math.ceil(want * group.budget))
                if name in ("bias_inside", "init") or have is not None:
                    if have != want:
                        seen.setdefault(name, (set(), want))[0].add(have)
        norm = row.norm if row is not None else "none"
        source = "default" if own else "paper"
        found[label] = {name: UNCHECKED if name == UNCHECKED else _difference(name, haves, want, norm, source)
                        for name, (haves, want) in seen.items()}
    return found


def _difference(name: str, haves: set, want, norm: str, source: str = "paper") -> str:
    """"lr 0.001 (paper 0.003)"; ``source`` names whose value ``want`` is ("default" on a user's task)."""
    if name in ("bias_inside", "init"):
        from atnbench.report.aggregate import setting_text

        return f"{', '.join(sorted(setting_text(name, h, norm) for h in haves))} " \
               f"({source}: {setting_text(name, want, norm)})"
    return f"{name} {', '.join(map(_short, sorted(haves, key=str)))} ({source} {_short(want)})"


def protocol_differences(group: Group, labels: Optional[list[str]] = None) -> list[str]:
    """Every difference from the paper's protocol among the rows ``labels`` (default: all),
    each once, row by row when the rows differ differently."""
    per_row = {label: diffs for label, diffs in row_differences(group).items()
               if diffs and (labels is None or label in labels)}
    texts = {text for diffs in per_row.values() for text in diffs}
    if len(per_row) > 1 and any(set(d) != texts for d in per_row.values()):
        return [f"{label}: {', '.join(diffs)}" for label, diffs in per_row.items()]
    return sorted(texts, key=lambda t: [d for diffs in per_row.values() for d in diffs].index(t))


def protocol_label(group: Group) -> tuple[str, list[str]]:
    """("reduced budget (5%)" | "own protocol" | "full protocol", the differences from the
    paper's protocol). A budget of 1 is "full protocol" when some row follows the preset (rows
    that do not are named in the differences), "own protocol" when none does."""
    differences = protocol_differences(group)
    if group.reduced:
        return budget_label(group.budget), differences
    # a row without finished runs (diverged only) shows nothing of its settings: it follows nothing
    rows = row_differences(group)
    if rows and all(diffs == [UNCHECKED] for diffs in rows.values()):
        return "protocol unchecked", differences
    following = [label for label, diffs in rows.items() if not diffs and group.runs.get(label)]
    return ("full protocol" if following or not group.runs else "own protocol"), differences


def _short(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def k_order_statement(view: KAblation, stat: str = "min_val_loss") -> Optional[dict]:
    """Our ordering of k against the paper's Fig. 7 statement, when the view is that experiment."""
    spec = paper().k_ablation
    group = view.group
    if spec is None or group.task != spec.task or group.T != spec.T or view.model != "atn":
        return None
    ours = {row.k: row.stats[stat].mean for row in view.rows if row.k in spec.ks and row.stats[stat].mean is not None}
    if len(ours) < 2:
        return None
    our_order = [k for k in sorted(ours, key=lambda k: ours[k])]
    their_order = [k for k in spec.k_order if k in ours]
    refs = {row.model: row.stats[stat].mean for row in view.references
            if row.model in spec.below and row.stats[stat].mean is not None}
    worst_atn = max(ours.values())
    above = [model for model, value in refs.items() if value <= worst_atn]
    return {
        "figure": spec.figure,
        "ours": our_order,
        "paper": their_order,
        "order_differs": our_order != their_order,
        "atn_not_below": above,  # reference models that some ATN k does not beat
    }

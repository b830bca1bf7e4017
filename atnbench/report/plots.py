"""Figures as files (PNG and SVG), drawn without a screen (matplotlib's Agg, no pyplot).

- loss curves per model, mean over seeds with a min-max band, training and validation panels,
  one figure per table group (task, T, budget): the form of the paper's Figs. 2-4, the paper's
  attained minima (Tables 1-3) as stars at the right edge (full-protocol groups only: beside a
  reduced-budget run they would read as its target);
- the k-ablation: min and final validation loss against k with ±std error bars, the models
  without a window as horizontal references, the paper's value at its k (Table 1: k=45) as a
  star (full protocol only): Fig. 7's content;
- the cost, from ``atnbench bench`` records (median ms per training step, quartiles as error
  bars, inference beside it): the cost of the models, not of a run's evaluations.

Every figure carries a title, axis labels with units, a legend outside the axes (it covers no
data), a colour-blind-safe style per series (``style``) and a subtitle with the budget and the
seeds it stands on. Each function returns the paths it wrote.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

import matplotlib

matplotlib.use("Agg", force=False)  # no screen needed; a no-op where pyplot already chose one

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from atnbench.errors import UserError  # noqa: E402
from atnbench.report.aggregate import (  # noqa: E402
    Group,
    KAblation,
    ModelRow,
    budget_label,
    k_ablations,
)
from atnbench.report.paper import paper, paper_row_for, protocol_label  # noqa: E402
from atnbench.report.render import is_default_variant, measure_of  # noqa: E402
from atnbench.report.verdicts import baseline_words  # noqa: E402
from atnbench.report.style import (  # noqa: E402
    BASELINE_COLOR,
    PAPER_MARKER,
    RC,
    SeriesStyle,
    log_axis,
    markevery,
    model_colors,
    styles_for,
)

FORMATS = ("png", "svg")
STYLE = RC  # the rc settings every figure is drawn under


class NothingToPlot(UserError):
    """The selection has no finished run with a curve."""


def _slug(group: Group) -> str:
    parts = [group.task, f"T{group.T}" if group.T is not None else "Tany"]
    if group.reduced:
        parts.append(f"budget{group.budget:g}")
    if group.variant:
        parts.append(group.variant)
    return re.sub(r"[^A-Za-z0-9_.=-]+", "-", "_".join(parts))


def _where(group: Group) -> str:
    where = f"{group.task}, T={group.T}" if group.T is not None else group.task
    where += f" (variant {group.variant})" if group.variant else ""
    return where + (f" [{budget_label(group.budget)}]" if group.reduced else "")


def _styles(labels: list[str], rows: list[ModelRow]) -> dict[str, SeriesStyle]:
    models = {row.label: row.model for row in rows}
    return styles_for((label, models.get(label, label)) for label in labels)


def _axis_label(task: str) -> str:
    measure = measure_of(task)
    return {"cross-entropy loss": "cross-entropy loss (nats)", "MSE loss": "MSE loss"}.get(measure, measure)


def _n_seeds(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def _seeds_text(group: Group, labels: Iterable[str]) -> str:
    counts = [f"{label} {len(group.runs.get(label, []))}" for label in labels]
    text = "seeds per model: " + ", ".join(counts)
    diverged = sum(len(row.diverged_seeds) for row in group.rows)
    if diverged:
        text += f" ({diverged} diverged run{'s' if diverged > 1 else ''} not shown)"
    return text


def _budget_text(group: Group) -> str:
    steps = sorted({run.record.config.get("steps") for runs in group.runs.values() for run in runs
                    if run.record.config.get("steps")})
    label, differences = protocol_label(group)
    text = label if group.reduced else f"budget 100%, {label}"
    if steps:
        text += f", {'/'.join(f'{s:,}' for s in steps)} steps"
    return text


@dataclass(frozen=True)
class Subset:
    """Figures of some of the stored runs (a confirmatory study's seeds, drawn apart from the
    exploratory ones): ``tag`` ends the files' names, ``title`` is the figures' second title line."""

    tag: str
    title: str


def _tag(subset: Optional[Subset]) -> str:
    return f"_{subset.tag}" if subset and subset.tag else ""


def _subtitle(subset: Optional[Subset]) -> str:
    return f"\n{subset.title}" if subset else ""


def _save(fig: Optional[Figure], out_dir: Path, stem: str) -> list[Path]:
    """Write ``fig`` as PNG and SVG (under the rc settings: some, as svg.hashsalt, are read
    when saving); [] for no figure."""
    if fig is None:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    with matplotlib.rc_context(STYLE):
        for fmt in FORMATS:
            path = out_dir / f"{stem}.{fmt}"
            metadata = {"Date": None} if fmt == "svg" else {"Software": None}
            fig.savefig(path, format=fmt, dpi=150, metadata=metadata)
            paths.append(path)
    return paths


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # a canvas of its own: drawable and measurable (legend vs. data) without pyplot
    return fig


def _footer(fig: Figure, text: str) -> None:
    """The budget and seeds a figure stands on, under the panels (laid out with them), wrapped to
    the figure's width: one long line ran off both edges, its budget and last seeds cut."""
    import textwrap

    width = int(fig.get_figwidth() * 72 / (9 * 0.55))  # characters of 9 pt text across the figure
    fig.supxlabel("\n".join(textwrap.wrap(text, width)), fontsize=9, color="dimgray")


def _legend(fig: Figure, handles: list) -> None:
    """Outside the panels, at the right, centred: it covers neither data nor the title."""
    fig.legend(handles=handles, loc="outside right center", fontsize=9)


def _baseline_name(group: Group) -> str:
    formula = {"copying": "10·ln 8/(T+20)", "denoise": "10·ln 8/T", "adding": "always predict 1"}.get(group.task)
    return f"{baseline_words(group.task).replace(' ', '-')} baseline{f' ({formula})' if formula else ''} = " \
           f"{group.baseline:.4g}"


def _draw_baseline(ax, group: Group) -> None:
    ax.axhline(group.baseline, color=BASELINE_COLOR, ls=(0, (1, 1.5)), lw=1.4, zorder=1)


def _baseline_handle(group: Group) -> Line2D:
    return Line2D([], [], color=BASELINE_COLOR, ls=(0, (1, 1.5)), lw=1.4, label=_baseline_name(group))


def _paper_values(group: Group, stat: str) -> dict[str, tuple[float, float, str]]:
    """Our row label -> (mean, std, "Table N") of the paper's value of ``stat``, where the
    paper has one for this task and T (rows of current code). None where the table calls them not comparable: at a
    reduced budget (the paper's minima are full-protocol, and drawn beside a shorter run a reader
    takes them for its target) and on another variant than the task's default (its protocol)."""
    table = paper().table_for(group.task, group.T)
    if table is None or group.reduced or not is_default_variant(group.task, group.variant):
        return {}
    column = next((name for name, ours in table.columns.items() if ours == stat), None)
    if column is None:
        return {}
    values = {}
    for row in group.rows:
        if row.stale:  # made by other code: `report --paper` does not compare it either
            continue
        model = paper_row_for(table, group, row)
        value = table.value(model, column) if model else None
        if value is not None:
            values[row.label] = (value[0], value[1], table.label)
    return values


def _paper_handle(label: str) -> Line2D:
    return Line2D([], [], color="dimgray", ls="none", marker=PAPER_MARKER, ms=11, mec="black", mew=0.6,
                  label=label)


def _positive(values: Iterable[Optional[float]]) -> bool:
    values = [v for v in values if v is not None]
    return bool(values) and min(values) > 0


# -- loss curves -----------------------------------------------------------------------------------


def _series(runs, attr: str) -> tuple[list[int], list[float], list[float], list[float]]:
    """Steps and the mean, min and max over runs at each step (runs without the point skip it)."""
    by_step: dict[int, list[float]] = {}
    for run in runs:
        for point in run.curve:
            value = getattr(point, attr)
            if value is not None and math.isfinite(value):
                by_step.setdefault(point.step, []).append(value)
    steps = sorted(by_step)
    means = [sum(by_step[s]) / len(by_step[s]) for s in steps]
    return steps, means, [min(by_step[s]) for s in steps], [max(by_step[s]) for s in steps]


def curve_figure(group: Group, out_dir: Path, subset: Optional[Subset] = None) -> list[Path]:
    """The loss curves of ``group`` (:func:`draw_curves`) as files; [] when no run has a curve."""
    return _save(draw_curves(group, subset), out_dir, f"curves_{_slug(group)}{_tag(subset)}")


def draw_curves(group: Group, subset: Optional[Subset] = None) -> Optional[Figure]:
    """Training and validation loss against step, one line per model (mean over seeds) with a
    min-max band, the task's no-memory baseline dotted, the paper's attained minimum of each
    model as a star at the right edge. None when no run has a curve."""
    labels = [row.label for row in group.rows if any(run.curve for run in group.runs.get(row.label, []))]
    if not labels:
        return None
    styles = _styles(labels, group.rows)
    panels = (("train_loss", "min_train_loss", "training loss"), ("val_loss", "min_val_loss", "validation loss"))
    papers = {stat: _paper_values(group, stat) for _, stat, _ in panels}
    all_values = [p for label in labels for run in group.runs[label] for point in run.curve
                  for p in (point.train_loss, point.val_loss) if p is not None]
    all_values += [v[0] for values in papers.values() for label, v in values.items() if label in labels]
    log = _positive(all_values)
    with matplotlib.rc_context(STYLE):
        fig = _figure(11, 4.6)
        axes = fig.subplots(1, 2, sharey=True)
        last_step = 1
        for ax, (attr, stat, name) in zip(axes, panels):
            for label in labels:
                runs = group.runs[label]
                steps, mean, low, high = _series(runs, attr)
                if not steps:
                    continue
                last_step = max(last_step, steps[-1])
                style = styles[label]
                ax.plot(steps, mean, lw=1.8, ms=5, markevery=markevery(len(steps)), **style.line())
                if len(runs) > 1:
                    ax.fill_between(steps, low, high, color=style.color, alpha=0.15, lw=0)
            first = min((s for label in labels for s in _series(group.runs[label], attr)[0]), default=0)
            shift = 0.02 * max(last_step - first, 1)  # stars side by side, not on top of each other
            for i, (label, (mean, std, _)) in enumerate(papers[stat].items()):
                if label in styles:
                    ax.plot([last_step + i * shift], [mean], ls="none", marker=PAPER_MARKER, ms=13, color=styles[label].color,
                            mec="black", mew=0.6, clip_on=False, zorder=4)
            if group.baseline is not None:
                _draw_baseline(ax, group)
            ax.set_title(name)
            ax.set_xlabel("training step (optimizer updates)")
        if log:
            log_axis(axes[0])  # shared y: formats both panels
        axes[0].set_ylabel(_axis_label(group.task) + (", log scale" if log else ""))
        handles = [Line2D([], [], lw=1.8, ms=5, label=f"{label}, {_n_seeds(len(group.runs[label]))}",
                          **styles[label].line()) for label in labels]
        if any(len(group.runs[label]) > 1 for label in labels):
            handles.append(Patch(color="grey", alpha=0.25, label="min–max over seeds"))
        paper_tables = {v[2] for values in papers.values() for v in values.values()}
        if paper_tables:
            handles.append(_paper_handle(f"paper's attained minimum ({', '.join(sorted(paper_tables))};\n"
                                         "full protocol), at the last step"))
        if group.baseline is not None:
            handles.append(_baseline_handle(group))
        _legend(fig, handles)
        fig.suptitle(f"{_where(group)}: loss curves, mean over seeds" + _subtitle(subset), fontweight="bold")
        _footer(fig, f"{_budget_text(group)} · {_seeds_text(group, labels)}")
    return fig


# -- k-ablation ------------------------------------------------------------------------------------


def k_ablation_figure(view: KAblation, out_dir: Path, subset: Optional[Subset] = None) -> list[Path]:
    """The k-ablation of ``view`` (:func:`draw_k_ablation`) as files; [] without numbers."""
    stem = f"kablation_{view.model}_{_slug(view.group)}{_tag(subset)}"
    return _save(draw_k_ablation(view, subset), out_dir, stem)


def draw_k_ablation(view: KAblation, subset: Optional[Subset] = None) -> Optional[Figure]:
    """Min and final validation loss against k (mean ± std over seeds), the models without a
    window as horizontal lines with a ±std band, the no-memory baseline, and the paper's
    values (ATN at the paper's k, LSTM and LN as lines) on the minimum panel. None without a
    k row with numbers."""
    group = view.group
    rows = [row for row in view.rows if row.stats["min_val_loss"].mean is not None]
    if not rows:
        return None
    ks = sorted({row.k for row in rows})
    series = {name: [row for row in rows if row.k_series == name] for name in dict.fromkeys(r.k_series for r in rows)}
    styles = styles_for([(view.model + name, view.model) for name in series]
                        + [(r.label, r.model) for r in view.references])
    paper_values = _paper_values(group, "min_val_loss")
    table = paper().table_for(group.task, group.T)
    paper_k = table.k if table is not None else None
    paper_atn = next((v for label, v in paper_values.items()
                      if any(r.label == label for r in view.rows)), None)
    if paper_atn is None and table is not None and paper_k is not None and view.model in table.rows \
            and not group.reduced and is_default_variant(group.task, group.variant):
        column = next((name for name, ours in table.columns.items() if ours == "min_val_loss"), None)
        value = table.value(view.model, column) if column else None
        paper_atn = (value[0], value[1], table.label) if value else None
    values = [row.stats[s].mean for row in rows for s in ("min_val_loss", "final_val_loss")]
    values += [r.stats[s].mean for r in view.references for s in ("min_val_loss", "final_val_loss")]
    values += [v[0] for v in paper_values.values()] + ([group.baseline] if group.baseline else [])
    log = _positive(values) and max(v for v in values if v) / min(v for v in values if v) > 8
    with matplotlib.rc_context(STYLE):
        fig = _figure(11, 4.6)
        axes = fig.subplots(1, 2, sharey=True)
        for ax, (stat, name) in zip(axes, (("min_val_loss", "minimum validation loss"),
                                           ("final_val_loss", "final validation loss"))):
            for setting, line in series.items():  # one line per setting besides k (bias placement, code)
                means = [row.stats[stat].mean for row in line]
                errors = [row.stats[stat].std or 0.0 for row in line]
                style = styles[view.model + setting]
                ax.errorbar([row.k for row in line], means, yerr=errors, color=style.color, ls=style.linestyle,
                            marker=style.marker, ms=6, lw=1.8, capsize=4)
            for row in view.references:
                stat_value = row.stats[stat]
                if stat_value.mean is None:
                    continue
                ref = styles[row.label]
                ax.axhline(stat_value.mean, color=ref.color, ls=ref.linestyle, lw=1.4)
                if stat_value.std:
                    ax.axhspan(stat_value.mean - stat_value.std, stat_value.mean + stat_value.std,
                               color=ref.color, alpha=0.12, lw=0)
                if stat == "min_val_loss" and row.label in paper_values:
                    ax.axhline(paper_values[row.label][0], color=ref.color, ls=(0, (1, 3)), lw=1.2)
            if stat == "min_val_loss" and paper_atn is not None and paper_k is not None:
                ax.errorbar([paper_k], [paper_atn[0]], yerr=[paper_atn[1]], ls="none", marker=PAPER_MARKER, ms=14,
                            color=styles[view.model + next(iter(series))].color, mec="black", mew=0.6, capsize=3,
                            zorder=5)
            if group.baseline is not None:
                _draw_baseline(ax, group)
            if min(ks) > 0 and max(ks) / min(ks) > 10:  # a wide scan (k-scan: 1 ... T) reads better in log k
                log_axis(ax, "x", (min(ks), max(ks)))
            ax.set_xticks(ks, [str(k) for k in ks])
            ax.set_xlabel(f"ATN window k (time steps of {group.T})" if group.T else "ATN window k (time steps)")
            ax.set_title(name)
        if log:
            log_axis(axes[0])
        axes[0].set_ylabel(_axis_label(group.task) + (", log scale" if log else ""))
        handles = [Line2D([], [], color=styles[view.model + name].color, ls=styles[view.model + name].linestyle,
                          marker=styles[view.model + name].marker, label=f"{view.model}{name} (mean ± std over seeds)")
                   for name in series]
        handles += [Line2D([], [], color=styles[r.label].color, ls=styles[r.label].linestyle,
                           label=f"{r.label} (no window; band ±std)") for r in view.references]
        if paper_atn is not None and paper_k is not None:
            handles.append(_paper_handle(f"paper, {view.model} k={paper_k} ({paper_atn[2]})"))
        if any(r.label in paper_values for r in view.references):
            handles.append(Line2D([], [], color="dimgray", ls=(0, (1, 3)),
                                  label="paper, models without a window\n(dotted, their colour)"))
        if group.baseline is not None:
            handles.append(_baseline_handle(group))
        _legend(fig, handles)
        counts = {row.n for row in rows}
        seeds = f"{_n_seeds(counts.pop())} per k" if len(counts) == 1 else \
            "seeds " + ", ".join(f"k={row.k}: {row.n}" for row in rows)
        refs = ", ".join(f"{row.label}: {row.n}" for row in view.references)
        fig.suptitle(f"k-ablation of {view.model}: {_where(group)} — loss against the window k" + _subtitle(subset),
                     fontweight="bold")
        drawn = paper_atn is not None and paper_k is not None or any(r.label in paper_values for r in view.references)
        _footer(fig, f"{_budget_text(group)} · {seeds}" + (f"; {refs}" if refs else "")
                + (" · paper values: full protocol, minimum only" if drawn else ""))
    return fig


# -- cost (from atnbench bench) --------------------------------------------------------------------


BENCH_FIELDS = ("workload", "model", "batch", "hidden", "T", "train_ms", "train_ms_p25", "train_ms_p75", "infer_ms")


def _bench_schema():
    """What the cost figure reads of a record, typed (``atnbench bench --output`` writes more)."""
    from typing import Annotated

    from pydantic import ConfigDict, Field, StrictFloat, StrictInt, StrictStr, StringConstraints, create_model

    millis = Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]  # 12 or 12.5; not "12", true or NaN
    count = Annotated[StrictInt, Field(ge=1)]
    name = Annotated[StrictStr, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]  # in file names
    types = {"workload": name, "model": StrictStr, "batch": count, "hidden": count, "T": count}
    fields = {name: (types.get(name, millis), ...) for name in BENCH_FIELDS}
    return create_model("BenchRecord", __config__=ConfigDict(extra="allow"), k=(Optional[StrictInt], None), **fields)


def read_bench_records(path: Path) -> list[dict]:
    """The records of ``atnbench bench --output`` in ``path``; a UserError naming the file, the
    record and its first field that is missing or not what bench writes, for anything else."""
    import json

    from pydantic import ValidationError

    from atnbench.userfiles import parse_json, read_text

    what = "not the records of `atnbench bench --output`"
    if path.suffix.lower() == ".csv":
        raise UserError(f"{path}: plot --bench reads the JSON records `atnbench bench -o FILE.json` writes, not CSV")
    records = parse_json(read_text(path, "records"), f"{path}: {what}")
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise UserError(f"{path}: {what} (a non-empty JSON list of objects)")
    schema = _bench_schema()
    for i, record in enumerate(records):
        missing = [field for field in BENCH_FIELDS if field not in record]
        if missing:
            raise UserError(f"{path}: {what} (record {i + 1} has no {missing[0]!r})")
        try:
            schema.model_validate(record)
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            said = "should be a name of letters, digits, '_', '.' and '-' (at most 64)" \
                if first["type"] == "string_pattern_mismatch" else first["msg"][0].lower() + first["msg"][1:]
            got = json.dumps(first["input"])
            raise UserError(f"{path}: {what} (record {i + 1}: {field} {said}, got "
                            f"{got if len(got) <= 40 else got[:37] + '...'})") from None
        if not record["train_ms_p25"] <= record["train_ms"] <= record["train_ms_p75"]:
            raise UserError(f"{path}: {what} (record {i + 1}: train_ms {record['train_ms']} is not between its "
                            f"quartiles {record['train_ms_p25']} and {record['train_ms_p75']})")
    shapes: dict[str, tuple] = {}
    for i, record in enumerate(records):  # one bench's records: each workload at one size
        shape = tuple(record[key] for key in ("batch", "hidden", "T"))
        first = shapes.setdefault(record["workload"], shape)
        if shape != first:
            raise UserError(f"{path}: records of more than one bench: workload {record['workload']} at "
                            f"B={first[0]}, H={first[1]}, T={first[2]} and (record {i + 1}) B={shape[0]}, "
                            f"H={shape[1]}, T={shape[2]}; plot one bench's records")
    return records


def _bench_label(record: dict) -> str:
    return record["model"] + (f" k={record['k']}" if record.get("k") is not None else "")


def cost_figure(records: list[dict], out_dir: Path) -> list[Path]:
    """The cost figure of ``atnbench bench`` records (:func:`draw_cost`) as files; [] without
    records."""
    workloads = list(dict.fromkeys(r["workload"] for r in records))
    return _save(draw_cost(records), out_dir, "cost_" + "_".join(workloads))


def draw_cost(records: list[dict]) -> Optional[Figure]:
    """From ``atnbench bench`` records: per workload, a row per model (and k) with the median ms
    of a training step (error bar: the quartiles) and, hatched under it, of inference, the
    training step's cost relative to nn.LSTM at its end. The time axis is logarithmic: a fused
    kernel's 20 ms and the reference ATN's 2,000 ms are read on one axis. Each model has a colour
    of its own (the same in every panel); its windows k share it. None without records."""
    if not records:
        return None
    workloads = list(dict.fromkeys(r["workload"] for r in records))
    colors = model_colors(r["model"] for r in records)
    rows = max(sum(1 for r in records if r["workload"] == w) for w in workloads)
    with matplotlib.rc_context(STYLE):
        fig = _figure(max(6.5, 2.6 + 4.4 * len(workloads)), 1.9 + 0.36 * rows)
        axes = fig.subplots(1, len(workloads), squeeze=False)[0]
        for ax, workload in zip(axes, workloads):
            chosen = [r for r in records if r["workload"] == workload]
            # the axis starts under the fastest bar and leaves room for the ratios past the slowest
            low = min(min(r["infer_ms"], r["train_ms_p25"]) for r in chosen) / 2
            high = max(r["train_ms_p75"] for r in chosen) * 4
            height = 0.38
            base = next((r["train_ms"] for r in chosen if r["model"] == "lstm-fused"), None)
            for y, r in enumerate(chosen):
                color = colors[r["model"]]
                spread = [[r["train_ms"] - r["train_ms_p25"]], [r["train_ms_p75"] - r["train_ms"]]]
                ax.barh(y - height / 2, r["train_ms"] - low, height, left=low, xerr=spread, color=color,
                        capsize=2, edgecolor="black", lw=0.5, error_kw={"lw": 0.8})
                ax.barh(y + height / 2, r["infer_ms"] - low, height, left=low, color=color, alpha=0.45,
                        hatch="///", edgecolor="black", lw=0.5)
                ratio = r["train_ms"] / base if base else r.get("ratio_lstm_fused")  # from the bars it labels
                if ratio is not None:
                    ax.annotate(f"{ratio:.1f}×", (r["train_ms_p75"], y - height / 2), textcoords="offset points",
                                xytext=(3, 0), va="center", fontsize=8)
            ax.set_yticks(range(len(chosen)), [_bench_label(r) for r in chosen])
            ax.set_ylim(len(chosen) - 0.5, -0.5)  # the first model on top, as `atnbench bench` lists them
            ax.set_xlim(low, high)
            log_axis(ax, "x", limits=(low, high))
            ax.grid(axis="y", visible=False)
            ax.set_xlabel("ms per step (median, log scale; error bar: quartiles)")
            r0 = chosen[0]
            ax.set_title(f"{workload}: B={r0['batch']}, H={r0['hidden']}, T={r0['T']}")
        axes[0].set_ylabel("model (ATN: window k)")
        handles = [Patch(facecolor="lightgray", edgecolor="black", lw=0.5, label="training step\n"
                         "(forward, loss, backward, RMSprop)"),
                   Patch(facecolor="lightgray", edgecolor="black", lw=0.5, alpha=0.6, hatch="///",
                         label="inference (forward)"),
                   Line2D([], [], ls="none", marker="$n×$", color="black", ms=12, label="training cost ÷ nn.LSTM's")]
        _legend(fig, handles)
        env = records[0]
        reps = {r.get("reps") for r in records}
        fig.suptitle("cost per step of each model (atnbench bench)", fontweight="bold")
        _footer(fig, f"torch {env.get('torch', '?')}, device {env.get('device', '?')}, {env.get('threads', '?')} "
                     f"thread(s), {env.get('dtype', 'float32')}; median of {'/'.join(map(str, sorted(reps)))} "
                     f"interleaved reps; CPU {env.get('cpu', '?')}"
                     + (f" ({env['cpu_capability']})" if env.get("cpu_capability") else ""))
    return fig


# -- all of them -----------------------------------------------------------------------------------


def write_plots(groups: list[Group], out_dir: Path, k_ablation: Optional[bool] = None,
                subset: Optional[Subset] = None) -> list[Path]:
    """Every figure for the groups: curves per group, and the k-ablation where a
    windowed model has several k (always, when ``k_ablation`` is True); of a ``subset`` of the
    runs, its files and titles say so. Raises NothingToPlot, writing nothing, when no group has
    a finished run with a curve."""
    if not any(any(run.curve for runs in group.runs.values() for run in runs) for group in groups):
        raise NothingToPlot("nothing to plot: no finished run with a loss curve matches the selection")
    out_dir = Path(out_dir)
    paths: list[Path] = []
    for group in groups:
        paths += curve_figure(group, out_dir, subset)
        views = k_ablations([group])
        for view in views:
            several = len({row.k for row in view.rows}) > 1
            if k_ablation or (k_ablation is None and several):
                paths += k_ablation_figure(view, out_dir, subset)
    return paths

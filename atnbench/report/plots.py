"""Figures as files (PNG and SVG), drawn without a screen (matplotlib's Agg, no pyplot).

- loss curves per model, mean over seeds with a min-max band, training and validation panels,
  one figure per table group (task, T, budget): the form of the paper's Figs. 2-4;
- the k-ablation: min and final validation loss against k with ±std error bars, the models
  without a window as horizontal references: Fig. 7's content;
- the cost: wall time of each run and training steps per second per model.

Every figure carries a title, axis labels with units, a legend and a subtitle with the budget
and the seeds it stands on. Each function returns the paths it wrote.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Iterable, Optional

import matplotlib

matplotlib.use("Agg", force=False)  # no screen needed; a no-op where pyplot already chose one

from matplotlib import ticker  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from atnbench.report.aggregate import (  # noqa: E402
    Group,
    KAblation,
    ModelRow,
    budget_label,
    k_ablations,
)
from atnbench.report.paper import protocol_label  # noqa: E402
from atnbench.report.render import measure_of  # noqa: E402

FORMATS = ("png", "svg")
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
MODEL_COLORS = {"lstm": "#1f77b4", "ln": "#ff7f0e", "atn": "#2ca02c", "atn-bn": "#d62728", "bn": "#9467bd",
                "bn-input": "#8c564b", "bln": "#e377c2", "gru": "#7f7f7f", "gru-ln": "#bcbd22", "gru-atn": "#17becf"}
SHADES = {"atn": "Greens", "atn-bn": "Reds", "gru-atn": "Blues", "gru-atn-bn": "Oranges"}
STYLE = {"svg.hashsalt": "atnbench", "svg.fonttype": "path", "axes.spines.top": False, "axes.spines.right": False,
         "axes.grid": True, "grid.alpha": 0.3, "legend.frameon": False, "font.size": 10}


class NothingToPlot(ValueError):
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


def _colors(labels: list[str], rows: list[ModelRow]) -> dict[str, str]:
    """A fixed colour per model (LSTM blue, LN orange, ATN green, ...); the k of a model split by k
    get shades of its colour, light (small k) to dark (large k)."""
    models = {row.label: row.model for row in rows}
    by_model: dict[str, list[str]] = {}
    for label in labels:
        by_model.setdefault(models.get(label, label), []).append(label)
    colors: dict[str, str] = {}
    spare = iter([c for c in PALETTE if c not in MODEL_COLORS.values()] + list(PALETTE))
    for model, members in by_model.items():
        if len(members) == 1:
            colors[members[0]] = MODEL_COLORS.get(model) or next(spare, "#333333")
            continue
        cmap = matplotlib.colormaps[SHADES.get(model, "Purples")]
        for i, label in enumerate(members):  # rows come sorted by k
            colors[label] = matplotlib.colors.to_hex(cmap(0.45 + 0.5 * i / (len(members) - 1)))
    return colors


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


def _save(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in FORMATS:
        path = out_dir / f"{stem}.{fmt}"
        metadata = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(path, format=fmt, dpi=150, metadata=metadata)
        paths.append(path)
    return paths


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _footer(fig: Figure, text: str) -> None:
    """The budget and seeds a figure stands on, under the panels (laid out with them)."""
    fig.supxlabel(text, fontsize=9, color="dimgray")


def _log_axis(ax) -> None:
    """Log scale with plain tick labels (0.2, 0.5, ... not 2×10⁻¹); minor labels (at 2 and 5)
    only when the axis spans less than about a decade."""
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    plain = ticker.FuncFormatter(lambda value, _: f"{value:g}")
    some = ticker.FuncFormatter(lambda value, _: f"{value:g}" if f"{value:.0e}"[0] in "25" else "")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(some if high / low < 20 else ticker.NullFormatter())


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


def curve_figure(group: Group, out_dir: Path) -> list[Path]:
    """Training and validation loss against step, one line per model (mean over seeds) with a
    min-max band, the task's no-memory baseline dashed. Returns [] when no run has a curve."""
    labels = [row.label for row in group.rows if any(run.curve for run in group.runs.get(row.label, []))]
    if not labels:
        return []
    colors = _colors(labels, group.rows)
    all_values = [p for label in labels for run in group.runs[label] for point in run.curve
                  for p in (point.train_loss, point.val_loss) if p is not None]
    log = bool(all_values) and min(all_values) > 0
    with matplotlib.rc_context(STYLE):
        fig = _figure(11, 4.6)
        axes = fig.subplots(1, 2, sharey=True)
        for ax, (attr, name) in zip(axes, (("train_loss", "training loss"), ("val_loss", "validation loss"))):
            for label in labels:
                runs = group.runs[label]
                steps, mean, low, high = _series(runs, attr)
                if not steps:
                    continue
                ax.plot(steps, mean, color=colors[label], lw=1.8)
                if len(runs) > 1:
                    ax.fill_between(steps, low, high, color=colors[label], alpha=0.18, lw=0)
            if group.baseline is not None:
                ax.axhline(group.baseline, color="black", ls="--", lw=1.1)
            ax.set_title(name)
            ax.set_xlabel("training step (optimizer updates)")
        if log:
            axes[0].set_yscale("log")
            _log_axis(axes[0])  # shared y: formats both panels
        axes[0].set_ylabel(_axis_label(group.task) + (", log scale" if log else ""))
        handles = [Line2D([], [], color=colors[label], lw=1.8, label=f"{label}, {_n_seeds(len(group.runs[label]))}")
                   for label in labels]
        if any(len(group.runs[label]) > 1 for label in labels):
            handles.append(Patch(color="grey", alpha=0.25, label="min–max over seeds"))
        if group.baseline is not None:
            formula = "10·ln 8/(T+20)" if group.task == "copying" else "no memory"
            handles.append(Line2D([], [], color="black", ls="--", lw=1.1,
                                  label=f"baseline ({formula}) = {group.baseline:.4g}"))
        fig.legend(handles=handles, loc="outside right upper", fontsize=9)
        fig.suptitle(f"{_where(group)}: loss curves, mean over seeds", fontweight="bold")
        _footer(fig, f"{_budget_text(group)} · {_seeds_text(group, labels)}")
        paths = _save(fig, out_dir, f"curves_{_slug(group)}")
    return paths


# -- k-ablation ------------------------------------------------------------------------------------


def k_ablation_figure(view: KAblation, out_dir: Path) -> list[Path]:
    """Min and final validation loss against k (mean ± std over seeds), the models without a
    window as horizontal lines with a ±std band. Returns [] without a k row with numbers."""
    group = view.group
    rows = [row for row in view.rows if row.stats["min_val_loss"].mean is not None]
    if not rows:
        return []
    ks = [row.k for row in rows]
    ref_colors = _colors([r.label for r in view.references], view.references)
    atn_color = MODEL_COLORS.get(view.model, "#2ca02c")
    with matplotlib.rc_context(STYLE):
        fig = _figure(11, 4.6)
        axes = fig.subplots(1, 2, sharey=True)
        for ax, (stat, name) in zip(axes, (("min_val_loss", "minimum validation loss"),
                                           ("final_val_loss", "final validation loss"))):
            means = [row.stats[stat].mean for row in rows]
            errors = [row.stats[stat].std or 0.0 for row in rows]
            ax.errorbar(ks, means, yerr=errors, color=atn_color, marker="o", ms=6, lw=1.8, capsize=4,
                        label=f"{view.model} (mean ± std)")
            for row in view.references:
                stat_value = row.stats[stat]
                if stat_value.mean is None:
                    continue
                color = ref_colors[row.label]
                ax.axhline(stat_value.mean, color=color, ls="--", lw=1.4, label=f"{row.label} (no window)")
                if stat_value.std:
                    ax.axhspan(stat_value.mean - stat_value.std, stat_value.mean + stat_value.std,
                               color=color, alpha=0.12, lw=0)
            if group.baseline is not None and group.task == "copying":
                ax.axhline(group.baseline, color="black", ls=":", lw=1, label=f"baseline = {group.baseline:.4g}")
            if min(ks) > 0 and max(ks) / min(ks) > 10:  # a wide scan (k-scan: 1 ... T) reads better in log k
                ax.set_xscale("log")
                ax.xaxis.set_minor_formatter(ticker.NullFormatter())
            ax.set_xticks(ks, [str(k) for k in ks])
            ax.set_xlabel(f"ATN window k (time steps of {group.T})" if group.T else "ATN window k (time steps)")
            ax.set_title(name)
        axes[0].set_ylabel(_axis_label(group.task))
        axes[1].legend(loc="best", fontsize=9)
        counts = {row.n for row in rows}
        seeds = f"{_n_seeds(counts.pop())} per k" if len(counts) == 1 else \
            "seeds " + ", ".join(f"k={row.k}: {row.n}" for row in rows)
        refs = ", ".join(f"{row.label}: {row.n}" for row in view.references)
        fig.suptitle(f"k-ablation of {view.model}: {_where(group)} — loss against the window k", fontweight="bold")
        _footer(fig, f"{_budget_text(group)} · {seeds}" + (f"; {refs}" if refs else "")
                + " · error bars" + (" and bands" if view.references else "") + ": ±1 std over seeds")
        paths = _save(fig, out_dir, f"kablation_{view.model}_{_slug(group)}")
    return paths


# -- cost ------------------------------------------------------------------------------------------


def cost_figure(group: Group, out_dir: Path) -> list[Path]:
    """Wall time and training steps/s of every run (dots) with the mean per model (bars).
    Returns [] when no run recorded its wall time."""
    rows = [row for row in group.rows if "wall_s" in row.stats and row.stats["wall_s"].n]
    if not rows:
        return []
    labels = [row.label for row in rows]
    colors = _colors(labels, group.rows)
    devices = sorted({str(run.record.env.get("device")) for row in rows for run in group.runs.get(row.label, [])
                      if run.record.env.get("device")})
    with matplotlib.rc_context(STYLE):
        fig = _figure(11, 4.4)
        left, right = fig.subplots(1, 2)
        positions = range(len(rows))
        for x, row in zip(positions, rows):
            stat = row.stats["wall_s"]
            left.bar(x, stat.mean, color=colors[row.label], alpha=0.35, width=0.6)
            left.scatter([x] * len(stat.values), stat.values, color=colors[row.label], s=22, zorder=3)
            speed = row.stats.get("steps_per_s")
            if speed is not None and speed.n:
                right.bar(x, speed.mean, color=colors[row.label], alpha=0.35, width=0.6)
                right.scatter([x] * len(speed.values), speed.values, color=colors[row.label], s=22, zorder=3)
        for ax in (left, right):
            ax.set_xticks(list(positions), labels, rotation=20 if len(rows) > 4 else 0)
            ax.set_xlabel("model")
        left.set_ylabel("wall time per run (s)")
        left.set_title("wall time of each run")
        right.set_ylabel("training throughput (steps/s)")
        right.set_title("training speed")
        fig.suptitle(f"{_where(group)}: cost of each model (dots: runs, bars: mean)", fontweight="bold")
        device = f" · device: {', '.join(devices)}" if devices else ""
        _footer(fig, f"{_budget_text(group)} · {_seeds_text(group, labels)}{device}")
        paths = _save(fig, out_dir, f"cost_{_slug(group)}")
    return paths


# -- all of them -----------------------------------------------------------------------------------


def write_plots(groups: list[Group], out_dir: Path, k_ablation: Optional[bool] = None) -> list[Path]:
    """Every figure for the groups: curves and cost per group, and the k-ablation where a
    windowed model has several k (always, when ``k_ablation`` is True). Raises NothingToPlot,
    writing nothing, when no group has a finished run with a curve."""
    if not any(any(run.curve for runs in group.runs.values() for run in runs) for group in groups):
        raise NothingToPlot("nothing to plot: no finished run with a loss curve matches the selection")
    out_dir = Path(out_dir)
    paths: list[Path] = []
    for group in groups:
        paths += curve_figure(group, out_dir)
        views = k_ablations([group])
        for view in views:
            several = len({row.k for row in view.rows}) > 1
            if k_ablation or (k_ablation is None and several):
                paths += k_ablation_figure(view, out_dir)
        paths += cost_figure(group, out_dir)
    return paths

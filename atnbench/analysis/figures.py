"""Fig. 6's form: per normalized term, the post-norm mean and variance against time, one line
per model. Files only (PNG and SVG), matplotlib's Agg canvas: no screen, no pyplot state."""

from __future__ import annotations

from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from atnbench.analysis.stats import TERMS, Series

PANEL = {"hidden": "a", "input": "b", "cell": "c"}


def term_figure(series: list[Series], term: str, title_suffix: str = "") -> Figure:
    fig = Figure(figsize=(7.0, 5.0))
    FigureCanvasAgg(fig)
    ax_mean, ax_var = fig.subplots(2, 1, sharex=True)
    layers = {s.layer for s in series}
    for s in series:
        label = s.model if len(layers) == 1 else f"{s.model} (layer {s.layer})"
        steps = range(1, s.T + 1)
        ax_mean.plot(steps, s.mean, label=label, linewidth=1.2)
        ax_var.plot(steps, s.var, label=label, linewidth=1.2)
    ax_mean.set_ylabel("mean")
    ax_var.set_ylabel("variance")
    ax_var.set_xlabel("time step t")
    for ax in (ax_mean, ax_var):
        ax.grid(True, alpha=0.3)
    ax_mean.legend(fontsize=8, loc="best")
    fig.suptitle(f"({PANEL.get(term, '?')}) post-normalization statistics of {TERMS.get(term, term)}{title_suffix}")
    fig.tight_layout()
    return fig


def write_term_figures(series: list[Series], out_dir: Path, title_suffix: str = "") -> list[Path]:
    """One figure per term present, as PNG and SVG; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for term in TERMS:
        chosen = [s for s in series if s.term == term]
        if not chosen:
            continue
        fig = term_figure(chosen, term, title_suffix)
        stem = f"fig6{PANEL[term]}-{term}"
        for ext in ("png", "svg"):
            path = out_dir / f"{stem}.{ext}"
            fig.savefig(path, dpi=120 if ext == "png" else None)
            written.append(path)
    return written

"""Fig. 6's form: per normalized term, the post-norm mean and variance against time, one line
per model. Files only (PNG and SVG), matplotlib's Agg canvas: no screen, no pyplot state.
Styles (colour-blind-safe colours, line styles, markers) come from ``report.style``."""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from atnbench.analysis.stats import TERMS, Series
from atnbench.report.style import RC, markevery, styles_for

PANEL = {"hidden": "a", "input": "b", "cell": "c"}


def _model_key(model: str) -> str:
    """The zoo name behind a stats label ("LN" -> ln, "ATN(k=5) [run id]" -> atn, "GRU LN" -> gru-ln) for its style."""
    name = model.upper().removeprefix("GRU ").split(" [")[0]
    return ("gru-" if model.upper().startswith("GRU ") else "") + ("atn" if name.startswith("ATN") else name.lower())


def term_figure(series: list[Series], term: str, title_suffix: str = "") -> Figure:
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(9.0, 5.2), layout="constrained")
        FigureCanvasAgg(fig)
        ax_mean, ax_var = fig.subplots(2, 1, sharex=True)
        layers = {s.layer for s in series}
        labels = [s.model if len(layers) == 1 else f"{s.model} (layer {s.layer})" for s in series]
        styles = styles_for((label, _model_key(s.model)) for label, s in zip(labels, series))
        for label, s in zip(labels, series):
            steps = range(s.T)  # from 0, as stats-series.csv's t and the table's footnote count them
            line = dict(lw=1.3, ms=4, markevery=markevery(s.T, 10), label=label, **styles[label].line())
            ax_mean.plot(steps, s.mean, **line)
            ax_var.plot(steps, s.var, **line)
        ax_mean.set_ylabel("mean over features")
        ax_var.set_ylabel("variance over features")
        ax_var.set_xlabel("time step t (from 0)")
        ax_mean.set_title("mean", fontsize=10)
        ax_var.set_title("variance", fontsize=10)
        handles, names = ax_mean.get_legend_handles_labels()
        fig.legend(handles, names, loc="outside right center", fontsize=9)
        fig.suptitle(f"({PANEL.get(term, '?')}) post-normalization statistics of {TERMS.get(term, term)}"
                     f"{title_suffix}", fontweight="bold")
        fig.supxlabel("batch-averaged, one training iteration; LN normalizes each step alone, ATN over the "
                      "last k steps", fontsize=9, color="dimgray")
    return fig


def write_term_figures(series: list[Series], out_dir: Path, title_suffix: str = "") -> list[Path]:
    """One figure per term present, as PNG and SVG; returns the paths written. A term's figure
    from an earlier call into the folder goes where this call has none (a GRU has no cell
    term): left there, it stood for models no longer in the CSV beside it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for term in TERMS:
        chosen = [s for s in series if s.term == term]
        if not chosen:
            for ext in ("png", "svg"):
                (out_dir / f"fig6{PANEL[term]}-{term}.{ext}").unlink(missing_ok=True)
            continue
        fig = term_figure(chosen, term, title_suffix)
        stem = f"fig6{PANEL[term]}-{term}"
        for ext in ("png", "svg"):
            path = out_dir / f"{stem}.{ext}"
            metadata = {"Date": None} if ext == "svg" else {"Software": None}
            fig.savefig(path, dpi=130 if ext == "png" else None, metadata=metadata)
            written.append(path)
    return written

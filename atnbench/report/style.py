"""How every figure of atnbench looks: one colour-blind-safe palette with a line style and a
marker per series (so lines stay apart in grey and for colour-blind readers), readable log
axes, and the rc settings.

The palette is Okabe & Ito's (2008) qualitative one, safe for the common colour-vision
deficiencies; every series also differs in line style and marker, so a figure printed in
grey still tells them apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Optional

from matplotlib import ticker

from atnbench.registry import SCHEMES, style_slot

# Okabe-Ito, without its yellow (too light on white) and with black last
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (3, 1)), (0, (1, 1)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<")

# where a figure has more models than Okabe-Ito has colours: Paul Tol's "muted" scheme, also
# safe for colour-blind readers, without the colours close to Okabe-Ito's
TOL_MUTED = ("#882255", "#44AA99", "#999933", "#AA4499", "#332288", "#DDCC77", "#CC6677", "#117733", "#88CCEE")

BASELINE_COLOR = "#4D4D4D"
PAPER_MARKER = "*"

RC = {"svg.hashsalt": "atnbench", "svg.fonttype": "path", "axes.spines.top": False, "axes.spines.right": False,
      "axes.grid": True, "grid.alpha": 0.3, "legend.frameon": False, "font.size": 10}


@dataclass(frozen=True)
class SeriesStyle:
    color: str
    linestyle: object
    marker: str

    def line(self) -> dict:
        return {"color": self.color, "ls": self.linestyle, "marker": self.marker}


def _slot_style(slot: int) -> SeriesStyle:
    # past Okabe-Ito's seven, Tol's muted colours: a line drawn without markers (a k-ablation's
    # references) stays apart by its colour too (slot 7 drew LSTM's blue solid line for BLN)
    palette = OKABE_ITO + TOL_MUTED
    return SeriesStyle(palette[slot % len(palette)], LINESTYLES[slot % len(LINESTYLES)], MARKERS[slot % len(MARKERS)])


def _base_model(model: str) -> str:
    return model.split("-", 1)[1] if model.startswith("gru-") else ("lstm" if model == "gru" else model)


def _own_slot(name: str) -> Optional[int]:
    """The registry's slot of a model (``atn-loop``, ``lstm-fused``: their model's), None for a
    model of no registered normalization."""
    base = _base_model(name.split("-loop")[0].split("-function")[0].removesuffix("-fused"))
    return style_slot(base) if base == "lstm" or base in SCHEMES else None


def styles_for(series: Iterable[tuple[str, str]]) -> dict[str, SeriesStyle]:
    """A distinct style for every (label, model) of one figure: a model's own slot where it is
    free, the next free slot otherwise (ATN at three k gets three different colours, line
    styles and markers); 16 series get 16 colours, and no two of 112 share colour and line style."""
    styles: dict[str, SeriesStyle] = {}
    used: set[int] = set()
    for label, model in series:
        slot = style_slot(_base_model(model))
        while slot in used:
            slot += 1
        used.add(slot)
        styles[label] = _slot_style(slot)
    return styles


def model_colors(models: Iterable[str]) -> dict[str, str]:
    """One colour per model, never two alike: a model's own (``style_slot``, the colour it has in
    every figure) where it is free, else the next free one of Okabe-Ito's, then of Tol's muted
    colours, then evenly spaced hues. ``lstm-fused`` and ``atn-loop`` are models of their own,
    drawn apart from ``lstm`` and ``atn``, which keep their colours (they choose first)."""
    import colorsys

    given = list(dict.fromkeys(models))
    names = sorted(given, key=lambda name: _own_slot(name) is None)  # stable: otherwise in the order given
    palette = list(OKABE_ITO) + list(TOL_MUTED)
    extra = len(names) - len(palette)
    palette += ["#%02X%02X%02X" % tuple(round(255 * c) for c in colorsys.hsv_to_rgb((i + 0.5) / extra, 0.75, 0.7))
                for i in range(max(extra, 0))]
    colors: dict[str, str] = {}
    used: set[int] = set()
    for name in names:
        slot = _own_slot(name)
        slot = len(OKABE_ITO) if slot is None else slot
        while slot in used:
            slot += 1
        if slot >= len(palette):  # past the end: the first colour nobody has
            slot = min(set(range(len(palette))) - used)
        used.add(slot)
        colors[name] = palette[slot]
    return {name: colors[name] for name in given}


def markevery(n_points: int, marks: int = 8) -> int:
    """Mark about ``marks`` points of a curve: enough to tell styles apart, few enough to read it."""
    return max(1, n_points // marks)


def plain_number(value: float, _=None) -> str:
    """0.02, 0.5, 3, 200 (never 2×10⁻²)."""
    return f"{value:g}"


def log_axis(ax, axis: str = "y", limits: Optional[tuple[float, float]] = None) -> None:
    """A log axis that reads: plain numbers, labels at 1-2-5 of each decade when the data span
    less than about three decades (minor ticks at the other multiples, unlabelled), at the
    decades otherwise. Call it after the data are drawn (it reads the limits)."""
    which = ax.yaxis if axis == "y" else ax.xaxis
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    low, high = limits or (ax.get_ylim() if axis == "y" else ax.get_xlim())
    decades = math.log10(high / low) if low > 0 and high > low else 1.0
    if decades <= 1.2:
        subs = (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
    elif decades <= 3.2:
        subs = (1.0, 2.0, 5.0)
    else:
        subs = (1.0,)
    which.set_major_locator(ticker.LogLocator(base=10, subs=subs, numticks=30))
    which.set_major_formatter(ticker.FuncFormatter(plain_number))
    which.set_minor_locator(ticker.LogLocator(base=10, subs=tuple(range(1, 10)), numticks=30))
    which.set_minor_formatter(ticker.NullFormatter())

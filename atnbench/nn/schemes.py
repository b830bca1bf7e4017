"""Normalization schemes: which normalization each term of a recurrent cell gets.

A cell has up to three normalized terms: ``input`` (W_x x, all steps at once), ``hidden``
(W_h h, per step) and ``cell`` (the LSTM memory c, per step). A scheme names the module for
each, the default placement of the LSTM bias, and the paper it comes from. Adding a
normalization to every cell of atnbench is one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from atnbench.nn.norms import (
    AssortedTimeBatchNorm,
    AssortedTimeNorm,
    BatchLayerNorm,
    LayerNorm,
    NoNorm,
    NormSpec,
    SequenceBatchNorm,
    SequenceNorm,
    StepBatchNorm,
)

NormFactory = Callable[[int, NormSpec], SequenceNorm]


def _input_bn(size: int, spec: NormSpec) -> SequenceNorm:
    if spec.bn_input_mode == "sequence":
        return SequenceBatchNorm(size, spec, gain_init=1.0)
    return StepBatchNorm(size, spec, gain_init=1.0)


@dataclass(frozen=True)
class NormScheme:
    """Everything the rest of atnbench asks about a normalization: the CLI and the zoo (name,
    description, paper), run identity (``windowed``: does k enter the run id), the cells (the
    modules, bias placement, initialisation, whether the C++ and Triton fast paths cover it),
    reports and benchmarks (``label``) and figures (its place in the registry is its style slot)."""

    name: str
    description: str
    reference: str
    input: NormFactory
    hidden: NormFactory
    cell: NormFactory
    # Batch statistics subtract any per-feature constant, so a bias inside them is dead.
    bias_inside: bool
    label: str = ""  # as tables and benchmarks name it ("ATN-BN"); the name upper-cased if empty
    windowed: bool = False  # normalizes over a window of k steps: k is part of the run
    fast_path: bool = True  # the C++ (CPU) and Triton (GPU) kernels cover it; else the loop runs
    # The plain LSTM baseline is torch's own nn.LSTM with its default initialisation (with it
    # our adding T=100 LSTM attains the paper's Table 2 train loss; with "atn" it stays near
    # the no-memory plateau); normalized cells use the ATN authors' initialisation.
    init: str = "atn"

    @property
    def display(self) -> str:
        return self.label or self.name.upper()


SCHEMES: dict[str, NormScheme] = {
    s.name: s
    for s in (
        NormScheme("none", "no normalization", "Hochreiter & Schmidhuber (1997)",
                   NoNorm, NoNorm, NoNorm, bias_inside=True, init="torch", label="LSTM", fast_path=False),
        NormScheme("ln", "LayerNorm over the features of each step", "Ba et al. (2016)",
                   LayerNorm, LayerNorm, LayerNorm, bias_inside=True, label="LN"),
        NormScheme("atn", "Assorted-Time Normalization on LN: features of the last k steps",
                   "Pospisil et al. (2024), eqs. 7-9, 14-16",
                   AssortedTimeNorm, AssortedTimeNorm, AssortedTimeNorm, bias_inside=True, label="ATN",
                   windowed=True),
        NormScheme("atn-bn", "ATN on BN: per feature, batch x last k steps, gain 0.1",
                   "Pospisil et al. (2024), Table 6",
                   AssortedTimeBatchNorm, AssortedTimeBatchNorm, AssortedTimeBatchNorm, bias_inside=False,
                   label="ATN-BN", windowed=True),
        NormScheme("bn", "BN per time step on W_x x, W_h h and c, gain 0.1",
                   "Cooijmans et al. (2017)",
                   StepBatchNorm, StepBatchNorm, StepBatchNorm, bias_inside=False, label="recurrent BN (Cooijmans)"),
        NormScheme("bn-input", "BN on the input-to-hidden term only (frame- or sequence-wise)",
                   "Laurent et al. (2016)",
                   _input_bn, NoNorm, NoNorm, bias_inside=False, label="BN on the input term only (Laurent)"),
        NormScheme("bln", "Batch-Layer Normalization on W_x x, W_h h and c",
                   "Ziaee & Cano (2023), Algorithm 1",
                   BatchLayerNorm, BatchLayerNorm, BatchLayerNorm, bias_inside=False, label="BLN"),
    )
}


def register(scheme: NormScheme) -> None:
    """Add a normalization to every cell, command and report (see docs/adding-a-normalization.md)."""
    if scheme.name in SCHEMES:
        raise ValueError(f"a normalization named {scheme.name!r} is already registered")
    SCHEMES[scheme.name] = scheme


def unregister(name: str) -> None:
    SCHEMES.pop(name, None)


def is_windowed(norm: str) -> bool:
    """Whether k is a setting of this normalization (False for an unknown name)."""
    scheme = SCHEMES.get(norm)
    return scheme is not None and scheme.windowed


def fast_norms() -> tuple[str, ...]:
    """The normalizations the C++ and Triton fast paths cover."""
    return tuple(name for name, scheme in SCHEMES.items() if scheme.fast_path)


def style_slot(model: str) -> int:
    """A model's place in every figure's palette: its normalization's place in the registry
    (the plain cell, 'lstm', is 'none')."""
    names = list(SCHEMES)
    norm = "none" if model == "lstm" else model
    return names.index(norm) if norm in names else len(names)


def get_scheme(name: str) -> NormScheme:
    try:
        return SCHEMES[name]
    except KeyError:
        raise ValueError(f"unknown norm {name!r}; choose one of: {', '.join(SCHEMES)}") from None

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
    name: str
    description: str
    reference: str
    input: NormFactory
    hidden: NormFactory
    cell: NormFactory
    # Batch statistics subtract any per-feature constant, so a bias inside them is dead.
    bias_inside: bool
    # The plain LSTM baseline is torch's own nn.LSTM with its default initialisation (with it
    # our adding T=100 LSTM attains the paper's Table 2 train loss; with "atn" it stays near
    # the no-memory plateau); normalized cells use the ATN authors' initialisation.
    init: str = "atn"

    @property
    def windowed(self) -> bool:
        return self.name in ("atn", "atn-bn")


SCHEMES: dict[str, NormScheme] = {
    s.name: s
    for s in (
        NormScheme("none", "no normalization", "Hochreiter & Schmidhuber (1997)",
                   NoNorm, NoNorm, NoNorm, bias_inside=True, init="torch"),
        NormScheme("ln", "LayerNorm over the features of each step", "Ba et al. (2016)",
                   LayerNorm, LayerNorm, LayerNorm, bias_inside=True),
        NormScheme("atn", "Assorted-Time Normalization on LN: features of the last k steps",
                   "Pospisil et al. (2024), eqs. 7-9, 14-16",
                   AssortedTimeNorm, AssortedTimeNorm, AssortedTimeNorm, bias_inside=True),
        NormScheme("atn-bn", "ATN on BN: per feature, batch x last k steps, gain 0.1",
                   "Pospisil et al. (2024), Table 6",
                   AssortedTimeBatchNorm, AssortedTimeBatchNorm, AssortedTimeBatchNorm, bias_inside=False),
        NormScheme("bn", "BN per time step on W_x x, W_h h and c, gain 0.1",
                   "Cooijmans et al. (2017)",
                   StepBatchNorm, StepBatchNorm, StepBatchNorm, bias_inside=False),
        NormScheme("bn-input", "BN on the input-to-hidden term only (frame- or sequence-wise)",
                   "Laurent et al. (2016)",
                   _input_bn, NoNorm, NoNorm, bias_inside=False),
        NormScheme("bln", "Batch-Layer Normalization on W_x x, W_h h and c",
                   "Ziaee & Cano (2023), Algorithm 1",
                   BatchLayerNorm, BatchLayerNorm, BatchLayerNorm, bias_inside=False),
    )
}


def get_scheme(name: str) -> NormScheme:
    try:
        return SCHEMES[name]
    except KeyError:
        raise ValueError(f"unknown norm {name!r}; choose one of: {', '.join(SCHEMES)}") from None

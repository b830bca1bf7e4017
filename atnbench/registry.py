"""The registry: every normalization scheme, and the model names made from them.

A cell has up to three normalized terms: ``input`` (W_x x, all steps at once), ``hidden``
(W_h h, per step) and ``cell`` (the LSTM memory c, per step). A scheme names the module for
each, the default placement of the LSTM bias, and the paper it comes from. Adding a
normalization to every cell of atnbench is one entry here.

A model name is the scheme name for LSTMs (``ln``, ``atn``, ...; ``lstm`` is the plain LSTM) and
``gru-<scheme>`` for GRUs (``gru`` is the plain GRU); ``atnbench models`` lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any, Callable, Optional

from atnbench.errors import UserError

# (size, an atnbench.nn.norms.NormSpec) -> a SequenceNorm: a class, or a NormModule naming one.
# Not typed by those classes: importing them here would import torch, and the layer below.
NormFactory = Callable[[int, Any], Any]


@dataclass(frozen=True)
class NormModule:
    """A normalization module named by where it lives (``"atnbench.nn.norms:LayerNorm"``), as a
    package names its entry points; imported when a cell first builds one. So commands that read only
    names (``runs``, ``models``, ``run --help``) start without torch, and the registry names the
    models' modules without importing the layer below it. A normalization registered at run time
    may give its class instead."""

    target: str

    def __call__(self, size: int, spec):
        module, _, attribute = self.target.partition(":")
        return getattr(import_module(module), attribute)(size, spec)


def _norms(attribute: str) -> NormModule:
    return NormModule(f"atnbench.nn.norms:{attribute}")


NO_NORM = _norms("NoNorm")
LAYER_NORM = _norms("LayerNorm")
ATN = _norms("AssortedTimeNorm")
ATN_BN = _norms("AssortedTimeBatchNorm")
STEP_BN = _norms("StepBatchNorm")
INPUT_BN = _norms("input_batch_norm")  # Laurent et al.'s: frame- or sequence-wise, by the spec
BLN = _norms("BatchLayerNorm")


@dataclass(frozen=True)
class NormScheme:
    """Everything the rest of atnbench asks about a normalization: the CLI and the zoo (name,
    description, paper), run identity (``windowed``: does k enter the run id), the cells (the
    modules, bias placement, initialisation, whether the C++ and Triton fast paths cover it),
    the benchmark's model descriptions (``label``; report tables use the name) and figures (its place in the registry is its style slot)."""

    name: str
    description: str
    reference: str
    input: NormFactory
    hidden: NormFactory
    cell: NormFactory
    # Batch statistics subtract any per-feature constant, so a bias inside them is dead.
    bias_inside: bool
    label: str = ""  # as the benchmark's model descriptions name it ("ATN-BN"); the name upper-cased if empty
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
                   NO_NORM, NO_NORM, NO_NORM, bias_inside=True, init="torch", label="LSTM", fast_path=False),
        NormScheme("ln", "LayerNorm over the features of each step", "Ba et al. (2016)",
                   LAYER_NORM, LAYER_NORM, LAYER_NORM, bias_inside=True, label="LN"),
        NormScheme("atn", "Assorted-Time Normalization on LN: features of the last k steps",
                   "Pospisil et al. (2024), eqs. 7-9, 14-16",
                   ATN, ATN, ATN, bias_inside=True, label="ATN",
                   windowed=True),
        NormScheme("atn-bn", "ATN on BN: per feature, batch x last k steps, gain 0.1",
                   "Pospisil et al. (2024), Table 6",
                   ATN_BN, ATN_BN, ATN_BN, bias_inside=False,
                   label="ATN-BN", windowed=True),
        NormScheme("bn", "BN per time step on W_x x, W_h h and c, gain 0.1",
                   "Cooijmans et al. (2017)",
                   STEP_BN, STEP_BN, STEP_BN, bias_inside=False, label="recurrent BN (Cooijmans)"),
        NormScheme("bn-input", "BN on the input-to-hidden term only (frame- or sequence-wise)",
                   "Laurent et al. (2016)",
                   INPUT_BN, NO_NORM, NO_NORM, bias_inside=False, label="BN on the input term only (Laurent)"),
        NormScheme("bln", "Batch-Layer Normalization on W_x x, W_h h and c",
                   "Ziaee & Cano (2023), Algorithm 1",
                   BLN, BLN, BLN, bias_inside=False, label="BLN"),
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


# -- model names -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelEntry:
    name: str
    cell: str
    norm: str
    description: str
    reference: str


def model_name(cell: str, norm: str) -> str:
    if norm == "none":
        return cell
    return norm if cell == "lstm" else f"{cell}-{norm}"


# The plain cells' papers (a scheme's reference is the normalization's paper).
CELL_REFERENCES = {"lstm": "Hochreiter & Schmidhuber (1997)", "gru": "Cho et al. (2014)"}


def _description(cell: str, scheme) -> str:
    """What the model is; a GRU has no cell state, so its schemes normalize W_x x and W_h h only."""
    if scheme.name == "none":
        return cell.upper()
    what = scheme.description
    if cell == "gru":
        what = what.replace("W_x x, W_h h and c", "W_x x and W_h h (a GRU has no cell state c)")
    return f"{cell.upper()} with {what}"


def _entries() -> dict[str, ModelEntry]:
    entries = {}
    for cell in CELL_REFERENCES:  # the cells, lstm and gru (zoo.CELLS holds their modules)
        for scheme in SCHEMES.values():
            name = model_name(cell, scheme.name)
            reference = CELL_REFERENCES[cell] if scheme.name == "none" else scheme.reference
            entries[name] = ModelEntry(name, cell, scheme.name, _description(cell, scheme), reference)
    return entries


def model_flags(entry: ModelEntry) -> str:
    """The flags that select a model (what ``atnbench models`` shows beside its name)."""
    return f"--norm {entry.norm}" if entry.cell == "lstm" else f"--cell {entry.cell} --norm {entry.norm}"


def models() -> dict[str, ModelEntry]:
    """Every model: each cell with each registered normalization (read at call time, so a
    normalization registered later is a model at once)."""
    return _entries()


# names accepted by --norm besides the scheme names
NORM_ALIASES = {"lstm": "none"}

# cell names a user may type as --norm: a cell is not a normalization (--norm gru once trained
# a plain LSTM silently), so it is refused with the flags that mean it
CELL_NOT_NORM = {"gru": "--cell gru --norm none (the plain GRU; --cell gru --norm ln, atn, ... for a normalized one)"}


def norm_filter(norm: str) -> tuple[str, Optional[str]]:
    """What a ``--norm NAME`` filter selects among stored runs: (the stored norm, the cell or None).
    'lstm' and 'gru' name the plain cells, so each is norm none of that cell only; 'none' is every
    plain cell. (Training refuses 'gru' as a norm: there it would say nothing of the cell.)"""
    named = str(norm).lower()
    if named in CELL_NOT_NORM:
        return "none", named
    try:
        stored = canonical_norm(norm)
    except UserError as error:  # a filter also takes the cells' names (training does not)
        raise UserError(f"{error}, gru (lstm, gru: one plain cell)") from None
    return stored, ("lstm" if stored == "none" and named == "lstm" else None)


def of_cell(records: list, cell: Optional[str]) -> list:
    """The run records of ``cell`` (all where None)."""
    return records if cell is None else [r for r in records if (r.config.get("cell") or "lstm") == cell]


def canonical_norm(norm: str) -> str:
    """The registered name of ``norm``: an alias resolved, any case (LN is ln); else a UserError
    that suggests the nearest name (atm: did you mean atn?)."""
    if isinstance(norm, str) and norm not in SCHEMES and norm not in NORM_ALIASES and norm not in CELL_NOT_NORM:
        norm = norm.lower()
    if norm in CELL_NOT_NORM:
        raise UserError(f"--norm {norm} is a cell, not a normalization: use {CELL_NOT_NORM[norm]}")
    norm = NORM_ALIASES.get(norm, norm)
    if norm not in SCHEMES:
        import difflib

        names = list(SCHEMES) + list(NORM_ALIASES)
        near = difflib.get_close_matches(str(norm), names, n=1)
        hint = f"did you mean {near[0]}? " if near else ""
        raise UserError(f"unknown norm {norm!r}; {hint}choose one of: {', '.join(names)}")
    return norm

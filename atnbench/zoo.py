"""The model zoo: the names users type, each a cell with a normalization scheme.

``atnbench models`` lists them. A model name is the scheme name for LSTMs (``ln``, ``atn``,
...; ``lstm`` is the plain LSTM) and ``gru-<scheme>`` for GRUs (``gru`` is the plain GRU).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from atnbench.errors import UserError
from atnbench.nn import NormGRU, NormLSTM
from atnbench.nn.schemes import SCHEMES

CELLS = {"lstm": NormLSTM, "gru": NormGRU}


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
    for cell in CELLS:
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


def get_model(name: str) -> ModelEntry:
    try:
        return models()[name]
    except KeyError:
        raise UserError(f"unknown model {name!r}; choose one of: {', '.join(models())}") from None


class SequenceModel(nn.Module):
    """A normalized recurrent network with a linear read-out at every step.

    ``embedding`` (a vocabulary size) makes it read token ids instead of feature vectors.
    """

    def __init__(self, cell: str, norm: str, input_size: int, hidden: int, output_size: int,
                 layers: int = 1, embedding: int | None = None, dropout: float = 0.0, **norm_options):
        super().__init__()
        self.embed = nn.Embedding(embedding, input_size) if embedding else None
        self.rnn = CELLS[cell](input_size, hidden, num_layers=layers, dropout=dropout, norm=norm, **norm_options)
        self.head = nn.Linear(hidden, output_size)

    def forward(self, x: Tensor, state=None, lengths: Tensor | None = None) -> tuple[Tensor, object]:
        """``lengths`` (B,): a right-padded batch, each sequence valid for its first lengths[b] steps."""
        if self.embed is not None:
            x = self.embed(x)
        y, state = self.rnn(x, state, lengths)
        return self.head(y), state


def cell_options(config) -> dict:
    """A run config's normalization settings as every cell takes them."""
    return dict(k=config.k, eps=config.eps, affine=config.affine, init=config.init, bias_inside=config.bias_inside)


DROPOUTS = {"dropoute": 0.1, "dropouti": 0.65, "dropouth": 0.2, "dropout": 0.4}



def locked_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """One dropout mask per sequence, the same at every step (variational dropout)."""
    if not training or p == 0:
        return x
    mask = x.new_empty(1, *x.shape[1:]).bernoulli_(1 - p) / (1 - p)
    return x * mask


class AWDStyleLM(nn.Module):
    """Embedding -> stacked normalized LSTMs of their own widths -> decoder (tied by default):
    AWD-LSTM's shape and dropouts (Merity et al. 2018), the model of wikitext2 and ptb-word
    (``atnbench/tasks/wikitext2.py`` says what it keeps and leaves out)."""

    def __init__(self, config, vocab_size: int, embedding: int, last_hidden: int, tie_weights: bool = True,
                 **dropouts: float):
        super().__init__()
        if tie_weights and last_hidden != embedding:
            raise UserError(f"tied weights need last_hidden == embedding, got {last_hidden} and {embedding}")
        self.dropouts = {**DROPOUTS, **dropouts}
        self.embed = nn.Embedding(vocab_size, embedding)
        sizes = [embedding] + [config.hidden] * (config.layers - 1) + [last_hidden]
        self.rnns = nn.ModuleList(
            CELLS[config.cell](sizes[i], sizes[i + 1], num_layers=1, norm=config.norm, **cell_options(config))
            for i in range(config.layers)
        )
        self.head = nn.Linear(last_hidden, vocab_size)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        nn.init.zeros_(self.head.bias)
        if tie_weights:
            self.head.weight = self.embed.weight
        else:
            nn.init.uniform_(self.head.weight, -0.1, 0.1)

    def forward(self, x: Tensor, state=None):
        d = self.dropouts
        weight = self.embed.weight
        if self.training and d["dropoute"] > 0:  # drop whole words: rows of the embedding
            keep = weight.new_empty(weight.shape[0], 1).bernoulli_(1 - d["dropoute"]) / (1 - d["dropoute"])
            weight = weight * keep
        h = locked_dropout(F.embedding(x, weight), d["dropouti"], self.training)
        states = []
        for i, rnn in enumerate(self.rnns):
            h, layer_state = rnn(h, None if state is None else state[i])
            states.append(layer_state)
            last = i == len(self.rnns) - 1
            h = locked_dropout(h, d["dropout"] if last else d["dropouth"], self.training)
        return self.head(h), tuple(states)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def resolve_device(device: str) -> torch.device:
    """``auto`` picks CUDA, then Apple MPS, then the CPU."""
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if device not in ("cpu", "cuda", "mps"):
        raise UserError(f"unknown device {device!r}; choose auto, cpu, cuda or mps")
    if device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda asked for, but torch sees no CUDA GPU here")
    if device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise UserError("--device mps asked for, but torch sees no Apple MPS device here")
    return torch.device(device)

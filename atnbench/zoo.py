"""The model zoo: the networks a run trains, each a cell (``CELLS``) with a normalization scheme
and a read-out. The names users type, and the schemes, are ``atnbench.registry``'s.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from atnbench.errors import UserError
from atnbench.nn import NormGRU, NormLSTM

CELLS = {"lstm": NormLSTM, "gru": NormGRU}


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

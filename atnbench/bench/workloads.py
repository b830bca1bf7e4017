"""Workloads and models that ``atnbench bench`` times.

A workload is one of the ATN paper's task shapes (batch, input width, hidden size, T, loss).
Its inputs are random tensors of the right shape and type, generated once and seeded: the
timing of these models does not depend on the values (no data-dependent control flow).

A packed workload (``packed``) has sequences of mixed lengths, spread evenly over T/2..3T/2 with
mean exactly T, so the same total steps as its dense twin, passed as a ``PackedSequence`` (each
model gets what ``nn.LSTM`` gets; the read-out takes each sequence's own last step, h_n).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

from atnbench.registry import SCHEMES, is_windowed
from atnbench.bench.reference_atn import ReferenceATNLSTM
from atnbench.errors import UserError
from atnbench.nn import NormGRU, NormLSTM


@dataclass(frozen=True)
class Workload:
    name: str
    batch: int
    input_size: int
    hidden: int
    T: int
    loss: str  # "last": MSE on the last step's output; "all": cross-entropy on every step
    classes: int  # output width (1 for regression)
    description: str = ""
    packed: bool = False  # mixed lengths with mean T (``lengths``), as a PackedSequence; loss "last"

    def with_overrides(self, T: Optional[int] = None, batch: Optional[int] = None) -> "Workload":
        if (T is not None and T < 1) or (batch is not None and batch < 1):
            raise UserError("--T and --batch must be >= 1")
        return dataclasses.replace(self, T=self.T if T is None else T, batch=self.batch if batch is None else batch)

    def lengths(self) -> list[int]:
        """Each sequence's length: T (dense), or spread evenly over T/2..3T/2, symmetric about T
        (Python's round is too), so that they sum to B*T: the dense workload's total steps."""
        if not self.packed or self.batch == 1:
            return [self.T] * self.batch
        half = (self.batch - 1) / 2
        return [self.T + round((i - half) * self.T / (2 * half)) for i in range(self.batch)]

    def make_batch(self, device: torch.device, seed: int = 0) -> tuple[Tensor | PackedSequence, Tensor]:
        """Random (x, target) of this workload's shape: x is (T, B, input_size), time first; a
        PackedSequence of ``lengths()`` for a packed workload."""
        gen = torch.Generator().manual_seed(seed)
        if self.packed:
            lengths = self.lengths()
            x = torch.rand(max(lengths), self.batch, self.input_size, generator=gen)
            target = torch.rand(self.batch, self.classes, generator=gen)
            return pack_padded_sequence(x, torch.tensor(lengths), enforce_sorted=False).to(device), target.to(device)
        if self.loss == "last":  # adding: (marker, value) pairs, one regression target
            x = torch.rand(self.T, self.batch, self.input_size, generator=gen)
            target = torch.rand(self.batch, self.classes, generator=gen)
        else:  # one-hot symbols in, a class per step out
            symbols = torch.randint(0, self.input_size, (self.T, self.batch), generator=gen)
            x = nn.functional.one_hot(symbols, self.input_size).float()
            target = torch.randint(0, self.classes, (self.T, self.batch), generator=gen)
        return x.to(device), target.to(device)


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("adding", 50, 2, 60, 200, "last", 1, "adding problem, MSE on the last step"),
    Workload("copying", 128, 10, 68, 220, "all", 9, "copying problem T=200 (+20), CE every step"),
    Workload("denoise", 128, 10, 100, 200, "all", 9, "denoise task, CE every step"),
    Workload("ptb-char", 32, 50, 1000, 220, "all", 50, "character-level PTB, one-hot 50, CE every step"),
    Workload("packed", 50, 2, 60, 200, "last", 1, "adding's shapes, lengths 100-300 (mean 200: adding's total "
             "steps), a PackedSequence; MSE on each sequence's last step", packed=True),
)}


def get_workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UserError(f"unknown workload {name!r}; choose from: {', '.join(WORKLOADS)}") from None


class BenchModel(nn.Module):
    """A recurrent layer plus a linear read-out, as the tasks train it."""

    def __init__(self, rnn: nn.Module, workload: Workload):
        super().__init__()
        self.rnn = rnn
        self.head = nn.Linear(workload.hidden, workload.classes)
        self.last_only = workload.loss == "last"

    def forward(self, x: Tensor | PackedSequence) -> Tensor:
        out, state = self.rnn(x)
        if isinstance(x, PackedSequence):  # each sequence's own last step: the top layer's h_n
            h = state[0] if isinstance(state, tuple) else state
            return self.head(h[-1])
        return self.head(out[-1] if self.last_only else out)


def loss_fn(workload: Workload) -> Callable[[Tensor, Tensor], Tensor]:
    if workload.loss == "last":
        return nn.functional.mse_loss
    return lambda y, target: nn.functional.cross_entropy(y.flatten(0, 1), target.flatten())


# model name -> (description, uses k, factory(input_size, hidden, k)): the references and the
# LN/ATN backends; every registered normalization adds its own two (``models``)
FIXED_MODELS: dict[str, tuple[str, bool, Callable[[int, int, int], nn.Module]]] = {
    "lstm-fused": ("torch nn.LSTM (fused kernel)", False, lambda i, h, k: NormLSTM(i, h, norm="none")),
    "lstm": ("plain LSTM, Python loop", False, lambda i, h, k: NormLSTM(i, h, norm="none", backend="loop")),
    "ln": ("LN-LSTM, default backend (the fast path on CPU)", False, lambda i, h, k: NormLSTM(i, h, norm="ln")),
    "atn": ("ATN-LSTM, running window sums, default backend (the fast path on CPU)", True,
            lambda i, h, k: NormLSTM(i, h, norm="atn", k=k)),
    "ln-loop": ("LN-LSTM, plain Python loop (backend='loop')", False,
                lambda i, h, k: NormLSTM(i, h, norm="ln", backend="loop")),
    "atn-loop": ("ATN-LSTM, plain Python loop (backend='loop')", True,
                 lambda i, h, k: NormLSTM(i, h, norm="atn", k=k, backend="loop")),
    "ln-function": ("LN-LSTM, fast path in Python (backend='function')", False,
                    lambda i, h, k: NormLSTM(i, h, norm="ln", backend="function")),
    "atn-function": ("ATN-LSTM, fast path in Python (backend='function')", True,
                     lambda i, h, k: NormLSTM(i, h, norm="atn", k=k, backend="function")),
    "gru-fused": ("torch nn.GRU (fused kernel)", False, lambda i, h, k: NormGRU(i, h, norm="none")),
    "atn-ref": ("ATN-LSTM, window rebuilt every step (authors' way)", True,
                lambda i, h, k: ReferenceATNLSTM(i, h, k=k)),
}

def _factory(cell: type, norm: str, backend: str) -> Callable[[int, int, int], nn.Module]:
    return lambda i, h, k: cell(i, h, norm=norm, k=k, backend=backend)


def models() -> dict[str, tuple[str, bool, Callable[[int, int, int], nn.Module]]]:
    """Every benchmark model: FIXED_MODELS, then for each registered normalization (read now, so
    one registered at run time is here) its LSTM (LN and ATN are fixed above) and its GRU, on the
    default backend (the fast path on CPU) and on the plain loop ("-loop"); "gru-..." names are
    the zoo's."""
    found = dict(FIXED_MODELS)
    for cell, prefix in ((NormLSTM, ""), (NormGRU, "gru-")):
        for norm, scheme in SCHEMES.items():
            if norm == "none" or (not prefix and norm in ("ln", "atn")):
                continue
            label = f"{scheme.display}-{'GRU' if prefix else 'LSTM'}"
            found[f"{prefix}{norm}"] = (f"{label}, default backend (the fast path on CPU)", is_windowed(norm),
                                        _factory(cell, norm, "auto"))
            found[f"{prefix}{norm}-loop"] = (f"{label}, plain Python loop (backend='loop')", is_windowed(norm),
                                             _factory(cell, norm, "loop"))
    return found


def fused_of(name: str) -> str:
    """The fused torch kernel a model is compared with (ratio_fused)."""
    return "gru-fused" if name.startswith("gru") else "lstm-fused"


def check_model(name: str) -> None:
    if name not in models():
        raise UserError(f"unknown model {name!r}; choose from: {', '.join(models())}")


def uses_k(name: str) -> bool:
    check_model(name)
    return models()[name][1]


def build_model(name: str, workload: Workload, k: Optional[int], device: torch.device, seed: int = 0) -> BenchModel:
    check_model(name)
    if workload.packed and name == "atn-ref":
        raise UserError(f"atn-ref takes no packed batches; leave --reference out for workload {workload.name}")
    torch.manual_seed(seed)
    rnn = models()[name][2](workload.input_size, workload.hidden, k if k is not None else 1)
    return BenchModel(rnn, workload).to(device)

"""Whole models holding NormLSTM / NormGRU load with ``torch.load``'s defaults (``weights_only=True``).

``torch.load`` unpickles only the globals on its allow-list. A pickled NormLSTM names the
package's module classes, ``NormSpec``, and the torch containers it holds (``nn.ModuleList``;
``nn.LSTM``/``nn.GRU`` for ``norm="none"``); a saved state names ``LSTMState`` and
``WindowedTensor``. ``register()`` (run when ``atnbench.nn`` is imported) allows exactly those,
so that ``torch.save(model)`` / ``torch.load(path)`` of a model that swapped ``nn.LSTM`` for
``NormLSTM`` needs no allow-list entry that the ``nn.LSTM`` model did not. Nothing callable
sits in a module's pickled state (``rnn.py`` says how), so no function is allowed.

A normalization registered from outside the package (``atnbench.registry.register``) brings its own
module classes: allow them with ``torch.serialization.add_safe_globals``.
"""

from __future__ import annotations

import torch
from torch import nn

from atnbench.nn.gru import NormGRU, NormGRULayer
from atnbench.nn.lstm import NormLSTM, NormLSTMLayer
from atnbench.nn.norms import NormSpec, SequenceNorm, StepStatistics
from atnbench.nn.state import LSTMState, WindowedTensor


def _package_subclasses(base: type) -> list[type]:
    """``base`` and its subclasses defined in atnbench (every normalization module)."""
    found, todo = [], [base]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("atnbench.") and cls not in found:
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def safe_globals() -> list[type]:
    """Every class a pickled NormLSTM / NormGRU (or its returned state) refers to."""
    return [NormLSTM, NormGRU, NormLSTMLayer, NormGRULayer, StepStatistics, NormSpec, LSTMState, WindowedTensor,
            nn.ModuleList, nn.LSTM, nn.GRU, *_package_subclasses(SequenceNorm)]


def register() -> None:
    torch.serialization.add_safe_globals(safe_globals())

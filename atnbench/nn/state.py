"""The recurrent states NormLSTM and NormGRU return, and ``detach_state`` for truncated BPTT."""

from __future__ import annotations

from typing import Any, NamedTuple

from torch import Tensor


class LSTMState(NamedTuple):
    h: Tensor
    c: Tensor


class WindowedLSTMState(NamedTuple):
    h: Tensor
    c: Tensor
    windows: tuple  # per layer: one window history per normalized term (input, hidden, cell)


class WindowedGRUState(NamedTuple):
    h: Tensor
    windows: tuple  # per layer: (input, hidden) window histories


def detach_state(state: Any) -> Any:
    """Detach every tensor of a (nested, possibly named) state tuple."""
    if isinstance(state, Tensor):
        return state.detach()
    if isinstance(state, tuple):
        items = [detach_state(s) for s in state]
        return type(state)(*items) if hasattr(state, "_fields") else tuple(items)
    return state

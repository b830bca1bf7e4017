"""The recurrent states NormLSTM and NormGRU return: ``nn.LSTM``'s ``(h_n, c_n)``, ``nn.GRU``'s ``h_n``.

A windowed normalization (ATN) carries more than h and c from one call to the next: per layer
and normalized term, the (mean, var) of the last k-1 steps (``window.py``). So that the state
keeps ``nn.LSTM``'s shape for every norm, those windows ride on ``h_n``: with a windowed norm
``h_n`` is a ``WindowedTensor``, a ``torch.Tensor`` with ``h_n``'s values, shape, dtype and
autograd graph and one more attribute, ``windows``. Passing ``h_n`` back (inside the state)
continues every sequence exactly, windows included.

What keeps the windows and what drops them (``docs/library.md`` says it to users):

* ``h_n.detach()`` keeps them, detached as well (``h_n.detach_()`` of a state as a model returns
  it, a view of its output, is refused in words: torch detaches no view in place): truncated BPTT written as
  ``tuple(s.detach() for s in state)`` (or ``detach_state``) cuts the graph and continues. So does
  ``h_n.data``, the older spelling of the same (``tuple(s.data for s in state)``).
* Every other operation gives a plain tensor (``h_n[-1]``, ``h_n.clone()``, ``h_n.to(...)``,
  ``torch.zeros_like(h_n)``): the class adds nothing to a computation. A state whose ``h`` has
  no windows starts ATN's windows empty, as at the first step of a sequence.
* Writing into ``h_n`` in place (``h_n[:, i] = 0``, ``h_n.zero_()``, the way a reset of some
  sequences is often written for ``nn.LSTM``) leaves windows that no longer belong to its values:
  passing it back is refused with a ValueError that says what to do, never continued silently.
  So is one whose values were replaced (``h_n.data = ...``) or written through ``h_n.data`` or a
  NumPy view (``h.data[:, i] = 0``).
  The windows remember the tensor's version counter (``Tensor._version``, which every in-place
  write advances; a tensor made under ``torch.inference_mode()`` has none) and a copy of its
  values (layers x batch x hidden) when they are attached; both are compared when it is passed
  back, the values bit for bit, since a write through ``.data`` or NumPy advances no counter of
  ``h_n``'s. (On a GPU the comparison waits for the values: one synchronisation a call.)
* The windows also say which cell, normalization, window, layout and bias placement made them
  (``made_by``: "NormLSTM norm='atn', k=5, 2 layers, unidirectional, bias inside"): a model that
  differs in any of these refuses them with a ValueError (an LSTM's windows hold the cell state's
  terms, a GRU's do not; an ATN-LN window is per sequence, an ATN-BN one per feature; a k=3
  history is no k=5 one, though it could pass for a short one; one bidirectional layer holds as
  many windows of the same sizes as two layers of one direction, in another order).
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor

_TENSOR_DATA = Tensor.data  # torch's own .data (a descriptor), beneath WindowedTensor's
Windows = tuple  # per layer (in h_n's order): one window history (or None) per normalized term


class LSTMState(NamedTuple):
    """``(h_n, c_n)`` as ``nn.LSTM`` returns them; a tuple of two, with names."""

    h: Tensor
    c: Tensor


class WindowedTensor(Tensor):
    """``h_n`` of a windowed normalization: the tensor, plus ``windows`` (see module doc)."""

    # torch's own operations return plain tensors (as for nn.Parameter): the windows belong to
    # this state only, never to a result computed from it.
    __torch_function__ = torch._C._disabled_torch_function_impl

    _values_replaced = False  # by ``h_n.data = ...``, which advances no version counter
    made_by: Optional[str] = None  # the model's cell, windowed norm, k and layout, in words (None: not recorded)

    @property
    def windows(self) -> Windows:
        return self._windows

    @windows.setter
    def windows(self, windows: Windows) -> None:
        # also how torch.load and pickle restore them (setattr): the loaded tensor's version then
        self._windows, self._values_replaced = windows, False
        # the version counter (none under inference mode: reading it raises) and the values: a write
        # through h_n.data or a NumPy view of it (`h.data[:, i] = 0`) advances no counter of h_n's
        self._windows_version = None if self.is_inference() else self._version
        self._windows_values = plain(self).detach().clone()

    def __getstate__(self) -> dict:
        """What pickling keeps besides the values: the windows (a version counter is per process),
        and whether the values were written since: restored in this order (setattr), after the
        windows, so a saved state written in place stays refused."""
        return {"windows": self._windows, "made_by": self.made_by, "_values_replaced": self.written_in_place}

    @property
    def written_in_place(self) -> bool:
        """Whether the values were changed in place after the windows were attached."""
        if self._values_replaced:
            return True
        if self._windows_version is not None and self._version != self._windows_version:
            return True
        return not torch.equal(_bits(plain(self)), _bits(self._windows_values))

    @property
    def data(self) -> "WindowedTensor":
        return with_windows(_TENSOR_DATA.__get__(self), detach_windows(self.windows), self.made_by,
                            written=self.written_in_place)

    @data.setter
    def data(self, values: Tensor) -> None:
        _TENSOR_DATA.__set__(self, values)  # torch counts no version for it: marked, so it is refused
        self._values_replaced = True

    def detach(self) -> "WindowedTensor":
        # a state written in place, then detached (`h[:, done] = 0`, then repackage_hidden): still refused
        return with_windows(Tensor.detach(self), detach_windows(self.windows), self.made_by,
                            written=self.written_in_place)

    def detach_(self) -> "WindowedTensor":
        # every WindowedTensor is an alias (as_subclass) of the model's output, loaded ones too
        raise RuntimeError("h_n of a windowed norm is a view of the model's output, which torch cannot detach "
                           "in place: write h = h.detach() (the windows stay, detached too)")

    def __deepcopy__(self, memo: dict) -> "WindowedTensor":
        # torch's default deepcopy of a subclass needs new_empty to return the subclass
        if id(self) not in memo:
            plain = copy.deepcopy(self.as_subclass(Tensor), memo)
            memo[id(self)] = with_windows(plain, copy.deepcopy(self.windows, memo), self.made_by,
                                          written=self.written_in_place)
        return memo[id(self)]


def with_windows(h: Tensor, windows: Windows, made_by: Optional[str] = None,
                 written: bool = False) -> WindowedTensor:
    """``h`` (same storage, same autograd graph) carrying ``windows``, made by ``made_by``;
    ``written``: its values were already written in place (a copy of such a state stays refused)."""
    out = h.as_subclass(WindowedTensor)
    out.windows = windows
    out.made_by = made_by
    out._values_replaced = written
    return out


def windows_of(h: Any, reader: Optional[str] = None) -> Optional[Windows]:
    """The windows riding on ``h``; None for a plain tensor (a state rebuilt by hand). A ``h``
    written in place since it was returned is refused: its windows are another state's; so are
    windows another norm or k made than the ``reader``'s."""
    if not isinstance(h, WindowedTensor):
        return None
    if reader is not None and h.made_by is not None and not _same_maker(h.made_by, reader):
        raise ValueError(f"the state's windows were made by a {h.made_by} model, and this model is {reader}: "
                         f"they cannot continue here; pass h_n as a plain tensor (h.clone()) to start the "
                         f"windows empty, or pass the state to the model that made it")
    if h.written_in_place:
        raise ValueError("the state's h_n was changed in place (e.g. h[:, i] = 0) after the model returned it, "
                         "so ATN's windows riding on it no longer match it; to start sequences afresh, pass a "
                         "new tensor (h.clone() after the change, or zeros), whose windows start empty for every "
                         "sequence, or run those sequences in a call of their own")
    return h.windows


def _same_maker(made_by: str, reader: str) -> bool:
    """Whether windows ``made_by`` one model continue in ``reader``. A state saved before the
    layout was recorded names only cell, norm and k ("NormLSTM norm='atn', k=5"): it continues in
    every model of those, as it did then, so that a run checkpointed then still resumes."""
    recorded_layout = " layer" in made_by
    return made_by == reader or (not recorded_layout and reader.startswith(made_by + ", "))


def _bits(values: Tensor) -> Tensor:
    """The values as integers of their width: a NaN equals itself (a diverged state is not "changed")."""
    same_width = {2: torch.int16, 4: torch.int32, 8: torch.int64}.get(values.element_size())
    return values.detach().view(same_width) if same_width is not None and values.is_floating_point() else values


def plain(h: Tensor) -> Tensor:
    """``h`` as a plain tensor (same storage and graph) for the computations inside a cell."""
    return h.as_subclass(Tensor) if isinstance(h, WindowedTensor) else h


def detach_windows(windows: Windows) -> Windows:
    return tuple(tuple(w.detach() if isinstance(w, Tensor) else w for w in layer) for layer in windows)


def detach_state(state: Any) -> Any:
    """Detach every tensor of a (nested, possibly named) state tuple; ATN's windows are kept."""
    if isinstance(state, Tensor):
        return state.detach()
    if isinstance(state, tuple):
        items = [detach_state(s) for s in state]
        return type(state)(*items) if hasattr(state, "_fields") else tuple(items)
    return state

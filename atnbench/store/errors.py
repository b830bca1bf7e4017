"""What can be wrong with a results store, as exceptions whose message is one readable line."""

from __future__ import annotations

from atnbench.errors import UserError


class StoreError(UserError, RuntimeError):
    """The file is not a usable results store; the message is one readable line."""


class StoreBusy(RuntimeError):
    """Another process held the store's lock past the busy timeout (a store not in WAL mode, which
    a reader waits on too): the work cannot be done now, not a mistake of the input (exit 1)."""


class StoreMissing(StoreError, FileNotFoundError):
    """No store at the given path and the caller asked not to create one."""


class MalformedRow(StoreError):
    """A row whose stored JSON cannot be read (hand-edited or damaged store): listings skip it
    with a note; reading it alone says what is wrong."""


class UnknownRun(LookupError):
    """A write or export named a run id that has no row in the store."""

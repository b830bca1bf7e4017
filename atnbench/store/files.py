"""The store's file: where it lives by default and what must hold before SQLite opens it."""

from __future__ import annotations

import os
from pathlib import Path

from atnbench.store.errors import StoreError, StoreMissing
from atnbench.userfiles import broken_link

DEFAULT_STORE = Path("atnbench-results") / "atnbench.db"
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def check_store_path(path: Path, create: bool = True, write: bool = True) -> None:
    """One line naming the file and the problem, before SQLite sees the path: a folder, a path
    under a file, a missing store (when not creating), unreadable, read-only (when writing). A file
    that is not an SQLite database at all is SQLite's to find (``not_sqlite``)."""
    path = Path(path)
    broken = broken_link(path)
    if broken is not None:
        raise StoreError(f"results store {path} cannot exist: {broken}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise StoreError(f"results store {path} cannot exist: {parent} is a file, not a folder")
            break
    if path.is_dir():
        raise StoreError(f"results store {path} is a folder; give the path of the database file inside it "
                         f"(e.g. {path / DEFAULT_STORE.name})")
    if not path.exists():
        if not create:
            raise StoreMissing(f"no results store at {path} (atnbench run, sweep or store import make one; or pass the right store path)")
        return
    if not path.is_file():
        raise StoreError(f"results store {path} is not a regular file")
    if not os.access(path, os.R_OK):
        raise StoreError(f"results store {path} cannot be read (permission denied)")
    if write and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        raise StoreError(f"results store {path} is read-only here; recording runs needs write access to it and "
                         f"its folder (report and plot can read it as it is)")
    # The file is never opened here: closing any descriptor of it drops every POSIX lock this process
    # holds on it, those of an open ResultsStore included, and another process's SQLite then takes
    # itself for the last user and deletes the -wal and -shm files under that store. SQLite reads the
    # header itself; ResultsStore turns its "file is not a database" into ``not_sqlite``.


def not_sqlite(path: Path) -> StoreError:
    """The one line for a file that SQLite finds is not a database (SQLITE_NOTADB)."""
    return StoreError(f"{path} is not a results store: not an SQLite database (another kind of file, or damaged)")

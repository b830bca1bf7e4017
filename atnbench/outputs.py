"""Output paths checked before any work: a long run must not fail at its last line because
``--out`` names a folder, sits under a file, or cannot be written. Nothing is created here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Union


def _check_parents(path: Path, flag: str) -> None:
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{flag} {path}: {parent} is a file, not a folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ValueError(f"{flag} {path}: cannot write into {parent} (permission denied)")
            return


def check_output_file(path: Union[str, Path], flag: str) -> None:
    """ValueError (one line) unless ``path`` can be written as a file."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise ValueError(f"{flag} {path} is a folder; give a file name")
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{flag} {path} cannot be written (permission denied)")
    _check_parents(path, flag)


def check_output_dir(path: Union[str, Path], flag: str) -> None:
    """ValueError (one line) unless ``path`` is, or can become, a writable folder."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag} {path} is a file; give a folder")
    if path.is_dir():
        if not os.access(path, os.W_OK | os.X_OK):
            raise ValueError(f"{flag} {path} cannot be written (permission denied)")
        return
    _check_parents(path, flag)

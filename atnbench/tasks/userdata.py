"""A user task's sequences read from the files researchers keep them in, one split at a time.

Formats (by extension): NumPy ``.npz`` (arrays named by the task's ``x``, ``y``, ``lengths``), or a
mapping of ``.npy`` files (``{x: x.npy, y: y.npy, lengths: n.npy}``); tables: CSV, TSV,
Parquet, Arrow/Feather, and a Hugging Face dataset saved to disk (a folder). A table holds
sequences in one of three layouts:

* ``wide``: one sequence per row, one column per step (univariate), the target in column ``y``;
  empty cells at the end of a row end that sequence early (variable lengths);
* ``long``: one step per row, sequences told apart by column ``id`` and ordered by column
  ``time``; the features are ``x`` (a list of columns; default: every other column);
* ``nested``: one sequence per row, column ``x`` holding a list of steps (each a number or a
  list of channels), as a Hugging Face dataset or a Parquet file stores them.

Arrays may be padded ``(N, T, C)`` or ``(N, T)`` with ``lengths``, or an object array of
variable-length ``(T_i, C)`` arrays (read with pickle: open only files you trust). Every mistake
is a ``ConfigError`` naming the file, the field and what is expected.
"""

from __future__ import annotations

import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from atnbench.config import ConfigError
from atnbench.errors import needs_package

TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
FRAME_SUFFIXES = (".parquet", ".arrow", ".feather")
LAYOUTS = ("wide", "long", "nested")


@dataclass(frozen=True)
class Fields:
    """Where a split's parts are: array names (NumPy) or column names (tables)."""

    x: Union[str, list[str], None] = None  # None: "x" in arrays; every other column in tables
    y: str = "y"
    lengths: Optional[str] = None
    layout: Optional[str] = None  # tables only; None: nested if x holds lists, else wide
    id: str = "id"
    time: Optional[str] = "time"


@dataclass
class Sequences:
    """One split: ``xs[i]`` is (T_i, C) float64; ``ys[i]`` a scalar / (D,) target per sequence,
    or (T_i,) / (T_i, D) per step; ``source`` names the file in messages."""

    xs: list[np.ndarray]
    ys: list[Any]
    source: str


def read_split(where: Union[str, Path, dict], fields: Fields, per_step: bool) -> Sequences:
    """The sequences of one split (a file path, a folder, or a mapping of ``.npy`` files)."""
    if isinstance(where, dict):
        arrays = {part: _load_npy(Path(path)) for part, path in where.items()}
        return _from_arrays(arrays, fields, per_step, ", ".join(str(p) for p in where.values()), names=False)
    path = Path(where)
    if not path.exists():
        raise ConfigError(f"{path}: no such data file")
    if path.suffix == ".npz":
        return _from_arrays(load_npz(path), fields, per_step, str(path), names=True)
    if path.suffix == ".npy":
        raise ConfigError(f"{path}: a .npy file holds one array: give the split as a mapping "
                          f"{{x: X.npy, y: Y.npy, lengths: L.npy}}")
    return _from_frame(load_frame(path), fields, per_step, str(path))


# --- NumPy --------------------------------------------------------------------------------------

def _load_npy(path: Path) -> np.ndarray:
    if not path.is_file():
        raise ConfigError(f"{path}: no such data file")
    try:
        return np.load(path, allow_pickle=True)
    except (ValueError, OSError, EOFError, pickle.UnpicklingError) as err:
        raise ConfigError(f"{path}: not a NumPy .npy file ({_first_line(err)})") from None


def load_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=True) as archive:
            return {name: archive[name] for name in archive.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as err:
        raise ConfigError(f"{path}: not a NumPy .npz archive ({_first_line(err)})") from None


def _from_arrays(arrays: dict[str, np.ndarray], fields: Fields, per_step: bool, source: str,
                 names: bool) -> Sequences:
    if names:
        wanted = {"x": fields.x if isinstance(fields.x, str) else "x", "y": fields.y, "lengths": fields.lengths}
    else:  # a mapping of .npy files is keyed by part: x, y and, where given, lengths
        wanted = {"x": "x", "y": "y", "lengths": "lengths" if "lengths" in arrays else None}
    for part, name in wanted.items():
        if name is not None and name not in arrays:
            raise ConfigError(f"{source}: data.{part}: no array {name!r} (found: {', '.join(sorted(arrays)) or 'none'})")
    lengths = arrays[wanted["lengths"]] if wanted["lengths"] else None
    xs = _split_x(arrays[wanted["x"]], lengths, source)
    ys = _split_y(arrays[wanted["y"]], [len(s) for s in xs], per_step, source)
    return Sequences(xs, ys, source)


def _split_x(x: np.ndarray, lengths: Optional[np.ndarray], source: str) -> list[np.ndarray]:
    if x.dtype == object:  # variable lengths: one array per sequence
        xs = [_as_steps(np.asarray(item), f"{source}: x[{i}]") for i, item in enumerate(x.reshape(-1))]
    elif x.ndim in (2, 3):
        padded = x if x.ndim == 3 else x[:, :, None]
        xs = [_as_steps(row, f"{source}: x[{i}]") for i, row in enumerate(padded)]
    else:
        raise ConfigError(f"{source}: data.x: expected shape (N, T, C), (N, T) or an object array of "
                          f"(T_i, C) arrays, got shape {tuple(x.shape)}")
    if lengths is not None:
        lengths = np.asarray(lengths)
        if lengths.ndim != 1 or len(lengths) != len(xs) or not np.issubdtype(lengths.dtype, np.integer):
            raise ConfigError(f"{source}: data.lengths: expected {len(xs)} whole numbers (one per sequence), "
                              f"got shape {tuple(lengths.shape)} of {lengths.dtype}")
        for i, (seq, n) in enumerate(zip(xs, lengths)):
            if not 1 <= n <= len(seq):
                raise ConfigError(f"{source}: data.lengths[{i}]: expected 1..{len(seq)}, got {int(n)}")
        xs = [seq[:n] for seq, n in zip(xs, lengths)]
    channels = {seq.shape[1] for seq in xs}
    if len(channels) > 1:
        raise ConfigError(f"{source}: data.x: sequences have different numbers of channels ({sorted(channels)})")
    _check_finite(xs, source)
    return xs


def _as_steps(item: np.ndarray, where: str) -> np.ndarray:
    """(T, C) float64 from (T,) or (T, C) numbers."""
    if item.ndim == 1:
        item = item[:, None]
    if item.ndim != 2 or item.shape[0] == 0:
        raise ConfigError(f"{where}: expected a (T, C) or (T,) array with T >= 1, got shape {tuple(item.shape)}")
    try:
        return item.astype(np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected numbers, got {item.dtype}") from None


def _split_y(y: np.ndarray, lengths: list[int], per_step: bool, source: str) -> list[Any]:
    y = np.asarray(y)
    n = len(lengths)
    if y.ndim == 0 or len(y) != n:
        raise ConfigError(f"{source}: data.y: expected {n} targets (one per sequence), got shape {tuple(y.shape)}")
    if not per_step:
        if y.ndim > 2 or y.dtype == object and any(np.ndim(v) for v in y):
            raise ConfigError(f"{source}: data.y: one target per sequence expected: shape (N,) or (N, D), "
                              f"got shape {tuple(y.shape)}")
        return list(y)
    ys = []
    for i, (target, length) in enumerate(zip(y, lengths)):
        target = np.asarray(target)
        if target.ndim == 0 or len(target) < length:
            raise ConfigError(f"{source}: data.y[{i}]: a per-step target needs one value per step "
                              f"({length}), got shape {tuple(target.shape)}")
        ys.append(target[:length])
    return ys


# --- tables -------------------------------------------------------------------------------------

def load_frame(path: Path):
    import pandas as pd

    try:
        if path.is_dir():
            from datasets import Dataset, load_from_disk  # optional: the [data] extra

            data = load_from_disk(str(path))
            if not isinstance(data, Dataset):
                raise ConfigError(f"{path}: a dataset dictionary: give each split's folder "
                                  f"({', '.join(data)}) as its own file")
            return data.to_pandas()
        if path.suffix in TABLE_SUFFIXES:
            return pd.read_csv(path, sep=TABLE_SUFFIXES[path.suffix])
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        if path.suffix in (".arrow", ".feather"):
            return pd.read_feather(path)
    except ConfigError:
        raise
    except ImportError:  # pandas names the missing package in words only: the path says which it is
        raise ConfigError(f"{path}: reading it {needs_package('datasets' if path.is_dir() else 'pyarrow')}") from None
    except Exception as err:  # pandas/pyarrow say what is wrong in many exception types
        raise ConfigError(f"{path}: cannot read it ({_first_line(err)})") from None
    known = ", ".join([*TABLE_SUFFIXES, ".npz", *FRAME_SUFFIXES])
    raise ConfigError(f"{path}: unknown data format {path.suffix or '(no extension)'!r}; expected one of: {known}, "
                      f"a mapping of .npy files, or a Hugging Face dataset folder")


def _from_frame(frame, fields: Fields, per_step: bool, source: str) -> Sequences:
    if len(frame) == 0:
        raise ConfigError(f"{source}: no rows")
    if fields.y not in frame.columns:
        raise ConfigError(f"{source}: data.y: no column {fields.y!r} (columns: {_columns(frame)})")
    layout = fields.layout or ("nested" if _holds_lists(frame, fields) else "wide")
    reader = {"wide": _wide, "long": _long, "nested": _nested}[layout]
    return reader(frame, fields, per_step, source)


def _holds_lists(frame, fields: Fields) -> bool:
    x = fields.x if isinstance(fields.x, str) else "x"
    return x in frame.columns and len(frame) > 0 and isinstance(frame[x].iloc[0], (list, np.ndarray))


def _wide(frame, fields: Fields, per_step: bool, source: str) -> Sequences:
    if per_step:
        raise ConfigError(f"{source}: data.layout: a wide table has one target per sequence; per-step "
                          f"targets need the long layout (one step per row)")
    columns = fields.x if isinstance(fields.x, list) else [c for c in frame.columns if c not in (fields.y, fields.id)]
    values = _numbers(frame[columns], source, "x")
    xs = []
    for i, row in enumerate(values):
        filled = np.isfinite(row)
        length = int(filled.sum())
        if length == 0 or not filled[:length].all():
            raise ConfigError(f"{source}: data.x: row {i + 1} has {'no values' if length == 0 else 'an empty cell before its last value'}"
                              f" (a sequence's steps are the row's first cells, empty cells only at the end)")
        xs.append(row[:length, None])
    return Sequences(xs, list(frame[fields.y].to_numpy()), source)


def _long(frame, fields: Fields, per_step: bool, source: str) -> Sequences:
    for part, column in (("id", fields.id), ("time", fields.time)):
        if column is not None and column not in frame.columns:
            raise ConfigError(f"{source}: data.{part}: no column {column!r} (columns: {_columns(frame)})")
    if fields.time is not None:
        frame = frame.sort_values([fields.id, fields.time], kind="stable")
    columns = fields.x if isinstance(fields.x, list) else [
        c for c in frame.columns if c not in (fields.y, fields.id, fields.time)]
    xs, ys = [], []
    for _, group in frame.groupby(fields.id, sort=False):
        xs.append(_numbers(group[columns], source, "x"))
        target = group[fields.y].to_numpy()
        if not per_step and len(set(target.tolist())) > 1:
            raise ConfigError(f"{source}: data.y: sequence {group[fields.id].iloc[0]!r} has several targets; "
                              f"a per-sequence problem needs one value per sequence")
        ys.append(target if per_step else target[0])
    _check_finite(xs, source)
    return Sequences(xs, ys, source)


def _nested(frame, fields: Fields, per_step: bool, source: str) -> Sequences:
    x = fields.x if isinstance(fields.x, str) else "x"
    if x not in frame.columns:
        raise ConfigError(f"{source}: data.x: no column {x!r} (columns: {_columns(frame)})")
    xs = [_as_steps(_stack(cell, f"{source}: data.x row {i + 1}"), f"{source}: data.x row {i + 1}")
          for i, cell in enumerate(frame[x])]
    _check_finite(xs, source)
    ys = [(_stack(cell, f"{source}: data.y row {i + 1}") if per_step else cell) for i, cell in enumerate(frame[fields.y])]
    return Sequences(xs, ys, source)


def _stack(cell: Any, where: str) -> np.ndarray:
    try:
        return np.asarray([np.asarray(step, dtype=np.float64) for step in cell])
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a list of steps (numbers or lists of channels)") from None


def _numbers(frame, source: str, part: str) -> np.ndarray:
    try:
        return frame.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        bad = [c for c in frame.columns if frame[c].dtype == object]
        raise ConfigError(f"{source}: data.{part}: column(s) {', '.join(map(str, bad[:3]))} hold non-numbers") from None


def _check_finite(xs: list[np.ndarray], source: str) -> None:
    for i, seq in enumerate(xs):
        if not np.isfinite(seq).all():
            step = int(np.argwhere(~np.isfinite(seq))[0][0])
            raise ConfigError(f"{source}: data.x: NaN or infinity in sequence {i} at step {step} "
                              f"(padding? give data.lengths, or end the row early)")


def _columns(frame) -> str:
    return ", ".join(map(str, frame.columns[:12])) + (", ..." if len(frame.columns) > 12 else "")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__

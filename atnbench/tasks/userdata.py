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
variable-length ``(T_i, C)`` arrays. ``layout: NCT`` reads ``(N, C, T)`` arrays (aeon's and
most time-series libraries' layout); an array that looks laid out so (far fewer rows than
columns per sequence) is refused until the task file says which it is. Object arrays are read
with pickle, which runs any code the file holds: only where the task file says
``allow_pickle: true``. Every file is checked (``atnbench.userfiles``) before it is opened. Every
mistake is a ``ConfigError`` naming the file, the field (column, row) and what is expected.
"""

from __future__ import annotations

import pickle
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from atnbench.config import ConfigError
from atnbench.errors import needs_package
from atnbench.userfiles import broken_link, check_file, decode

TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
FRAME_SUFFIXES = (".parquet", ".arrow", ".feather")
SAVED_DATASET_FILES = ("state.json", "dataset_dict.json")  # what `save_to_disk` leaves in a folder
HEAD_BYTES = 1 << 24  # how much of a text table is read again to say where it is not UTF-8
LAYOUTS = ("wide", "long", "nested")  # tables
ARRAY_LAYOUTS = ("NTC", "NCT")  # NumPy arrays: (sequences, steps, channels) or (sequences, channels, steps)
LOOKS_NCT = 10  # (N, a, b) with b >= 10 a and no layout said: likely (N, channels, T), asked about
FLOAT32_MAX = float(np.finfo(np.float32).max)  # the model's inputs and targets are float32
UNNAMED = re.compile(r"Unnamed: \d+(\.\d+)?")  # how pandas names a header's empty cells
PICKLE_RISK = ("object arrays are read with pickle, which runs any code the file holds; allow it (allow_pickle: true "
               "in the task file, tasks new --allow-pickle) only for a file you trust")


@dataclass(frozen=True)
class Fields:
    """Where a split's parts are: array names (NumPy) or column names (tables)."""

    x: Union[str, list[str], None] = None  # None: "x" in arrays; every other column in tables
    y: str = "y"
    lengths: Optional[str] = None
    layout: Optional[str] = None  # tables: wide/long/nested (None: nested if x holds lists, else wide);
    # arrays: NTC (the default) or NCT
    id: str = "id"
    time: Optional[str] = "time"


@dataclass
class Sequences:
    """One split: ``xs[i]`` is (T_i, C) float64; ``ys[i]`` a scalar / (D,) target per sequence,
    or (T_i,) / (T_i, D) per step; ``source`` names the file in messages."""

    xs: list[np.ndarray]
    ys: list[Any]
    source: str


def read_split(where: Union[str, Path, dict], fields: Fields, per_step: bool,
               allow_pickle: bool = False) -> Sequences:
    """The sequences of one split (a file path, a folder, or a mapping of ``.npy`` files)."""
    if isinstance(where, dict):
        arrays = {part: _load_npy(Path(path), allow_pickle) for part, path in where.items()}
        return _from_arrays(arrays, fields, per_step, ", ".join(str(p) for p in where.values()), names=False)
    path = Path(where)
    if not path.exists():
        raise ConfigError(missing(path))
    check_file(path, "data", folder_ok=True)  # a FIFO or /dev/zero would hang the reader
    if path.suffix == ".npz":
        return _from_arrays(load_npz(path, allow_pickle), fields, per_step, str(path), names=True)
    if path.suffix == ".npy":
        raise ConfigError(f"{path}: a .npy file holds one array: give the split as a mapping "
                          f"{{x: X.npy, y: Y.npy, lengths: L.npy}}")
    if fields.layout in ARRAY_LAYOUTS:
        raise ConfigError(f"{path}: data.layout: {fields.layout} is for NumPy arrays; a table is "
                          f"{', '.join(LAYOUTS)}")
    return _from_frame(load_frame(path, words=(fields.y, fields.id)), fields, per_step, str(path))


# --- NumPy --------------------------------------------------------------------------------------

def missing(path: Path, what: str = "data file") -> str:
    """Why ``path`` is not there: a loop of symbolic links or a link to nothing (which ``exists``
    also calls missing, though ``ls`` shows them), else no such file."""
    return broken_link(path) or f"{path}: no such {what}"


def _load_npy(path: Path, allow_pickle: bool = False) -> np.ndarray:
    if not path.exists():
        raise ConfigError(missing(path))
    check_file(path, "data")
    try:
        return _unpickled(np.load, path, allow_pickle, "")
    except (ValueError, OSError, EOFError, pickle.UnpicklingError) as err:
        raise ConfigError(f"{path}: not a NumPy .npy file ({_first_line(err)})") from None


def load_npz(path: Path, allow_pickle: bool = False) -> dict[str, np.ndarray]:
    check_file(path, "data")
    try:
        with np.load(path, allow_pickle=allow_pickle) as archive:
            return {name: _unpickled(archive.__getitem__, name, allow_pickle, f" array {name!r}", path)
                    for name in archive.files}
    except ConfigError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as err:
        if not zipfile.is_zipfile(path):  # NumPy reads any other file as a pickle, and says so
            raise ConfigError(f"{path}: not a NumPy .npz archive (not a zip archive at all)") from None
        raise ConfigError(f"{path}: not a NumPy .npz archive ({_first_line(err)})") from None


def _unpickled(load, what, allow_pickle: bool, name: str, path=None):
    """``load(what)``; an object array (pickled) refused unless the task file allows pickle."""
    try:
        return load(what, allow_pickle=allow_pickle) if path is None else load(what)
    except ValueError as err:
        if allow_pickle or "allow_pickle" not in str(err):
            raise
        raise ConfigError(f"{path or what}:{name} holds Python objects: {PICKLE_RISK}") from None


def _from_arrays(arrays: dict[str, np.ndarray], fields: Fields, per_step: bool, source: str,
                 names: bool) -> Sequences:
    if isinstance(fields.x, list):  # else read as x, the list silently ignored
        raise ConfigError(f"{source}: data.x: a list of names is for a table's columns; NumPy arrays give x as one "
                          f"array (N, T, C) of every channel (arrays: {', '.join(sorted(arrays))})")
    if names:
        wanted = {"x": "x" if fields.x is None else fields.x, "y": fields.y, "lengths": fields.lengths}
    else:  # a mapping of .npy files is keyed by part: x, y and, where given, lengths
        wanted = {"x": "x", "y": "y", "lengths": "lengths" if "lengths" in arrays else None}
    for part, name in wanted.items():
        if name is not None and name not in arrays:
            raise ConfigError(f"{source}: data.{part}: no array {name!r} (found: {', '.join(sorted(arrays)) or 'none'})")
    lengths = arrays[wanted["lengths"]] if wanted["lengths"] else None
    for part in ("x", "y"):
        if np.iscomplexobj(arrays[wanted[part]]):
            raise ConfigError(f"{source}: data.{part}: array {wanted[part]!r} holds complex numbers; give real "
                              f"numbers (e.g. the real and imaginary parts as two channels)")
    x = _laid_out(arrays[wanted["x"]], fields.layout, source)
    xs = _split_x(x, lengths, source, fields.layout)
    ys = _split_y(arrays[wanted["y"]], [len(s) for s in xs], per_step, source)
    _check_targets(ys, source, lambda i: f"y[{i}]")
    return Sequences(xs, ys, source)


def _laid_out(x: np.ndarray, layout: Optional[str], source: str) -> np.ndarray:
    """x as (N, T, C) (an object array: each item as (T_i, C)), by the task file's data.layout."""
    if layout is not None and layout not in ARRAY_LAYOUTS:
        raise ConfigError(f"{source}: data.layout: {layout} is for tables; NumPy arrays are NTC or NCT")
    if layout == "NCT":
        if x.dtype == object:
            return np.array([_item(item, f"{source}: x[{i}]").T for i, item in enumerate(x.reshape(-1))] + [None],
                            dtype=object)[:-1]
        if x.ndim != 3:
            raise ConfigError(f"{source}: data.layout: NCT needs x of shape (N, C, T), got {tuple(x.shape)}")
        return x.transpose(0, 2, 1)
    if layout is None and x.dtype != object and x.ndim == 3 and 0 < LOOKS_NCT * x.shape[1] <= x.shape[2]:
        raise ConfigError(f"{source}: data.x: shape {tuple(x.shape)} reads as {x.shape[1]} steps of {x.shape[2]} "
                          f"channels; if it is (N, channels, T) (aeon's layout) set data.layout: NCT, "
                          f"else data.layout: NTC")
    return x


def _split_x(x: np.ndarray, lengths: Optional[np.ndarray], source: str, layout: Optional[str] = None) -> list[np.ndarray]:
    if x.dtype == object:  # variable lengths: one array per sequence
        items = [_item(item, f"{source}: x[{i}]") for i, item in enumerate(x.reshape(-1))]
        shapes = {item.shape for item in items}
        if layout is None and len(shapes) == 1 and len(shape := shapes.pop()) == 2 and 0 < LOOKS_NCT * shape[0] <= shape[1]:
            # one length, each sequence far wider than long: aeon's (channels, T) arrays, read as (T, C)
            raise ConfigError(f"{source}: data.x: every sequence has shape {shape}, which reads as {shape[0]} "
                              f"step{'s' if shape[0] != 1 else ''} of {shape[1]} channels; if each is (channels, T) "
                              f"(aeon's layout) set data.layout: NCT, else data.layout: NTC")
        xs = [_as_steps(item, f"{source}: x[{i}]") for i, item in enumerate(items)]
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
                # lengths that fit the last axis and not the middle one: aeon's (N, C, T), read as (N, T, C)
                hint = (f"; x reads as (N, T, C) = {tuple(x.shape)}, and the lengths fit its last axis: if it is "
                        f"(N, channels, T) (aeon's layout) set data.layout: NCT"
                        if x.dtype != object and x.ndim == 3 and lengths.max() <= x.shape[2] else "")
                raise ConfigError(f"{source}: data.lengths[{i}]: expected 1..{len(seq)}, got {int(n)}{hint}")
        xs = [seq[:n] for seq, n in zip(xs, lengths)]
    channels = {seq.shape[1] for seq in xs}
    if len(channels) > 1:
        # one number of rows and many of columns: aeon's unequal-length (channels, T_i) arrays, read as (T_i, C)
        rows = len(xs[0])
        hint = "" if len({len(seq) for seq in xs}) > 1 else (
            f"; data.layout: NCT reads each array as (channels, T_i), which makes {rows} step{'s' if rows != 1 else ''} "
            f"of each: if each is (T_i, channels), give data.layout: NTC" if layout == "NCT" else
            f"; each sequence has {rows} row{'s' if rows != 1 else ''}: if each array is (channels, T_i) "
            f"(aeon's layout) set data.layout: NCT")
        raise ConfigError(f"{source}: data.x: sequences have different numbers of channels ({sorted(channels)}){hint}")
    if channels == {0}:
        raise ConfigError(f"{source}: data.x: the sequences have no channels (shape {tuple(x.shape)})")
    _check_finite(xs, source)
    return xs


def _item(item: Any, where: str) -> np.ndarray:
    """One sequence of an object array as an array (a ragged list of steps cannot be one)."""
    try:
        return np.asarray(item)
    except ValueError:
        raise ConfigError(f"{where}: its steps have different numbers of channels (a ragged list); give each "
                          f"sequence as a (T, C) array") from None


def _as_steps(item: np.ndarray, where: str) -> np.ndarray:
    """(T, C) float64 from (T,) or (T, C) numbers."""
    if item.ndim == 1:
        item = item[:, None]
    if item.ndim != 2 or item.shape[0] == 0:
        raise ConfigError(f"{where}: expected a (T, C) or (T,) array with T >= 1, got shape {tuple(item.shape)}")
    if np.iscomplexobj(item) or item.dtype == object and any(isinstance(v, complex) for v in item.reshape(-1)):
        raise ConfigError(f"{where}: holds complex numbers; give real numbers (e.g. real and imaginary parts "
                          f"as two channels)")
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

def load_frame(path: Path, words: tuple = ()):
    """The table at ``path``. In a text table, a column of ``words`` (the target, the sequence id)
    that holds text keeps every cell's text: 'NA', 'None' and 'null' are a class's or a sequence's
    name there, and only an empty cell is missing (pandas' defaults would read them all as NaN)."""
    import pandas as pd

    try:
        if path.is_dir():
            if not any((path / name).is_file() for name in SAVED_DATASET_FILES):
                raise ConfigError(f"{path}: is a folder, not a data file (nor a Hugging Face dataset saved with "
                                  f"save_to_disk, which holds {' or '.join(SAVED_DATASET_FILES)})")
            from datasets import Dataset, load_from_disk  # optional: the [data] extra

            data = load_from_disk(str(path))
            if not isinstance(data, Dataset):
                raise ConfigError(f"{path}: a dataset dictionary: give each split's folder "
                                  f"({', '.join(data)}) as its own file")
            return data.to_pandas()
        if path.suffix in TABLE_SUFFIXES:
            return _keep_words(_read_text_table(path), path, words)
        if path.suffix == ".parquet":
            return pd.read_parquet(path)
        if path.suffix in (".arrow", ".feather"):
            return pd.read_feather(path)
    except ConfigError:
        raise
    except pd.errors.ParserWarning:  # rows longer than the header (as _read_text_table makes it an error)
        raise ConfigError(f"{path}: a row has more fields than the header has names (a name missing from the "
                          f"header?); give every column a name, the target's too") from None
    except UnicodeDecodeError:
        raise ConfigError(_not_utf8(path)) from None
    except ImportError:  # pandas names the missing package in words only: the path says which it is
        raise ConfigError(f"{path}: reading it {needs_package('datasets' if path.is_dir() else 'pyarrow')}") from None
    except Exception as err:  # pandas/pyarrow say what is wrong in many exception types
        raise ConfigError(f"{path}: cannot read it ({_first_line(err)})") from None
    known = ", ".join([*TABLE_SUFFIXES, ".npz", *FRAME_SUFFIXES])
    raise ConfigError(f"{path}: unknown data format {path.suffix or '(no extension)'!r}; expected one of: {known}, "
                      f"a mapping of .npy files, or a Hugging Face dataset folder")


def _not_utf8(path: Path) -> str:
    """A text table's encoding problem in the words every other file of the user's gets
    (``userfiles.decode``: UTF-16, or the line and column of the first byte that is not UTF-8),
    found in its first 16 MB; past them, without the place."""
    with open(path, "rb") as handle:
        head = handle.read(HEAD_BYTES)
    try:
        decode(head, str(path))
    except ConfigError as problem:
        if len(head) < HEAD_BYTES or not _cut_at_its_end(head):  # not a good character cut by the read
            return str(problem)
    return f"{path}: is not UTF-8 text (latin-1 or another encoding? save it as UTF-8)"


def _cut_at_its_end(head: bytes) -> bool:
    """Whether the first thing wrong with ``head`` as UTF-8 is a character cut at its end."""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        return error.reason == "unexpected end of data"
    return False


def _read_text_table(path: Path):
    import warnings

    import pandas as pd

    with open(path, "rb") as handle:  # NUL bytes are good UTF-8: pandas would take them into the header
        head = handle.read(8192)
    if b"\0" in head:
        decode(head, str(path))
    _check_header(path)
    # index_col=False: by default a header one name short makes the first column (often the
    # target) the index, dropped without a word; pandas then warns that it cuts the rows instead
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        # in one piece, not in chunks: a column reads as one type, and a 100,000-column file in
        # seconds (the chunks' concatenation was most of a minute)
        return pd.read_csv(path, sep=TABLE_SUFFIXES[path.suffix], low_memory=False, index_col=False)


def _check_header(path: Path) -> None:
    """A text table's first row, before pandas takes it for the names of the columns. Numbers only
    (the UCR/aeon .tsv files have no header: a label, then the values): its sequence would be lost
    without a word; refused. Whole numbers counting up from 0 or 1 are names (``DataFrame.to_csv``
    of a frame with integer columns writes them so). A name given twice: pandas would rename the
    second ``y.1`` and read it as one more column, the target's values as a step of every sequence
    (a label leak); refused."""
    import pandas as pd

    first = pd.read_csv(path, sep=TABLE_SUFFIXES[path.suffix], header=None, nrows=1, dtype=str,
                        keep_default_na=False, index_col=False)
    cells = [str(cell).strip() for cell in first.iloc[0]] if len(first) else []
    try:
        numbers = [float(cell) for cell in cells]
    except ValueError:
        numbers = None
    if numbers and not any(numbers == list(range(start, start + len(numbers))) for start in (0, 1)):
        raise ConfigError(f"{path}: its first row is numbers ({', '.join(cells[:3])}, ...), not column names: the "
                          f"file has no header row (as the UCR/aeon .tsv files have none), so its first sequence "
                          f"would be read as the names; add a header row naming the columns, the target's too")
    seen: dict[str, int] = {}
    for column, name in enumerate(cells, 1):
        if name and name in seen:
            raise ConfigError(f"{path}: the header names column {name!r} twice (columns {seen[name]} and {column}); "
                              f"give each column a name of its own")
        seen[name] = column


def _keep_words(frame, path: Path, words: tuple):
    import pandas as pd

    for column in dict.fromkeys(c for c in words if c in frame.columns):
        if pd.api.types.is_integer_dtype(frame[column]):
            _check_read_apart(frame[column], path, column)
        if pd.api.types.is_numeric_dtype(frame[column]) or not frame[column].isna().any():
            continue  # numbers (where 'NA' is a missing number) or nothing read as missing
        literal = pd.read_csv(path, sep=TABLE_SUFFIXES[path.suffix], usecols=[column], dtype=str,
                              keep_default_na=False, na_values=[""], index_col=False)[column]
        frame[column] = literal.to_numpy(dtype=object)
    return frame


def _check_read_apart(values, path: Path, column: str) -> None:
    """Labels or ids ``'01'`` and ``'1'`` in a text table read as one whole number: two classes (or
    two sequences) merged without a word, where a parquet file keeps them apart; refused."""
    import pandas as pd

    literal = pd.read_csv(path, sep=TABLE_SUFFIXES[path.suffix], usecols=[column], dtype=str,
                          keep_default_na=False, index_col=False)[column].str.strip()
    seen: dict = {}
    for text, value in zip(literal, values):
        first = seen.setdefault(value, text)
        if first != text:
            raise ConfigError(f"{path}: column {column!r} holds {first!r} and {text!r}, which read as the same number "
                              f"{value}: as labels or ids they would be one; write each one way")


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
    columns = _feature_columns(frame, fields, (fields.y, fields.id), source)
    if len(columns) > 1000:  # one block per column as read: consolidated first, taking 100,000 columns is fast
        frame = frame.copy()
    values = _numbers(frame[columns], source, "x")
    _check_infinite(values, columns, source)
    _check_nan_written(values, columns, source)
    xs = []
    for i, row in enumerate(values):
        filled = ~np.isnan(row)
        length = int(filled.sum())
        if length == 0 or not filled[:length].all():
            raise ConfigError(f"{source}: data.x: row {i + 1} has {'no values' if length == 0 else 'an empty cell before its last value'}"
                              f" (a sequence's steps are the row's first cells, empty cells only at the end)")
        xs.append(row[:length, None])
    ys = list(frame[fields.y].to_numpy())
    _check_targets(ys, source, lambda i: f"y row {i + 1}")
    return Sequences(xs, ys, source)


def _feature_columns(frame, fields: Fields, others: tuple, source: str) -> list:
    """The columns data.x names (each must exist), or every column but ``others`` (not a date:
    a time stamp is no feature, and a date read as a number would be one silently)."""
    if isinstance(fields.x, list):
        missing = [c for c in fields.x if c not in frame.columns]
        if missing:
            raise ConfigError(f"{source}: data.x: no column {missing[0]!r} (columns: {_columns(frame)})")
        columns = fields.x
    else:
        columns = [c for c in frame.columns if c not in others]
        dates = [c for c, dtype in frame.dtypes.items() if dtype.kind in "mM" and c not in others]
        if dates:
            raise ConfigError(f"{source}: data.x: column {dates[0]!r} holds dates or times; name the feature columns "
                              f"in data.x (a time stamp orders a long table's steps: data.time)")
        _refuse_unnamed(columns, source)
    if not columns:
        raise ConfigError(f"{source}: data.x: no feature column (columns: {_columns(frame)})")
    return columns


def _refuse_unnamed(columns: list, source: str) -> None:
    """A column with no name in the header is most often the row numbers pandas' ``to_csv()``
    writes by default: taken as step 0, it would predict the class of a file sorted by class."""
    unnamed = [c for c in columns if isinstance(c, str) and UNNAMED.fullmatch(c)]
    if unnamed:
        raise ConfigError(f"{source}: data.x: column {unnamed[0]!r} has no name in the header (the index "
                          f"pandas' to_csv() writes?); write the file with to_csv(..., index=False) or name the column")


def _long(frame, fields: Fields, per_step: bool, source: str) -> Sequences:
    for part, column in (("id", fields.id), ("time", fields.time)):
        if column is not None and column not in frame.columns:
            raise ConfigError(f"{source}: data.{part}: no column {column!r} (columns: {_columns(frame)})")
    empty = frame[fields.id].isna()
    if empty.any():
        raise ConfigError(f"{source}: data.id: {int(empty.sum())} row(s) have an empty {fields.id!r} cell (the first: "
                          f"row {int(np.argmax(empty.to_numpy())) + 1}); every step needs its sequence's id")
    columns = _feature_columns(frame, fields, (fields.y, fields.id, fields.time), source)
    values = _numbers(frame[columns], source, "x")
    _check_infinite(values, columns, source)
    missing = np.argwhere(np.isnan(values))
    if len(missing):  # a row is one step here: there is no padding to end a row early with
        row, column = missing[0]
        raise ConfigError(f"{source}: data.x: row {row + 1}, column {columns[column]!r}: NaN (an empty cell, or nan); "
                          f"in a long table each row is a step, and each step needs every feature")
    if fields.time is not None:
        frame = _in_time_order(frame, fields, source)
    rows = frame[fields.y].isna().to_numpy()
    if rows.any():  # the row as in the file (the index survives the sort)
        raise ConfigError(f"{source}: data.y: row {int(frame.index[np.argmax(rows)]) + 1} has no target (empty or NaN)")
    xs, ys = [], []
    for _, group in frame.groupby(fields.id, sort=False):
        xs.append(_numbers(group[columns], source, "x"))
        target = group[fields.y].to_numpy()
        if not per_step and len(set(target.tolist())) > 1:
            raise ConfigError(f"{source}: data.y: sequence {_plain(group[fields.id].iloc[0])!r} has several targets; "
                              f"a per-sequence problem needs one value per sequence")
        ys.append(target if per_step else target[0])
    _check_finite(xs, source)
    return Sequences(xs, ys, source)


def _in_time_order(frame, fields: Fields, source: str):
    """The rows sorted by sequence and time; time stamps are numbers or dates (text that is
    neither is refused: sorted as text, t10 would come before t7); one per step."""
    import pandas as pd

    stamps = frame[fields.time]
    empty = stamps.isna().to_numpy()
    if empty.any():  # sorted, it would go last: a step moved to the end of its sequence without a word
        raise ConfigError(f"{source}: data.time: row {int(stamps.index[empty.argmax()]) + 1} has an empty "
                          f"{fields.time!r} cell (or NaN); the time stamps order the steps, each needs one")
    if not (pd.api.types.is_numeric_dtype(stamps) or stamps.dtype.kind in "mM"):  # text (object or str dtype)
        numbers = pd.to_numeric(stamps, errors="coerce")
        if numbers.isna().any():  # a CSV's dates are text: ISO 8601 ones (2020-01-31, 2020-01-31T12:00) are read
            numbers = pd.to_datetime(stamps, format="ISO8601", errors="coerce")
        if numbers.isna().any():
            bad = _plain(stamps[numbers.isna()].iloc[0])
            raise ConfigError(f"{source}: data.time: column {fields.time!r} holds {bad!r} (row "
                              f"{int(stamps.index[numbers.isna().to_numpy().argmax()]) + 1}), neither a number nor an "
                              f"ISO 8601 date; time stamps order the steps (text would sort t10 before t7)")
        frame = frame.assign(**{fields.time: numbers})
    twice = frame.duplicated([fields.id, fields.time]).to_numpy()
    if twice.any():
        first = int(twice.argmax())  # column by column: a row as one Series would make the id a float
        seq, stamp = _plain(frame[fields.id].iloc[first]), _plain(stamps.iloc[first])  # the stamp as written
        raise ConfigError(f"{source}: data.time: sequence {seq!r} has time {stamp!r} twice "
                          f"(row {int(frame.index[first]) + 1}); one row per step")
    return frame.sort_values([fields.id, fields.time], kind="stable")


def _nested(frame, fields: Fields, per_step: bool, source: str) -> Sequences:
    x = fields.x if isinstance(fields.x, str) else "x"
    if x not in frame.columns:
        raise ConfigError(f"{source}: data.x: no column {x!r} (columns: {_columns(frame)})")
    xs = [_as_steps(_stack(cell, f"{source}: data.x row {i + 1}"), f"{source}: data.x row {i + 1}")
          for i, cell in enumerate(frame[x])]
    _check_finite(xs, source)
    ys = [(_stack(cell, f"{source}: data.y row {i + 1}") if per_step else cell) for i, cell in enumerate(frame[fields.y])]
    if per_step:  # as for arrays: one target per step (a shorter list would be broadcast)
        for i, (target, seq) in enumerate(zip(ys, xs)):
            if target.ndim == 0 or len(target) < len(seq):
                raise ConfigError(f"{source}: data.y row {i + 1}: a per-step target needs one value per step "
                                  f"({len(seq)}), got {len(target) if target.ndim else 'one value'}")
        ys = [target[:len(seq)] for target, seq in zip(ys, xs)]
    _check_targets(ys, source, lambda i: f"y row {i + 1}")
    return Sequences(xs, ys, source)


def _stack(cell: Any, where: str) -> np.ndarray:
    try:
        return np.asarray([np.asarray(step, dtype=np.float64) for step in cell])
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a list of steps (numbers or lists of channels)") from None


def _numbers(frame, source: str, part: str) -> np.ndarray:
    complex_ = [c for c, dtype in frame.dtypes.items() if dtype.kind == "c"]  # dtypes: fast at 100,000 columns
    if complex_:
        raise ConfigError(f"{source}: data.{part}: column {complex_[0]!r} holds complex numbers; give real numbers")
    try:
        return frame.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        pass
    import pandas as pd

    for column in frame.columns:  # the first column that is not numbers, and a value of it
        try:
            frame[column].to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            cells = frame[column]
            bad = (pd.to_numeric(cells, errors="coerce").isna() & cells.notna()).to_numpy()
            first = int(bad.argmax())
            raise ConfigError(f"{source}: data.{part}: column {column!r} holds non-numbers "
                              f"({_plain(cells.iloc[first])!r} in row {int(frame.index[first]) + 1})") from None
    raise ConfigError(f"{source}: data.{part}: columns {_columns(frame)} hold non-numbers")


def _plain(value: Any) -> Any:
    """A NumPy scalar as the Python value it holds (``0``, not ``np.int64(0)``, in messages)."""
    return value.item() if isinstance(value, np.generic) else value


def _check_nan_written(values: np.ndarray, columns: list, source: str) -> None:
    """A text table's cell that says ``nan`` (or ``NaN``, ``NA``: pandas reads them as missing) is a
    value no model can read, refused with its row and column; only an empty cell is missing (in a
    wide table, the end of a shorter sequence)."""
    import pandas as pd

    path = Path(source)
    if path.suffix not in TABLE_SUFFIXES or not np.isnan(values).any():
        return
    written = pd.read_csv(path, sep=TABLE_SUFFIXES[path.suffix], usecols=columns, dtype=str,
                          keep_default_na=False, index_col=False)[columns].to_numpy()
    for row, column in np.argwhere(np.isnan(values)):
        text = str(written[row, column]).strip()
        if text:
            raise ConfigError(f"{source}: data.x: row {row + 1}, column {columns[column]!r}: {text!r} is not a "
                              f"number a model can read (only empty cells are missing: in a wide table, the end "
                              f"of a shorter sequence)")


def _check_infinite(values: np.ndarray, columns: list, source: str) -> None:
    """An infinite cell (``inf``, ``1e400`` in a CSV) said as one, with its row and column: an
    empty cell is NaN, a missing step; infinity is a value no model can read."""
    found = np.argwhere(np.isinf(values))
    if len(found):
        row, column = found[0]
        raise ConfigError(f"{source}: data.x: row {row + 1}, column {columns[column]!r}: non-finite value "
                          f"{values[row, column]} (inf, or a number past float64's range)")
    found = np.argwhere(np.abs(np.nan_to_num(values)) > FLOAT32_MAX)
    if len(found):
        row, column = found[0]
        raise ConfigError(f"{source}: data.x: row {row + 1}, column {columns[column]!r}: "
                          f"{beyond_float32(values[row, column])}")


def beyond_float32(value: float) -> str:
    """The end of the one line refusing a finite float64 the model (float32) cannot hold."""
    return f"value {value:g} is past float32's range (±{FLOAT32_MAX:.3g}), which the model computes in; rescale it"


def _check_targets(ys: list, source: str, where) -> None:
    """No NaN or infinite number among the targets (a class label NaN is an empty cell), said with
    its row; text labels are left to the problem's checks."""
    for i, target in enumerate(ys):
        values = np.asarray(target)
        if values.dtype.kind in "fc" and not np.isfinite(values).all():
            raise ConfigError(f"{source}: data.{where(i)}: target is {'NaN (an empty cell?)' if np.isnan(values).any() else 'infinite'}")


def _check_finite(xs: list[np.ndarray], source: str) -> None:
    for i, seq in enumerate(xs):
        if not np.isfinite(seq).all():
            step = int(np.argwhere(~np.isfinite(seq))[0][0])
            raise ConfigError(f"{source}: data.x: NaN or infinity in sequence {i} at step {step} "
                              f"(padding? give data.lengths, or end the row early)")
        large = np.abs(seq) > FLOAT32_MAX  # as float32 inf, and standardizing it overflows
        if large.any():
            step, channel = np.argwhere(large)[0]
            raise ConfigError(f"{source}: data.x: sequence {i}, step {step}: {beyond_float32(seq[step, channel])}")


def _columns(frame) -> str:
    return ", ".join(map(str, frame.columns[:12])) + (", ..." if len(frame.columns) > 12 else "")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__

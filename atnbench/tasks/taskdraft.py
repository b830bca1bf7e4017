"""A starting task file for a data file (``atnbench tasks new``): what can be inferred, said.

The problem kind is read off the targets: one per sequence or one per step (NumPy: the shape of
``y``; tables: the long layout has a target per row), classes when the targets are text or a
few whole numbers (at most ``MAX_CLASSES`` distinct values), regression otherwise.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Optional

import numpy as np
import yaml

from atnbench.config import ConfigError
from atnbench.tasks.userdata import ARRAY_LAYOUTS, LOOKS_NCT, Fields, load_frame, load_npz, read_split
from atnbench.tasks.userprep import PROBLEMS
from atnbench.userfiles import broken_link, check_file

MAX_CLASSES = 50
NAMES = {"x": ("x", "X", "inputs", "data"), "y": ("y", "Y", "label", "labels", "target", "targets", "class"),
         "lengths": ("lengths", "length", "lens", "seq_len"), "id": ("id", "seq_id", "series", "sequence"),
         "time": ("time", "t", "step", "timestamp")}


def _first(names: tuple[str, ...], available) -> Optional[str]:
    return next((name for name in names if name in available), None)


def _infer_fields(path: Path, allow_pickle: bool) -> Fields:
    if path.suffix == ".npz":
        arrays = load_npz(path, allow_pickle)
        x, y = _first(NAMES["x"], arrays), _first(NAMES["y"], arrays)
        if x is None or y is None:
            raise ConfigError(f"{path}: expected arrays named x and y (found: {', '.join(arrays)})")
        shape = arrays[x].shape if arrays[x].dtype != object else ()
        nct = len(shape) == 3 and 0 < LOOKS_NCT * shape[1] <= shape[2]  # (N, channels, T), as aeon keeps them
        return Fields(x=x, y=y, lengths=_first(NAMES["lengths"], arrays), layout="NCT" if nct else None)
    columns = list(load_frame(path).columns)
    y = _first(NAMES["y"], columns) or columns[0]
    seq_id, time = _first(NAMES["id"], columns), _first(NAMES["time"], columns)
    if seq_id is not None:
        return Fields(y=y, layout="long", id=seq_id, time=time)
    return Fields(y=y)


def _infer_problem(path: Path, fields: Fields, allow_pickle: bool) -> str:
    per_step = fields.layout == "long" or (path.suffix == ".npz" and _y_per_step(path, fields, allow_pickle))
    part = read_split(path, fields, per_step, allow_pickle)
    values = np.concatenate([np.asarray(y).reshape(-1) for y in part.ys]) if per_step else np.asarray(part.ys)
    if per_step and fields.layout == "long":  # a long table's per-sequence target repeats on every row
        constant = all(len(set(np.asarray(y).reshape(-1).tolist())) == 1 for y in part.ys)
        per_step = not constant
    whole = values.dtype.kind in "iu" or (values.dtype.kind == "f" and bool(np.all(np.mod(values, 1) == 0)))
    classes = values.dtype.kind in "OUSb" or (whole and len(np.unique(values)) <= MAX_CLASSES)
    return f"{'step' if per_step else 'sequence'}-{'classification' if classes else 'regression'}"


def _y_per_step(path: Path, fields: Fields, allow_pickle: bool) -> bool:
    """Targets per step: an object array (one array per sequence) or (N, T, ...) beside x's T."""
    arrays = load_npz(path, allow_pickle)
    x, y = arrays[fields.x], arrays[fields.y]
    steps = x.shape[1] if x.dtype != object and x.ndim >= 2 else None
    return y.dtype == object or y.ndim >= 2 and y.shape[1] > 1 and steps == y.shape[1]


def _quoted(text: str) -> str:
    """``text`` as a YAML scalar that reads back as itself: a file name holds '#', ': ' or
    quotes, and a CSV header's name may look like a number ('0')."""
    return yaml.safe_dump(str(text), default_style='"', width=float("inf"), allow_unicode=True).rstrip("\n")


def _field_lines(fields: Fields) -> list[str]:
    """The ``data:`` lines naming the arrays or columns (a long table's id and time too)."""
    named = {"x": fields.x, "y": fields.y, "lengths": fields.lengths}
    if fields.layout in ARRAY_LAYOUTS:
        steps = "(sequences, channels, steps), aeon's layout" if fields.layout == "NCT" else "(sequences, steps, channels)"
        return [f"  {key}: {_quoted(value)}" for key, value in named.items() if value is not None] + \
            [f"  layout: {fields.layout}            # inferred: x read as {steps}; NTC reads the other way"]
    if fields.layout is not None:
        named.update(layout=fields.layout, id=fields.id, time=fields.time)
    return [f"  {key}: {'null' if value is None else _quoted(value)}" for key, value in named.items()
            if value is not None or key == "time"]


def draft_task(name: str, data: Path, folder: Path, problem: Optional[str] = None,
               allow_pickle: bool = False) -> str:
    """The text of NAME.yaml for ``data``, checked by reading the data as the task will."""
    if not data.exists():
        raise ConfigError(f"--from {broken_link(data) or f'{data}: no such file'}")
    check_file(data, "data", folder_ok=True)  # a FIFO or /dev/zero: refused before it is opened
    if problem is not None and problem not in PROBLEMS:
        raise ConfigError(f"--problem {problem!r}: choose one of: {', '.join(PROBLEMS)}")
    fields = _infer_fields(data, allow_pickle)
    problem = problem or _infer_problem(data, fields, allow_pickle)
    part = read_split(data, fields, PROBLEMS[problem].per_step, allow_pickle)
    if not part.xs:
        raise ConfigError(f"{data}: holds no sequences; a task needs some to train on")
    lengths = [len(x) for x in part.xs]
    relative = os.path.relpath(data.absolute(), folder.absolute())
    lines = [f"# {name}: written by `atnbench tasks new` from {_quoted(data.name)}; check it with "
             f"`atnbench tasks check {name} --include {shlex.quote(str(folder))}`",
             f"# {len(part.xs)} sequences, {part.xs[0].shape[1]} channel(s), lengths {min(lengths)} to {max(lengths)}",
             f"description: {_quoted(f'{problem} on {data.name}')}",
             f"problem: {problem}        # inferred from the targets; one of: {', '.join(PROBLEMS)}",
             "data:",
             f"  train: {_quoted(relative)}",
             "  # validation: FILE       # else carved from train by split.validation",
             "  # test: FILE",
             "  split: {validation: 0.2, test: 0.0, seed: 0}"]
    lines += _field_lines(fields)
    lines += ["standardize: true        # inputs scaled with the training split's mean and std",
              "# default_T: the longest sequence of any split (test included); longer ones keep their first T steps",
              "# run settings over the defaults that learn on small data (docs/adding-a-task.md)",
              "defaults: {}             # e.g. {hidden: 32, patience: 20}"]
    if allow_pickle:
        lines.append("allow_pickle: true       # object arrays unpickled: runs code from the file; only files you trust")
    lines.append("")
    return "\n".join(lines)

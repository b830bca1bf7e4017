"""Character-level Penn Treebank (Marcus et al. 1993; Mikolov's character version).

Mikolov's ``ptb.char.{train,valid,test}.txt`` (in ``simple-examples.tgz``, folder ``data/``)
hold one sentence per line, characters separated by spaces and ``_`` between words; about
5.0 M / 0.39 M / 0.44 M characters. The word-level ``ptb.{train,valid,test}.txt`` of the same
archive give the same characters: the words of a line joined by ``_``, one token per
character. Each line ends with an ``<eos>`` token (AWD-LSTM's reading), so the vocabulary is
the ~49 characters plus ``<eos>`` (the ATN paper's "alphabet size of 50").

There is no canonical Hub copy: put the files in ``--data-dir DIR`` (or
``$ATNBENCH_DATA/ptb``), pass them with ``--data-files train=..,validation=..,test=..``, or
name a Hub dataset with a ``text``/``sentence`` column in ``options.hf_id``. Whether the lines
are characters or words is detected from the text (``options.ptb_format``: ``char``/``word``
overrides the detection).
"""

from __future__ import annotations

import torch

from atnbench.data.common import DataUnavailable, Layout, check_splits, find_source
from atnbench.data.text import SPLITS, _lines, encode_corpus

NAME = "char-level PTB"
FILES = {"train": "train", "validation": "valid", "test": "test"}
HOW_TO = ("put ptb.char.train.txt, ptb.char.valid.txt and ptb.char.test.txt (or the word-level "
          "ptb.train.txt, ptb.valid.txt, ptb.test.txt) from data/ of "
          "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz into a folder and pass "
          "--data-dir FOLDER (or set ATNBENCH_DATA to the folder holding ptb/)")


def _layout(stem: str) -> Layout:
    return Layout("text", {split: [f"{stem}.{part}.txt", f"data/{stem}.{part}.txt",
                                   f"simple-examples/data/{stem}.{part}.txt"]
                           for split, part in FILES.items()})


LAYOUTS = (_layout("ptb.char"), _layout("ptb"))


def char_tokens(line: str) -> list[str]:
    """A line of Mikolov's character files: its space-separated characters."""
    return line.split()


def word_line_to_chars(line: str) -> list[str]:
    """A word-level line as Mikolov's character files spell it: words joined by ``_``."""
    return list("_".join(line.split()))


def detect_format(lines: list[str]) -> str:
    tokens = [tok for line in lines[:200] for tok in line.split()]
    if not tokens:
        return "char"
    single = sum(len(tok) == 1 for tok in tokens) / len(tokens)
    return "char" if single > 0.95 else "word"


def load_ptb_char(options: dict) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``({"train": ids, "validation": ids, "test": ids}, vocabulary)`` of character ids."""
    source = find_source(NAME, options, subdir="ptb", layouts=LAYOUTS, required=SPLITS, hub=None, how_to=HOW_TO)
    check_splits(NAME, source, SPLITS, HOW_TO)
    fmt = options.get("ptb_format", "auto")
    if fmt not in ("auto", "char", "word"):
        raise DataUnavailable(f"{NAME}: ptb_format must be auto, char or word, got {fmt!r}")
    if fmt == "auto":
        fmt = detect_format(_lines(NAME, source.splits["train"]))
    line_tokens = char_tokens if fmt == "char" else word_line_to_chars
    return encode_corpus(NAME, source, line_tokens, "ptb-char.vocab.json", settings=(fmt,))

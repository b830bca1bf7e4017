"""IMDB movie reviews (Maas et al. 2011): 25,000 training and 25,000 test reviews, positive or negative.

Hub id ``stanfordnlp/imdb`` (columns ``text``, ``label``: 0 negative, 1 positive). Local
copies, in ``--data-dir DIR`` or ``$ATNBENCH_DATA/imdb``: a ``save_to_disk`` folder; the Hub
repository layout ``plain_text/train-00000-of-00001.parquet`` and ``plain_text/test-...``, or
``train.parquet``/``test.parquet``; or ``train.csv``/``test.csv`` with ``text`` and ``label``
columns (``review``/``sentiment`` with positive/negative also read).

Tokenisation: lower case, ``<br />`` removed, words (with an inner apostrophe: ``don't``) and
single punctuation marks. The vocabulary is the ``max_vocab`` most frequent training tokens
(ties alphabetically; frequency then spelling makes it deterministic), after ``<pad>`` (id 0)
and ``<unk>`` (id 1).
"""

from __future__ import annotations

import re
from collections import Counter

from atnbench.data.common import (
    DataUnavailable,
    Layout,
    cached_vocab,
    check_splits,
    column,
    find_source,
    parquet_layout,
    vocab_fingerprint,
)

NAME = "IMDB"
HUB = ("stanfordnlp/imdb", None)
SPLITS = ("train", "test")
PAD, UNK = "<pad>", "<unk>"
HOW_TO = ("on a connected machine run `python -c \"import datasets; datasets.load_dataset('stanfordnlp/imdb')"
          ".save_to_disk('imdb')\"` (or `hf download stanfordnlp/imdb --repo-type dataset --local-dir imdb`), "
          "then pass --data-dir imdb or set ATNBENCH_DATA to the folder holding imdb/")
LAYOUTS = (
    parquet_layout(SPLITS, subfolders=("plain_text", "data")),
    Layout("csv", {split: [f"{split}.csv"] for split in SPLITS}),
)
TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")


def tokenize(text: str) -> list[str]:
    return TOKEN.findall(text.lower().replace("<br />", " "))


def _labels(ds) -> list[int]:
    name = column(NAME, ds, ("label", "labels", "sentiment"))
    labels = []
    for value in ds[name]:
        if isinstance(value, str):
            value = {"negative": 0, "neg": 0, "0": 0, "positive": 1, "pos": 1, "1": 1}.get(value.strip().lower(), value)
        if value not in (0, 1):
            raise DataUnavailable(f"{NAME}: labels must be 0/1 (or negative/positive), got {value!r}")
        labels.append(int(value))
    return labels


def load_imdb(options: dict) -> tuple[dict[str, tuple[list[list[int]], list[int]]], list[str]]:
    """``({"train": (token ids per review, labels), "test": (...)}, vocabulary)``."""
    max_vocab = int(options.get("max_vocab", 20000))
    source = find_source(NAME, options, subdir="imdb", layouts=LAYOUTS, required=SPLITS, hub=HUB, how_to=HOW_TO)
    check_splits(NAME, source, SPLITS, HOW_TO)
    texts = {split: [tokenize(t) for t in source.splits[split][column(NAME, source.splits[split], ("text", "review"))]]
             for split in SPLITS}

    def build() -> list[str]:
        counts = Counter(tok for review in texts["train"] for tok in review)
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:max_vocab]
        return [PAD, UNK] + [tok for tok, _ in ranked]

    vocab = cached_vocab(source, f"imdb-{max_vocab}.vocab.json", vocab_fingerprint(source, NAME, max_vocab, "v1"), build)
    index = {tok: i for i, tok in enumerate(vocab)}
    unk = index[UNK]
    out = {split: ([[index.get(tok, unk) for tok in review] for review in texts[split]], _labels(source.splits[split]))
           for split in SPLITS}
    return out, vocab

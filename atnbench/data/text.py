"""Language-model corpora: lines of text to one long stream of token ids per split.

Every line becomes its tokens followed by ``<eos>``, as AWD-LSTM's ``data.py`` reads PTB and
WikiText (empty lines included, so they contribute one ``<eos>``). The vocabulary is every
token of every split, sorted, as AWD-LSTM's dictionary is built from all three splits (in
order of appearance there; sorted here so that the ids never depend on reading order).
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch

from atnbench.data.common import Source, cached_vocab, column, vocab_fingerprint

EOS = "<eos>"
SPLITS = ("train", "validation", "test")


def _lines(name: str, ds) -> list[str]:
    text = column(name, ds, ("text", "sentence", "line"))
    # One slice, not ds[text]: datasets >= 3 iterates a column row by row (seconds for PTB).
    return [line if isinstance(line, str) else "" for line in ds.select_columns([text])[:][text]]


def encode_corpus(name: str, source: Source, line_tokens: Callable[[str], list[str]], vocab_file: str,
                  settings: Iterable = ()) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``({"train": ids, "validation": ids, "test": ids}, vocabulary)``; ids are int64 streams."""
    tokens = {split: [tok for line in _lines(name, source.splits[split]) for tok in (*line_tokens(line), EOS)]
              for split in SPLITS}
    fingerprint = vocab_fingerprint(source, name, *settings)
    vocab = cached_vocab(source, vocab_file, fingerprint,
                         lambda: sorted({tok for split in SPLITS for tok in tokens[split]}))
    index = {tok: i for i, tok in enumerate(vocab)}
    ids = {}
    for split in SPLITS:
        try:
            ids[split] = torch.tensor([index[tok] for tok in tokens[split]], dtype=torch.long)
        except KeyError as err:  # a cached vocabulary that does not cover the data: rebuild
            raise RuntimeError(f"{name}: token {err.args[0]!r} missing from the cached vocabulary "
                               f"{vocab_file}; delete it and run again") from None
    return ids, vocab

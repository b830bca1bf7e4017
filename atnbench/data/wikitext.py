"""WikiText-2 (Merity et al. 2016): word-level language modelling on Wikipedia articles.

Hub id ``Salesforce/wikitext``, config ``wikitext-2-v1`` by default (``options.hf_config``
chooses another: ``wikitext-2-v1`` is the version with rare words replaced by ``<unk>``, whose
33,278-word vocabulary is the one AWD-LSTM and the ATN paper's Table 5 use; the raw version
keeps every word, so its vocabulary is larger and its perplexities are not comparable).

Tokens are the whitespace-separated words of each line plus ``<eos>``, AWD-LSTM's reading of
the ``wiki.*.tokens`` files (2,088,628 training tokens for WikiText-2). Local copies, in
``--data-dir DIR`` or ``$ATNBENCH_DATA/wikitext-2``: a ``save_to_disk`` folder; the Hub
repository layout (``<config>/train-00000-of-00001.parquet``, ``validation-...``,
``test-...``) or ``train.parquet``/``validation.parquet``/``test.parquet``; or the original
archives' ``wiki.train.tokens``/``wiki.valid.tokens``/``wiki.test.tokens`` (``.raw`` for the
raw version), also inside a ``wikitext-2/`` or ``wikitext-2-raw/`` folder.
"""

from __future__ import annotations

import torch

from atnbench.data.common import Layout, check_splits, find_source, parquet_layout
from atnbench.data.text import SPLITS, encode_corpus

NAME = "WikiText-2"
REPO = "Salesforce/wikitext"
DEFAULT_CONFIG = "wikitext-2-v1"  # Table 5's <unk>-tokenized text; the raw text is variant "raw"
FILES = {"train": "train", "validation": "valid", "test": "test"}


def how_to(config: str) -> str:
    return (f"on a connected machine run `python -c \"import datasets; datasets.load_dataset('{REPO}', "
            f"'{config}').save_to_disk('wikitext-2')\"` (or `hf download {REPO} --repo-type dataset "
            f"--include '{config}/*' --local-dir wikitext-2`), then pass --data-dir wikitext-2 or set "
            f"ATNBENCH_DATA to the folder holding wikitext-2/")


def layouts(config: str) -> tuple[Layout, ...]:
    text_files = Layout("text", {split: [f"{folder}wiki.{part}.{ext}"
                                         for folder in ("", "wikitext-2/", "wikitext-2-raw/")
                                         for ext in ("tokens", "raw")]
                                 for split, part in FILES.items()},
                        description="wiki.train.tokens + wiki.valid.tokens + wiki.test.tokens (or .raw)")
    return parquet_layout(SPLITS, subfolders=(config,)), text_files


def word_tokens(line: str) -> list[str]:
    return line.split()


def load_wikitext2(options: dict) -> tuple[dict[str, torch.Tensor], list[str]]:
    """``({"train": ids, "validation": ids, "test": ids}, vocabulary)`` of word ids."""
    config = options.get("hf_config", DEFAULT_CONFIG)
    hint = how_to(config)
    source = find_source(NAME, options, subdir="wikitext-2", layouts=layouts(config), required=SPLITS,
                         hub=(REPO, config), how_to=hint)
    check_splits(NAME, source, SPLITS, hint)
    return encode_corpus(NAME, source, word_tokens, f"{config}.vocab.json", settings=("words",))

"""IMDB sentiment classification, the BLN paper's RNN experiment (Ziaee & Cano, Sect. 4.2).

Recipe: a review's tokens (``atnbench/data/imdb.py``) through an embedding
(``options.embedding``, default 128) and a normalized LSTM; the last step's output scores
positive vs negative (cross-entropy; accuracy reported, on the whole test split as the paper
does). Reviews are cut to their last T tokens (the end of a review is kept, as Keras'
``pad_sequences`` does) and right-padded with ``<pad>``; each review's length goes to the model
with the batch, so its recurrence runs over its own tokens only, the classifier reads its own
last step, and no normalization statistic includes a padded step (per-step BN and BLN pool the
reviews still running at each step, sequence-wise BN the unpadded frames, Laurent et al. eqs.
20-21; see ``atnbench/nn/padding.py``).

The paper states Adam, eps = 1e-4 in every normalization, batch sizes 1 and 25, and training
on 20% of the training split (the ``bln-20pct`` preset variant; ``options.train_fraction``);
it does not give the network's sizes, review length, vocabulary or epochs (its Fig. 5 is not
in the text), so the preset's are assumptions, named there.

Splits: the training split is shuffled once in a fixed order (seed 0, the same for every run;
the Hub copy is sorted by label); its last ``val_size`` reviews (default min(2500, N // 10))
are the validation set, of which the first ``val_samples`` are scored; training uses the first
``train_fraction`` of the whole split (default: everything but the validation reviews). The
test split is scored whole, in a fixed shuffled order (batch statistics never see a batch of
one class only).
"""

from __future__ import annotations

import math

import torch

from atnbench.config import ConfigError
from atnbench.data.common import SOURCE_OPTIONS, generator
from atnbench.tasks.registry import TaskSpec



def pad_right(reviews: list[list[int]], T: int, pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, T) int64 each review's last T ids followed by ``pad``, and (N,) their lengths.

    An empty review is one ``pad`` token (length 1: every sequence has a last step to read).
    """
    out = torch.full((len(reviews), T), pad, dtype=torch.long)
    lengths = torch.ones(len(reviews), dtype=torch.long)
    for i, ids in enumerate(reviews):
        ids = ids[-T:]
        if ids:
            out[i, :len(ids)] = torch.tensor(ids, dtype=torch.long)
            lengths[i] = len(ids)
    return out, lengths


def make_source(config, device: torch.device):
    from atnbench.data.imdb import load_imdb
    from atnbench.tasks.real import ExampleSource

    options = config.options
    data, vocab = load_imdb(options)
    train_reviews, train_labels = data["train"]
    n = len(train_labels)
    val_size = int(options.get("val_size", min(2500, n // 10)))
    if not 0 < val_size < n:
        raise ConfigError(f"imdb: val_size must be in 1..{n - 1} for {n} training reviews, got {val_size}")
    fraction = float(options.get("train_fraction", 1.0))
    n_train = n - val_size if fraction >= 1 else int(round(fraction * n))
    if not 0 < n_train <= n - val_size:
        raise ConfigError(f"imdb: train_fraction {fraction} gives {n_train} reviews; "
                          f"at most {n - val_size} are left beside the {val_size} validation reviews")
    shuffle = torch.randperm(n, generator=generator(0, "imdb:split"))
    x, lengths = (t[shuffle] for t in pad_right(train_reviews, config.T))
    y = torch.tensor(train_labels, dtype=torch.long)[shuffle]
    scored = min(val_size, config.val_samples)
    test_reviews, test_labels = data["test"]
    test_order = torch.randperm(len(test_labels), generator=generator(0, "imdb:test-order"))
    test_x, test_lengths = (t[test_order] for t in pad_right(test_reviews, config.T))
    val = slice(n - val_size, n - val_size + scored)
    split = {
        "train": (x[:n_train], y[:n_train]),
        "val": (x[val], y[val]),
        "test": (test_x, torch.tensor(test_labels, dtype=torch.long)[test_order]),
    }
    split_lengths = {"train": lengths[:n_train], "val": lengths[val], "test": test_lengths}
    return ExampleSource("imdb", split, config, device, input_size=int(options.get("embedding", 128)),
                                output_size=2, vocab_size=len(vocab), lengths=split_lengths)


SPEC = TaskSpec(
    name="imdb",
    description="classify IMDB movie reviews as positive or negative (embedding + normalized LSTM, T tokens)",
    measures="cross-entropy of the last step's sentiment prediction (accuracy reported); guessing scores ln 2",
    input_size=128,  # the embedding size (options.embedding)
    output_size=2,
    loss="ce",
    target="last",
    baseline=lambda T: math.log(2),
    min_T=1,
    seq_len=lambda T: T,
    reference="Ziaee & Cano (2023), Sect. 4.2 (protocol of Sect. 4); Maas et al. (2011)",
    make_source=make_source,
    metric="accuracy",
    options=(*SOURCE_OPTIONS, "embedding", "val_size", "train_fraction", "max_vocab"),
)

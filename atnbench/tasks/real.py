"""Data sources of the real-data tasks: a token stream for language models, examples for classifiers.

``LMSource`` (ptb-char, wikitext2): each split's token stream is cut into ``batch_size``
contiguous columns (AWD-LSTM's ``batchify``; the last ``len % batch_size`` tokens are dropped)
and read in segments of ``T`` tokens, the last segment of a pass shorter. Every segment but
the first of a pass continues the previous one (``carry=True``): the trainer hands the
recurrent state, ATN window included, across (truncated BPTT), and evaluation scores a split
as one long sequence per column. Training reads the stream in order, pass after pass, so the
source's state is just a position.

``ExampleSource`` (smnist-noise, imdb, user tasks): a fixed set of examples reshuffled every
epoch by a seeded generator (full batches only); validation and test in a fixed order. Examples
of different lengths (imdb) are right-padded and carry their lengths into every batch.

Both expose ``epoch`` (passes over the training data so far, fractional), which the learning
rate schedule (``atnbench/run/schedule.py``) counts in.
"""

from __future__ import annotations

from typing import Callable, Iterator, Optional

import torch
from torch import Tensor

from atnbench.config import ConfigError
from atnbench.data.common import SOURCE_OPTIONS, generator
from atnbench.tasks.registry import TaskSpec
from atnbench.tasks.source import Batch


def language_model_task(name: str, description: str, measures: str, input_size: int, output_size: int,
                        reference: str, make_source: Callable, metric: str, options: tuple[str, ...] = ()) -> TaskSpec:
    """A language model over a token stream (ptb-char, ptb-word, wikitext2): the next token at
    every step, cross-entropy; the segment length is T. ``input_size`` is the embedding size and
    ``output_size`` the usual vocabulary; the source's own (options.embedding, the counted
    vocabulary) are what the model gets."""
    return TaskSpec(name=name, description=description, measures=measures, input_size=input_size,
                    output_size=output_size, loss="ce", target="all",
                    baseline=lambda T: None,  # a no-memory predictor's loss is the data's unigram entropy
                    min_T=1, seq_len=lambda T: T, reference=reference, make_source=make_source, metric=metric,
                    options=(*SOURCE_OPTIONS, "embedding", "eval_batch_size", *options))


def batchify(ids: Tensor, batch_size: int) -> Tensor:
    """(L, B): ``batch_size`` contiguous columns of the stream, the remainder dropped."""
    rows = ids.numel() // batch_size
    return ids[: rows * batch_size].view(batch_size, rows).t().contiguous()


class LMSource:
    splits = ("val", "test")

    def __init__(self, name: str, ids: dict[str, Tensor], vocab: list[str], config, device: torch.device,
                 input_size: int, model_factory: Optional[Callable] = None):
        self.name, self.vocab, self.T, self.device = name, vocab, config.T, device
        self.input_size = input_size
        self.output_size = self.vocab_size = len(vocab)
        eval_batch = int(config.options.get("eval_batch_size", config.batch_size))
        self.train = batchify(ids["train"], config.batch_size).to(device)
        self.eval_data = {"val": batchify(ids["validation"], eval_batch).to(device),
                          "test": batchify(ids["test"], eval_batch).to(device)}
        for split, data in (("train", self.train), *self.eval_data.items()):
            if data.shape[0] < 2:
                raise ConfigError(f"{name}: the {split} split is too short for batch size "
                                  f"{config.batch_size if split == 'train' else eval_batch}")
        self.pos, self.epochs_done = 0, 0
        if model_factory is not None:
            self.build_model = model_factory  # the trainer builds this model instead of the default

    @property
    def steps_per_epoch(self) -> int:
        return -(-(self.train.shape[0] - 1) // self.T)

    @property
    def epoch(self) -> float:
        return self.epochs_done + self.pos / (self.train.shape[0] - 1)

    @staticmethod
    def _segment(data: Tensor, start: int, T: int) -> tuple[Tensor, Tensor]:
        n = min(T, data.shape[0] - 1 - start)
        return data[start:start + n], data[start + 1:start + 1 + n]

    def train_batch(self) -> Batch:
        x, y = self._segment(self.train, self.pos, self.T)
        carry = self.pos != 0
        self.pos += x.shape[0]
        if self.pos >= self.train.shape[0] - 1:  # a pass is over: the next one starts afresh
            self.pos, self.epochs_done = 0, self.epochs_done + 1
        return Batch(x, y, carry)

    def eval_batches(self, split: str) -> Iterator[Batch]:
        data = self.eval_data[split]
        for start in range(0, data.shape[0] - 1, self.T):
            x, y = self._segment(data, start, self.T)
            yield Batch(x, y, carry=start > 0)

    def state_dict(self) -> dict:
        return {"pos": self.pos, "epochs_done": self.epochs_done}

    def load_state_dict(self, state: dict) -> None:
        self.pos, self.epochs_done = int(state["pos"]), int(state["epochs_done"])


class ExampleSource:
    """Examples ``x`` (N, T, F) float or (N, T) token ids and targets ``y`` per split: (N,) or
    (N, D) per example, or (N, T) / (N, T, D) per step (``step_targets``, served time first)."""

    def __init__(self, name: str, data: dict[str, tuple[Tensor, Tensor]], config, device: torch.device,
                 input_size: int, output_size: int, vocab_size: Optional[int] = None,
                 lengths: Optional[dict[str, Tensor]] = None, splits: tuple[str, ...] = ("val", "test"),
                 step_targets: bool = False):
        self.name, self.config, self.device = name, config, device
        self.splits, self.step_targets = splits, step_targets
        self.input_size, self.output_size, self.vocab_size = input_size, output_size, vocab_size
        self.data = data
        self.lengths = lengths  # per split, (N,) valid steps of each right-padded example
        for split in ("train", *self.splits):
            if len(data[split][1]) == 0:
                raise ConfigError(f"{name}: the {split} split is empty")
        self.batch_size = min(config.batch_size, len(data["train"][1]))
        self.generator = generator(config.seed, f"{name}:train-order")
        self.order: Optional[Tensor] = None
        self.pos, self.epochs_done = 0, 0

    @property
    def steps_per_epoch(self) -> int:
        return len(self.data["train"][1]) // self.batch_size

    @property
    def epoch(self) -> float:
        return self.epochs_done + self.pos / len(self.data["train"][1])

    def _batch(self, split: str, index) -> Batch:
        x, y = self.data[split]
        xb = x[index].transpose(0, 1)  # time first: (T, B, F) or (T, B)
        yb = y[index].transpose(0, 1) if self.step_targets else y[index]
        lengths = None if self.lengths is None else self.lengths[split][index].to(self.device)
        return Batch(xb.to(self.device), yb.to(self.device), lengths=lengths)

    def train_batch(self) -> Batch:
        n = len(self.data["train"][1])
        if self.order is None or self.pos + self.batch_size > n:  # full batches only; reshuffle
            if self.order is not None:
                self.epochs_done += 1
            self.order = torch.randperm(n, generator=self.generator)
            self.pos = 0
        index = self.order[self.pos:self.pos + self.batch_size]
        self.pos += self.batch_size
        return self._batch("train", index)

    def eval_batches(self, split: str) -> Iterator[Batch]:
        n = len(self.data[split][1])
        for start in range(0, n, self.config.batch_size):
            yield self._batch(split, slice(start, min(n, start + self.config.batch_size)))

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state(), "order": self.order, "pos": self.pos,
                "epochs_done": self.epochs_done}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
        self.order, self.pos, self.epochs_done = state["order"], int(state["pos"]), int(state["epochs_done"])

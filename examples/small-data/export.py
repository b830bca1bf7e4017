"""Write three small UCR/UEA data sets that ship inside the `aeon` package as the files this
folder's task files read (run from anywhere; needs `pip install aeon`), each with its own
train/test split:

- GunPoint (Ratanamahatana & Keogh 2005): gun drawn or pointed, from the x position of a hand,
  150 steps, 50 training and 150 test sequences; written as wide CSV tables (one row a sequence,
  the class in column y, one column a step), as a spreadsheet user would have it.
- BasicMotions (UEA): standing, walking, running or badminton, from a wrist watch's
  accelerometer and gyroscope, 6 channels, 100 steps, 40 training and 40 test sequences (.npz).
- Japanese Vowels (Kudo, Toyama & Shimbo 1999): which of nine speakers, 12 LPC cepstrum
  coefficients per frame, 7-29 frames, 270 training and 370 test utterances (.npz of
  variable-length sequences).
"""

import csv
from pathlib import Path

import numpy as np
from aeon.datasets import load_basic_motions, load_gunpoint, load_japanese_vowels

HERE = Path(__file__).resolve().parent


def sequences(arrays) -> np.ndarray:
    """An object array of (T_i, C) float32 arrays: time first, as atnbench reads them."""
    out = np.empty(len(arrays), dtype=object)
    out[:] = [np.ascontiguousarray(np.asarray(x).T, dtype=np.float32) for x in arrays]
    return out


for split in ("train", "test"):
    X, y = load_gunpoint(split=split)  # (N, 1, 150), labels "1"/"2"
    with open(HERE / f"gunpoint-{split}.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["y"] + [f"t{i}" for i in range(X.shape[2])])
        writer.writerows([label] + [f"{v:.6g}" for v in row] for row, label in zip(X[:, 0], y))
    X, y = load_basic_motions(split=split)  # (N, 6, 100), labels as words
    np.savez(HERE / f"basic-motions-{split}.npz", x=np.stack(list(sequences(X))), y=np.asarray(y))
    X, y = load_japanese_vowels(split=split)  # a list of (12, T_i) arrays, labels "1".."9"
    np.savez(HERE / f"japanese-vowels-{split}.npz", x=sequences(X), y=np.asarray(y).astype(int))
    print(f"wrote the {split} files of gunpoint, basic-motions and japanese-vowels in {HERE}")

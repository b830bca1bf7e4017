"""Write the Japanese Vowels dataset that ships inside the `aeon` package as the .npz files
`japanese-vowels.yaml` reads (run from anywhere; needs `pip install aeon`).

Japanese Vowels (Kudo, Toyama & Shimbo 1999; UCI Machine Learning Repository; the UEA
multivariate archive): nine male speakers uttering the vowels /ae/, each utterance 12 LPC
cepstrum coefficients per frame, 7 to 29 frames long. The task is to tell the speaker (9
classes): 270 training utterances, 370 test utterances, variable lengths, multivariate.
"""

from pathlib import Path

import numpy as np
from aeon.datasets import load_classification

HERE = Path(__file__).resolve().parent

for split in ("train", "test"):
    X, y = load_classification("JapaneseVowels", split=split)  # a list of (12, T_i) arrays, labels "1".."9"
    sequences = np.empty(len(X), dtype=object)
    sequences[:] = [np.ascontiguousarray(x.T, dtype=np.float32) for x in X]  # time first: (T_i, 12)
    np.savez(HERE / f"{split}.npz", x=sequences, y=np.asarray(y).astype(int))
    lengths = [len(s) for s in sequences]
    print(f"wrote {HERE / f'{split}.npz'}: {len(sequences)} sequences, 12 channels, "
          f"{min(lengths)}-{max(lengths)} steps, {len(set(y))} classes")

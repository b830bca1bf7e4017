"""Noisy pixel-by-pixel MNIST, the ATN paper's Sect. 5.1 ablation (after Le et al. 2015).

Recipe: each MNIST digit's 784 pixels (scaled to [0, 1]) plus Gaussian noise of variance 0.1
(``options.noise_var``), fed one pixel per step in raster order (unpermuted, T = 784); the
class is read from the last step's output (cross-entropy; accuracy reported). The paper runs
eps = 1 in the normalizations and the LSTM bias outside them (Ba et al.'s placement) so that
LN's loss of the input's statistics shows: the preset sets both.

Choices the paper leaves open (named options):
- the noise is drawn once per image (seeded by the run's seed), a fixed noisy dataset, not
  redrawn every epoch;
- validation: the last ``val_size`` training images (default min(5000, N // 10): the usual
  55,000 / 5,000 split), of which the first ``val_samples`` are scored; the test split is
  always scored whole;
- ``permute: true`` (``--permute``): the pixels in one fixed order drawn from
  ``permute_seed`` (default 0, the same for every run and seed);
- a ``T`` below 784 that divides it feeds 784 / T pixels per step (T = 28: row by row), for
  quick runs; the paper's task is T = 784.
"""

from __future__ import annotations

import math

import torch

from atnbench.config import ConfigError, SettingError
from atnbench.data.common import SOURCE_OPTIONS, generator
from atnbench.tasks.registry import TaskSpec

PIXELS = 784



def permutation(seed: int) -> torch.Tensor:
    return torch.randperm(PIXELS, generator=generator(seed, "smnist-permutation"))


def make_source(config, device: torch.device):
    from atnbench.data.mnist import load_mnist
    from atnbench.tasks.real import ExampleSource

    T, options = config.T, config.options
    if PIXELS % T:
        raise SettingError(f"smnist-noise: T={T} must divide 784 (784 = one pixel per step; 28 = row by row)")
    noise_var = float(options.get("noise_var", 0.1))
    if noise_var < 0:
        raise SettingError(f"smnist-noise: noise_var must be >= 0, got {noise_var}")
    raw = load_mnist(options)
    train_x, train_y = raw["train"]
    n = len(train_y)
    val_size = int(options.get("val_size", min(5000, n // 10)))
    if not 0 < val_size < n:
        raise ConfigError(f"smnist-noise: val_size must be in 1..{n - 1} for {n} training images, got {val_size}")
    order = permutation(int(options.get("permute_seed", 0))) if options.get("permute") else None

    def prepare(split: str, x: torch.Tensor) -> torch.Tensor:
        if noise_var > 0:
            noise = torch.randn(x.shape, generator=generator(config.seed, f"smnist-noise:{split}"))
            x = noise.mul_(math.sqrt(noise_var)).add_(x)  # in place: MNIST is 188 MB a copy
        if order is not None:
            x = x[:, order]
        return x.reshape(len(x), T, PIXELS // T).contiguous()

    train_all = prepare("train", train_x)
    test_x, test_y = raw["test"]
    scored = min(val_size, config.val_samples)
    data = {
        "train": (train_all[: n - val_size], train_y[: n - val_size]),
        "val": (train_all[n - val_size: n - val_size + scored], train_y[n - val_size: n - val_size + scored]),
        "test": (prepare("test", test_x), test_y),
    }
    return ExampleSource("smnist-noise", data, config, device, input_size=PIXELS // T, output_size=10)


SPEC = TaskSpec(
    name="smnist-noise",
    description="classify MNIST digits read one pixel per step, with Gaussian noise of variance 0.1",
    measures="cross-entropy of the last step's class prediction (accuracy reported); guessing scores ln 10",
    input_size=1,
    output_size=10,
    loss="ce",
    target="last",
    baseline=lambda T: math.log(10),
    min_T=1,
    seq_len=lambda T: T,
    reference="Pospisil, Zadorozhnyy & Ye (2024), Sect. 5.1; Le, Jaitly & Hinton (2015)",
    make_source=make_source,
    metric="accuracy",
    options=(*SOURCE_OPTIONS, "dataset", "noise_var", "val_size", "permute", "permute_seed"),
)

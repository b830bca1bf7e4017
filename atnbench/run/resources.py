"""Will it fit? A rough estimate of the memory a run needs, checked against the machine's.

Sizes are not capped at fixed numbers (a big machine may train a big model); instead a run
whose estimate exceeds the memory of the device it would run on stops at once with one line,
"needs ~16 GB, this machine has 8 GB", before anything is allocated. The estimates are
deliberately rough (a factor of 2 either way) and err on the generous side: they exist to
refuse the impossible (``--T 1000000000``, ``--hidden 100000``), not to plan memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from atnbench.errors import UserError

FLOAT = 4  # bytes per float32
# floats kept per (time step x example x layer) per hidden unit during backprop: gates before and
# after their nonlinearity (2 x 4H), c, tanh(c), h, and the normalizations' inputs, outputs and
# statistics (up to ~3 x 9H for a normalized cell). Measured peaks of the paper's tasks sit below.
ACTIVATION_FLOATS_PER_UNIT = 40
PARAM_COPIES = 4  # weights, gradients and up to two optimizer moments


@dataclass(frozen=True)
class Estimate:
    bytes: int
    what: str  # the sizes that drive it, for the message


def run_estimate(T: int, batch: int, hidden: int, layers: int, input_size: int, output_size: int,
                 val_samples: int = 0, gates: int = 4) -> Estimate:
    """Memory of training one recurrent model on sequences of length T (float32)."""
    steps = T * batch
    activations = steps * layers * hidden * ACTIVATION_FLOATS_PER_UNIT
    io = steps * (input_size + 3 * output_size)  # inputs; logits, their gradient, the softmax
    params = layers * gates * hidden * (max(input_size, hidden) + hidden + 1) + hidden * output_size
    validation = val_samples * T * (input_size + output_size)  # the fixed validation set, held in memory
    total = FLOAT * (activations + io + params * PARAM_COPIES + validation)
    return Estimate(int(total), f"T={T}, batch {batch}, hidden {hidden}, {layers} layer(s)"
                                + (f", {val_samples} validation samples" if val_samples else ""))


def check_buildable(config, what: str = "this run") -> None:
    """ConfigError unless the model is one that builds in seconds (``limits.MAX_LAYERS``):
    checked with the memory estimate, before anything is built."""
    from atnbench.config import ConfigError
    from atnbench.limits import MAX_LAYERS

    if config.layers > MAX_LAYERS:
        raise ConfigError(f"{what} asks for {config.layers:,} stacked layers (--layers); at most {MAX_LAYERS:,}: "
                          f"each is built and stepped one after another, and so many would take minutes to "
                          f"build before the first step")


def machine_memory(device: Optional[str] = None) -> Optional[int]:
    """Total memory of the device a run uses (GPU memory for CUDA), in bytes; None if unknown."""
    if device is not None and str(device).startswith("cuda"):
        try:
            import torch

            return int(torch.cuda.get_device_properties(torch.device(device)).total_memory)
        except Exception:  # noqa: BLE001 - no CUDA here: the device check reports that
            return None
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # noqa: BLE001 - no psutil: the POSIX way
        try:
            return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            return None


def size_text(nbytes: float) -> str:
    if nbytes >= 1e15:
        return "over 1000 TB"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    return f"{nbytes / 1e3:.0f} kB"


def check_fits(estimate: Estimate, device: Optional[str] = None, what: str = "this run",
               available: Optional[int] = None) -> None:
    """ValueError (one line) if the estimate exceeds the device's memory."""
    available = machine_memory(device) if available is None else available
    if available is None or estimate.bytes <= available:
        return
    where = "this GPU" if device is not None and str(device).startswith("cuda") else "this machine"
    raise UserError(f"{what} needs ~{size_text(estimate.bytes)} of memory ({estimate.what}), {where} has "
                     f"{size_text(available)}; make it smaller")

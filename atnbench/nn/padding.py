"""Variable-length batches: lengths, step masks, per-sequence reversal, PackedSequence in and out.

A padded batch is time first, ``(T, B, ...)``, each sequence right-aligned at step 0 and padded
after its own ``lengths[b]`` steps (the convention of ``pack_padded_sequence``). With right
padding, every valid step of a sequence lies before its padding: a per-sample normalization
(LN, ATN's window of the last k steps of that sequence) never sees a padded step, and only the
batch normalizations need the mask (their statistics at step t pool the sequences still valid
at t; Laurent et al., Sect. 4.1: "the number of unpadded frames decreases along the time axis").

The backward direction of a bidirectional layer reads each sequence from its own last step:
``reverse_padded`` reverses steps 0..len-1 of each column and leaves its padding in place, as
``nn.LSTM`` does with a PackedSequence.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch
from torch import Tensor
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

Lengths = Union[Tensor, Sequence[int]]


def as_lengths(lengths: Optional[Lengths], steps: int, batch: int, device: torch.device) -> Optional[Tensor]:
    """``lengths`` as a (B,) int64 tensor on ``device`` (checked: 1 <= length <= T), or None."""
    if lengths is None:
        return None
    try:
        lengths = torch.as_tensor(lengths)
    except (TypeError, ValueError, RuntimeError):  # "6,4,2": torch's words named no argument
        raise ValueError(f"lengths must be one whole number per sequence (a list or a tensor), got {lengths!r}") from None
    if lengths.dim() != 1 or lengths.shape[0] != batch:
        raise ValueError(f"lengths must have one entry per sequence ({batch}), got shape {tuple(lengths.shape)}")
    if lengths.is_floating_point() or lengths.is_complex() or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be integers, got {lengths.dtype}")
    if batch and (int(lengths.min()) < 1 or int(lengths.max()) > steps):
        raise ValueError(f"lengths must be in 1..{steps} (the padded length), got {lengths.tolist()}")
    return lengths.to(device=device, dtype=torch.long)


def step_mask(lengths: Tensor, steps: int) -> Tensor:
    """(T, B) bool: True where step t of sequence b is valid (t < lengths[b])."""
    return torch.arange(steps, device=lengths.device).unsqueeze(1) < lengths.unsqueeze(0)


def reverse_padded(x: Tensor, lengths: Optional[Tensor]) -> Tensor:
    """Each sequence of a time-first batch reversed within its own length; padding stays put."""
    if lengths is None:
        return x.flip(0)
    steps = x.shape[0]
    t = torch.arange(steps, device=x.device).unsqueeze(1)
    lengths = lengths.to(x.device).unsqueeze(0)
    index = torch.where(t < lengths, lengths - 1 - t, t)  # (T, B); an involution
    index = index.view(steps, -1, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(0, index)


def unpack(packed: PackedSequence) -> tuple[Tensor, Tensor]:
    """(T, B, F) padded time-first tensor in the original batch order, and its (B,) lengths."""
    x, lengths = pad_packed_sequence(packed)
    return x, lengths


def repack(y: Tensor, lengths: Tensor, like: PackedSequence) -> PackedSequence:
    """Pack a padded time-first output with the batch order and sizes of the input ``like``."""
    order = like.sorted_indices
    if order is not None:
        y, lengths = y.index_select(1, order.to(y.device)), lengths.index_select(0, order.to(lengths.device))
    data = pack_padded_sequence(y, lengths.cpu(), enforce_sorted=True).data
    return PackedSequence(data, like.batch_sizes, like.sorted_indices, like.unsorted_indices)


def last_steps(y: Tensor, lengths: Optional[Tensor]) -> Tensor:
    """(B, ...) each sequence's entry at its own last valid step (the last step without lengths)."""
    if lengths is None:
        return y[-1]
    index = (lengths.to(y.device) - 1).view(1, -1, *([1] * (y.dim() - 2))).expand(1, *y.shape[1:])
    return y.gather(0, index)[0]

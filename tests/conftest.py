"""Shared test set-up."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: intra-op threads only add OpenMP hand-offs (and stall for milliseconds when
    the other core is busy), and results must not depend on the machine's core count.
    Restored after each module."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)

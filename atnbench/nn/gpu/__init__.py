"""The GPU fast path of NormLSTM and NormGRU: every normalization in Triton kernels.

``backend="triton"`` (chosen by ``"auto"`` on CUDA): one layer's recurrence runs as
``fastpath_rnn`` runs it on the CPU, with Triton kernels in place of the C++ ones (``ops.py``):
the input term's norm for all steps at once, then per step one GEMM (cuBLAS) and one fused kernel
(normalization statistics with ATN's window totals, gates, state update), a hand-written backward
in the same shape, and on CUDA the whole recurrence replayed as one CUDA graph (``graph.py``).

Triton is an optional dependency (``pip install 'atnbench[gpu]'``; CUDA builds of torch bring
it). Without a GPU the kernels run in Triton's interpreter when ``TRITON_INTERPRET=1`` is set
before the first import of this package's kernels: slow, for tests at tiny sizes.
"""

from __future__ import annotations

import importlib.util
import os

import torch

INSTALL_HINT = "pip install 'atnbench[gpu]' (Triton)"


def installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def interpreting() -> bool:
    """Triton's interpreter is on: the kernels run on CPU tensors (slowly)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def runs_on(device: torch.device) -> bool:
    """Whether the Triton kernels can run on tensors of ``device`` here."""
    if not installed():
        return False
    if device.type == "cuda":
        return not interpreting() and torch.cuda.is_available()
    return device.type == "cpu" and interpreting()


def load_ops():
    """The operations (``ops.py``), imported on first use: importing them compiles nothing but
    needs Triton."""
    from atnbench.nn.gpu import ops as module

    return module

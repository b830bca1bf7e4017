"""A whole recurrence as one CUDA graph: a step costs no Python and no launch latency.

``replayed(op)`` wraps an operation of ``ops.py`` whose launches depend only on its arguments'
shapes, dtypes and scalar values (the per-step loop of ``norm_rnn_forward`` / ``_backward``). On
CUDA, the first call with a new such signature runs the op once (compiling its kernels), then
captures it into a ``torch.cuda.CUDAGraph`` with static copies of its tensor arguments; every call
with that signature copies its tensors into them, replays the graph and returns copies of the
outputs (the next replay overwrites the graph's own). Elsewhere (the CPU interpreter), while a
capture is already under way, with ``ATNBENCH_CUDA_GRAPHS=0``, or if a capture fails (one
warning), the op runs as it is, launch by launch: the same kernels, the same numbers.

The captured graphs are a cache, bounded (``MAX_GRAPHS``, least recently used dropped first):
each holds its static buffers on the GPU.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections import OrderedDict
from typing import Any, Callable

import torch
from torch import Tensor

# A bench interleaves its models round-robin, each with a training forward, a backward and an
# inference forward: at 16, 14 models missed the cache on every call and timed the capture
# (H200, 2026-11-26). 64 holds the whole zoo of a workload.
MAX_GRAPHS = 64


def _leaves(value: Any) -> list:
    """The tensors and scalars of an argument list, nested lists flattened."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _signature(args: tuple) -> tuple:
    return tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, Tensor) else a for a in _leaves(args))


def _with_tensors(value: Any, tensors) -> Any:
    """``value`` with each of its tensors replaced by the next of ``tensors``."""
    if isinstance(value, (list, tuple)):
        return type(value)(_with_tensors(item, tensors) for item in value)
    return next(tensors) if isinstance(value, Tensor) else value


def enabled(args: tuple) -> bool:
    tensors = [a for a in _leaves(args) if isinstance(a, Tensor)]
    return (os.environ.get("ATNBENCH_CUDA_GRAPHS", "1") != "0" and bool(tensors) and tensors[0].is_cuda
            and not torch.cuda.is_current_stream_capturing())


class GraphCache:
    def __init__(self, size: int = MAX_GRAPHS):
        self.size = size
        self.graphs: OrderedDict = OrderedDict()
        self.failed: set = set()

    def run(self, op: Callable, args: tuple) -> list:
        key = (op.__name__, _signature(args))
        if key in self.failed:
            return op(*args)
        entry = self.graphs.get(key)
        if entry is None:
            try:
                entry = self._capture(op, args)
            except RuntimeError as e:  # e.g. an op that cannot be captured by this torch/driver
                self.failed.add(key)
                warnings.warn(f"CUDA graph capture of {op.__name__} failed ({e}); running it step by step",
                              RuntimeWarning, stacklevel=3)
                return op(*args)
            self.graphs[key] = entry
            while len(self.graphs) > self.size:
                self.graphs.popitem(last=False)
        self.graphs.move_to_end(key)
        graph, static_in, static_out = entry
        with torch.no_grad():
            for mine, given in zip(static_in, (a for a in _leaves(args) if isinstance(a, Tensor))):
                mine.copy_(given)
        graph.replay()
        return [o.clone() if isinstance(o, Tensor) else o for o in static_out]

    @staticmethod
    def _capture(op: Callable, args: tuple):
        static_in = [a.detach().clone() for a in _leaves(args) if isinstance(a, Tensor)]
        static_args = _with_tensors(args, iter(static_in))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: compiles the kernels, sets up cuBLAS, outside the capture
            op(*static_args)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = op(*static_args)
        return graph, static_in, static_out


CACHE = GraphCache()


def replayed(op: Callable) -> Callable:
    @functools.wraps(op)
    def run(*args):
        return CACHE.run(op, args) if enabled(args) else op(*args)

    return run

"""Timing and memory of training and inference steps, interleaved across models.

One training step = forward + loss + backward + RMSprop step; one inference step = forward
in eval mode under ``torch.no_grad()``. After ``warmup`` rounds, ``reps`` rounds are timed
round-robin (round r times every model once, in order) so that drift of a shared machine
hits every model alike. Reported: median and spread (quartiles, min, max) in ms.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch
from torch import Tensor

from atnbench.bench.workloads import fused_of, BenchModel, Workload, build_model, loss_fn

Progress = Callable[[str], None]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def saved_activation_bytes(model: BenchModel, x: Tensor, target: Tensor, loss) -> int:
    """Bytes that autograd keeps for backward after one training forward + loss.

    Every tensor saved for backward goes through a ``saved_tensors_hooks`` pack hook; the
    distinct storages among them (views deduplicated by storage, parameters excluded) are
    summed. They are all alive at the end of the forward pass, so this is the activation
    memory a training step holds at its peak, just before backward starts freeing it. It
    omits transient temporaries and the gradients themselves; it works on any device.
    """
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t: Tensor) -> Tensor:
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return t
        ptr = storage.data_ptr()
        if ptr and ptr not in params:
            seen[ptr] = max(seen.get(ptr, 0), storage.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        value = loss(model(x), target)
    del value
    return sum(seen.values())


def peak_memory_mb(model: BenchModel, x: Tensor, target: Tensor, loss) -> tuple[float, str]:
    """Peak extra memory of a training step in MB, and how it was measured.

    CUDA: ``torch.cuda.max_memory_allocated`` during forward + backward, minus what was
    allocated before. Elsewhere: ``saved_activation_bytes`` (see there).
    """
    device = target.device  # x may be a PackedSequence (the packed workload)
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        loss(model(x), target).backward()
        sync(device)
        peak = torch.cuda.max_memory_allocated(device) - base
        model.zero_grad(set_to_none=True)
        return peak / 2**20, "cuda_max_allocated"
    return saved_activation_bytes(model, x, target, loss) / 2**20, "saved_activations"


@dataclass
class Candidate:
    """One model under test and its timings."""

    model_name: str
    k: Optional[int]
    model: BenchModel
    optimizer: torch.optim.Optimizer
    train: list[float]
    infer: list[float]

    @property
    def label(self) -> str:
        return self.model_name if self.k is None else f"{self.model_name} k={self.k}"


def train_step(c: Candidate, x: Tensor, target: Tensor, loss) -> None:
    c.optimizer.zero_grad(set_to_none=True)
    loss(c.model(x), target).backward()
    c.optimizer.step()


def infer_step(c: Candidate, x: Tensor) -> None:
    c.model.eval()
    with torch.no_grad():
        c.model(x)
    c.model.train()


def path_of(model: BenchModel) -> str:
    """Which implementation ran: "fused" (nn.LSTM, cuDNN on a GPU), "cpp"/"function"/"triton" (the fast
    path: C++ on a CPU, Triton on a GPU), "loop", or "other"."""
    rnn = model.rnn
    if getattr(rnn, "fused", False):
        return "fused"
    paths = sorted(set(getattr(rnn, "last_paths", ()) or ()))
    return "+".join(paths) if paths else "other"


def _may_use_cpp(model: BenchModel) -> bool:
    rnn = model.rnn
    return getattr(rnn, "backend", None) in ("auto", "cpp") and getattr(rnn, "norm", None) in getattr(rnn, "fast_norms", ())


def _timed(fn, device: torch.device) -> float:
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return (time.perf_counter() - start) * 1e3


def summarize(values: list[float], prefix: str) -> dict[str, float]:
    a = np.asarray(values, dtype=float)
    p25, p50, p75 = np.percentile(a, [25, 50, 75])
    return {f"{prefix}_ms": float(p50), f"{prefix}_ms_p25": float(p25), f"{prefix}_ms_p75": float(p75),
            f"{prefix}_ms_min": float(a.min()), f"{prefix}_ms_max": float(a.max())}


def time_workload(workload: Workload, entries: list[tuple[str, Optional[int]]], device: torch.device,
                  reps: int, warmup: int, progress: Optional[Progress] = None, lr: float = 1e-3) -> list[dict]:
    """Time every (model, k) of ``entries`` on ``workload``; one record per entry.

    Ratios to ``lstm-fused`` and ``ln`` (``ratio_lstm_fused``, ``ratio_ln``) are filled in
    when those baselines are among the entries.
    """
    x, target = workload.make_batch(device)
    loss = loss_fn(workload)
    candidates = []
    for name, k in entries:
        model = build_model(name, workload, k, device)
        candidates.append(Candidate(name, k, model, torch.optim.RMSprop(model.parameters(), lr=lr), [], []))
    if device.type == "cpu" and any(_may_use_cpp(c.model) for c in candidates):
        # loaded (on a fresh install, compiled: tens of seconds) before any clock starts, not inside
        # the first timed step, which `--warmup 0` would have recorded as a 500x slower model
        from atnbench.nn import fastpath

        fastpath.build_cpp()
    for r in range(warmup + reps):
        for c in candidates:
            if progress:
                phase = f"warm-up {r + 1}/{warmup}" if r < warmup else f"rep {r - warmup + 1}/{reps}"
                progress(f"{workload.name}: {c.label} {phase}")
            t_train = _timed(lambda: train_step(c, x, target, loss), device)
            t_infer = _timed(lambda: infer_step(c, x), device)
            if r >= warmup:
                c.train.append(t_train)
                c.infer.append(t_infer)
    records = []
    for c in candidates:
        if progress:
            progress(f"{workload.name}: {c.label} memory")
        mem, method = peak_memory_mb(c.model, x, target, loss)
        record = {"workload": workload.name, "model": c.model_name, "k": c.k, "T": workload.T,
                  "batch": workload.batch, "input_size": workload.input_size, "hidden": workload.hidden,
                  **summarize(c.train, "train"), **summarize(c.infer, "infer"),
                  "peak_mem_mb": mem, "mem_method": method, "path": path_of(c.model),
                  "params": sum(p.numel() for p in c.model.parameters()), "reps": reps, "warmup": warmup}
        record["steps_per_s"] = 1e3 / record["train_ms"]
        records.append(record)
    for base, key in (("lstm-fused", "ratio_lstm_fused"), ("ln", "ratio_ln")):
        ref = next((r["train_ms"] for r in records if r["model"] == base), None)
        for r in records:
            r[key] = r["train_ms"] / ref if ref else None
    fused = {r["model"]: r["train_ms"] for r in records if r["model"] in ("lstm-fused", "gru-fused")}
    for r in records:  # against the same cell's fused kernel (nn.LSTM or nn.GRU)
        ref = fused.get(fused_of(r["model"]))
        r["ratio_fused"] = r["train_ms"] / ref if ref else None
    return records

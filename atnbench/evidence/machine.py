"""The machine a run or a benchmark ran on: processor, the instruction set torch's kernels use,
and the cores this process may use. Recorded with every run (``store.environment``) because the
same code and seed give the same numbers only on the same kind of processor: the kernels pick
AVX-512 or AVX2 code paths, which round differently."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Optional, Sequence


def cpu_model() -> str:
    """The processor's marketing name from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_capability() -> Optional[str]:
    """The vector instruction set torch dispatches to on this CPU (e.g. AVX512, AVX2); None when
    torch cannot say."""
    try:
        import torch

        return str(torch.backends.cpu.get_cpu_capability())
    except Exception:  # noqa: BLE001 - an old or broken torch must not stop result recording
        return None


def processor_class(env: Optional[dict], config: Optional[dict] = None) -> str:
    """The class of processor a run's recorded environment names (the instruction set its kernels
    used), and " loop" where the run went through the plain loop instead of the C++ fast path
    (``fast_path_used`` false), which rounds differently: runs are bit-for-bit comparable only within one class.
    A run resumed in another class than it started in rounds like neither: "mixed (A / B)", a class of its
    own, the same whichever came first."""
    classes = (env or {}).get("classes") or []
    if len(classes) > 1:
        return f"mixed ({' / '.join(sorted(classes))})"
    loop = fast_path_used(env, config) is False
    return str((env or {}).get("cpu_capability") or "unknown") + (" loop" if loop else "")


def path_free(config: Optional[dict]) -> bool:
    """Whether a run computes the same on the C++ fast path and on the plain loop: no norm the fast
    path covers (the plain LSTM)."""
    from atnbench.registry import fast_norms

    return (config or {}).get("norm") not in fast_norms()


def comparable_classes(classes: tuple[Sequence[str], Sequence[str]],
                       free: tuple[bool, bool]) -> tuple[list[str], list[str]]:
    """The processor classes a comparison stratifies its two sides by: where one side's runs are
    all ``path_free``, the other side's loop runs ("AVX512 loop") meet them in their processor's
    class; else, on a machine without a compiler, no class would hold both sides of "LN beats the
    LSTM" and it would never be tested."""
    def plain(values):
        return [c.removesuffix(" loop") for c in values]

    a, b = list(classes[0]), list(classes[1])
    return (plain(a) if free[1] else a), (plain(b) if free[0] else b)


def with_segment_classes(before: Optional[dict], now: dict, config: dict) -> dict:
    """A resumed run's environment: ``now`` (the resuming process's), plus, where the run was
    trained before in another processor class (another instruction set, or the C++ fast path
    then and the loop now), every class its segments ran in (``classes``), which makes it "mixed"."""
    if not before or not (before.get("cpu_capability") or before.get("classes")):
        return now  # nothing recorded of the first segment's machine
    classes = list(before.get("classes") or [processor_class(before, config)])
    current = processor_class(now, config)
    if current not in classes:
        classes.append(current)
    return {**now, "classes": classes} if len(classes) > 1 else now


def fast_path_used(env: Optional[dict], config: Optional[dict]) -> Optional[bool]:
    """For a run of a norm the C++ fast path covers, whether it ran on it (true) or on the plain loop
    (false), as its environment recorded (``cpp_fast_path``); None otherwise. The environment says
    what the run's process had, which a run without such a norm (the plain LSTM, after an LN run
    in the same sweep process) never used."""
    return None if path_free(config) else (env or {}).get("cpp_fast_path")


def available_cores() -> int:
    """Cores this process may run on (its affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1

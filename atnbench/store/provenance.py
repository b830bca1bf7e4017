"""Where a run ran, recorded with it: versions, platform, processor and the atnbench revision
(the git state of the checkout when there is one)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Optional

from atnbench import __version__


def environment(device: Optional[str] = None) -> dict:
    """Where a run ran: torch/python versions, platform, processor and the instruction set torch
    uses on it, device (the caller fills it in) and the atnbench revision. Never raises: a missing
    piece becomes None."""
    from atnbench.evidence.machine import cpu_capability, cpu_model

    return {
        "torch": _torch_version(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": cpu_model(),
        "cpu_capability": cpu_capability(),
        "device": device,
        "cpp_fast_path": _cpp_fast_path(),
        "atnbench_version": __version__,
        "atnbench_revision": _revision(),
    }


def _cpp_fast_path() -> Optional[bool]:
    """Whether this process's C++ fast path is loaded (True) or could not be (False: no compiler,
    or ATNBENCH_NO_BUILD, so NormLSTM ran its plain loop, whose float rounding differs and moves a
    run's numbers under the same id); None where this process never needed it (a run without a
    norm it covers, the same on both). Read, never built here: callers load it before a run starts
    (run/warmup.py)."""
    module = sys.modules.get("atnbench.nn.fastpath")
    state = getattr(module, "_cpp_state", {}) if module is not None else {}
    return state.get("ok")


def _torch_version() -> Optional[str]:
    try:
        import torch

        return str(torch.__version__)
    except Exception:  # noqa: BLE001 - a broken torch install must not stop result recording
        return None


def _revision() -> str:
    """Short git commit of the atnbench source checkout, else the package version."""
    root = Path(__file__).resolve().parents[2]
    try:
        if (root / ".git").exists():
            env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
            done = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=root, env=env, capture_output=True, text=True, timeout=5
            )
            if done.returncode == 0 and done.stdout.strip():
                return done.stdout.strip()
    except Exception:  # noqa: BLE001 - no git, a timeout, an odd checkout: fall back
        pass
    return __version__

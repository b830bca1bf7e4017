"""Where a run ran, recorded with it: versions, platform, processor and the atnbench revision
(the git state of the checkout when there is one)."""

from __future__ import annotations

import os
import platform
import subprocess
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
        "atnbench_version": __version__,
        "atnbench_revision": _revision(),
    }


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

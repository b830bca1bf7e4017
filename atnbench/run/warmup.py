"""One-time work to do before a run's clock starts: loading (on first use, building) the C++ fast path.

``train`` times a run from its first step: the summary's ``wall_s`` and ``steps_per_s`` and the
curve's ``wall_s``, from which sweeps price their estimates and exports report speed. The C++
extension otherwise loads inside the first forward pass, so the first run on a fresh install
recorded its build (tens of seconds) as training time: 49 s and 20 steps/s where the same run
took 19 s at 52 steps/s with the build done. Every caller of ``train`` (``atnbench run``, a
sweep's ``execute``) calls ``load_fast_path`` first.

Why not inside ``train``: ``train.py`` is part of the code fingerprint (``atnbench.evidence.identity``);
loading earlier changes no number, so it should change no run id either.
"""

from __future__ import annotations


def load_fast_path(config) -> None:
    """Load the C++ extension now if a run of ``config`` may use it (the CPU and a norm its kernels
    cover: ``schemes.fast_norms()``). A failed build is remembered and
    reported by the model at its first forward pass, as before; ``ATNBENCH_NO_BUILD=1`` skips it."""
    from atnbench.registry import fast_norms
    from atnbench.zoo import CELLS

    if config.device != "cpu" or config.cell not in CELLS or config.norm not in fast_norms():
        return
    from atnbench.nn import fastpath

    fastpath.build_cpp()

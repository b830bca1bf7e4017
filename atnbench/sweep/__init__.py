"""Sweeps: many runs from one file, run locally (serially or in processes) or on Ray, resumable.

    spec = load_sweep("k-ablation")            # sweeps/k-ablation.yaml, checked
    runs = expand(spec, budget=0.01)           # PlannedRun(config, label), fixed order and ids
    result = run_sweep(spec, runs, "results.db", workers=4)

See ``spec`` for the file format, ``expand`` for canonical run ids, ``runner`` for skipping,
resuming and stopping, ``local`` and ``ray_backend`` for who writes the store.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from atnbench.errors import UserError
from atnbench.evidence.machine import available_cores
from atnbench.sweep.estimate import estimate, estimate_seconds, measured_rates
from atnbench.sweep.expand import PlannedRun, expand
from atnbench.sweep.runner import StopRequest, SweepOutcome, plan
from atnbench.sweep.spec import SweepSpec, list_sweeps, load_sweep, parse_seeds

BACKENDS = ("local", "ray")

__all__ = ["BACKENDS", "PlannedRun", "SweepOutcome", "SweepSpec", "estimate", "estimate_seconds", "expand", "list_sweeps",
           "load_sweep", "measured_rates", "parse_seeds", "run_sweep"]


def run_sweep(spec: SweepSpec, runs: list[PlannedRun], store_path: Union[str, Path], backend: str = "local",
              workers: Optional[int] = None, threads: int = 1, device: str = "cpu", address: Optional[str] = None,
              quiet: bool = False, live: Optional[bool] = None, keep_stale: bool = False) -> SweepOutcome:
    """Run what the store does not hold yet; returns the counts, outcomes and exit code."""
    from atnbench.store import ResultsStore
    from atnbench.sweep import local
    from atnbench.sweep.view import NoView, SweepView

    if backend not in BACKENDS:
        raise UserError(f"unknown backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    store_path = Path(store_path).expanduser().absolute()
    if backend == "ray":
        from atnbench.sweep import ray_backend

        ray_backend.import_ray()  # the install hint before the store is touched
        ray_backend.check_address(address)  # and an address where no cluster listens
    created = not store_path.exists()
    with ResultsStore(store_path) as store:
        jobs, skipped, stale = plan(runs, store, spec.name, keep_stale)
    result = SweepOutcome(total=len(runs), skipped=skipped, jobs=jobs, stale=stale)
    if not jobs:
        return result
    workers = workers or max(1, available_cores() // threads)
    serial = backend == "local" and min(workers, len(jobs)) <= 1
    try:
        owned = ray_backend.connect(address) if backend == "ray" else False  # ray.init replaces the SIGTERM
    except UserError:  # handler, so ours go in after it
        if created:  # a store this sweep made and never wrote: not left behind by a refusal
            for path in (store_path, *(store_path.with_name(store_path.name + end) for end in ("-wal", "-shm"))):
                path.unlink(missing_ok=True)
        raise
    labels = {run.run_id: run.label for run in runs}
    view = NoView() if quiet else SweepView(spec.name, len(runs), len(skipped), labels, live=live)
    # held open while the sweep runs: a new file made there after a removal cannot take its inode
    planned_in = os.open(store_path, os.O_RDONLY)
    try:
        with StopRequest(raise_on_second=serial) as stop:
            if backend == "ray":
                result.outcomes = ray_backend.run_ray(jobs, store_path, device, threads, view, stop)
            elif serial:
                result.outcomes = local.run_serial(jobs, store_path, device, threads, view, stop)
            else:
                result.outcomes = local.run_workers(jobs, store_path, device, workers, threads, view, stop)
            unfinished = any(o["status"] in ("interrupted", "not-started") for o in result.outcomes.values())
            result.signal = stop.signum if unfinished else None  # a signal after the last run is moot
    finally:
        replaced = _replaced(store_path, planned_in)
        os.close(planned_in)
        view.close()
        if owned:
            ray_backend.disconnect()
    if replaced:  # removed (rm -rf of its folder) or replaced while it ran
        held = 0
        if store_path.is_file():  # read, never made again here
            with ResultsStore(store_path, create=False) as store:
                held = sum(store.status(run.run_id) in ("done", "diverged") for run in runs)
        raise UserError(f"the store {store_path} was removed or replaced while the sweep ran: what its runs recorded "
                        f"in it before went with it ({held} of the sweep's {len(runs)} runs are finished in the store "
                        f"there now); run the same command again to train the missing ones")
    return result


def _replaced(path: Path, opened: int) -> bool:
    """Whether the file open as ``opened`` is no longer the one at ``path`` (removed, or another
    moved or made there)."""
    held = os.fstat(opened)
    try:
        now = path.stat()
    except FileNotFoundError:
        return True
    return held.st_nlink == 0 or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino)

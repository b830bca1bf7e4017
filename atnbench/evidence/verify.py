"""Re-running a stored run to see whether its numbers come back (``atnbench verify``).

A run id names one set of numbers, but only on the processor class that made them: torch's CPU
kernels take AVX-512 or AVX2 code paths that round differently, and over thousands of steps the
difference grows (measured: published run 32b619f508be, made on an AVX2 machine, gave a minimum
validation loss of 0.1374 on an AVX-512 one against 0.1322 published). ``verify`` re-runs a run
from its stored config into a scratch store, compares every curve point and the summary, and
names both processors, so a reader can tell "the code changed" from "the machine differs".
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from atnbench.errors import UserError
from atnbench.store import ResultsStore, RunRecord
from atnbench.evidence.identity import run_id_of
from atnbench.evidence.machine import fast_path_used, path_free, processor_class

COMPARED = ("min_val_loss", "min_train_loss")


@dataclass(frozen=True)
class Verification:
    run_id: str
    identical: bool  # every curve point and compared summary value equal, bit for bit
    stored: dict[str, Optional[float]]
    fresh: dict[str, Optional[float]]
    stored_machine: str
    this_machine: str
    code_note: Optional[str]  # why the code may differ (a stale run), else None
    first_difference: Optional[str] = None  # where the stored and re-run curves first part, else None

    def relative(self, key: str) -> Optional[float]:
        a, b = self.stored.get(key), self.fresh.get(key)
        if a is None or b is None or a == 0 or not (math.isfinite(a) and math.isfinite(b)):
            return None
        return (b - a) / abs(a)

    def lines(self) -> list[str]:
        head = f"run {self.run_id}: " + ("reproduced bit for bit" if self.identical else "differs")
        out = [head]
        for key in COMPARED:
            rel = self.relative(key)
            if self.stored.get(key) is not None:
                stored, fresh = apart(self.stored[key], self.fresh.get(key))
                out.append(f"  {key}: stored {stored}, re-run {fresh}" + ("" if rel is None else f" ({rel:+.2%})"))
        if self.first_difference:
            out.append(f"  first apart: {self.first_difference}")
        out.append(f"  stored run's processor: {self.stored_machine}")
        out.append(f"  this machine:           {self.this_machine}")
        if self.code_note:
            out.append(f"  note: {self.code_note}")
        return out


def apart(a: Optional[float], b: Optional[float]) -> tuple[str, str]:
    """Two numbers at 6 significant digits, or at as many more as it takes to tell unequal ones
    apart: "differs" beside two equal-looking numbers reads as a bug."""
    def text(value, digits):
        return "-" if value is None else f"{value:.{digits}g}"

    digits = 6
    while a is not None and b is not None and a != b and text(a, digits) == text(b, digits) and digits < 17:
        digits += 1
    return text(a, digits), text(b, digits)


PATHS = {True: "the C++ fast path", False: "the plain loop (no C++ fast path)"}


def machine_text(env: dict, config: Optional[dict] = None) -> str:
    """The processor, and for a run of a norm the C++ fast path covers, the path it ran on."""
    processor, capability = env.get("processor"), env.get("cpu_capability")
    if processor is None and capability is None:
        return "not recorded (runs before this release did not record it)"
    if len(env.get("classes") or []) > 1:
        path = f"resumed in another class: {processor_class(env, config)}"
    elif not path_free(config) and "cpp_fast_path" not in env:  # runs before it was recorded
        path = "path (C++ fast path or plain loop) not recorded"
    else:
        path = PATHS.get(fast_path_used(env, config))
    return f"{processor or 'unknown'} ({capability or 'instruction set unknown'})" + (f", {path}" if path else "")


def class_note(stored: dict, fresh: dict) -> Optional[str]:
    """Why the numbers may differ between processors: another instruction set, or none recorded."""
    a, b = stored.get("cpu_capability"), fresh.get("cpu_capability")
    if a is None and b is not None:
        return (f"the stored run's instruction set was not recorded, this re-run's is {b}: a difference may be "
                f"the processor's (AVX2 and AVX-512 kernels round differently)")
    if a is not None and b is not None and a != b:
        return (f"the stored run was made on {a}, this re-run on {b}: their kernels round differently, so a "
                f"re-run gives nearby numbers, not equal ones; only a machine of its class re-runs it")
    return None


def path_note(stored: dict, fresh: dict, config: Optional[dict] = None) -> Optional[str]:
    """Why the numbers may differ on one processor: one run on the C++ fast path, the other on the loop."""
    if len(stored.get("classes") or []) > 1:
        return (f"the stored run was resumed in another processor class than it started in "
                f"({' and '.join(stored['classes'])}): no single machine re-runs its numbers")
    a, b = fast_path_used(stored, config), fast_path_used(fresh, config)
    if a is None or b is None or a == b:
        return None
    return f"the stored run was trained on {PATHS[a]}, this re-run on {PATHS[b]}: they round differently"


def code_note(record: RunRecord) -> Optional[str]:
    from atnbench.evidence.equivalence import is_current
    from atnbench.evidence.identity import code_fingerprint

    code = (record.env or {}).get("code")
    if code is None or code == code_fingerprint() or is_current(code, record.config):
        return None
    return (f"made by other code (fingerprint {code}, this is {code_fingerprint()}) that no canary vouched for: "
            f"a difference may be the code's")


def verify(record: RunRecord, curve: list, device) -> Verification:
    """Train ``record``'s config again in a scratch store and compare its numbers."""
    from atnbench.config import build_config
    from atnbench.run.restore import check_data_unchanged
    from atnbench.run.train import train

    if record.status not in ("done", "diverged"):
        raise UserError(f"run {record.run_id} is {record.status}; only a finished run can be verified")
    check_data_unchanged(record)  # a re-run on edited data files would report a difference that is the data's
    from atnbench.run.warmup import load_fast_path

    config = build_config(record.config)
    load_fast_path(config)  # as `run` and `sweep` do: the path this machine trains on, and its record
    with tempfile.TemporaryDirectory(prefix="atnbench-verify-") as folder:
        with ResultsStore(Path(folder) / "verify.db") as scratch:
            train(config, scratch, device, keep_model=False)
            fresh_row = scratch.get_run(run_id_of(config))
            fresh_curve = scratch.curve(run_id_of(config))
    same_curve = [_numbers(p) for p in curve] == [_numbers(p) for p in fresh_curve]
    stored = {key: record.summary.get(key) for key in COMPARED}
    fresh = {key: fresh_row.summary.get(key) for key in COMPARED}
    stored_env, fresh_env = record.env or {}, fresh_row.env or {}
    identical = same_curve and stored == fresh and record.status == fresh_row.status
    notes = [note for note in (code_note(record), None if identical else class_note(stored_env, fresh_env),
                               path_note(stored_env, fresh_env, record.config)) if note]
    return Verification(record.run_id, identical,
                        stored, fresh, machine_text(record.env or {}, record.config),
                        machine_text(fresh_row.env or {}, record.config), "; ".join(notes) or None,
                        first_difference(curve, fresh_curve, record.status, fresh_row.status))


def first_difference(stored: list, fresh: list, stored_status: str = "done", fresh_status: str = "done") -> Optional[str]:
    """Where two curves first part: the step and the values that differ there (a summary equal to
    six digits can still come from curves apart since an early step)."""
    for a, b in zip(stored, fresh):
        if _numbers(a) == _numbers(b):
            continue
        if a.step != b.step:
            return f"the stored curve has step {a.step} where the re-run has step {b.step}"
        keys = ["train_loss", "val_loss"] + sorted(set(a.metrics or {}) | set(b.metrics or {}))
        values = [(key, _value(a, key), _value(b, key)) for key in keys]
        parts = [f"{key} {' vs '.join(apart(x, y))}" for key, x, y in values if x != y]
        return f"step {a.step}: " + ", ".join(parts) + " (stored vs re-run)"
    if len(stored) != len(fresh):
        return f"the stored curve has {len(stored)} points, the re-run {len(fresh)}"
    if stored_status != fresh_status:
        return f"the stored run ended {stored_status}, the re-run {fresh_status}"
    return None


def _value(point, key: str):
    """A point's loss or metric; a NaN metric counts as absent, as ``_numbers`` counts it."""
    value = getattr(point, key) if key in ("train_loss", "val_loss") else (point.metrics or {}).get(key)
    return None if isinstance(value, float) and math.isnan(value) else value


def _numbers(point) -> tuple:
    """A curve point without its timing (wall_s differs between machines for the same numbers)."""
    metrics = {k: v for k, v in (point.metrics or {}).items() if not (isinstance(v, float) and math.isnan(v))}
    return point.step, point.train_loss, point.val_loss, sorted(metrics.items())

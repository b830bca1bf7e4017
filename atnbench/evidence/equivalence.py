"""Code fingerprints vouched for as equivalent, so a refactor does not make published runs stale.

A run records the fingerprint of the code that made it (``env.code``, ``atnbench.evidence.identity``);
any edit to a fingerprinted file changes the fingerprint, and a run made by other code is
*stale*. Most edits (a rename, a module moved, a loop rewritten the same way) change no number.
``atnbench canary`` shows that for the code paths the published runs use: for each *canary
class* of those runs it trains a short run under the runs' own revision and under the current
code, and where losses and final weights are bit-identical it records the pair of fingerprints
as equivalent for that class in ``code_equivalence.json`` (this package; not fingerprinted, so
recording changes no run id).

A run then counts as current when its code is the current code, or when a record says its code
equals the current code for its class. A class whose canary differed is not recorded: its runs
stay stale, as before, and sweeps re-run them.

A canary class is what selects a code path, not what sizes it: the task and its preset variant
and data options, the cell, the normalization with its bias placement, init and affine flag,
the optimizer (and whether the gradient is clipped), the layer count, the device type and the
thread count. Sizes and rates (T, k, hidden, batch size, lr, eps, steps) are left out: a canary
runs the class at the sizes of one of its runs. Equality is checked on the processor the canary
ran on (named in the record), as every bit-for-bit claim of atnbench is.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Optional

RECORDS_FILE = Path(__file__).resolve().parent / "code_equivalence.json"
# the settings that pick a code path (see the module docstring)
CLASS_KEYS = ("task", "variant", "cell", "norm", "bias_inside", "init", "affine", "optimizer", "layers", "device",
              "threads")


def canary_class(config: dict[str, Any]) -> dict[str, Any]:
    """The canary class of a run config: its code-path settings, canonical (``identity``)."""
    from atnbench.evidence.identity import DATA_OPTIONS, identity

    options = dict(config.get("options") or {})
    canonical = identity({**config, "options": {}})  # no data file is read for a class
    found = {key: canonical.get(key) for key in CLASS_KEYS}
    found["clipped"] = canonical.get("clip") is not None
    found["data_options"] = sorted(key for key in DATA_OPTIONS if key in options)
    found["options"] = {key: value for key, value in sorted(options.items()) if key not in DATA_OPTIONS}
    return found


def class_key(config: dict[str, Any]) -> str:
    """One string per canary class (how records name the classes they vouch for)."""
    return json.dumps(canary_class(config), sort_keys=True, separators=(",", ":"), default=str)


@functools.lru_cache(maxsize=4)
def _records(path: Path) -> tuple[dict, ...]:
    if not path.is_file():
        return ()
    return tuple(json.loads(path.read_text()).get("records", []))


def records(path: Optional[Path] = None) -> tuple[dict, ...]:
    """The equivalence records, oldest first."""
    return _records(Path(path or RECORDS_FILE))


def vouched_classes(old: str, new: str, path: Optional[Path] = None) -> frozenset[str]:
    """The canary classes for which code ``old`` was shown to compute what code ``new`` does."""
    return frozenset(key for record in records(path) if record["old_code"] == old and record["new_code"] == new
                     for key in record["identical"])


def is_current(code: Optional[str], config: dict[str, Any], path: Optional[Path] = None) -> bool:
    """Whether a run made by ``code`` counts as made by the running atnbench: the same
    fingerprint, or one a canary vouched for in this run's class. A run recorded before
    fingerprints (``code`` None) cannot be vouched for: False."""
    from atnbench.evidence.identity import code_fingerprint

    current = code_fingerprint()
    if code is None or code == current:
        return code is not None
    return class_key(config) in vouched_classes(code, current, path)


def current_equivalent(code: Optional[str], config: dict[str, Any]) -> Optional[str]:
    """``code``, or the current fingerprint where a canary vouched for ``code`` in this class:
    what a report groups runs by, so vouched runs and new ones share one row."""
    from atnbench.evidence.identity import code_fingerprint

    return code_fingerprint() if is_current(code, config) else code


def on_its_data(record) -> bool:
    """Whether a stored run's data files still hold what it was trained on. ``config_key`` reads
    the files named in a config as they are now, so a run made before a file was edited in place
    would otherwise pass for the same experiment on the new contents; its id, made from the old
    contents, says it is not."""
    from atnbench.evidence.identity import DATA_OPTIONS, run_ids_under

    code = (record.env or {}).get("code")
    if code is None or not any(key in (record.config.get("options") or {}) for key in DATA_OPTIONS):
        return True  # nothing that can change under the same config (or no way to tell)
    return record.run_id in run_ids_under(record.config, code)


def finished_equivalent(records, config: dict[str, Any]):
    """A finished run among ``records`` (store rows) of the same experiment as ``config``
    (``identity.config_key``) made by code that counts as current: the run a sweep or
    ``atnbench run`` need not train again although its id (made by other code) differs."""
    from atnbench.evidence.identity import config_key

    wanted = config_key(config)
    return stand_in([record for record in records if config_key(record.config) == wanted])


def stand_in(records, made_by: Optional[str] = None):
    """A finished run among ``records`` (runs of one experiment) made by code that counts as
    current, on the data it was trained on; with ``made_by``, only where that code counts as
    current too (the run then computes what ``made_by``'s would: a study's planning code)."""
    for record in records:
        if record.status in ("done", "diverged") and is_current((record.env or {}).get("code"), record.config) \
                and (made_by is None or is_current(made_by, record.config)) and on_its_data(record):
            return record
    return None

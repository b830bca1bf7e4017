"""The canary check: do the published runs' code paths compute the same numbers under this code?

For every canary class (``atnbench.evidence.equivalence``) of a set of runs made by one old code
fingerprint, one short run of that class (a run's own config, cut to ``steps`` steps with an
evaluation every ``steps // 2`` and one batch of validation data) is trained twice, in two fresh
processes: under the old code (a git worktree at a revision the runs recorded, checked to have
that fingerprint) and under the code of this checkout. The two curves (every training and
validation loss and metric, timings left out) and the final weights must be bit-identical.
``record`` adds the classes that were to ``code_equivalence.json``; the others stay stale.

Both sides run ``DRIVER`` (below) with ``PYTHONPATH`` pointing at their tree, so it only uses
what every atnbench since the canary has: ``config.build_config``, ``store.ResultsStore``
(``curve``, ``model``), ``train.train`` (with ``keep_model``) and ``identity.code_fingerprint``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from atnbench.config import ConfigError
from atnbench.evidence.equivalence import RECORDS_FILE, canary_class, class_key

DEFAULT_STEPS = 10
# Trains each config on stdin into a scratch store; prints the code fingerprint, and per config
# its curve (timings out) and a digest of its final weights, as JSON on stdout.
DRIVER = r"""
import hashlib, io, json, sys, tempfile
import torch
from atnbench.config import build_config
from atnbench.store import ResultsStore
try:
    from atnbench.evidence.identity import code_fingerprint, run_id_of
    from atnbench.run.train import train
except ImportError:  # the runs' revision predates the layout of #41: the same functions at their old homes
    from atnbench.identity import code_fingerprint
    from atnbench.train import train

    def run_id_of(config):
        return config.run_id

def digest(state):
    h = hashlib.sha256()
    for key in sorted(state):
        h.update(key.encode() + b"\0" + state[key].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()

results = []
with tempfile.TemporaryDirectory() as folder:
    with ResultsStore(folder + "/canary.db") as store:
        for values in json.load(sys.stdin):
            config = build_config(values)
            record = train(config, store, torch.device("cpu"), keep_model=True)
            curve = [[p.step, p.train_loss, p.val_loss, p.metrics] for p in store.curve(run_id_of(config))]
            final = store.model(run_id_of(config), "final")
            weights = digest(torch.load(io.BytesIO(final[1]), weights_only=True)) if final else None
            results.append({"status": record["status"], "curve": curve, "weights": weights})
print(json.dumps({"code": code_fingerprint(), "results": results}))
"""


# the code fingerprint of a tree, at its module's home before the layout of #41 or after it
FINGERPRINT = """
try:
    from atnbench.evidence.identity import code_fingerprint
except ImportError:
    from atnbench.identity import code_fingerprint
print(code_fingerprint())
"""


@dataclass(frozen=True)
class Canary:
    """One short run standing for a canary class of the runs."""

    key: str  # equivalence.class_key
    config: dict[str, Any]  # the short run's config
    runs: int  # how many of the runs it stands for


@dataclass(frozen=True)
class Outcome:
    canary: Canary
    identical: bool
    difference: Optional[str]  # the first difference, in words


def canaries(configs: Iterable[dict[str, Any]], steps: int = DEFAULT_STEPS) -> list[Canary]:
    """One canary per class, from the class's run with the shortest sequences (cheapest)."""
    by_class: dict[str, list[dict]] = {}
    for config in configs:
        by_class.setdefault(class_key(config), []).append(config)
    found = []
    for key, members in sorted(by_class.items()):
        chosen = min(members, key=lambda c: (c.get("T", 0), json.dumps(c, sort_keys=True)))
        found.append(Canary(key, shorten(chosen, steps), len(members)))
    return found


def other_classes(runs: Iterable[dict[str, Any]], here: Optional[str]) -> Optional[str]:
    """A note where some of ``runs`` (exported records) were made on another instruction set than
    ``here`` (this machine's, ``machine.cpu_capability``), else None. A canary checks the code paths
    of the processor it runs on (the C++ kernels and torch's have AVX2 and AVX-512 branches), and
    its record vouches for a code path on every processor class: the note keeps that visible."""
    counts: dict[str, int] = {}
    for run in runs:
        found = (run.get("env") or {}).get("cpu_capability") or "no recorded instruction set"
        counts[found] = counts.get(found, 0) + 1
    others = {name: n for name, n in counts.items() if name != here}
    if not others:
        return None
    total = sum(counts.values())
    made = ", ".join(f"{n} on {name}" for name, n in sorted(others.items()))
    return (f"note: this machine runs {here or 'an unknown instruction set'}; of the {total} run(s) to check, {made}: "
            f"a canary here checks only this instruction set's code paths, and its record vouches for the "
            f"runs of every processor class (docs/run-identity.md)")


def shorten(config: dict[str, Any], steps: int) -> dict[str, Any]:
    """The config cut to ``steps`` steps, two evaluations, one validation batch, budget 1."""
    if steps < 2:
        raise ConfigError(f"--steps must be >= 2 (two evaluations), got {steps}")
    return {**config, "steps": steps, "eval_every": steps // 2, "val_samples": config.get("batch_size", 1),
            "budget": 1.0, "seed": 0}


def compare(old: dict, new: dict) -> Optional[str]:
    """The first difference between two driver results, or None when bit-identical."""
    if old["status"] != new["status"]:
        return f"status {old['status']} under the old code, {new['status']} under this one"
    if len(old["curve"]) != len(new["curve"]):
        return f"{len(old['curve'])} evaluations under the old code, {len(new['curve'])} under this one"
    for a, b in zip(old["curve"], new["curve"]):
        if a != b:
            return f"step {a[0]}: losses {a[1:]} under the old code, {b[1:]} under this one"
    if old["weights"] != new["weights"]:
        return "final weights differ"
    return None


def run_driver(tree: Path, configs: list[dict[str, Any]]) -> dict:
    """The driver's output for ``configs`` under the atnbench in ``tree``, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    with tempfile.TemporaryDirectory() as folder:
        done = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(configs), capture_output=True,
                              text=True, env=env, cwd=folder)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the canary runs failed under {tree}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextmanager
def worktree(repo: Path, revision: str) -> Iterator[Path]:
    """A temporary git worktree of ``repo`` at ``revision`` (removed afterwards)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tree"
        done = subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(path), revision],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise ConfigError(f"cannot check out revision {revision!r} of {repo}: "
                              f"{(done.stderr.strip().splitlines() or ['git failed'])[-1]}")
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(path)], capture_output=True)


def fingerprint_of(tree: Path) -> str:
    """The code fingerprint of the atnbench in ``tree`` (computed by that tree's own code)."""
    done = subprocess.run([sys.executable, "-c", FINGERPRINT],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)
    if done.returncode != 0:
        raise RuntimeError(f"cannot compute the code fingerprint in {tree}: {done.stderr.strip()[-200:]}")
    return done.stdout.strip()


def check(canaries_: list[Canary], old_tree: Path, new_tree: Path) -> list[Outcome]:
    """Every canary under both trees; one process per tree for all canaries."""
    configs = [c.config for c in canaries_]
    old, new = run_driver(old_tree, configs)["results"], run_driver(new_tree, configs)["results"]
    return [Outcome(c, (diff := compare(a, b)) is None, diff) for c, a, b in zip(canaries_, old, new)]


def record(outcomes: list[Outcome], old_code: str, new_code: str, old_revision: str, new_revision: str,
           path: Path = RECORDS_FILE) -> dict:
    """Add an equivalence record for the identical canaries (replacing one for the same pair)."""
    from atnbench.evidence.machine import cpu_capability, cpu_model
    from atnbench.store import _torch_version

    entry = {
        "old_code": old_code, "new_code": new_code, "old_revision": old_revision, "new_revision": new_revision,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"processor": cpu_model(), "cpu_capability": cpu_capability(), "torch": _torch_version()},
        "steps": max((o.canary.config["steps"] for o in outcomes), default=0),
        "identical": sorted(o.canary.key for o in outcomes if o.identical),
        "different": sorted(o.canary.key for o in outcomes if not o.identical),
        "canaries": [{"class": canary_class(o.canary.config), "runs": o.canary.runs, "identical": o.identical,
                      **({"difference": o.difference} if o.difference else {})} for o in outcomes],
    }
    existing = json.loads(path.read_text()) if path.is_file() else {"records": []}
    kept = [r for r in existing["records"] if (r["old_code"], r["new_code"]) != (old_code, new_code)]
    path.write_text(json.dumps({**existing, "records": kept + [entry]}, indent=1) + "\n")
    from atnbench.evidence.equivalence import _records

    _records.cache_clear()
    return entry

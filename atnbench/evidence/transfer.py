"""Moving runs between results stores: JSON Lines files and merging.

A sweep split over machines (or over days on machines that are not kept) ends as several
stores; ``atnbench store export`` / ``import`` / ``merge`` combine them into one, whose report
is the same as if every run had been recorded there.

The file: JSON Lines, one run per line, each line ``ResultsStore.export_record``'s dict (the row,
the curve, the sweeps the run belongs to). Non-finite numbers are already ``null`` in the store.
Its summary's held-out (test) numbers are those at the evaluation validation chose
(``run.selection``), also for a run whose stored summary is older than that rule (it held the best
test score over the curve); the two spellings of one run's summary are the same numbers here.

Combining a run into a store that may already hold it (``combine``):

- not there: added;
- there, but less finished (``running`` < ``failed`` < ``done``/``diverged``; a sweep re-runs a
  failed run anyway): replaced by the incoming one; the other way round the store's row is kept;
  sweep memberships are always united (never removed);
- both running: the longer curve wins (it got further before its process stopped);
- both finished: the *numbers* are compared: status, summary and curve, except timings
  (``wall_s``, ``steps_per_s``), which differ between machines for the same computation. Equal:
  nothing changes but the sweep memberships (their union is taken, so the order of the
  imports does not matter). Different: a ``Conflict``, reported and never overwritten.

So importing a file twice changes nothing the second time.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator, Optional, TextIO

from atnbench.errors import UserError
from atnbench.evidence.machine import processor_class
from atnbench.store import RECORD_VERSION, SQLITE_HEADER, STATUSES, ResultsStore

TIMING_KEYS = frozenset({"wall_s", "steps_per_s"})
RANK = {"running": 0, "failed": 1, "done": 2, "diverged": 2}  # how finished a row is
OUTCOMES = ("added", "replaced", "joined", "unchanged", "kept", "conflict")
OUTCOME_HELP = {
    "added": "new to the store",
    "replaced": "replaced a less finished row",
    "joined": "same numbers; only sweep memberships were added",
    "unchanged": "already there with the same numbers",
    "kept": "the store's row is more finished and was kept",
    "conflict": "same run id, different numbers: the store's row was kept",
}


@dataclass(frozen=True)
class Conflict:
    """One run id whose incoming numbers differ from the store's; ``difference`` says the first."""

    run_id: str
    source: str
    difference: str
    classes: tuple[str, str] = ("unknown", "unknown")  # the processor classes that made the two (here, there)

    def line(self) -> str:
        return f"conflict: run {self.run_id} from {self.source}: {self.difference} ({self.made()}); kept the store's row"

    def made(self) -> str:
        """Where each side was made, as far as their records say (older runs did not record it)."""
        here, there = (None if c.startswith("unknown") else c for c in self.classes)
        if here is None and there is None:
            return "neither records its processor class"
        if here is None or there is None:
            return (f"made in processor class {here} here; there, not recorded" if there is None else
                    f"made in processor class {there} there; here, not recorded")
        if here != there:
            return f"made in processor class {here} here, {there} there, which round differently"
        return f"both made in processor class {here}"


@dataclass
class Tally:
    """What a transfer did, run by run."""

    counts: Counter = field(default_factory=Counter)
    conflicts: list[Conflict] = field(default_factory=list)

    def text(self) -> str:
        total = sum(self.counts.values())
        parts = [f"{self.counts[o]} {o}" for o in OUTCOMES if self.counts[o]]
        # records read, not runs: a merge of stores that share runs reads one run several times
        return f"{total} run record{'s' if total != 1 else ''} read" + (f": {', '.join(parts)}" if parts else "")


# -- the file ------------------------------------------------------------------------------------


def records(store: ResultsStore, task: Optional[str] = None, sweep: Optional[str] = None,
            status: Optional[str] = None, drop_superseded: bool = False) -> Iterator[dict]:
    """Every selected run of the store as an export record, oldest first. ``drop_superseded``
    leaves out stale runs (made by other code) whose experiment (``identity.config_key``) the
    store also holds finished by the current code."""
    superseded = _superseded(store) if drop_superseded else set()
    for run in store.runs(task=task, sweep=sweep, status=status):
        if run.run_id not in superseded:
            record = store.export_record(run.run_id)
            yield {**record, "summary": _selected(record["summary"], record["curve"])}


def _selected(summary: Optional[dict], curve: list[dict]) -> Optional[dict]:
    """``summary`` with its held-out numbers at validation's pick (``run.selection``), from a record's curve."""
    from types import SimpleNamespace

    from atnbench.run.selection import selected_summary

    blank = {"step": None, "val_loss": None, "metrics": {}}
    points = [SimpleNamespace(**{**blank, **point}) for point in curve if isinstance(point, dict)]
    return selected_summary(summary, points)


def _superseded(store: ResultsStore) -> set[str]:
    from atnbench.evidence.equivalence import is_current
    from atnbench.evidence.identity import config_key

    runs = store.runs()
    current = {r.run_id for r in runs if is_current((r.env or {}).get("code"), r.config)}
    redone = {config_key(r.config) for r in runs if r.status in ("done", "diverged") and r.run_id in current}
    return {r.run_id for r in runs if r.run_id not in current and config_key(r.config) in redone}


def checked_records(path: Path) -> list[dict]:
    """Every readable run of the store at ``path`` as export records, each checked against the
    run schema (a malformed row is skipped with a note; a record that fails the schema is a
    UserError naming the store, the run and the field, before anything is written anywhere)."""
    from atnbench.evidence.records import problem
    from atnbench.userfiles import parse_json

    with ResultsStore(path, create=False, read_only=True) as reading:
        recs = list(records(reading))
    for record in recs:
        found = problem(record)
        if found:
            raise UserError(f"{path}: run {record['run_id']}: not an atnbench run record ({found}); "
                            f"nothing merged")
    return recs


def unchecked_ids(recs: Iterable[dict]) -> int:
    """How many records passed with their run id checked by format only: their configs name data
    files that are not on this machine, and the id holds those files' contents."""
    from atnbench.evidence.records import id_checkable

    return sum(not id_checkable(record) for record in recs)


def unchecked_note(recs: Iterable[dict], source: str) -> Optional[str]:
    """The ``note:`` line an import or merge prints for ``unchecked_ids``, or None when there are none."""
    n = unchecked_ids(recs)
    if not n:
        return None
    whose = "1 record's run id" if n == 1 else f"{n} records' run ids"
    return (f"note: {source}: {whose} could not be checked against the config: the data files it names "
            f"are not on this machine (only the id's format was checked)")


def write_lines(recs: Iterable[dict], stream: TextIO) -> int:
    """Write records as JSON Lines; returns how many."""
    n = 0
    for record in recs:
        # keys in the store's order, so an imported store equals its source byte for byte
        stream.write(json.dumps(record, allow_nan=False) + "\n")
        n += 1
    return n


def read_lines(path: Path) -> list[dict]:
    """Every record of a JSON Lines file (``-``: standard input), each checked against the run
    schema (``atnbench.evidence.records``) before anything is written: a bad line is a UserError naming the
    file, the line, the run and the field, so a broken file imports nothing."""
    path = Path(path)
    if str(path) == "-":
        if sys.stdin is None:  # the caller closed it (`<&-`): Python leaves None
            raise UserError("- reads standard input, which is closed; pipe the export in, or give its file's name")
        return _checked_lines(sys.stdin.buffer, "standard input")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give the JSON Lines file `atnbench store export` wrote")
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    from atnbench.userfiles import check_file

    check_file(path, "records")  # a FIFO or a device is refused before it is opened (it would hang)
    with path.open("rb") as stream:
        return _checked_lines(stream, str(path))


def _checked_lines(stream: BinaryIO, name: str) -> list[dict]:
    from atnbench.evidence.records import problem
    from atnbench.userfiles import parse_json

    out = []
    for number, raw in enumerate(stream, 1):
        if number == 1 and raw.startswith(SQLITE_HEADER):
            raise UserError(f"{name}: a results store (SQLite), not the JSON Lines `atnbench store export` writes; "
                            f"to bring a store's runs into another: atnbench store merge OUTPUT {name}; nothing imported")
        try:  # a byte-order mark opening the file (an editor's "UTF-8 with BOM") is dropped, as in every user file
            line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{name} line {number}: not UTF-8 text (not a JSON Lines file)") from None
        if not line.strip():
            continue
        if not out and (line.strip() == "[" or line.startswith("run_id,")):  # a `runs export`: a list, or CSV
            raise UserError(f"{name}: a `runs export` file (CSV or a JSON list, for analysis), not the JSON Lines "
                            f"`atnbench store export` writes, which is what `store import` reads; nothing imported")
        record = parse_json(line.strip(), f"{name} line {number}")
        found = _malformed(record) or problem(record)
        if found:
            run = f" run {record['run_id']}" if isinstance(record, dict) and isinstance(record.get("run_id"), str) else ""
            raise UserError(f"{name} line {number}{run}: not an atnbench run record ({found}); nothing imported")
        out.append(record)
    return out


# What a line holds when it is not an object, in JSON's words (a user wrote JSON, not Python).
_JSON_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "true or false",
               type(None): "null"}


def _malformed(record) -> Optional[str]:
    if not isinstance(record, dict):
        return f"{_JSON_KINDS[type(record)]}, not an object"
    missing = [key for key in ("run_id", "status", "config") if key not in record]
    if missing:
        return f"missing {', '.join(missing)}"
    if not isinstance(record["run_id"], str) or not record["run_id"]:
        return "run_id is not a non-empty string"
    if record["status"] not in STATUSES:
        return f"unknown status {record['status']!r}"
    if not isinstance(record["config"], dict):
        return "config is not an object"
    try:
        if int(record.get("schema_version", RECORD_VERSION)) > RECORD_VERSION:
            return f"schema version {record['schema_version']}, newer than this atnbench's {RECORD_VERSION}: upgrade it"
    except (TypeError, ValueError):
        return f"schema version {record['schema_version']!r} is not a number"
    if not isinstance(record.get("curve", []), list) or not isinstance(record.get("sweeps", []), list):
        return "curve and sweeps must be lists"
    return None


# -- combining -----------------------------------------------------------------------------------


def numbers(record: dict) -> dict:
    """What must be equal for two records of one run to be the same result (timings left out)."""
    selected = _selected(record.get("summary") or {}, record.get("curve", []))
    summary = {k: v for k, v in selected.items() if k not in TIMING_KEYS}
    curve = [{k: v for k, v in point.items() if k not in TIMING_KEYS} for point in record.get("curve", [])]
    for point in curve:
        point.setdefault("metrics", {})
    return {"status": record["status"], "summary": summary, "curve": curve}


def difference(ours: dict, theirs: dict) -> Optional[str]:
    """The first difference in numbers, as words ("summary min_val_loss: 0.1 here, 0.2 there"), or None."""
    a, b = numbers(ours), numbers(theirs)
    if a["status"] != b["status"]:
        return f"status {a['status']} here, {b['status']} there"
    for key in sorted(set(a["summary"]) | set(b["summary"])):
        if a["summary"].get(key) != b["summary"].get(key):
            return f"summary {key}: {a['summary'].get(key)!r} here, {b['summary'].get(key)!r} there"
    steps_a, steps_b = [p.get("step") for p in a["curve"]], [p.get("step") for p in b["curve"]]
    if steps_a != steps_b:
        return f"curve has {len(steps_a)} points here, {len(steps_b)} there (or at other steps)"
    for pa, pb in zip(a["curve"], b["curve"]):
        for key in sorted(set(pa) | set(pb)):
            if pa.get(key) != pb.get(key):
                return f"curve step {pa['step']} {key}: {pa.get(key)!r} here, {pb.get(key)!r} there"
    return None


def combine(store: ResultsStore, record: dict, source: str = "the file") -> tuple[str, Optional[Conflict]]:
    """Bring one exported run into the store by the rules in the module docstring; returns the
    outcome (one of OUTCOMES) and the conflict, if any."""
    run_id = record["run_id"]
    if store.get_run(run_id) is None:
        store.import_record(record)
        return "added", None
    ours = store.export_record(run_id)
    ours_rank, theirs_rank = RANK[ours["status"]], RANK[record["status"]]
    if theirs_rank > ours_rank or (
        ours["status"] == record["status"] == "running" and len(record.get("curve", [])) > len(ours["curve"])
    ):
        store.import_record(record)  # replaces row and curve, adds memberships
        return "replaced", None
    if theirs_rank < ours_rank:
        _join(store, ours, record)  # the config is in the incoming run's sweeps either way
        return "kept", None
    if ours["status"] == "running":
        return _join(store, ours, record), None
    if ours["status"] == "failed":  # two failures carry no numbers to compare
        return _join(store, ours, record), None
    found = difference(ours, record)
    if found is not None:
        classes = (processor_class(ours.get("env"), ours["config"]), processor_class(record.get("env"), record["config"]))
        return "conflict", Conflict(run_id, source, found, classes)
    return _join(store, ours, record), None


def _join(store: ResultsStore, ours: dict, record: dict) -> str:
    """Add the incoming sweep memberships the store lacks: 'joined' if any, else 'unchanged'."""
    new = [sweep for sweep in record.get("sweeps", []) if sweep not in ours["sweeps"]]
    for sweep in new:
        store.add_to_sweep(sweep, record["run_id"])
    return "joined" if new else "unchanged"


def combine_all(store: ResultsStore, recs: Iterable[dict], source: str, tally: Optional[Tally] = None) -> Tally:
    """combine() every record; the tally counts outcomes and collects conflicts."""
    tally = tally if tally is not None else Tally()
    with store.batch():  # one transaction: a failure part way leaves the store as it was
        for record in recs:
            outcome, conflict = combine(store, record, source)
            tally.counts[outcome] += 1
            if conflict is not None:
                tally.conflicts.append(conflict)
    return tally

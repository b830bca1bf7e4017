"""Output paths checked before any work: a long run must not fail at its last line because
``--out`` names a folder, sits under a file, or cannot be written. Nothing is left behind here.

Writability is tried, not looked up: ``os.access`` answers yes to root everywhere, also on a
read-only file system or in ``/proc``, where the write would still fail after the work. So the
folder that would receive the file gets a temporary file, removed at once, and an existing file
is opened for appending (which changes neither its bytes nor its modification time).

An output replaces only a regular file: a device (``/dev/null``, ``/dev/full``), a FIFO or a
socket there is refused (a write through a temporary file and a rename would put a regular file
in its place, and a device never holds the output), and so is the results store the command
reads (``--store``), also under another name: a symbolic or a hard link to it. Nor does an output
replace any other SQLite database (another results store: a report written over it would lose
every run) or an export of runs (``store export``'s JSON Lines, ``runs export -f json``'s list)
unless its own command wrote it (``runs export`` may replace its list or its CSV). An existing file
is also refused where no new file can be made beside it: ``/proc/version`` opens for writing,
but the write fails (EIO) after the work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Union

from atnbench.errors import UserError
from atnbench.userfiles import broken_link, why_not_writable


def _check_parents(path: Path, flag: str) -> None:
    broken = broken_link(path)
    if broken is not None:
        raise UserError(f"{flag} {path}: {broken}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{flag} {path}: {parent} is a file, not a folder")
            why = why_not_writable(parent)
            if why:
                raise UserError(f"{flag} {path}: cannot write into {parent} ({why})")
            return


SQLITE, RUN_EXPORT = "an SQLite database (a results store?)", "an export of runs (JSON Lines)"
RUNS_LIST = "a list of runs (`runs export -f json`)"
RUNS_CSV = "a table of runs (`runs export`'s CSV)"
STUDIES = "an export of studies (`store export --studies`: plans no run can rebuild)"
EXPORT_READ = 1 << 26  # a run with thousands of evaluations is one long line


def _holds_evidence(path: Path) -> Optional[str]:
    """SQLITE, RUN_EXPORT, RUNS_LIST, STUDIES or RUNS_CSV when the file at ``path`` is one (by its first
    bytes; a JSON list by its first element; a CSV by a run_id column in its header), else None."""
    import json

    from atnbench.store import SQLITE_HEADER

    try:
        with open(path, "rb") as handle:
            if handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER:
                return SQLITE
            handle.seek(0)
            first = handle.readline(EXPORT_READ)
            if first.lstrip().startswith(b"["):
                first = first + handle.read(EXPORT_READ)
    except OSError:
        return None  # unreadable: the write check below says what it can
    try:
        record = json.loads(first)
    except ValueError:  # not JSON, or longer than what was read: a CSV of runs?
        header = _csv_header(first)
        return RUNS_CSV if header is not None and "run_id" in header else None
    kind = RUN_EXPORT
    if isinstance(record, list) and record:
        record, kind = record[0], RUNS_LIST
        if isinstance(record, dict) and {"family", "looks", "comparisons"} <= record.keys():
            return STUDIES
    return kind if isinstance(record, dict) and {"run_id", "config"} <= record.keys() else None


def _csv_header(first: bytes) -> Optional[list[str]]:
    import csv

    try:
        return next(csv.reader([first.decode("utf-8-sig").splitlines()[0]]))
    except (UnicodeDecodeError, IndexError, StopIteration, csv.Error):
        return None


# the formats a file's name says it holds (report's --format follows them where none is given)
SUFFIX_FORMATS = {".csv": "csv", ".json": "json", ".md": "markdown", ".markdown": "markdown", ".tex": "latex"}


def check_suffix_format(path: Union[str, Path], fmt: str, choices: tuple[str, ...], flag: str = "--output") -> None:
    """A file named for one format (``x.csv``) that --format would fill with another: one line, as
    `run` refuses JSON in a .csv (`report`/`runs export` wrote it, and the next reader took the
    file for what its name says). A name of no format (``.txt``, none) takes any. ``choices``: the
    command's formats (the one the name says is offered where the command writes it)."""
    named = SUFFIX_FORMATS.get(Path(path).suffix.lower())
    if named is not None and named != fmt:
        other = f"--format {named}, or " if named in choices else ""
        raise UserError(f"{flag} {path}: a {Path(path).suffix} file holds {named}, and --format {fmt} would write "
                        f"{fmt} into it; give {other}a file whose name says {fmt}")


def check_output_file(path: Union[str, Path], flag: str, store: Optional[Union[str, Path]] = None,
                      export: Optional[str] = None) -> None:
    """ValueError (one line) unless ``path`` can be written as a file, replacing only a regular
    file that is not the results store ``store``, nor another SQLite database, nor an export of
    runs (JSON Lines, a list, a CSV), nor an export of studies: ``export`` (RUN_EXPORT, RUNS_LIST,
    RUNS_CSV or STUDIES) is the kind of export the output is, which may replace one of its kind, or
    what its own command wrote (``runs export``: a list or a CSV of runs)."""
    from atnbench.userfiles import kind_of

    path = Path(path).expanduser()
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; give a file name")
    if not path.exists():
        _check_parents(path, flag)
        return
    found = os.stat(path)
    what = kind_of(found.st_mode)
    if what is not None:
        raise UserError(f"{flag} {path} is {what}, not a regular file; give a file's name")
    if store is not None and Path(store).exists() and os.path.samefile(path, store):
        raise UserError(f"{flag} {path} is the results store {store}; give another file")
    held = _holds_evidence(path)
    # an export replaces what its own command wrote (`runs export`: a list or a CSV of runs), never
    # another command's file, whose readers expect its format; check_keeps_runs then keeps it from
    # losing runs the file holds
    own = {RUNS_LIST, RUNS_CSV} if export in (RUNS_LIST, RUNS_CSV) else {export}
    replaceable = {None, *own} if export else {None}
    if held == SQLITE or held not in replaceable:
        raise UserError(f"{flag} {path} already holds {held}, which this would replace; give another file "
                        f"(or remove it first)")
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
    except OSError as error:
        raise UserError(f"{flag} {path} cannot be written ({error.strerror or type(error).__name__})") from None
    _check_parents(path, flag)  # its folder: a new file there (the write's temporary one) can be made


def check_keeps_runs(path: Union[str, Path], flag: str, run_ids: set[str]) -> None:
    """An export replaces an earlier export (refreshing it), never one holding runs it does not:
    an export of another store's runs (the copy brought from machine A), or any where a filter now
    matches fewer runs, or none. Refused in one line, the file as it was."""
    path = Path(path).expanduser()
    lost = sorted(_run_ids_in(path) - set(run_ids)) if path.is_file() else []
    if lost:
        shown = ", ".join(lost[:3]) + (", ..." if len(lost) > 3 else "")
        raise UserError(f"{flag} {path} holds {len(lost)} run{'s' if len(lost) != 1 else ''} this export does not "
                        f"({shown}), which replacing it would lose; give another file, or remove it first")


def check_keeps_studies(path: Union[str, Path], flag: str, names: set[str]) -> None:
    """A studies export replaces an earlier one, never one holding studies it does not: plans and
    looks no run can rebuild. Refused in one line, the file as it was."""
    import json

    path = Path(path).expanduser()
    if not path.is_file() or _holds_evidence(path) != STUDIES:
        return
    try:
        held = {record["name"] for record in json.loads(path.read_text(encoding="utf-8"))}
    except (OSError, ValueError, KeyError, TypeError):
        return  # not what an export writes: nothing of ours to lose
    lost = sorted(held - names)
    if lost:
        shown = ", ".join(lost[:3]) + (", ..." if len(lost) > 3 else "")
        raise UserError(f"{flag} {path} holds {len(lost)} stud{'ies' if len(lost) != 1 else 'y'} this export does "
                        f"not ({shown}), which replacing it would lose; give another file, or remove it first")


def _run_ids_in(path: Path) -> set[str]:
    """The run ids an export of runs holds: JSON Lines, a JSON list, or a CSV with a run_id column
    (`runs export`'s, curves too); none for any other file."""
    import csv
    import json

    held = _holds_evidence(path)
    try:
        if held == RUN_EXPORT:
            with open(path, encoding="utf-8") as handle:
                return {json.loads(line)["run_id"] for line in handle if line.strip()}
        if held == RUNS_LIST:
            return {record["run_id"] for record in json.loads(path.read_text(encoding="utf-8"))}
        with open(path, encoding="utf-8", newline="") as handle:
            rows = csv.DictReader(handle)
            if rows.fieldnames and "run_id" in rows.fieldnames:
                return {row["run_id"] for row in rows if row.get("run_id")}
    except (OSError, ValueError, KeyError, TypeError, csv.Error):
        pass  # not what an export writes: nothing of ours to lose
    return set()


def check_output_dir(path: Union[str, Path], flag: str) -> None:
    """ValueError (one line) unless ``path`` is, or can become, a writable folder."""
    if str(path) == "-":  # standard output elsewhere; here it would make a folder named "-"
        raise UserError(f"{flag} -: files go into a folder here, not to standard output; give a folder")
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file; give a folder")
    if path.is_dir():
        why = why_not_writable(path)
        if why:
            raise UserError(f"{flag} {path} cannot be written ({why})")
        return
    _check_parents(path, flag)


def check_store_outside_data(configs, store: Union[str, Path]) -> None:
    """UserError (one line) where the results store sits inside data a run reads (a code task's
    ``reads:`` folder, a ``--data-dir``): the store's own writes would change that data's
    fingerprint while the run trains, and the run would end under another id than it started,
    its summary lost."""
    from atnbench.evidence.identity import data_holding

    for config in configs:
        holder = data_holding(config.options, Path(store))
        if holder is not None:
            raise UserError(f"results store {store} is inside {holder}, which task {config.task} reads: the store's "
                            f"own writes would change that data, so the run's id, while it trains; give --store a "
                            f"path outside it")

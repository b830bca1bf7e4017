"""Real data read before any work, and a garbled file said in one line naming it.

``atnbench run`` (and a sweep, once per data location) loads a real-data task's data before it
opens the results store, so a bad file is a usage error (exit 2) that names the file and what
is wrong with it (empty, not UTF-8, not Parquet, a short CSV row, broken JSON), not the
``datasets`` library's "An error occurred while generating the dataset" after the store was
opened. It costs one extra read of the data (seconds, next to hours of training). ``data
verify``, ``data prepare`` and ``reproduce`` check prepared copies through :func:`verify_copy`,
which turns a file the checks cannot even read into a problem naming it.

The loaders themselves (``atnbench/data``) are left as they are: they compute runs' numbers
and are part of the code fingerprint.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import stat
from pathlib import Path
from typing import Iterator, Optional

from atnbench.config import ConfigError, SettingError
from atnbench.errors import UserError, needs_package

TEXT_SUFFIXES = (".txt", ".tokens", ".raw", ".csv", ".tsv", ".json", ".jsonl")


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _json_problem(text: str) -> Optional[str]:
    """A JSON document, or JSON Lines (one value a line), as ``datasets`` reads either."""
    try:
        json.loads(text)
        return None
    except RecursionError:
        return "is not JSON we read (nested too deep)"
    except ValueError:
        pass
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                json.loads(line)
            except RecursionError:
                return f"is not JSON we read (line {number}: nested too deep)"
            except ValueError as error:
                return f"is not JSON (line {number}: {_first_line(error)})"
    return None


def _csv_problem(text: str, delimiter: str) -> Optional[str]:
    rows = csv.reader(io.StringIO(text), delimiter=delimiter)
    try:
        width = len(next(rows))
        for number, row in enumerate(rows, 2):
            if row and len(row) != width:
                return f"row {number} has {len(row)} field(s), the header {width}"
    except csv.Error as error:
        return f"is not CSV ({_first_line(error)})"
    return None


def _table_problem(path: Path) -> Optional[str]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # an optional package: the one line says how to get it
        return f"reading it {needs_package('pyarrow')}"

    try:
        if path.suffix.lower() == ".parquet":
            pq.read_metadata(path)
        else:  # datasets writes the stream format; the file format is read too
            with pa.memory_map(str(path)) as source:
                try:
                    pa.ipc.open_stream(source).read_all()
                except pa.ArrowInvalid:
                    source.seek(0)
                    pa.ipc.open_file(source)
    except (pa.ArrowException, OSError) as error:
        kind = "Parquet" if path.suffix.lower() == ".parquet" else "Arrow"
        return f"is not a {kind} file ({_first_line(error)})"
    return None


def file_problem(path: Path) -> Optional[str]:
    """What a reader of this data file would trip over, or None (unknown suffixes: None)."""
    from atnbench.userfiles import check_file

    path = Path(path)
    suffix = path.suffix.lower()
    if not path.exists():
        return "not found"
    try:  # a FIFO, a device (/dev/zero never ends) or a file past the size limit: said, never opened
        found = check_file(path, "data", folder_ok=True)
    except ConfigError as error:
        return str(error).removeprefix(f"{path}: ")
    if stat.S_ISDIR(found.st_mode):
        return "is a folder, not a file"
    if found.st_size == 0:
        return "is empty"
    if suffix in (".parquet", ".arrow"):
        return _table_problem(path)
    if suffix not in TEXT_SUFFIXES:
        return None
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"is not UTF-8 text (byte {data[error.start]:#04x} at offset {error.start:,})"
    if not text.strip():
        return "holds only white space"
    if suffix in (".json", ".jsonl"):
        return _json_problem(text)
    if suffix in (".csv", ".tsv"):
        return _csv_problem(text, "\t" if suffix == ".tsv" else ",")
    return None


def first_problem(paths) -> Optional[str]:
    """"FILE: problem" for the first file of ``paths`` with one, else None."""
    for path in paths:
        problem = file_problem(path)
        if problem:
            return f"{path}: {problem}"
    return None


def _readable_suffixes() -> tuple[str, ...]:
    from atnbench.data.common import BUILDERS  # the suffixes the loaders read, and how

    return tuple(BUILDERS)


def _files_under(folder: Path) -> list[Path]:
    """The files under ``folder`` a loader could read (``datasets``' own JSON included)."""
    if not folder.is_dir():
        return []
    suffixes = _readable_suffixes()
    return sorted(path for path in folder.rglob("*")
                  if path.is_file() and path.suffix.lower() in suffixes and not path.name.endswith(".vocab.json"))


def _named_file_problem(paths: list[Path]) -> Optional[str]:
    """``first_problem`` of files named one by one (--data-files), whose suffix picks the reader."""
    suffixes = _readable_suffixes()
    for path in paths:
        if path.suffix.lower() not in suffixes and not path.is_dir():
            return f"{path}: no suffix a reader knows ({', '.join(suffixes)})"
    return first_problem(paths)


def _root_cause(error: BaseException) -> BaseException:
    seen = {id(error)}
    while (error.__cause__ or error.__context__) is not None and id(error.__cause__ or error.__context__) not in seen:
        error = error.__cause__ or error.__context__
        seen.add(id(error))
    return error


@contextlib.contextmanager
def quiet_loaders() -> Iterator[None]:
    """No log lines from datasets/pyarrow while trying the data: the one error line says it all."""
    loggers = [logging.getLogger(name) for name in ("datasets", "huggingface_hub", "fsspec")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _where(options: dict, task: str) -> tuple[str, list[Path], list[Path]]:
    """Where a run's data comes from as the user named it, the files named one by one, and the
    files of a named folder (looked at only once loading failed: a folder may hold files no
    reader opens)."""
    files = options.get("data_files")
    if files:
        if isinstance(files, str):
            from atnbench.data import parse_data_files

            files = parse_data_files(files)
        paths = [Path(p) for value in files.values() for p in ([value] if isinstance(value, str) else value)]
        return "--data-files", paths, []
    if options.get("data_dir"):
        folder = Path(options["data_dir"]).expanduser()
        return f"--data-dir {folder}", [], _files_under(folder)
    from atnbench.data.catalog import read_from_root
    from atnbench.data.common import data_root

    dataset = read_from_root(task, options)
    if dataset is not None and not (data_root() / dataset.subdir).is_dir():
        return f"no copy in the data root {data_root() / dataset.subdir}", [], []
    return f"the data root {data_root()}; `atnbench data verify` checks it", [], []


def check_task_data(config) -> None:
    """ConfigError (one line) unless the run's real data loads, or a user's task code makes one
    good batch (or source) at the run's settings; nothing for shipped generated tasks."""
    import torch

    from atnbench.tasks.lookup import task_for

    task = task_for(config)
    if "module" in (config.options or {}).get("user_task", {}):  # the user's code: one batch made and checked now
        from atnbench.tasks.usercode import probe

        probe(task, config)
        return
    if task.make_source is None:
        return
    if "problem" in (config.options or {}).get("user_task", {}):  # a user's data files: read as it resolved
        task.make_source(config, torch.device("cpu"))  # with T and val_samples applied, now
        return
    where, named, in_folder = _where(config.options or {}, task.name)
    problem = _named_file_problem(named)  # a plainly unreadable file: said before loading anything
    if problem:
        raise ConfigError(f"{task.name} data ({where}): {problem}")
    check_root_copy(task.name, config.options or {})
    try:
        with quiet_loaders():
            task.make_source(config, torch.device("cpu"))
    except SettingError:  # a setting the task cannot take: not the data's problem
        raise
    except Exception as error:  # noqa: BLE001 - whatever the reader raised, the data is what is wrong
        cause = _root_cause(error)
        said = _first_line(error) + (f" ({type(cause).__name__}: {_first_line(cause)})"
                                     if cause is not error and not isinstance(error, UserError) else "")
        raise ConfigError(f"{task.name} data ({where}): {first_problem(in_folder) or said}") from error


def check_root_copy(task: str, options: dict) -> None:
    """A shipped dataset read from the data root enters a run's id by its name, which stands for the
    published copy ``data prepare`` writes: where the loader would read anything else there (a copy
    that fails ``data verify``'s checks, or other files it takes first: a save_to_disk folder, Parquet
    beside the CSVs, the word-level files for the character ones), it is refused before the run
    (given with --data-dir, a copy's contents enter the id instead)."""
    from atnbench.data.catalog import loader_reads, read_from_root
    from atnbench.data.common import data_root

    dataset = read_from_root(task, options)
    if dataset is None:
        return
    folder = data_root() / dataset.subdir
    read = loader_reads(dataset, folder, options)
    if read is None:  # nothing there: the loader says where else it looked
        return
    problems = verify_copy(dataset, folder)
    remedy = f"`atnbench data prepare {dataset.name}` writes the published copy"
    published = {folder / name for name in dataset.files}
    reads = ("a run would read the datasets save_to_disk copy (dataset_dict.json) there"
             if (folder / "dataset_dict.json").is_file() else
             f"a run would read {', '.join(str(path.relative_to(folder)) for path in read[:3])}"
             + (", ..." if len(read) > 3 else "") + " there")
    if problems == [] and published and set(read) != published:  # the loader takes other files first
        problems = [f"{reads}, not the published copy's {', '.join(dataset.files)}"]
        remedy = "move those files out of that folder"
    elif problems is None:  # no published copy, but files the loader reads
        problems = [f"{reads}, and the published copy's {', '.join(dataset.files)} are missing"]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ConfigError(f"{task} data (the data root {folder}): not the published {dataset.name} copy, which a "
                          f"run's id stands for: {problems[0]}{more}; {remedy}, or give this copy with --data-dir "
                          f"(its contents then enter the run's id)")


def verify_copy(dataset, folder: Path) -> Optional[list[str]]:
    """``catalog.verify`` (None: no copy; [] good; else its problems), where a file its checks
    cannot even read is a problem naming that file instead of an exception."""
    from atnbench.data.catalog import copy_files, verify

    try:
        return verify(dataset, folder)
    except Exception as error:  # noqa: BLE001 - a garbled file: the checks' parsers raise anything
        return [first_problem(copy_files(dataset, folder)) or f"cannot be read ({_first_line(error)})"]

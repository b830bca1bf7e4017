"""``atnbench store export | import | merge``: results stores as portable JSON Lines files, and
several stores (a sweep split over machines) combined into one. The rules live in
``atnbench.evidence.transfer``."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.text import Text

from atnbench.cli.app import command_group, err, fail, user_errors
from atnbench.evidence import transfer
from atnbench.report.load import check_task
from atnbench.errors import UserError
from atnbench.run.outputs import RUN_EXPORT, STUDIES, check_keeps_runs, check_keeps_studies, check_output_file
from atnbench.cli import options
from atnbench.store import DEFAULT_STORE, STATUSES, ResultsStore, StoreError, check_store_path

store_app = command_group("store", "Move results between stores: export to / import from JSON Lines, merge stores.")

CONFLICT_EXIT = 1  # named in the import and merge help: keep them in step


def open_store(path: Path, create: bool = False, write: bool = False) -> ResultsStore:
    """The store at path (created only with create=True); one line and exit 2 if it is missing
    or unusable.

    Without create or write the store is opened read-only: reading commands change nothing and
    also work on a store they may not write.
    """
    try:
        return ResultsStore(path, create=create, read_only=not (create or write))
    except StoreError as error:
        fail(str(error).splitlines()[0])


def check_status(status: Optional[str]) -> None:
    if status is not None and status not in STATUSES:
        raise UserError(f"unknown status {status!r}; choose one of: {', '.join(STATUSES)}")


def check_sweep(results: ResultsStore, sweep: Optional[str]) -> None:
    """A --sweep filter naming no sweep of the store is a typo, not an empty selection (exit 2)."""
    if sweep is not None and sweep not in results.sweeps():
        known = ", ".join(results.sweeps()) or "none"
        fail(f"no sweep named {sweep!r} in {results.path} (sweeps there: {known})")


def _note_unchecked(recs: list[dict], source: str) -> None:
    note = transfer.unchecked_note(recs, source)
    if note is not None:
        err.print(Text(note), soft_wrap=True)


def _finish(tally: transfer.Tally, where: Path, held: int) -> None:
    for conflict in tally.conflicts:
        err.print(Text(conflict.line()), soft_wrap=True)
    err.print(Text(f"{where}: {tally.text()}; it holds {held} run{'s' if held != 1 else ''}"), soft_wrap=True)
    if tally.conflicts:
        raise typer.Exit(CONFLICT_EXIT)


@store_app.command("export")
@user_errors
def export_cmd(
    file: Path = typer.Argument(..., parser=options.file_path, help="JSON Lines file to write (one run per line); - for stdout."),
    task: options.TaskFilter = None,
    sweep: options.SweepFilter = None,
    status: options.StatusFilter = None,
    drop_superseded: bool = typer.Option(False, "--drop-superseded",
                                         help="Leave out stale runs (made by other code) that the store also holds "
                                              "finished by this code, same config: the published set stays current."),
    store: Path = typer.Option(DEFAULT_STORE, "--store", metavar="PATH", parser=options.store_path,
                              help="Results database (SQLite) to read."),
    studies_file: Optional[Path] = typer.Option(None, "--studies", metavar="FILE", parser=options.file_path,
                                                help="Also write the store's studies (plans and looks of "
                                                     "`sweep --until-decided`) to this JSON file."),
):
    """Write the store's runs (with curves and sweep memberships) as JSON Lines.

    Example: [bold]atnbench store export machine-a.jsonl --sweep table2-adding[/]
    """
    check_status(status)
    if str(file) != "-":
        check_output_file(file, "export to", store=store, export=RUN_EXPORT)  # not the store itself, not a device
    if studies_file is not None:  # before anything is written: a refusal leaves the runs' file as it was
        if str(studies_file) == "-":
            raise UserError("--studies -: give the studies a file's name (- is not the terminal here)")
        check_output_file(studies_file, "--studies", store=store, export=STUDIES)
        if str(file) != "-" and studies_file.expanduser().resolve() == file.expanduser().resolve():  # ../, links
            raise UserError(f"--studies {studies_file} is the runs' file too; give the studies a file of their own")
    with open_store(store) as results:
        check_sweep(results, sweep)
        check_task(results, task)
        recs = list(transfer.records(results, task=task, sweep=sweep, status=status, drop_superseded=drop_superseded))
        path = results.path
    exported = {record["run_id"] for record in recs}
    if str(file) != "-":
        check_keeps_runs(file, "export to", exported)
    studies = _studies_for(store, exported, task, sweep) if studies_file is not None else None
    if studies is not None:  # before the runs' file is written: a refusal leaves both as they were
        check_keeps_studies(studies_file, "--studies", {s.name for s in studies[0]})
    if str(file) == "-":
        n = transfer.write_lines(recs, sys.stdout)
        sys.stdout.flush()
    else:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(f".{file.name}.tmp")
        with tmp.open("w", encoding="utf-8") as stream:
            n = transfer.write_lines(recs, stream)
        tmp.replace(file)  # a reader never sees half a file
    err.print(Text(f"exported {n} run{'s' if n != 1 else ''} from {path} to {file}"), soft_wrap=True)
    if studies is not None:
        _export_studies(studies_file, *studies)


def _studies_for(store: Path, exported: set[str], task: Optional[str] = None,
                 sweep: Optional[str] = None) -> tuple[list, list[str]]:
    """(the studies whose looks used only runs of this export, the names of the others): an import
    checks each look against the runs it names, so a study without them would refuse the pair
    (filters: --task, --sweep, ...). A study with no look yet goes unless ``--task`` or ``--sweep``
    names another than its own."""
    from atnbench.report import study

    with open_store(store) as results:
        studies = study.load(results)
    kept = [s for s in studies if s.runs_looked_at() <= exported
            and (s.runs_looked_at() or (task in (None, s.task) and sweep in (None, s.sweep)))]
    return kept, [s.name for s in studies if s not in kept]


def _export_studies(path: Path, kept: list, left: list[str]) -> None:
    import json
    from dataclasses import asdict

    if left:
        err.print(Text(f"--studies: left out {', '.join(left)}: their runs are not in this export"),
                  soft_wrap=True)
    records = [asdict(s) for s in kept]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    err.print(Text(f"exported {len(records)} stud{'ies' if len(records) != 1 else 'y'} to {path}"), soft_wrap=True)


@store_app.command("import")
@user_errors
def import_cmd(
    file: Path = typer.Argument(..., help="JSON Lines file written by `atnbench store export`; - reads standard input."),
    store: Path = typer.Option(DEFAULT_STORE, "--store", metavar="PATH", parser=options.store_path,
                              help="Results database (SQLite) to import into (created if missing)."),
    studies_file: Optional[Path] = typer.Option(None, "--studies", metavar="FILE",
                                                help="Also bring in the studies of this JSON file (`store export "
                                                     "--studies`): a plan never changes, looks are only added; "
                                                     "each look's decisions are recomputed from its runs, and a "
                                                     "study they do not give is refused with nothing imported."),
    include: options.Include = None,
):
    """Bring the runs of a JSON Lines file into a store.

    Idempotent: importing twice changes nothing. A run there with the same numbers stays (sweeps united).

    A running or failed row is replaced by a finished one.

    A conflict (same run id, different numbers) is a line on stderr; the store's row is kept; exit code 1.

    Every record is checked first (types, finite numbers, known task, run-id format, run id recomputed from the config; not where the config names data files absent here: a note counts those): one bad record is one line naming the file, line, run and field, and nothing of the file is imported (exit code 2).

    Example: [bold]atnbench store import machine-a.jsonl --store all.db[/]
    """
    recs = transfer.read_lines(file)  # every line checked before anything is written
    _note_unchecked(recs, str(file))
    studies = _read_studies(studies_file) if studies_file is not None else None
    with _gone_if_it_fails(store), open_store(store, create=True) as results:
        with results.batch():  # runs and studies land together, or (a study its runs do not give) neither
            tally = transfer.combine_all(results, recs, str(file))
            counts = _bring_in_studies(results, studies, str(studies_file)) if studies is not None else None
        path, held = results.path, len(results.run_ids())
    if counts is not None:
        err.print(Text(f"{studies_file}: {counts[0]} stud{'ies' if counts[0] != 1 else 'y'} added or extended, "
                       f"{counts[1]} already there"), soft_wrap=True)
    _finish(tally, path, held)


@contextmanager
def _gone_if_it_fails(store: Path) -> Iterator[None]:
    """Nothing brought in: no empty store (nor the folders made for it) left where there was none."""
    target = Path(store).expanduser().absolute()
    made = next((folder for folder in reversed(target.parents) if not folder.exists()), None)  # folders it creates
    new = not target.exists()
    try:
        yield
    except BaseException:
        if new:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{target}{suffix}").unlink(missing_ok=True)
            for folder in target.parents if made is not None else ():
                try:
                    folder.rmdir()  # only while empty: nothing another process put there goes
                except OSError:
                    break
                if folder == made:
                    break
        raise


def _read_studies(path: Path):
    """The studies of a ``--studies`` file, their shape checked before any store is opened."""
    from atnbench.report import study
    from atnbench.userfiles import parse_json

    if not path.is_file():
        raise UserError(f"--studies {path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise UserError(f"--studies {path}: not JSON ({error})") from None
    return study.from_records(parse_json(text, f"--studies {path}"), str(path))


def _bring_in_studies(results, studies, source: str) -> tuple[int, int]:
    from atnbench.report import study

    return study.bring_in(results, studies, source)


@store_app.command("merge")
@user_errors
def merge_cmd(
    output: Path = typer.Argument(..., parser=options.store_path, help="Store to merge into (created if missing; runs already there count like an earlier source)."),
    sources: list[Path] = typer.Argument(..., parser=options.store_path, help="Stores to read (never written)."),
    include: options.Include = None,
):
    """Combine several stores into one, e.g. the halves of a sweep run on two machines.

    The rules of [bold]import[/]; the order of the sources does not matter except in a conflict.

    The sources' confirmatory studies come too (as [bold]import --studies[/]): each checked against its runs.

    A conflict (same run id, different numbers) is a line on stderr; the first row is kept; exit code 1.

    Example: [bold]atnbench store merge all.db machine-a.db machine-b.db[/]
    """
    target = output.expanduser().absolute()
    seen = {target.resolve()}
    for source in sources:
        check_store_path(source, create=False, write=False)  # a folder, a missing path: each said as it is
        where = source.expanduser().absolute().resolve()
        if where in seen:
            what = "the output store" if where == target.resolve() else "named twice"
            raise UserError(f"{source} is {what}; name each store once")
        seen.add(where)
    for source in sources:  # every source readable before the output is created or written
        open_store(source).close()
    if target.exists():  # an unusable output is named before the sources are read
        open_store(target, write=True).close()
    else:
        check_store_path(target, create=True, write=True)
    tally = transfer.Tally()
    every = [(source, transfer.checked_records(source)) for source in sources]  # all checked first
    for source, recs in every:
        _note_unchecked(recs, str(source))
    studied = []
    with _gone_if_it_fails(target), open_store(target, create=True) as results:
        with results.batch():  # one transaction: a failure leaves the output as it was
            for source, recs in every:
                transfer.combine_all(results, recs, str(source), tally)
            for source in sources:  # a study's verdicts come with its runs (checked against them)
                with open_store(source) as kept:
                    studies = _studies_of(kept)
                if studies:
                    added, _ = _bring_in_studies(results, studies, str(source))
                    studied.append(f"{source}: {added} stud{'ies' if added != 1 else 'y'} added or extended")
        path, held = results.path, len(results.run_ids())
    for line in studied:
        err.print(Text(line), soft_wrap=True)
    _finish(tally, path, held)


def _studies_of(results) -> list:
    from atnbench.report import study

    return study.load(results)

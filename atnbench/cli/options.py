"""The one vocabulary of command-line flags. Every command that takes one of these flags takes
it from here, so a flag has one name, one meaning and one default across atnbench:

==================  ===========================================================  ==================
flag                meaning                                                      default
==================  ===========================================================  ==================
--output, -o FILE   a FILE the command writes (run: the JSON record; bench:      none
                    its records, CSV where FILE ends in .csv, else JSON;
                    report, runs export: the report/records, format from
                    --format or the suffix)
--out-dir DIR       a FOLDER the command writes several files into (figures,     atnbench-results/
                    CSV): plot, stats, report (its figures)                      <command>
--format, -f        what the command prints (or writes to --output): table,      table
                    json, csv, markdown, latex -- each command its own subset
--threads INTEGER   torch CPU threads. 1 everywhere: sweeps run one thread per   1
                    run, and results differ in the last bits between counts
--device            auto (CUDA, then Apple MPS, then the CPU), cpu, cuda, mps    auto
--seed INTEGER      one random seed (model initialisation and data); sweep:     the preset's / 0
                    a seed or a list, the same as --seeds
--seeds TEXT        several seeds: 0,1,2 or a range 0-4                          the sweep's
--config PATH       a YAML/JSON file of config keys, named as the flags; flags   none
                    given on the command line override it
--store PATH        the results database (SQLite)                                atnbench-results/
                                                                                 atnbench.db
--quiet, -q         no progress output                                           off
--T INTEGER         sequence length                                              the preset's
--k                 the ATN window in time steps (a comma list where a command   the preset's
                    compares several: bench, stats, gradcheck)
--include DIR       a folder of user task files (NAME.yaml), before              $ATNBENCH_TASKS
                    $ATNBENCH_TASKS; every command that names a task
--task, --T,        which stored runs a reading command takes (report, plot,     all
--norm, --sweep,    runs list|export, store export): this task, length,
--since, --status   normalization, sweep, age or status
==================  ===========================================================  ==================

Old spellings (``--out`` for a folder or, in ``run``, a file; ``--json``/``--csv``;
``report --plots``) stay as hidden aliases that print one deprecation line
(:func:`deprecated`), so scripts keep working.

How to use: annotate a command's parameter with the alias and give the default, e.g.
``device: options.Device = options.DEVICE`` or
``output: Annotated[Optional[Path], options.output_file("the JSON records")] = None``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from atnbench.errors import UserError
from atnbench.limits import INT_MAX, MAX_THREADS, SEED_MAX
from atnbench.store import DEFAULT_STORE, STATUSES, check_store_path

DEVICES = ("auto", "cpu", "cuda", "mps")
DEVICE = "auto"
THREADS = 1
FORMATS = ("table", "json", "csv", "markdown", "latex")


def output_file(what: str) -> typer.models.OptionInfo:
    """``--output/-o FILE``: a file the command writes ``what`` into. The command checks it with
    ``atnbench.run.outputs.check_output_file`` before any work (not click's ``dir_okay``), so every
    command words a folder given as a file alike."""
    return typer.Option("--output", "-o", metavar="FILE", parser=output_path,
                        help=f"Write {what} to this FILE (replacing it, unless it is a results store or an export holding runs "
                             f"this would lose).")


def file_path(text: str) -> Path:
    """A FILE argument as a Path, refusing one that ends with a slash: ``Path`` drops it, and
    ``-o reports/`` would write a file named ``reports``."""
    if text.endswith("/"):
        raise typer.BadParameter(f"{text} ends with '/', a folder; give the name of a file in it")
    return Path(text)


def output_path(text: str) -> Path:
    """``file_path`` for ``--output``, where ``-`` is not the terminal (that is where the command
    prints without ``--output``): it would be a file named ``-``."""
    if text == "-":
        raise typer.BadParameter("- is not a file's name here; without --output the command prints to the terminal")
    return file_path(text)


def store_path(text) -> Path:
    """A results store's path (``--store``, ``store merge``'s stores): the SQLite file itself.
    ``trail/`` would create a file named ``trail`` (``Path`` drops the slash) and ``-`` one named
    ``-``, where export and import read ``-`` as the terminal; both are refused."""
    text = str(text)
    if text == "-":
        raise typer.BadParameter("- is not a results store: give the path of its SQLite file")
    if text.endswith("/"):
        raise typer.BadParameter(f"{text} ends with '/', a folder; give the path of the database file inside it "
                                 f"(e.g. {text}{DEFAULT_STORE.name})")
    return Path(text)


def out_dir(what: str) -> typer.models.OptionInfo:
    """``--out-dir DIR``: the folder the command writes its files (``what``) into; checked with
    ``atnbench.run.outputs.check_output_dir`` before any work (one wording across commands)."""
    return typer.Option("--out-dir", metavar="DIR", help=f"Folder for {what}.")


def output_format(choices: tuple[str, ...], note: str = "") -> typer.models.OptionInfo:
    """``--format/-f``: one of ``choices`` (a subset of FORMATS, the first the default); check the
    value with :func:`check_format` (one line on a mistake, not click's usage panel)."""
    unknown = set(choices) - set(FORMATS)
    assert not unknown, unknown  # a new format goes into FORMATS first, so every command spells it alike
    return typer.Option("--format", "-f", metavar=_choices(choices), show_default=False,
                        help=f"Output format: {', '.join(choices)} (default: {choices[0]}{note}).")


def check_format(fmt: Optional[str], choices: tuple[str, ...]) -> str:
    """The format asked for (``choices[0]`` when none; any case, as `runs export` took it), or a
    user error naming the choices."""
    if fmt is None:
        return choices[0]
    if fmt.lower() not in choices:
        raise UserError(f"unknown --format {fmt!r}; choose one of: {', '.join(choices)}")
    return fmt.lower()


def _choices(choices) -> str:
    return "[" + "|".join(choices) + "]"


def k_list(what: str = "") -> typer.models.OptionInfo:
    """``--k`` where a command compares several windows: a comma list of whole numbers."""
    return typer.Option("--k", metavar="K[,K...]", help=f"ATN windows in time steps, comma-separated{what}.")


def whole_numbers(text: str, flag: str, minimum: int = 1) -> list[int]:
    """A comma list of whole numbers (``--k 5,25,55``), each in [minimum, INT_MAX], duplicates dropped."""
    values = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        try:
            value = int(item)
        except ValueError:
            raise UserError(f"{flag} takes whole numbers separated by commas, got {item!r}") from None
        if not minimum <= value <= INT_MAX:
            raise UserError(f"{flag} values must be >= {minimum}, got {value}" if value < minimum else
                             f"{flag} values must be <= {INT_MAX}, got {value}")
        values.append(value)
    if not values:
        raise UserError(f"{flag} needs at least one value")
    return list(dict.fromkeys(values))


def seed_in_range(value: Optional[int]) -> Optional[int]:
    """typer callback for every ``--seed``: the RunConfig's range (0 to SEED_MAX) and words, where
    it is typed; invariances and gradcheck build no RunConfig, and a seed past 2**64 overflowed
    deep inside torch."""
    if value is not None and not 0 <= value <= SEED_MAX:
        raise typer.BadParameter(f"seed must be {'>= 0' if value < 0 else f'<= {SEED_MAX}'}, got {value}")
    return value


Device = Annotated[str, typer.Option("--device", metavar=_choices(DEVICES),
                                     help="auto (CUDA, then Apple MPS, then the CPU), cpu, cuda or mps.")]
Threads = Annotated[int, typer.Option("--threads", help="torch CPU threads. Results differ in the last bits "
                                      "between thread counts; sweeps use 1 per run, so the default matches them.")]
# run and sweep: not given (None), the --config file's value counts (else auto / 1), as for every setting
ConfigDevice = Annotated[Optional[str], typer.Option(
    "--device", metavar=_choices(DEVICES), show_default=f"{DEVICE}, or the --config file's device",
    help="auto (CUDA, then Apple MPS, then the CPU), cpu, cuda or mps.")]
ConfigThreads = Annotated[Optional[int], typer.Option(
    "--threads", show_default=f"{THREADS}, or the --config file's threads",
    help="torch CPU threads. Results differ in the last bits between thread counts; sweeps use 1 per run, so the "
         "default matches them.")]
Seed = Annotated[int, typer.Option("--seed", callback=seed_in_range,
                                   help="Random seed (model initialisation and data).")]
Seeds = Annotated[Optional[str], typer.Option("--seeds", "--seed", metavar="SEEDS",
                                              help="Seeds, e.g. 0,1,2 or a range 0-4; --seed says the same "
                                                   "(as in sweep).")]
# no dir_okay=False: runspec.read_config_file words a folder (and every other bad file) in one line
Config = Annotated[Optional[Path], typer.Option("--config", metavar="PATH",
                                                help="YAML/JSON file of config keys or flag names (steps or "
                                                     "iters, batch_size or batch-size); flags on the command "
                                                     "line override it.")]
Store = Annotated[Path, typer.Option("--store", metavar="PATH", parser=store_path, help="Results database (SQLite).")]
STORE = DEFAULT_STORE


def check_store_early(path: Path) -> None:
    """Refuse a store path every use of it refuses (a folder, a path under a file, not a regular
    file, unreadable) in the line the store gives, before the command imports its work (torch:
    ~3 s). A missing store is each command's own question (``run`` makes one)."""
    check_store_path(path, create=True, write=False)


Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")]
OptionalT = Annotated[Optional[int], typer.Option("--T", min=1, help="Sequence length (default: the preset's).")]


def check_backend(backend: str, address: Optional[str], workers: Optional[int]) -> None:
    """``--backend``, ``--address`` and ``--workers`` of ``sweep`` and ``reproduce``, one line each."""
    from atnbench.sweep import BACKENDS

    if backend not in BACKENDS:
        raise UserError(f"unknown --backend {backend!r}; choose one of: {', '.join(BACKENDS)}")
    if address is not None and backend != "ray":
        raise UserError("--address is for --backend ray")
    if workers is not None and workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    if backend == "ray" and workers is not None:
        raise UserError("--workers is for the local backend; Ray schedules the runs on the cluster's CPUs")


def include_folders(folders: Optional[list[Path]]) -> Optional[list[Path]]:
    """typer callback for every ``--include``: the folders join the user-task search before the
    command looks up its task (atnbench/tasks/taskfiles.py)."""
    if folders:
        from atnbench.tasks.taskfiles import include

        try:
            include(folders)
        except UserError as err:
            raise typer.BadParameter(str(err).removeprefix("--include ")) from None
    return folders


Include = Annotated[Optional[list[Path]], typer.Option(
    "--include", metavar="DIR", callback=include_folders,
    help="A folder of your own task files (NAME.yaml), searched before $ATNBENCH_TASKS; repeatable. "
         "See docs/adding-a-task.md.")]


def check_threads(threads: int) -> int:
    """``--threads`` as every command words a bad count (one line, exit 2)."""
    if not 1 <= threads <= MAX_THREADS:
        raise UserError(f"--threads must be between 1 and {MAX_THREADS}, got {threads}")
    return threads




def deprecated_flag(old: str, replacement: str, metavar: Optional[str] = None, is_flag: bool = False):
    """A hidden alias for an old spelling; pass the value through :func:`deprecated`."""
    if is_flag:
        return typer.Option(False, old, hidden=True, help=f"Deprecated: use {replacement}.")
    return typer.Option(None, old, hidden=True, metavar=metavar, help=f"Deprecated: use {replacement}.")


def deprecated(value, old: str, replacement: str, current=None):
    """The value of a deprecated alias (with one line on stderr saying what replaces it), or
    ``current`` when the alias was not given. Both given: a user error."""
    from atnbench.cli.app import err

    if value in (None, False):
        return current
    if current not in (None, False):
        raise UserError(f"{old} and {replacement} say the same thing; give only {replacement}")
    err.print(f"[yellow]note:[/] {old} is deprecated; use {replacement}", highlight=False)
    return value


# The run filters of the commands that read a store (report, plot, runs list|export, store export).
TaskFilter = Annotated[Optional[str], typer.Option(
    "--task", metavar="TASK", help="Only this task (copying, adding, denoise, ...).")]
TFilter = Annotated[Optional[int], typer.Option("--T", metavar="INTEGER", help="Only this sequence length.")]
NormFilter = Annotated[Optional[str], typer.Option(
    "--norm", metavar="NORM", help="Only this normalization (ln, atn, ...; none: the plain cells; lstm, gru: one plain cell).")]
SweepFilter = Annotated[Optional[str], typer.Option(
    "--sweep", metavar="SWEEP",
    help="Only the runs of this sweep; in report and plot a k-sweep (k-ablation, k-scan) shows k against loss.")]
SinceFilter = Annotated[Optional[str], typer.Option(
    "--since", metavar="WHEN", help="Only runs created at or after this ISO date/time, or within an age such as 12h, 7d.")]
StatusFilter = Annotated[Optional[str], typer.Option(
    "--status", metavar="STATUS", help=f"Only runs with this status ({', '.join(STATUSES)}).")]

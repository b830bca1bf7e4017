"""``atnbench run`` and ``atnbench models``. The flags, parsed; the work is ``atnbench.run.command``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Optional

import typer

from atnbench.cli import options
from atnbench.cli.app import app, out, sigterm_interrupts, user_errors
from atnbench.cli.run_flags import config_flags, with_settings
from atnbench.settings import RUN_SETTINGS
from atnbench.tables import FitTable

Task = Annotated[str, typer.Argument(help="Task to train on (see `atnbench tasks`).")]
Resume = Annotated[bool, typer.Option(
    "--resume", help="Continue this config's interrupted run from its checkpoint: the default wherever one exists "
                     "(it reaches the numbers of an uninterrupted run, resumed in the processor class it started in); "
                     "given, a missing checkpoint is a note and the "
                     "run starts from scratch.")]
Force = Annotated[bool, typer.Option(
    "--force", help="Train from scratch: again although the store holds this config's finished run (replacing its "
                    "row), or over an interrupted run's checkpoint.")]
KeepModel = Annotated[bool, typer.Option(
    "--keep-model/--no-keep-model", help="Keep the final and the best-validation weights in the store (for "
                                         "`atnbench evaluate` and `stats --from-run`).")]
CheckpointEvery = Annotated[int, typer.Option(
    "--checkpoint-every", min=1, help="Checkpoint every N evaluations (what an interrupted run resumes from).")]
Format = Annotated[Optional[str], options.output_format(("table", "json"), "; json prints only the result record")]
Output = Annotated[Optional[Path], options.output_file("the result record as JSON (as well as printing)")]


def task_options(task: str, data_dir: Optional[Path], data_files: Optional[str],
                  permute: Optional[bool]) -> Optional[dict]:
    """The real-data flags as ``options`` (merged over the preset's key by key); paths made absolute."""
    from atnbench.config import ConfigError
    from atnbench.data import parse_data_files
    from atnbench.tasks import get_task

    if (data_dir, data_files, permute) != (None, None, None) and get_task(task).make_source is None:
        raise ConfigError(f"{task} generates its data: --data-dir, --data-files and --permute are for real-data tasks")
    extras = {}
    if data_dir is not None:
        extras["data_dir"] = str(data_dir.expanduser().absolute())
    if data_files is not None:
        extras["data_files"] = parse_data_files(data_files)
    if permute is not None:
        extras["permute"] = permute
    return extras or None


@app.command()
@user_errors
@with_settings(RUN_SETTINGS, after="task")
def run(task: Task, config: options.Config = None, device: options.ConfigDevice = None,
        threads: options.ConfigThreads = None, store: options.Store = options.STORE, resume: Resume = False,
        force: Force = False, keep_model: KeepModel = True, checkpoint_every: CheckpointEvery = 2, fmt: Format = None,
        output: Output = None, quiet: options.Quiet = False, include: options.Include = None,
        json_old: bool = options.deprecated_flag("--json", "--format json", is_flag=True),
        out_old: Optional[Path] = options.deprecated_flag("--out", "--output", metavar="FILE"), **settings):
    """Train one model on one task and record it in the results store.

    Example: [bold]atnbench run adding --T 200 --norm atn --k 5 --budget 0.01[/]
    """
    options.check_store_early(store)
    from atnbench.run.command import RunRequest, run_command

    fmt = options.check_format(options.deprecated("json" if json_old else None, "--json", "--format json", fmt),
                               ("table", "json"))
    out_file = options.deprecated(out_old, "--out", "--output", output)
    if threads is not None:  # None: the --config file's, else 1 (as device: the file's, else auto)
        options.check_threads(threads)
    request = RunRequest(
        task=task, flags=config_flags(RUN_SETTINGS, settings, functools.partial(task_options, task)), store=store,
        config_file=config, budget=settings["budget"], device=device, threads=threads, resume=resume, force=force,
        keep_model=keep_model, checkpoint_every=checkpoint_every, json_out=fmt == "json", out_file=out_file,
        out_name="--out" if out_old is not None else "--output", quiet=quiet)
    with sigterm_interrupts() as interrupt:
        try:
            code = run_command(request)
        except KeyboardInterrupt:
            raise typer.Exit(128 + interrupt.signum) from None
    if code:
        raise typer.Exit(code)


@app.command()
@user_errors
def models():
    """List the model zoo: each model, the flags that select it, what it is and its paper."""
    from atnbench.registry import model_flags, models as all_models

    # two lines per model (name over its flags, description over its paper): readable at 80 columns
    table = FitTable(title="atnbench models", show_lines=True, lift=False)
    table.add_column("model / flags", no_wrap=True)
    table.add_column("what it is / reference")
    for entry in all_models().values():
        table.add_row(f"[bold]{entry.name}[/]\n[dim]{model_flags(entry)}[/]",
                      f"{entry.description}\n[dim]{entry.reference}[/]")
    out.print(table)

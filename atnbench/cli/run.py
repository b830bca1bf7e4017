"""``atnbench run`` and ``atnbench models``."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from atnbench.run.checkpoint import checkpoint_file, discard, hold_run
from atnbench.cli import options
from atnbench.cli.app import app, err, fail, out, sigterm_interrupts, user_errors
from atnbench.cli.run_flags import config_flags, with_settings
from atnbench.evidence.equivalence import finished_equivalent
from atnbench.run.learned import at_baseline, stopped_early
from atnbench.run.runspec import resolve_run
from atnbench.run.selection import metric_name, selected_summary
from atnbench.settings import RUN_SETTINGS
from atnbench.store import ResultsStore
from atnbench.tables import FitTable
from atnbench.tasks import get_task
from atnbench.run.warmup import load_fast_path
from atnbench.zoo import models as all_models, resolve_device
from atnbench.evidence.identity import run_id_of

log = logging.getLogger("atnbench")  # its warnings print as "note:" lines (cli.app)


def _fmt(value, digits: int = 5) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def window_text(config) -> str:
    """", k=5" for a windowed norm (ATN); nothing for the norms without a window."""
    from atnbench.nn.schemes import SCHEMES

    return f", k={config.k}" if SCHEMES[config.norm].windowed else ""


def measured_rows(record: dict) -> list[tuple[str, str]]:
    """The task's own measure on validation (the best attained: validation selects) and the test
    numbers at the evaluation validation chose, which the kept "best" weights give again
    (`atnbench evaluate`): the test split never selects (``atnbench.run.selection``)."""
    metric = record.get("metric")
    name = metric_name(metric) if metric else None
    at = f" (step {record['best_step']})" if record.get("best_step") is not None else ""
    rows = []
    if metric and record.get(f"val_{metric}") is not None:
        rows.append((f"best validation {name}", _fmt(record[f"val_{metric}"])))
    if record.get("test_loss") is not None:
        rows.append((f"test loss at best val.{at}", _fmt(record["test_loss"])))
    if metric and record.get(f"test_{metric}") is not None:
        rows.append((f"test {name} at best val.{at}", _fmt(record[f"test_{metric}"])))
    return rows


def summary_table(config, record: dict, store: Optional[Path] = None) -> FitTable:
    """The result of a run, one line per number, and the store it was written to."""
    table = FitTable(title=f"atnbench run {config.task}  (run {record['run_id']})", show_header=False, lift=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    status_style = {"done": "green", "diverged": "yellow", "failed": "red"}.get(record["status"], "")
    rows = [
        ("status", f"[{status_style}]{record['status']}[/]" if status_style else record["status"]),
        ("model", f"{record['model']}  (norm={config.norm}{window_text(config)}, hidden={config.hidden})"),
        ("task", f"{config.task}  T={config.T}  seed={config.seed}"),
        ("min train loss", _fmt(record.get("min_train_loss"))),
        ("min validation loss", _fmt(record.get("min_val_loss"))),
        ("final train loss", _fmt(record.get("final_train_loss"))),
        ("final validation loss", _fmt(record.get("final_val_loss"))),
        ("task baseline", _fmt(record.get("baseline"))),
        ("steps", f"{record['steps']} of {config.steps}" + (
            f"  (stopped early: no lower validation loss in {config.patience} evaluations)"
            if stopped_early(config, record) else "")),
        ("wall time", f"{record['wall_s']:.1f} s"),
        ("steps/s", _fmt(record.get("steps_per_s"), 4)),
        ("parameters", f"{record['params']:,}"),
    ]
    at = next(i for i, (key, _) in enumerate(rows) if key == "final validation loss") + 1
    rows[at:at] = measured_rows(record)
    if config.budget < 1:
        protocol = f"task {config.task}'s defaults" if "user_task" in (config.options or {}) else "the preset protocol"
        rows.append(("budget", f"[yellow]shrunk to {config.budget:g} of {protocol} "
                               f"(not comparable to full-protocol numbers)[/]"))
    if record.get("error"):
        rows.append(("note", escape(record["error"])))
    if store is not None:
        rows.append(("store", escape(str(store))))
    for key, value in rows:
        table.add_row(key, value)
    return table


def task_options(task: str, data_dir: Optional[Path], data_files: Optional[str],
                  permute: Optional[bool]) -> Optional[dict]:
    """The real-data flags as ``options`` (merged over the preset's key by key); paths made absolute."""
    from atnbench.config import ConfigError
    from atnbench.data import parse_data_files

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


class ResumeNote:
    """A reporter that says, in one note line, that the run resumes from its checkpoint.

    Said at ``start``, when the checkpoint has been read and restored (a corrupt one is set aside
    and the run starts from step 0 instead, with its own note), and not where the run is busy
    elsewhere (refused before it starts)."""

    def __init__(self, inner):
        self.inner = inner

    def start(self, run_id, total, done):
        if done:
            log.warning(f"run {run_id} did not finish: resuming it from its checkpoint at step {done} of {total} "
                        f"(a resumed run reaches the numbers of an uninterrupted one; --force starts it over)")
        self.inner.start(run_id, total, done)

    def step(self, step, loss):
        self.inner.step(step, loss)

    def evaluated(self, step, train_loss, val_loss):
        self.inner.evaluated(step, train_loss, val_loss)

    def finish(self, status):
        self.inner.finish(status)


@app.command()
@user_errors
@with_settings(RUN_SETTINGS, after="task")
def run(
    task: str = typer.Argument(..., help="Task to train on (see `atnbench tasks`)."),
    config: options.Config = None,
    device: options.Device = options.DEVICE,
    threads: options.Threads = options.THREADS,
    store: options.Store = options.STORE,
    resume: bool = typer.Option(False, "--resume", help="Continue this config's interrupted run from its checkpoint: the default wherever one exists (it reaches the numbers of an uninterrupted run); given, a missing checkpoint is a note and the run starts from scratch."),
    force: bool = typer.Option(False, "--force", help="Train from scratch: again although the store holds this config's finished run (replacing its row), or over an interrupted run's checkpoint."),
    keep_model: bool = typer.Option(True, "--keep-model/--no-keep-model", help="Keep the final and the best-validation weights in the store (for `atnbench evaluate` and `stats --from-run`)."),
    checkpoint_every: int = typer.Option(2, "--checkpoint-every", min=1, help="Checkpoint every N evaluations (what an interrupted run resumes from)."),
    fmt: Annotated[Optional[str], options.output_format(("table", "json"), "; json prints only the result "
                                                                           "record")] = None,
    output: Annotated[Optional[Path], options.output_file("the result record as JSON (as well as printing)")] = None,
    quiet: options.Quiet = False,
    include: options.Include = None,
    json_old: bool = options.deprecated_flag("--json", "--format json", is_flag=True),
    out_old: Optional[Path] = options.deprecated_flag("--out", "--output", metavar="FILE"),
    **settings,
):
    """Train one model on one task and record it in the results store.

    Example: [bold]atnbench run adding --T 200 --norm atn --k 5 --budget 0.01[/]
    """
    from atnbench.tasks.datacheck import check_task_data
    from atnbench.run.outputs import check_output_file
    from atnbench.run.progress import reporter_for, run_label
    from atnbench.run.resources import check_buildable, check_fits
    from atnbench.run.runspec import config_estimate
    from atnbench.run.train import train

    if resume and force:
        fail("--resume continues the interrupted run from its checkpoint, --force starts it over: give one")
    fmt = options.check_format(options.deprecated("json" if json_old else None, "--json", "--format json", fmt),
                               ("table", "json"))
    json_out = fmt == "json"
    out_name = "--out" if out_old is not None else "--output"
    out_file = options.deprecated(out_old, "--out", "--output", output)
    options.check_threads(threads)
    flags = config_flags(RUN_SETTINGS, settings, functools.partial(task_options, task))
    torch_device = resolve_device(device)
    flags.update(threads=threads, device=torch_device.type)
    run_config = resolve_run(task, flags, config_file=config, variant=flags.pop("variant"), budget=settings["budget"])
    if out_file is not None:
        check_output_file(out_file, out_name, store=store)  # now, not after the training
    check_fits(config_estimate(run_config), str(torch_device))
    check_buildable(run_config)
    check_task_data(run_config)  # real data read once now: a garbled file is one line, the store untouched
    with ResultsStore(store) as results:
        store_path = results.path
        finished = results.get_run(run_id_of(run_config))
        if (finished is None or finished.status not in ("done", "diverged")) and not force:
            # the same experiment finished by other code that a canary vouched for (atnbench.evidence.equivalence)
            finished = finished_equivalent(results.runs(task=run_config.task, T=run_config.T),
                                           run_config.to_dict()) or finished
        if finished is not None and finished.status in ("done", "diverged"):
            if not force:
                vouched = "" if finished.run_id == run_id_of(run_config) else \
                    f" as run {finished.run_id}, made by code that computes the same numbers (atnbench canary)"
                err.print(f"run {run_id_of(run_config)} is already in {results.path}{vouched} ({finished.status}, "
                          f"{finished.updated_at[:19]} UTC): not training again. See it with "
                          f"`atnbench runs show {finished.run_id}`; --force trains again and replaces it.",
                          soft_wrap=True, highlight=False)
                if json_out:
                    from atnbench.run.train import result_record

                    summary = selected_summary(finished.summary, results.curve(finished.run_id))
                    print(json.dumps(result_record(run_config, finished.status, summary, finished.error)))
                return
            err.print(f"--force: training run {run_id_of(run_config)} again; its row in {results.path} will be replaced",
                      soft_wrap=True, highlight=False)
        has_checkpoint = checkpoint_file(results.path, run_id_of(run_config)).exists()
        if force and has_checkpoint:
            with hold_run(results.path, run_id_of(run_config)):  # RunBusy (exit 1) while it trains elsewhere
                discard(results.path, run_id_of(run_config))  # a later rerun must not resume the old attempt
            err.print(f"--force: starting run {run_id_of(run_config)} over; its checkpoint is discarded",
                      soft_wrap=True, highlight=False)
        reporter = reporter_for(run_label(run_config), quiet=quiet)
        if has_checkpoint and not (resume or force):
            reporter = ResumeNote(reporter)
        load_fast_path(run_config)  # a one-time build before the run's clock starts, not inside its timing
        with sigterm_interrupts() as interrupt:
            try:
                record = train(run_config, results, torch_device, reporter, resume=resume or (has_checkpoint and not force),
                               checkpoint_every=checkpoint_every, keep_model=keep_model)
            except KeyboardInterrupt:
                err.print(f"interrupted: run {run_id_of(run_config)} recorded as failed; continue it with the same command",
                          soft_wrap=True, highlight=False)
                raise typer.Exit(128 + interrupt.signum)
    if out_file is not None:
        out_file.parent.mkdir(parents=True, exist_ok=True)
        out_file.write_text(json.dumps(record, indent=2) + "\n")
    if json_out:
        print(json.dumps(record))
    else:
        out.print(summary_table(run_config, record, store_path))
    learned_nothing = at_baseline(run_config, record)
    if learned_nothing:
        log.warning(learned_nothing)
    if record["status"] != "done":
        raise typer.Exit(1)


@app.command()
@user_errors
def models():
    """List the model zoo: each model, the flags that select it, what it is and its paper."""
    from atnbench.zoo import model_flags

    # two lines per model (name over its flags, description over its paper): readable at 80 columns
    table = FitTable(title="atnbench models", show_lines=True, lift=False)
    table.add_column("model / flags", no_wrap=True)
    table.add_column("what it is / reference")
    for entry in all_models().values():
        table.add_row(f"[bold]{entry.name}[/]\n[dim]{model_flags(entry)}[/]",
                      f"{entry.description}\n[dim]{entry.reference}[/]")
    out.print(table)

"""``atnbench run`` below its flags: one config resolved, checked and trained (or found finished
in the store), and its result said. The command (``atnbench.cli.run``) parses the flags into a
:class:`RunRequest` and calls :func:`run_command`."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from rich.markup import escape

from atnbench.errors import UserError
from atnbench.evidence.equivalence import finished_equivalent
from atnbench.evidence.identity import code_fingerprint, run_id_of, run_ids_under
from atnbench.run.checkpoint import checkpoint_file, discard, hold_run
from atnbench.run.learned import at_baseline, stopped_early
from atnbench.run.runspec import device_and_threads, resolve_run
from atnbench.run.selection import attained_label, metric_name, selected_summary
from atnbench.store import ResultsStore
from atnbench.tables import FitTable, err, out
from atnbench.zoo import resolve_device

log = logging.getLogger("atnbench")  # its warnings print as "note:" lines (cli.app)


@dataclass(frozen=True)
class RunRequest:
    """What ``atnbench run`` was asked, its flags parsed: ``flags`` are the run settings given."""

    task: str
    flags: dict
    store: Path
    config_file: Optional[Path] = None
    budget: Optional[float] = None
    device: Optional[str] = None  # None: the --config file's device, else auto
    threads: Optional[int] = None  # None: the --config file's threads, else 1
    resume: bool = False
    force: bool = False
    keep_model: bool = True
    checkpoint_every: int = 2
    json_out: bool = False
    out_file: Optional[Path] = None
    out_name: str = "--output"
    quiet: bool = False


def _fmt(value, digits: int = 5) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def window_text(config) -> str:
    """", k=5" for a windowed norm (ATN); nothing for the norms without a window."""
    from atnbench.registry import SCHEMES

    return f", k={config.k}" if SCHEMES[config.norm].windowed else ""


def measured_rows(record: dict) -> list[tuple[str, str]]:
    """The task's own measure on validation (the best attained over the evaluations, labelled so:
    it need not be at the evaluation validation's loss chose) and the test numbers at that
    evaluation, which the kept "best" weights give again (`atnbench evaluate`): the test split
    never selects (``atnbench.run.selection``)."""
    metric = record.get("metric")
    name = metric_name(metric) if metric else None
    at = f" (step {record['best_step']})" if record.get("best_step") is not None else ""
    rows = []
    if metric and record.get(f"val_{metric}") is not None:
        rows.append((attained_label(metric), _fmt(record[f"val_{metric}"])))
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


class ResumeNote:
    """A reporter that says, in one note line, that the run resumes from its checkpoint.

    Said at ``start``, when the checkpoint has been read and restored (a corrupt one is set aside
    and the run starts from step 0 instead, with its own note), and not where the run is busy
    elsewhere (refused before it starts)."""

    def __init__(self, inner, classes_of: Callable[[str], Optional[list]] = lambda run_id: None):
        self.inner, self.classes_of = inner, classes_of

    def start(self, run_id, total, done):
        if done:
            classes = self.classes_of(run_id)  # set when this process's class is not the one it started in
            promise = (f"it has been trained in processor classes {' and '.join(classes)}, so its numbers will "
                       f"be neither class's" if classes else
                       "a resumed run reaches the numbers of an uninterrupted one")
            log.warning(f"run {run_id} did not finish: resuming it from its checkpoint at step {done} of {total} "
                        f"({promise}; --force starts it over)")
        self.inner.start(run_id, total, done)

    def step(self, step, loss):
        self.inner.step(step, loss)

    def evaluated(self, step, train_loss, val_loss):
        self.inner.evaluated(step, train_loss, val_loss)

    def finish(self, status):
        self.inner.finish(status)


def run_command(request: RunRequest) -> int:
    """Train the run ``request`` asks for (or say that the store holds it finished); its exit code:
    0 done, 1 diverged or failed. Ctrl-C (or SIGTERM made one) records it as failed and goes on up."""
    from atnbench.run.outputs import check_output_file, check_store_outside_data
    from atnbench.run.resources import check_buildable, check_fits
    from atnbench.run.runspec import config_estimate
    from atnbench.tasks.datacheck import check_task_data

    if request.resume and request.force:
        raise UserError("--resume continues the interrupted run from its checkpoint, --force starts it over: give one")
    device, threads = device_and_threads(request.device, request.threads, request.config_file)
    torch_device = resolve_device(device)
    flags = {**request.flags, "threads": threads, "device": torch_device.type}
    run_config = resolve_run(request.task, flags, config_file=request.config_file, variant=flags.pop("variant"),
                             budget=request.budget)
    check_store_outside_data([run_config], request.store)
    if request.out_file is not None:
        check_output_file(request.out_file, request.out_name, store=request.store)  # now, not after the training
        if request.out_file.suffix.lower() == ".csv":
            raise UserError(f"{request.out_name} {request.out_file}: run writes its result record as JSON, which a "
                            f".csv file would not hold; give the file a .json suffix (a CSV of runs: `atnbench "
                            f"runs export -o FILE.csv`)")
    check_fits(config_estimate(run_config), str(torch_device))
    check_buildable(run_config)
    check_task_data(run_config)  # real data read once now: a garbled file is one line, the store untouched
    with ResultsStore(request.store) as results:
        store_path = results.path
        stored = _already_finished(request, run_config, results)
        if stored is not None:  # said, not trained: its record and its outcome, as when it trained
            _write_record(request, stored)
            return 0 if stored["status"] == "done" else 1
        record = _train(request, run_config, results, torch_device)
    _write_record(request, record)
    if not request.json_out:
        out.print(summary_table(run_config, record, store_path))
    learned_nothing = at_baseline(run_config, record)
    if learned_nothing:
        log.warning(learned_nothing)
    return 0 if record["status"] == "done" else 1


def _write_record(request: RunRequest, record: dict) -> None:
    """The result record to ``--output`` (checked before any work) and, with ``-f json``, printed."""
    if request.out_file is not None:
        request.out_file.parent.mkdir(parents=True, exist_ok=True)
        request.out_file.write_text(json.dumps(record, indent=2) + "\n")
    if request.json_out:
        print(json.dumps(record))


def _already_finished(request: RunRequest, run_config, results) -> Optional[dict]:
    """Whether the store holds this run finished (or the same experiment finished by other code
    that a canary vouched for, ``atnbench.evidence.equivalence``): then it is said, not trained,
    unless --force, which says that it trains again. Its result record where it is not trained again, else None."""
    run_id = run_id_of(run_config)
    finished = results.get_run(run_id)
    if (finished is None or finished.status not in ("done", "diverged")) and not request.force:
        finished = finished_equivalent(results.runs(task=run_config.task, T=run_config.T),
                                       run_config.to_dict()) or finished
    if finished is None or finished.status not in ("done", "diverged"):
        return None
    if request.force:
        err.print(f"--force: training run {run_id} again; its row in {results.path} will be replaced",
                  soft_wrap=True, highlight=False)
        return None
    if finished.run_id == run_id:
        vouched = ""
    elif finished.run_id in run_ids_under(run_config.to_dict(), code_fingerprint()):
        vouched = f" as run {finished.run_id}, its id under an earlier rule of run identity"
    else:
        vouched = f" as run {finished.run_id}, made by code that computes the same numbers (atnbench canary)"
    err.print(f"run {run_id} is already in {results.path}{vouched} ({finished.status}, "
              f"{finished.updated_at[:19]} UTC): not training again. See it with "
              f"`atnbench runs show {finished.run_id}`; --force trains again and replaces it.",
              soft_wrap=True, highlight=False)
    from atnbench.run.train import result_record

    summary = selected_summary(finished.summary, results.curve(finished.run_id))
    return result_record(run_config, finished.status, summary, finished.error)


def _train(request: RunRequest, run_config, results, torch_device) -> dict:
    """Train it: from its checkpoint where one exists (unless --force discards it), progress shown."""
    from atnbench.run.progress import reporter_for, run_label
    from atnbench.run.train import train
    from atnbench.run.warmup import load_fast_path

    run_id = run_id_of(run_config)
    has_checkpoint = checkpoint_file(results.path, run_id).exists()
    if request.force and has_checkpoint:
        with hold_run(results.path, run_id):  # RunBusy (exit 1) while it trains elsewhere
            discard(results.path, run_id)  # a later rerun must not resume the old attempt
        err.print(f"--force: starting run {run_id} over; its checkpoint is discarded", soft_wrap=True, highlight=False)
    reporter = reporter_for(run_label(run_config), quiet=request.quiet)
    if has_checkpoint and not (request.resume or request.force):
        reporter = ResumeNote(reporter, lambda run_id: (results.get_run(run_id).env or {}).get("classes"))
    load_fast_path(run_config)  # a one-time build before the run's clock starts, not inside its timing
    try:
        return train(run_config, results, torch_device, reporter,
                     resume=request.resume or (has_checkpoint and not request.force),
                     checkpoint_every=request.checkpoint_every, keep_model=request.keep_model)
    except KeyboardInterrupt:
        row = results.get_run(run_id)  # none: stopped while it was set up; final: stopped after it finished
        if row is None:
            said = f"interrupted before run {run_id} started: nothing recorded; the same command starts it"
        elif row.status in ("done", "diverged"):
            said = f"interrupted after run {run_id} finished: it is recorded {row.status}"
        else:
            said = f"interrupted: run {run_id} recorded as failed; continue it with the same command"
        err.print(said, soft_wrap=True, highlight=False)
        raise

"""Training one run: a model from the zoo on a task, evaluated, checkpointed and recorded.

The loop is deterministic for a given config and machine: the model is initialised from
``seed``, training batches come from the task's "train" generator stream and the fixed
validation set from its "val" stream. Checkpoints are taken right after an evaluation (when
no running average is half-filled) and hold the model, the optimizer and every random
state, so a resumed run reaches the numbers an uninterrupted one would.

The store holds the curve; the summary (attained minima, final values) is computed from it,
so a resumed run summarises the whole curve, not just its last segment.
"""

from __future__ import annotations

import io
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from atnbench.run import checkpoint as checkpoints
from atnbench.run import schedule
from atnbench.run.checkpoint import CHECKPOINT, CorruptCheckpoint  # noqa: F401  (CHECKPOINT: re-exported)
from atnbench.config import RunConfig
import atnbench.evidence.identity as run_identity
from atnbench.errors import UserError
from atnbench.nn import detach_state
from atnbench.nn.norms import SequenceNorm
from atnbench.nn.padding import last_steps
from atnbench.run.selection import BEST_STEP, attained, best_val_point, held_out_at_best_val, is_held_out
from atnbench.store import ResultsStore, environment
from atnbench.tasks.lookup import task_for
from atnbench.tasks.source import PADDED_CLASS, Batch, DataSource, derived_metric, make_source
from atnbench.zoo import SequenceModel, cell_options, count_parameters
from atnbench.registry import model_name
from atnbench.evidence.identity import run_id_of
from atnbench.evidence.machine import with_segment_classes

log = logging.getLogger("atnbench")


class Reporter(Protocol):
    """Where progress goes: a rich bar, plain lines, a sweep's live view, or nowhere."""

    def start(self, run_id: str, total: int, done: int) -> None: ...
    def step(self, step: int, loss: float) -> None: ...
    def evaluated(self, step: int, train_loss: float, val_loss: float) -> None: ...
    def finish(self, status: str) -> None: ...


class SilentReporter:
    def start(self, run_id, total, done): pass
    def step(self, step, loss): pass
    def evaluated(self, step, train_loss, val_loss): pass
    def finish(self, status): pass


class Diverged(Exception):
    pass


def make_optimizer(config: RunConfig, params) -> torch.optim.Optimizer:
    name = config.optimizer
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=config.lr, momentum=config.momentum)
    if name == "adam":
        return torch.optim.Adam(params, lr=config.lr)
    if name == "asgd":
        return torch.optim.ASGD(params, lr=config.lr, t0=0, lambd=0.0)
    return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum)


def build_model(config: RunConfig, source: DataSource) -> SequenceModel:
    if getattr(source, "build_model", None) is not None:  # a task with its own model (wikitext2)
        return source.build_model(config)
    return SequenceModel(config.cell, config.norm, source.input_size, config.hidden, source.output_size,
                         layers=config.layers, embedding=source.vocab_size, **cell_options(config))


def run_model(model, batch, state):
    """The model on a batch: a padded batch passes its lengths on (each sequence runs over its
    own steps; no normalization statistic sees padding)."""
    if batch.lengths is None:
        return model(batch.x, state)
    return model(batch.x, state, lengths=batch.lengths)


def task_loss(task, logits: Tensor, target: Tensor, lengths: Optional[Tensor] = None) -> Tensor:
    if task.target == "last":
        logits = last_steps(logits, lengths)  # each sequence's own last step
    if task.loss == "mse":
        if task.target == "all" and lengths is not None:  # padded steps of a regression target
            valid = valid_steps(lengths, logits.shape[0])
            return F.mse_loss(logits.squeeze(-1)[valid], target[valid])
        return F.mse_loss(logits.squeeze(-1), target)
    # a padded step's class is PADDED_CLASS, cross_entropy's ignore_index: it is not scored
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def valid_steps(lengths: Tensor, steps: int) -> Tensor:
    """(T, B) True where a step of a right-padded batch is real."""
    return torch.arange(steps, device=lengths.device)[:, None] < lengths[None, :]


def scored_count(task, batch: Batch) -> int:
    """Targets a batch scores: every one, but a padded per-step target."""
    if task.target == "all" and batch.lengths is not None:
        per_step = batch.y.numel() // (batch.y.shape[0] * batch.y.shape[1])
        return int(batch.lengths.sum()) * per_step
    return batch.y.numel()


# Rows per evaluation forward for models whose eval output is per sample (no batch statistics,
# ``SequenceNorm.per_sample_in_eval``): a GPU step costs about the same for 50 rows as for 1,000,
# so the fixed validation set is scored in merged batches there. On the CPU merging is not faster
# (measured on the project's 2-core VM, 1 and 2 threads: nn.LSTM and ATN-LSTM took 0.9-1.2x as
# long per sample at 1,000 rows as at 50), so CPU runs score the batches as generated.
MERGED_EVAL_ROWS = 1000


def eval_rows(model, device: torch.device) -> Optional[int]:
    """Rows per evaluation forward (None: the batches as the source gives them)."""
    if device.type == "cpu":
        return None
    norms = [m for m in model.modules() if isinstance(m, SequenceNorm)]
    return MERGED_EVAL_ROWS if all(norm.per_sample_in_eval for norm in norms) else None


def merge_batches(batches: list[Batch], rows: int, task) -> list[Batch]:
    """Consecutive batches joined along the batch axis, up to ``rows`` rows each (the same
    samples in the same order). Padded or state-carrying batches are left as they are."""
    if any(b.carry or b.lengths is not None for b in batches):
        return batches
    y_axis = 0 if task.target == "last" else 1  # y is (B,) or (T, B); x is (T, B, ...)
    groups: list[list[Batch]] = [[]]
    for batch in batches:
        if groups[-1] and sum(b.x.shape[1] for b in groups[-1]) + batch.x.shape[1] > rows:
            groups.append([])
        groups[-1].append(batch)
    return [g[0] if len(g) == 1 else Batch(torch.cat([b.x for b in g], 1), torch.cat([b.y for b in g], y_axis))
            for g in groups]


@torch.no_grad()
def evaluate(model, task, source: DataSource, split: str, rows: Optional[int] = None) -> tuple[float, Optional[float]]:
    """Mean loss per scored example over a split, and the accuracy (or mean absolute error) where
    the task reports one;
    ``rows``: merge the split's batches up to that many rows (``eval_rows``)."""
    was_training = model.training
    model.eval()
    total, count, metric_sum, metric_count, state = 0.0, 0, 0.0, 0, None
    batches = source.eval_batches(split)
    if rows:
        batches = merge_batches(list(batches), rows, task)
    for batch in batches:
        logits, state = run_model(model, batch, state if batch.carry else None)
        scored_here = scored_count(task, batch)  # every scored step counts alike, whatever the segment's length
        total += task_loss(task, logits, batch.y, batch.lengths).item() * scored_here
        count += scored_here
        if task.metric not in ("accuracy", "mae"):
            continue
        scores = last_steps(logits, batch.lengths) if task.target == "last" else logits
        if task.metric == "accuracy":
            valid = batch.y != PADDED_CLASS
            metric_sum += int(((scores.argmax(-1) == batch.y) & valid).sum())
            metric_count += int(valid.sum())
        else:  # mae
            errors = (scores.squeeze(-1) - batch.y).abs()
            if task.target == "all" and batch.lengths is not None:
                errors = errors[valid_steps(batch.lengths, errors.shape[0])]
            metric_sum += float(errors.sum())
            metric_count += errors.numel()
    model.train(was_training)
    return total / count, (metric_sum / metric_count if metric_count else None)


def evaluate_all(model, task, source: DataSource, rows: Optional[int] = None) -> tuple[float, dict]:
    """The validation loss, and every split's loss and metric for the curve's metrics."""
    metrics, val_loss = {}, float("nan")
    for split in source.splits:
        loss, accuracy = evaluate(model, task, source, split, rows)
        if split == "val":
            val_loss = loss
        else:
            metrics[f"{split}_loss"] = loss
        if task.metric:
            metrics[f"{split}_{task.metric}"] = derived_metric(task.metric, loss, accuracy)
    return val_loss, metrics


@dataclass
class Checkpoint:
    """A run's checkpoint file: everything a resumed run needs to continue bit for bit."""

    path: Path
    run_id: Optional[str] = None  # written into the file: another run's checkpoint (of the same sizes) is told apart

    def save(self, model, optimizer, source: DataSource, state, step: int, wall_s: float) -> None:
        checkpoints.save(self.path, {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "source": source.state_dict(), "torch_rng": torch.get_rng_state(),
            "state": detach_state(state), "step": step, "wall_s": wall_s, "run_id": self.run_id,
        })

    def read(self, device: torch.device) -> dict:
        """The saved contents (CorruptCheckpoint if unusable); nothing is restored yet."""
        return checkpoints.load(self.path, device)

    @staticmethod
    def restore(saved: dict, model, optimizer, source: DataSource):
        """Put a read checkpoint back; returns (step, wall_s, recurrent state carried across batches)."""
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        source.load_state_dict(saved["source"])
        torch.set_rng_state(saved["torch_rng"].cpu())
        return saved["step"], saved["wall_s"], saved["state"]

    def load(self, model, optimizer, source: DataSource, device: torch.device):
        """Read and restore in one go (CorruptCheckpoint if the file is unusable)."""
        return self.restore(self.read(device), model, optimizer, source)


def summarize(store: ResultsStore, config: RunConfig, steps: int, wall_s: float, params: int) -> dict:
    task = task_for(config)
    curve = store.curve(run_id_of(config))
    train = [p.train_loss for p in curve if p.train_loss is not None]
    val = [p.val_loss for p in curve if p.val_loss is not None]
    last = curve[-1] if curve else None
    chosen = best_val_point(curve)
    held_out = held_out_at_best_val(curve)  # the test split never selects: its numbers at validation's pick
    extra = {}
    for key in sorted({key for p in curve for key in p.metrics}):
        if is_held_out(key):
            extra[key] = held_out.get(key)
            continue
        values = [p.metrics[key] for p in curve if p.metrics.get(key) is not None]
        extra[key] = attained(key)(values) if values else None
    return {**extra, "metric": task.metric,
        "min_train_loss": min(train) if train else None,
        "min_val_loss": min(val) if val else None,
        BEST_STEP: chosen.step if chosen is not None else None,
        "final_train_loss": last.train_loss if last else None,
        "final_val_loss": last.val_loss if last else None,
        "baseline": task.baseline_of(config.T, config.val_samples),
        "steps": steps,
        "wall_s": wall_s,
        "steps_per_s": steps / wall_s if wall_s > 0 else None,
        "params": params,
        "model": model_name(config.cell, config.norm),
        "budget": config.budget,
    }


def early_stopping_state(curve) -> tuple[float, int]:
    """The lowest validation loss of a curve and how many evaluations came after its first
    occurrence (inf and 0 for a run with no evaluation yet): what early stopping counts from."""
    vals = [p.val_loss for p in curve if p.val_loss is not None]
    if not vals:
        return math.inf, 0
    best = min(vals)
    return best, len(vals) - 1 - vals.index(best)


def _weights(model) -> bytes:
    buffer = io.BytesIO()
    torch.save({key: value.detach().cpu() for key, value in model.state_dict().items()}, buffer)
    return buffer.getvalue()


def _fresh(config: RunConfig, task, device: torch.device):
    """Data source, model and optimizer as they are at step 0 of the run."""
    torch.manual_seed(config.seed)
    source = make_source(task, config, device)
    model = build_model(config, source).to(device)
    optimizer = schedule.wrap(config, make_optimizer(config, model.parameters()), model.parameters(), source)
    return source, model, optimizer


def train(config: RunConfig, store: ResultsStore, device: torch.device, reporter: Optional[Reporter] = None,
          resume: bool = False, sweep: Optional[str] = None, checkpoint_every: int = 2, wait: bool = False,
          keep_model: bool = True) -> dict:
    """Train one run to the end (or divergence) and record it; returns the result record.

    The run's lock (checkpoint.hold_run) is held throughout: if another process is training
    the same run into the same store, ``wait=False`` raises RunBusy at once; ``wait=True``
    (sweeps) waits, then returns the other process's result if it finished the run, as it does
    where the run was finished by this code between the sweep's plan and the lock (an
    ``atnbench run`` of it that ended before the sweep's worker came to it).

    The config's device type and thread count are part of its run id, so they are enforced
    here. With ``keep_model`` the best-validation weights are kept in the store whenever they
    improve, and the final weights at the end.
    """
    device = torch.device(device)
    if device.type != config.device:
        raise UserError(f"run {run_id_of(config)} is configured for device {config.device}, not {device.type}")
    if device.type == "cpu":
        torch.set_num_threads(config.threads)
    reporter = reporter or SilentReporter()
    with checkpoints.hold_run(store.path, run_id_of(config), wait=wait,
                              should_stop=getattr(reporter, "should_stop", None)) as waited:
        row = store.get_run(run_id_of(config)) if wait else None
        if row is not None and row.status in ("done", "diverged") and \
                (row.env or {}).get("code") == run_identity.code_fingerprint():  # not a stale row to re-run
            log.warning(f"run {run_id_of(config)} was finished by another process; keeping its result")
            return result_record(config, row.status, row.summary, row.error)
        return _train(config, store, device, reporter, resume, sweep, checkpoint_every, keep_model)


def _train(config: RunConfig, store: ResultsStore, device: torch.device, reporter: Reporter, resume: bool,
           sweep: Optional[str], checkpoint_every: int, keep_model: bool = True) -> dict:
    task = task_for(config)
    run_id = run_id_of(config)
    checkpoint = Checkpoint(checkpoints.checkpoint_file(store.path, run_id), run_id)
    saved = None
    if resume and not checkpoint.path.exists():
        log.warning(f"no checkpoint for run {run_id} at {checkpoint.path}; starting it from scratch")
    elif resume:
        try:
            saved = checkpoint.read(device)
        except CorruptCheckpoint as bad:
            _set_aside(checkpoint.path, bad, run_id)
        if saved is not None and saved.get("run_id") not in (None, run_id):  # a file copied or moved by hand
            _set_aside(checkpoint.path, CorruptCheckpoint(f"checkpoint {checkpoint.path} is run {saved['run_id']}'s, "
                                                          f"not run {run_id}'s"), run_id)
            saved = None

    source, model, optimizer = _fresh(config, task, device)
    step, wall_before, state = 0, 0.0, None
    if saved is not None:
        try:
            step, wall_before, state = Checkpoint.restore(saved, model, optimizer, source)
        except Exception as error:  # noqa: BLE001 - another model's or a damaged state: unusable
            _set_aside(checkpoint.path, CorruptCheckpoint(f"checkpoint {checkpoint.path} does not fit run {run_id} "
                                                          f"({type(error).__name__})"), run_id)
            saved = None
            source, model, optimizer = _fresh(config, task, device)  # partly restored: start clean
    if saved is not None and not _curve_reaches(store.curve(run_id), config.eval_every, step):
        _set_aside(checkpoint.path, CorruptCheckpoint(f"the store holds only part of run {run_id}'s curve up to its "
                                                      f"checkpoint's step {step} (a store replaced, or its last "
                                                      f"writes lost)"), run_id)
        saved, step, wall_before, state = None, 0, 0.0, None
        source, model, optimizer = _fresh(config, task, device)
    if saved is not None:
        store.truncate_evals(run_id, step)
    env = environment()
    env["device"] = str(device)
    env["threads"] = torch.get_num_threads()  # reductions, hence last bits, depend on it
    env["code"] = run_identity.code_fingerprint()  # a stored run made by other code is stale (atnbench.evidence.identity)
    if saved is not None:  # a run resumed in another processor class than it started in is "mixed"
        before = store.get_run(run_id)
        env = with_segment_classes(before.env if before is not None else None, env, config.to_dict())
    store.start_run(run_id, config.to_dict(), env, sweep=sweep, fresh=saved is None)
    params = count_parameters(model)
    rows = eval_rows(model, device)

    reporter.start(run_id, config.steps, step)
    started = time.perf_counter()
    status, error = "done", None
    window_loss, window_steps, evals = 0.0, 0, 0
    best_val, since_best = early_stopping_state(store.curve(run_id))  # a resumed run goes on counting
    try:  # the steps, then the finish: an interrupt anywhere before the row is final is recorded
        try:
            model.train()
            while step < config.steps:
                batch = source.train_batch()
                state = detach_state(state) if batch.carry else None  # truncated BPTT across batches
                logits, state = run_model(model, batch, state)
                loss = task_loss(task, logits, batch.y, batch.lengths)
                value = loss.item()
                if not math.isfinite(value):
                    raise Diverged(f"loss became {value} at step {step + 1}")
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if config.clip is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip)
                optimizer.step()
                step += 1
                window_loss += value
                window_steps += 1
                reporter.step(step, value)
                if step % config.eval_every == 0 or step == config.steps:
                    with schedule.eval_weights(optimizer):  # ASGD's average once it has taken over
                        val, metrics = evaluate_all(model, task, source, rows)
                        improved = _weights(model) if keep_model and val < best_val else None
                    if not math.isfinite(val):
                        raise Diverged(f"validation loss became {val} at step {step}")
                    train_loss = window_loss / window_steps
                    wall = wall_before + time.perf_counter() - started
                    store.log_eval(run_id, step, wall, train_loss, val, metrics or None)
                    if improved is not None:
                        store.save_model(run_id, "best", step, improved)
                    since_best = 0 if val < best_val else since_best + 1
                    best_val = min(best_val, val)
                    reporter.evaluated(step, train_loss, val)
                    schedule.evaluated(optimizer, val)  # lr schedule / SGD -> ASGD switch (options)
                    window_loss, window_steps = 0.0, 0
                    evals += 1
                    if config.patience and since_best >= config.patience and step < config.steps:
                        break  # done: the best-validation weights are kept; more steps only overfit
                    if evals % checkpoint_every == 0 and step < config.steps:
                        checkpoint.save(model, optimizer, source, state, step, wall)
        except Diverged as err:
            status, error = "diverged", str(err)
        wall = wall_before + time.perf_counter() - started
        summary = summarize(store, config, step, wall, params)
        if keep_model and status == "done":
            with schedule.eval_weights(optimizer):  # the weights its evaluations scored
                store.save_model(run_id, "final", step, _weights(model))
        store.finish_run(run_id, status, summary, error=error)
    except BaseException as err:  # recorded, then re-raised: an interrupted run is never 'done'
        if store.status(run_id) == "running":  # not when the interrupt came after the final row was written
            wall = wall_before + time.perf_counter() - started
            message = "interrupted" if isinstance(err, KeyboardInterrupt) else f"{type(err).__name__}: {err}"
            store.finish_run(run_id, "failed", summarize(store, config, step, wall, params), error=message)
        else:
            checkpoints.discard(store.path, run_id)  # final already: nothing left to resume
        reporter.finish("failed")
        raise
    checkpoints.discard(store.path, run_id)  # finished (done or diverged): nothing to resume
    reporter.finish(status)
    return result_record(config, status, summary, error)


def _curve_reaches(curve, eval_every: int, step: int) -> bool:
    """Whether the stored curve holds every evaluation up to ``step`` (a checkpoint's step is an
    evaluation's): resuming onto a partial curve would record a whole run with part of its curve."""
    return [p.step for p in curve if p.step <= step] == list(range(eval_every, step + 1, eval_every))


def _set_aside(path: Path, bad: CorruptCheckpoint, run_id: str) -> None:
    aside = checkpoints.set_aside(path)
    log.warning(f"{bad}; set aside as {aside.name}; starting run {run_id} from scratch")


def result_record(config: RunConfig, status: str, summary: dict, error: Optional[str] = None) -> dict:
    """The flat record ``atnbench run --json`` prints and sweeps collect."""
    record = {
        "run_id": run_id_of(config), "status": status, "task": config.task, "norm": config.norm,
        "cell": config.cell, "k": config.k, "T": config.T, "seed": config.seed,
    }
    record.update(summary)
    if error:
        record["error"] = error
    return record

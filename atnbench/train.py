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

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

from atnbench.config import RunConfig
from atnbench.store import ResultsStore, environment
from atnbench.tasks import batch_generator, get_task
from atnbench.zoo import SequenceModel, count_parameters, model_name

CHECKPOINT = "checkpoint.pt"


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


def build_model(config: RunConfig) -> SequenceModel:
    task = get_task(config.task)
    norm_options = dict(k=config.k, eps=config.eps, affine=config.affine)
    return SequenceModel(config.cell, config.norm, task.input_size, config.hidden, task.output_size,
                         layers=config.layers, bias_inside=config.bias_inside, **norm_options)


def task_loss(task, logits: Tensor, target: Tensor) -> Tensor:
    if task.target == "last":
        logits = logits[-1]
    if task.loss == "mse":
        return F.mse_loss(logits.squeeze(-1), target)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def validation_set(config: RunConfig, device: torch.device) -> list[tuple[Tensor, Tensor]]:
    """The fixed held-out set: same seed, same samples, in training-size batches."""
    task = get_task(config.task)
    gen = batch_generator(config.seed, "val")
    batches, left = [], config.val_samples
    while left > 0:
        size = min(config.batch_size, left)
        x, y = task.make_batch(gen, size, config.T)
        batches.append((x.to(device), y.to(device)))
        left -= size
    return batches


@torch.no_grad()
def evaluate(model, task, batches) -> float:
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for x, y in batches:
        logits, _ = model(x)
        total += task_loss(task, logits, y).item() * x.shape[1]
        count += x.shape[1]
    model.train(was_training)
    return total / count


@dataclass
class Checkpoint:
    path: Path

    def save(self, model, optimizer, gen: torch.Generator, step: int, wall_s: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        torch.save({
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "generator": gen.get_state(), "torch_rng": torch.get_rng_state(),
            "step": step, "wall_s": wall_s,
        }, tmp)
        os.replace(tmp, self.path)  # a kill mid-write never leaves a torn checkpoint

    def load(self, model, optimizer, gen: torch.Generator) -> tuple[int, float]:
        state = torch.load(self.path, map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        gen.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        return state["step"], state["wall_s"]


def summarize(store: ResultsStore, config: RunConfig, steps: int, wall_s: float, params: int) -> dict:
    task = get_task(config.task)
    curve = store.curve(config.run_id)
    train = [p.train_loss for p in curve if p.train_loss is not None]
    val = [p.val_loss for p in curve if p.val_loss is not None]
    last = curve[-1] if curve else None
    return {
        "min_train_loss": min(train) if train else None,
        "min_val_loss": min(val) if val else None,
        "final_train_loss": last.train_loss if last else None,
        "final_val_loss": last.val_loss if last else None,
        "baseline": task.baseline(config.T),
        "steps": steps,
        "wall_s": wall_s,
        "steps_per_s": steps / wall_s if wall_s > 0 else None,
        "params": params,
        "model": model_name(config.cell, config.norm),
        "budget": config.budget,
    }


def train(config: RunConfig, store: ResultsStore, device: torch.device, reporter: Optional[Reporter] = None,
          resume: bool = False, sweep: Optional[str] = None, checkpoint_every: int = 2) -> dict:
    """Train one run to the end (or divergence) and record it; returns the result record."""
    reporter = reporter or SilentReporter()
    task = get_task(config.task)
    run_id = config.run_id
    checkpoint = Checkpoint(store.checkpoint_dir(run_id) / CHECKPOINT)
    resume = resume and checkpoint.path.exists()

    torch.manual_seed(config.seed)
    model = build_model(config).to(device)
    optimizer = make_optimizer(config, model.parameters())
    gen = batch_generator(config.seed, "train")
    step, wall_before = 0, 0.0
    if resume:
        step, wall_before = checkpoint.load(model, optimizer, gen)
        store.truncate_evals(run_id, step)
    env = environment()
    env["device"] = str(device)
    store.start_run(run_id, config.to_dict(), env, sweep=sweep, fresh=not resume)
    params = count_parameters(model)
    val_batches = validation_set(config, device)

    reporter.start(run_id, config.steps, step)
    started = time.perf_counter()
    status, error = "done", None
    window_loss, window_steps, evals = 0.0, 0, 0
    try:
        model.train()
        while step < config.steps:
            x, y = task.make_batch(gen, config.batch_size, config.T)
            x, y = x.to(device), y.to(device)
            logits, _ = model(x)
            loss = task_loss(task, logits, y)
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
                val = evaluate(model, task, val_batches)
                if not math.isfinite(val):
                    raise Diverged(f"validation loss became {val} at step {step}")
                train_loss = window_loss / window_steps
                wall = wall_before + time.perf_counter() - started
                store.log_eval(run_id, step, wall, train_loss, val)
                reporter.evaluated(step, train_loss, val)
                window_loss, window_steps = 0.0, 0
                evals += 1
                if evals % checkpoint_every == 0 and step < config.steps:
                    checkpoint.save(model, optimizer, gen, step, wall)
    except Diverged as err:
        status, error = "diverged", str(err)
    except BaseException as err:  # recorded, then re-raised: an interrupted run is never 'done'
        wall = wall_before + time.perf_counter() - started
        message = "interrupted" if isinstance(err, KeyboardInterrupt) else f"{type(err).__name__}: {err}"
        store.finish_run(run_id, "failed", summarize(store, config, step, wall, params), error=message)
        reporter.finish("failed")
        raise
    wall = wall_before + time.perf_counter() - started
    summary = summarize(store, config, step, wall, params)
    store.finish_run(run_id, status, summary, error=error)
    if status == "done" and checkpoint.path.exists():
        checkpoint.path.unlink()
    reporter.finish(status)
    return result_record(config, status, summary, error)


def result_record(config: RunConfig, status: str, summary: dict, error: Optional[str] = None) -> dict:
    """The flat record ``atnbench run --json`` prints and sweeps collect."""
    record = {
        "run_id": config.run_id, "status": status, "task": config.task, "norm": config.norm,
        "cell": config.cell, "k": config.k, "T": config.T, "seed": config.seed,
    }
    record.update(summary)
    if error:
        record["error"] = error
    return record

"""Post-normalization statistics over time (the ATN paper's Sect. 5.2, Fig. 6).

The paper trains an LN-LSTM and ATN(k) LSTMs (k = 5, 25, 55) on the adding problem with
T = 75, without trainable gain and bias in the normalizations, and plots, for one training
iteration, the mean and variance across features of each normalized term (W_h h, W_x x, c)
at every time step. LN's are constant by construction (mean 0, variance sigma^2/(sigma^2+eps)
~ 1 per example); ATN's move with the data.

Recording goes through the normalizations' ``probe`` (``SequenceNorm.probe``): each
post-normalization output (time first, from step t0) is reduced to its mean and (biased)
variance over the features, averaged over the batch. No model code is copied.

Step 0 of the recurrent term is W_h h_0 + b_h with h_0 = 0: the bias alone, the same for
every example (exactly 0 at initialisation, where LN outputs 0). The summaries leave that
step out (``SKIP_FIRST``); the series keep it.

Where the LSTM's bias sits is a reading of the paper, so it is a named option
(``--bias-inside/--bias-outside``, ``bias_inside``). Sect. 5.2 says its models "did not include
the use of trainable bias and gain parameters inside the normalization methods". The default
reads that as the normalizations' own gain and shift (``affine=False``), with the LSTM bias where
the earlier experiments had it: inside for LN and ATN, so the recorded "W_h h" term is
N(W_h h + b_h). Eq. 14 puts the bias outside, and Sect. 5.1 uses "bias inside the
normalization" for the LSTM's own bias. ``--bias-outside`` takes that reading, and the
recorded terms are then N(W_h h) and N(W_x x) exactly.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional

import torch
from torch import Tensor

from atnbench.config import RunConfig, build_config
from atnbench.errors import UserError
from atnbench.nn import detach_state
from atnbench.run.runspec import resolve_run
from atnbench.store import ResultsStore
from atnbench.tasks import task_for
from atnbench.tasks.source import make_source
from atnbench.run.train import build_model, make_optimizer, run_model, task_loss

TERMS = {"hidden": "W_h h", "input": "W_x x", "cell": "c"}  # Fig. 6a, 6b, 6c
SKIP_FIRST = {"hidden"}  # steps left out of the summaries (see module doc)


@dataclass
class Series:
    """Mean and variance across features at every step of one normalized term of one model."""

    model: str
    layer: int
    term: str  # "hidden" | "input" | "cell"
    mean: list[float]
    var: list[float]
    run_id: Optional[str] = None

    @property
    def T(self) -> int:
        return len(self.mean)


@dataclass
class TrainedModel:
    label: str
    config: RunConfig
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    source: object
    state: object = None  # recurrent state carried across batches (language tasks)
    run_id: Optional[str] = None
    steps: int = 0


class Recorder:
    """Attach a probe to every normalization of the model's (first) NormLSTM/NormGRU; collect
    the per-step moments. A context manager: the probes are removed on exit."""

    def __init__(self, model: torch.nn.Module):
        recurrent = [m for m in model.modules() if hasattr(m, "norm_modules")]
        self.modules = [(name, module) for rnn in recurrent[:1] for name, module in rnn.norm_modules()]
        if not self.modules:
            raise UserError("this model has no normalization modules to probe (a plain LSTM)")
        self.sums: dict[str, dict[int, tuple[float, float]]] = {name: {} for name, _ in self.modules}

    def _probe(self, name: str) -> Callable[[Tensor, int], None]:
        def probe(y: Tensor, t0: int) -> None:
            y = y.detach().double()
            var, mean = torch.var_mean(y, dim=-1, unbiased=False)  # over features: (T', B)
            for offset, (m, v) in enumerate(zip(mean.mean(dim=1).tolist(), var.mean(dim=1).tolist())):
                self.sums[name][t0 + offset] = (m, v)
        return probe

    def __enter__(self) -> "Recorder":
        for name, module in self.modules:
            module.probe = self._probe(name)
        return self

    def __exit__(self, *exc) -> None:
        for _, module in self.modules:
            module.probe = None

    def series(self, model: str, run_id: Optional[str] = None) -> list[Series]:
        out = []
        for name, _ in self.modules:
            layer, term = name.split(".")
            steps = self.sums[name]
            if not steps:
                continue
            T = max(steps) + 1
            out.append(Series(model, int(layer.removeprefix("layer")), term,
                              [steps.get(t, (math.nan, math.nan))[0] for t in range(T)],
                              [steps.get(t, (math.nan, math.nan))[1] for t in range(T)], run_id))
        return out


def stats_config(norm: str, k: int, T: int, iters: int, seed: int, hidden: Optional[int] = None,
                 batch_size: Optional[int] = None, task: str = "adding",
                 bias_inside: Optional[bool] = None) -> RunConfig:
    """Sect. 5.2's setting: the adding preset at T, no trainable gain/bias in the norms; the LSTM
    bias placed as ``bias_inside`` says (None: the norm's own; see the module doc)."""
    flags = dict(T=T, norm=norm, k=k, affine=False, steps=max(1, iters), seed=seed, hidden=hidden,
                 batch_size=batch_size, bias_inside=bias_inside)
    config = resolve_run(task, flags)
    # nothing is evaluated here: a one-batch validation set instead of the preset's 10,000 samples
    return build_config(dict(config.to_dict(), val_samples=config.batch_size))


def model_label(norm: str, k: int, cell: str = "lstm") -> str:
    """LN, ATN(k=5), as the paper's Fig. 6 names its LSTMs; a GRU says so (GRU ATN(k=5))."""
    name = {"ln": "LN", "atn": f"ATN(k={k})"}.get(norm, f"{norm}(k={k})" if "atn" in norm else norm)
    return f"GRU {name}" if cell == "gru" else name


def train_model(config: RunConfig, iters: int, device: torch.device, label: Optional[str] = None,
                on_step: Optional[Callable[[int, float], None]] = None) -> TrainedModel:
    """A short training run of ``config`` (``iters`` optimizer steps, may be 0), kept in memory."""
    task = task_for(config)
    torch.manual_seed(config.seed)
    source = make_source(task, config, device)
    model = build_model(config, source).to(device)
    optimizer = make_optimizer(config, model.parameters())
    trained = TrainedModel(label or model_label(config.norm, config.k, config.cell), config, model, optimizer, source)
    model.train()
    for step in range(iters):
        loss = _iteration(trained, task)
        if not math.isfinite(loss):
            raise UserError(f"{trained.label}: the loss became {loss} at step {step + 1}; lower --iters")
        if on_step is not None:
            on_step(step + 1, loss)
    trained.steps = iters
    return trained


def load_run(store: ResultsStore, run_id: str, device: torch.device) -> TrainedModel:
    """The model of a finished run, from its kept best-validation weights (a fresh optimizer and
    the task's data stream from its start: the statistics of one iteration need no more)."""
    from atnbench.run.restore import restore

    restored = restore(store, run_id, device, "best")
    config = restored.config
    model = restored.model.train()
    optimizer = make_optimizer(config, model.parameters())
    label = f"{model_label(config.norm, config.k, config.cell)} [{restored.record.run_id}]"
    return TrainedModel(label, config, model, optimizer, restored.source, None, restored.record.run_id, restored.step)


def _iteration(trained: TrainedModel, task) -> float:
    batch = trained.source.train_batch()
    state = detach_state(trained.state) if batch.carry else None
    logits, trained.state = run_model(trained.model, batch, state)
    loss = task_loss(task, logits, batch.y, batch.lengths)
    trained.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if trained.config.clip is not None:
        torch.nn.utils.clip_grad_norm_(trained.model.parameters(), trained.config.clip)
    trained.optimizer.step()
    return loss.item()


def record_iteration(trained: TrainedModel) -> list[Series]:
    """One training iteration (forward, backward, step) with every normalization probed."""
    trained.model.train()
    with Recorder(trained.model) as recorder:
        _iteration(trained, task_for(trained.config))  # a user task from the run's stored definition
    return recorder.series(trained.label, trained.run_id)


def summarize(series: Iterable[Series]) -> list[dict]:
    """Per model, layer and term: how much the post-norm mean and variance move over time."""
    rows = []
    for s in series:
        start = 1 if s.term in SKIP_FIRST and s.T > 1 else 0
        row = {"model": s.model, "layer": s.layer, "term": s.term, "from_step": start}
        for key, values in (("mean", s.mean[start:]), ("var", s.var[start:])):
            v = torch.tensor(values, dtype=torch.float64)
            row[f"{key}_std"] = float(v.std(unbiased=False))
            row[f"{key}_min"] = float(v.min())
            row[f"{key}_max"] = float(v.max())
        rows.append(row)
    return rows


def write_csv(series: Iterable[Series], path: Path) -> Path:
    """The raw series, one row per (model, layer, term, step)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["model", "run_id", "layer", "term", "t", "mean", "variance"])
        for s in series:
            for t, (m, v) in enumerate(zip(s.mean, s.var)):
                writer.writerow([s.model, s.run_id or "", s.layer, s.term, t, repr(m), repr(v)])
    return path

"""Normalization modules for the terms of a recurrent cell.

Each module normalizes one term (W_x x, W_h h, or the cell c) at every time step, in two
ways that give the same numbers:

- ``forward(x, state)``: a whole (T, B, n) sequence at once. Used for the input term, which
  is known for all steps before the recurrence (one matmul, statistics in parallel).
- ``stream(state, batch)``: a ``NormStream`` called once per step inside the recurrence,
  with O(1) Python and tensor work per step whatever k or t is.

``state`` is the temporal state a normalization carries across calls: the window of past
step statistics for ATN (a tensor, see ``window.py``), ``None`` for the others. Batch-based
normalizations keep population statistics per time step in buffers (``StepStatistics``).

``lengths`` (a (B,) tensor, or None): the batch is padded, sequence b valid for its first
``lengths[b]`` steps (``padding.py``). Per-sample normalizations (LN, ATN-LN) need nothing
for their outputs (a right-padded sequence's valid steps come before its padding); the batch
normalizations take their training statistics at step t over the sequences still valid at t
only (BN per step, BLN, ATN-BN's window: padded steps never enter a statistic or a population
estimate), sequence-wise BN over the unpadded frames (Laurent et al. eqs. 20-21). The window
state returned by ATN is each sequence's window at its own last step.

Every module can be observed with ``probe``: a callable ``probe(y, t0)`` receiving each
normalized output (time first, starting at step ``t0``). ``atnbench stats`` uses it.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor, nn

from atnbench.nn import functional as F_
from atnbench.nn.functional import checked_eps, checked_k
from atnbench.nn.padding import step_mask
from atnbench.nn.window import (
    WindowStream,
    empty_history,
    history_at,
    masked_history,
    masked_step_moments,
    pooled_window,
    step_moments,
    with_counts,
)

Probe = Callable[[Tensor, int], None]


@dataclass(frozen=True)
class NormSpec:
    """Options of a normalization scheme, shared by every normalized term of a cell.

    ``gain_init`` None means the scheme's default (1.0; 0.1 for recurrent BN and ATN-BN, as Cooijmans
    et al. recommend). ``max_steps`` bounds the per-step population statistics of batch
    normalizations (Cooijmans' T_max: later steps reuse the last one). ``bln_population`` is
    BLN's inference flags (E_B, Std_B, E_F, Std_F): True uses population statistics, False
    the current batch's; all False is Algorithm 2's stated initial setting.
    """

    k: int = 10
    eps: float = 1e-5
    affine: bool = True
    gain_init: Optional[float] = None
    max_steps: int = 1000
    momentum: float = 0.1
    bn_input_mode: str = "frame"
    bln_population: tuple[bool, bool, bool, bool] = (False, False, False, False)
    atn_bn_eval: str = "population"

    def __post_init__(self):
        # checked and made plain here, where a module is built: a float k or a string eps would
        # otherwise fail only at the first forward, deep inside a kernel
        object.__setattr__(self, "k", checked_k(self.k))
        object.__setattr__(self, "eps", checked_eps(self.eps))
        if not isinstance(self.affine, bool):
            raise TypeError(f"affine must be True or False, got {self.affine!r}")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, numbers.Integral) or self.max_steps < 1:
            raise ValueError(f"max_steps must be an integer >= 1, got {self.max_steps!r}")
        if not _is_number(self.momentum):
            raise TypeError(f"momentum must be a number, got {self.momentum!r}")
        if self.gain_init is not None and not _is_number(self.gain_init):
            raise TypeError(f"gain_init must be a number or None, got {self.gain_init!r}")
        if self.gain_init is not None and not math.isfinite(self.gain_init):  # every output NaN from step 1
            raise ValueError(f"gain_init must be a finite number, got {self.gain_init!r}")
        flags = self.bln_population
        if not isinstance(flags, (tuple, list)) or len(flags) != 4 or not all(isinstance(f, bool) for f in flags):
            raise TypeError(f"bln_population must be four True/False flags (E_B, Std_B, E_F, Std_F), got {flags!r}")
        object.__setattr__(self, "bln_population", tuple(flags))
        if self.bn_input_mode not in ("frame", "sequence"):
            raise ValueError(f"bn_input_mode must be 'frame' or 'sequence', got {self.bn_input_mode!r}")
        if self.atn_bn_eval not in ("population", "batch"):
            raise ValueError(f"atn_bn_eval must be 'population' or 'batch', got {self.atn_bn_eval!r}")
        if not 0.0 < self.momentum <= 1.0:
            raise ValueError(f"momentum must be in (0, 1], got {self.momentum}")


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class NormStream:
    """Step-by-step application of a normalization inside a recurrence."""

    def __init__(self, norm: "SequenceNorm", state: Optional[Tensor], lengths: Optional[Tensor] = None):
        self.norm = norm
        self.t = 0
        self.initial = state
        self.lengths = lengths

    def mask(self) -> Optional[Tensor]:
        """(B, 1) bool: the rows still valid at this step (None: no padding)."""
        return None if self.lengths is None else (self.lengths > self.t).unsqueeze(-1)

    def __call__(self, a: Tensor) -> Tensor:
        y = self.step(a)
        if self.norm.probe is not None:
            self.norm.probe(y.unsqueeze(0), self.t)
        self.t += 1
        return y

    def step(self, a: Tensor) -> Tensor:
        raise NotImplementedError

    def state(self) -> Optional[Tensor]:
        return self.initial


class SequenceNorm(nn.Module):
    """Base class: affine parameters, probing, and the sequence/stream interface."""

    windowed = False  # carries a window of past steps as recurrent state

    @property
    def per_sample_in_eval(self) -> bool:
        """In eval mode each row's output depends on that row alone (no batch statistics), so
        evaluating in larger batches changes nothing but rounding."""
        return True

    def __init__(self, size: int, spec: NormSpec, gain_init: float = 1.0, affine: Optional[bool] = None):
        super().__init__()
        self.size = size
        self.eps = spec.eps
        use_affine = spec.affine if affine is None else affine
        gain = spec.gain_init if spec.gain_init is not None else gain_init
        if use_affine:
            self.weight = nn.Parameter(torch.full((size,), float(gain)))
            self.bias = nn.Parameter(torch.zeros(size))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.probe: Optional[Probe] = None

    def initial_state(self, batch: int, device: torch.device) -> Optional[Tensor]:
        return None

    def forward(self, x: Tensor, state: Optional[Tensor] = None, lengths: Optional[Tensor] = None):
        y, state = self.normalize_sequence(x, state, lengths)
        if self.probe is not None:
            self.probe(y, 0)
        return y, state

    def normalize_sequence(self, x: Tensor, state: Optional[Tensor], lengths: Optional[Tensor]):
        raise NotImplementedError

    def stream(self, state: Optional[Tensor], lengths: Optional[Tensor] = None) -> NormStream:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return f"{self.size}, eps={self.eps}, affine={self.weight is not None}"


class NoNorm(SequenceNorm):
    """The identity: the term is left as it is (plain LSTM, or untouched terms)."""

    def __init__(self, size: int, spec: NormSpec):
        super().__init__(size, spec, affine=False)

    def normalize_sequence(self, x, state, lengths):
        return x, state

    def stream(self, state, lengths=None):
        return _IdentityStream(self, state, lengths)


class _IdentityStream(NormStream):
    def step(self, a):
        return a


class LayerNorm(SequenceNorm):
    """LN (Ba et al.): mean and variance over the features of one step."""

    def normalize_sequence(self, x, state, lengths):
        return F_.layer_norm(x, self.eps, self.weight, self.bias), state

    def stream(self, state, lengths=None):
        return _LayerNormStream(self, state, lengths)


class _LayerNormStream(NormStream):
    def step(self, a):
        norm = self.norm
        return F_.layer_norm(a, norm.eps, norm.weight, norm.bias)


class AssortedTimeNorm(SequenceNorm):
    """ATN-LN (Pospisil et al., eqs. 7-9): LN statistics pooled over the last k steps."""

    windowed = True

    def __init__(self, size: int, spec: NormSpec):
        super().__init__(size, spec)
        self.k = spec.k

    def initial_state(self, batch, device):
        return empty_history((batch,), device)

    def normalize_sequence(self, x, state, lengths):
        y, history = F_.atn_ln_sequence(x, self.k, self.eps, self.weight, self.bias, state, lengths)
        return y, history

    def stream(self, state, lengths=None):
        return _WindowStream(self, state, reduce_dim=-1, stat_axis=-1, lengths=lengths)

    def extra_repr(self):
        return f"{super().extra_repr()}, k={self.k}"


class _WindowStream(NormStream):
    """One step of a windowed normalization: add this step's power sums, drop the oldest.

    With lengths (ATN-LN, per sequence), every step's moments are kept so that the returned
    state is each sequence's window at its own last step.
    """

    def __init__(self, norm, state, reduce_dim: int, stat_axis: int, lengths=None):
        super().__init__(norm, state, lengths)
        self.window = WindowStream(norm.k, state)
        self.reduce_dim = reduce_dim
        self.stat_axis = stat_axis
        self.seen: list[Tensor] = []

    def step(self, a):
        norm = self.norm
        moments = step_moments(a, dim=self.reduce_dim)
        if self.lengths is not None:
            self.seen.append(moments)
        mean, var = self.window.push(moments, a.dtype)
        y = F_.standardize(a, mean.unsqueeze(self.stat_axis), var.unsqueeze(self.stat_axis), norm.eps)
        return F_.affine(y, norm.weight, norm.bias)

    def state(self):
        if self.lengths is None or not self.seen:
            return self.window.history()
        full = torch.cat((self.initial, torch.stack(self.seen)), dim=0)
        return history_at(full, self.norm.k, self.initial.shape[0] + self.lengths.clamp_max(len(self.seen)))


class StepStatistics(nn.Module):
    """Population statistics kept separately for each time step t < max_steps.

    Cooijmans et al.: estimate them per step up to T_max, the longest training sequence,
    and reuse step T_max's beyond it. ``steps_seen`` records T_max. Updates are exponential
    moving averages of the training batches' statistics (``momentum``).
    """

    def __init__(self, shapes: dict[str, tuple[int, ...]], init: dict[str, float], max_steps: int, momentum: float):
        super().__init__()
        self.names = list(shapes)
        self.max_steps = max_steps
        self.momentum = momentum
        for name, shape in shapes.items():
            self.register_buffer(name, torch.full((max_steps, *shape), float(init[name])))
        self.register_buffer("steps_seen", torch.zeros((), dtype=torch.long))

    @torch.no_grad()
    def update(self, t0: int, values: dict[str, Tensor]) -> None:
        steps = next(iter(values.values())).shape[0]
        stop = min(t0 + steps, self.max_steps)
        if stop <= t0:
            return
        for name, value in values.items():
            getattr(self, name)[t0:stop].lerp_(value[: stop - t0].to(getattr(self, name).dtype), self.momentum)
        if self.steps_seen.is_meta:  # shapes only (`model.to("meta")`): no count to read
            return
        if stop > int(self.steps_seen):
            self.steps_seen.fill_(stop)

    def lookup(self, t0: int, steps: int) -> dict[str, Tensor]:
        last = (self.max_steps if self.steps_seen.is_meta else max(int(self.steps_seen), 1)) - 1
        if t0 + steps <= last + 1:
            return {name: getattr(self, name)[t0 : t0 + steps] for name in self.names}
        rows = torch.arange(t0, t0 + steps, device=self.steps_seen.device).clamp_max(last)
        return {name: getattr(self, name)[rows] for name in self.names}


def _unbiased(var: Tensor, n: int) -> Tensor:
    return var * (n / (n - 1)) if n > 1 else var


def _unbiased_counts(var: Tensor, count: Tensor) -> Tensor:
    """``_unbiased`` with a count per step (the valid rows of a padded batch), broadcast on var."""
    count = count.to(var.dtype)
    return var * torch.where(count > 1, count / (count - 1).clamp_min(1), torch.ones_like(count))


def _active_steps(lengths: Tensor, steps: int) -> int:
    """Steps with at least one valid row: population estimates see those only."""
    return min(steps, int(lengths.max()))


class StepBatchNorm(SequenceNorm):
    """BN per time step (Cooijmans et al.): batch statistics per feature at each step.

    Training normalizes with the batch's statistics at that step and updates the running
    population statistics of that step; evaluation uses the population statistics of step
    t (of the last trained step beyond it). Also Laurent et al.'s frame-wise BN.
    """

    def __init__(self, size: int, spec: NormSpec, gain_init: float = 0.1):
        super().__init__(size, spec, gain_init=gain_init)
        self.stats = StepStatistics({"mean": (size,), "var": (size,)}, {"mean": 0.0, "var": 1.0}, spec.max_steps, spec.momentum)

    def normalize_sequence(self, x, state, lengths):
        if self.training and lengths is not None:
            mask = step_mask(lengths, x.shape[0]).unsqueeze(-1)
            y, mean, var = F_.batch_norm_steps(x, self.eps, self.weight, self.bias, mask)
            active = _active_steps(lengths, x.shape[0])
            var = _unbiased_counts(var, mask.sum(dim=1))
            self.stats.update(0, {"mean": mean[:active], "var": var[:active]})
            return y, state
        if self.training:
            y, mean, var = F_.batch_norm_steps(x, self.eps, self.weight, self.bias)
            self.stats.update(0, {"mean": mean, "var": _unbiased(var, x.shape[1])})
            return y, state
        pop = self.stats.lookup(0, x.shape[0])
        y = F_.standardize(x, pop["mean"].unsqueeze(1), pop["var"].unsqueeze(1), self.eps)
        return F_.affine(y, self.weight, self.bias), state

    def stream(self, state, lengths=None):
        return _StepBatchNormStream(self, state, lengths)


class _StepBatchNormStream(NormStream):
    def step(self, a):
        norm = self.norm
        if norm.training:
            mask = self.mask()
            y, mean, var = F_.batch_norm_steps(a, norm.eps, norm.weight, norm.bias, mask)
            rows = a.shape[0] if mask is None else int(mask.sum())
            if rows:  # a step past every sequence's end leaves the population estimates alone
                norm.stats.update(self.t, {"mean": mean.unsqueeze(0), "var": _unbiased(var, rows).unsqueeze(0)})
            return y
        pop = norm.stats.lookup(self.t, 1)
        y = F_.standardize(a, pop["mean"][0], pop["var"][0], norm.eps)
        return F_.affine(y, norm.weight, norm.bias)


class SequenceBatchNorm(SequenceNorm):
    """Laurent et al.'s sequence-wise BN: per-feature statistics over all unpadded frames.

    Only for terms known for the whole sequence (the input term); one population estimate.
    """

    def __init__(self, size: int, spec: NormSpec, gain_init: float = 1.0):
        super().__init__(size, spec, gain_init=gain_init)
        self.register_buffer("running_mean", torch.zeros(size))
        self.register_buffer("running_var", torch.ones(size))
        self.momentum = spec.momentum

    def normalize_sequence(self, x, state, lengths):
        if self.training:
            y, mean, var = F_.sequence_batch_norm(x, self.eps, self.weight, self.bias, lengths)
            frames = int(lengths.sum()) if lengths is not None else x.shape[0] * x.shape[1]
            with torch.no_grad():
                # .to: under autocast the statistics come in bfloat16/half, the buffers stay float32
                self.running_mean.lerp_(mean.detach().to(self.running_mean.dtype), self.momentum)
                self.running_var.lerp_(_unbiased(var.detach(), frames).to(self.running_var.dtype), self.momentum)
            return y, state
        y = F_.standardize(x, self.running_mean, self.running_var, self.eps)
        return F_.affine(y, self.weight, self.bias), state

    def stream(self, state, lengths=None):
        raise ValueError("sequence-wise BN needs the whole sequence; use it on the input term only")


def input_batch_norm(size: int, spec: NormSpec) -> SequenceNorm:
    """BN on the input term only (Laurent et al.): frame-wise (per step) or sequence-wise (over all
    steps) as ``spec.bn_input_mode`` says, gain 1."""
    if spec.bn_input_mode == "sequence":
        return SequenceBatchNorm(size, spec, gain_init=1.0)
    return StepBatchNorm(size, spec, gain_init=1.0)


class AssortedTimeBatchNorm(SequenceNorm):
    """ATN-BN (Pospisil et al., Table 6): BN statistics pooled over the batch and the last k steps.

    In training, per feature, the moments pool the batch and the window. At evaluation
    (``atn_bn_eval="population"``, the default) the per-step population estimates of those
    window moments are used, as BN does; ``"batch"`` keeps the current batch's window.

    Padded batches (``lengths``): the window pools every valid value of its steps, i.e. the
    rows still valid at each of them (steps then hold different numbers of values; the pooled
    moments weight each step by its count, ``window.pooled_window``). The window state returned
    is the batch's at its last valid step, NaN-marked (not continuable) where a step had padded
    rows.
    """

    windowed = True

    def __init__(self, size: int, spec: NormSpec, gain_init: float = 0.1):
        # BN statistics, so BN's initial gain (Cooijmans et al., Sect. 4: gamma = 0.1; a gain of
        # 1 saturates the gates): with 1.0 no seed left the adding baseline in 5,000 steps.
        super().__init__(size, spec, gain_init=gain_init)
        self.k = spec.k
        self.use_population = spec.atn_bn_eval == "population"
        self.stats = StepStatistics({"mean": (size,), "var": (size,)}, {"mean": 0.0, "var": 1.0}, spec.max_steps, spec.momentum)

    @property
    def per_sample_in_eval(self) -> bool:
        return self.use_population

    def initial_state(self, batch, device):
        return empty_history((self.size,), device)

    def normalize_sequence(self, x, state, lengths):
        if lengths is not None and (self.training or not self.use_population):
            stream = self.stream(state, lengths)
            return torch.stack([stream.step_only(a) for a in x.unbind(0)]), stream.state()
        if self.training or not self.use_population:
            y, mean, var, state = F_.atn_bn_sequence(x, self.k, self.eps, self.weight, self.bias, state)
            if self.training:
                self.stats.update(0, {"mean": mean, "var": var})
            return y, state
        pop = self.stats.lookup(0, x.shape[0])
        y = F_.standardize(x, pop["mean"].unsqueeze(1), pop["var"].unsqueeze(1), self.eps)
        return F_.affine(y, self.weight, self.bias), state

    def stream(self, state, lengths=None):
        if lengths is not None:
            return _MaskedAssortedTimeBatchNormStream(self, state, lengths)
        return _AssortedTimeBatchNormStream(self, state)

    def extra_repr(self):
        return f"{super().extra_repr()}, k={self.k}"


class _AssortedTimeBatchNormStream(_WindowStream):
    def __init__(self, norm, state):
        super().__init__(norm, state, reduce_dim=0, stat_axis=0)
        # For flat windows (functional.cut_flat): the last step's moments, and how many steps in a
        # row have had exactly those (O(1) per step, as the window).
        self.last: Optional[Tensor] = state[-1] if state.shape[0] else None
        self.run: Optional[Tensor] = F_.equal_runs(state)[-1] if state.shape[0] else None

    def step(self, a):
        norm = self.norm
        if norm.training or not norm.use_population:
            a = F_.share_alike(a)
            moments = step_moments(a, dim=0)
            same = None if self.last is None else (moments == self.last).all(-1)
            self.run = torch.ones_like(moments[..., 0], dtype=torch.long) if same is None else \
                torch.where(same, self.run + 1, 1)
            self.last = moments
            mean, var = self.window.push(moments, a.dtype)
            if norm.training:
                pooled = len(self.window.sums) * a.shape[0]
                norm.stats.update(self.t, {"mean": mean.unsqueeze(0), "var": _unbiased(var, pooled).unsqueeze(0)})
            y = F_.standardize(a, mean, var, norm.eps)
            if torch.is_grad_enabled() and a.requires_grad and norm.k > 1:
                flat = F_.rows_alike(a.detach()).squeeze(-2) & (self.run >= len(self.window.sums))
                y = F_.cut_flat(y, flat)
            return F_.affine(y, norm.weight, norm.bias)
        pop = norm.stats.lookup(self.t, 1)
        return F_.affine(F_.standardize(a, pop["mean"][0], pop["var"][0], norm.eps), norm.weight, norm.bias)


class _MaskedAssortedTimeBatchNormStream(NormStream):
    """ATN-BN of a padded batch: the window pools the valid rows of its last k steps.

    Kept apart from the running-total stream: here each step holds a different number of
    values, so the window is re-pooled from its (at most k) steps' moments and counts.
    """

    def __init__(self, norm, state, lengths):
        super().__init__(norm, state, lengths)
        self.batch = lengths.shape[0]
        self.active = int(lengths.max())  # steps past every sequence's end join no window
        self.entries: list[Tensor] = list(with_counts(state, self.batch).unbind(0))

    def step_only(self, a):
        """One step without the probe (``normalize_sequence`` probes the whole sequence)."""
        y = self.step(a)
        self.t += 1
        return y

    def step(self, a):
        norm = self.norm
        if not norm.training and norm.use_population:
            pop = norm.stats.lookup(self.t, 1)
            return F_.affine(F_.standardize(a, pop["mean"][0], pop["var"][0], norm.eps), norm.weight, norm.bias)
        a = F_.share_alike(a, self.mask())
        if self.t < self.active:
            self.entries.append(masked_step_moments(a, self.mask()))
        window = torch.stack(self.entries[-norm.k:])
        mean, var, pooled = pooled_window(window, a.dtype)
        if norm.training and self.t < self.active:
            norm.stats.update(self.t, {"mean": mean.unsqueeze(0), "var": _unbiased_counts(var, pooled).unsqueeze(0)})
        y = F_.standardize(a, mean, var, norm.eps)
        if norm.k > 1 and self.t < self.active and torch.is_grad_enabled() and a.requires_grad:
            y = F_.cut_flat(y, F_.window_flat(a.detach(), window, self.mask()))
        return F_.affine(y, norm.weight, norm.bias)

    def state(self):
        if not self.entries:
            return self.initial
        return masked_history(torch.stack(self.entries), self.norm.k, self.batch)


class BatchLayerNorm(SequenceNorm):
    """BLN (Ziaee & Cano, Algorithm 1), applied at every step of the recurrence.

    Inference follows Algorithm 2: each of the four statistics (E_B, Std_B, E_F, Std_F) is
    the population estimate (flag True) or the current batch's (False). Population
    estimates are kept per time step, as for recurrent BN; the std estimates carry the
    paper's m/(m-1) factor (m the training batch size).
    """

    FLAGS = ("batch_mean", "batch_std", "feature_mean", "feature_std")

    def __init__(self, size: int, spec: NormSpec):
        super().__init__(size, spec)
        self.population = dict(zip(self.FLAGS, spec.bln_population))
        shapes = {"batch_mean": (size,), "batch_std": (size,), "feature_mean": (), "feature_std": ()}
        init = {"batch_mean": 0.0, "batch_std": 1.0, "feature_mean": 0.0, "feature_std": 1.0}
        self.stats = StepStatistics(shapes, init, spec.max_steps, spec.momentum)

    @property
    def per_sample_in_eval(self) -> bool:
        return self.population["batch_mean"] and self.population["batch_std"]

    def apply(self, x: Tensor, t0: int, mask: Optional[Tensor] = None) -> Tensor:
        """BLN of a (T, B, n) block starting at step t0 (training: also update population).

        ``mask`` (T, B, 1) bool: the valid rows of each step of a padded batch (see
        ``functional.batch_layer_norm``); population estimates pool them and skip steps
        without any.
        """
        given = {}
        if not self.training and any(self.population.values()):
            pop = self.stats.lookup(t0, x.shape[0])
            # per-step scalars for the feature statistics broadcast over the batch
            given = {name: pop[name].unsqueeze(1) if name.startswith("feature") else pop[name]
                     for name, use in self.population.items() if use}
        y, current = F_.batch_layer_norm(x, self.eps, self.weight, self.bias, mask=mask, **given)
        if self.training:
            if mask is None:
                m = x.shape[1]
                correction = m / (m - 1) if m > 1 else 1.0
                feature_mean = current["feature_mean"].detach().mean(dim=-1)
                feature_std = current["feature_std"].detach().mean(dim=-1)
            else:
                rows = mask.squeeze(-1).to(x.dtype).sum(dim=1)  # (T,)
                active = int((rows > 0).sum())  # right padding: the active steps come first
                x, rows, current = x[:active], rows[:active], {n: v[:active] for n, v in current.items()}
                weight = mask[:active].squeeze(-1).to(x.dtype)
                correction = torch.where(rows > 1, rows / (rows - 1).clamp_min(1), torch.ones_like(rows))
                feature_mean = (current["feature_mean"].detach() * weight).sum(dim=-1) / rows
                feature_std = (current["feature_std"].detach() * weight).sum(dim=-1) / rows
            self.stats.update(t0, {
                "batch_mean": current["batch_mean"].detach(),
                "batch_std": current["batch_std"].detach() * (correction if mask is None else correction.unsqueeze(-1)),
                "feature_mean": feature_mean,
                "feature_std": feature_std * correction,
            })
        return y

    def normalize_sequence(self, x, state, lengths):
        mask = None if lengths is None else step_mask(lengths, x.shape[0]).unsqueeze(-1)
        return self.apply(x, 0, mask), state

    def stream(self, state, lengths=None):
        return _BatchLayerNormStream(self, state, lengths)


class _BatchLayerNormStream(NormStream):
    def step(self, a):
        mask = self.mask()
        return self.norm.apply(a.unsqueeze(0), self.t, None if mask is None else mask.unsqueeze(0))[0]

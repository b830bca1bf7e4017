"""A finished run's trained model, rebuilt from its stored config and kept weights.

One home for "give me the model of run X": ``atnbench evaluate`` scores it, ``atnbench stats
--from-run`` probes it. The model is rebuilt exactly as ``train`` built it (same config, same
task data source) and its kept weights loaded: ``best`` (the lowest validation loss the run
attained) or ``final``.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import torch

from atnbench.config import RunConfig, build_config
from atnbench.errors import UserError
from atnbench.run.resources import check_fits
from atnbench.run.runspec import config_estimate
from atnbench.store import MODEL_KINDS, ResultsStore, RunRecord
from atnbench.tasks.lookup import task_for
from atnbench.tasks.source import DataSource, make_source


@dataclass
class RestoredRun:
    record: RunRecord
    config: RunConfig
    model: torch.nn.Module
    source: DataSource
    kind: str  # which weights: best or final
    step: int  # the training step those weights are from


class UnreadableWeights(UserError):
    """A run's kept weights cannot be loaded into its model: damaged bytes, or another model's.
    Bad input (exit 2), as a damaged store is: the run has to be trained again."""

    def __init__(self, run_id: str, kind: str, error: Exception):
        # the first sentence: torch goes on to suggest weights_only=False, wrong advice for damaged bytes
        reason = str(error).strip().replace("\n", " ").split(". ")[0].rstrip(".")[:160] or type(error).__name__
        super().__init__(f"run {run_id}: its kept {kind} weights are unreadable ({type(error).__name__}: {reason}); "
                         f"train it again with `atnbench run ... --force`")


def find_run(store: ResultsStore, run_id: str) -> RunRecord:
    """The run with this id or unique id prefix; a one-line error otherwise."""
    return store.get_run(store.resolve_id(run_id))


def check_data_unchanged(record: RunRecord) -> None:
    """A run whose config names data files, a data folder or a task's Python file holds their
    contents in its id. Where they hold other contents here now, the run's model would be scored
    on other data than the run's, as if it were the run's: a one-line error naming them instead.
    (Files that are not here are make_source's to name.)"""
    from atnbench.evidence.equivalence import on_its_data
    from atnbench.evidence.identity import data_paths

    paths = data_paths(record.config.get("options") or {})
    if paths and all(path.exists() for path in paths) and not on_its_data(record):
        # the id holds one fingerprint of them all: which of several changed cannot be told
        names = str(paths[0]) if len(paths) == 1 else f"one or more of {', '.join(map(str, paths))}"
        verb = "holds" if len(paths) == 1 else "hold"
        raise UserError(f"run {record.run_id}: {names} {verb} other contents than when the run was trained (its id "
                        f"no longer follows from them): scoring its model (evaluate) or training it again (verify) "
                        f"there would use other data. Put the run's files back, or train a new run on the files as "
                        f"they are now")


def restore(store: ResultsStore, run_id: str, device: torch.device, kind: str = "best") -> RestoredRun:
    """Rebuild run ``run_id``'s model with its kept ``kind`` weights on ``device``."""
    from atnbench.run.train import build_model

    if kind not in MODEL_KINDS:
        raise UserError(f"unknown weights {kind!r}; choose one of: {', '.join(MODEL_KINDS)}")
    record = find_run(store, run_id)
    check_data_unchanged(record)
    kept = store.model(record.run_id, kind)
    if kept is None and record.status == "diverged":
        raise UserError(f"run {record.run_id} diverged (its loss became non-finite): it kept no {kind} model to score")
    if record.status not in ("done", "diverged"):  # an interrupted run's best so far is not its result
        has = "its best weights so far are not its result" if kept is not None else f"it has no {kind} model yet"
        raise UserError(f"run {record.run_id} is not finished (status {record.status}): {has}; the command that "
                        f"started it resumes it")
    if kept is None:
        raise UserError(f"run {record.run_id} has no {kind} model in {store.path}: a run brought in by `store import` "
                        f"or `store merge` left its weights in the store it was trained in (evaluate it there), and "
                        f"one recorded before models were kept, or with --no-keep-model, kept none (train it again "
                        f"with `atnbench run ... --force`)")
    step, weights = kept
    config = build_config({**record.config, "device": torch.device(device).type})
    check_fits(config_estimate(config), str(device), what=f"the model of run {record.run_id}")  # before it is built
    try:
        state = torch.load(io.BytesIO(weights), map_location=device, weights_only=True)
    except Exception as error:  # noqa: BLE001 - pickle, zip, EOF: every way stored bytes can be damaged
        raise UnreadableWeights(record.run_id, kind, error) from None
    source = make_source(task_for(config), config, device)
    model = build_model(config, source).to(device)
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError) as error:  # other shapes or names, or not a state dict
        raise UnreadableWeights(record.run_id, kind, error) from None
    model.eval()
    return RestoredRun(record, config, model, source, kind, step)

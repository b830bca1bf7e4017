"""Evaluation in merged batches (train.eval_rows / merge_batches): the same samples in the
same order, the same loss to float rounding, and only for models whose eval output is per
sample (no batch statistics at inference)."""

from __future__ import annotations

import pytest
import torch

from atnbench.nn import NormLSTM
from atnbench.run.runspec import resolve_run
from atnbench.tasks import get_task
from atnbench.run.train import _fresh, eval_rows, evaluate, merge_batches, MERGED_EVAL_ROWS

CPU, GPU = torch.device("cpu"), torch.device("cuda")  # a device object; nothing runs on it


def fresh(task, norm, **flags):
    config = resolve_run(task, {"norm": norm, "T": 24, "hidden": 6, "batch_size": 5, "val_samples": 23,
                                "steps": 2, "eval_every": 1, **flags})
    source, model, _ = _fresh(config, get_task(task), CPU)
    return config, source, model


@pytest.mark.parametrize("task,norm", [("adding", "atn"), ("adding", "ln"), ("copying", "none"), ("copying", "bn"),
                                       ("denoise", "atn-bn"), ("adding", "bn-input")])
def test_merged_evaluation_scores_the_same_samples(task, norm):
    config, source, model = fresh(task, norm)
    model.train()
    for _ in range(2):  # population statistics of the batch norms get trained values
        model(source.train_batch().x)
    task_spec = get_task(task)
    plain = evaluate(model, task_spec, source, "val")
    merged = evaluate(model, task_spec, source, "val", rows=10)
    assert merged[0] == pytest.approx(plain[0], rel=1e-5)
    batches = list(source.eval_batches("val"))
    joined = merge_batches(batches, 10, task_spec)
    assert [b.x.shape[1] for b in joined] == [10, 10, 3]
    assert torch.equal(torch.cat([b.x for b in joined], 1), torch.cat([b.x for b in batches], 1))
    y_axis = 0 if task_spec.target == "last" else 1
    assert torch.equal(torch.cat([b.y for b in joined], y_axis), torch.cat([b.y for b in batches], y_axis))


def test_rows_follow_the_device_and_the_norms_inference():
    _, _, atn = fresh("adding", "atn")
    assert eval_rows(atn, CPU) is None  # measured: not faster on the CPU
    assert eval_rows(atn, GPU) == MERGED_EVAL_ROWS
    for norm in ("none", "ln", "bn", "atn-bn", "bn-input"):
        assert eval_rows(fresh("adding", norm)[2], GPU) == MERGED_EVAL_ROWS, norm
    assert eval_rows(fresh("adding", "bln")[2], GPU) is None  # batch statistics at inference (Algorithm 2 default)
    assert eval_rows(NormLSTM(2, 4, norm="atn-bn", atn_bn_eval="batch"), GPU) is None
    assert eval_rows(NormLSTM(2, 4, norm="bln", bln_population=(True, True, False, False)), GPU) == MERGED_EVAL_ROWS
    assert eval_rows(NormLSTM(2, 4, norm="bln", bln_population=(True, False, True, True)), GPU) is None
    assert eval_rows(NormLSTM(2, 4, norm="bln", bln_population=(True, True, True, True)), GPU) == MERGED_EVAL_ROWS

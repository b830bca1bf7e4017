"""Synthetic task generators: layouts, statistics, determinism and baselines."""

import dataclasses
import math

import pytest
import torch
from torch.nn import functional as F

from atnbench.tasks import batch_generator, get_task, task_names, tasks

SYNTHETIC = [name for name in task_names() if get_task(name).make_source is None]  # generated data


def batch(name, T, B=64, seed=0, stream="train"):
    return get_task(name).make_batch(batch_generator(seed, stream), B, T)


# --- every task --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SYNTHETIC)
@pytest.mark.parametrize("extra", [0, 9])
def test_shapes_and_dtypes(name, extra):
    spec = get_task(name)
    T = spec.min_T + extra
    x, y = batch(name, T, B=5)
    assert x.shape == (spec.seq_len(T), 5, spec.input_size) and x.dtype == torch.float32
    if spec.target == "last":
        assert y.shape == (5,)
    else:
        assert y.shape == (spec.seq_len(T), 5)
    assert y.dtype == (torch.float32 if spec.loss == "mse" else torch.int64)
    if spec.loss == "ce":
        assert 0 <= y.min() and y.max() < spec.output_size


@pytest.mark.parametrize("name", task_names())
def test_spec_is_complete_and_frozen(name):
    spec = get_task(name)
    assert spec.name == name and spec.loss in ("mse", "ce") and spec.target in ("last", "all")
    for text in (spec.description, spec.measures, spec.reference):
        assert text and "\n" not in text
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.min_T = 1


@pytest.mark.parametrize("name", SYNTHETIC)
def test_same_seed_same_batch_other_seed_other_batch(name):
    x1, y1 = batch(name, 30, seed=3)
    x2, y2 = batch(name, 30, seed=3)
    x3, y3 = batch(name, 30, seed=4)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert not torch.equal(x1, x3)


@pytest.mark.parametrize("name", SYNTHETIC)
def test_generators_leave_the_global_rng_alone(name):
    torch.manual_seed(0)
    before = torch.rand(3)
    torch.manual_seed(0)
    batch(name, 30)
    assert torch.equal(torch.rand(3), before)


@pytest.mark.parametrize("name", SYNTHETIC)
def test_train_and_val_streams_differ(name):
    x_train, _ = batch(name, 30, stream="train")
    x_val, _ = batch(name, 30, stream="val")
    assert not torch.equal(x_train, x_val)


def test_stream_seeds_are_stable_and_checked():
    assert batch_generator(7, "val").initial_seed() == batch_generator(7, "val").initial_seed()
    assert batch_generator(7, "val").initial_seed() != batch_generator(8, "val").initial_seed()
    with pytest.raises(ValueError, match="unknown stream 'test'"):
        batch_generator(0, "test")


@pytest.mark.parametrize("name", SYNTHETIC)
def test_too_short_T_is_refused(name):
    spec = get_task(name)
    with pytest.raises(ValueError, match="too short"):
        spec.make_batch(batch_generator(0, "train"), 2, spec.min_T - 1)


def test_registry_lookup():
    assert task_names() == sorted(tasks()) == ["adding", "copying", "denoise", "imdb", "ptb-char", "ptb-word", "smnist-noise",
                                             "wikitext2"]
    assert SYNTHETIC == ["adding", "copying", "denoise"]
    with pytest.raises(ValueError, match="unknown task 'x'; choose one of: adding, copying, denoise, imdb"):
        get_task("x")


# --- adding ------------------------------------------------------------------------------------

@pytest.mark.parametrize("T", [2, 7, 100])
def test_adding_one_marker_per_half_and_target_is_marked_sum(T):
    x, y = batch("adding", T, B=200)
    values, markers = x[..., 0], x[..., 1]
    assert values.min() >= 0 and values.max() < 1
    assert set(markers.unique().tolist()) <= {0.0, 1.0}
    assert (markers[: T // 2].sum(0) == 1).all() and (markers[T // 2:].sum(0) == 1).all()
    torch.testing.assert_close(y, (values * markers).sum(0))


def test_adding_target_statistics_match_the_baseline():
    # y = U1 + U2 has mean 1 and variance 1/6; (y - 1)^2 has variance 1/15 - 1/36 = 7/180.
    # Tolerances are 5 standard errors over n samples, so a correct generator fails ~1e-6 of seeds.
    n = 4000
    _, y = batch("adding", 50, B=n)
    assert abs(y.mean().item() - 1) < 5 * math.sqrt(1 / 6 / n)
    assert abs(((y - 1) ** 2).mean().item() - 1 / 6) < 5 * math.sqrt(7 / 180 / n)
    assert get_task("adding").baseline(100) == pytest.approx(1 / 6)


# --- copying -----------------------------------------------------------------------------------

@pytest.mark.parametrize("T", [1, 100])
def test_copying_layout(T):
    x, y = batch("copying", T, B=300)
    assert (x.sum(-1) == 1).all()  # one-hot
    tokens = x.argmax(-1)
    symbols = tokens[:10]
    assert symbols.min() >= 1 and symbols.max() <= 8
    assert set(symbols.unique().tolist()) == set(range(1, 9))
    assert (tokens[T + 10] == 9).all()
    assert (tokens[10: T + 10] == 0).all() and (tokens[T + 11:] == 0).all()
    assert (y[: T + 10] == 0).all() and torch.equal(y[T + 10:], symbols)


# --- denoise -----------------------------------------------------------------------------------

@pytest.mark.parametrize("T", [21, 100])
def test_denoise_layout(T):
    x, y = batch("denoise", T, B=300)
    assert (x.sum(-1) == 1).all()
    tokens = x.argmax(-1)
    is_data = (tokens >= 1) & (tokens <= 8)
    assert (is_data[: T - 11].sum(0) == 10).all() and not is_data[T - 11:].any()
    assert (tokens[T - 11] == 9).all() and ((tokens == 9).sum(0) == 1).all()
    for b in range(tokens.shape[1]):
        data_in_order = tokens[:, b][is_data[:, b]]
        assert torch.equal(y[T - 10:, b], data_in_order)
    assert (y[: T - 10] == 0).all()


def test_denoise_positions_cover_the_whole_range():
    T = 40
    x, _ = batch("denoise", T, B=500)
    data_steps = ((x.argmax(-1) >= 1) & (x.argmax(-1) <= 8)).any(1)
    assert data_steps[: T - 11].all()  # every step before the marker gets a data point sometimes


# --- baselines match the loss convention ---------------------------------------------------------

@pytest.mark.parametrize("name, T", [("copying", 100), ("copying", 200), ("denoise", 100), ("denoise", 21)])
def test_no_memory_predictor_scores_the_baseline(name, T):
    # Certain of the blank class until the answer is due, uniform over 1..8 afterwards.
    spec = get_task(name)
    x, y = spec.make_batch(batch_generator(0, "train"), 16, T)
    due = (y != 0).any(1)  # answer steps: the 10 last steps
    logits = torch.full((*y.shape, spec.output_size), -1e9)
    logits[~due, :, 0] = 0.0
    logits[due, :, 1:9] = 0.0
    loss = F.cross_entropy(logits.reshape(-1, spec.output_size), y.reshape(-1))
    assert due.sum() == 10
    assert loss.item() == pytest.approx(spec.baseline(T), rel=1e-5)
    assert spec.baseline(T) == pytest.approx(10 * math.log(8) / spec.seq_len(T))

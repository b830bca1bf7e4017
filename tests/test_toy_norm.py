"""Adding a normalization is one registry entry plus its math: a toy RMSNorm, registered here
and nowhere else, is a model (`atnbench models`), trains (`run --norm toyrms`, on the loop, with
no k in its run id), is reported (`report`), is benchmarked (`bench`), is listed in the help of
`run --norm` and `bench --models`, and has its own style in every figure.

Its name is not the guide's (docs/adding-a-normalization.md registers "toyrms"), so following the
guide in this tree breaks no test."""

from __future__ import annotations

import json

import pytest
import torch

from atnbench.evidence.identity import identity
from atnbench.nn.norms import NormStream, SequenceNorm
from atnbench.registry import NormScheme, register, style_slot, unregister
from atnbench.report.style import model_colors, styles_for
from atnbench.store import ResultsStore
from helpers import invoke


class RMSNorm(SequenceNorm):
    """Root-mean-square normalization over the features of a step (Zhang & Sennrich, 2019)."""

    def scale(self, a):
        y = a / torch.sqrt(a.pow(2).mean(-1, keepdim=True) + self.eps)
        return y if self.weight is None else y * self.weight + self.bias

    def normalize_sequence(self, x, state, lengths):
        return self.scale(x), state

    def stream(self, state, lengths=None):
        return _RMSStream(self, state, lengths)


class _RMSStream(NormStream):
    def step(self, a):
        return self.norm.scale(a)


@pytest.fixture()
def toyrms():
    register(NormScheme("toyrms", "RMSNorm over the features of each step", "Zhang & Sennrich (2019)",
                        RMSNorm, RMSNorm, RMSNorm, bias_inside=True, label="ToyRMS", fast_path=False))
    yield
    unregister("toyrms")


def test_a_registered_norm_is_everywhere(toyrms, tmp_path):
    listed = invoke("models")
    assert listed.exit_code == 0 and "toyrms" in listed.stdout and "gru-toyrms" in listed.stdout

    db = tmp_path / "r.db"
    made = invoke("run", "adding", "--norm", "toyrms", "--k", "7", "--T", "10", "--hidden", "8", "--batch-size", "4",
                  "--iters", "4", "--eval-every", "2", "--val-samples", "8", "--store", db, "--format", "json")
    assert made.exit_code == 0, made.output
    record = json.loads(made.stdout)
    assert record["status"] == "done"
    with ResultsStore.open_read_only(db) as store:
        assert identity(store.get_run(record["run_id"]).config)["k"] is None  # not windowed: k is not in its id

    report = invoke("report", "--store", db, "--format", "json")
    assert report.exit_code == 0, report.output
    rows = [row["model"] for table in json.loads(report.stdout)["tables"] for row in table["rows"]]
    assert "toyrms" in rows

    timed = invoke("bench", "--workload", "adding", "--models", "toyrms,gru-toyrms-loop", "--reps", "1", "--warmup", "0",
                   "--T", "10", "--batch", "4", "--format", "json")
    assert timed.exit_code == 0, timed.output
    timed_models = {record["model"] for record in json.loads(timed.stdout)}
    assert {"toyrms", "gru-toyrms-loop"} <= timed_models  # times not asserted: speed belongs to `bench` runs

    slot = style_slot("toyrms")
    assert slot not in {style_slot(m) for m in ("lstm", "ln", "atn", "atn-bn", "bn", "bn-input", "bln")}
    colors = model_colors(["lstm", "ln", "atn", "toyrms"])
    assert len(set(colors.values())) == 4
    assert styles_for([("toyrms", "toyrms")])["toyrms"] != styles_for([("ln", "ln")])["ln"]


def test_unregistered_it_is_gone(tmp_path):
    # tiny, so that were the name registered the test would fail at once, not train a preset
    result = invoke("run", "adding", "--norm", "toyrms", "--T", "10", "--hidden", "8", "--batch-size", "4",
                    "--iters", "2", "--eval-every", "2", "--val-samples", "4", "--store", tmp_path / "r.db")
    assert result.exit_code == 2 and "unknown norm 'toyrms'" in result.stderr


def help_of(*command: str) -> str:
    shown = invoke(*command, "--help", env={"COLUMNS": "400"})  # one line per option: nothing wrapped
    assert shown.exit_code == 0, shown.output
    return shown.stdout


def option_line(help_text: str, flag: str) -> str:
    """The option's row of the options table (the first column is the flag)."""
    return next(line for line in help_text.splitlines() if line.lstrip("│ ").startswith(f"{flag} "))


def test_a_registered_norm_is_in_the_help_lists(toyrms):
    """`run --norm` and `bench --models` list the registry as it is now."""
    norm = option_line(help_of("run"), "--norm")
    assert "toyrms" in norm and "atn-bn" in norm and "none|lstm" in norm
    models = option_line(help_of("bench"), "--models")
    assert "toyrms" in models and "gru-toyrms" in models and "gru-bln" in models and "atn-ref" in models
    assert "{" not in norm + models  # no placeholder left


def test_an_unregistered_norm_leaves_the_help_lists():
    assert "toyrms" not in option_line(help_of("run"), "--norm")
    assert "toyrms" not in option_line(help_of("bench"), "--models")

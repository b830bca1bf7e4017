"""Adding a normalization is one registry entry plus its math: a toy RMSNorm, registered here
and nowhere else, is a model (`atnbench models`), trains (`run --norm rms`, on the loop, with no
k in its run id), is reported (`report`), is benchmarked (`bench`), and has its own style in
every figure."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from atnbench.cli import app
from atnbench.identity import identity
from atnbench.nn.norms import NormStream, SequenceNorm
from atnbench.nn.schemes import NormScheme, register, style_slot, unregister
from atnbench.report.style import model_colors, styles_for
from atnbench.store import ResultsStore

runner = CliRunner()


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
def rms():
    register(NormScheme("rms", "RMSNorm over the features of each step", "Zhang & Sennrich (2019)",
                        RMSNorm, RMSNorm, RMSNorm, bias_inside=True, label="RMS", fast_path=False))
    yield
    unregister("rms")


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_a_registered_norm_is_everywhere(rms, tmp_path):
    listed = invoke("models")
    assert listed.exit_code == 0 and "rms" in listed.stdout and "gru-rms" in listed.stdout

    db = tmp_path / "r.db"
    made = invoke("run", "adding", "--norm", "rms", "--k", "7", "--T", "10", "--hidden", "8", "--batch-size", "4",
                  "--iters", "4", "--eval-every", "2", "--store", db, "--format", "json")
    assert made.exit_code == 0, made.output
    record = json.loads(made.stdout)
    assert record["status"] == "done"
    with ResultsStore.open_read_only(db) as store:
        assert identity(store.get_run(record["run_id"]).config)["k"] is None  # not windowed: k is not in its id

    report = invoke("report", "--store", db, "--format", "json")
    assert report.exit_code == 0, report.output
    rows = [row["model"] for table in json.loads(report.stdout)["tables"] for row in table["rows"]]
    assert "rms" in rows

    timed = invoke("bench", "--workload", "adding", "--models", "rms,gru-rms-loop", "--reps", "1", "--warmup", "0",
                   "--format", "json")
    assert timed.exit_code == 0, timed.output
    timed_models = {record["model"] for record in json.loads(timed.stdout)}
    assert {"rms", "gru-rms-loop"} <= timed_models  # times not asserted: speed belongs to `bench` runs

    slot = style_slot("rms")
    assert slot not in {style_slot(m) for m in ("lstm", "ln", "atn", "atn-bn", "bn", "bn-input", "bln")}
    colors = model_colors(["lstm", "ln", "atn", "rms"])
    assert len(set(colors.values())) == 4
    assert styles_for([("rms", "rms")])["rms"] != styles_for([("ln", "ln")])["ln"]


def test_unregistered_it_is_gone(tmp_path):
    result = invoke("run", "adding", "--norm", "rms", "--store", tmp_path / "r.db")
    assert result.exit_code == 2 and "unknown norm 'rms'" in result.stderr

"""``atnbench bench``: the reference ATN, the workloads, the memory measure and the CLI.

Fast and timing-free: nothing here asserts how fast anything is.
"""

import csv
import io
import json

import pytest
import torch

from atnbench.bench import ReferenceATNLSTM, WORKLOADS, build_model, get_workload, saved_activation_bytes
from atnbench.bench.command import to_csv
from atnbench.bench.timing import path_of
from atnbench.bench.workloads import loss_fn, models
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence
from atnbench.nn import NormLSTM
from helpers import invoke

REQUIRED = {"workload", "model", "k", "train_ms", "infer_ms", "peak_mem_mb", "train_ms_p25", "train_ms_p75",
            "train_ms_min", "train_ms_max", "infer_ms_p25", "infer_ms_p75", "ratio_lstm_fused", "ratio_ln"}
TINY = ["--T", "10", "--batch", "4", "--reps", "1", "--warmup", "0"]


def _pair(k, seed=0):
    torch.manual_seed(seed)
    model = NormLSTM(3, 6, norm="atn", k=k, init="torch").double()
    with torch.no_grad():  # non-trivial gains and shifts, so that every parameter matters
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_()
    return model, ReferenceATNLSTM(3, 6, k=k).double().load_norm_lstm(model)


@pytest.mark.parametrize("k", [1, 3, 8, 40])
def test_reference_atn_matches_norm_lstm(k):
    model, ref = _pair(k)
    x = (3 * torch.randn(25, 4, 3, dtype=torch.float64)).requires_grad_()
    out, state = model(x)
    out_ref, state_ref = ref(x)
    torch.testing.assert_close(out_ref, out, rtol=0, atol=1e-10)
    torch.testing.assert_close(state_ref.c, state.c, rtol=0, atol=1e-10)
    g = torch.randn_like(out)
    grads = torch.autograd.grad(out, [x, *model.parameters()], g)
    grads_ref = torch.autograd.grad(out_ref, [x, *ref.parameters()], g)
    for a, b in zip(grads_ref, grads):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10)


def test_reference_default_init_matches_norm_lstm_init():
    torch.manual_seed(1)
    ref = ReferenceATNLSTM(2, 5, k=4)
    torch.manual_seed(1)
    layer = NormLSTM(2, 5, norm="atn", k=4).layers[0]
    for (name, a), (_, b) in zip(ref.named_parameters(), layer.named_parameters()):
        assert torch.equal(a, b), name


def test_workload_registry_shapes():
    expected = {"adding": (50, 2, 60, 200, "last", 1), "copying": (128, 10, 68, 220, "all", 9),
                "denoise": (128, 10, 100, 200, "all", 9), "ptb-char": (32, 50, 1000, 220, "all", 50)}
    assert set(WORKLOADS) == set(expected) | {"packed"}
    for name, (b, i, h, t, loss, classes) in expected.items():
        w = get_workload(name)
        assert (w.batch, w.input_size, w.hidden, w.T, w.loss, w.classes) == (b, i, h, t, loss, classes)
        small = w.with_overrides(T=7, batch=3)
        x, target = small.make_batch(torch.device("cpu"))
        assert x.shape == (7, 3, i) and x.dtype == torch.float32
        assert target.shape == ((3, 1) if loss == "last" else (7, 3))
        assert torch.equal(x, small.make_batch(torch.device("cpu"))[0])  # seeded
        y = build_model("atn", small, 2, torch.device("cpu"))(x)
        assert torch.isfinite(loss_fn(small)(y, target))
    with pytest.raises(ValueError, match="unknown workload"):
        get_workload("nope")


def test_saved_activations_grow_with_k_only_for_window_rebuilding():
    w = get_workload("copying").with_overrides(T=24, batch=4)
    x, target = w.make_batch(torch.device("cpu"))

    def saved(name, k):
        return saved_activation_bytes(build_model(name, w, k, torch.device("cpu")), x, target, loss_fn(w))

    ref = [saved("atn-ref", k) for k in (1, 8, 20)]
    atn = [saved("atn", k) for k in (1, 8, 20)]
    assert ref[0] < ref[1] < ref[2] and ref[2] > 1.5 * ref[0]
    assert max(atn) <= 1.1 * min(atn)


def _bench(*args):
    return invoke("bench", *args)


def test_packed_workload_mixes_lengths_with_adding_total_steps():
    """adding's shapes with lengths 100..300 whose sum is adding's B*T, as a PackedSequence (seeded);
    at any size the lengths are in 1..3T/2 and sum to B*T."""
    packed, adding = get_workload("packed"), get_workload("adding")
    lengths = packed.lengths()
    assert (packed.batch, packed.input_size, packed.hidden, packed.loss) == (adding.batch, adding.input_size,
                                                                             adding.hidden, adding.loss)
    assert sum(lengths) == adding.batch * adding.T and (min(lengths), max(lengths)) == (100, 300)
    assert len(set(lengths)) == packed.batch
    for T, batch in ((10, 4), (1, 3), (2, 2), (7, 1)):
        small = packed.with_overrides(T=T, batch=batch).lengths()
        assert sum(small) == T * batch and min(small) >= 1 and max(small) <= T + T // 2 + 1
    x, target = packed.with_overrides(T=10, batch=4).make_batch(torch.device("cpu"))
    assert isinstance(x, PackedSequence) and target.shape == (4, 1)
    assert sorted(pad_packed_sequence(x)[1].tolist()) == [5, 8, 12, 15]
    assert torch.equal(x.data, packed.with_overrides(T=10, batch=4).make_batch(torch.device("cpu"))[0].data)


@pytest.mark.parametrize("name", sorted(n for n in models() if not n.endswith(("-loop", "-function"))
                                         and n not in ("lstm", "atn-ref")))
def test_packed_workload_runs_every_norm_on_the_fast_path(name):
    """At tiny size, one training step of every model that has a fast path: finite, and the path
    it took is the C++ one (the fused kernels: nn.LSTM's/nn.GRU's own)."""
    w = get_workload("packed").with_overrides(T=6, batch=3)
    x, target = w.make_batch(torch.device("cpu"))
    model = build_model(name, w, 2, torch.device("cpu"))
    loss = loss_fn(w)(model(x), target)
    loss.backward()
    assert torch.isfinite(loss)
    assert path_of(model) == ("fused" if name.endswith("fused") else "cpp")


def test_cli_packed_workload():
    result = _bench("--workload", "packed", "--models", "ln,atn,atn-bn,gru-bn", "--k", "2", "--json", *TINY)
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert sorted(r["model"] for r in records) == ["atn", "atn-bn", "gru-bn", "gru-fused", "ln", "lstm-fused"]
    assert {r["path"] for r in records} == {"fused", "cpp"}
    refused = _bench("--workload", "packed", "--reference", *TINY)
    assert refused.exit_code == 2 and "atn-ref takes no packed batches" in refused.stderr


def test_cli_json_records():
    result = _bench("--workload", "adding", "--models", "lstm-fused,ln,atn", "--k", "2", "--json", *TINY)
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert [(r["model"], r["k"]) for r in records] == [("lstm-fused", None), ("ln", None), ("atn", 2)]
    for r in records:
        assert REQUIRED <= set(r), REQUIRED - set(r)
        assert r["workload"] == "adding" and r["T"] == 10 and r["batch"] == 4
        assert r["train_ms"] > 0 and r["infer_ms"] > 0 and r["peak_mem_mb"] > 0
        assert r["device"] == "cpu" and r["gpu"] is None  # on CUDA: the card's name (records compared by card)
        assert r["cpu_capability"] == str(torch.backends.cpu.get_cpu_capability())  # AVX2/AVX512: the class
    assert records[0]["ratio_lstm_fused"] == 1.0 and records[1]["ratio_ln"] == 1.0


def test_cli_csv_baselines_reference_and_output_file(tmp_path):
    target = tmp_path / "out" / "bench.json"
    result = _bench("--workload", "adding,copying", "--models", "atn", "--k", "1,3", "--reference", "--csv",
                    "--output", str(target), *TINY)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert REQUIRED <= set(rows[0])
    per_workload = [(r["model"], r["k"]) for r in rows if r["workload"] == "copying"]
    assert per_workload == [("lstm-fused", ""), ("ln", ""), ("atn", "1"), ("atn", "3"),
                            ("atn-ref", "1"), ("atn-ref", "3")]  # baselines always timed
    assert len(json.loads(target.read_text())) == len(rows) == 12


def test_an_output_named_csv_holds_csv_and_plot_bench_names_what_it_reads(tmp_path):
    """`bench -f csv -o x.csv` wrote JSON into the .csv; the file's name picks CSV or JSON."""
    target = tmp_path / "bench.csv"
    result = _bench("--workload", "adding", "--models", "lstm-fused", "-f", "json", "--output", str(target), *TINY)
    assert result.exit_code == 0, result.output
    assert list(csv.DictReader(io.StringIO(target.read_text()))) == \
        list(csv.DictReader(io.StringIO(to_csv(json.loads(result.stdout)))))  # the printed records
    refused = invoke("plot", "--bench", str(target), "--out-dir", str(tmp_path / "figs"))
    assert refused.exit_code == 2 and "reads the JSON records" in " ".join(refused.stderr.split()), refused.output


def test_cli_table_default_output():
    result = _bench("--models", "lstm,atn", *TINY)
    assert result.exit_code == 0, result.output
    assert "×nn.LSTM" in result.stdout and "atn" in result.stdout and "torch " in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--workload", "adding,nope"], "unknown workload 'nope'"),
    (["--models", "ln,gru"], "unknown model 'gru'"),
    (["--k", "5,0"], "--k values must be >= 1"),
    (["--k", "five"], "--k takes whole numbers"),
    (["--reps", "0"], "--reps must be >= 1"),
    *([(["--device", "cuda"], "torch sees no CUDA GPU here")] if not torch.cuda.is_available() else []),
])
def test_cli_bad_input_is_one_line(args, message):
    result = _bench(*args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert result.stdout == ""


def test_bench_says_each_model_and_workload_as_it_goes():
    result = _bench("--workload", "adding,copying", "--models", "lstm-fused,atn", "--k", "2", *TINY)
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()  # not a terminal: plain lines
    starts = [i for i, line in enumerate(lines) if line.startswith(("adding (1/2", "copying (2/2"))]
    models = [i for i, line in enumerate(lines) if " ms, infer " in line]
    assert len(starts) == 2 and len(models) == 6  # lstm-fused, ln (a baseline), atn k=2 per workload
    assert starts[0] < min(models) and max(models[:3]) < starts[1] < min(models[3:])  # as each workload ends
    assert lines[models[0]].startswith("adding: ln  train ") and "× nn.LSTM" in lines[models[2]]
    assert "…" not in result.stdout and "×LN" in result.stdout  # piped: the table is not cut at 80 columns
    quiet = _bench("--workload", "adding", "--models", "lstm-fused", "--quiet", *TINY)
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_a_bench_cut_short_keeps_the_records_of_each_workload_it_finished(tmp_path, monkeypatch):
    """A GPU lent for minutes: `timeout` may stop the bench in its second workload; the first's
    records are in --output already (written whole, never half a file)."""
    import atnbench.bench.timing as timing

    real = timing.time_workload

    def stopped_in_copying(workload, *args, **kwargs):
        if workload.name == "copying":
            raise KeyboardInterrupt  # as a signal would, mid-workload
        return real(workload, *args, **kwargs)

    monkeypatch.setattr(timing, "time_workload", stopped_in_copying)
    target = tmp_path / "bench.json"
    result = _bench("--workload", "adding,copying", "--models", "lstm-fused", "--output", str(target), *TINY)
    assert result.exit_code != 0
    kept = json.loads(target.read_text())
    assert sorted((r["workload"], r["model"]) for r in kept) == [("adding", "ln"), ("adding", "lstm-fused")]
    assert [p.name for p in tmp_path.iterdir()] == ["bench.json"]  # no partial file left beside it


def test_an_output_never_replaces_a_table_of_runs_or_an_export_of_studies(tmp_path):
    """`bench -o r.csv` replaced a CSV of runs (`runs export`'s) and `-o studies.json` a studies export
    (plans recorded before their runs, which nothing rebuilds), exit 0; refused, the files as they were."""
    import shutil
    from pathlib import Path

    table = tmp_path / "r.csv"
    table.write_text("run_id,task,status\n5ea6a9e03768,adding,done\n")
    studies = tmp_path / "studies.json"
    shutil.copy(Path(__file__).resolve().parents[1] / "results" / "studies.json", studies)
    for target, held in ((table, "a table of runs"), (studies, "an export of studies")):
        before = target.read_bytes()
        result = _bench("--workload", "adding", "--models", "lstm-fused", "-o", str(target), *TINY)
        assert result.exit_code == 2 and f"already holds {held}" in result.stderr, result.output
        assert target.read_bytes() == before


def test_the_one_time_build_of_the_fast_path_is_never_inside_a_timed_step(monkeypatch):
    """On a fresh install the first use compiles the C++ fast path (tens of seconds): `bench
    --warmup 0` timed it as ln's step (35 s, 519x nn.LSTM). Here the first load takes 1 s."""
    import time

    from atnbench.nn import fastpath

    real, calls = fastpath.build_cpp, []

    def slow_first_load(verbose=False):
        if not calls:
            time.sleep(1.0)
        calls.append(1)
        return real(verbose)

    monkeypatch.setattr(fastpath, "build_cpp", slow_first_load)
    result = _bench("--workload", "adding", "--models", "ln", "--json", *TINY)
    assert result.exit_code == 0, result.output
    [record] = [r for r in json.loads(result.stdout) if r["model"] == "ln"]
    assert calls and record["path"] == "cpp" and record["train_ms"] < 500, record

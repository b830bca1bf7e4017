"""Your own task (#32): task files outside the package, from data files or from code, through run,
sweep, report, verdicts, evaluate, store transfer, ``tasks new`` and ``tasks check``; every
mistake in a task or data file one line, exit 2, nothing written."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import invoke
from atnbench.evidence.identity import run_id_of

REPO = Path(__file__).resolve().parents[1]
# the ragged test data are object arrays: read with pickle, which a task file must allow
SMALL = "defaults: {hidden: 8, epochs: 2, batch_size: 8}\nallow_pickle: true\n"
PICKLED = "allow_pickle: true\n"


@pytest.fixture(autouse=True)
def _no_user_folders(monkeypatch):
    """Each test starts with no search folders; what --include adds is undone after it."""
    monkeypatch.setenv("ATNBENCH_TASKS", "")
    monkeypatch.delenv("ATNBENCH_DEBUG", raising=False)


def ok(result):
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


def ragged(n=40, channels=3, classes=3, seed=0, lo=4, hi=12):
    """Variable-length multivariate sequences whose class sets their mean."""
    rng = np.random.default_rng(seed)
    xs = np.empty(n, dtype=object)
    ys = np.arange(n) % classes
    for i in range(n):
        xs[i] = rng.normal(ys[i], 1.0, (int(rng.integers(lo, hi)), channels))
    return xs, ys


@pytest.fixture
def npz_task(tmp_path):
    folder = tmp_path / "mytasks"
    folder.mkdir()
    xs, ys = ragged()
    np.savez(folder / "seqs.npz", x=xs, y=ys)
    (folder / "vowels.yaml").write_text("problem: sequence-classification\ndata:\n  train: seqs.npz\n"
                                        "  split: {validation: 0.25, seed: 0}\n" + SMALL)
    return folder


@pytest.fixture
def csv_task(tmp_path):
    folder = tmp_path / "regression"
    folder.mkdir()
    rng = np.random.default_rng(1)
    with open(folder / "sums.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["target"] + [f"t{i}" for i in range(8)])
        for _ in range(30):
            n = int(rng.integers(3, 9))
            values = rng.normal(0, 1, n)
            writer.writerow([values.sum()] + list(values) + [""] * (8 - n))
    (folder / "sums.yaml").write_text("problem: sequence-regression\ndata:\n  train: sums.csv\n  y: target\n" + SMALL)
    return folder


def test_an_npz_task_runs_sweeps_reports_and_is_judged(npz_task, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "s.db"
    ok(invoke("run", "vowels", "--include", npz_task, "--norm", "atn", "--k", 3, "--store", store, "-q"))
    # --workers 1: the runs in this process (no worker to spawn and import torch); workers: test_sweep
    ok(invoke("sweep", "norm-ablation", "--task", "vowels", "--include", npz_task, "--seeds", "0,1",
              "--budget", 0.5, "--workers", 1, "--store", store, "-q"))
    with sqlite3.connect(store) as db:
        sweeps = {row[0] for row in db.execute("select sweep from sweep_runs")}
        statuses = {row[0] for row in db.execute("select status from runs")}
    assert "norm-ablation@vowels" in sweeps and statuses == {"done"}
    report = ok(invoke("report", "--include", npz_task, "--task", "vowels", "--store", store, "--format", "json"))
    tables = json.loads(report.stdout)["tables"]
    assert tables and all(t["task"] == "vowels" for t in tables)
    assert "cross-entropy" in tables[0]["measure"]
    assert any("accuracy" in column["key"] for column in tables[0]["columns"])
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - id: mine\n    claim: 'ATN < LN on my task'\n    task: vowels\n"
                      "    order: [atn, ln]\n")
    verdicts = ok(invoke("report", "--include", npz_task, "--store", store, "--claims", claims, "--format", "json"))
    judged = json.loads(verdicts.stdout)["verdicts"]["claims"]
    assert [c["id"] for c in judged] == ["mine"] and judged[0]["task"] == "vowels"
    assert judged[0]["verdict"] and judged[0]["comparisons"][0]["lower_cell"]["n"] == 2  # two seeds a side
    ok(invoke("report", "--include", npz_task, "--store", store, "--sweep", "norm-ablation@vowels",
              "--out-dir", tmp_path / "figs"))
    assert list((tmp_path / "figs").glob("*.png"))


def test_a_csv_regression_task_reports_in_its_measure(csv_task, tmp_path):
    store = tmp_path / "s.db"
    result = ok(invoke("run", "sums", "--include", csv_task, "--norm", "ln", "--store", store, "--format", "json"))
    record = json.loads(result.stdout)
    assert record["metric"] == "mae" and record["val_mae"] is not None and record["val_mae"] > 0
    ok(invoke("sweep", "norm-ablation", "--task", "sums", "--include", csv_task, "--seeds", "0", "--budget", 0.5,
              "--workers", 1, "--store", store, "-q"))
    report = ok(invoke("report", "--include", csv_task, "--store", store, "--format", "json"))
    tables = {t["budget"]: t for t in json.loads(report.stdout)["tables"]}  # the full run, the shrunk sweep
    assert [len([r for r in tables[b]["rows"] if r["kind"] == "model"]) for b in (1.0, 0.5)] == [1, 7]
    for table in tables.values():
        assert "MSE" in table["measure"]
        assert any("mae" in column["key"] for column in table["columns"]), table["columns"]
    claims = tmp_path / "claims.yaml"  # a regression reports no accuracy: said, not "no runs"
    claims.write_text("claims:\n  - {id: acc, claim: 'ATN above LN', task: sums, stat: max_val_accuracy, order: [atn, ln]}\n")
    wrong = invoke("report", "--include", csv_task, "--store", store, "--claims", claims)
    assert wrong.exit_code == 2 and len(wrong.stderr.strip().splitlines()) == 1, wrong.output
    assert "runs of 'sums' here do not report 'max_val_accuracy'; they report" in wrong.stderr
    assert "min_val_mae" in wrong.stderr


def test_evaluate_and_store_transfer_need_no_include(npz_task, tmp_path, monkeypatch):
    store = tmp_path / "s.db"
    record = json.loads(ok(invoke("run", "vowels", "--include", npz_task, "--norm", "ln", "--store", store,
                                  "--format", "json")).stdout)
    monkeypatch.setenv("ATNBENCH_TASKS", "")  # the task file is no longer found: the run's options carry it
    scores = json.loads(ok(invoke("evaluate", record["run_id"], "--store", store, "--format", "json")).stdout)
    assert scores  # the same validation split, rebuilt from the stored definition
    verified = ok(invoke("verify", record["run_id"], "--store", store))
    assert "bit for bit" in verified.stdout
    probed = ok(invoke("stats", "--from-run", record["run_id"], "--store", store, "-q",
                       "--out-dir", tmp_path / "stats"))  # as evaluate: it asked for --include, which stats lacks
    assert f"[{record['run_id']}]" in probed.stdout
    ok(invoke("store", "export", tmp_path / "runs.jsonl", "--store", store))
    ok(invoke("store", "import", tmp_path / "runs.jsonl", "--store", tmp_path / "other.db"))
    with sqlite3.connect(tmp_path / "other.db") as db:
        assert db.execute("select run_id from runs").fetchall() == [(record["run_id"],)]
    xs, ys = ragged()  # the data file edited in place: the run's model would be scored on other data
    np.savez(npz_task / "seqs.npz", x=xs + 1.0, y=ys)
    edited = invoke("evaluate", record["run_id"], "--store", store)
    assert edited.exit_code == 2 and "seqs.npz holds other contents than when the run was trained" in edited.stderr, edited.output
    assert "seqs.npz" in edited.stderr and len(edited.stderr.strip().splitlines()) == 1
    # verify trained it again on the edited file and reported a difference that was the data's
    reverified = invoke("verify", record["run_id"], "--store", store)
    assert reverified.exit_code == 2 and "seqs.npz holds other contents than when the run was trained" in \
        reverified.stderr and "bit for bit" not in reverified.stdout, reverified.output
    assert len(reverified.stderr.strip().splitlines()) == 1  # refused before "re-running" is said


def test_a_changed_file_among_several_is_not_pinned_on_one_of_them(tmp_path):
    """A run's id holds one fingerprint of all its data files: the refusal cannot tell which one
    changed, and says so instead of saying each of them did."""
    from atnbench.errors import UserError
    from atnbench.evidence.identity import code_fingerprint
    from atnbench.run.restore import check_data_unchanged
    from atnbench.store import RunRecord

    files = {split: str(tmp_path / f"{split}.npz") for split in ("train", "test")}
    for path in files.values():
        Path(path).write_bytes(b"x")
    record = RunRecord(run_id="000000000000", task="mine", T=8, norm="ln", k=None, seed=0, budget=1.0,
                       status="done", config={"task": "mine", "options": {"data_files": files}},
                       env={"code": code_fingerprint()}, summary={}, error=None, created_at="", updated_at="")
    with pytest.raises(UserError) as refused:
        check_data_unchanged(record)
    assert f"one or more of {files['train']}, {files['test']} hold other contents" in str(refused.value)
    assert str(refused.value).endswith("or train a new run on the files as they are now")


def test_parquet_and_a_saved_hugging_face_dataset_hold_sequences_as_lists(tmp_path):
    """The nested layout: one sequence per row, its steps a list (of channel lists)."""
    import pandas as pd
    from datasets import Dataset

    from atnbench.tasks.taskfiles import include

    xs, ys = ragged(n=30, channels=2)
    frame = pd.DataFrame({"x": [x.tolist() for x in xs], "label": [f"class-{y}" for y in ys]})
    folder = tmp_path / "nested"
    folder.mkdir()
    frame.to_parquet(folder / "seqs.parquet")
    Dataset.from_pandas(frame).save_to_disk(str(folder / "hf"))
    for name, data in (("fromparquet", "seqs.parquet"), ("fromhf", "hf")):
        (folder / f"{name}.yaml").write_text(f"problem: sequence-classification\ndata: {{train: {data}, y: label}}\n"
                                             + SMALL)
    include([folder])
    sources = [_source(name)[1] for name in ("fromparquet", "fromhf")]
    for source in sources:
        x, y = source.data["train"]
        assert x.shape[-1] == 2 and set(y.tolist()) == {0, 1, 2} and source.lengths is not None
    assert torch.equal(sources[0].data["train"][0], sources[1].data["train"][0])  # one reading of one data


def _source(task, T=100, val_samples=1000, batch_size=8, seed=0):
    from atnbench.run.runspec import resolve_run
    from atnbench.tasks.lookup import task_for
    from atnbench.tasks.source import make_source

    config = resolve_run(task, {"T": T, "val_samples": val_samples, "batch_size": batch_size, "seed": seed})
    return config, make_source(task_for(config), config, torch.device("cpu"))


def test_standardized_with_the_training_split_only(npz_task):
    from atnbench.tasks.taskfiles import include

    include([npz_task])
    xs, ys = ragged(seed=3)  # other sequences (a copy of the training file is refused)
    np.savez(npz_task / "val.npz", x=xs, y=ys)
    text = (npz_task / "vowels.yaml").read_text().replace("  split: {validation: 0.25, seed: 0}\n", "  validation: val.npz\n")
    (npz_task / "vowels.yaml").write_text(text)
    _, source = _source("vowels")
    train_before = source.data["train"][0].clone()
    steps = torch.cat([x[:n] for x, n in zip(source.data["train"][0], source.lengths["train"])])
    assert torch.allclose(steps.mean(0), torch.zeros(3), atol=1e-5)
    assert torch.allclose(steps.std(0, unbiased=False), torch.ones(3), atol=1e-4)
    xs, ys = ragged(seed=7)
    np.savez(npz_task / "val.npz", x=xs * 100 + 5, y=ys)  # other validation data: the training inputs keep their scale
    _, source = _source("vowels")
    assert torch.equal(source.data["train"][0], train_before)


@pytest.mark.parametrize("norm", ["atn", "bn", "bln", "ln"])
def test_padding_never_enters_a_statistic_or_the_loss(tmp_path, norm):
    """Per-step regression over padded arrays: the padded steps' inputs and targets changed to
    garbage give bit-identical losses (no statistic, no loss term includes them)."""
    from atnbench.run.runspec import resolve_run
    from atnbench.store import ResultsStore
    from atnbench.tasks.taskfiles import include
    from atnbench.run.train import train

    rng = np.random.default_rng(3)
    n, T = 24, 10
    lengths = rng.integers(3, T + 1, n)
    x, y = rng.normal(0, 1, (n, T, 2)), rng.normal(0, 1, (n, T))
    losses = []
    for fill, folder in ((0.0, tmp_path / "a"), (1e3, tmp_path / "b")):
        folder.mkdir()
        padded_x, padded_y = x.copy(), y.copy()
        for i, length in enumerate(lengths):
            padded_x[i, length:], padded_y[i, length:] = fill, -fill
        np.savez(folder / "d.npz", x=padded_x, y=padded_y, lengths=lengths)
        (folder / "steps.yaml").write_text("problem: step-regression\ndata: {train: d.npz, lengths: lengths}\n"
                                           + SMALL)
        include([folder])
        config = resolve_run("steps", {"norm": norm, "k": 3, "steps": 4, "eval_every": 2})
        with ResultsStore(folder / "s.db") as store:
            record = train(config, store, torch.device("cpu"))
            losses.append([(p.train_loss, p.val_loss) for p in store.curve(run_id_of(config))])
        assert record["status"] == "done"
    assert losses[0] == losses[1]


def test_the_data_enter_the_run_id_by_content(npz_task, tmp_path):
    from atnbench.run.runspec import resolve_run
    from atnbench.tasks.taskfiles import include

    include([npz_task])
    first = run_id_of(resolve_run("vowels", {}))
    moved = tmp_path / "moved"
    shutil.copytree(npz_task, moved)
    include([moved])
    assert run_id_of(resolve_run("vowels", {})) == first  # the same contents elsewhere: the same run
    xs, ys = ragged(seed=5)
    np.savez(moved / "seqs.npz", x=xs, y=ys)
    assert run_id_of(resolve_run("vowels", {})) != first


def test_step_classification_from_a_long_table(tmp_path):
    from atnbench.tasks.taskfiles import include

    folder = tmp_path / "tags"
    folder.mkdir()
    rng = np.random.default_rng(2)
    rows = [("id", "time", "a", "b", "tag")]
    for seq in range(20):
        for t in range(int(rng.integers(3, 7))):
            value = rng.normal()
            rows.append((seq, t, value, -value, "up" if value > 0 else "down"))
    with open(folder / "tags.tsv", "w", newline="") as handle:
        csv.writer(handle, delimiter="\t").writerows(rows)
    (folder / "tagger.yaml").write_text("problem: step-classification\ndata: {train: tags.tsv, y: tag, layout: long}\n"
                                        + SMALL)
    include([folder])
    config, source = _source("tagger")
    x, y = source.data["train"]
    assert x.shape[-1] == 2 and y.dtype == torch.long and (y == -100).any()  # padded steps are not scored
    assert source.step_targets and set(y[y >= 0].tolist()) == {0, 1}


def test_tasks_new_infers_and_check_reports(npz_task, csv_task, tmp_path):
    out = tmp_path / "drafts"
    out.mkdir()
    pickled = invoke("tasks", "new", "draft-npz", "--from", npz_task / "seqs.npz", "--dir", out)
    assert pickled.exit_code == 2 and "--allow-pickle" in pickled.stderr and not (out / "draft-npz.yaml").exists()
    ok(invoke("tasks", "new", "draft-npz", "--from", npz_task / "seqs.npz", "--dir", out, "--allow-pickle"))
    assert "allow_pickle: true" in (out / "draft-npz.yaml").read_text()
    assert f"check it with `atnbench tasks check draft-npz --include {out}`" in (out / "draft-npz.yaml").read_text()
    ok(invoke("tasks", "new", "draft-csv", "--from", csv_task / "sums.csv", "--dir", out))
    assert "problem: sequence-classification" in (out / "draft-npz.yaml").read_text()
    assert "problem: sequence-regression" in (out / "draft-csv.yaml").read_text()
    again = invoke("tasks", "new", "draft-npz", "--from", npz_task / "seqs.npz", "--dir", out)
    assert again.exit_code == 2 and "exists" in again.stderr
    (tmp_path / "junk.npz").write_bytes(b"not an archive")
    junk = invoke("tasks", "new", "junk", "--from", tmp_path / "junk.npz", "--dir", out)
    assert junk.exit_code == 2 and "not a NumPy .npz archive" in junk.stderr and not (out / "junk.yaml").exists()
    assert "not a zip archive at all" in junk.stderr and "pickle" not in junk.stderr  # not NumPy's pickle advice
    (tmp_path / "loop-a.csv").symlink_to("loop-b.csv")
    (tmp_path / "loop-b.csv").symlink_to("loop-a.csv")
    looped = invoke("tasks", "new", "looped", "--from", tmp_path / "loop-a.csv", "--dir", out)
    assert looped.exit_code == 2 and "loop-a.csv is a loop of symbolic links" in looped.stderr  # was "no such file"
    for name, said in (("copying", "shipped task"), ("../up", "use letters")):
        refused = invoke("tasks", "new", name, "--from", npz_task / "seqs.npz", "--dir", out)
        assert refused.exit_code == 2 and said in refused.stderr
    checked = ok(invoke("tasks", "check", "draft-npz", "--include", out)).stdout
    assert "classes" in checked and "3: 0, 1, 2" in checked and "majority class" in checked
    assert "channels" in checked and "no-information loss" in checked
    checked = ok(invoke("tasks", "check", "draft-csv", "--include", out)).stdout
    assert "training mean" in checked
    listed = ok(invoke("tasks", "--include", str(out), env={"COLUMNS": "1000"})).stdout
    assert "draft-npz" in listed and f"your task: {out / 'draft-npz.yaml'}" in listed


def test_tasks_check_gives_the_guess_per_dimension_and_a_command_that_runs_as_printed(tmp_path):
    """A 2-d regression target: the no-information guess is each dimension's training mean
    (their pooled mean was printed as "the" training mean); a task name with a space is quoted in
    the command `tasks check` prints, as the folder is."""
    import shlex

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(30, 6, 1)), np.column_stack([rng.normal(3, 1, 30), rng.normal(-2, 1, 30)])
    np.savez(tmp_path / "two.npz", x=x, y=y)
    (tmp_path / "my task.yaml").write_text("problem: sequence-regression\ndata: {train: two.npz, split: {validation: 0.5}}\n")
    checked = ok(invoke("tasks", "check", "my task", "--include", tmp_path, env={"COLUMNS": "200"})).stdout
    row = next(line for line in checked.splitlines() if "training mean" in line)
    means = [float(value) for value in row.split("dimension)")[1].replace(",", " ").split()]
    assert len(means) == 2 and means[0] > 1.5 and means[1] < -0.5  # not one pooled mean near 0.5
    command = next(line for line in checked.splitlines() if line.strip().startswith("atnbench run"))
    assert shlex.split(command)[:3] == ["atnbench", "run", "my task"]


GENERATOR = '''
import torch
from atnbench.tasks import TaskSpec

def make_batch(generator, batch_size, T):
    x = torch.randn(T, batch_size, 2, generator=generator)
    return x, x[:, :, 0].sum(0, keepdim=False)[:, None].squeeze(-1)

SPEC = TaskSpec(name="sum", description="sum of the first channel", measures="squared error",
                input_size=2, output_size=1, loss="mse", target="last", baseline=lambda T: float(T),
                min_T=1, seq_len=lambda T: T, reference="a test", make_batch=make_batch)
'''


def test_a_task_from_code(tmp_path):
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "gen.py").write_text(GENERATOR)
    (folder / "summing.yaml").write_text("module: gen.py:SPEC\ndefault_T: 6\ndefaults: {hidden: 8, steps: 3, "
                                         "eval_every: 3, val_samples: 16, batch_size: 8}\n")
    result = ok(invoke("run", "summing", "--include", folder, "--norm", "atn", "--store", tmp_path / "s.db",
                       "--format", "json"))
    record = json.loads(result.stdout)
    assert record["status"] == "done" and record["baseline"] == 6.0
    first = record["run_id"]
    # other code: another run, made by the new code (not a cached reading of the old file)
    (folder / "gen.py").write_text(GENERATOR.replace("x[:, :, 0]", "x[:, :, 1]").replace("float(T)", "2.0 * T"))
    result = ok(invoke("run", "summing", "--include", folder, "--norm", "atn", "--store", tmp_path / "s.db",
                       "--format", "json"))
    again = json.loads(result.stdout)
    assert again["run_id"] != first and again["baseline"] == 12.0


# -- mistakes: one line, exit 2, nothing written ----------------------------------------------------

def _files(folder: Path) -> None:
    xs, ys = ragged()
    np.savez(folder / "good.npz", x=xs, y=ys)
    np.savez(folder / "nokey.npz", inputs=xs, y=ys)
    np.savez(folder / "flat.npz", x=np.zeros(10), y=np.zeros(10))
    padded = np.full((6, 5, 2), np.nan)
    padded[:, :3] = 1.0
    np.savez(folder / "nanpad.npz", x=padded, y=np.arange(6) % 2)
    np.savez(folder / "shorty.npz", x=xs, y=ys[:5])
    np.savez(folder / "badlen.npz", x=np.ones((4, 5, 1)), y=np.arange(4) % 2, lengths=np.array([1, 2, 9, 3]))
    np.savez(folder / "oneclass.npz", x=xs, y=np.zeros(len(ys), dtype=int))
    np.savez(folder / "steps.npz", x=np.ones((4, 5, 1)), y=np.ones((4, 3)))
    unseen = ys.copy()
    unseen[:3] = 9
    np.savez(folder / "unseen.npz", x=xs, y=unseen)
    np.savez(folder / "words.npz", x=xs, y=np.array(["a"] * len(ys), dtype=object))
    (folder / "garbage.npz").write_bytes(b"not a zip at all")
    (folder / "data.xyz").write_text("1,2,3\n")
    (folder / "empty.csv").write_text("label,t0,t1\n")
    (folder / "gap.csv").write_text("label,t0,t1,t2\n0,1.0,,3.0\n1,1.0,2.0,3.0\n")
    (folder / "long.csv").write_text("seq,time,v,label\n0,0,1.0,0\n0,1,2.0,1\n1,0,1.0,1\n")
    (folder / "longnan.csv").write_text("id,time,v,label\n0,0,1.0,0\n0,1,nan,0\n1,0,1.0,1\n")
    (folder / "text.csv").write_text("label,t0,t1\n0,a,b\n1,c,d\n")
    # a cell that says nan at a row's end read as empty, the sequence one step shorter without a word
    (folder / "nanend.csv").write_text("label,t0,t1,t2\n0,1.0,2.0,nan\n1,1.0,2.0,3.0\n")
    (folder / "twicedate.csv").write_text("id,time,v,label\na,2020-01-07,1.0,0\na,2020-01-08,1.0,0\n"
                                          "a,2020-01-07,2.0,0\nb,2020-01-07,1.0,1\n")
    lumpy = xs.copy()
    lumpy[3] = [[1.0, 2.0], [3.0]]  # one sequence's steps of different widths
    np.savez(folder / "lumpy.npz", x=lumpy, y=ys)
    aeon = np.empty(len(xs), dtype=object)  # aeon's unequal-length layout: (channels, T_i) arrays
    for i, seq in enumerate(xs):
        aeon[i] = seq.T
    np.savez(folder / "aeon.npz", x=aeon, y=ys)
    even = np.empty(len(xs), dtype=object)  # aeon's layout at one length: each sequence (channels, T), read silently
    for i in range(len(xs)):
        even[i] = np.ones((3, 40)) * i
    np.savez(folder / "aeoneven.npz", x=even, y=ys)
    one_row = np.empty(len(xs), dtype=object)  # one channel: "1 row", not "1 rows"
    for i, seq in enumerate(xs):
        one_row[i] = seq[:, :1].T
    np.savez(folder / "onerow.npz", x=one_row, y=ys)
    np.savez(folder / "nowidth.npz", x=np.ones((10, 5, 1)), y=np.zeros((10, 0)))
    np.savez(folder / "huge.npz", x=np.ones((10, 5, 1)) * 1e300, y=np.arange(10) % 2)  # finite in float64 only
    np.savez(folder / "hugey.npz", x=np.ones((10, 5, 1)), y=np.full(10, -1e300))
    rows = [(i, f"{i % 2}", f"{i % 3}.5") for i in range(10)]  # (row number, label, step 0)
    (folder / "huge.csv").write_text("label,t0,t1\n" + "".join(f"{y},{x},{1e300 if i == 1 else 2.0}\n" for i, y, x in rows))
    # the target's name missing from the header; pandas' to_csv() index, unnamed
    (folder / "short.csv").write_text("t0,t1,label\n" + "".join(f"{i},{x},2.0,{y}\n" for i, y, x in rows))
    (folder / "indexed.csv").write_text(",t0,t1,label\n" + "".join(f"{i},{x},2.0,{y}\n" for i, y, x in rows))
    (folder / "broken.py").write_text("raise RuntimeError('no')\n")
    (folder / "notspec.py").write_text("SPEC = 3\n")
    (folder / "loop-a.csv").symlink_to("loop-b.csv")  # Path.exists() says False: it was "no such data file"
    (folder / "loop-b.csv").symlink_to("loop-a.csv")
    (folder / "dangling.csv").symlink_to("gone.csv")
    (folder / "folder.csv").mkdir()  # it got the datasets library's words
    (folder / "utf16.csv").write_bytes("label,t0\n0,1\n1,2\n".encode("utf-16"))  # it got Python's codec's words
    (folder / "utf16le.csv").write_bytes("label,t0\n0,1\n1,2\n".encode("utf-16-le"))  # no mark: a header problem
    (folder / "utf16be.csv").write_bytes("label,t0\n0,1\n1,2\n".encode("utf-16-be"))
    (folder / "nul.csv").write_bytes(b"label,t0\n0,1\x00\x01\x02\n1,2\n")
    (folder / "latin1.csv").write_bytes("label,t0\n0,1\ncaf\u00e9,2\n".encode("latin-1"))


BAD = [  # (task file text, what the one line must say)
    ("problem: sequence-classification\n", "give 'data' (files) or 'module'"),
    ("data: {train: good.npz}\n", "key 'problem': required"),
    ("problem: sequence-sorting\ndata: {train: good.npz}\n", "key 'problem'"),
    ("problem: sequence-classification\ndata: {test: good.npz}\n", "key 'data.train': required"),
    ("problem: sequence-classification\ndata: {train: missing.npz}\n", "missing.npz: no such data file"),
    ("problem: sequence-classification\ndata: {train: loop-a.csv, y: label}\n", "loop-a.csv is a loop of symbolic links"),
    ("problem: sequence-classification\ndata: {train: dangling.csv, y: label}\n",
     "dangling.csv is a symbolic link to gone.csv, which does not exist"),
    ("problem: sequence-classification\ndata: {train: folder.csv, y: label}\n",
     "folder.csv: is a folder, not a data file (nor a Hugging Face dataset saved with save_to_disk"),
    ("problem: sequence-classification\ndata: {train: utf16.csv, y: label}\n", "utf16.csv: is UTF-16 text; save it as UTF-8"),
    *[(f"problem: sequence-classification\ndata: {{train: {name}, y: label}}\n",  # QA: "a header problem"
       f"{name}: is UTF-16 text (without a byte-order mark); save it as UTF-8") for name in ("utf16le.csv", "utf16be.csv")],
    ("problem: sequence-classification\ndata: {train: nul.csv, y: label}\n", "nul.csv: is binary (it holds NUL bytes)"),
    ("problem: sequence-classification\ndata: {train: latin1.csv, y: label}\n",
     "latin1.csv: is not UTF-8 text (byte 0xe9 at line 3, column 4; latin-1"),
    ("problem: sequence-classification\ndata: {train: data.xyz}\n", "unknown data format '.xyz'"),
    ("problem: sequence-classification\ndata: {train: garbage.npz}\n", "not a NumPy .npz archive"),
    ("problem: sequence-classification\ndata: {train: nokey.npz}\n", "data.x: no array 'x'"),
    ("problem: sequence-classification\ndata: {train: flat.npz}\n", "data.x: expected shape (N, T, C)"),
    ("problem: sequence-classification\ndata: {train: nanpad.npz}\n", "NaN or infinity in sequence 0 at step 3"),
    ("problem: sequence-classification\ndata: {train: shorty.npz}\n", "data.y: expected 40 targets"),
    ("problem: sequence-classification\ndata: {train: badlen.npz, lengths: lengths}\n", "data.lengths[2]: expected 1..5, got 9"),
    ("problem: sequence-classification\ndata: {train: oneclass.npz}\n", "classification needs at least 2"),
    ("problem: sequence-classification\ndata: {train: good.npz, test: unseen.npz}\n", "missing from the training split"),
    ("problem: step-regression\ndata: {train: steps.npz}\n", "a per-step target needs one value per step"),
    ("problem: sequence-regression\ndata: {train: words.npz}\n", "not a number"),
    ("problem: sequence-classification\ndata: {train: good.npz, split: {validation: 0.0}}\n", "leaves the validation split empty"),
    ("problem: sequence-classification\ndata: {train: good.npz, split: {validation: 0.6, test: 0.5}}\n", "leave no training sequence"),
    ("problem: sequence-classification\ndata: {train: good.npz, split: {validation: 1.5}}\n", "key 'data.split.validation'"),
    ("problem: sequence-classification\ndata: {train: good.npz}\nstandardize: maybe\n", "key 'standardize'"),
    ("problem: sequence-classification\ndata: {train: good.npz}\nepochs: 3\n", "key 'epochs': unknown key"),
    ("problem: sequence-classification\ndata: {train: good.npz}\ndefaults: {hidden: -1}\n",
     "key 'defaults.hidden': hidden must be >= 1, got -1"),  # the file and the key, not a flag's words
    ("problem: sequence-classification\ndata: {train: good.npz}\ndefaults: {lr: .nan}\n",
     "key 'defaults.lr': lr must be a finite number"),
    *[("problem: sequence-classification\ndata: {train: good.npz}\ndefaults: {%s: %s}\n" % (key, value),
       f"key 'defaults.{key}': unknown {called} '{value}'")  # a name none of its choices: the file and the key too
      for key, value, called in (("cell", "rnn", "cell"), ("optimizer", "ADAM", "optimizer"), ("norm", "foo", "norm"),
                                 ("init", "xavier", "init"), ("device", "tpu", "device type"))],
    ("problem: sequence-classification\ndata: {train: good.npz}\ndefault_T: 100000000000000000000\n",
     "key 'default_T': Input should be less than or equal to 9223372036854775807"),
    ("problem: sequence-classification\ndata: {train: empty.csv}\n", "no rows"),
    ("problem: sequence-classification\ndata: {train: gap.csv, y: label}\n", "an empty cell before its last value"),
    ("problem: sequence-classification\ndata: {train: text.csv, y: label}\n", "data.x: column 't0' holds non-numbers ('a' in row 1)"),
    ("problem: sequence-classification\ndata: {train: good.npz, y: label}\n", "data.y: no array 'label'"),
    ("problem: sequence-classification\ndata: {train: good.npz, x: [a, b]}\n", "a list of names is for a table's columns"),
    ("problem: sequence-classification\ndata: {train: lumpy.npz}\n", "lumpy.npz: x[3]: its steps have different numbers"),
    ("problem: sequence-classification\ndata: {train: aeon.npz}\n",  # QA: the steps were called channels, no hint
     "each sequence has 3 rows: if each array is (channels, T_i) (aeon's layout) set data.layout: NCT"),
    ("problem: sequence-classification\ndata: {train: onerow.npz}\n", "each sequence has 1 row: if each array"),
    ("problem: sequence-classification\ndata: {train: aeoneven.npz}\n",  # QA: trained on 3 steps of 40 channels
     "aeoneven.npz: data.x: every sequence has shape (3, 40), which reads as 3 steps of 40 channels; if each is "
     "(channels, T) (aeon's layout) set data.layout: NCT, else data.layout: NTC"),
    ("problem: sequence-classification\ndata: {train: good.npz, layout: NCT}\n",  # not "set NCT" to a file that has it
     "data.layout: NCT reads each array as (channels, T_i), which makes 3 steps of each: if each is (T_i, channels), "
     "give data.layout: NTC"),
    ("problem: sequence-regression\ndata: {train: nowidth.npz}\n", "data.y: target 0 of the val split has shape (0,)"),
    ("problem: sequence-classification\ndata: {train: huge.npz}\n", "sequence 0, step 0: value 1e+300 is past float32's"),
    ("problem: sequence-regression\ndata: {train: hugey.npz}\n", "data.y: target 0 of the val split: value -1e+300 is past"),
    ("problem: sequence-classification\ndata: {train: huge.csv, y: label}\n", "row 2, column 't1': value 1e+300 is past"),
    ("problem: sequence-classification\ndata: {train: short.csv, y: label}\n", "more fields than the header has names"),
    ("problem: sequence-classification\ndata: {train: good.npz, validation: ./good.npz}\n",
     "key 'data.validation': "),
    ("problem: sequence-classification\ndata: {train: good.npz, test: good.npz}\n", "is the training file too"),
    ("problem: sequence-classification\ndata: {train: indexed.csv, y: label}\n", "column 'Unnamed: 0' has no name"),
    ("problem: sequence-classification\ndata: {train: long.csv, y: label, layout: long}\n", "data.id: no column 'id'"),
    ("problem: sequence-classification\ndata: {train: long.csv, y: label, layout: long, id: seq}\n", "several targets"),
    ("problem: sequence-classification\ndata: {train: nanend.csv, y: label}\n",
     "data.x: row 1, column 't2': 'nan' is not a number a model can read"),
    ("problem: step-classification\ndata: {train: twicedate.csv, y: label, layout: long}\n",
     "sequence 'a' has time '2020-01-07' twice"),  # as the file writes it, not pandas' Timestamp(...)
    ("problem: sequence-classification\ndata: {train: longnan.csv, y: label, layout: long}\n",
     "data.x: row 2, column 'v': NaN (an empty cell, or nan); in a long table each row is a step"),
    ("problem: sequence-classification\ndata: {train: good.npz}\nname: other\n", "differs from the file's name"),
    ("problem: [unclosed\n", "invalid YAML"),
    ("problem: sequence-classification\ninputs: tokens\ndata: {train: good.npz}\n", "inputs: tokens needs one whole number"),
    ("problem: sequence-classification\nembedding: 8\ndata: {train: good.npz}\n", "key 'embedding': only for inputs: tokens"),
    ("module: broken.py:SPEC\ndefault_T: 5\n", "(importing it): raised"),
    ("module: notspec.py:SPEC\ndefault_T: 5\n", "expected an atnbench.tasks.TaskSpec"),
    ("module: nowhere.py:SPEC\ndefault_T: 5\n", "no such file"),
    ("module: SPEC\ndefault_T: 5\n", "expected 'file.py:OBJECT'"),
]


@pytest.mark.parametrize("text, message", BAD, ids=[message[:40] for _, message in BAD])
@pytest.mark.parametrize("command", ["run", "tasks check"])
def test_a_mistake_is_one_line_and_writes_nothing(tmp_path, monkeypatch, text, message, command):
    folder = tmp_path / "bad"
    folder.mkdir()
    _files(folder)
    (folder / "mine.yaml").write_text(text + (PICKLED if "data" in text else ""))
    monkeypatch.chdir(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = invoke(*command.split(), "mine", "--include", folder, "--store", tmp_path / "s.db") \
        if command == "run" else invoke(*command.split(), "mine", "--include", folder)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines
    assert "Traceback" not in result.stdout + result.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "__pycache__" not in p.parts) == \
        [p for p in before if "__pycache__" not in p.parts]


def test_the_mistake_list_is_long_enough():
    assert len(BAD) >= 20


def test_include_of_a_missing_folder_is_one_line(tmp_path):
    result = invoke("run", "mine", "--include", tmp_path / "nope")
    assert result.exit_code == 2 and "no such folder" in result.stderr
    (tmp_path / "mine.yaml").write_text("problem: sequence-classification\n")  # a task file, not its folder
    result = invoke("tasks", "--include", tmp_path / "mine.yaml")
    assert result.exit_code == 2 and "mine.yaml: is a file; give the folder that holds task files" in result.stderr


@pytest.mark.slow
def test_the_shipped_example_runs_as_its_readme_says(tmp_path):
    """examples/japanese-vowels: the README's commands, on a copy of the folder, at 1 seed and a
    small budget (the data come out of the aeon package: real, not generated)."""
    import re
    import subprocess
    import sys

    example = REPO / "examples" / "japanese-vowels"
    folder = tmp_path / "japanese-vowels"
    shutil.copytree(example, folder, ignore=shutil.ignore_patterns("*.npz", "*.png"))
    block = re.search(r"```bash\n(.+?)\n```", (example / "README.md").read_text(), re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands[0] == "pip install aeon && python examples/japanese-vowels/export.py"
    subprocess.run([sys.executable, str(folder / "export.py")], check=True, capture_output=True)
    train = np.load(folder / "train.npz", allow_pickle=True)
    assert len(train["x"]) == 270 and train["x"][0].shape[1] == 12 and len({len(x) for x in train["x"]}) > 1
    for command in commands[1:]:
        words = command.replace("examples/japanese-vowels", str(folder)).split()[1:]
        if words[0] == "sweep":
            # --seeds 0 (last), tiny runs, in this process: the commands are checked, not the numbers
            words = [w for w in words if w != "0-4"] + ["0", "--budget", "0.05", "--hidden", "8", "--iters", "4",
                                                         "--eval-every", "2", "--workers", "1"]
        if "--out-dir" in words:
            words[words.index("--out-dir") + 1] = str(tmp_path / "figs")
        store = ["--store", tmp_path / "s.db"] if words[0] in ("sweep", "report") else []
        result = invoke(*words, *store)
        assert result.exit_code == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    assert list((tmp_path / "figs").glob("*.png"))


def test_the_shipped_grids_apply_to_a_task_found_through_the_environment(npz_task, tmp_path, monkeypatch):
    monkeypatch.setenv("ATNBENCH_TASKS", str(npz_task))  # no --include: $ATNBENCH_TASKS alone
    ok(invoke("tasks", "check", "vowels"))
    for sweep, runs in (("k-ablation", 5), ("bias-placement", 4), ("norm-ablation", 7)):
        dry = ok(invoke("sweep", sweep, "--task", "vowels", "--seeds", "0", "--dry-run", "--format", "json",
                        "--store", tmp_path / "s.db"))
        planned = json.loads(dry.stdout)
        rows = planned["runs"]
        assert len(rows) == runs and all(row["config"]["task"] == "vowels" for row in rows), rows


def test_npy_files_per_part_and_an_arrow_table(tmp_path):
    """A split as separate .npy files (x padded, y, lengths); a wide Feather/Arrow table."""
    import pandas as pd

    from atnbench.tasks.taskfiles import include

    folder = tmp_path / "parts"
    folder.mkdir()
    rng = np.random.default_rng(4)
    lengths = rng.integers(2, 7, 20)
    x = rng.normal(0, 1, (20, 6, 3))
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", np.arange(20) % 2)
    np.save(folder / "n.npy", lengths)
    (folder / "parts.yaml").write_text("problem: sequence-classification\n"
                                       "data:\n  train: {x: x.npy, y: y.npy, lengths: n.npy}\n" + SMALL)
    pd.DataFrame({"y": rng.normal(0, 1, 20), **{f"t{i}": rng.normal(0, 1, 20) for i in range(5)}}).to_feather(
        folder / "wide.arrow")
    (folder / "arrow.yaml").write_text("problem: sequence-regression\ndata: {train: wide.arrow}\n" + SMALL)
    include([folder])
    _, source = _source("parts")
    assert source.data["train"][0].shape[-1] == 3
    assert sorted(source.lengths["train"].tolist() + source.lengths["val"].tolist()) == sorted(lengths.tolist())
    _, source = _source("arrow")
    assert source.data["train"][0].shape[1:] == (5, 1) and source.data["train"][1].dtype == torch.float32


def test_a_broken_task_file_spoils_only_itself(npz_task):
    (npz_task / "broken.yaml").write_text("problem: [unclosed\n")
    ok(invoke("tasks", "check", "vowels", "--include", npz_task))  # its neighbour is fine
    unknown = invoke("run", "nope", "--include", npz_task)
    assert unknown.exit_code == 2 and "unknown task 'nope'" in unknown.stderr and "broken" in unknown.stderr
    listed = ok(invoke("tasks", "--include", str(npz_task), env={"COLUMNS": "1000"})).stdout
    assert "invalid YAML" in listed and "vowels" in listed


def test_a_language_model_over_token_ids_reports_bits_per_character(tmp_path):
    """Step classification over token inputs (an embedding, no scaling), measured in bpc."""
    folder = tmp_path / "lm"
    folder.mkdir()
    rng = np.random.default_rng(6)
    text = [rng.integers(0, 12, int(rng.integers(5, 15))) for _ in range(30)]
    xs, ys = np.empty(30, dtype=object), np.empty(30, dtype=object)
    xs[:], ys[:] = [t[:-1] for t in text], [t[1:] for t in text]  # the next character at every step
    np.savez(folder / "chars.npz", x=xs, y=ys)
    (folder / "chars.yaml").write_text("problem: step-classification\ninputs: tokens\nembedding: 8\nmetric: bpc\n"
                                       "data: {train: chars.npz}\n" + SMALL)
    checked = ok(invoke("tasks", "check", "chars", "--include", folder)).stdout
    assert "token ids 0..11" in checked
    record = json.loads(ok(invoke("run", "chars", "--include", folder, "--norm", "atn", "--k", 3,
                                  "--store", tmp_path / "s.db", "--format", "json")).stdout)
    assert record["metric"] == "bpc" and record["val_bpc"] == pytest.approx(record["min_val_loss"] / np.log(2))
    (folder / "chars.yaml").write_text("problem: step-regression\nmetric: bpc\ndata: {train: chars.npz}\n")
    bad = invoke("tasks", "check", "chars", "--include", folder)
    assert bad.exit_code == 2 and "key 'metric'" in bad.stderr


def test_a_data_file_edited_in_place_makes_a_new_run_not_a_match_for_the_old_one(npz_task, tmp_path):
    """The stored run was trained on the old contents: run and sweep train again on the new."""
    store = tmp_path / "s.db"
    first = json.loads(ok(invoke("run", "vowels", "--include", npz_task, "--norm", "ln", "--store", store,
                                 "--format", "json")).stdout)
    xs, ys = ragged(seed=9)
    np.savez(npz_task / "seqs.npz", x=xs, y=ys)  # the same path, other sequences
    again = ok(invoke("run", "vowels", "--include", npz_task, "--norm", "ln", "--store", store, "--format", "json"))
    second = json.loads(again.stdout)
    assert second["run_id"] != first["run_id"] and "already in" not in again.stderr
    assert second["min_val_loss"] != first["min_val_loss"]
    swept = ok(invoke("sweep", "norm-ablation", "--task", "vowels", "--include", npz_task, "--seeds", "0",
                      "--store", store, "--dry-run", "--format", "json"))
    assert all(row["status"] != "done" or row["run_id"] == second["run_id"] for row in json.loads(swept.stdout)["runs"])


def test_an_nct_array_is_read_as_its_layout_says(tmp_path):
    """(N, channels, T), aeon's layout: refused without a word from the task file (matrix), read
    transposed with layout: NCT, and as it stands with layout: NTC."""
    from atnbench.tasks.userdata import Fields, read_split

    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 2, 30))
    np.savez(tmp_path / "nct.npz", x=x, y=np.arange(6) % 2)
    nct = read_split(tmp_path / "nct.npz", Fields(layout="NCT"), per_step=False)
    assert [seq.shape for seq in nct.xs] == [(30, 2)] * 6 and np.array_equal(nct.xs[4], x[4].T)
    ntc = read_split(tmp_path / "nct.npz", Fields(layout="NTC"), per_step=False)
    assert [seq.shape for seq in ntc.xs] == [(2, 30)] * 6
    (tmp_path / "aeon.yaml").write_text("problem: sequence-classification\ndata: {train: nct.npz, layout: NCT, "
                                        "split: {validation: 0.5}}\n")
    checked = ok(invoke("tasks", "check", "aeon", "--include", tmp_path)).stdout
    assert re.search(r"channels\s+2\b", checked)
    assert "30 to 30 steps" in checked


def test_tasks_new_drafts_an_nct_array_with_its_layout_said(tmp_path):
    """aeon's (N, channels, T) arrays: the draft says layout: NCT (the data check refuses to guess
    it), and the task it writes checks; NTC-shaped arrays get no layout line."""
    rng = np.random.default_rng(4)
    np.savez(tmp_path / "nct.npz", x=rng.normal(size=(20, 1, 24)), y=np.arange(20) % 2)
    np.savez(tmp_path / "ntc.npz", x=rng.normal(size=(20, 24, 1)), y=np.arange(20) % 2)
    out = tmp_path / "mine"
    ok(invoke("tasks", "new", "aeon", "--from", tmp_path / "nct.npz", "--dir", out))
    drafted = (out / "aeon.yaml").read_text()
    assert re.search(r"^  layout: NCT +# inferred: x read as \(sequences, channels, steps\)", drafted, re.M)
    assert "# 20 sequences, 1 channel(s), lengths 24 to 24" in drafted
    assert "# default_T: the longest sequence of any split (test included)" in drafted  # as load_preset takes it
    checked = ok(invoke("tasks", "check", "aeon", "--include", out)).stdout
    assert re.search(r"channels\s+1\b", checked) and "24 to 24 steps" in checked
    ok(invoke("tasks", "new", "plain", "--from", tmp_path / "ntc.npz", "--dir", out))
    assert "layout" not in (out / "plain.yaml").read_text()


def test_a_table_without_a_header_row_is_refused_not_read_one_sequence_short(tmp_path):
    """UCR/aeon .tsv files have no header: their first sequence must not become column names."""
    rows = [f"{i % 2}\t{i}.5\t{i}.25\t-{i}.125" for i in range(1, 11)]
    (tmp_path / "ucr.tsv").write_text("\n".join(rows) + "\n")
    refused = invoke("tasks", "new", "ucr", "--from", tmp_path / "ucr.tsv", "--dir", tmp_path / "mine")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
    assert "ucr.tsv: its first row is numbers (1, 1.5, 1.25, ...), not column names" in refused.stderr
    assert not (tmp_path / "mine" / "ucr.yaml").exists()
    (tmp_path / "ucr.yaml").write_text("problem: sequence-classification\ndata: {train: ucr.tsv, y: '1'}\n")
    assert "its first row is numbers" in invoke("tasks", "check", "ucr", "--include", tmp_path).stderr
    # integer names counting up (DataFrame.to_csv of integer columns) are a header
    (tmp_path / "named.csv").write_text("0,1,2,3\n" + "\n".join(row.replace("\t", ",") for row in rows) + "\n")
    ok(invoke("tasks", "new", "named", "--from", tmp_path / "named.csv", "--dir", tmp_path / "mine"))
    assert "# 10 sequences" in (tmp_path / "mine" / "named.yaml").read_text()


def test_long_tables_sort_numeric_time_stamps_as_numbers(tmp_path):
    """Time stamps written as text digits sort as numbers (10 after 7), not as text."""
    from atnbench.tasks.userdata import Fields, read_split

    rows = [f"0,{t},{t}.0,1" for t in (10, 7, 8, 9)] + [f"1,{t},{t}.0,0" for t in (2, 1)]
    (tmp_path / "t.csv").write_text("id,time,v,label\n" + "\n".join(rows) + "\n")
    import pandas as pd

    frame = pd.read_csv(tmp_path / "t.csv", dtype={"time": str})  # as a text column would arrive
    from atnbench.tasks.userdata import _from_frame

    part = _from_frame(frame, Fields(y="label", layout="long"), per_step=False, source="t.csv")
    assert part.xs[0][:, 0].tolist() == [7.0, 8.0, 9.0, 10.0] and part.xs[1][:, 0].tolist() == [1.0, 2.0]
    assert read_split(tmp_path / "t.csv", Fields(y="label", layout="long"), per_step=False).xs[0][-1, 0] == 10.0


def test_tasks_new_makes_its_folder_and_refuses_a_fifo(csv_task, tmp_path):
    """The README's tour: `tasks new ... --dir mytasks` where mytasks does not exist yet; a refused
    draft makes no folder, and --from a FIFO is refused at once (it used to hang)."""
    import os

    out = tmp_path / "new" / "mytasks"
    os.mkfifo(tmp_path / "pipe.csv")
    refused = invoke("tasks", "new", "piped", "--from", tmp_path / "pipe.csv", "--dir", out)
    assert refused.exit_code == 2 and "is a named pipe (FIFO)" in refused.stderr and not out.exists()
    ok(invoke("tasks", "new", "sums", "--from", csv_task / "sums.csv", "--dir", out))
    assert (out / "sums.yaml").is_file()
    ok(invoke("tasks", "check", "sums", "--include", out))


def test_tasks_new_drafts_pass_their_own_check_whatever_the_names(tmp_path):
    """A file name with '#', ': ' or a quote, and a CSV header of numbers (pandas' to_csv of an
    unnamed frame), are written quoted: each draft reads back as written and passes the check;
    the command it suggests quotes a folder with a space for the shell."""
    rng = np.random.default_rng(0)
    y = np.arange(12) % 2
    x = rng.normal(size=(12, 4)) + y[:, None]
    out = tmp_path / "my tasks"
    names = ["run #1.npz", 'q"uote.npz', "a: b.npz"]
    for name in names:
        np.savez(tmp_path / name, x=x, y=y)
    (tmp_path / "numbers.csv").write_text("0,1,2,3,4\n" + "".join(f"{t},{','.join(map(str, row))}\n"
                                                               for t, row in zip(y, x)))
    for i, name in enumerate(names + ["numbers.csv"]):
        said = ok(invoke("tasks", "new", f"t{i}", "--from", tmp_path / name, "--dir", out)).stdout
        assert f"--include '{out}'" in said
        checked = ok(invoke("tasks", "check", f"t{i}", "--include", out)).stdout
        assert "sequences" in checked and "2: 0, 1" in checked


def test_na_and_none_are_words_in_a_text_label_or_id_column(tmp_path):
    """pandas reads 'NA', 'None' and 'null' as missing; in a column of text labels or sequence ids
    they are names (a 'None' activity, Namibia's 'NA'), and only an empty cell is missing."""
    from atnbench.config import ConfigError
    from atnbench.tasks.userdata import Fields, read_split

    wide = tmp_path / "wide.csv"
    wide.write_text("label,t0,t1\ncat,1,2\nNone,3,4\nNA,5,6\nnull,7,8\n")
    split = read_split(wide, Fields(y="label"), per_step=False)
    assert split.ys == ["cat", "None", "NA", "null"]
    long = tmp_path / "long.csv"
    long.write_text("id,time,a,tag\nNA,0,1.0,up\nNA,1,NA,up\nUS,0,2.0,None\nUS,1,3.0,None\n")
    with pytest.raises(ConfigError, match="row 2, column 'a': NaN"):
        read_split(long, Fields(y="tag", layout="long"), per_step=True)  # in a number column 'NA' is missing
    long.write_text("id,time,a,tag\nNA,0,1.0,up\nNA,1,0.5,up\nUS,0,2.0,None\nUS,1,3.0,None\n")
    split = read_split(long, Fields(y="tag", layout="long"), per_step=True)
    assert [list(y) for y in split.ys] == [["up", "up"], ["None", "None"]]
    numbers = tmp_path / "numbers.csv"  # a number target: 'NA' is a missing value, refused with its row
    numbers.write_text("y,t0\n1.5,1\nNA,2\n")
    with pytest.raises(ConfigError, match="y row 2: target is NaN"):
        read_split(numbers, Fields(y="y"), per_step=False)
    wide.write_text("label,t0,t1\ncat,1,2\n,3,4\n")  # an empty cell is still missing
    with pytest.raises(ConfigError, match="y row 2: target is NaN"):
        read_split(wide, Fields(y="label"), per_step=False)


def test_a_run_of_your_own_task_takes_its_data_from_the_task_file_only(npz_task, tmp_path):
    """A config file's or a flag's options on a task of your own replaced its data (data_files),
    hashed a folder it never read into the id (--data-dir) or only made another id (foo); only the
    learning-rate schedule's options may be added to it."""
    store = tmp_path / "s.db"
    base = ("run", "vowels", "--include", npz_task, "--iters", "2", "--store", store)
    for options, key in (("{foo: 1}", "foo"), ("{data_files: {train: other.npz}}", "data_files"),
                         ("{user_task: {problem: x}}", "user_task")):
        (tmp_path / "c.yaml").write_text(f"options: {options}\n")
        refused = invoke(*base, "--config", tmp_path / "c.yaml")
        assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
        assert f"{tmp_path / 'c.yaml'}: options: {key!r}: vowels is a task of your own" in refused.stderr
    refused = invoke(*base, "--data-dir", tmp_path)
    assert refused.exit_code == 2 and "--data-dir: vowels is a task of your own" in refused.stderr, refused.output
    assert not store.exists()
    (tmp_path / "c.yaml").write_text("options: {lr_schedule: {milestones: [1], gamma: 0.5}}\n")
    ok(invoke(*base, "--config", tmp_path / "c.yaml", "-q"))
    # a shipped task: a user task's keys are no options of it (they reached its code as an internal error)
    (tmp_path / "c.yaml").write_text("options: {user_task: {problem: x}}\n")
    refused = invoke("run", "copying", "--T", "10", "--config", tmp_path / "c.yaml", "--store", tmp_path / "o.db")
    assert refused.exit_code == 2 and "'user_task' is not an option of copying" in refused.stderr, refused.output


def test_a_length_given_outside_the_task_file_gets_the_evaluations_for_that_length(tmp_path, monkeypatch):
    """`--iters 600` kept the interval fitted to the task file's length (2 epochs: every step), or
    the 2,000-step default's (every 40: two evaluations of 60 steps to select from); it now gets
    the one the task file would give that length, unless an eval_every is given too."""
    from atnbench.run.runspec import resolve_run
    from atnbench.tasks.userprep import evaluation_interval

    folder = tmp_path / "mine"
    folder.mkdir()
    xs, ys = ragged()
    np.savez(folder / "seqs.npz", x=xs, y=ys)
    for name, defaults in (("flagged", "{}"), ("filed", "{steps: 600}"), ("fixed", "{eval_every: 7}")):
        (folder / f"{name}.yaml").write_text(f"problem: sequence-classification\ndata: {{train: seqs.npz}}\n"
                                             f"defaults: {defaults}\nallow_pickle: true\n")
    monkeypatch.setenv("ATNBENCH_TASKS", str(folder))
    flagged, filed = resolve_run("flagged", {"steps": 600}), resolve_run("filed", {})
    assert flagged.steps == filed.steps == 600
    assert flagged.eval_every == filed.eval_every == evaluation_interval(600, flagged.steps_per_epoch)
    assert resolve_run("flagged", {}).eval_every == evaluation_interval(resolve_run("flagged", {}).steps,
                                                                        flagged.steps_per_epoch)
    assert resolve_run("flagged", {"steps": 600, "eval_every": 5}).eval_every == 5  # given: kept
    assert resolve_run("fixed", {"steps": 600}).eval_every == 7  # the task file's: kept


def test_tasks_new_on_no_sequences_or_empty_ones_is_one_line(tmp_path):
    """An .npz of no sequences was "internal error (a bug in atnbench)"; one of (N, 0, C) was taken
    for aeon's layout and said to have no channels, with a transposed shape."""
    np.savez(tmp_path / "empty.npz", x=np.zeros((0, 10, 2)), y=np.zeros(0, int))
    np.savez(tmp_path / "steps0.npz", x=np.zeros((40, 0, 2)), y=np.zeros(40, int))
    for name, said in (("empty", "empty.npz: holds no sequences"),
                       ("steps0", "x[0]: expected a (T, C) or (T,) array with T >= 1, got shape (0, 2)")):
        refused = invoke("tasks", "new", name, "--from", tmp_path / f"{name}.npz", "--dir", tmp_path / "mine")
        assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
        assert said in refused.stderr and not (tmp_path / "mine" / f"{name}.yaml").exists()


def test_a_long_tables_empty_time_stamp_is_refused_not_sorted_last(tmp_path):
    """pandas sorts NaN last: the step of an empty time cell moved to its sequence's end, silently."""
    from atnbench.config import ConfigError
    from atnbench.tasks.userdata import Fields, read_split

    rows = ["id,time,f,y", "0,,0,1", "0,1,10,1", "0,2,20,1", "1,0,1,0", "1,1,2,0", "1,2,3,0"]
    (tmp_path / "long.csv").write_text("\n".join(rows) + "\n")
    with pytest.raises(ConfigError, match="data.time: row 1 has an empty 'time' cell"):
        read_split(tmp_path / "long.csv", Fields(layout="long"), per_step=False)
    refused = invoke("tasks", "new", "long", "--from", tmp_path / "long.csv", "--dir", tmp_path / "mine")
    assert refused.exit_code == 2 and "data.time: row 1 has an empty 'time' cell" in refused.stderr, refused.output


def test_a_header_naming_a_column_twice_is_refused_and_iso_dates_order_a_long_table(tmp_path):
    """pandas renamed a second `y` to `y.1` and read it as one more step (the labels leaked into
    the inputs); a CSV's dates are text, and ISO 8601 ones were refused as "not a number"."""
    from atnbench.config import ConfigError
    from atnbench.tasks.userdata import Fields, read_split

    (tmp_path / "twice.csv").write_text("y,a,b,y\n" + "\n".join(f"{i % 2},{i},{i + 1},{1 - i % 2}" for i in range(6)))
    with pytest.raises(ConfigError, match="the header names column 'y' twice \\(columns 1 and 4\\)"):
        read_split(tmp_path / "twice.csv", Fields(), per_step=False)
    days = ["2020-01-10", "2020-01-02", "2020-01-03"]  # in file order not in time order: sorted by date
    rows = [f"{seq},{day},{value},{seq % 2}" for seq in range(2) for day, value in zip(days, (3.0, 1.0, 2.0))]
    (tmp_path / "dated.csv").write_text("id,time,f,y\n" + "\n".join(rows) + "\n")
    dated = read_split(tmp_path / "dated.csv", Fields(layout="long"), per_step=False)
    assert [seq[:, 0].tolist() for seq in dated.xs] == [[1.0, 2.0, 3.0]] * 2


def test_a_copy_of_the_training_file_or_validation_given_as_test_is_refused(tmp_path):
    """The training file given again was refused by its path only: a byte-identical copy as the
    validation split, or one file as validation and test (the test numbers then the selected
    ones), was taken and said ok."""
    rng = np.random.default_rng(5)
    np.savez(tmp_path / "a.npz", x=rng.normal(size=(40, 8, 2)), y=np.arange(40) % 2)
    np.savez(tmp_path / "b.npz", x=rng.normal(size=(10, 8, 2)), y=np.arange(10) % 2)
    (tmp_path / "acopy.npz").write_bytes((tmp_path / "a.npz").read_bytes())
    (tmp_path / "bcopy.npz").write_bytes((tmp_path / "b.npz").read_bytes())
    cases = {"copy": ("{train: a.npz, validation: acopy.npz}", "key 'data.validation'", "(or a copy of it)"),
             "same": ("{train: a.npz, validation: b.npz, test: b.npz}", "key 'data.test'", "holds what data.validation"),
             "twin": ("{train: a.npz, validation: b.npz, test: bcopy.npz}", "key 'data.test'", "holds what data.validation")}
    for name, (data, key, said) in cases.items():
        (tmp_path / f"{name}.yaml").write_text(f"problem: sequence-classification\ndata: {data}\n")
        refused = invoke("tasks", "check", name, "--include", tmp_path)
        assert refused.exit_code == 2 and key in refused.stderr and said in refused.stderr, refused.output
    (tmp_path / "fine.yaml").write_text("problem: sequence-classification\ndata: {train: a.npz, validation: b.npz}\n")
    ok(invoke("tasks", "check", "fine", "--include", tmp_path))


def test_a_per_step_tasks_baseline_counts_the_steps_a_run_at_its_length_scores(tmp_path, monkeypatch):
    """Sequences of 10 steps at default_T 5: the run trains and scores their first 5 steps, the
    no-information guess was scored over all 10 (a run that learned nothing "beat" it by 17%)."""
    import math

    import numpy as np

    monkeypatch.setenv("ATNBENCH_TASKS", "")
    folder = tmp_path / "t"
    folder.mkdir()
    rng = np.random.default_rng(0)

    def split(n, seed):
        labels = np.random.default_rng(seed).random((n, 10))
        y = np.where(np.arange(10) < 5, labels < 0.9, labels < 0.4).astype(int)  # mostly 1 early, mostly 0 late
        return rng.normal(size=(n, 10, 2)), y

    (x, y), (vx, vy) = split(40, 1), split(20, 2)
    np.savez(folder / "train.npz", x=x, y=y)
    np.savez(folder / "val.npz", x=vx, y=vy)
    (folder / "steps.yaml").write_text("problem: step-classification\ndata: {train: train.npz, validation: val.npz}\n"
                                       "default_T: 5\n")
    p = np.bincount(y[:, :5].reshape(-1), minlength=2) / y[:, :5].size
    expected = -np.mean(np.log(p[vy[:, :5].reshape(-1)]))
    over_all = -np.mean(np.log((np.bincount(y.reshape(-1), minlength=2) / y.size)[vy.reshape(-1)]))
    assert abs(expected - over_all) > 0.05  # the two readings differ here
    checked = ok(invoke("tasks", "check", "steps", "--include", folder))
    assert f"no-information loss {expected:.4g}" in " ".join(checked.stdout.split()), checked.stdout
    from atnbench.tasks.lookup import get_task

    baseline = get_task("steps").baseline
    assert math.isclose(baseline(5), expected, rel_tol=1e-9) and math.isclose(baseline(10), over_all, rel_tol=1e-9)


def test_the_baseline_is_scored_on_the_validation_sequences_a_run_validates_on(tmp_path, monkeypatch):
    """`--val-samples 6` validates on 6 of the 20 validation sequences; the no-information guess
    was scored on all 20, so the run was judged against another set's number: the run's record
    and the report's table now give the guess on those 6."""
    import math

    monkeypatch.setenv("ATNBENCH_TASKS", "")
    folder = tmp_path / "t"
    folder.mkdir()
    rng = np.random.default_rng(0)
    y = np.array([0] * 30 + [1] * 10)
    vy = np.array([1] * 6 + [0] * 14)  # the first 6 are the rare class
    np.savez(folder / "train.npz", x=rng.normal(size=(40, 5, 2)), y=y)
    np.savez(folder / "val.npz", x=rng.normal(size=(20, 5, 2)), y=vy)
    (folder / "rare.yaml").write_text("problem: sequence-classification\ndata: {train: train.npz, validation: val.npz}\n")
    from atnbench.tasks.taskfiles import include

    include([folder])
    _, source = _source("rare", T=5, val_samples=6)
    six = source.data["val"][1].numpy()  # the 6 sequences a run validates on
    assert len(six) == 6
    p = np.bincount(y) / len(y)
    on_six, on_all = -np.mean(np.log(p[six])), -np.mean(np.log(p[vy]))
    assert on_six - on_all > 0.03
    store = tmp_path / "s.db"
    record = json.loads(ok(invoke("run", "rare", "--include", folder, "--val-samples", "6", "--iters", "2",
                                  "--eval-every", "2", "--store", store, "--format", "json")).stdout)
    assert math.isclose(record["baseline"], on_six, rel_tol=1e-9), (record["baseline"], on_six, on_all)
    report = json.loads(ok(invoke("report", "--task", "rare", "--include", folder, "--store", store,
                                  "--format", "json")).stdout)
    [table] = report["tables"]
    [row] = [row for row in table["rows"] if row["kind"] == "baseline"]
    assert math.isclose(row["cells"]["min_val_loss"]["mean"], on_six, rel_tol=1e-9), row
    # a run on the whole split beside it: one group, two subsets. The baseline is the one of the
    # larger subset at a tie (of most runs otherwise), and a note gives the other's; it was dropped
    ok(invoke("run", "rare", "--include", folder, "--iters", "2", "--eval-every", "2", "--store", store, "-q"))
    report = json.loads(ok(invoke("report", "--task", "rare", "--include", folder, "--store", store,
                                  "--format", "json")).stdout)
    [table] = report["tables"]
    [row] = [row for row in table["rows"] if row["kind"] == "baseline"]
    assert math.isclose(row["cells"]["min_val_loss"]["mean"], on_all, rel_tol=1e-9), row
    [note] = [note for note in table["notes"] if note.startswith("baseline ")]
    assert "on the 20 validation sequences 1 of the 2 runs validate on" in note
    assert f"against {on_six:.4g} (the 6 validation sequences it validates on)" in note, note


def test_a_good_character_cut_where_the_encoding_check_stops_is_not_named_as_the_bad_byte(tmp_path, monkeypatch):
    """A table that is not UTF-8 is named in the project's words, with the line and column of its
    bad byte, from its first 16 MB (here 17 bytes). A good two-byte "é" cut by that limit was named
    as the bad byte (QA): past the limit, the line says no place."""
    from atnbench.config import ConfigError
    from atnbench.tasks import userdata

    monkeypatch.setattr(userdata, "HEAD_BYTES", 17)
    for name, good, at in (("cut.csv", "label,t0\n0,1\ncaf\u00e9,2\n", 16), ("near.csv", "label,t0\ncaf\u00e9,1\n", 12)):
        (tmp_path / name).write_bytes(good.encode("utf-8") + "caf\u00e9,3\n".encode("latin-1"))
        assert (tmp_path / name).read_bytes()[at:at + 2] == "\u00e9".encode("utf-8")  # a good é at the limit, or near it
        with pytest.raises(ConfigError, match=rf"{name}: is not UTF-8 text \(latin-1 or another encoding\? save it as UTF-8\)$"):
            userdata.load_frame(tmp_path / name)
    early = tmp_path / "early.csv"
    early.write_bytes("label,t0\ncaf\u00e9,1\n0,2\n".encode("latin-1"))  # the bad byte within the first 17
    with pytest.raises(ConfigError, match=r"early.csv: is not UTF-8 text \(byte 0xe9 at line 2, column 4;"):
        userdata.load_frame(early)

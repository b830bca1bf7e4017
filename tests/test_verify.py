"""`atnbench verify`: a stored run re-run from its config reproduces bit for bit on this machine;
a stored run whose numbers were changed is reported as differing, with the size of the
difference and both processors; an unknown id is exit 2."""

from __future__ import annotations

import json
import sqlite3

import pytest
from atnbench.store import ResultsStore
from helpers import invoke


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    db = tmp_path_factory.mktemp("verify") / "r.db"
    made = invoke("run", "adding", "--T", "10", "--hidden", "8", "--batch-size", "4", "--iters", "6",
                  "--eval-every", "3", "--val-samples", "8", "--store", db, "--format", "json")
    assert made.exit_code == 0, made.output
    return db, json.loads(made.stdout)["run_id"]


def edited_copy(db, run_id, copy, min_val_loss, then=None):
    """A copy of the store ``db`` whose run's stored min_val_loss is ``min_val_loss(old)``; ``then``
    edits the copy further (an open sqlite3 connection)."""
    with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
        source.backup(target)
        summary = json.loads(target.execute("SELECT summary_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])
        summary["min_val_loss"] = min_val_loss(summary["min_val_loss"])
        target.execute("UPDATE runs SET summary_json = ? WHERE run_id = ?", (json.dumps(summary), run_id))
        return then(target) if then else None


def test_a_run_re_run_here_reproduces_bit_for_bit(stored):
    db, run_id = stored
    result = invoke("verify", run_id[:6], "--store", db, "--format", "json")
    assert result.exit_code == 0, result.output
    (found,) = json.loads(result.stdout)
    assert found["identical"] and found["stored"] == found["rerun"]
    assert found["stored_processor"] == found["this_processor"] and "(" in found["this_processor"]


def test_changed_numbers_are_reported_with_their_size(stored, tmp_path):
    db, run_id = stored
    copy = tmp_path / "changed.db"
    edited_copy(db, run_id, copy, lambda old: old * 1.1)
    result = invoke("verify", run_id, "--store", copy)
    assert result.exit_code == 0, result.output
    assert f"run {run_id}: differs" in result.stdout and "(-9.09%)" in result.stdout
    assert "this machine:" in result.stdout and "stored run's processor:" in result.stdout


def test_a_sample_of_a_sweep_and_bad_requests(stored):
    db, run_id = stored
    assert invoke("verify", "ffffff", "--store", db).exit_code == 2
    assert invoke("verify", "--store", db).exit_code == 2
    assert invoke("verify", "--sample", "1", "--store", db).exit_code == 2
    assert invoke("verify", "--sample", "1", "--sweep", "nosuch", "--store", db).exit_code == 2


def test_a_sample_larger_than_the_sweep_says_how_many_it_checks(stored, tmp_path):
    """--sample 3 of a sweep with one finished run checks that one, and says so."""
    db, run_id = stored
    copy = tmp_path / "swept.db"
    with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    with ResultsStore(copy) as store:
        store.add_to_sweep("tiny", run_id)
    result = invoke("verify", "--sample", "3", "--sweep", "tiny", "--store", copy)
    assert result.exit_code == 0, result.output
    assert "note: --sample 3: sweep tiny has 1 finished run" in result.stderr and "checking it" in result.stderr
    assert "[1/1] re-running" in result.stderr


def test_a_run_trained_on_the_loop_is_told_apart_from_a_re_run_on_the_cpp_path(tmp_path, monkeypatch):
    """One processor, one run id, two numbers: the plain loop (no compiler, ATNBENCH_NO_BUILD) and
    the C++ fast path round differently. verify said "differs" naming one processor twice."""
    from atnbench.nn import fastpath

    db = tmp_path / "r.db"
    monkeypatch.setattr(fastpath, "_cpp_state", {"ok": False, "disabled": True, "error": "ATNBENCH_NO_BUILD is set"})
    made = invoke("run", "adding", "--T", "10", "--hidden", "8", "--batch-size", "4", "--iters", "60", "--norm", "ln",
                  "--eval-every", "20", "--val-samples", "8", "--store", db, "--format", "json")
    assert made.exit_code == 0, made.output
    monkeypatch.undo()  # the C++ path back, as this process had it
    run_id = json.loads(made.stdout)["run_id"]
    with ResultsStore(db, create=False) as results:
        assert results.get_run(run_id).env["cpp_fast_path"] is False
    result = invoke("verify", run_id, "--store", db, "--format", "json")
    assert result.exit_code == 0, result.output
    (found,) = json.loads(result.stdout)
    assert found["stored_processor"].endswith(", the plain loop (no C++ fast path)")
    assert found["this_processor"].endswith(", the C++ fast path")
    assert not found["identical"]  # 60 steps of LN on two paths: apart in the last digits at least
    assert "the stored run was trained on the plain loop (no C++ fast path), this re-run on the C++ fast path" \
        in found["note"], found


def test_a_difference_past_six_digits_is_shown_and_the_step_where_the_curves_part_named(stored, tmp_path):
    """Summaries equal to six digits printed as two equal numbers beside "differs": the digits that
    tell them apart are shown, and the first step where the curves part is named."""
    db, run_id = stored
    copy = tmp_path / "nudged.db"

    def nudge_first_point(target):
        step, val = target.execute("SELECT step, val_loss FROM evals WHERE run_id = ? ORDER BY step", (run_id,)).fetchone()
        target.execute("UPDATE evals SET val_loss = ? WHERE run_id = ? AND step = ?", (val * (1 + 2e-8), run_id, step))
        return step

    step = edited_copy(db, run_id, copy, lambda old: old * (1 + 3e-9), nudge_first_point)
    result = invoke("verify", run_id, "--store", copy)
    assert result.exit_code == 0, result.output
    line = next(text for text in result.stdout.splitlines() if "min_val_loss:" in text)
    shown = line.split("stored ")[1].split(", re-run ")
    assert shown[0] != shown[1].split(" (")[0], line
    assert f"first apart: step {step}: val_loss " in result.stdout, result.stdout
    named = result.stdout.split(f"first apart: step {step}: val_loss ")[1].split(" (stored vs re-run)")[0]
    assert named.split(" vs ")[0] != named.split(" vs ")[1] and "train_loss" not in named
    found = json.loads(invoke("verify", run_id, "--store", copy, "--format", "json").stdout)[0]
    assert found["first_difference"].startswith(f"step {step}: val_loss ")
    assert json.loads(invoke("verify", run_id, "--store", db, "--format", "json").stdout)[0]["first_difference"] is None


def test_a_nan_in_a_stored_summary_gives_no_nan_percentage_and_strict_json(stored, tmp_path):
    db, run_id = stored
    copy = tmp_path / "nan.db"
    edited_copy(db, run_id, copy, lambda old: float("nan"))
    text = invoke("verify", run_id, "--store", copy)
    assert text.exit_code == 0 and "differs" in text.stdout and "nan%" not in text.stdout, text.stdout
    found = json.loads(invoke("verify", run_id, "--store", copy, "--format", "json").stdout,
                       parse_constant=lambda name: pytest.fail(f"{name} in --format json"))
    assert found[0]["stored"]["min_val_loss"] is None


def test_a_run_of_another_instruction_set_or_of_an_unrecorded_path_is_said_so(stored, tmp_path):
    """The published runs record no path, and 126 of them AVX2: verify named the stored processor
    without a path and gave an instruction-set mismatch no note (a path mismatch had one; QA)."""
    db, run_id = stored

    def env_edit(change):
        def edit(target):
            env = json.loads(target.execute("SELECT env_json FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])
            change(env)
            target.execute("UPDATE runs SET env_json = ? WHERE run_id = ?", (json.dumps(env), run_id))
        return edit

    def other_isa(env):
        env["cpu_capability"] = "OTHER-ISA"
        env.pop("cpp_fast_path", None)

    edited_copy(db, run_id, tmp_path / "same.db", lambda old: old, env_edit(other_isa))
    (same,) = json.loads(invoke("verify", run_id, "--store", tmp_path / "same.db", "--format", "json").stdout)
    assert same["identical"] and same["note"] is None  # reproduced: no "nearby, not equal" beside it (review)
    edited_copy(db, run_id, tmp_path / "other.db", lambda old: old * 1.01, env_edit(other_isa))
    (found,) = json.loads(invoke("verify", run_id, "--store", tmp_path / "other.db", "--format", "json").stdout)
    assert found["stored_processor"].endswith("(OTHER-ISA), path (C++ fast path or plain loop) not recorded"), found
    assert "the stored run was made on OTHER-ISA, this re-run on " in found["note"] and "round differently" in found["note"]
    edited_copy(db, run_id, tmp_path / "unknown.db", lambda old: old * 1.01, env_edit(lambda env: env.pop("cpu_capability")))
    (found,) = json.loads(invoke("verify", run_id, "--store", tmp_path / "unknown.db", "--format", "json").stdout)
    assert "the stored run's instruction set was not recorded" in found["note"], found
    (same,) = json.loads(invoke("verify", run_id, "--store", db, "--format", "json").stdout)
    assert same["note"] is None and "not recorded" not in same["stored_processor"]

"""Words on a user's task name the user's own settings, task and claims (#38, point 7): "paper"
only where a paper's number is meant."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import invoke as shared_invoke


@pytest.fixture(autouse=True)
def _no_user_folders(monkeypatch):
    monkeypatch.setenv("ATNBENCH_TASKS", "")


def invoke(*args):
    return shared_invoke(*args, terminal_width=240)


def ok(result):
    assert result.exit_code == 0, f"{result.stdout}\n{result.stderr}\n{result.exception!r}"
    return result


@pytest.fixture
def mine(tmp_path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    rng = np.random.default_rng(0)
    y = np.arange(24) % 2
    np.savez(folder / "seqs.npz", x=rng.normal(y[:, None, None], 1.0, (24, 4, 2)).astype(np.float32), y=y)
    (folder / "mine.yaml").write_text("problem: sequence-classification\ndata:\n  train: seqs.npz\n"
                                      "  split: {validation: 0.25, seed: 0}\n"
                                      "defaults: {hidden: 4, batch_size: 8, steps: 4, eval_every: 2, lr: 0.003}\n")
    return folder


def test_a_user_tasks_report_and_verdicts_name_its_own_settings_and_claims(mine, tmp_path, monkeypatch):
    store = tmp_path / "s.db"
    for args in (("--norm", "ln", "--lr", "0.001"), ("--norm", "atn", "--k", "2"), ("--norm", "lstm", "--val-samples", "3"),
                 ("--norm", "ln", "--budget", "0.5")):
        shown = ok(invoke("run", "mine", "--include", mine, *args, "--store", store, "-q")).stdout
        assert "paper" not in shown.lower(), shown
    assert "shrunk to 0.5 of task mine's defaults" in " ".join(shown.split())
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - id: mine\n    claim: 'ATN < LN on my task'\n    task: mine\n    order: [atn, ln]\n")
    for fmt in ("table", "markdown"):
        text = ok(invoke("report", "--include", mine, "--store", store, "--claims", claims, "--format", fmt)).stdout
        flat = " ".join(text.split())  # a note wrapped over lines reads as one
        assert "protocol differs from the defaults of task mine: " in flat and "ln: lr 0.001 (default 0.003)" in flat
        # the task file's validation set and early stopping are its protocol too (3 of its 6 sequences);
        # the budget shrinks the validation set as it does the steps: not a difference there
        assert "lstm: val_samples 3 (default 6)" in flat and flat.count("val_samples") == 1, text
        assert "0.5 of the defaults of task mine" in flat, text
        assert "verdicts on the claims of claims.yaml" in flat.lower(), text
        assert "paper" not in text.lower(), text
    # without --include the task file's defaults cannot be read: no row "follows" them (it said
    # "full protocol", and the claim's runs counted as on its protocol)
    monkeypatch.setenv("ATNBENCH_TASKS", "")
    text = ok(invoke("report", "--store", store, "--claims", claims)).stdout
    flat = " ".join(text.split())
    assert "full protocol" not in flat and "mine, T=4, protocol unchecked" in flat, text
    assert "protocol unchecked: the task's file is not found here (--include DIR)" in flat, text


def test_a_sweep_applied_to_a_user_task_describes_that_task(mine, tmp_path):
    from atnbench.sweep import load_sweep
    from atnbench.sweep.spec import retarget

    ok(invoke("tasks", "--include", mine))  # puts the folder on the search path for retarget
    spec = retarget(load_sweep("norm-ablation"), "mine")
    assert spec.description == ("The norm-ablation grid on task mine (T from its defaults): "
                                "norm = none, ln, atn, atn-bn, bn, bn-input, bln")
    assert spec.citation is None  # the paper's protocol on adding is not this task's
    dry = ok(invoke("sweep", "norm-ablation", "--task", "mine", "--include", mine, "--dry-run",
                    "--store", tmp_path / "s.db")).stdout
    assert "grid on task mine (T from its defaults)" in " ".join(dry.split()) and "adding T=100" not in dry
    given = ok(invoke("sweep", "norm-ablation", "--task", "mine", "--include", mine, "--T", "7", "--dry-run",
                      "--store", tmp_path / "s.db")).stdout
    assert "grid on task mine (T=7)" in " ".join(given.split()), given  # the T asked for, not "its defaults"

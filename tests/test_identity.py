"""Run identity (issue 11): one id exactly when the numbers must be the same; stale results are
never reused silently; a finished config is not trained again; finished runs keep their model."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import atnbench.identity as identity
from atnbench.cli import app
from atnbench.config import RunConfig, build_config
from atnbench.runspec import resolve_run
from atnbench.store import ResultsStore

runner = CliRunner()
TINY_RUN = ["adding", "--T", "12", "--iters", "6", "--eval-every", "3", "--val-samples", "16", "--hidden", "8",
            "--batch-size", "8", "--quiet"]


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def config(**values) -> RunConfig:
    return build_config({"task": "adding", "T": 20, **values})


# --- equal ids where the numbers must be equal -------------------------------------------------------

def test_value_types_are_normalised():
    assert config(momentum=0).run_id == config(momentum=0.0).run_id
    assert config(lr=1).run_id == config(lr=1.0).run_id
    assert config(eps=1e-5).run_id != config(eps=1e-3).run_id


def test_settings_without_effect_are_collapsed():
    assert config(norm="none", eps=1e-3).run_id == config(norm="none", eps=1e-5).run_id
    assert config(norm="none", affine=False).run_id == config(norm="none").run_id
    assert config(norm="none", k=3).run_id == config(norm="none", k=7).run_id
    assert config(norm="ln", k=3).run_id == config(norm="ln", k=7).run_id
    assert config(norm="ln", eps=1e-3).run_id != config(norm="ln").run_id  # LN does use eps
    assert config(optimizer="adam", momentum=0.9).run_id == config(optimizer="adam").run_id
    assert config(optimizer="rmsprop", momentum=0.9).run_id != config(optimizer="rmsprop").run_id
    assert config(device="cuda", threads=4).run_id == config(device="cuda", threads=1).run_id


def test_window_longer_than_the_sequence_is_the_sequence():
    # adding at T=20: a window of 20 steps or more always holds every step so far
    ids = {config(norm="atn", k=k).run_id for k in (20, 50, 10**6)}
    assert len(ids) == 1
    assert config(norm="atn", k=19).run_id not in ids
    # copying's sequence is T + 20 steps long: k = T is still a real window there
    copy = {k: build_config({"task": "copying", "T": 10, "norm": "atn", "k": k}).run_id for k in (10, 30, 99)}
    assert copy[10] != copy[30] and copy[30] == copy[99]


def test_data_location_is_replaced_by_its_content(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        (folder / "ptb.char.train.txt").write_text("a b c\n")
    same = [build_config({"task": "ptb-char", "T": 50, "options": {"data_dir": str(f)}}).run_id for f in (first, second)]
    assert same[0] == same[1]
    (second / "ptb.char.train.txt").write_text("a b d\n")
    changed = build_config({"task": "ptb-char", "T": 50, "options": {"data_dir": str(second)}}).run_id
    assert changed != same[0]


# --- different ids where the numbers differ ---------------------------------------------------------------

def test_threads_device_and_code_enter_the_id(monkeypatch):
    base = config(norm="ln")
    assert config(norm="ln", threads=2).run_id != base.run_id
    assert config(norm="ln", device="cuda").run_id != base.run_id
    monkeypatch.setattr(identity, "code_fingerprint", lambda: "0" * 16)
    assert config(norm="ln").run_id != base.run_id
    assert identity.config_key(config(norm="ln").to_dict()) == identity.config_key(base.to_dict())


def test_code_fingerprint_ignores_comments_but_not_code(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('"""doc"""\nx = 1  # one\n')
    plain = identity._source_digest(source)
    source.write_text('"""other doc"""\n\n# a comment\nx = 1\n')
    assert identity._source_digest(source) == plain
    source.write_text("x = 2\n")
    assert identity._source_digest(source) != plain


def test_threads_change_the_numbers_and_the_id(tmp_path):
    """Two thread counts are two runs: neither replaces the other's row."""
    store = tmp_path / "s.db"
    for threads in (1, 2):
        result = invoke("run", *TINY_RUN, "--norm", "ln", "--threads", threads, "--store", store)
        assert result.exit_code == 0, result.output
    with ResultsStore(store, create=False) as results:
        runs = results.runs()
    assert sorted(r.config["threads"] for r in runs) == [1, 2]


# --- a finished config is not trained again ------------------------------------------------------------------

def test_run_twice_does_not_train_and_force_retrains(tmp_path):
    store = tmp_path / "s.db"
    first = invoke("run", *TINY_RUN, "--norm", "ln", "--store", store, "--json")
    assert first.exit_code == 0, first.output
    run_id = json.loads(first.stdout)["run_id"]
    with ResultsStore(store, create=False) as results:
        stamp = results.get_run(run_id).updated_at
    again = invoke("run", *TINY_RUN, "--norm", "ln", "--store", store, "--json")
    assert again.exit_code == 0
    assert "not training again" in again.stderr and run_id in again.stderr
    assert json.loads(again.stdout) == json.loads(first.stdout)  # the stored result, as --json promises
    with ResultsStore(store, create=False) as results:
        assert results.get_run(run_id).updated_at == stamp
    forced = invoke("run", *TINY_RUN, "--norm", "ln", "--store", store, "--force", "--json")
    assert forced.exit_code == 0, forced.output
    assert "replaced" in forced.stderr
    assert json.loads(forced.stdout)["min_val_loss"] == json.loads(first.stdout)["min_val_loss"]
    with ResultsStore(store, create=False) as results:
        assert results.get_run(run_id).updated_at != stamp


# --- stale results ---------------------------------------------------------------------------------------------

SWEEP = """\
name: tiny-identity
description: two runs
task: adding
base: {T: 8, hidden: 8, batch_size: 4, steps: 4, eval_every: 2, val_samples: 8}
grid:
  norm: [none, ln]
seeds: [0]
"""


def test_a_stale_run_is_run_again_or_kept_on_request(tmp_path, monkeypatch):
    sweep, store = tmp_path / "s.yaml", tmp_path / "s.db"
    sweep.write_text(textwrap.dedent(SWEEP))
    first = invoke("sweep", sweep, "--store", store, "--workers", 1, "--json", "--device", "cpu")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["counts"]["done"] == 2

    monkeypatch.setattr(identity, "code_fingerprint", lambda: "f" * 16)  # the numerics changed
    kept = invoke("sweep", sweep, "--store", store, "--workers", 1, "--json", "--device", "cpu", "--keep-stale")
    assert kept.exit_code == 0, kept.output
    assert json.loads(kept.stdout)["counts"] == {**json.loads(kept.stdout)["counts"], "done": 0, "skipped": 2}

    again = invoke("sweep", sweep, "--store", store, "--workers", 1, "--json", "--device", "cpu")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["counts"]["done"] == 2  # re-run under new ids
    with ResultsStore(store, create=False) as results:
        codes = sorted(r.env.get("code") for r in results.runs())
    assert codes.count("f" * 16) == 2 and len(codes) == 4

    monkeypatch.chdir(tmp_path)  # a short store path: the report's text is about the runs alone
    report = invoke("report", "--store", "s.db")
    assert report.exit_code == 0, report.output
    assert "ln (current code)" in report.stdout and "ln (stale †)" in report.stdout


# --- kept models ---------------------------------------------------------------------------------------------------

def test_finished_runs_keep_their_models_for_evaluate_and_stats(tmp_path):
    store = tmp_path / "s.db"
    done = invoke("run", *TINY_RUN, "--norm", "atn", "--k", "3", "--store", store, "--json")
    assert done.exit_code == 0, done.output
    record = json.loads(done.stdout)
    scored = invoke("evaluate", record["run_id"][:7], "--store", store, "--json", "--device", "cpu")
    assert scored.exit_code == 0, scored.output
    scores = json.loads(scored.stdout)
    assert scores["weights"] == "best"
    # the best weights score exactly the validation minimum the run recorded
    assert scores["scores"][0]["loss"] == pytest.approx(record["min_val_loss"], rel=1e-6)
    final = json.loads(invoke("evaluate", record["run_id"], "--store", store, "--json", "--weights", "final",
                              "--device", "cpu").stdout)
    assert final["step"] == 6 and final["scores"][0]["loss"] == pytest.approx(record["final_val_loss"], rel=1e-6)

    stats = invoke("stats", "--from-run", record["run_id"], "--store", store, "--out", tmp_path / "stats", "--quiet")
    assert stats.exit_code == 0, stats.output
    assert (tmp_path / "stats" / "stats-summary.json").is_file()

    bare = invoke("run", *TINY_RUN, "--norm", "ln", "--store", store, "--no-keep-model", "--json")
    missing = invoke("evaluate", json.loads(bare.stdout)["run_id"], "--store", store)
    assert missing.exit_code == 2 and "kept no best model" in missing.stderr
    assert "Traceback" not in missing.output


def test_uses_and_setting_of_follow_the_identitys_collapse_rules(tmp_path):
    atn, ln = resolve_run("adding", {"norm": "atn", "k": 5, "T": 30}), resolve_run("adding", {"norm": "ln", "T": 30})
    lstm = resolve_run("adding", {"norm": "none", "T": 30})
    assert identity.uses(atn, "k") and not identity.uses(ln, "k") and not identity.uses(lstm, "k")
    assert identity.uses(ln, "eps") and not identity.uses(lstm, "eps") and not identity.uses(lstm, "bias_inside")
    assert identity.uses(ln, "T") and identity.uses(lstm, "lr")  # settings the identity never drops
    adam = resolve_run("denoise", {"norm": "ln", "T": 100})
    assert not identity.uses(adam, "momentum") and identity.uses(ln, "momentum")  # Adam vs RMSprop
    assert identity.setting_of(atn, "k") == 5 and identity.setting_of(ln, "k") is None
    assert identity.setting_of(ln, "bias_inside") is True  # the norm's default, where the config leaves it
    assert identity.setting_of(resolve_run("adding", {"norm": "bn", "T": 30}), "bias_inside") is False

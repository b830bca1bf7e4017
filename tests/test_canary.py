"""The canary check (atnbench.evidence.canary) and what its records change (atnbench.evidence.equivalence): a
refactor that computes the same numbers keeps the published runs current; one that does not
leaves the runs it touches stale."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from atnbench.evidence import canary, equivalence
from atnbench.evidence.canary import Canary, Outcome
from atnbench.evidence.identity import code_fingerprint
from atnbench.run.runspec import resolve_run
from helpers import invoke

PACKAGE = Path(equivalence.__file__).resolve().parent.parent  # atnbench/
RESULTS = PACKAGE.parent / "results"
TINY = dict(T=8, hidden=8, batch_size=4, steps=4, eval_every=2, val_samples=4)


def tiny(norm: str, **flags) -> dict:
    return resolve_run("adding", {**TINY, "norm": norm, **flags}).to_dict()


def test_a_class_is_what_picks_a_code_path_not_what_sizes_it():
    base = tiny("atn")
    assert equivalence.class_key(base) == equivalence.class_key(tiny("atn", T=12, k=3, hidden=16, lr=0.5, seed=4))
    for other in (tiny("ln"), tiny("atn", bias_inside=False), tiny("atn", optimizer="adam"), tiny("atn", clip=1.0),
                  tiny("atn", cell="gru"), tiny("atn", layers=2), {**base, "task": "copying"}):
        assert equivalence.class_key(other) != equivalence.class_key(base)
    # a stated default placement is the default (identity's canonical form)
    assert equivalence.class_key(tiny("atn", bias_inside=True)) == equivalence.class_key(base)


def test_one_canary_per_class_from_its_shortest_run():
    configs = [tiny("atn", T=12, seed=1), tiny("atn", T=8, seed=2), tiny("ln", T=10)]
    found = canary.canaries(configs, steps=6)
    assert sorted((c.config["norm"], c.config["T"], c.runs) for c in found) == [("atn", 8, 2), ("ln", 10, 1)]
    for c in found:
        assert (c.config["steps"], c.config["eval_every"], c.config["val_samples"], c.config["seed"]) == (6, 3, 4, 0)
    with pytest.raises(ValueError, match="--steps"):
        canary.shorten(configs[0], 1)


def test_compare_names_the_first_difference():
    result = {"status": "done", "curve": [[2, 0.5, 0.4, {}], [4, 0.3, 0.2, {}]], "weights": "ab"}
    assert canary.compare(result, json.loads(json.dumps(result))) is None
    assert "step 4" in canary.compare(result, {**result, "curve": [result["curve"][0], [4, 0.3, 0.2000001, {}]]})
    assert "weights" in canary.compare(result, {**result, "weights": "cd"})
    assert "status" in canary.compare(result, {**result, "status": "diverged"})
    assert "evaluations" in canary.compare(result, {**result, "curve": result["curve"][:1]})


def _tree(tmp_path: Path, name: str) -> Path:
    tree = tmp_path / name
    shutil.copytree(PACKAGE, tree / "atnbench", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


@pytest.mark.slow
def test_the_driver_tells_a_refactor_from_a_change_of_numbers(tmp_path, monkeypatch):
    """Two copies of this package, one with a function added (same numbers), one whose layer norm
    doubles its epsilon (other numbers), each against this checkout, whose driver runs once."""
    monkeypatch.setenv("ATNBENCH_NO_BUILD", "1")  # the loop path: no C++ build in a temporary tree
    original = PACKAGE.parent
    renamed = _tree(tmp_path, "renamed")
    functional = renamed / "atnbench" / "nn" / "functional.py"
    source = functional.read_text()
    assert "def " in source
    functional.write_text(source + "\n\ndef _unused_helper(value):\n    return value\n")
    changed = _tree(tmp_path, "changed")
    changed_functional = changed / "atnbench" / "nn" / "functional.py"
    text = changed_functional.read_text()
    assert "weight, bias, eps)" in text
    changed_functional.write_text(text.replace("weight, bias, eps)", "weight, bias, 2 * eps)", 1))
    assert canary.fingerprint_of(renamed) != canary.fingerprint_of(original) != canary.fingerprint_of(changed)

    run_driver, driven = canary.run_driver, {}

    def once(tree, configs):  # the original tree's driver runs once for both checks (a process: ~3 s)
        key = (tree, json.dumps(configs))
        if key not in driven:
            driven[key] = run_driver(tree, configs)
        return driven[key]

    monkeypatch.setattr(canary, "run_driver", once)
    found = canary.canaries([tiny("ln"), tiny("none")], steps=4)
    here = once(original, [c.config for c in found])  # what check() asks of this checkout: the driver on this code
    assert here["code"] == code_fingerprint() and os.environ.get("ATNBENCH_NO_BUILD") == "1"
    assert [(r["status"], [p[0] for p in r["curve"]], len(r["weights"])) for r in here["results"]] == \
        [("done", [2, 4], 64)] * 2
    same = canary.check(found, original, renamed)
    assert [o.identical for o in same] == [True, True]
    moved = {o.canary.config["norm"]: o for o in canary.check(found, original, changed)}
    assert moved["none"].identical  # the plain LSTM has no normalization: untouched
    assert not moved["ln"].identical and moved["ln"].difference


def test_a_record_makes_vouched_classes_current_and_no_other(tmp_path):
    records = tmp_path / "equivalence.json"
    ln, atn = Canary(equivalence.class_key(tiny("ln")), tiny("ln"), 3), Canary(equivalence.class_key(tiny("atn")),
                                                                                 tiny("atn"), 2)
    current = code_fingerprint()
    entry = canary.record([Outcome(ln, True, None), Outcome(atn, False, "step 2 differs")], "0ld0c0de",
                          current, "abc123", "def456", path=records)
    assert entry["identical"] == [ln.key] and entry["different"] == [atn.key]
    assert entry["machine"]["processor"]
    assert equivalence.is_current("0ld0c0de", tiny("ln", seed=5, T=20), path=records)
    assert not equivalence.is_current("0ld0c0de", tiny("atn"), path=records)
    assert not equivalence.is_current("another", tiny("ln"), path=records)
    assert equivalence.is_current(current, tiny("atn"), path=records)
    assert not equivalence.is_current(None, tiny("ln"), path=records)
    # recording the same pair again replaces the record instead of adding a second
    canary.record([Outcome(atn, True, None)], "0ld0c0de", current, "abc123", "def456", path=records)
    stored = json.loads(records.read_text())["records"]
    assert len(stored) == 1 and stored[0]["identical"] == [atn.key]


def test_every_published_run_is_current():
    """A change to the code that computes numbers makes the published runs stale unless `atnbench
    canary --record` vouched for it (or the runs were made again and republished)."""
    runs = [json.loads(line) for line in (RESULTS / "runs.jsonl").read_text().splitlines()]
    stale = [r["run_id"] for r in runs if not equivalence.is_current(r["env"].get("code"), r["config"])]
    assert not stale, (f"{len(stale)} published runs are stale under code {code_fingerprint()}: run "
                       f"`atnbench canary --record`, or re-run them and scripts/publish_results.sh")


def test_run_and_sweep_skip_a_run_made_by_vouched_code(tmp_path, monkeypatch):
    """A finished run made by code a canary vouched for is not trained again by `atnbench run`
    or a sweep; made by unvouched code, the sweep re-runs it (stale)."""
    from atnbench.store import ResultsStore
    from atnbench.sweep.expand import PlannedRun
    from atnbench.sweep.runner import plan

    flags = ["--T", "8", "--hidden", "8", "--batch-size", "4", "--iters", "4", "--eval-every", "2",
             "--val-samples", "4", "--norm", "ln"]
    config = resolve_run("adding", {**TINY, "norm": "ln"})
    store_path = tmp_path / "s.db"
    with ResultsStore(store_path) as store:
        store.start_run("0123456789ab", config.to_dict(), {"code": "0ld0c0de"})
        store.finish_run("0123456789ab", "done", {"min_val_loss": 0.5})
    records = tmp_path / "equivalence.json"
    monkeypatch.setattr(equivalence, "RECORDS_FILE", records)

    def planned():
        with ResultsStore(store_path) as store:
            return plan([PlannedRun(config, "ln")], store, "s")

    jobs, skipped, stale = planned()
    assert len(jobs) == 1 and stale  # not vouched: stale, trained again
    canary.record([Outcome(Canary(equivalence.class_key(config.to_dict()), config.to_dict(), 1), True, None)],
                  "0ld0c0de", code_fingerprint(), "abc", "def", path=records)
    jobs, skipped, stale = planned()
    assert not jobs and skipped[0][1] == "done (equivalent code)"
    result = invoke("run", "adding", *flags, "--store", str(store_path))
    assert result.exit_code == 0 and "not training again" in result.output and "0123456789ab" in result.output
    with ResultsStore(store_path) as store:
        assert [r.run_id for r in store.runs()] == ["0123456789ab"]


def test_a_class_whose_data_is_missing_is_named_not_an_internal_error(tmp_path, monkeypatch):
    """A fresh clone without `atnbench data prepare ptb-char`: the canary says which classes it could
    not check and why, in one line each, and exits 1 (nothing vouched for them); no traceback."""
    from atnbench.cli.canary import _with_data

    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "no-data"))
    ptb = json.loads(next(line for line in (Path(__file__).parents[1] / "results" / "runs.jsonl").open()
                          if '"task": "ptb-char"' in line))
    adding = resolve_run("adding", {"T": 20, "norm": "ln", "seed": 0}, budget=0.01).to_dict()
    found = canary.canaries([ptb["config"], adding], steps=2)
    ready, missing = _with_data(found)
    assert [c.config["task"] for c in ready] == ["adding"]
    assert [c.config["task"] for c, _ in missing] == ["ptb-char"] and "data prepare ptb-char" in missing[0][1]
    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps(ptb) + "\n")  # made by older code: the canary would check it
    result = invoke("canary", "--runs", runs)
    assert result.exit_code == 1 and "note: not checked, ptb-char none" in result.stderr, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output


def test_the_canary_says_which_runs_were_made_on_another_instruction_set(tmp_path, monkeypatch):
    """A canary checks the code paths of the processor it runs on, and its record vouches for every
    class: where runs to check were made on another instruction set, it says so (QA: the published
    AVX2 runs counted as current on canaries run on AVX-512 only, and nothing said so)."""
    runs = [{"env": {"cpu_capability": "AVX2"}}, {"env": {"cpu_capability": "AVX2"}},
            {"env": {"cpu_capability": "AVX512"}}, {"env": {}}]
    note = canary.other_classes(runs, "AVX512")
    assert "this machine runs AVX512" in note and "of the 4 run(s) to check" in note
    assert "2 on AVX2, 1 on no recorded instruction set:" in note and "AVX512;" not in note.split("runs AVX512")[1]
    assert canary.other_classes(runs[2:3], "AVX512") is None

    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "no-data"))  # nothing trains: the class cannot be checked
    monkeypatch.setattr("atnbench.evidence.machine.cpu_capability", lambda: "AVX512")
    ptb = json.loads(next(line for line in (Path(__file__).parents[1] / "results" / "runs.jsonl").open()
                          if '"task": "ptb-char"' in line))
    ptb["env"]["cpu_capability"] = "AVX2"
    (tmp_path / "runs.jsonl").write_text(json.dumps(ptb) + "\n")
    result = invoke("canary", "--runs", tmp_path / "runs.jsonl")
    assert "of the 1 run(s) to check, 1 on AVX2: a canary here checks only" in " ".join(result.stderr.split())
    ptb["env"]["cpu_capability"] = "AVX512"
    (tmp_path / "runs.jsonl").write_text(json.dumps(ptb) + "\n")
    assert "a canary here checks only" not in invoke("canary", "--runs", tmp_path / "runs.jsonl").stderr


def test_a_canary_stopped_by_kill_removes_its_worktree_of_the_old_code(tmp_path, monkeypatch):
    """SIGTERM ended the canary where it stood: the git worktree of the old revision stayed in the
    project's repository (`git worktree list`) and on disk; it is removed as on Ctrl-C, exit 143."""
    import signal
    import subprocess
    import time

    published = json.loads(next(line for line in (RESULTS / "runs.jsonl").open() if '"task": "adding"' in line))
    (tmp_path / "runs.jsonl").write_text(json.dumps(published) + "\n")
    monkeypatch.setattr(canary, "fingerprint_of", lambda tree: published["env"]["code"])  # HEAD stands in for it
    monkeypatch.setenv("ATNBENCH_NO_BUILD", "1")
    trees = []

    def killed(found, old_tree, repo):
        trees.append(old_tree)
        assert (old_tree / "atnbench").is_dir()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)

    monkeypatch.setattr(canary, "check", killed)
    result = invoke("canary", "--runs", tmp_path / "runs.jsonl", "--revision", "HEAD")
    assert result.exit_code == 143, result.output
    listed = subprocess.run(["git", "-C", str(PACKAGE.parent), "worktree", "list"], capture_output=True, text=True)
    assert trees and not trees[0].exists() and str(trees[0]) not in listed.stdout

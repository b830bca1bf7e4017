"""Run identity (issue 11): one id exactly when the numbers must be the same; stale results are
never reused silently; a finished config is not trained again; finished runs keep their model."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import atnbench.evidence.identity as identity
from atnbench.config import RunConfig, build_config
from atnbench.run.runspec import resolve_run
from atnbench.store import ResultsStore
from helpers import invoke
from atnbench.evidence.identity import run_id_of

TINY_RUN = ["adding", "--T", "12", "--iters", "6", "--eval-every", "3", "--val-samples", "16", "--hidden", "8",
            "--batch-size", "8", "--quiet"]


def config(**values) -> RunConfig:
    return build_config({"task": "adding", "T": 20, **values})


# --- equal ids where the numbers must be equal -------------------------------------------------------

def test_value_types_are_normalised():
    assert run_id_of(config(momentum=0)) == run_id_of(config(momentum=0.0))
    assert run_id_of(config(lr=1)) == run_id_of(config(lr=1.0))
    assert run_id_of(config(eps=1e-5)) != run_id_of(config(eps=1e-3))


def test_settings_without_effect_are_collapsed():
    assert run_id_of(config(norm="none", eps=1e-3)) == run_id_of(config(norm="none", eps=1e-5))
    assert run_id_of(config(norm="none", affine=False)) == run_id_of(config(norm="none"))
    assert run_id_of(config(norm="none", k=3)) == run_id_of(config(norm="none", k=7))
    assert run_id_of(config(norm="ln", k=3)) == run_id_of(config(norm="ln", k=7))
    assert run_id_of(config(norm="ln", eps=1e-3)) != run_id_of(config(norm="ln"))  # LN does use eps
    assert run_id_of(config(optimizer="adam", momentum=0.9)) == run_id_of(config(optimizer="adam"))
    assert run_id_of(config(optimizer="rmsprop", momentum=0.9)) != run_id_of(config(optimizer="rmsprop"))
    assert run_id_of(config(device="cuda", threads=4)) == run_id_of(config(device="cuda", threads=1))


def test_window_longer_than_the_sequence_is_the_sequence():
    # adding at T=20: a window of 20 steps or more always holds every step so far
    ids = {run_id_of(config(norm="atn", k=k)) for k in (20, 50, 10**6)}
    assert len(ids) == 1
    assert run_id_of(config(norm="atn", k=19)) not in ids
    # copying's sequence is T + 20 steps long: k = T is still a real window there
    copy = {k: run_id_of(build_config({"task": "copying", "T": 10, "norm": "atn", "k": k})) for k in (10, 30, 99)}
    assert copy[10] != copy[30] and copy[30] == copy[99]


def test_data_location_is_replaced_by_its_content(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        folder.mkdir()
        (folder / "ptb.char.train.txt").write_text("a b c\n")
    same = [run_id_of(build_config({"task": "ptb-char", "T": 50, "options": {"data_dir": str(f)}})) for f in (first, second)]
    assert same[0] == same[1]
    (second / "ptb.char.train.txt").write_text("a b d\n")
    changed = run_id_of(build_config({"task": "ptb-char", "T": 50, "options": {"data_dir": str(second)}}))
    assert changed != same[0]


# --- different ids where the numbers differ ---------------------------------------------------------------

def test_threads_device_and_code_enter_the_id(monkeypatch):
    base = config(norm="ln")
    base_id = run_id_of(base)
    assert run_id_of(config(norm="ln", threads=2)) != base_id
    assert run_id_of(config(norm="ln", device="cuda")) != base_id
    monkeypatch.setattr(identity, "code_fingerprint", lambda: "0" * 16)
    assert run_id_of(config(norm="ln")) != base_id
    assert identity.config_key(config(norm="ln").to_dict()) == identity.config_key(base.to_dict())


def test_code_fingerprint_ignores_comments_but_not_code(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('"""doc"""\nx = 1  # one\n')
    plain = identity._source_digest(source)
    source.write_text('"""other doc"""\n\n# a comment\nx = 1\n')
    assert identity._source_digest(source) == plain
    source.write_text("x = 2\n")
    assert identity._source_digest(source) != plain
    two = identity._source_digest(source)
    source.write_bytes(b"x = 2\r\n")  # read as a text-mode read would: universal newlines
    assert identity._source_digest(source) == two == identity._source_digest(source, b"x = 2\r")


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
    for keep, left in (((), 2), (("--keep-stale",), 0)):  # the dry run counts them as the sweep will
        planned = invoke("sweep", sweep, "--store", store, "--dry-run", *keep, env={"COLUMNS": "200"})
        assert planned.exit_code == 0 and f"2 runs, {2 - left} in the store, {left} left" in planned.stdout, planned.output
    assert "done (stale, kept)" in planned.stdout
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
    assert missing.exit_code == 2 and "has no best model in" in missing.stderr and "--no-keep-model" in missing.stderr
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


# -- found by a mutation pass over atnbench/evidence/identity.py: each rule, both ways -----------------------

def data_id(options: dict, task: str = "ptb-char") -> str:
    return run_id_of(build_config({"task": task, "T": 50, "options": options}))


# --- collapse rules: exactly the settings without effect ---------------------------------------------

def test_the_plain_cell_drops_its_norm_settings_but_not_the_rest():
    assert run_id_of(config(norm="none", bias_inside=True)) == run_id_of(config(norm="none", bias_inside=False))
    assert run_id_of(config(norm="none", affine=False)) == run_id_of(config(norm="none", affine=True))
    assert run_id_of(config(norm="none", init="atn")) != run_id_of(config(norm="none", init="torch"))  # init does count
    assert run_id_of(config(norm="bn", eps=1e-3)) != run_id_of(config(norm="bn"))  # only the plain cell drops eps
    assert run_id_of(config(norm="ln", bias_inside=False)) != run_id_of(config(norm="ln", bias_inside=True))


def test_a_default_written_out_is_the_default():
    """Through the library as through the command line (``resolve_run``): stating the norm's own
    bias placement or initialisation names the same run."""
    assert run_id_of(config(norm="ln", bias_inside=True)) == run_id_of(config(norm="ln"))
    assert run_id_of(config(norm="atn-bn", bias_inside=False)) == run_id_of(config(norm="atn-bn"))
    assert run_id_of(config(norm="ln", bias_inside=False)) != run_id_of(config(norm="ln"))
    assert run_id_of(config(norm="none", init="torch")) == run_id_of(config(norm="none"))
    assert run_id_of(config(norm="ln", init="atn")) == run_id_of(config(norm="ln"))
    assert run_id_of(config(norm="ln", init="torch")) != run_id_of(config(norm="ln"))
    assert run_id_of(resolve_run("adding", {"norm": "ln", "T": 20, "bias_inside": True})) == \
        run_id_of(resolve_run("adding", {"norm": "ln", "T": 20}))


def test_atn_bn_has_a_window_too():
    assert run_id_of(config(norm="atn-bn", k=3)) != run_id_of(config(norm="atn-bn", k=7))
    assert run_id_of(config(norm="atn-bn", k=20)) == run_id_of(config(norm="atn-bn", k=50))  # T=20: the whole sequence


def test_real_data_windows_are_not_capped_at_the_sequence():
    # a real-data task's windows carry across batches: k > T is still a real window there
    ids = {k: run_id_of(build_config({"task": "ptb-char", "T": 50, "norm": "atn", "k": k})) for k in (50, 60, 100)}
    assert len(set(ids.values())) == 3


def test_sgd_keeps_its_momentum():
    assert run_id_of(config(optimizer="sgd", momentum=0.9)) != run_id_of(config(optimizer="sgd"))
    assert run_id_of(config(optimizer="asgd", momentum=0.9)) == run_id_of(config(optimizer="asgd"))


def test_threads_count_on_the_cpu_only():
    assert run_id_of(config(device="cpu", threads=4)) != run_id_of(config(device="cpu", threads=1))
    assert run_id_of(config(device="cuda", threads=4)) == run_id_of(config(device="cuda", threads=1))
    assert run_id_of(config(device="cuda")) != run_id_of(config(device="mps"))  # the device type itself stays


# --- value types, from YAML, JSON or a stored record ---------------------------------------------------

def test_raw_configs_normalise_int_fields_and_ignore_unknown_keys():
    base = config().to_dict()
    assert identity.run_id_of({**base, "T": 20.0, "hidden": 128.0}) == run_id_of(config())  # T: 20.0 is 20
    assert identity.run_id_of({**base, "momentum": 0, "budget": 1}) == run_id_of(config())  # momentum: 0 is 0.0
    assert identity.run_id_of({**base, "T": 20.5}) != run_id_of(config())  # not truncated to 20
    assert identity.run_id_of({**base, "out_dir": "elsewhere"}) == run_id_of(config())  # not a RunConfig field


def test_task_options_are_normalised_and_their_order_does_not_count():
    plain = run_id_of(config(options={"a": 1, "b": {"c": 2}, "d": [3, 4]}))
    assert run_id_of(config(options={"a": 1.0, "b": {"c": 2}, "d": [3, 4]})) == plain
    assert run_id_of(config(options={"a": 1, "b": {"c": 2.0}, "d": [3, 4]})) == plain
    assert run_id_of(config(options={"a": 1, "b": {"c": 2}, "d": [3.0, 4]})) == plain
    assert run_id_of(config(options={"d": [3, 4], "b": {"c": 2}, "a": 1})) == plain
    assert run_id_of(config(options={"a": 1.5, "b": {"c": 2}, "d": [3, 4]})) != plain


# --- uses / setting_of ---------------------------------------------------------------------------------------

def test_uses_reads_no_data_file_and_setting_of_keeps_an_explicit_bias(monkeypatch):
    run = resolve_run("adding", {"norm": "ln", "T": 30, "bias_inside": False})
    assert identity.setting_of(run, "bias_inside") is False  # the config's own value, not the norm's default
    data = build_config({"task": "ptb-char", "T": 50, "norm": "atn", "options": {"data_dir": "/nowhere"}})

    def no_reading(paths):
        raise AssertionError(f"uses read data files {paths}")

    monkeypatch.setattr(identity, "_data_fingerprint", no_reading)
    assert identity.uses(data, "k") and identity.uses(data, "eps") and identity.uses(data, "momentum")


# --- data files: the content, all of it, by name -------------------------------------------------------------

def test_data_files_and_nested_folders_are_fingerprinted_by_content(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        (folder / "raw").mkdir(parents=True)
        (folder / "raw" / "ptb.char.train.txt").write_text("a b c\n")
    # explicit files per split: moving them keeps the id, changing one changes it
    files = [data_id({"data_files": {"train": str(f / "raw" / "ptb.char.train.txt")}}) for f in (first, second)]
    assert files[0] == files[1]
    # a folder is walked into its subfolders
    nested = [data_id({"data_dir": str(f)}) for f in (first, second)]
    assert nested[0] == nested[1]
    (second / "raw" / "ptb.char.train.txt").write_text("a b c d e\n")
    assert data_id({"data_files": {"train": str(second / "raw" / "ptb.char.train.txt")}}) != files[0]
    assert data_id({"data_dir": str(second)}) != nested[0]


def test_data_file_names_count_and_the_vocab_cache_does_not(tmp_path):
    folder = tmp_path / "ptb"
    folder.mkdir()
    (folder / "ptb.char.train.txt").write_text("a b c\n")
    (folder / "ptb.char.valid.txt").write_text("x y\n")
    before = data_id({"data_dir": str(folder)})
    (folder / "ptb-char.vocab.json").write_text('{"vocab": ["a", "b"]}')  # what a run writes beside the data
    assert data_id({"data_dir": str(folder)}) == before
    # the same contents under swapped names are other data (train and validation trade places)
    (folder / "ptb.char.train.txt").write_text("x y\n")
    (folder / "ptb.char.valid.txt").write_text("a b c\n")
    assert data_id({"data_dir": str(folder)}) != before
    # a file renamed, its content kept: the training split became the test split
    (folder / "ptb.char.valid.txt").unlink()
    alone = data_id({"data_dir": str(folder)})
    (folder / "ptb.char.train.txt").rename(folder / "ptb.char.test.txt")
    assert data_id({"data_dir": str(folder)}) != alone


def test_an_empty_data_file_does_not_tie_the_id_to_its_location(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "ptb.char.train.txt").write_text("")
    assert data_id({"data_dir": str(tmp_path / "a")}) == data_id({"data_dir": str(tmp_path / "b")})


# --- the code fingerprint: every file that computes numbers, and only its code ------------------------------

@pytest.fixture
def package(tmp_path, monkeypatch):
    """A stand-in package tree for ``code_fingerprint`` (its cache cleared before and after)."""
    root = tmp_path / "pkg"
    for folder in ("nn/csrc", "nn/sub", "tasks", "data", "run"):
        (root / folder).mkdir(parents=True)
    sources = {"nn/csrc/k.cpp": "int f() { return 1; }\n", "nn/k.h": "int g(int a = 1);\n", "nn/sub/m.py": "x = 1\n",
               "tasks/t.py": "y = 1\n", "data/d.py": "z = 1\n", "run/train.py": "a = 1\n", "run/schedule.py": "b = 1\n",
               "zoo.py": "c = 1\n", "registry.py": "s = 1\n", "report.py": "r = 1\n"}
    for name, text in sources.items():
        (root / name).write_text(text)
    monkeypatch.setattr(identity, "PACKAGE", root)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    identity.code_fingerprint.cache_clear()
    yield root
    identity.code_fingerprint.cache_clear()


def fingerprint() -> str:
    """Computed afresh: neither this process's value nor the one kept on disk."""
    identity.code_fingerprint.cache_clear()
    identity._cache_file().unlink(missing_ok=True)
    return identity.code_fingerprint()


def cached_fingerprint() -> str:
    """What a new process gets: the value kept on disk where there is one."""
    identity.code_fingerprint.cache_clear()
    return identity.code_fingerprint()


def test_a_kept_fingerprint_answers_only_for_the_same_bytes(package, monkeypatch):
    first = fingerprint()
    assert json.loads(identity._cache_file().read_text()) != {}
    computed = identity._source_digest
    monkeypatch.setattr(identity, "_source_digest", lambda *args: pytest.fail("parsed although kept"))
    assert cached_fingerprint() == first  # answered from the file: nothing parsed
    monkeypatch.setattr(identity, "_source_digest", computed)
    train = package / "run/train.py"
    train.write_text("a = 2\n")
    edited = cached_fingerprint()
    assert edited != first  # an edited byte is another key: computed again
    monkeypatch.setattr(identity, "_source_digest", lambda *args: pytest.fail("parsed although kept"))
    train.write_text("a = 1\n")
    assert cached_fingerprint() == first  # both versions are kept
    train.write_text("a = 2\n")
    assert cached_fingerprint() == edited
    monkeypatch.setattr(identity.sys, "version", "3.99.0 (another parser)")
    with pytest.raises(pytest.fail.Exception, match="parsed although kept"):
        cached_fingerprint()  # another Python writes other trees: its own entry


@pytest.mark.parametrize("damage", ["garbage", "a list", "a bad value", "a folder in the way"])
def test_a_damaged_or_unwritable_fingerprint_file_only_costs_a_parse(package, damage):
    expected = fingerprint()
    kept = identity._cache_file()
    if damage == "garbage":
        kept.write_bytes(b"\x80{not json")
    elif damage == "a list":
        kept.write_text("[1, 2]")
    elif damage == "a bad value":
        kept.write_text(json.dumps({key: "not a fingerprint" for key in json.loads(kept.read_text())}))
    else:  # the cache folder cannot be made: a file stands where it would be
        kept.unlink()
        kept.parent.rmdir()
        kept.parent.write_text("")
    assert cached_fingerprint() == expected
    assert cached_fingerprint() == expected
    if damage != "a folder in the way":
        assert list(json.loads(kept.read_text()).values()) == [expected]  # written again, whole
        assert [p.name for p in kept.parent.iterdir()] == [kept.name]  # no temporary file left


def test_the_fingerprint_file_keeps_the_last_few_trees(package):
    for value in range(identity.FINGERPRINT_CACHE_ENTRIES + 3):
        (package / "zoo.py").write_text(f"c = {value}\n")
        cached_fingerprint()
    assert len(json.loads(identity._cache_file().read_text())) == identity.FINGERPRINT_CACHE_ENTRIES


@pytest.mark.parametrize("name", ["nn/csrc/k.cpp", "nn/k.h", "nn/sub/m.py", "tasks/t.py", "data/d.py", "run/train.py",
                                  "run/schedule.py", "zoo.py", "registry.py"])
def test_every_file_that_computes_numbers_enters_the_code_fingerprint(package, name):
    before = fingerprint()
    path = package / name
    path.write_text(path.read_text().replace("1", "2"))
    assert fingerprint() != before


def test_other_files_and_code_without_effect_keep_the_code_fingerprint(package):
    before = fingerprint()
    (package / "report.py").write_text("r = 2\n")  # not code that computes numbers
    (package / "nn/csrc/k.cpp").write_text("// the kernel\nint f()\n{\n    return 1; /* one */\n}\n")
    assert fingerprint() == before  # C++ comments and layout do not count
    (package / "nn/sub/m.py").write_text("def h():\n    return 0\n\n\nclass C:\n    pass\n")
    plain = fingerprint()
    (package / "nn/sub/m.py").write_text('def h():\n    """function doc"""\n    return 0\n\n\nclass C:\n    """class doc"""\n')
    assert fingerprint() == plain  # nor do docstrings of functions and classes


def test_renaming_a_code_file_changes_the_code_fingerprint(package):
    before = fingerprint()
    (package / "nn/sub/m.py").rename(package / "nn/sub/n.py")
    assert fingerprint() != before


def test_the_code_fingerprint_does_not_depend_on_the_directory_listing_order(package, monkeypatch):
    """Listing order is the file system's (a hash of the names on ext4, seeded per file system): two
    machines holding the same code must agree."""
    import pathlib

    for i in range(6):
        (package / "nn" / f"m{i}.py").write_text(f"value = {i}\n")
    listed = fingerprint()
    rglob = pathlib.Path.rglob
    monkeypatch.setattr(pathlib.Path, "rglob", lambda self, pattern: reversed(list(rglob(self, pattern))))
    assert fingerprint() == listed


# --- which file feeds which split is part of the data ------------------------------------------------

def test_swapping_the_files_of_two_splits_changes_the_id(tmp_path):
    first, second = tmp_path / "one.txt", tmp_path / "two.txt"
    first.write_text("a b c\n")
    second.write_text("x y z w\n")
    trained_on_first = data_id({"data_files": {"train": str(first), "test": str(second)}})
    trained_on_second = data_id({"data_files": {"train": str(second), "test": str(first)}})
    assert trained_on_first != trained_on_second


# --- a setting added later keeps every id (issue 41) ------------------------------------------------

PUBLISHED = Path(__file__).resolve().parents[1] / "results" / "runs.jsonl"


@pytest.fixture
def weight_decay(monkeypatch):
    """RunConfig with one more setting, added as docs/adding-a-setting.md says: neutral default."""
    import atnbench.config as config_module
    from pydantic.dataclasses import dataclass

    @dataclass(frozen=True, config=config_module.STRICT)
    class WithWeightDecay(config_module.RunConfig):
        weight_decay: float = 0.0

    monkeypatch.setattr(config_module, "RunConfig", WithWeightDecay)
    identity._field_types.cache_clear()  # the field types are read once per RunConfig
    yield WithWeightDecay
    identity._field_types.cache_clear()


def _published() -> list[dict]:
    return [json.loads(line) for line in PUBLISHED.read_text().splitlines()]


def test_every_published_run_id_recomputes_from_its_config():
    runs = _published()
    assert len(runs) > 100
    assert [r["run_id"] for r in runs] == [identity.run_id_under(r["config"], r["env"]["code"]) for r in runs]


def test_a_setting_added_at_its_neutral_value_keeps_every_id(weight_decay):
    # adding/T=100/atn/k=25, the run issue 41 saw re-keyed, among every published run
    runs = _published()
    fixed = next(r for r in runs if (r["task"], r["T"], r["norm"], r["k"]) == ("adding", 100, "atn", 25))
    assert identity.run_id_under(fixed["config"], fixed["env"]["code"]) == fixed["run_id"]
    assert identity.run_id_under({**fixed["config"], "weight_decay": 0}, fixed["env"]["code"]) == fixed["run_id"]
    assert [r["run_id"] for r in runs] == [identity.run_id_under(r["config"], r["env"]["code"]) for r in runs]
    # away from its neutral value the setting is part of the experiment
    decayed = identity.run_id_under({**fixed["config"], "weight_decay": 1e-4}, fixed["env"]["code"])
    assert decayed != fixed["run_id"]
    assert identity.identity({**fixed["config"], "weight_decay": 1e-4})["weight_decay"] == 1e-4


def test_a_first_setting_still_enters_the_id_at_its_default():
    """The settings every stored id was made with keep entering it at any value, or ids would move."""
    assert set(identity.identity({"task": "adding", "T": 20})) >= identity.FIRST_FIELDS

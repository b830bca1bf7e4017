"""`atnbench store export | import | merge`: a store survives the trip through a file, imports are
idempotent, two half-sweeps merge into the whole sweep, conflicts are reported and never
overwritten, and a running row gives way to a finished one."""

from __future__ import annotations

import json
import shutil
import sqlite3
import textwrap
from pathlib import Path

import pytest

from atnbench.store import ResultsStore
from atnbench.evidence.transfer import Conflict, combine, difference
from helpers import fill_store, invoke, tiny_sweep, valid_record
from atnbench.evidence.identity import run_id_of


# (task, T, norm, k, seed, status, level, sweep): two tasks, seeds, a k-sweep, a diverged and a
# running run. Levels are dyadic, so every mean in the report is exact.
RUNS = [
    ("copying", 100, "none", None, 0, "done", 0.125, "k-ablation"),
    ("copying", 100, "none", None, 1, "done", 0.25, "k-ablation"),
    ("copying", 100, "ln", None, 0, "done", 0.5, "k-ablation"),
    ("copying", 100, "ln", None, 1, "diverged", 1.0, "k-ablation"),
    ("copying", 100, "atn", 25, 0, "done", 0.0625, "k-ablation"),
    ("copying", 100, "atn", 25, 1, "done", 0.125, "k-ablation"),
    ("copying", 100, "atn", 45, 0, "done", 0.25, "k-ablation"),
    ("copying", 100, "atn", 45, 1, "done", 0.5, "k-ablation"),
    ("adding", 100, "ln", None, 0, "done", 0.004, None),
    ("adding", 100, "atn", 25, 0, "done", 0.002, None),
    ("adding", 100, "bn", None, 0, "running", 0.5, None),
]


def dump(path) -> dict:
    """Every row of the store's tables, so two stores can be compared as data."""
    with sqlite3.connect(path) as conn:
        return {table: sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
                for table in ("runs", "evals", "sweep_runs")}


def reports(store) -> dict:
    """The report as a table (minus the header line naming the store) and as JSON (minus the
    store path), for the whole store and for the k-sweep."""
    out = {}
    for name, args in (("all", ()), ("paper", ("--paper", "--final")), ("k", ("--sweep", "k-ablation"))):
        table = invoke("report", *args, "--store", store)
        assert table.exit_code == 0, table.output
        out[name] = table.stdout.splitlines()[1:]
        as_json = invoke("report", *args, "--format", "json", "--store", store)
        assert as_json.exit_code == 0, as_json.output
        data = json.loads(as_json.stdout)
        data.pop("store")
        out[f"{name} json"] = data
    return out


def test_export_then_import_into_an_empty_store_gives_the_same_store_and_report(tmp_path):
    fill_store(tmp_path / "a.db", RUNS)
    exported = invoke("store", "export", tmp_path / "a.jsonl", "--store", tmp_path / "a.db")
    assert exported.exit_code == 0, exported.output
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    assert len(lines) == len(RUNS) and all(json.loads(line)["curve"] for line in lines)

    imported = invoke("store", "import", tmp_path / "a.jsonl", "--store", tmp_path / "b.db")
    assert imported.exit_code == 0, imported.output
    assert f"{len(RUNS)} added" in imported.stderr
    assert dump(tmp_path / "b.db") == dump(tmp_path / "a.db")
    assert reports(tmp_path / "b.db") == reports(tmp_path / "a.db")
    assert "k=25" in "\n".join(reports(tmp_path / "b.db")["k"])  # the k view really came out


def test_an_export_saved_with_a_byte_order_mark_imports_as_the_plain_one(tmp_path):
    """An editor's "UTF-8 with BOM" is read as every other user file is: the mark dropped."""
    fill_store(tmp_path / "a.db", RUNS)
    assert invoke("store", "export", tmp_path / "a.jsonl", "--store", tmp_path / "a.db").exit_code == 0
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + (tmp_path / "a.jsonl").read_bytes())
    imported = invoke("store", "import", tmp_path / "bom.jsonl", "--store", tmp_path / "b.db")
    assert imported.exit_code == 0 and f"{len(RUNS)} added" in imported.stderr, imported.output
    assert dump(tmp_path / "b.db") == dump(tmp_path / "a.db")


def test_an_old_summary_holding_the_best_test_score_exports_the_one_validation_chose(tmp_path):
    """Summaries written before the selection rule held the best test score over the curve; the
    export (what results/runs.jsonl is) carries the numbers at validation's pick, and the old and
    new spellings of one run are the same numbers to import, not a conflict."""
    curve = [{"step": 10, "train_loss": 1.0, "val_loss": 0.5, "metrics": {"test_accuracy": 0.3, "val_accuracy": 0.6}},
             {"step": 20, "train_loss": 0.9, "val_loss": 0.7, "metrics": {"test_accuracy": 0.4, "val_accuracy": 0.5}}]
    old = valid_record(curve=curve, summary={"test_accuracy": 0.4, "val_accuracy": 0.6, "min_val_loss": 0.5})
    (tmp_path / "old.jsonl").write_text(json.dumps(old) + "\n")
    assert invoke("store", "import", tmp_path / "old.jsonl", "--store", tmp_path / "a.db").exit_code == 0
    exported = invoke("store", "export", tmp_path / "new.jsonl", "--store", tmp_path / "a.db")
    assert exported.exit_code == 0, exported.output
    new = json.loads((tmp_path / "new.jsonl").read_text())
    assert new["summary"] == {"test_accuracy": 0.3, "val_accuracy": 0.6, "min_val_loss": 0.5, "best_step": 10}
    again = invoke("store", "import", tmp_path / "new.jsonl", "--store", tmp_path / "a.db")
    assert again.exit_code == 0 and "1 unchanged" in again.stderr, again.output
    other = {**new, "summary": {**new["summary"], "min_val_loss": 0.45}}  # another number is still a conflict
    (tmp_path / "other.jsonl").write_text(json.dumps(other) + "\n")
    assert invoke("store", "import", tmp_path / "other.jsonl", "--store", tmp_path / "a.db").exit_code == 1


def test_a_store_given_to_import_is_refused_with_the_merge_that_does_it(tmp_path):
    fill_store(tmp_path / "a.db", RUNS)
    refused = invoke("store", "import", tmp_path / "a.db", "--store", tmp_path / "b.db")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
    assert "a results store (SQLite), not the JSON Lines" in refused.stderr
    assert f"atnbench store merge OUTPUT {tmp_path / 'a.db'}" in refused.stderr
    assert not (tmp_path / "b.db").exists()


def test_importing_twice_changes_nothing(tmp_path):
    fill_store(tmp_path / "a.db", RUNS)
    invoke("store", "export", tmp_path / "a.jsonl", "--store", tmp_path / "a.db")
    assert invoke("store", "import", tmp_path / "a.jsonl", "--store", tmp_path / "b.db").exit_code == 0
    before = dump(tmp_path / "b.db")
    again = invoke("store", "import", tmp_path / "a.jsonl", "--store", tmp_path / "b.db")
    assert again.exit_code == 0, again.output
    assert f"{len(RUNS)} unchanged" in again.stderr
    assert dump(tmp_path / "b.db") == before


def test_merge_of_two_half_sweeps_reports_as_the_whole_sweep(tmp_path):
    fill_store(tmp_path / "whole.db", RUNS)
    fill_store(tmp_path / "a.db", RUNS[::2])
    fill_store(tmp_path / "b.db", RUNS[1::2])
    merged = invoke("store", "merge", tmp_path / "m.db", tmp_path / "a.db", tmp_path / "b.db")
    assert merged.exit_code == 0, merged.output
    assert f"{len(RUNS)} added" in merged.stderr
    assert reports(tmp_path / "m.db") == reports(tmp_path / "whole.db")
    # sources that share runs: records read, not runs ("16 runs: 6 added, 10 unchanged" in a store of 6; QA)
    again = invoke("store", "merge", tmp_path / "m2.db", tmp_path / "a.db", tmp_path / "whole.db")
    n, half = len(RUNS), len(RUNS[::2])
    assert f"m2.db: {n + half} run records read: {n} added, {half} unchanged; it holds {n} runs" in \
        " ".join(again.stderr.split()), again.output
    half = invoke("report", "--format", "json", "--store", tmp_path / "a.db")
    assert json.loads(half.stdout)["runs_in_store"] < len(RUNS)  # the halves alone differ


SWEEP = tiny_sweep("halves", ["ln", "atn"], [3], steps=4, description="a tiny sweep split by seed")


@pytest.mark.slow
def test_a_real_sweep_split_over_two_stores_merges_into_the_whole(tmp_path):
    """The sweep run by the CLI whole, and by seed into two stores (two machines): after the
    merge the report has the same numbers. Timings are the machines' own, so the cost columns
    are left out of the comparison."""
    sweep = tmp_path / "halves.yaml"
    sweep.write_text(textwrap.dedent(SWEEP))
    for store, seeds in (("whole.db", "0,1"), ("a.db", "0"), ("b.db", "1")):
        done = invoke("sweep", sweep, "--seeds", seeds, "--workers", "1", "--device", "cpu", "--quiet",
                      "--store", tmp_path / store)
        assert done.exit_code == 0, done.output
    merged = invoke("store", "merge", tmp_path / "m.db", tmp_path / "a.db", tmp_path / "b.db")
    assert merged.exit_code == 0, merged.output

    def numbers(store):
        data = json.loads(invoke("report", "--format", "json", "--final", "--store", store).stdout)
        data.pop("store")
        text = json.dumps(data)
        for cost in ("wall_s", "steps_per_s"):
            assert cost in text
        return _without(data, {"wall_s", "steps_per_s"})

    assert numbers(tmp_path / "m.db") == numbers(tmp_path / "whole.db")
    with ResultsStore(tmp_path / "m.db") as merged_store:
        assert len(merged_store.runs(sweep="halves", status="done")) == 4


def _without(value, keys):
    if isinstance(value, dict):
        return {k: _without(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_without(v, keys) for v in value]
    return value


def _changed(path, run_id, level):
    """Give run_id in the store at path other numbers (as a run on another machine with other code would)."""
    with ResultsStore(path) as store:
        record = store.export_record(run_id)
        record["summary"]["min_val_loss"] = level
        record["curve"][1]["val_loss"] = level
        store.import_record(record)


def test_a_conflict_is_reported_and_never_overwritten(tmp_path):
    ids = fill_store(tmp_path / "a.db", RUNS[:3])
    fill_store(tmp_path / "b.db", RUNS[:3])
    _changed(tmp_path / "b.db", ids[1], 0.75)
    _changed(tmp_path / "b.db", ids[2], 0.875)
    before = dump(tmp_path / "a.db")

    invoke("store", "export", tmp_path / "b.jsonl", "--store", tmp_path / "b.db")
    imported = invoke("store", "import", tmp_path / "b.jsonl", "--store", tmp_path / "a.db")
    assert imported.exit_code == 1
    conflicts = [line for line in imported.stderr.splitlines() if line.startswith("conflict:")]
    assert len(conflicts) == 2 and ids[1] in conflicts[0] + conflicts[1] and ids[2] in conflicts[0] + conflicts[1]
    # the first number that differs: validation's pick moved with the changed curve
    assert "summary best_step: 200 here, 300 there" in conflicts[0] and "1 unchanged, 2 conflict" in imported.stderr
    assert dump(tmp_path / "a.db") == before

    merged = invoke("store", "merge", tmp_path / "m.db", tmp_path / "b.db", tmp_path / "a.db")
    assert merged.exit_code == 1
    with ResultsStore(tmp_path / "m.db") as store:  # the first source's row stays
        assert store.get_run(ids[1]).summary["min_val_loss"] == 0.75


def test_timings_are_not_numbers_and_memberships_are_united(tmp_path):
    """The same run on two machines: other wall times, the same losses: no conflict; the sweeps
    it belongs to on either side are the union."""
    (run_id,) = fill_store(tmp_path / "a.db", RUNS[:1])
    with ResultsStore(tmp_path / "a.db") as store:
        record = store.export_record(run_id)
    elsewhere = json.loads(json.dumps(record))
    elsewhere["summary"]["wall_s"] = 99.0
    elsewhere["curve"][0]["wall_s"] = 42.0
    elsewhere["sweeps"] = ["table1-copying"]
    assert difference(record, elsewhere) is None
    with ResultsStore(tmp_path / "a.db") as store:
        assert combine(store, elsewhere) == ("joined", None)
        assert store.sweeps(run_id) == ["k-ablation", "table1-copying"]
        assert store.get_run(run_id).summary["wall_s"] == 10.0  # the store's own timing kept
        assert combine(store, elsewhere) == ("unchanged", None)
    elsewhere["curve"][2]["train_loss"] = 0.5
    assert "curve step 300 train_loss" in difference(record, elsewhere)


def test_a_running_row_gives_way_to_a_finished_one_and_not_the_reverse(tmp_path):
    finished = ("adding", 100, "bn", None, 0, "done", 0.25, "table2-adding")
    (run_id,) = fill_store(tmp_path / "running.db", [RUNS[-1]])  # the same config, still running
    fill_store(tmp_path / "done.db", [finished])
    invoke("store", "export", tmp_path / "done.jsonl", "--store", tmp_path / "done.db")
    invoke("store", "export", tmp_path / "running.jsonl", "--store", tmp_path / "running.db")

    replaced = invoke("store", "import", tmp_path / "done.jsonl", "--store", tmp_path / "running.db")
    assert replaced.exit_code == 0 and "1 replaced" in replaced.stderr
    kept = invoke("store", "import", tmp_path / "running.jsonl", "--store", tmp_path / "done.db")
    assert kept.exit_code == 0 and "1 kept" in kept.stderr
    for path in ("running.db", "done.db"):
        with ResultsStore(tmp_path / path) as store:
            assert store.status(run_id) == "done"
            assert [p.step for p in store.curve(run_id)] == [100, 200, 300]
    assert dump(tmp_path / "running.db")["evals"] == dump(tmp_path / "done.db")["evals"]


def test_export_filters_and_stdout(tmp_path):
    ids = fill_store(tmp_path / "a.db", RUNS)
    to_stdout = invoke("store", "export", "-", "--sweep", "k-ablation", "--store", tmp_path / "a.db")
    assert to_stdout.exit_code == 0, to_stdout.output
    assert {json.loads(line)["run_id"] for line in to_stdout.stdout.splitlines()} == set(ids[:8])
    adding = invoke("store", "export", "-", "--task", "adding", "--status", "done", "--store", tmp_path / "a.db")
    assert {json.loads(line)["run_id"] for line in adding.stdout.splitlines()} == set(ids[8:10])


GOOD = json.dumps(valid_record())


@pytest.mark.parametrize("content, message", [
    (GOOD + '\nnot json\n', "line 2: not JSON"),
    ('{"run_id": "abc", "status": "finished", "config": {}}\n', "unknown status"),
    ('[1, 2]\n', "not an atnbench run record"),
    ('{"status": "done", "config": {}}\n', "missing run_id"),
    ('{"run_id": "abc", "status": "done", "config": {}, "schema_version": 99}\n', "newer than this atnbench"),
    ('{"run_id": "", "status": "done", "config": {}}\n', "run_id is not a non-empty string"),
    ('{"run_id": 7, "status": "done", "config": {}}\n', "run_id is not a non-empty string"),
    ('"abc"\n', "a string, not an object"),
    ('7\n', "a number, not an object"),
    ('{"run_id": "abc", "status": "done", "config": {}, "sweeps": "k-ablation"}\n', "curve and sweeps must be lists"),
    (GOOD + '\n\n{"run_id": "abc", "status": "finished", "config": {}}\n',
     "line 3 run abc: not an atnbench run record (unknown status"),
    (json.dumps({**valid_record(), "curve": []}) + "\n", "curve: empty, and a done run has at least one evaluation"),
])
def test_a_bad_file_is_one_line_and_imports_nothing(tmp_path, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    result = invoke("store", "import", bad, "--store", tmp_path / "b.db")
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "b.db").exists()


def test_merge_refuses_a_missing_source_or_the_output_as_a_source(tmp_path):
    fill_store(tmp_path / "a.db", RUNS[:1])
    missing = invoke("store", "merge", tmp_path / "m.db", tmp_path / "a.db", tmp_path / "nope.db")
    assert missing.exit_code == 2 and "nope.db" in missing.stderr
    itself = invoke("store", "merge", tmp_path / "a.db", tmp_path / "a.db")
    assert itself.exit_code == 2 and "output store" in itself.stderr
    assert not (tmp_path / "m.db").exists()


def test_export_can_leave_out_stale_runs_that_a_current_run_supersedes(tmp_path):
    from atnbench.evidence.identity import code_fingerprint
    from atnbench.run.runspec import resolve_run

    path, ids = tmp_path / "s.db", {}
    with ResultsStore(path) as store:
        for name, norm, code in (("old ln", "ln", "0" * 16), ("ln", "ln", code_fingerprint()), ("old atn", "atn", "0" * 16)):
            config = resolve_run("adding", {"norm": norm, "T": 100}, budget=0.01)
            run_id = run_id_of(config) if code == code_fingerprint() else f"{code[:4]}{run_id_of(config)[4:]}"
            store.start_run(run_id, config.to_dict(), {"code": code})
            store.log_eval(run_id, 2, 1.0, 0.5, 0.4)
            store.finish_run(run_id, "done", {})
            ids[name] = run_id

    def exported(*flags):
        result = invoke("store", "export", "-", *flags, "--store", path)
        assert result.exit_code == 0, result.output
        return {json.loads(line)["run_id"] for line in result.stdout.splitlines()}

    assert exported() == set(ids.values())
    # the stale ln run has a current twin and goes; the stale atn run has none and stays (reports mark it stale)
    assert exported("--drop-superseded") == {ids["ln"], ids["old atn"]}


# -- found by a mutation pass over atnbench/evidence/transfer.py ----------------------------------------
BN = ("adding", 100, "bn", None, 0)  # one experiment, recorded in two stores


def _both(tmp_path, ours, theirs):
    """The same run in two stores as (status, level, sweep); returns its id and the other store's record."""
    (run_id,) = fill_store(tmp_path / "ours.db", [(*BN, *ours)])
    fill_store(tmp_path / "theirs.db", [(*BN, *theirs)])
    with ResultsStore(tmp_path / "theirs.db") as store:
        return run_id, store.export_record(run_id)


@pytest.mark.parametrize("ours, theirs, outcome, status", [
    ("running", "failed", "replaced", "failed"),
    ("running", "diverged", "replaced", "diverged"),
    ("failed", "done", "replaced", "done"),
    ("failed", "diverged", "replaced", "diverged"),
    ("failed", "running", "kept", "failed"),
    ("diverged", "failed", "kept", "diverged"),
    ("done", "running", "kept", "done"),
])
def test_the_more_finished_row_wins_and_memberships_are_united_either_way(tmp_path, ours, theirs, outcome, status):
    run_id, record = _both(tmp_path, (ours, 0.25, "mine"), (theirs, 0.5, "theirs"))
    with ResultsStore(tmp_path / "ours.db") as store:
        assert combine(store, record) == (outcome, None)
        assert store.status(run_id) == status
        assert store.sweeps(run_id) == ["mine", "theirs"]


def test_done_and_diverged_with_the_same_numbers_are_a_conflict(tmp_path):
    run_id, record = _both(tmp_path, ("done", 0.25, "mine"), ("diverged", 0.25, "mine"))
    with ResultsStore(tmp_path / "ours.db") as store:
        assert combine(store, record, "b.jsonl") == (
            "conflict", Conflict(run_id, "b.jsonl", "status done here, diverged there"))
        assert store.status(run_id) == "done"


def test_of_two_running_rows_the_longer_curve_wins(tmp_path):
    run_id, shorter = _both(tmp_path, ("running", 0.5, "theirs"), ("running", 0.5, "mine"))
    with ResultsStore(tmp_path / "ours.db") as store:
        store.log_eval(run_id, 200, 2.0, 0.5, 0.25)  # this one got further
        longer = store.export_record(run_id)
    with ResultsStore(tmp_path / "theirs.db") as store:
        assert combine(store, longer) == ("replaced", None)
        assert [p.step for p in store.curve(run_id)] == [100, 200]
    with ResultsStore(tmp_path / "ours.db") as store:
        assert combine(store, shorter) == ("joined", None)  # the curve stays, the sweep is added
        assert [p.step for p in store.curve(run_id)] == [100, 200]
        assert store.sweeps(run_id) == ["mine", "theirs"]


def test_two_failures_are_never_a_conflict(tmp_path):
    run_id, record = _both(tmp_path, ("failed", 0.25, "mine"), ("failed", 0.5, "theirs"))
    with ResultsStore(tmp_path / "ours.db") as store:
        assert combine(store, record) == ("joined", None)
        assert store.get_run(run_id).summary["min_val_loss"] == 0.125  # the store's row
        assert store.sweeps(run_id) == ["mine", "theirs"]


def test_difference_words_name_this_store_first_and_see_every_number(tmp_path):
    (run_id,) = fill_store(tmp_path / "a.db", RUNS[:1])  # level 0.125
    with ResultsStore(tmp_path / "a.db") as store:
        ours = store.export_record(run_id)

    def theirs(change):
        other = json.loads(json.dumps(ours))
        change(other)
        return difference(ours, other)

    assert theirs(lambda r: r["summary"].update(min_val_loss=0.75)) == "summary min_val_loss: 0.0625 here, 0.75 there"
    assert theirs(lambda r: r["summary"].update(final_accuracy=0.5)) == "summary final_accuracy: None here, 0.5 there"
    assert theirs(lambda r: r["curve"][2].update(val_loss=0.5)) == "curve step 300 val_loss: 0.125 here, 0.5 there"
    assert theirs(lambda r: r["curve"].append({**r["curve"][-1], "step": 400})) == \
        "curve has 3 points here, 4 there (or at other steps)"
    assert theirs(lambda r: r["curve"].pop()) == "curve has 3 points here, 2 there (or at other steps)"


def test_a_conflict_line_names_the_file_it_came_from(tmp_path):
    ids = fill_store(tmp_path / "a.db", RUNS[:1])
    fill_store(tmp_path / "b.db", RUNS[:1])
    with ResultsStore(tmp_path / "b.db") as store:
        record = store.export_record(ids[0])
        record["summary"]["min_val_loss"] = 0.75
        store.import_record(record)
    invoke("store", "export", tmp_path / "b.jsonl", "--store", tmp_path / "b.db")
    imported = invoke("store", "import", tmp_path / "b.jsonl", "--store", tmp_path / "a.db")
    assert imported.exit_code == 1
    assert f"conflict: run {ids[0]} from {tmp_path / 'b.jsonl'}: summary min_val_loss: 0.0625 here, 0.75 there " \
           "(neither records its processor class); kept the store's row" in imported.stderr


def test_a_conflict_line_names_the_processor_classes_that_made_the_two(tmp_path):
    """Same id, other numbers: rounding between classes (the C++ path against the loop, AVX2
    against AVX-512) or not; the line named neither machine."""
    ids = fill_store(tmp_path / "a.db", RUNS[2:3])  # LN: a norm the C++ fast path covers
    fill_store(tmp_path / "b.db", RUNS[2:3])
    for name, env in (("a.db", {"cpu_capability": "AVX512", "cpp_fast_path": True}),
                      ("b.db", {"cpu_capability": "AVX512", "cpp_fast_path": False})):
        with ResultsStore(tmp_path / name) as store:
            record = store.export_record(ids[0])
            record["env"] = {**record["env"], **env}
            if name == "b.db":
                record["summary"]["min_val_loss"] = 0.75
            store.import_record(record)
    merged = invoke("store", "merge", tmp_path / "m.db", tmp_path / "a.db", tmp_path / "b.db")
    assert merged.exit_code == 1
    assert "0.75 there (made in processor class AVX512 here, AVX512 loop there, which round differently); " \
           "kept the store's row" in merged.stderr, merged.stderr
    from atnbench.evidence.transfer import Conflict  # one side from before classes were recorded (QA)

    assert Conflict("r", "f", "d", ("AVX512", "unknown")).made() == "made in processor class AVX512 here; there, not recorded"
    assert Conflict("r", "f", "d", ("unknown loop", "AVX2")).made() == "made in processor class AVX2 there; here, not recorded"
    assert Conflict("r", "f", "d", ("AVX2", "AVX2")).made() == "both made in processor class AVX2"


def test_export_and_import_say_how_many_runs(tmp_path):
    fill_store(tmp_path / "a.db", RUNS)
    exported = invoke("store", "export", tmp_path / "a.jsonl", "--store", tmp_path / "a.db")
    assert f"exported {len(RUNS)} runs from" in exported.stderr
    one = invoke("store", "export", "-", "--task", "adding", "--status", "running", "--store", tmp_path / "a.db")
    assert "exported 1 run from" in one.stderr
    (tmp_path / "empty.jsonl").write_text("")
    empty = invoke("store", "import", tmp_path / "empty.jsonl", "--store", tmp_path / "b.db")
    assert empty.exit_code == 0 and empty.stderr.strip().endswith(": 0 run records read; it holds 0 runs")


def test_blank_lines_in_a_file_are_skipped(tmp_path):
    fill_store(tmp_path / "a.db", RUNS[:2])
    invoke("store", "export", tmp_path / "a.jsonl", "--store", tmp_path / "a.db")
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    (tmp_path / "spaced.jsonl").write_text("\n" + "\n\n".join(lines) + "\n\n")  # e.g. files joined by hand
    imported = invoke("store", "import", tmp_path / "spaced.jsonl", "--store", tmp_path / "b.db")
    assert imported.exit_code == 0, imported.output
    assert "2 added" in imported.stderr


def test_only_a_finished_current_run_supersedes_a_stale_one(tmp_path):
    """A current run that diverged supersedes its stale twin (it is a result); one still running
    (or failed) does not: the stale run is the only result of that experiment."""
    from atnbench.evidence.identity import code_fingerprint
    from atnbench.run.runspec import resolve_run

    path, ids, current = tmp_path / "s.db", {}, code_fingerprint()
    with ResultsStore(path) as store:
        for name, norm, code, status in (("old ln", "ln", "0" * 16, "done"), ("ln", "ln", current, "diverged"),
                                         ("old atn", "atn", "0" * 16, "done"), ("atn", "atn", current, "running"),
                                         ("old bn", "bn", "0" * 16, "done"), ("bn", "bn", current, "failed")):
            config = resolve_run("adding", {"norm": norm, "T": 100}, budget=0.01)
            run_id = run_id_of(config) if code == current else f"{code[:4]}{run_id_of(config)[4:]}"
            store.start_run(run_id, config.to_dict(), {"code": code})
            store.log_eval(run_id, 2, 1.0, 0.5, 0.4)
            if status != "running":
                store.finish_run(run_id, status, {})
            ids[name] = run_id
    result = invoke("store", "export", "-", "--drop-superseded", "--store", path)
    assert result.exit_code == 0, result.output
    assert {json.loads(line)["run_id"] for line in result.stdout.splitlines()} == set(ids.values()) - {ids["old ln"]}


def test_a_minimal_record_imports_twice_without_a_conflict(tmp_path):
    """Curve points without metrics (the store reads them back as {}) are the same numbers."""
    record = valid_record(summary={"min_val_loss": 0.5}, curve=[{"step": 1, "train_loss": 1.0, "val_loss": 0.5}])
    (tmp_path / "hand.jsonl").write_text(json.dumps(record) + "\n")
    first = invoke("store", "import", tmp_path / "hand.jsonl", "--store", tmp_path / "b.db")
    assert first.exit_code == 0 and "1 added" in first.stderr, first.output
    again = invoke("store", "import", tmp_path / "hand.jsonl", "--store", tmp_path / "b.db")
    assert again.exit_code == 0 and "1 unchanged" in again.stderr, again.output


def test_an_output_never_replaces_another_store_or_an_export_of_runs(tmp_path):
    """`--output` over another results store (or any SQLite file) would lose every run in it, and
    a report over an export of runs loses that export: refused, the file unchanged. A new export
    of runs may replace an old one."""
    fill_store(tmp_path / "a.db", [("adding", 100, "ln", None, 0, "done", 0.5, None)])
    shutil.copy(tmp_path / "a.db", tmp_path / "other.db")
    other = (tmp_path / "other.db").read_bytes()
    for args in (("report", "--output", tmp_path / "other.db"), ("runs", "export", "--output", tmp_path / "other.db"),
                 ("store", "export", tmp_path / "other.db")):
        refused = invoke(*args, "--store", tmp_path / "a.db")
        assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
        assert "other.db already holds an SQLite database (a results store?)" in refused.stderr
        assert (tmp_path / "other.db").read_bytes() == other
    with ResultsStore(tmp_path / "a.db") as store:  # a run of a thousand evaluations: one line of ~90 KB
        run_id = store.runs()[0].run_id
        with store.batch():
            for step in range(400, 1400):
                store.log_eval(run_id, step, 1.0, 0.5, 0.5)
    assert invoke("store", "export", tmp_path / "runs.jsonl", "--store", tmp_path / "a.db").exit_code == 0
    exported = (tmp_path / "runs.jsonl").read_bytes()
    assert exported.index(b"\n") > 1 << 16
    refused = invoke("report", "--store", tmp_path / "a.db", "--output", tmp_path / "runs.jsonl", "--format", "json")
    assert refused.exit_code == 2 and "already holds an export of runs" in refused.stderr
    assert (tmp_path / "runs.jsonl").read_bytes() == exported
    # `runs export -f json` writes a JSON list of runs: as much an export, which another output replaced
    assert invoke("runs", "export", "-f", "json", "-o", tmp_path / "runs.json", "--store", tmp_path / "a.db").exit_code == 0
    listed = (tmp_path / "runs.json").read_bytes()
    refused = invoke("report", "--store", tmp_path / "a.db", "--output", tmp_path / "runs.json", "--format", "json")
    assert refused.exit_code == 2 and "runs.json already holds a list of runs (`runs export -f json`)" in refused.stderr
    assert (tmp_path / "runs.json").read_bytes() == listed
    again = invoke("runs", "export", "-f", "json", "-o", tmp_path / "runs.json", "--store", tmp_path / "a.db")
    assert again.exit_code == 0  # a new list replaces a list, as a store export replaces an export
    kept = invoke("runs", "export", "-f", "json", "-o", tmp_path / "runs.jsonl", "--store", tmp_path / "a.db")
    assert kept.exit_code == 2 and "runs.jsonl already holds an export of runs (JSON Lines)" in kept.stderr
    assert (tmp_path / "runs.jsonl").read_bytes() == exported  # the portable export is not replaced by a view
    again = invoke("store", "export", tmp_path / "runs.jsonl", "--store", tmp_path / "a.db")
    assert again.exit_code == 0 and (tmp_path / "runs.jsonl").read_bytes() == exported
    listed = (tmp_path / "runs.json").read_bytes()  # `store export` replaced the list with JSON Lines (QA)
    for args in (("store", "export", tmp_path / "runs.json"), ("store", "export", tmp_path / "x.jsonl", "--studies", tmp_path / "runs.json")):
        refused = invoke(*args, "--store", tmp_path / "a.db")
        assert refused.exit_code == 2 and "runs.json already holds a list of runs" in refused.stderr, refused.output
        assert (tmp_path / "runs.json").read_bytes() == listed
    report = tmp_path / "report.md"
    report.write_text("an earlier report\n")  # any other file is replaced, as before
    assert invoke("report", "--store", tmp_path / "a.db", "--output", report).exit_code == 0
    assert "earlier" not in report.read_text()


def test_a_studies_export_never_loses_studies_it_does_not_hold(tmp_path):
    """`store export X --studies FILE` from a store without the file's studies wrote `[]` over the
    published studies.json, exit 0 (QA: a runs export is refused where it would lose runs). Refused
    before either file is written; an export of the same studies refreshes the file."""
    results = Path(__file__).resolve().parents[1] / "results"
    published = tmp_path / "published.db"
    assert invoke("store", "import", results / "runs.jsonl", "--store", published, "--studies",
                  results / "studies.json").exit_code == 0
    studies, runs = tmp_path / "studies.json", tmp_path / "runs.jsonl"
    assert invoke("store", "export", runs, "--studies", studies, "--store", published).exit_code == 0
    kept_studies, kept_runs = studies.read_bytes(), runs.read_bytes()
    fill_store(tmp_path / "other.db", RUNS)
    refused = invoke("store", "export", tmp_path / "new.jsonl", "--studies", studies, "--store", tmp_path / "other.db")
    assert refused.exit_code == 2 and "studies.json holds 7 studies this export does not" in refused.stderr, refused.output
    assert studies.read_bytes() == kept_studies and not (tmp_path / "new.jsonl").exists()
    again = invoke("store", "export", runs, "--studies", studies, "--store", published)
    assert again.exit_code == 0 and studies.read_bytes() == kept_studies and runs.read_bytes() == kept_runs


def test_a_lone_surrogate_in_a_file_is_one_line_not_an_internal_error(tmp_path):
    """JSON may escape half of a surrogate pair ("\\ud800"), which no UTF-8 store can hold: a sweep
    name or an error text so made stopped `store import` as "a bug in atnbench" (QA). Refused with
    the file and line, nothing imported; a whole pair (an emoji) is text like any other."""
    fill_store(tmp_path / "a.db", RUNS[:1])
    assert invoke("store", "export", tmp_path / "a.jsonl", "--store", tmp_path / "a.db").exit_code == 0
    record = json.loads((tmp_path / "a.jsonl").read_text())
    for name, sweeps in (("half.jsonl", ["a\ud800"]), ("whole.jsonl", ["a\U0001F600"])):
        (tmp_path / name).write_text(json.dumps({**record, "sweeps": sweeps}) + "\n")  # ensure_ascii: "\\ud800"
    refused = invoke("store", "import", tmp_path / "half.jsonl", "--store", tmp_path / "b.db")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
    assert "half.jsonl line 1: text 'a\\ud800' holds half of a UTF-16 surrogate pair" in refused.stderr
    assert not (tmp_path / "b.db").exists()
    assert invoke("store", "import", tmp_path / "whole.jsonl", "--store", tmp_path / "b.db").exit_code == 0
    (tmp_path / "studies.json").write_text(json.dumps([{"name": "k\udfff"}]))
    studies = invoke("store", "import", tmp_path / "a.jsonl", "--studies", tmp_path / "studies.json",
                     "--store", tmp_path / "c.db")
    assert studies.exit_code == 2 and "holds half of a UTF-16 surrogate pair" in studies.stderr, studies.output


def test_two_studies_of_one_name_in_a_file_are_named_in_it(tmp_path):
    """A studies file holding one name twice, the two differing: the refusal blamed the store, which
    held no study (QA); it names the file's two entries. Two equal copies are one study."""
    results = Path(__file__).resolve().parents[1] / "results"
    studies = json.loads((results / "studies.json").read_text())
    (tmp_path / "twice.json").write_text(json.dumps(studies + [{**studies[0], "alpha": 0.1}]))
    (tmp_path / "same.json").write_text(json.dumps(studies + [studies[0]]))
    refused = invoke("store", "import", results / "runs.jsonl", "--studies", tmp_path / "twice.json",
                     "--store", tmp_path / "a.db")
    assert refused.exit_code == 2 and f"entries 0 and {len(studies)} are two studies named " in refused.stderr, \
        refused.output
    assert not (tmp_path / "a.db").exists()
    assert invoke("store", "import", results / "runs.jsonl", "--studies", tmp_path / "same.json",
                  "--store", tmp_path / "b.db").exit_code == 0

"""Imports validate every record (#29): each class of bad record is refused with one line naming
the file, line, run and field, and nothing of the file is written; `merge` writes nothing when a
source fails; `store import -` reads standard input; one malformed row of a store is one bad row."""

from __future__ import annotations

import copy
import json
import sqlite3

import pytest

from helpers import fill_store, invoke

RUNS = [("copying", 100, "ln", None, 0, "done", 0.5, "k-ablation"),
        ("copying", 100, "atn", 45, 0, "diverged", 1.0, "k-ablation"),
        ("adding", 100, "atn", 25, 1, "done", 0.002, None)]


@pytest.fixture()
def exported(tmp_path) -> list[dict]:
    fill_store(tmp_path / "source.db", RUNS)
    result = invoke("store", "export", tmp_path / "runs.jsonl", "--store", tmp_path / "source.db")
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]


def _set(path: str, value):
    def change(record):
        *parents, last = path.split(".")
        target = record
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[last] = value
    return change


def _both(*changes):
    def change(record):
        for each in changes:
            each(record)
    return change


def _tampered(record):
    record["run_id"] = format(int(record["run_id"], 16) ^ 1, "012x")


BAD = {
    "T as a string": (_set("config.T", "100"), "config.T"),
    "a loss that is a word": (_set("summary.min_val_loss", "low"), "min_val_loss"),
    "a curve loss of 1e999": (_set("curve.0.val_loss", float("inf")), "curve.0.val_loss"),
    "NaN in a curve metric": (_set("curve.0.train_loss", float("nan")), "curve.0.train_loss"),
    "a negative step": (_set("curve.0.step", -5), "curve.0.step"),
    "an unknown task": (_both(_set("task", "sorting"), _set("config.task", "sorting")), "unknown task 'sorting'"),
    "a top-level field that is not its config's": (_set("config.task", "sorting"), "'sorting' in config.task"),
    "an id that does not match its config": (_set("config.lr", 0.5), "does not follow from the config"),
    "an id that is a path": (_set("run_id", "../x"), "12 hexadecimal"),
    "an integer too large for SQLite": (_set("config.seed", 2**64), "64-bit"),
    "a boolean for a number": (_set("summary.min_val_loss", True), "min_val_loss"),
    "a negative curve wall_s": (_set("curve.0.wall_s", -1.0), "curve.0.wall_s: must be ≥ 0"),
    "a negative step count": (_set("summary.steps", -5), "steps must be a whole number ≥ 0"),
    "a fractional parameter count": (_set("summary.params", 537.5), "params must be a whole number ≥ 0"),
    "a negative best step": (_set("summary.best_step", -1), "best_step must be a whole number ≥ 0"),
    "a negative wall time": (_set("summary.wall_s", -3.0), "wall_s must be ≥ 0"),
    "an infinite config setting": (_set("config.lr", float("inf")), "config.lr: must be a finite number"),
    "a code fingerprint that is not text": (_set("env.code", 5), "env.code"),
    "a tampered id with a null code": (_both(_set("env.code", None), _tampered), "does not follow from the config"),
    # the store keys a curve by (run, step): a second point at a step was SQLite's IntegrityError, "a bug"
    "a step twice in the curve": (lambda record: record["curve"].append(dict(record["curve"][0])),
                                  "curve: step 100 appears twice"),
    "a created_at that is no date": (_set("created_at", "not a date"), "created_at: not an ISO-8601 date/time"),
    "an updated_at that is a number": (_set("updated_at", 5), "updated_at: must be an ISO-8601 date/time as text"),
    "an error that is a mapping": (_set("error", {"a": [1, 2]}), "error: Input should be a valid string"),
    "an error that is a number": (_set("error", 5), "error: Input should be a valid string"),
    "a schema version that is a boolean": (_set("schema_version", True), "schema_version"),
}


@pytest.mark.parametrize("name", BAD)
def test_a_bad_record_is_refused_by_line_run_and_field_and_nothing_is_written(tmp_path, exported, name):
    change, field = BAD[name]
    records = copy.deepcopy(exported)
    change(records[1])
    bad = tmp_path / "bad.jsonl"
    # Python's json writes inf/nan as Infinity/NaN, which a file from outside may hold
    bad.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = invoke("store", "import", bad, "--store", tmp_path / "target.db")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "line 2" in lines[0] and field in lines[0] and "nothing imported" in lines[0]
    assert not (tmp_path / "target.db").exists()


def test_our_own_export_round_trips_diverged_runs_included(tmp_path, exported):
    assert {r["status"] for r in exported} == {"done", "diverged"}
    result = invoke("store", "import", tmp_path / "runs.jsonl", "--store", tmp_path / "copy.db")
    assert result.exit_code == 0 and "3 added" in result.output


def test_import_reads_standard_input(tmp_path, exported):
    text = (tmp_path / "runs.jsonl").read_text()
    result = invoke("store", "import", "-", "--store", tmp_path / "piped.db", input=text)
    assert result.exit_code == 0, result.output
    listed = invoke("runs", "list", "--store", tmp_path / "piped.db", "--quiet")
    assert sorted(listed.stdout.split()) == sorted(r["run_id"] for r in exported)


def _spoil(db, run_id, column="summary_json", value="{not json"):
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE runs SET {column} = ? WHERE run_id = ?", (value, run_id))


def test_a_failing_merge_writes_nothing(tmp_path, exported):
    fill_store(tmp_path / "other.db", [("adding", 200, "ln", None, 3, "done", 0.01, None)])
    with sqlite3.connect(tmp_path / "other.db") as conn:  # a row that reads but breaks the schema
        row = conn.execute("SELECT run_id, config_json FROM runs").fetchone()
        config = json.loads(row[1])
        config["task"] = "sorting"
        conn.execute("UPDATE runs SET config_json = ? WHERE run_id = ?", (json.dumps(config), row[0]))
    result = invoke("store", "merge", tmp_path / "all.db", tmp_path / "source.db", tmp_path / "other.db")
    assert result.exit_code == 2 and "'sorting'" in result.stderr and row[0] in result.stderr
    assert not (tmp_path / "all.db").exists()


def test_one_malformed_row_is_one_bad_row(tmp_path, exported):
    db = tmp_path / "source.db"
    broken = exported[0]["run_id"]
    _spoil(db, broken)
    listed = invoke("runs", "list", "--store", db, "--quiet")
    assert listed.exit_code == 0 and len(listed.stdout.split()) == 2 and broken not in listed.stdout
    assert f"note: run {broken}" in listed.stderr and "not JSON" in listed.stderr
    shown = invoke("runs", "show", broken, "--store", db)
    assert shown.exit_code == 2 and "summary is not JSON" in shown.stderr
    report = invoke("report", "--store", db, "--format", "json")
    assert report.exit_code == 0 and broken in report.stderr
    out = tmp_path / "rest.jsonl"
    assert invoke("store", "export", out, "--store", db).exit_code == 0
    assert broken not in out.read_text() and len(out.read_text().splitlines()) == 2
    merged = invoke("store", "merge", tmp_path / "m.db", db)
    assert merged.exit_code == 0 and "2 added" in merged.output and broken in merged.stderr


def _import_text(tmp_path, records, replace=("", "")):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records).replace(*replace))
    return invoke("store", "import", path, "--store", tmp_path / "target.db")


def test_a_config_number_of_1e999_is_named_as_not_finite_before_the_id_is_checked(tmp_path, exported):
    records = copy.deepcopy(exported)
    records[0]["config"]["lr"] = 0.123456789
    result = _import_text(tmp_path, records, ("0.123456789", "1e999"))  # json reads 1e999 as inf
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "line 1" in line and "config.lr: must be a finite number" in line
    assert "run_id" not in line and not (tmp_path / "target.db").exists()


def test_an_untampered_record_with_a_null_code_is_checked_under_this_code_and_imported(tmp_path, exported):
    records = copy.deepcopy(exported)
    for record in records:
        record.setdefault("env", {})["code"] = None
    result = _import_text(tmp_path, records)
    assert result.exit_code == 0 and "3 added" in result.stderr and "note:" not in result.stderr


def _with_data_file(record, data_file):
    """The record as if its run had read ``data_file``: the id then holds the file's contents."""
    from atnbench.evidence import identity

    record["config"]["options"] = {**record["config"].get("options", {}), "data_files": {"train": str(data_file)}}
    record["run_id"] = identity.run_id_of(record["config"])
    return record


def test_an_id_whose_data_files_are_here_is_recomputed_from_their_contents(tmp_path, exported):
    data_file = tmp_path / "train.txt"
    data_file.write_text("a tiny corpus\n")
    record = _with_data_file(copy.deepcopy(exported[0]), data_file)
    imported = _import_text(tmp_path, [record])
    assert imported.exit_code == 0 and "1 added" in imported.stderr and "note:" not in imported.stderr
    data_file.write_text("another corpus\n")  # the same config over other data is another run
    refused = _import_text(tmp_path, [record])
    assert refused.exit_code == 2 and "does not follow from the config and the contents of its data files" \
        in refused.stderr
    _tampered(record)
    assert "does not follow" in _import_text(tmp_path, [record]).stderr


def test_ids_whose_data_files_are_not_here_are_counted_in_one_note(tmp_path, exported):
    data_file = tmp_path / "train.txt"
    data_file.write_text("a tiny corpus\n")
    records = [_with_data_file(copy.deepcopy(r), data_file) for r in exported[:2]] + [exported[2]]
    data_file.unlink()
    result = _import_text(tmp_path, records)
    assert result.exit_code == 0 and "3 added" in result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "2 records' run ids could not be checked" in notes[0]
    merged = invoke("store", "merge", tmp_path / "merged.db", tmp_path / "target.db")  # a merge says so too
    assert merged.exit_code == 0 and "3 added" in merged.stderr
    assert [line for line in merged.stderr.splitlines() if line.startswith("note:")] == \
        [notes[0].replace(str(tmp_path / "in.jsonl"), str(tmp_path / "target.db"))]

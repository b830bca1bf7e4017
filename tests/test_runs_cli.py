"""`atnbench runs list | show | compare | delete | export` through the CLI, on runs trained by
`atnbench run` and on a store filled with known numbers."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import sqlite3
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from atnbench.cli.runs import sparkline
from atnbench.store import ResultsStore
from helpers import fill_store, invoke

TINY = ("--T", "20", "--iters", "4", "--eval-every", "2", "--val-samples", "16", "--hidden", "8", "--batch-size", "8",
        "--device", "cpu")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUNS = [  # (task, T, norm, k, seed, status, level, sweep)
    ("copying", 100, "none", None, 0, "done", 0.25, "k-ablation"),
    ("copying", 100, "atn", 25, 0, "done", 0.125, "k-ablation"),
    ("copying", 100, "atn", 45, 1, "diverged", 0.5, "k-ablation"),
    ("adding", 100, "ln", None, 0, "failed", 0.5, None),
    ("adding", 100, "bn", None, 0, "running", 0.5, None),
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two tiny runs trained by `atnbench run` (LN and ATN k=3): (store, ln id, atn id)."""
    store = tmp_path_factory.mktemp("runs") / "x.db"
    ids = []
    for norm in (("--norm", "ln"), ("--norm", "atn", "--k", "3")):
        done = invoke("run", "adding", *norm, *TINY, "--store", store, "--json")
        assert done.exit_code == 0, done.output
        ids.append(json.loads(done.stdout)["run_id"])
    return store, ids[0], ids[1]


@pytest.fixture
def filled(tmp_path):
    """A store with known numbers and every status: (store, ids in RUNS order)."""
    store = tmp_path / "f.db"
    return store, fill_store(store, RUNS)


def listed_ids(result) -> list[str]:
    assert result.exit_code == 0, result.output
    return result.stdout.split()


def test_list_shows_every_run_within_80_columns(trained, filled):
    store, ids = filled
    result = invoke("runs", "list", "--store", store, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines[:-1]) <= 80  # the table; the last line names the store
    for run_id, (task, _, _, _, _, status, _, _) in zip(ids, RUNS):
        (line,) = [line for line in lines if line.startswith(run_id)]  # the full id, on one line
        assert task in line and status in line
    assert "atn k=25" in result.stdout and "atn k=45" in result.stdout
    assert f"{len(RUNS)} of {len(RUNS)} runs" in result.stdout

    store, ln_id, atn_id = trained
    real = invoke("runs", "list", "--store", store)
    with ResultsStore(store) as results:
        best = results.get_run(atn_id).summary["min_val_loss"]
    (line,) = [line for line in real.stdout.splitlines() if line.startswith(atn_id)]
    assert "atn k=3" in line and f"{best:.4g}" in line


def test_list_filters(filled):
    store, ids = filled
    q = ("runs", "list", "--ids", "--store", store)
    assert listed_ids(invoke(*q)) == ids  # oldest first
    assert listed_ids(invoke(*q, "--task", "adding")) == ids[3:]
    assert listed_ids(invoke(*q, "--norm", "atn")) == ids[1:3]
    assert listed_ids(invoke(*q, "--norm", "lstm")) == ids[:1]  # the alias of norm none
    assert listed_ids(invoke(*q, "--status", "done")) == ids[:2]
    assert listed_ids(invoke(*q, "--sweep", "k-ablation", "--status", "diverged")) == ids[2:3]
    assert listed_ids(invoke(*q, "--since", "1d")) == ids
    tomorrow = (datetime.now(timezone.utc) + timedelta(days=1)).date().isoformat()
    assert listed_ids(invoke(*q, "--since", tomorrow)) == []


def test_the_old_quiet_of_runs_list_still_lists_ids_and_says_ids_replaces_it(filled):
    """`runs list -q` meant "ids only" where every other command's -q means "no progress"; --ids now."""
    store, ids = filled
    old = invoke("runs", "list", "-q", "--store", store)
    assert old.exit_code == 0 and listed_ids(old) == ids
    assert old.stderr.strip() == "note: -q/--quiet is deprecated; use --ids"
    both = invoke("runs", "list", "-q", "--ids", "--store", store)
    assert both.exit_code == 2 and "say the same thing" in both.stderr


@pytest.mark.parametrize("args, code, message", [
    (("--status", "finished"), 2, "unknown status 'finished'"),
    (("--norm", "xn"), 2, "unknown norm 'xn'"),
    (("--sweep", "nope"), 2, "no sweep named 'nope'"),
    (("--since", "last tuesday"), 2, "give an age (30m, 12h, 7d, 2w) or an ISO-8601 date/time"),
])
def test_list_bad_filters_are_one_line(filled, args, code, message):
    store, _ = filled
    result = invoke("runs", "list", *args, "--store", store)
    assert result.exit_code == code
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_show_a_trained_run_by_prefix(trained):
    store, ln_id, _ = trained
    with ResultsStore(store) as results:
        run, curve = results.get_run(ln_id), results.curve(ln_id)
    result = invoke("runs", "show", ln_id[:6], "--chart", "--store", store)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert f"run {ln_id}" in text and "done" in text
    for section in ("config", "environment", "summary", "curve"):
        assert section in text
    assert "optimizer" in text and run.env["torch"] in text
    assert f"{run.summary['min_val_loss']:.5g}" in text
    rows = [line.split() for line in text.splitlines() if line.split()[:1] in ([str(p.step)] for p in curve)]
    assert [row[0] for row in rows] == [str(p.step) for p in curve]
    assert [row[3] for row in rows] == [f"{p.val_loss:.5g}" for p in curve]
    assert any(ch in text for ch in "▁█")  # the text plot

    quiet = invoke("runs", "show", ln_id, "--no-chart", "--store", store)
    assert quiet.exit_code == 0 and not any(ch in quiet.stdout for ch in "▁█")


def test_show_thins_a_long_curve_and_says_so(tmp_path):
    store = tmp_path / "long.db"
    (run_id,) = fill_store(store, RUNS[:1])
    with ResultsStore(store) as results:
        for step in range(400, 4000, 100):
            results.log_eval(run_id, step, 1.0, 1.0 / step, 2.0 / step)
    result = invoke("runs", "show", run_id, "--points", "10", "--store", store)
    assert result.exit_code == 0, result.output
    assert "10 of 39 points" in result.stdout
    steps = [line.split()[0] for line in result.stdout.splitlines() if line.split() and line.split()[0].isdigit()]
    assert len(steps) == 10 and steps[0] == "100" and steps[-1] == "3900"  # first and last kept


def test_sparkline():
    assert sparkline([float(i) for i in range(8)]) == "▁▂▃▄▅▆▇█"
    assert sparkline([1.0, None, 1000.0, 10.0]) == "▁ █▃"  # log scale over decades: 10 is a third up
    assert len(sparkline([float(i) for i in range(1, 500)], width=40)) == 40


def test_ids_must_be_known_and_unambiguous(filled):
    store, ids = filled
    first = Counter(run_id[0] for run_id in ids).most_common(1)[0]
    unknown = invoke("runs", "show", "zzz", "--store", store)
    assert unknown.exit_code == 2 and "no run 'zzz'" in unknown.stderr
    if first[1] > 1:  # ids are hashes: a shared first character is likely, not certain
        ambiguous = invoke("runs", "show", first[0], "--store", store)
        assert ambiguous.exit_code == 2 and "matches" in ambiguous.stderr
    missing = invoke("runs", "list", "--store", store.parent / "nope.db")
    assert missing.exit_code == 2 and "no results store" in missing.stderr
    assert not (store.parent / "nope.db").exists()


def test_compare_marks_the_differing_keys_and_plots(trained, tmp_path):
    store, ln_id, atn_id = trained
    result = invoke("runs", "compare", ln_id[:5], atn_id[:5], "--plot", tmp_path / "cmp.png", "--store", store)
    assert result.exit_code == 0, result.output
    rows = {line.split()[1] if line.startswith("*") else line.split()[0]: line
            for line in result.stdout.splitlines() if line.strip()}
    assert rows["norm"].startswith("*") and "ln" in rows["norm"] and "atn" in rows["norm"]
    assert rows["min_val_loss"].startswith("*")
    # LN has no use for a window: its k is "-" and no difference from ATN's (issue 29)
    assert not rows["k"].startswith("*") and rows["k"].split()[1:] == ["-", "3"]
    assert not rows["task"].startswith("*") and not rows["hidden"].startswith("*")
    assert ln_id in result.stdout and atn_id in result.stdout
    assert (tmp_path / "cmp.png").read_bytes()[:8] == PNG_MAGIC

    only = invoke("runs", "compare", ln_id, atn_id, "--diff", "--store", store)
    assert "norm" in only.stdout and "hidden" not in only.stdout


@pytest.mark.parametrize("args, message", [
    (("ONE",), "at least two"),
    (("ONE", "ONE"), "at least two"),
    (("ONE", "TWO", "--plot", "x.txt"), ".png, .svg or .pdf"),
])
def test_compare_bad_input(trained, args, message):
    store, ln_id, atn_id = trained
    args = [{"ONE": ln_id, "TWO": atn_id}.get(arg, arg) for arg in args]
    result = invoke("runs", "compare", *args, "--store", store)
    assert result.exit_code == 2 and message in result.stderr


def _rows(store, table: str, run_id: str) -> int:
    with sqlite3.connect(store) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,)).fetchone()[0]


def test_delete_asks_then_removes_rows_curve_memberships_and_checkpoints(filled):
    store, ids = filled
    target = ids[1]
    from atnbench.run.checkpoint import checkpoint_dir

    checkpoints = checkpoint_dir(store, target)  # the store file's own checkpoint folder
    checkpoints.mkdir(parents=True)
    (checkpoints / "checkpoint.pt").write_bytes(b"weights")

    no = invoke("runs", "delete", target[:6], "--store", store, input="n\n")
    assert no.exit_code == 1 and "nothing deleted" in no.stderr
    closed = invoke("runs", "delete", target[:6], "--store", store)  # no answer at all
    assert closed.exit_code == 1 and "no answer on stdin (--yes deletes without asking)" in closed.stderr
    assert _rows(store, "runs", target) == 1 and checkpoints.is_dir()
    # stdin closed, not at its end (`<&-`): Python has no sys.stdin, and input() raised "lost sys.stdin"
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "from atnbench.cli import app; app(prog_name='atnbench')", "runs",
                           "delete", target[:6], "--store", str(store)], preexec_fn=lambda: os.close(0),
                          capture_output=True, text=True, timeout=120)
    assert gone.returncode == 1 and gone.stderr.strip().splitlines()[-1].endswith("no answer on stdin (--yes "
                                                                               "deletes without asking)"), gone.stderr
    assert _rows(store, "runs", target) == 1 and checkpoints.is_dir()

    yes = invoke("runs", "delete", target[:6], "--store", store, input="y\n")
    assert yes.exit_code == 0, yes.output
    assert "deleted 1 run" in yes.stdout and "1 checkpoint folder" in yes.stdout
    for table in ("runs", "evals", "sweep_runs"):
        assert _rows(store, table, target) == 0
    assert not checkpoints.exists()
    assert listed_ids(invoke("runs", "list", "--ids", "--store", store)) == [i for i in ids if i != target]

    several = invoke("runs", "delete", ids[0], ids[2], "--yes", "--store", store)
    assert several.exit_code == 0 and "deleted 2 runs" in several.stdout
    assert listed_ids(invoke("runs", "list", "--ids", "--store", store)) == ids[3:]
    assert _rows(store, "evals", ids[3]) == 3  # the others keep their curves


def test_a_runs_export_is_named_as_one_where_store_import_is_given_it(trained, tmp_path):
    """`runs export` writes CSV or a JSON list for analysis; `-o x.jsonl` (store export's format)
    is refused, not written as CSV, and `store import` of what it writes says what the file is."""
    store, _, _ = trained
    wrong = invoke("runs", "export", "--store", store, "-o", tmp_path / "runs.jsonl")
    assert wrong.exit_code == 2 and "is `atnbench store export`'s" in wrong.stderr and not (tmp_path / "runs.jsonl").exists()
    for name, fmt in (("runs.csv", "csv"), ("runs.json", "json")):
        assert invoke("runs", "export", "--store", store, "-o", tmp_path / name, "-f", fmt).exit_code == 0
        refused = invoke("store", "import", tmp_path / name, "--store", tmp_path / "new.db")
        assert refused.exit_code == 2 and "a `runs export` file" in refused.stderr, refused.output
        assert not (tmp_path / "new.db").exists()


def test_an_export_of_no_runs_says_so(trained):
    """An empty selection: JSON is an empty list; CSV has no header to write (its columns come
    from the runs), so the note on stderr is all there is, as in `runs list`."""
    store, _, _ = trained
    csv_out = invoke("runs", "export", "--store", store, "--task", "copying")
    assert csv_out.exit_code == 0 and csv_out.stdout == "" and "no runs match (2 in" in csv_out.stderr
    json_out = invoke("runs", "export", "--store", store, "--task", "copying", "-f", "json")
    assert json_out.exit_code == 0 and json.loads(json_out.stdout) == [] and "no runs match" in json_out.stderr


def test_a_damaged_row_is_deleted_by_its_id(filled):
    """A row whose JSON cannot be read is skipped, with a note, by every listing; `runs delete`
    names it by its id and the damage, and deletes it (it refused, so nothing could)."""
    store, ids = filled
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE runs SET summary_json = '{not json' WHERE run_id = ?", (ids[0],))
    conn.close()
    gone = invoke("runs", "delete", ids[0], "--yes", "--store", store)
    assert gone.exit_code == 0, gone.output
    assert f"{ids[0]}  (a damaged row: summary is not JSON" in gone.stdout and "deleted 1 run" in gone.stdout
    assert _rows(store, "runs", ids[0]) == 0 and _rows(store, "evals", ids[0]) == 0
    listed = invoke("runs", "list", "--ids", "--store", store)
    assert listed.stdout.split() == ids[1:] and "skipped" not in listed.stderr


@pytest.mark.slow
def test_a_run_that_is_training_is_not_deleted_and_finishes(tmp_path):
    from helpers import CliProcess, poll_store

    store = tmp_path / "r.db"
    finished = invoke("run", "adding", *TINY, "--store", store, "--json")
    assert finished.exit_code == 0, finished.output
    other = json.loads(finished.stdout)["run_id"]
    long_run = ["run", "adding", *TINY, "--iters", "400", "--eval-every", "25", "--seed", "1", "--store", store, "--json"]
    with CliProcess(long_run, tmp_path) as run:
        poll_store(store, lambda conn: conn.execute("SELECT COUNT(*) FROM evals JOIN runs USING (run_id) "
                                                    "WHERE status = 'running'").fetchone()[0] >= 1, run.popen)
        os.kill(run.popen.pid, signal.SIGSTOP)  # held mid-run (alive, holding its lock) while it is asked to go
        try:
            with sqlite3.connect(store) as conn:
                training = conn.execute("SELECT run_id FROM runs WHERE status = 'running'").fetchone()[0]
            refused = invoke("runs", "delete", other, training, "--yes", "--store", store)
            asked = invoke("runs", "delete", training, "--store", store, input="y\n")
        finally:
            os.kill(run.popen.pid, signal.SIGCONT)
        code = run.popen.wait(timeout=60)
        assert code == 0, run.log()
    assert refused.exit_code == 1 and refused.stdout == "", refused.output  # refused before listing anything
    lines = refused.stderr.splitlines()
    assert len(lines) == 1 and f"run {training} is training (by process {run.popen.pid}" in lines[0]
    assert "none of the 2 runs named is deleted" in lines[0]
    assert asked.exit_code == 1 and "Delete" not in asked.output  # refused before the question
    with ResultsStore(store, create=False) as results:
        assert results.status(training) == "done" and results.status(other) == "done"  # all or nothing


def test_export_csv_runs_and_curves_and_json(trained, tmp_path):
    store, ln_id, atn_id = trained
    with ResultsStore(store) as results:
        runs = {run_id: results.get_run(run_id) for run_id in (ln_id, atn_id)}
        curves = {run_id: results.curve(run_id) for run_id in (ln_id, atn_id)}

    table = invoke("runs", "export", "--store", store)
    assert table.exit_code == 0, table.output
    rows = {row["run_id"]: row for row in csv.DictReader(io.StringIO(table.stdout))}
    assert set(rows) == {ln_id, atn_id}
    for run_id, row in rows.items():
        assert row["config.norm"] == runs[run_id].norm and row["status"] == "done"
        assert float(row["summary.min_val_loss"]) == runs[run_id].summary["min_val_loss"]
        assert int(row["curve_points"]) == len(curves[run_id])

    points = invoke("runs", "export", "--curves", "--norm", "atn", "--output", tmp_path / "c.csv", "--store", store)
    assert points.exit_code == 0, points.output
    rows = list(csv.DictReader(io.StringIO((tmp_path / "c.csv").read_text())))
    assert [(int(r["step"]), float(r["val_loss"])) for r in rows] == [(p.step, p.val_loss) for p in curves[atn_id]]
    assert {r["run_id"] for r in rows} == {atn_id}

    as_json = invoke("runs", "export", "-o", tmp_path / "r.json", "--store", store)
    assert as_json.exit_code == 0 and "wrote 2 runs" in as_json.stderr
    data = {run["run_id"]: run for run in json.loads((tmp_path / "r.json").read_text())}
    assert data[ln_id]["config"] == runs[ln_id].config
    assert [p["train_loss"] for p in data[ln_id]["curve"]] == [p.train_loss for p in curves[ln_id]]

    bad = invoke("runs", "export", "--format", "xlsx", "--store", store)
    assert bad.exit_code == 2 and "unknown --format 'xlsx'" in bad.stderr


def test_reading_commands_leave_the_store_as_it_was(trained):
    store, ln_id, atn_id = trained

    def everything():
        with sqlite3.connect(store) as conn:
            return [sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
                    for table in ("runs", "evals", "sweep_runs", "meta")]

    before = everything()
    for args in (("list",), ("show", ln_id), ("compare", ln_id, atn_id), ("export",), ("export", "-f", "json")):
        assert invoke("runs", *args, "--store", store).exit_code == 0
    assert everything() == before


def test_list_and_show_as_json(trained, filled):
    store, ln, atn = trained
    listed = invoke("runs", "list", "--store", store, "--format", "json", "--norm", "atn")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [row["run_id"] for row in rows] == [atn] and rows[0]["k"] == 3 and rows[0]["model"] == "atn k=3"
    assert rows[0]["min_val_loss"] is not None and rows[0]["status"] == "done"
    shown = invoke("runs", "show", ln[:6], "--store", store, "--format", "json")
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.stdout)
    assert record["run_id"] == ln and record["config"]["norm"] == "ln" and record["curve"]
    bad = invoke("runs", "list", "--store", filled[0], "--format", "csv")
    assert bad.exit_code == 2 and "--format" in bad.stderr


def test_norm_lstm_filters_the_plain_lstm_and_none_every_plain_cell(tmp_path):
    """'lstm' is the plain LSTM's name: as a filter it is not also the plain GRU (both are norm
    none), and 'gru' is the plain GRU; '--norm none' is every plain cell. In `runs list` and in
    `report` alike."""
    from atnbench.evidence.identity import run_id_of
    from atnbench.run.runspec import resolve_run

    store = tmp_path / "s.db"
    ids = {}
    with ResultsStore(store) as results:
        for cell in ("lstm", "gru"):
            config = resolve_run("adding", {"T": 100, "norm": "none", "cell": cell}, budget=1.0)
            ids[cell] = run_id_of(config)
            results.start_run(ids[cell], config.to_dict(), {})
            results.log_eval(ids[cell], 100, 1.0, 0.2, 0.2)
            results.finish_run(ids[cell], "done", {})
    q = ("runs", "list", "--ids", "--store", store)
    assert listed_ids(invoke(*q, "--norm", "lstm")) == [ids["lstm"]]
    assert listed_ids(invoke(*q, "--norm", "gru")) == [ids["gru"]]  # as a filter, a plain cell's name selects it
    assert sorted(listed_ids(invoke(*q, "--norm", "none"))) == sorted(ids.values())
    report = invoke("report", "--store", store, "--norm", "lstm", "--format", "json")
    assert report.exit_code == 0, report.output
    assert [row["label"] for row in json.loads(report.stdout)["tables"][0]["rows"] if row["kind"] == "model"] == ["lstm"]


def test_a_running_row_no_process_trains_is_told_from_one_being_trained(tmp_path):
    """A run killed with -9 stays 'running' in the store; `runs list` and `runs show` say when no
    process here holds its lock (its lock file gone, or naming a dead pid), without locking it."""
    import subprocess
    import sys

    from atnbench.run.checkpoint import lock_file
    from helpers import fill_store

    store = tmp_path / "s.db"
    (run_id,) = fill_store(store, [("adding", 100, "ln", None, 0, "running", 0.5, None)])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    lock = lock_file(store, run_id)
    lock.parent.mkdir(parents=True, exist_ok=True)
    for holder, orphan in ((None, True), (gone.pid, True), (os.getpid(), False)):
        if holder is not None:
            lock.write_text(f"{holder}\n")
        listed = invoke("runs", "list", "--store", store, env={"COLUMNS": "200"})
        assert listed.exit_code == 0 and ("running?" in listed.stdout) == orphan, listed.stdout
        shown = invoke("runs", "show", run_id, "--store", store, "--no-chart", env={"COLUMNS": "200"})
        assert ("no process on this machine is training it" in shown.stdout) == orphan, shown.stdout
        assert ("the run has not finished" in shown.stdout) != orphan


def test_an_interrupted_delete_deletes_none_and_lets_go_of_every_lock(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM) in the middle of `runs delete` of many runs: the rows go in one
    transaction, so none is deleted, and every run's lock file is gone; the same command then works."""
    from helpers import fill_store

    store = tmp_path / "s.db"
    ids = fill_store(store, [("adding", 100, "ln", None, seed, "done", 0.5, None) for seed in range(4)])
    real, calls = ResultsStore.delete_run, []

    def interrupted(self, run_id):
        calls.append(run_id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, run_id)

    monkeypatch.setattr(ResultsStore, "delete_run", interrupted)
    stopped = invoke("runs", "delete", *ids, "--yes", "--store", store)
    assert stopped.exit_code == 130 and "interrupted: nothing deleted" in stopped.stderr, stopped.output
    with ResultsStore(store, create=False) as results:
        assert sorted(results.run_ids()) == sorted(ids)
    assert not list(tmp_path.glob("s.db-checkpoints/*.lock"))
    monkeypatch.setattr(ResultsStore, "delete_run", real)
    assert invoke("runs", "delete", *ids, "--yes", "--store", store).exit_code == 0
    with ResultsStore(store, create=False) as results:
        assert results.run_ids() == []


def test_a_store_named_through_a_link_shares_its_runs_locks(tmp_path):
    """A run trained through one name of a store (a symbolic link) holds the lock every name sees:
    `runs list` through the other name says it is running, and a second trainer is refused."""
    from atnbench.run.checkpoint import RunBusy, held_here, hold_run
    from helpers import fill_store

    store = tmp_path / "s.db"
    (run_id,) = fill_store(store, [("adding", 100, "ln", None, 0, "running", 0.5, None)])
    (tmp_path / "link.db").symlink_to(store)
    with hold_run(tmp_path / "link.db", run_id):
        assert held_here(store, run_id)
        with pytest.raises(RunBusy):
            with hold_run(store, run_id):
                pass
        assert "running?" not in invoke("runs", "list", "--store", store).stdout


def test_show_and_compare_print_stored_text_as_it_is(tmp_path):
    """A stored value that looks like markup ("[ab12]", as a run id in a note) is printed as text,
    not swallowed as a style."""
    from helpers import fill_store

    store = tmp_path / "s.db"
    ids = fill_store(store, [("adding", 100, "ln", None, seed, "done", 0.5, None) for seed in (0, 1)])
    with sqlite3.connect(store) as db:
        db.execute("UPDATE runs SET env_json = ?", (json.dumps({"note": "[ab12] kept", "device": "cpu"}),))
    shown = invoke("runs", "show", ids[0], "--store", store, "--no-chart", env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "[ab12] kept" in shown.stdout, shown.output
    compared = invoke("runs", "compare", *ids, "--store", store, env={"COLUMNS": "200"})
    assert compared.exit_code == 0 and "[ab12] kept" in compared.stdout, compared.output


def test_verify_of_an_unfinished_run_refuses_before_it_says_it_re_runs(tmp_path):
    from helpers import fill_store

    (running,) = fill_store(tmp_path / "s.db", [("adding", 100, "ln", None, 0, "running", 0.5, None)])
    refused = invoke("verify", running, "--store", tmp_path / "s.db")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
    assert f"run {running} is running; only a finished run can be verified" in refused.stderr
    assert "re-running" not in refused.stderr


@pytest.mark.parametrize("kind", ["store export", "runs export -f json", "runs export csv", "runs export --curves"])
def test_an_export_never_replaces_one_holding_runs_it_would_lose(filled, tmp_path, kind):
    """`store export machine-a.jsonl` from another store, or any export whose filter now matches
    fewer runs (or none), replaced the file: the other machine's runs were gone, "exported 0 runs",
    exit 0. Refreshing an export with what it held and more still replaces it."""
    store, ids = filled
    target = tmp_path / ("out.jsonl" if kind == "store export" else "out.json" if "json" in kind else "out.csv")

    def export(*filters):
        if kind == "store export":
            return invoke("store", "export", target, "--store", store, *filters)
        extra = {"runs export -f json": ("-f", "json"), "runs export --curves": ("--curves",)}.get(kind, ())
        return invoke("runs", "export", *extra, "-o", target, "--store", store, *filters)

    few = export("--task", "adding")
    assert few.exit_code == 0, few.output
    every = export()  # a refresh with every run: what the file held and more
    assert every.exit_code == 0, every.output
    before = target.read_bytes()
    for filters in (("--task", "adding"), ("--status", "running")):  # fewer runs; none
        refused = export(*filters)
        lines = refused.stderr.strip().splitlines()
        assert refused.exit_code == 2 and len(lines) == 1 and "which replacing it would lose" in lines[0], refused.output
        assert target.read_bytes() == before

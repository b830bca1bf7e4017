"""Issue 29: every table atnbench prints reads at 80 and at 100 columns (no number, id or word cut
or broken), piped output follows one width rule, and every command's help speaks one vocabulary."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from atnbench.cli import app
from atnbench.run.runspec import resolve_run
from atnbench.store import ResultsStore
from helpers import invoke
from atnbench.evidence.identity import run_id_of

WIDTHS = (80, 100)
STATUS_WORDS = {"done", "diverged", "failed", "running", "left", "reproduced", "contradicted", "inconclusive",
                "uninformative", "Yes", "No", "PASS", "FAIL"}
TASK_NAMES = {"adding", "copying", "denoise", "ptb-char", "ptb-word", "smnist-noise", "wikitext2", "imdb"}
ENDS = "()[],;:*·|"

# (task, T, norm, k, seed, status, min val loss, sweep): long task names, T=100 beside T=200, losses
# of five significant digits and one of five digits before the point
RUNS = [
    ("copying", 100, "none", None, 0, "done", 0.17329, "k-ablation"),
    ("copying", 100, "ln", None, 0, "done", 0.13117, "k-ablation"),
    ("copying", 100, "atn", 25, 0, "done", 0.15003, "k-ablation"),
    ("copying", 100, "atn", 45, 0, "done", 0.12314, "k-ablation"),
    ("copying", 200, "atn", 45, 1, "diverged", 31622.777, None),
    ("adding", 200, "ln", None, 2, "failed", 0.16667, None),
    ("adding", 100, "atn-bn", 25, 0, "running", 0.16667, None),
    ("ptb-char", 220, "atn", 20, 0, "done", 1.1225, "table4-ptb-char"),
    ("ptb-char", 220, "ln", None, 1, "done", 1.1224, "table4-ptb-char"),
    ("smnist-noise", 784, "atn", 10, 0, "done", 2.3026, None),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store with the values of RUNS (no training): (path, run ids in RUNS order)."""
    path = tmp_path_factory.mktemp("w") / "r.db"
    ids = []
    with ResultsStore(path) as results:
        for task, T, norm, k, seed, status, loss, sweep in RUNS:
            flags = {"T": T, "norm": norm, "seed": seed, **({"k": k} if k is not None else {})}
            config = resolve_run(task, flags, budget=0.25 if task == "adding" else None)
            results.start_run(run_id_of(config), config.to_dict(), {"device": "cpu", "threads": 1,
                                                                  "torch": "2.13.0+cpu"}, sweep=sweep)
            metrics = {"val_bpc": loss * 1.4427, "test_bpc": loss * 1.4} if task == "ptb-char" else {}
            for step, factor in ((1000, 4.0), (2000, 1.0), (3000, 1.25)):
                results.log_eval(run_id_of(config), step, step / 7.0, loss * factor * 1.1, loss * factor, metrics)
                if status == "running":
                    break
            if status != "running":
                results.finish_run(run_id_of(config), status, {"wall_s": 1233.3 + seed, "steps_per_s": 2.6272,
                                                           "min_val_loss": loss, "min_train_loss": loss * 1.1},
                                   error="loss became nan at step 2,345" if status == "diverged" else None)
            ids.append(run_id_of(config))
    return path, ids


def output_at(args, columns, **env):
    """The command's output (stdout and stderr) at COLUMNS=columns (None: unset, piped)."""
    result = invoke(*args, env={"COLUMNS": None if columns is None else str(columns), **env})
    assert result.exit_code in (0, 1), result.output
    return result.output


def values(text: str) -> set[str]:
    """The numbers, ids, T=/k= settings, statuses and task names a text shows, as words."""
    found = set()
    for token in text.split():
        token = token.strip(ENDS)
        if "/" in token or not token:  # paths: a path wider than the line is the one thing folded
            continue
        if any(c.isdigit() for c in token) or token in STATUS_WORDS or token in TASK_NAMES:
            found.add(token)
    return found


def check_legible(wide: str, narrow: str, width: int, where: str = "") -> None:
    """Every value of the wide (piped) output is whole in the narrow one, which fits its width
    (but for the lines naming a file, soft-wrapped on purpose) and cuts nothing with '…'."""
    assert "…" not in narrow, narrow
    for line in narrow.splitlines():
        assert len(line) <= width or (where and where in line), (width, line)
    missing = values(wide) - values(narrow)
    assert not missing, (width, sorted(missing), narrow)


def commands(path, ids, tmp_path):
    store = ("--store", path)
    return [
        ("runs", "list", *store),
        ("runs", "show", ids[7], *store),
        ("runs", "compare", ids[0], ids[3], ids[4], ids[7], *store),
        ("data", "list", "--root", tmp_path / "data"),
        ("reproduce", "--dry-run", "--only", "table1-copying,table4-ptb-char", *store),
        ("sweep", "--list"),
        ("sweep", "bias-placement", "--dry-run", *store),
        ("sweep", "table2-adding", "--dry-run", "--budget", "0.25", *store),
        ("tasks",),
        ("models",),
        ("report", *store),
        ("report", "--paper", "--task", "copying", *store),
        ("report", "--sweep", "k-ablation", *store),
        ("store", "merge", tmp_path / "merged.db", path),
    ]


def test_every_command_table_is_whole_at_80_and_100_columns(store, tmp_path, monkeypatch):
    path, ids = store
    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "data"))  # no real data: the same plan everywhere
    for args in commands(path, ids, tmp_path):
        wide = output_at(args, None)
        assert values(wide), args
        for width in WIDTHS:
            check_legible(wide, output_at(args, width), width, where=str(path.parents[1]))  # pytest's temp folder
    # the values that read alike when cut: every id, both lengths, five-digit losses, long names
    listed = output_at(("runs", "list", "--store", path), 80)
    assert set(ids) | {"100", "200", "ptb-char", "smnist-noise", "3.162e+04", "0.1733", "diverged"} <= values(listed)


def _printed(renderable, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(renderable)
    return console.file.getvalue()


def check_table(renderable) -> None:
    wide = _printed(renderable, 10_000)
    assert values(wide)
    for width in WIDTHS:
        check_legible(wide, _printed(renderable, width), width)


def test_the_tables_of_bench_stats_invariances_run_and_the_sweep_are_whole_at_80_and_100_columns(store):
    from atnbench.analysis.invariances import TRANSFORMATIONS, Record
    from atnbench.analysis.command import stats_table
    from atnbench.cli.analysis import invariance_table
    from atnbench.bench.command import results_table as bench_table
    from atnbench.run.command import summary_table
    from atnbench.sweep.command import _summary
    from atnbench.sweep import load_sweep
    from atnbench.sweep.runner import SweepOutcome
    from atnbench.sweep.view import results_table as sweep_table

    path, ids = store
    bench = [{"workload": "copying", "model": model, "k": k, "T": 220, "batch": 128, "hidden": 68, "input_size": 10,
              "reps": 10, "train_ms": ms, "train_ms_p25": ms * 0.98, "train_ms_p75": ms * 1.03, "infer_ms": ms / 3,
              "steps_per_s": 1000 / ms, "peak_mem_mb": 123.4, "ratio_lstm_fused": ms / 165.7, "ratio_ln": ms / 133.7,
              "ratio_fused": ms / 155.0 if model.startswith("gru") else ms / 165.7}
             for model, k, ms in (("lstm-fused", None, 165.7), ("ln", None, 133.7), ("atn", 45, 136.6),
                                  ("gru-atn-bn-loop", 65, 12345.6), ("atn-ref", 65, 4123.4))]
    check_table(bench_table("copying", bench))
    check_table(stats_table([{"model": f"ATN(k={k})", "layer": 0, "term": term, "mean_std": 0.0123, "mean_min": -0.0456,
                              "mean_max": 0.0789, "var_std": 1.2345, "var_min": 0.98765, "var_max": 12345.6}
                             for k in (5, 25, 55) for term in ("hidden", "input", "cell")]))
    check_table(invariance_table("lstm", [Record("lstm", norm, t, invariant=i % 2 == 0, paper=None if i % 3 else True,
                                                 max_deviation=10.0 ** -(i + 1), clear=i != 4)
                                          for norm in ("bn", "ln", "atn-bn", "atn", "bln")
                                          for i, t in enumerate(TRANSFORMATIONS)]))
    config = resolve_run("smnist-noise", {"norm": "atn", "k": 10, "seed": 2})
    record = {"run_id": ids[-1], "status": "done", "model": "atn", "min_train_loss": 2.3026, "min_val_loss": 2.3026,
              "final_train_loss": 12345.678, "final_val_loss": 2.3027, "baseline": 2.3026, "steps": 86, "wall_s": 1233.3,
              "steps_per_s": 2.6272, "params": 345250, "metric": "accuracy", "val_accuracy": 0.9876}
    check_table(summary_table(config, record, path))
    assert str(path) in _printed(summary_table(config, record, path), 100)  # the store it wrote to
    records = [{"run_id": run_id, "label": f"{task} T={T} {norm} seed={seed}", "status": status,
                "min_val_loss": loss, "wall_s": 1233.3} for run_id, (task, T, norm, _, seed, status, loss, _) in zip(ids, RUNS)]
    check_table(sweep_table(records, title="sweep k-ablation: finished runs"))
    outcome = SweepOutcome(total=15, skipped=[], outcomes={run_id: {"status": "done"} for run_id in ids[:4]})
    check_table(_summary(load_sweep("k-ablation"), outcome, path))
    assert str(path) in _printed(_summary(load_sweep("k-ablation"), outcome, path), 100)


def test_piped_output_is_plain_and_as_wide_as_its_content(store):
    """The one width rule (cli.app): off a terminal, no colour codes and every row on one line,
    however long; COLUMNS, where set, is the width."""
    path, ids = store
    listed = output_at(("runs", "list", "--store", path), None)
    assert "\x1b[" not in listed
    lines = listed.splitlines()
    for run_id, (task, T, _, _, _, status, _, _) in zip(ids, RUNS):
        (line,) = [line for line in lines if line.startswith(run_id)]
        assert line.split()[1:3] == [task, str(T)] and status in line
        assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d$", line.rstrip())  # the whole date and time on the line
    assert max(len(line) for line in lines) > 80  # no 80-column default
    datasets = output_at(("data", "list", "--root", path.parent / "data"), None)
    assert "\x1b[" not in datasets
    from atnbench.data.catalog import DATASETS

    for dataset in DATASETS.values():
        (line,) = [line for line in datasets.splitlines() if line.startswith(dataset.name + " ")]
        assert dataset.scope in line and f"{dataset.subdir}/" in line  # the whole row on one line
    narrow = output_at(("data", "list", "--root", path.parent / "data"), 60)
    assert max(len(line) for line in narrow.splitlines()) <= 60


def _commands(group, path=()):
    from typer._click import Context

    context = Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        yield (*path, name)
        if hasattr(command, "list_commands"):
            yield from _commands(command, (*path, name))


def test_every_command_help_speaks_one_type_vocabulary():
    import typer

    every = list(_commands(typer.main.get_command(app)))
    assert ("runs", "compare") in every and ("store", "merge") in every and ("data", "verify") in every
    for command in every:
        text = output_at((*command, "--help"), 100)
        assert not re.search(r"<\w+(\[[^\]]*\])?>", text), (command, text)  # <bool>, <int>, <list[str]>
    compare = output_at(("runs", "compare", "--help"), 100)
    assert re.search(r"run_ids\.\.\.\s+TEXT", compare) and re.search(r"--plot\s+PATH", compare)
    assert re.search(r"--diff\s+Only", compare)  # nothing after a flag
    assert re.search(r"sources\.\.\.\s+PATH", output_at(("store", "merge", "--help"), 100))


def test_compare_marks_no_difference_in_a_setting_a_run_has_no_use_for(store):
    path, ids = store
    text = output_at(("runs", "compare", ids[0], ids[1], ids[2], "--store", path), None)  # LSTM, LN, ATN k=25
    rows = {line.split()[1] if line.startswith("*") else line.split()[0]: line
            for line in text.splitlines() if line.strip()}
    assert rows["k"].split() == ["k", "-", "-", "25"]  # only ATN uses a window: nothing to differ in
    assert rows["eps"].split() == ["eps", "-", "1e-05", "1e-05"]  # the plain LSTM normalizes nothing
    assert rows["norm"].startswith("*")
    windows = output_at(("runs", "compare", ids[2], ids[3], "--store", path, "--diff"), None)  # ATN k=25, k=45
    assert any(line.split()[:4] == ["*", "k", "25", "45"] for line in windows.splitlines())


# -- issue 40: what was still cut or broken at 80 columns ----------------------------------------------

def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "\n")


@pytest.mark.parametrize("label", ["adding T=200 atn k=5 seed=0", "smnist-noise T=784 atn-bn k=10 variant=paper-text seed=12"])
def test_a_progress_bar_in_a_terminal_cuts_nothing_at_80_columns(label):
    from atnbench.run.progress import RichReporter

    for width in (80, 100):
        console = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
        bar = RichReporter(console, label)
        bar.start("r", 200000, 0)
        bar.step(199999, 123456.0)
        bar.evaluated(199999, 1.0, -0.12345)
        bar.finish("done")
        lines = [line for line in _plain(console.file.getvalue()).splitlines() if line.strip()]
        assert "…" not in "".join(lines) and max(len(line) for line in lines) <= width, lines
        shown = " ".join(lines).split()
        assert "199999/200000" in shown and "1.235e+05" in shown and "-0.1235" in shown, lines
        assert label in " ".join(lines)  # the title whole: beside the bar, or on its own line above it


def test_help_cuts_no_option_and_breaks_no_sentence_at_80_columns():
    from atnbench.settings import RUN_SETTINGS

    text = output_at(("run", "--help"), 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    words = set(text.replace(",", " ").split())
    for setting in RUN_SETTINGS:
        for flag in setting.flags:
            assert set(flag.split("/")) <= words, flag  # every flag whole (--checkpoint-every, --bias-outside)
    assert "--checkpoint-every" in words and len(text.splitlines()) < 130
    root = output_at(("--help",), 80)
    assert "…" not in root and max(len(line) for line in root.splitlines()) <= 80
    lines = root.split("Commands")[1].splitlines()
    for this, nxt in zip(lines, lines[1:]):
        # a description goes on to the next line only where its next word did not fit on this one
        if nxt.startswith("│" + " " * 14) and nxt.strip("│ "):
            room = len(this) - len(this.rstrip("│").rstrip()) - 2
            assert room < len(nxt.strip("│ ").split()[0]) + 1, (this, nxt)


def command_paths() -> list[tuple[str, ...]]:
    """Every command of atnbench, as the words that call it (``("runs", "list")``)."""
    import typer.main

    paths = []

    def walk(command, path):
        if hasattr(command, "commands"):  # a group
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        else:
            paths.append(path)

    walk(typer.main.get_command(app), ())
    return paths


def test_every_command_description_wraps_only_where_the_next_word_does_not_fit():
    """typer's rich mode kept a docstring's line breaks ("picks the sweep's" alone on a line):
    each paragraph of a command's description reads as one, wrapped at the terminal's width."""
    paths = command_paths()
    assert len(paths) > 20 and ("sweep",) in paths and ("runs", "list") in paths
    for path in paths:
        text = output_at((*path, "--help"), 80)
        description = text.split("╭")[0].splitlines()[3:]  # below the usage line, above the panels
        for this, nxt in zip(description, description[1:]):
            if this.strip() and nxt.strip() and not nxt.lstrip().startswith(("- ", "* ")):
                room = 79 - len(this.rstrip()) - 1  # a margin of one column each side
                assert room < len(nxt.split()[0]), (path, this, nxt)


@pytest.mark.parametrize("path, usage", [(("run",), "[OPTIONS] TASK"), (("sweep",), "[OPTIONS] [NAME]"),
                                         (("store", "merge"), "[OPTIONS] OUTPUT SOURCES...")])
def test_usage_lines_name_arguments_as_click_does(path, usage):
    """typer >= 0.2x writes a required argument as {task} in the usage line, which reads as
    literal braces; atnbench writes click's TASK (optional: [NAME], several: NAME...)."""
    text = output_at((*path, "--help"), 100)
    line = next(line for line in text.splitlines() if "Usage:" in line)
    assert line.split("Usage:")[1].split(maxsplit=1)[1].strip() == f"{' '.join(path)} {usage}"  # after the program


def test_notes_wrap_between_words_at_80_columns_and_stay_one_line_piped(tmp_path, monkeypatch):
    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "no-data"))
    args = ("reproduce", "--dry-run", "--only", "table1-copying,table4-ptb-char", "--store", tmp_path / "s.db")
    narrow = output_at(args, 80)
    notes = narrow[narrow.index("note: "):].split("atnbench reproduce")[0].splitlines()
    assert len(notes) > 1 and all(len(line) <= 80 or "/" in line for line in notes), notes
    piped = [line for line in output_at(args, None).splitlines() if line.startswith("note: ")]
    assert piped and " ".join(" ".join(notes).split()) == piped[0]


def test_runs_list_tells_apart_runs_that_differ_only_in_bias_placement(tmp_path):
    path = tmp_path / "b.db"
    with ResultsStore(path) as results:
        for bias in (True, False):
            config = resolve_run("copying", {"norm": "ln", "T": 100, "bias_inside": bias})
            results.start_run(run_id_of(config), config.to_dict(), {"device": "cpu", "threads": 1, "torch": "x"})
            results.finish_run(run_id_of(config), "done", {"min_val_loss": 0.1, "wall_s": 3.0})
    text = output_at(("runs", "list", "--store", path), 80)
    rows = [line for line in text.splitlines() if " ln " in line]
    assert len(rows) == 2 and "bias inside" in rows[0] + rows[1] and "bias outside" in rows[0] + rows[1]
    assert all(re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", row) for row in rows)  # date and time on the row


def test_runs_list_reads_a_setting_a_run_predates_as_its_neutral_value(tmp_path):
    """A run stored before `patience` existed ran at its neutral value: it read `patience=None`
    beside the same experiment's `patience=0`, as if another setting; the pair differs only in code."""
    path = tmp_path / "p.db"
    config = resolve_run("copying", {"norm": "ln", "T": 100}).to_dict()
    older = {key: value for key, value in config.items() if key != "patience"}
    with ResultsStore(path) as results:
        for run_id, stored, code in (("0a1d", older, "old"), ("0e1d", config, "new"), ("0f1d", {**config, "patience": 3}, "new")):
            results.start_run(run_id, stored, {"device": "cpu", "threads": 1, "torch": "x", "code": code})
            results.finish_run(run_id, "done", {"min_val_loss": 0.1, "wall_s": 3.0})
    rows = [line for line in output_at(("runs", "list", "--store", path), 120).splitlines() if " ln " in line]
    assert len(rows) == 3 and "None" not in "".join(rows), rows
    assert sum("patience=0 " in row for row in rows) == 2 and sum("patience=3 " in row for row in rows) == 1, rows


def test_tasks_columns_do_not_run_together_at_80_columns():
    text = output_at(("tasks",), 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in text
    # the left column's lines end before the column beside starts (the old name over its meaning)
    assert any(line.startswith("old name released-code ") for line in lines)
    assert not any("= the defaults" in line and not line.lstrip().startswith("= the defaults") for line in lines)


def test_the_command_tasks_new_suggests_is_one_line_at_80_columns(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.chdir(tmp_path)
    np.savez(tmp_path / "d.npz", x=np.random.default_rng(0).normal(size=(20, 5, 2)), y=np.arange(20) % 2)
    folder = tmp_path / "a-folder-that-is-not-there-yet" / "with-a-long-name-inside"
    text = output_at(("tasks", "new", "my-rather-long-task-name", "--from", tmp_path / "d.npz", "--dir", folder), 80)
    command = f"atnbench tasks check my-rather-long-task-name --include {folder}"
    assert any(line.strip() == command for line in text.splitlines()), text  # whole, to copy
    assert (folder / "my-rather-long-task-name.yaml").is_file()  # --dir made as the README's tour expects


def test_invariances_piped_marks_a_disagreement_without_colour():
    from atnbench.analysis.invariances import TRANSFORMATIONS, Record
    from atnbench.cli.analysis import invariance_table

    records = [Record("lstm", "ln", t, invariant=i == 0, paper=True, max_deviation=0.5, clear=True)
               for i, t in enumerate(TRANSFORMATIONS)]
    text = _printed(invariance_table("lstm", records), 80)
    assert "\x1b[" not in text
    assert "Yes/Yes" in text and "!Yes/Yes" not in text  # agrees: no mark
    assert text.count("!No/Yes") == len(TRANSFORMATIONS) - 1  # each disagreement marked in the text itself

"""The command line as one tool: one vocabulary of flags, real metavariables, one-line mistakes,
--version, python -m atnbench, completion, and the defects of issue 16 outside run/sweep/report."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from atnbench.run.progress import PlainReporter, loss_text, run_label, steps_for
from atnbench.report.render import mean_pm_std
from atnbench.run.runspec import resolve_run
from atnbench.registry import canonical_norm, models
from helpers import invoke

MODELS = models()


@pytest.mark.parametrize("command", ["bench", "stats", "invariances", "gradcheck", "plot", "run", "sweep", "report"])
def test_help_shows_real_metavariables_not_bool(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output and "<int>" not in result.output and "<str>" not in result.output
    assert "INTEGER" in result.output or "TEXT" in result.output or "PATH" in result.output


def test_shared_options_read_alike_in_every_command():
    for command in ("bench", "stats"):
        text = invoke(command, "--help").output
        assert "[auto|cpu|cuda|mps]" in text and "--threads" in text
    assert "--out-dir" in invoke("plot", "--help").output and "--out-dir" in invoke("stats", "--help").output
    assert "[table|json|csv]" in invoke("bench", "--help").output
    assert "[table|json]" in invoke("invariances", "--help").output


def test_bad_format_and_unknown_option_are_one_line_exit_2():
    for args, message in ((("invariances", "--format", "yaml"), "unknown --format 'yaml'"),
                          (("gradcheck", "--bogus"), "No such option: --bogus"),
                          (("gradcheck", "--T", "x"), "--T")):
        result = invoke(*args)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and message in lines[0], result.output


def test_a_format_is_read_in_any_case_by_every_command(tmp_path):
    """`-f JSON` worked in `runs export` only; `runs show`, `evaluate`, `bench` refused it."""
    from atnbench.cli.options import check_format

    assert check_format("JSON", ("table", "json")) == "json" and check_format(None, ("table", "json")) == "table"
    fill = invoke("run", "adding", "--T", "8", "--hidden", "8", "--iters", "2", "--store", tmp_path / "s.db", "-q",
                  "-f", "JSON")
    assert fill.exit_code == 0 and fill.stdout.startswith('{"run_id"'), fill.output
    shown = invoke("runs", "show", fill.stdout[12:18], "--store", tmp_path / "s.db", "-f", "Json")
    assert shown.exit_code == 0 and shown.stdout.lstrip().startswith(("{", "[")), shown.output
    reported = invoke("report", "--store", tmp_path / "s.db", "-f", "Markdown")  # report's was case-sensitive
    assert reported.exit_code == 0 and reported.stdout.lstrip().startswith("#"), reported.output


def test_deprecated_spelling_still_works_with_a_note(tmp_path):
    result = invoke("invariances", "--json")
    assert result.exit_code == 0 and result.stdout.lstrip().startswith("[")
    assert "--json is deprecated; use --format json" in result.stderr
    both = invoke("invariances", "--json", "--format", "json")
    assert both.exit_code == 2 and "give only --format json" in both.output


def test_version_completion_and_python_dash_m():
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.startswith("atnbench ")
    assert "--install-completion" in invoke("--help").output
    module = subprocess.run([sys.executable, "-m", "atnbench", "--version"], capture_output=True, text=True)
    assert module.returncode == 0 and module.stdout == result.stdout


# what a command line that only answers (help, version, completion, a refused flag) may import:
# torch alone takes seconds to import, and shell completion runs the program on every TAB
STARTS_WITHOUT_TORCH = """
import os, sys
from typer.testing import CliRunner
from atnbench.cli import app
runner = CliRunner()
for args in (["--help"], ["--version"], ["sweep", "--help"], ["report", "--help"], ["run", "adding", "--lr", "nan"],
             ["runs", "list", "--status", "nonsense"]):
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 2) and "Traceback" not in result.output, (args, result.output)
import tempfile
folder = tempfile.mkdtemp()
for args, said in ((["report", "--store", folder], "is a folder"),
                   (["sweep", "k-ablation", "--store", folder], "is a folder"),
                   (["run", "adding", "--store", folder], "is a folder"),
                   (["reproduce", "--store", folder], "is a folder")):
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and said in result.output, (args, result.output)
os.environ.update(_ATNBENCH_COMPLETE="complete_bash", COMP_WORDS="atnbench ru", COMP_CWORD="1")
completion = runner.invoke(app, [], prog_name="atnbench", env=dict(os.environ))
assert "run" in completion.output.split(), completion.output
print(sorted(name for name in ("torch", "numpy", "scipy", "matplotlib") if name in sys.modules))
"""


def test_help_version_completion_and_refusals_start_without_torch():
    result = subprocess.run([sys.executable, "-c", STARTS_WITHOUT_TORCH], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"



READS_NAMES_WITHOUT_TORCH = """
import json, sys
from typer.testing import CliRunner
from atnbench.cli import app
store, run_id = sys.argv[1:]
runner = CliRunner()
for args in (["run", "--help"], ["models"], ["runs", "list", "--store", store], ["runs", "show", run_id, "--store", store]):
    result = runner.invoke(app, args, terminal_width=200)
    assert result.exit_code == 0, (args, result.output)
print(json.dumps(["torch" in sys.modules, result.output]))
"""


def test_commands_that_read_names_start_without_torch(tmp_path):
    """The registry names each normalization's modules without importing them (``NormModule``):
    listing and showing runs, the model table and run's help (its --norm list) never wait the
    seconds torch takes to import."""
    store = tmp_path / "r.db"
    imported = invoke("store", "import", str(Path(__file__).parent.parent / "results" / "runs.jsonl"), "--store", store)
    assert imported.exit_code == 0, imported.output
    runs = [json.loads(line) for line in (Path(__file__).parent.parent / "results" / "runs.jsonl").read_text().splitlines()]
    atn = next(run for run in runs if run["norm"] == "atn")
    done = subprocess.run([sys.executable, "-c", READS_NAMES_WITHOUT_TORCH, str(store), atn["run_id"]],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    torch_loaded, shown = json.loads(done.stdout)
    assert not torch_loaded
    assert atn["run_id"] in shown and f"k={atn['k']}" in " ".join(shown.split())  # the run read, its window named

# -- --norm gru, models, the run summary ---------------------------------------------------------

def test_norm_gru_is_refused_naming_cell_gru(tmp_path):
    with pytest.raises(ValueError, match="--cell gru"):
        canonical_norm("gru")
    result = invoke("run", "adding", "--norm", "gru", "--store", tmp_path / "r.db")
    assert result.exit_code == 2 and "--cell gru" in result.output and not (tmp_path / "r.db").exists()
    assert canonical_norm("lstm") == "none"


def test_every_cell_the_zoo_builds_is_named_by_the_registry():
    """The registry names models without importing the cells; the zoo holds the cells' modules:
    the two lists of cells are the same, in the same order."""
    from atnbench.registry import CELL_REFERENCES
    from atnbench.zoo import CELLS

    assert list(CELLS) == list(CELL_REFERENCES)
    assert {entry.cell for entry in MODELS.values()} == set(CELLS)


def test_models_cite_the_gru_paper_and_give_working_flags():
    assert MODELS["gru"].reference.startswith("Cho et al.") and MODELS["lstm"].reference.startswith("Hochreiter")
    for name in ("gru-bn", "gru-bln"):
        assert "W_h h and c" not in MODELS[name].description and "no cell state" in MODELS[name].description
    assert "W_h h and c" in MODELS["bn"].description
    text = invoke("models").stdout
    assert "--cell gru --norm ln" in text and "Cho et al." in text
    for entry in MODELS.values():  # every flag the table shows is accepted
        assert canonical_norm(entry.norm) == entry.norm


@pytest.mark.parametrize("norm, shows_k", [("ln", False), ("none", False), ("atn", True)])
def test_run_summary_shows_k_only_for_windowed_norms(norm, shows_k):
    from atnbench.run.command import summary_table

    config = resolve_run("adding", {"norm": norm, "k": 7, "T": 30})
    record = {"run_id": "abc", "status": "done", "model": norm, "steps": 1, "wall_s": 1.0, "params": 10}
    console = Console(file=io.StringIO(), width=200)
    console.print(summary_table(config, record))
    assert ("k=7" in console.file.getvalue()) is shows_k


def test_one_seed_prints_the_mean_alone():
    assert mean_pm_std(18.946, None, 1.0, n=1) == "18.946"
    assert mean_pm_std(18.946, None, 1.0, pm=r"\pm", n=1) == "18.946"
    assert mean_pm_std(1.5, 0.25, 1.0, n=2) == "1.500 ± 0.250"


def test_report_unknown_task_says_so(tmp_path):
    result = invoke("report", "--task", "nope", "--store", tmp_path / "r.db")
    assert result.exit_code == 2 and "unknown task 'nope'" in result.output


# -- progress ------------------------------------------------------------------------------------

def test_run_label_has_task_T_norm_seed_and_k_only_when_windowed():
    assert run_label(resolve_run("adding", {"norm": "atn", "k": 5, "T": 30, "seed": 3})) == "adding T=30 atn k=5 seed=3"
    assert run_label(resolve_run("adding", {"norm": "ln", "T": 30})) == "adding T=30 ln seed=0"
    assert run_label(resolve_run("adding", {"cell": "gru", "norm": "ln", "T": 30})) == "adding T=30 gru-ln seed=0"
    assert run_label(resolve_run("adding", {"norm": "none", "T": 30})) == "adding T=30 lstm seed=0"  # the zoo's name
    # a sweep's varied settings, where the run has a use for them
    outside = resolve_run("adding", {"norm": "ln", "T": 30, "bias_inside": False})
    assert run_label(outside, ("bias_inside",)) == "adding T=30 ln bias_inside=False seed=0"
    assert run_label(resolve_run("adding", {"norm": "none", "T": 30}), ("bias_inside", "eps")) == "adding T=30 lstm seed=0"


def test_progress_shows_no_nan_before_the_first_value():
    assert "nan" not in loss_text(None, None) and loss_text(0.5, None) == "loss 0.5"
    assert loss_text(0.5, 0.25) == "loss 0.5  val 0.25"
    stream = io.StringIO()
    reporter = PlainReporter(stream, "adding T=30 ln seed 0", every_s=0)
    reporter.start("abc", 4, 0)
    reporter.evaluated(2, 0.5, 0.25)
    reporter.finish("done")
    text = stream.getvalue()
    assert "nan" not in text and "step 2/4" in text and text.startswith("adding T=30 ln seed 0")


def test_steps_off_a_terminal_are_plain_lines():
    stream = io.StringIO()
    steps = steps_for("bench", 3, stream=stream)
    for text in ("adding: ln rep 1/1", "adding: atn rep 1/1", "adding: atn memory"):
        steps.advance(text)
    steps.note("adding: done")
    steps.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "bench [1/3] adding: ln rep 1/1" and lines[-2] == "bench [3/3] adding: atn memory"
    assert lines[-1] == "adding: done"
    quiet = io.StringIO()
    steps_for("bench", 3, quiet=True, stream=quiet).advance("x")
    assert quiet.getvalue() == ""


# -- sweep view: overall ETA, summary of finished runs -------------------------------------------

def test_sweep_eta_from_finished_runs_and_plain_lines_carry_it():
    from atnbench.sweep.view import SweepView, duration, eta_seconds

    assert eta_seconds(10.0, 0, 5) is None
    assert eta_seconds(60.0, 2, 3) == pytest.approx(90.0)
    assert duration(45) == "45s" and duration(725) == "12m05s" and duration(11220) == "3h07m"
    stream = io.StringIO()
    view = SweepView("t", total=3, skipped=1, labels={"a": "ln", "b": "atn"}, live=False, stream=stream)
    view.finished("a", {"status": "done", "min_val_loss": 0.5})
    view.finished("b", {"status": "done", "min_val_loss": 0.25})
    lines = stream.getvalue().splitlines()
    assert "eta " in lines[1] and "[2/3]" in lines[1]  # one of two left after the first finished run
    assert "eta" not in lines[2]  # nothing left


def test_sweep_results_table_lists_finished_runs_with_loss_and_time():
    from atnbench.sweep.view import results_table

    records = [{"run_id": "r1", "label": "ln seed 0", "status": "done", "min_val_loss": 0.5, "wall_s": 75.0},
               {"run_id": "r2", "label": "atn seed 0", "status": "diverged", "min_val_loss": 0.25, "wall_s": 5.0},
               {"run_id": "r3", "label": "bn seed 0", "status": "not-started"}]
    console = Console(file=io.StringIO(), width=80)
    console.print(results_table(records))
    text = console.file.getvalue()
    assert "(2 of 3)" in text and "1m15s" in text and "0.25" in text and "diverged" in text
    assert "r3" not in text


# -- figures -------------------------------------------------------------------------------------

def test_styles_tell_every_series_apart_and_keep_a_model_its_own():
    from atnbench.report.style import styles_for

    styles = styles_for([("lstm", "lstm"), ("ln", "ln"), ("atn (k=25)", "atn"), ("atn (k=45)", "atn"),
                         ("atn (k=65)", "atn")])
    assert len({s.color for s in styles.values()}) == 5
    assert len({s.marker for s in styles.values()}) == 5  # apart in grey too
    assert styles["atn (k=25)"] == styles_for([("atn", "atn")])["atn"]  # ATN looks alike across figures
    many = styles_for([(f"m{i}", "atn") for i in range(9)])
    assert len({(s.color, s.marker) for s in many.values()}) == 9
    # a k-ablation's reference lines carry no marker: lstm and the 7th reference (bln) were both solid blue
    references = styles_for([("atn", "atn"), ("atn (bias outside)", "atn"), ("lstm", "lstm"), ("ln", "ln"),
                             ("ln (bias outside)", "ln"), ("bn", "bn"), ("bn-input", "bn-input"), ("bln", "bln")])
    assert len({s.color for s in references.values()}) == 8
    sixteen = styles_for([(f"m{i}", "lstm") for i in range(16)])
    assert len({s.color for s in sixteen.values()}) == 16
    assert len({(s.color, s.linestyle) for s in styles_for([(f"m{i}", "lstm") for i in range(112)]).values()}) == 112


def test_a_figures_footer_is_wrapped_to_the_figure():
    """One line of a dozen models' seed counts ran off both edges: its budget and last seeds cut."""
    from atnbench.report.plots import _figure, _footer

    fig = _figure(11, 4.6)
    text = "budget 100%, own protocol, 20 steps · seeds per model: " + ", ".join(f"model{i} (eps=0.001) 1"
                                                                                for i in range(12))
    _footer(fig, text)
    fig.canvas.draw()
    label = fig._supxlabel
    assert label.get_text().replace("\n", " ") == text and label.get_text().count("\n") >= 1
    box = label.get_window_extent()
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width  # inside the figure


def test_log_axis_labels_more_than_one_tick_over_a_decade():
    from matplotlib.figure import Figure

    from atnbench.report.style import log_axis

    fig = Figure()
    ax = fig.subplots()
    ax.plot([0, 1], [0.02, 0.35])
    log_axis(ax)
    fig.canvas.draw() if hasattr(fig.canvas, "draw") else None
    low, high = ax.get_ylim()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text() and low <= t.get_position()[1] <= high]
    assert len(labels) >= 4 and "0.1" in labels and "0.2" in labels  # 0.02, 0.05, 0.1, 0.2


BENCH_RECORDS = [
    {"workload": "adding", "model": model, "k": k, "T": 100, "batch": 50, "hidden": 60, "input_size": 2,
     "train_ms": ms, "train_ms_p25": ms * 0.9, "train_ms_p75": ms * 1.1, "infer_ms": ms / 3,
     "ratio_lstm_fused": ms / 10, "reps": 3, "torch": "2", "device": "cpu", "threads": 1, "cpu": "x"}
    for model, k, ms in (("lstm-fused", None, 10.0), ("ln", None, 30.0), ("atn", 5, 40.0), ("atn", 45, 42.0))]


@pytest.mark.parametrize("field, value, said", [
    ("train_ms", "abc", 'record 2: train_ms input should be a valid number, got "abc"'),
    ("train_ms", None, "record 2: train_ms input should be a valid number, got null"),
    ("infer_ms", float("nan"), "record 2: infer_ms input should be a finite number, got NaN"),
    ("infer_ms", float("inf"), "record 2: infer_ms input should be a finite number, got Infinity"),
    ("train_ms_p25", -1.0, "record 2: train_ms_p25 input should be greater than or equal to 0, got -1.0"),
    ("T", True, "record 2: T input should be a valid integer, got true"),
    ("workload", 5, "record 2: workload input should be a valid string, got 5"),
    ("workload", "a/b", "record 2: workload should be a name of letters, digits, '_', '.' and '-' (at most 64)"),
    ("workload", "", "record 2: workload should be a name of letters"),
    ("train_ms_p75", 5.0, "record 2: train_ms 30.0 is not between its quartiles 27.0 and 5.0"),  # was "a bug"
    ("T", 200, "records of more than one bench: workload adding at B=50, H=60, T=100 and (record 2) B=50, H=60, T=200"),
])
def test_plot_bench_refuses_a_record_of_the_wrong_type_as_input(tmp_path, field, value, said):
    """A field that is there but not what bench writes is the input's fault (exit 2, one line),
    not "a bug in atnbench" from matplotlib, nor a file name made of it."""
    import json

    records = tmp_path / "bench.json"
    records.write_text(json.dumps([BENCH_RECORDS[0], {**BENCH_RECORDS[1], field: value}]))
    refused = invoke("plot", "--bench", records, "--out-dir", tmp_path / "figs")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.output
    assert said in refused.stderr and "bug in atnbench" not in refused.stderr
    assert not (tmp_path / "figs").exists()


def test_the_cost_figures_ratios_are_those_of_its_bars():
    """A hand-edited ratio_lstm_fused (99) was drawn beside bars that say 3x: the ratio is the bars'."""
    from atnbench.report.plots import draw_cost

    edited = [dict(r) for r in BENCH_RECORDS]
    edited[1]["ratio_lstm_fused"] = 99.0
    texts = [t.get_text() for t in draw_cost(edited).axes[0].texts]
    assert texts == ["1.0×", "3.0×", "4.0×", "4.2×"], texts
    classed = [{**r, "cpu_capability": "AVX512"} for r in BENCH_RECORDS]  # the footer names the class too
    assert "CPU x (AVX512)" in " ".join(draw_cost(classed)._supxlabel.get_text().split())


def test_plot_bench_draws_the_cost_figure_from_bench_records(tmp_path, monkeypatch):
    import json

    records = tmp_path / "bench.json"
    records.write_text(json.dumps(BENCH_RECORDS))
    # a store named and not there was passed over without a word (the loss curves lost, exit 0)
    named = invoke("plot", "--bench", records, "--store", tmp_path / "none.db", "--out-dir", tmp_path / "figs")
    assert named.exit_code == 2 and "no results store at" in named.stderr and not (tmp_path / "figs").exists()
    monkeypatch.chdir(tmp_path)  # no store named, none at the default path: the cost figure alone
    result = invoke("plot", "--bench", records, "--out-dir", tmp_path / "figs")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == ["cost_adding.png", "cost_adding.svg"]
    assert (tmp_path / "figs" / "cost_adding.png").read_bytes()[:4] == b"\x89PNG"
    # with a store at the default path too: "alone, only that figure" (it drew the store's figures);
    # a filter draws both
    from helpers import fill_store

    fill_store(tmp_path / "atnbench-results" / "atnbench.db", [("adding", 100, "ln", None, 0, "done", 0.5, None)])
    alone = invoke("plot", "--bench", records, "--out-dir", tmp_path / "figs5")
    assert alone.exit_code == 0 and sorted(p.name for p in (tmp_path / "figs5").iterdir()) == \
        ["cost_adding.png", "cost_adding.svg"], alone.output
    both = invoke("plot", "--bench", records, "--task", "adding", "--out-dir", tmp_path / "figs6")
    assert both.exit_code == 0 and len(list((tmp_path / "figs6").iterdir())) > 2, both.output
    records.write_text('{"not": "records"}')
    bad = invoke("plot", "--bench", records, "--out-dir", tmp_path / "figs2")
    assert bad.exit_code == 2 and "atnbench bench --output" in bad.output
    records.write_text(json.dumps([{k: v for k, v in BENCH_RECORDS[0].items() if k != "train_ms_p75"}]))
    bad = invoke("plot", "--bench", records, "--out-dir", tmp_path / "figs3")
    assert bad.exit_code == 2 and "record 1 has no 'train_ms_p75'" in bad.output and "Traceback" not in bad.output
    assert not (tmp_path / "figs2").exists() and not (tmp_path / "figs3").exists()
    records.write_text(json.dumps(BENCH_RECORDS))
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database" * 10)
    bad = invoke("plot", "--bench", records, "--store", garbage, "--out-dir", tmp_path / "figs4")
    assert bad.exit_code != 0 and "Traceback" not in bad.output
    assert not (tmp_path / "figs4").exists() or not any((tmp_path / "figs4").iterdir())  # nothing half-written


def test_fig6_term_figure_is_titled_labelled_with_a_legend_beside_the_panels():
    from atnbench.analysis.figures import term_figure
    from atnbench.analysis.stats import Series

    series = [Series(model, 0, "hidden", [0.1 * t for t in range(20)], [1.0 + 0.01 * t for t in range(20)])
              for model in ("LN", "ATN(k=5)", "ATN(k=25)")]
    fig = term_figure(series, "hidden")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["LN", "ATN(k=5)", "ATN(k=25)"]
    assert not any(legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)
    assert fig._suptitle.get_text().startswith("(a) post-normalization statistics")
    lines = fig.axes[0].get_lines()
    assert len({(line.get_color(), line.get_linestyle(), line.get_marker()) for line in lines}) == 3
    assert [ax.get_ylabel() for ax in fig.axes] == ["mean over features", "variance over features"]
    # t from 0, as stats-series.csv and the table's footnote ("step 0 is W_h h_0 + b") count it
    assert list(lines[0].get_xdata())[:2] == [0, 1] and fig.axes[1].get_xlabel() == "time step t (from 0)"


def test_fig6_figures_of_a_term_this_call_has_not_are_removed(tmp_path):
    """`stats --out-dir` reused for a GRU left the LSTM call's cell-state figure beside the new ones."""
    from atnbench.analysis.figures import write_term_figures
    from atnbench.analysis.stats import Series

    def series(terms):
        return [Series("LN", 0, term, [0.0] * 4, [1.0] * 4) for term in terms]

    write_term_figures(series(("hidden", "cell")), tmp_path)
    assert {"fig6c-cell.png", "fig6c-cell.svg"} <= {path.name for path in tmp_path.iterdir()}
    (tmp_path / "notes.txt").write_text("mine")
    written = write_term_figures(series(("hidden",)), tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([path.name for path in written] + ["notes.txt"])


def test_stats_names_a_gru_and_styles_it_as_its_model():
    """`stats --from-run` of a GRU ATN run read "ATN(k=3)", as an LSTM's did."""
    from atnbench.analysis.figures import _model_key
    from atnbench.analysis.stats import model_label

    assert [model_label("atn", 3), model_label("atn", 3, "gru"), model_label("ln", 1, "gru")] == \
        ["ATN(k=3)", "GRU ATN(k=3)", "GRU LN"]
    assert [_model_key(label) for label in ("LN", "ATN(k=5) [1f627c87ad1b]", "GRU ATN(k=3) [98f32dff9e41]", "GRU LN")] \
        == ["ln", "atn", "gru-atn", "gru-ln"]


@pytest.mark.parametrize("args", [["models"], ["--help"], ["sweep", "--help"]], ids=" ".join)
def test_a_reader_that_goes_away_ends_the_command_as_sigpipe_does_without_a_word(args):
    """`atnbench models | head -c 1`: the reader closes the pipe; the command ends with 141 (128 +
    SIGPIPE, as `cat` does), not 1 (a failed run) and not an error line. The help too, which rich
    and click end with 1 where its reader goes away."""
    import os

    read, write = os.pipe()
    os.close(read)  # no reader at all: the first write finds the pipe closed
    with os.fdopen(write, "wb") as closed:
        done = subprocess.run([sys.executable, "-c", "from atnbench.cli import app; app(prog_name='atnbench')",
                               *args], stdout=closed, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 141 and done.stderr == "", done.stderr


def test_closed_standard_streams_are_one_line_not_a_bug(tmp_path):
    """`>&-` (stdout closed: Python makes it None) ended every command as "a bug in atnbench" with
    an AttributeError; `store import - <&-` as well. One line each, nothing made."""
    import os

    command = [sys.executable, "-c", "from atnbench.cli import app; app(prog_name='atnbench')"]
    out = subprocess.run([*command, "models"], preexec_fn=lambda: os.close(1), stderr=subprocess.PIPE, text=True,
                         timeout=120)
    assert out.returncode == 1 and out.stderr == "error: standard output is closed; send it somewhere, such as " \
                                                 ">/dev/null\n", out.stderr
    store = tmp_path / "u.db"
    inp = subprocess.run([*command, "store", "import", "-", "--store", str(store)], preexec_fn=lambda: os.close(0),
                         capture_output=True, text=True, timeout=120)
    assert inp.returncode == 2 and inp.stderr.startswith("error: - reads standard input, which is closed"), inp.stderr
    assert not store.exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("args", [["--help"], ["--version"]], ids=" ".join)
def test_help_to_a_full_disk_is_one_line_not_a_bug(args):
    """Help or version written where no space is left: the OS's words in one line and exit 1, as a
    command's output meeting a full disk; not "a bug in atnbench" with a traceback file."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-c", "from atnbench.cli import app; app(prog_name='atnbench')",
                               *args], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 1 and done.stderr == "error: No space left on device\n", done.stderr

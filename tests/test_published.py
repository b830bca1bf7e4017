"""The published evidence (`results/`) is rebuilt from its own runs: importing
`results/runs.jsonl` into an empty store and writing the report gives the committed tables and
verdicts, so nothing there was edited by hand or left behind by a change to the reports or the
code (a code change marks runs stale, and the committed file must say so:
`scripts/publish_results.sh` rewrites it)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from helpers import invoke


RESULTS = Path(__file__).resolve().parent.parent / "results"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """`results/` imported into an empty store once for the module (~1.5 s an import)."""
    store = tmp_path_factory.mktemp("published") / "fresh.db"
    result = invoke("store", "import", str(RESULTS / "runs.jsonl"), "--store", str(store),
                    "--studies", str(RESULTS / "studies.json"))
    assert result.exit_code == 0, result.output
    return store


@pytest.fixture
def fresh(imported, tmp_path):
    """A copy of the imported store of this test's own: nothing one test does reaches another."""
    copy = tmp_path / "fresh.db"
    with closing(sqlite3.connect(imported)) as source, closing(sqlite3.connect(copy)) as target:
        source.backup(target)
    return copy


def test_the_committed_verdicts_are_rebuilt_from_the_committed_runs(fresh, tmp_path):
    store = fresh
    rebuilt = tmp_path / "verdicts.md"
    report = invoke("report", "--store", str(store), "--paper", "--verdicts", "--format", "markdown",
                                 "--output", str(rebuilt))
    assert report.exit_code == 0, report.output
    assert rebuilt.read_text() == (RESULTS / "verdicts.md").read_text()


def test_the_published_runs_are_finished_and_carry_their_curves():
    records = [json.loads(line) for line in (RESULTS / "runs.jsonl").read_text().splitlines()]
    assert records and len({r["run_id"] for r in records}) == len(records)
    assert all(r["status"] in ("done", "diverged") and r["curve"] for r in records)


def test_every_generated_block_in_the_prose_is_what_the_runs_give(fresh):
    from atnbench.report.prose import BLOCK, _groups, fill

    store = fresh
    groups = _groups(store)
    for path in (RESULTS / "README.md", RESULTS.parent / "README.md"):
        text = path.read_text()
        assert BLOCK.search(text), f"{path.name} quotes no generated block"
        assert fill(text, groups, store) == text, f"{path.name}: a generated block differs from the runs; run scripts/publish_results.sh"


def test_a_hand_edited_number_in_a_block_is_caught(fresh):
    from atnbench.report.prose import _groups, fill

    store = fresh
    text = "<!-- generated:verdicts -->\n| made up | 0.001 |\n<!-- /generated -->\n"
    assert fill(text, _groups(store)) != text


def test_the_verdicts_block_of_a_claim_without_comparisons_says_no_seeds_instead_of_failing(monkeypatch):
    """A claim whose group holds none of its rows measured by current code (every run stale after
    a code change no canary vouched for yet) has no comparison: the block written by
    scripts/publish_results.sh says "-" where it failed with an IndexError."""
    from types import SimpleNamespace

    from atnbench.report import verdicts
    from atnbench.report.prose import render_verdicts

    group = SimpleNamespace(variant=None, reduced=False, budget=1.0, runs={})
    result = SimpleNamespace(group=group, claim=SimpleNamespace(text="ATN < LN on copying"), comparisons=[],
                             design="exploratory", seeds="", verdict="not run")
    monkeypatch.setattr(verdicts, "evaluate", lambda family, groups, studies: ([result], []))
    monkeypatch.setattr("atnbench.report.paper.protocol_label", lambda group: ("full protocol", []))
    row = render_verdicts([group]).splitlines()[-1]
    assert row == "| ATN < LN on copying | full protocol, exploratory | - | not run |  |", row

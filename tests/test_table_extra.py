"""Parquet and Arrow tables come with an extra (#38, point 8): ``atnbench[tables]`` brings
pyarrow (the ``test`` extra too), the README names it, and without it a run stops with one
``error:`` line naming the ``pip install`` to run."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from helpers import invoke

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_user_folders(monkeypatch):
    monkeypatch.setenv("ATNBENCH_TASKS", "")
    monkeypatch.delenv("ATNBENCH_DEBUG", raising=False)


def test_the_tables_extra_brings_pyarrow_and_the_readme_says_so():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("pyarrow") for req in extras["tables"])
    assert any(req.startswith("pyarrow") for req in extras["test"])
    assert "'.[tables]'" in (REPO / "README.md").read_text()
    assert "atnbench[tables]" in (REPO / "docs" / "adding-a-task.md").read_text()


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_a_table_without_pyarrow_is_one_line_naming_the_install(tmp_path, monkeypatch, suffix):
    import pandas as pd

    folder = tmp_path / "tasks"
    folder.mkdir()
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"y": np.arange(20) % 2, **{f"t{i}": rng.normal(0, 1, 20) for i in range(4)}})
    frame.to_parquet(folder / f"wide{suffix}") if suffix == ".parquet" else frame.to_feather(folder / f"wide{suffix}")
    (folder / "wide.yaml").write_text(f"problem: sequence-classification\ndata: {{train: wide{suffix}}}\n"
                                      "defaults: {hidden: 4, steps: 2, eval_every: 2}\n")
    for name in [name for name in sys.modules if name == "pyarrow" or name.startswith("pyarrow.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed: `import pyarrow` fails
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    for command in (["run", "wide", "--store", tmp_path / "s.db"], ["tasks", "check", "wide"]):
        result = invoke(*command, "--include", folder)
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert lines[0].startswith("error: ") and f"wide{suffix}" in lines[0], lines
        assert "needs pyarrow: pip install 'atnbench[tables]'" in lines[0], lines
    assert not (tmp_path / "s.db").exists()  # nothing written

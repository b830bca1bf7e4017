"""benchmarks/cuda_check.py's rules, without a GPU: the float32 tolerance and the speed targets."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import cuda_check  # noqa: E402


def test_float32_may_be_as_far_as_the_loops_own_float32_and_float64_is_tight():
    assert cuda_check.tolerance(torch.float64, 1e-3) == 1e-9
    assert cuda_check.tolerance(torch.float32, 1e-3) == 4e-3  # 4x the loop's own rounding
    assert cuda_check.tolerance(torch.float32, 1e-7) == 1e-4  # never tighter than 1e-4


def _bench(tmp_path, ln_ratio, atn_ms):
    rows = [{"workload": "adding", "model": "lstm-fused", "k": None, "train_ms": 2.0, "ratio_fused": 1.0},
            {"workload": "adding", "model": "ln", "k": None, "train_ms": 2.0 * ln_ratio, "ratio_fused": ln_ratio},
            {"workload": "adding", "model": "atn", "k": 45, "train_ms": atn_ms, "ratio_fused": atn_ms / 2.0},
            {"workload": "adding", "model": "bn", "k": None, "train_ms": 7.0, "ratio_fused": 3.5}]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(rows))
    return argparse.Namespace(bench=str(path))


def test_targets_met_and_missed(tmp_path, capsys):
    assert cuda_check.targets(_bench(tmp_path, 1.8, 3.9)) == 0  # ATN 1.95x cuDNN, 1.083x LN, BN 3.5x
    assert "MISSED" not in capsys.readouterr().out
    assert cuda_check.targets(_bench(tmp_path, 1.8, 4.2)) == 1  # ATN 2.1x cuDNN and 1.17x LN
    out = capsys.readouterr().out
    assert "atn k=45 x fused" in out and "atn k=45 x ln" in out and out.count("MISSED") == 2


def test_targets_of_older_records_a_csv_and_a_near_miss(tmp_path, capsys):
    """Records from before ratio_fused (2026-11-22) raised KeyError; a CSV raised JSONDecodeError;
    1.154 was printed "1.15 <= 1.15: MISSED". Computed, refused in a line, shown to three places."""
    args = _bench(tmp_path, 1.8, 2.0 * 1.8 * 1.154)
    rows = json.loads(Path(args.bench).read_text())
    Path(args.bench).write_text(json.dumps([{k: v for k, v in r.items() if k != "ratio_fused"} for r in rows]))
    assert cuda_check.targets(args) == 1
    out = capsys.readouterr().out
    assert "ln x fused                                 1.800 <= 2.0: met" in out
    assert "atn k=45 x ln                              1.154 <= 1.15: MISSED" in out
    table = tmp_path / "bench.csv"
    table.write_text("workload,model\nadding,ln\n")
    assert cuda_check.targets(argparse.Namespace(bench=str(table))) == 2
    assert "not the JSON records of `atnbench bench -o FILE.json`" in capsys.readouterr().err

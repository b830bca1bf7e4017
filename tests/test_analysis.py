"""The analysis commands: post-norm statistics (Sect. 5.2, Fig. 6), Table 6 measured, and
Proposition 1 against autograd (`atnbench stats`, `invariances`, `gradcheck`)."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from atnbench.analysis import gradcheck as gc
from atnbench.analysis import invariances as inv
from atnbench.analysis import stats as st
from atnbench.config import build_config
from helpers import invoke
from atnbench.evidence.identity import run_id_of

CPU = torch.device("cpu")
PNG = b"\x89PNG\r\n\x1a\n"


def tiny(norm: str, k: int = 1, T: int = 12, eps: float | None = None):
    config = st.stats_config(norm, k, T, 3, seed=0, hidden=8, batch_size=6)
    if eps is not None:
        config = build_config(dict(config.to_dict(), eps=eps))
    return st.train_model(config, 3, CPU)


def by_term(series):
    return {s.term: s for s in series}


# -- stats ---------------------------------------------------------------------------------

def test_ln_probe_gives_mean_zero_and_unit_variance_at_every_step():
    """LN without gain/bias: per example and step mean 0 and variance v / (v + eps) <= 1; with
    eps = 1e-10 that is 1 to ~1e-7. Step 0 of W_h h is the bias alone (h_0 = 0), left out."""
    T = 12
    for eps, tol in ((1e-10, 1e-4), (1e-5, 5e-2)):
        series = by_term(st.record_iteration(tiny("ln", T=T, eps=eps)))
        assert set(series) == {"input", "hidden", "cell"}
        for term, s in series.items():
            assert s.T == T and len(s.var) == T
            start = 1 if term == "hidden" else 0
            for t in range(start, T):
                assert abs(s.mean[t]) < 1e-6, (term, t, s.mean[t])
                assert 1 - tol < s.var[t] <= 1 + 1e-6, (term, t, s.var[t])
        rows = st.summarize(series.values())
        assert all(r["mean_std"] < 1e-6 for r in rows)


def test_with_the_bias_outside_the_hidden_term_at_step_0_is_the_norm_of_zero():
    """--bias-outside (eq. 14's reading of Sect. 5.2): the recorded hidden term is N(W_h h) itself,
    so at step 0 (h_0 = 0) it is exactly 0 for every model; by default (bias inside) it is
    N(W_h h_0 + b_h), which the trained bias moves off 0."""
    outside = st.stats_config("atn", 3, 12, 3, seed=0, hidden=8, batch_size=6, bias_inside=False)
    assert outside.bias_inside is False and st.stats_config("atn", 3, 12, 3, seed=0).bias_inside is None
    hidden = by_term(st.record_iteration(st.train_model(outside, 3, CPU)))["hidden"]
    assert hidden.mean[0] == 0 and hidden.var[0] == 0
    inside = by_term(st.record_iteration(tiny("atn", 3)))["hidden"]
    assert inside.var[0] > 0.1


def test_stats_bias_placement_and_a_kept_model_are_one_or_the_other(tmp_path):
    result = invoke("stats", "--from-run", "abc123", "--bias-outside", "--out-dir", tmp_path)
    assert result.exit_code == 2 and "keeps its own placement" in result.stderr, result.output


def test_atn_probe_varies_over_time_and_has_the_right_shapes():
    T = 12
    ln = by_term(st.record_iteration(tiny("ln", T=T)))
    atn_models = {k: st.record_iteration(tiny("atn", k, T=T)) for k in (2, 5)}
    for k, series in atn_models.items():
        assert sorted((s.term, s.T, s.layer, s.model) for s in series) == sorted(
            (term, T, 0, f"ATN(k={k})") for term in ("input", "hidden", "cell"))
        rows = {r["term"]: r for r in st.summarize(series)}
        for term in ("input", "hidden", "cell"):
            # ATN: the post-norm statistics move over time; LN's are pinned
            assert rows[term]["mean_max"] - rows[term]["mean_min"] > 1e-3, (k, term)
            assert rows[term]["var_max"] - rows[term]["var_min"] > 1e-2, (k, term)
            assert max(abs(m) for m in by_term(series)[term].mean[1:]) > 100 * max(abs(m) for m in ln[term].mean[1:])


def test_atn_k1_is_ln_through_the_probes():
    a = by_term(st.record_iteration(tiny("atn", 1)))
    b = by_term(st.record_iteration(tiny("ln")))
    for term in a:
        assert a[term].mean == pytest.approx(b[term].mean, abs=1e-6)
        assert a[term].var == pytest.approx(b[term].var, abs=1e-5)


def test_recorder_detaches_its_probes():
    trained = tiny("atn", 3)
    st.record_iteration(trained)
    assert all(module.probe is None for _, module in trained.model.rnn.norm_modules())


def test_from_run_loads_the_kept_model_and_refuses_without_one(tmp_path):
    import io

    import torch

    from atnbench.run.runspec import resolve_run
    from atnbench.store import ResultsStore

    store_path = tmp_path / "r.db"
    config = resolve_run("adding", dict(T=10, norm="atn", k=3, affine=False, hidden=8, batch_size=4, steps=2,
                                        val_samples=4))
    trained = st.train_model(config, 2, CPU)
    with ResultsStore(store_path) as store:
        store.start_run(run_id_of(config), config.to_dict(), {})
        with pytest.raises(ValueError, match="is not finished .status running.: it has no best model yet"):
            st.load_run(store, run_id_of(config), CPU)
        weights = io.BytesIO()
        torch.save(trained.model.state_dict(), weights)
        store.save_model(run_id_of(config), "best", 2, weights.getvalue())
        with pytest.raises(ValueError, match="not finished .status running.: its best weights so far are not its result"):
            st.load_run(store, run_id_of(config), CPU)  # an interrupted run's best so far is not its result (QA)
        store.finish_run(run_id_of(config), "done", {})
        loaded = st.load_run(store, run_id_of(config), CPU)
        for name, value in trained.model.state_dict().items():
            assert torch.equal(loaded.model.state_dict()[name], value)
    out_dir = tmp_path / "out"
    result = invoke("stats", "--from-run", run_id_of(config), "--store", store_path, "--out-dir", out_dir)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out_dir / "stats-series.csv").open()))
    assert {r["run_id"] for r in rows} == {run_id_of(config)}
    assert len(rows) == 3 * 10
    bad = invoke("stats", "--from-run", "nosuchrun", "--store", store_path, "--out-dir", out_dir)
    assert bad.exit_code == 2 and "nosuchrun" in bad.output


def test_stats_cli_writes_figures_csv_and_table(tmp_path):
    out_dir = tmp_path / "stats"
    result = invoke("stats", "--k", "2,3", "--T", "10", "--iters", "1", "--hidden", "8", "--batch-size", "4",
                    "--out-dir", out_dir, "--quiet")
    assert result.exit_code == 0, result.output
    for stem in ("fig6a-hidden", "fig6b-input", "fig6c-cell"):
        assert (out_dir / f"{stem}.png").read_bytes()[:8] == PNG
        assert (out_dir / f"{stem}.svg").read_text().lstrip().startswith("<?xml")
        assert str(out_dir / f"{stem}.png") in result.stdout.replace("\n", "")
    rows = list(csv.DictReader((out_dir / "stats-series.csv").open()))
    assert len(rows) == 3 * 3 * 10  # models x terms x steps
    assert {r["model"] for r in rows} == {"LN", "ATN(k=2)", "ATN(k=3)"}
    assert all(float(r["variance"]) >= 0 for r in rows)
    summary = json.loads((out_dir / "stats-summary.json").read_text())
    assert len(summary) == 9
    assert "ATN(k=3)" in result.stdout and "std_t" in result.stdout


@pytest.mark.parametrize("args", [
    ("--k", "0"), ("--k", "a,b"), ("--k", ","), ("--T", "1"), ("--device", "tpu"), ("--hidden", "0"),
])
def test_stats_bad_input_is_one_line_exit_2(tmp_path, args):
    result = invoke("stats", "--iters", "0", *args, "--out-dir", tmp_path, "--quiet")
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_stats_negative_iters_is_one_line_exit_2(tmp_path):
    result = invoke("stats", "--iters", "-1", "--out-dir", tmp_path)
    assert result.exit_code == 2 and "--iters" in result.output


# -- invariances ---------------------------------------------------------------------------

PAPER_NORMS = ("bn", "ln", "atn-bn", "atn-ln")


@pytest.mark.parametrize("seed", (0, 1, 2))
def test_invariances_reproduce_every_cell_of_table6(seed):
    """All 28 BN/LN/ATN-BN/ATN-LN cells (and WN's 7 at the layer level) agree with the paper at
    both levels, each measured far from the threshold. No disagreement was measured; were
    there one, this test would name it rather than the code force agreement."""
    records = inv.measure_all(seed)
    for level in inv.LEVELS:
        checked = 0
        for norm in PAPER_NORMS + (("wn",) if level == "layer" else ()):
            for row in inv.PAPER_ROWS:
                [r] = [x for x in records if (x.level, x.norm, x.transformation) == (level, norm, row)]
                assert r.paper == inv.TABLE6[row][norm]
                assert r.clear, r
                assert r.invariant == r.paper, f"{level} {norm} {row}: measured {r.max_deviation:.3g}"
                checked += 1
        assert checked == 7 * (5 if level == "layer" else 4)


def test_invariances_extra_cells():
    """BLN has no column in Table 6 (paper: null); measured, it keeps only what BN and LN both
    keep (weight matrix and dataset re-scaling). The whole-batch reading of the last row makes
    per-step BN (and BLN) invariant, not ATN-BN."""
    cells = {(r.level, r.norm, r.transformation): r for r in inv.measure_all(0)}
    for level in inv.LEVELS:
        bln = {row: cells[(level, "bln", row)] for row in inv.PAPER_ROWS}
        assert all(r.paper is None for r in bln.values())
        assert {row for row, r in bln.items() if r.invariant} == {"weight matrix re-scaling", "dataset re-scaling"}
        whole = {norm: cells[(level, norm, inv.WHOLE_BATCH_ROW)].invariant for norm in inv.LSTM_NORMS}
        assert whole == {"bn": True, "ln": True, "atn-bn": False, "atn-ln": False, "bln": True}


def test_invariances_json_is_only_the_records():
    result = invoke("invariances", "--json", "--seed", "3")
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert isinstance(records, list) and len(records) == (6 + 5) * len(inv.TRANSFORMATIONS)
    for r in records:
        assert {"norm", "transformation", "invariant", "paper", "max_deviation"} <= set(r)
        assert isinstance(r["invariant"], bool) and r["paper"] in (True, False, None)
        assert r["norm"] in ("bn", "ln", "atn-ln", "atn-bn", "bln", "wn")
    assert {r["norm"] for r in records if r["paper"] is None and r["transformation"] in inv.PAPER_ROWS} == {"bln"}


def test_invariances_table_and_highlighting(monkeypatch):
    result = invoke("invariances")
    assert result.exit_code == 0, result.output
    assert "agrees with the paper" in result.stdout and "ATN-LN" in result.stdout
    # a paper claim flipped in memory: the command must call the cell out
    flipped = {row: dict(cells) for row, cells in inv.TABLE6.items()}
    flipped["dataset re-centering"]["ln"] = True
    monkeypatch.setattr(inv, "TABLE6", flipped)
    result = invoke("invariances")
    assert result.exit_code == 0
    assert "2 measured cell(s) disagree" in result.stdout  # layer and lstm level
    assert "ln: dataset re-centering: measured No, paper Yes" in result.stdout


# -- gradcheck -----------------------------------------------------------------------------

@pytest.mark.parametrize("k", (1, 2, 3, 7, 30))
def test_proposition1_matches_autograd(k):
    result = gc.check(k, T=16, n=5, eps=1e-5, seed=k)
    assert result.max_error < 1e-8
    assert result.outside_window_max == 0.0
    assert [e.m for e in result.per_m] == list(range(min(k, 16)))
    assert all(e.entries > 0 for e in result.per_m)
    assert max(e.typeset_max_error for e in result.per_m) < 1e-8  # the misplaced bracket is harmless


def test_closed_form_is_a_real_check():
    """Guard: the comparison can fail. The closed form of a different window (k = 3 against
    autograd's k = 4) must disagree once the windows differ (t >= 3), not before."""
    a = gc.random_sequence(8, 4, 0)
    gamma = torch.ones(4, dtype=torch.float64)
    J = gc.autograd_jacobian(a, 4, 1e-5, gamma, None)
    wrong = gc.closed_form(a, 3, 1e-5, gamma)
    same = [abs(float(wrong[t, 0, i] - J[t, i, t, i])) for t in range(3) for i in range(4)]
    differ = [abs(float(wrong[t, 0, i] - J[t, i, t, i])) for t in range(3, 8) for i in range(4)]
    assert max(same) < 1e-12 and max(differ) > 1e-3


def test_gradcheck_cli():
    result = invoke("gradcheck", "--k", "1,3", "--T", "8", "--n", "3")
    assert result.exit_code == 0, result.output
    assert "PASS" in result.stdout and "max error" in result.stdout
    lines = [line.split() for line in result.stdout.splitlines()]
    ms = [(int(p[0]), int(p[1])) for p in lines if len(p) == 5 and p[0].isdigit() and p[1].isdigit()]
    assert ms == [(1, 0), (3, 0), (3, 1), (3, 2)]
    assert all(float(p[3]) < 1e-8 for p in lines if len(p) == 5 and p[0].isdigit())


def test_gradcheck_names_a_nan_error_as_the_worst():
    """One feature and eps 0: the window's variance is 0 past its first step, the derivatives NaN.
    The summary line says nan (max() passed over it and printed the one finite error, 4e-16)."""
    result = invoke("gradcheck", "--k", "3", "--T", "4", "--n", "1", "--eps", "0")
    assert result.exit_code == 1, result.output
    assert "FAIL: max error nan" in result.stdout, result.stdout


@pytest.mark.parametrize("args", [("--k", "x"), ("--k", "0"), ("--T", "0"), ("--n", "0"), ("--eps", "-1")])
def test_gradcheck_bad_input_is_one_line_exit_2(args):
    result = invoke("gradcheck", *args)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output

"""``atnbench stats`` below its flags: LN and ATN(k) models trained briefly (or finished runs'
kept models), one training iteration recorded through probes on every normalization, and the
Fig. 6 figures, CSV and summary written. The command (``atnbench.cli.analysis``) parses the
flags into a :class:`StatsRequest` and calls :func:`stats_command`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
from rich.text import Text

from atnbench.errors import UserError
from atnbench.tables import FitTable, err, out


@dataclass(frozen=True)
class StatsRequest:
    """What ``atnbench stats`` was asked, its flags parsed."""

    windows: list
    T: int
    iters: int
    seed: int
    hidden: Optional[int]
    batch_size: Optional[int]
    out_dir: Path
    out_flag: str
    store: Path
    from_run: Optional[list]
    device: str
    threads: int
    quiet: bool
    bias_inside: Optional[bool] = None  # None: each norm's own placement (inside for LN and ATN)


def stats_command(request: StatsRequest) -> None:
    from atnbench.analysis import stats as st
    from atnbench.analysis.figures import write_term_figures
    from atnbench.run.outputs import check_output_dir
    from atnbench.zoo import resolve_device

    if request.iters < 0:
        raise UserError(f"--iters must be >= 0, got {request.iters}")
    torch_device = resolve_device(request.device)
    torch.set_num_threads(request.threads)
    check_output_dir(request.out_dir, request.out_flag)
    models = _models(request, torch_device)
    series = [s for m in models for s in st.record_iteration(m)]
    steps = {m.steps for m in models}
    suffix = f" (after {steps.pop()} steps)" if len(steps) == 1 else ""
    written = write_term_figures(series, request.out_dir, suffix)
    written.append(st.write_csv(series, request.out_dir / "stats-series.csv"))
    rows = st.summarize(series)
    (request.out_dir / "stats-summary.json").write_text(json.dumps(rows, indent=2) + "\n")
    written.append(request.out_dir / "stats-summary.json")
    out.print(stats_table(rows))
    for path in written:
        out.print(str(path), soft_wrap=True, highlight=False)


def _models(request: StatsRequest, torch_device) -> list:
    """The finished runs' kept models (--from-run), or LN and ATN(k) trained --iters steps, each
    checked to fit before any trains."""
    from atnbench.analysis import stats as st
    from atnbench.run.resources import check_fits
    from atnbench.run.runspec import config_estimate
    from atnbench.store import ResultsStore

    if request.from_run:
        with ResultsStore.open_read_only(request.store) as results:
            return [st.load_run(results, run_id, torch_device) for run_id in dict.fromkeys(request.from_run)]
    configs = [(norm, window, st.stats_config(norm, window, request.T, request.iters, request.seed, request.hidden,
                                              request.batch_size, bias_inside=request.bias_inside))
               for norm, window in [("ln", 1)] + [("atn", w) for w in request.windows]]
    for *_, config in configs:
        check_fits(config_estimate(config), str(torch_device))
    models = []
    for norm, window, config in configs:
        label = st.model_label(norm, window)
        if not request.quiet:
            err.print(f"training {label}: {request.iters} steps, adding T={config.T}, hidden {config.hidden}, "
                      f"batch {config.batch_size}, no gain/bias")
        models.append(st.train_model(config, request.iters, torch_device, label))
    return models


def _g(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}"


def stats_table(rows: list[dict]) -> FitTable:
    """The Fig. 6 summary (``analysis.stats.summarize``): a row per model and normalized term."""
    from atnbench.analysis.stats import TERMS

    table = FitTable(title="post-normalization statistics over time (one training iteration)", key_columns=2,
                     lift=False,
                     caption="mean and variance across features at each step (batch-averaged): their std, min "
                             "and max over the steps t; W_h h from step 1 (step 0 is W_h h_0 + b = b)")
    for column in ("model", "term", "mean\nstd_t", "mean\nmin", "mean\nmax", "var\nstd_t", "var\nmin", "var\nmax"):
        table.add_column(column, justify="left" if column in ("model", "term") else "right")
    layers = {r["layer"] for r in rows}
    for r in rows:
        term = TERMS[r["term"]] + ("" if len(layers) == 1 else f" (layer {r['layer']})")
        table.add_row(Text(r["model"]), term, *(_g(r[key], 2) for key in  # Text: a label is no markup
                                          ("mean_std", "mean_min", "mean_max", "var_std", "var_min", "var_max")))
    return table

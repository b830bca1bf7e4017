"""``atnbench bench``: time training and inference steps of the models on the paper's task shapes."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Annotated, Optional

import torch
import typer

from atnbench.cli import options
from atnbench.cli.app import app, out, user_errors
from atnbench.errors import UserError
from atnbench.machine import cpu_model
from atnbench.tables import FitTable

BASELINES = ("lstm-fused", "ln")


def _names(text: str, what: str) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise UserError(f"--{what} needs at least one value")
    return list(dict.fromkeys(items))


def entries_for(models: list[str], ks: list[int], reference: bool) -> list[tuple[str, Optional[int]]]:
    """(model, k) pairs to time: the baselines first, then the requested models, k-expanded."""
    from atnbench.bench.workloads import check_model, uses_k

    baselines = list(BASELINES) + (["gru-fused"] if any(m.startswith("gru") for m in models) else [])
    names = [m for m in baselines if m not in models] + models
    if reference and "atn-ref" not in names:
        names.append("atn-ref")
    entries = []
    for name in names:
        check_model(name)
        entries.extend([(name, k) for k in ks] if uses_k(name) else [(name, None)])
    return entries


def _f(value, digits=1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def results_table(workload: str, records: list[dict]) -> FitTable:
    r0 = records[0]
    table = FitTable(title=f"atnbench bench {workload}  (B={r0['batch']}, in={r0['input_size']}, "
                           f"H={r0['hidden']}, T={r0['T']}; median of {r0['reps']} reps)",
                     collapse_padding=True, key_columns=2, lift=False)
    gru = any(r.get("ratio_fused") is not None and r["ratio_fused"] != r["ratio_lstm_fused"] for r in records)
    columns = ("model", "k", "train ms", "±", "steps/s", "infer ms", "mem MB", "×nn.LSTM") + (("×fused",) if gru else ()) \
        + ("×LN",)
    for column in columns:  # headers wrap between their words ("train / ms"), values never
        table.add_column(column, justify="left" if column == "model" else "right")
    for r in records:
        half_iqr = (r["train_ms_p75"] - r["train_ms_p25"]) / 2
        fused = (_f(r.get("ratio_fused"), 2),) if gru else ()  # without a GRU it repeats ×nn.LSTM
        table.add_row(r["model"], "-" if r["k"] is None else str(r["k"]), _f(r["train_ms"]), _f(half_iqr),
                      _f(r["steps_per_s"], 2), _f(r["infer_ms"]), _f(r["peak_mem_mb"]),
                      _f(r["ratio_lstm_fused"], 2), *fused, _f(r["ratio_ln"], 2))
    return table


def model_line(workload: str, r: dict) -> str:
    """One model's result as a progress line: "adding: atn k=5  train 3.5 ms, infer 1.1 ms, 1.34× nn.LSTM"."""
    label = r["model"] + (f" k={r['k']}" if r.get("k") is not None else "")
    ratio = f", {r['ratio_lstm_fused']:.2f}× nn.LSTM" if r.get("ratio_lstm_fused") is not None else ""
    return f"{workload}: {label}  train {_f(r['train_ms'], 2)} ms, infer {_f(r['infer_ms'], 2)} ms{ratio}"


def to_csv(records: list[dict]) -> str:
    fields = list(dict.fromkeys(key for r in records for key in r))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return buffer.getvalue()


@app.command()
@user_errors
def bench(
    workload: str = typer.Option("adding", "--workload", metavar="NAME[,NAME...]",
                                 help="Comma list of: adding, copying, denoise, ptb-char, packed (adding's shapes "
                                      "with mixed lengths 100-300, the same total steps, as a PackedSequence)."),
    models: str = typer.Option("lstm-fused,ln,atn", "--models", metavar="MODEL[,MODEL...]",
                               help="Comma list of: {bench_models}. lstm-fused and ln are always timed (the "
                                    "ratio baselines), gru-fused with any GRU (×fused: against the same cell's "
                                    "fused kernel)."),
    k: Annotated[str, options.k_list(", e.g. 1,5,25,45,65")] = "5",
    reference: bool = typer.Option(False, "--reference", help="Also time atn-ref, ATN rebuilding its window every "
                                                              "step as the authors' code does, for each k."),
    reps: int = typer.Option(10, "--reps", help="Timed repetitions per model (interleaved round-robin)."),
    warmup: int = typer.Option(3, "--warmup", help="Untimed warm-up steps per model."),
    threads: options.Threads = options.THREADS,
    device: options.Device = options.DEVICE,
    fmt: Annotated[Optional[str], options.output_format(("table", "json", "csv"),
                                                        "; json and csv print only the records")] = None,
    output: Annotated[Optional[Path], options.output_file("the JSON records (as well as printing)")] = None,
    quiet: options.Quiet = False,
    json_old: bool = options.deprecated_flag("--json", "--format json", is_flag=True),
    csv_old: bool = options.deprecated_flag("--csv", "--format csv", is_flag=True),
    T: Optional[int] = typer.Option(None, "--T", hidden=True, help="Override the workloads' sequence length."),
    batch: Optional[int] = typer.Option(None, "--batch", hidden=True, help="Override the workloads' batch size."),
):
    """Time a training step (forward, loss, backward, RMSprop) and inference of each model.

    Models are interleaved round-robin (so drift of the machine hits all alike). Reported: median train and inference ms with quartiles, peak memory, and each model's cost relative to nn.LSTM and LN-LSTM from the same run.

    Example: [bold]atnbench bench --workload adding,copying --models lstm-fused,ln,atn --k 5,45 --reference[/]
    """
    from atnbench.bench.timing import time_workload
    from atnbench.bench.workloads import get_workload
    from atnbench.outputs import check_output_file
    from atnbench.progress import steps_for
    from atnbench.resources import check_fits, run_estimate
    from atnbench.zoo import resolve_device

    if json_old and csv_old:
        raise UserError("choose one of --json and --csv")
    fmt = options.deprecated("csv" if csv_old else None, "--csv", "--format csv",
                             options.deprecated("json" if json_old else None, "--json", "--format json", fmt))
    fmt = options.check_format(fmt, ("table", "json", "csv"))
    if reps < 1:
        raise UserError(f"--reps must be >= 1, got {reps}")
    if warmup < 0:
        raise UserError(f"--warmup must be >= 0, got {warmup}")
    options.check_threads(threads)
    workloads = [get_workload(w).with_overrides(T=T, batch=batch) for w in _names(workload, "workload")]
    entries = entries_for(_names(models, "models"), options.whole_numbers(k, "--k"), reference)
    if any(w.packed for w in workloads) and any(name == "atn-ref" for name, _ in entries):
        raise UserError("atn-ref takes no packed batches: leave --reference (and atn-ref) out for workload packed")
    torch_device = resolve_device(device)
    if output is not None:
        check_output_file(output, "--output")  # now, not after the timing
    for w in workloads:
        check_fits(run_estimate(w.T, w.batch, w.hidden, 1, w.input_size, w.classes), str(torch_device),
                   what=f"workload {w.name}")
    torch.set_num_threads(threads)
    env = {"device": str(torch_device), "threads": torch.get_num_threads(), "torch": torch.__version__,
           "cpu": cpu_model(), "dtype": "float32"}

    records: list[dict] = []
    per_workload = len(entries) * (warmup + reps + 1)  # every timed or warm-up step of every model, then its memory
    progress = steps_for("bench", len(workloads) * per_workload, quiet=quiet)
    try:
        for i, w in enumerate(workloads, 1):
            progress.note(f"{w.name} ({i}/{len(workloads)}, B={w.batch}, H={w.hidden}, T={w.T}): building "
                          f"{len(entries)} models (the first use compiles the C++ fast path), then {warmup} "
                          f"warm-up and {reps} timed steps each, interleaved")
            found = time_workload(w, entries, torch_device, reps, warmup, progress=progress.advance)
            records.extend({**r, **env} for r in found)
            for r in found:  # models are interleaved: each one's numbers are known when its workload ends
                progress.note(model_line(w.name, r))
    finally:
        progress.close()

    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(records, indent=2) + "\n")
    if fmt == "json":
        print(json.dumps(records))
    elif fmt == "csv":
        print(to_csv(records), end="")
    else:
        for w in workloads:
            out.print(results_table(w.name, [r for r in records if r["workload"] == w.name]))
        mem = "CUDA max allocated" if torch_device.type == "cuda" else "saved activations (autograd)"
        out.print(f"[dim]torch {torch.__version__}, device {torch_device}, {env['threads']} threads, "
                  f"CPU {env['cpu']}; mem = peak {mem}; ± = half the interquartile range of train ms[/]")

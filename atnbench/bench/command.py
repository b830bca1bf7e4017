"""``atnbench bench`` below its flags: the workloads timed (models interleaved round-robin), the
records written and the tables printed. The command (``atnbench.cli.bench``) parses the flags
into a :class:`BenchRequest` and calls :func:`bench_command`."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from atnbench.errors import UserError
from atnbench.evidence.machine import cpu_capability, cpu_model
from atnbench.tables import FitTable, out


@dataclass(frozen=True)
class BenchRequest:
    """What ``atnbench bench`` was asked, its flags parsed."""

    workloads: str
    models: str
    ks: list
    reference: bool = False
    reps: int = 10
    warmup: int = 3
    threads: int = 1
    device: str = "auto"
    fmt: str = "table"
    output: Optional[Path] = None
    quiet: bool = False
    T: Optional[int] = None
    batch: Optional[int] = None


def bench_command(request: BenchRequest) -> None:
    """Every input checked (counts, models, output path, memory) before the first timing."""
    from atnbench.bench.workloads import get_workload
    from atnbench.run.outputs import check_output_file
    from atnbench.run.resources import check_fits, run_estimate
    from atnbench.zoo import resolve_device

    if request.reps < 1:
        raise UserError(f"--reps must be >= 1, got {request.reps}")
    if request.warmup < 0:
        raise UserError(f"--warmup must be >= 0, got {request.warmup}")
    workloads = [get_workload(w).with_overrides(T=request.T, batch=request.batch)
                 for w in _names(request.workloads, "workload")]
    entries = entries_for(_names(request.models, "models"), request.ks, request.reference)
    if any(w.packed for w in workloads) and any(name == "atn-ref" for name, _ in entries):
        raise UserError("atn-ref takes no packed batches: leave --reference (and atn-ref) out for workload packed")
    torch_device = resolve_device(request.device)
    if request.output is not None:
        check_output_file(request.output, "--output")  # now, not after the timing
    for w in workloads:
        check_fits(run_estimate(w.T, w.batch, w.hidden, 1, w.input_size, w.classes), str(torch_device),
                   what=f"workload {w.name}")
    torch.set_num_threads(request.threads)
    env = {"device": str(torch_device), "threads": torch.get_num_threads(), "torch": torch.__version__,
           "cpu": cpu_model(), "cpu_capability": cpu_capability(), "gpu": torch.cuda.get_device_name(torch_device) if torch_device.type == "cuda" else None,
           "dtype": "float32"}
    records = _time(request, workloads, entries, torch_device, env)
    if request.fmt == "json":
        print(json.dumps(records))
    elif request.fmt == "csv":
        print(to_csv(records), end="")
    else:
        for w in workloads:
            out.print(results_table(w.name, [r for r in records if r["workload"] == w.name]))
        mem = "CUDA max allocated" if torch_device.type == "cuda" else "saved activations (autograd)"
        gpu = f" ({env['gpu']})" if env["gpu"] else ""
        out.print(f"[dim]torch {torch.__version__}, device {torch_device}{gpu}, {env['threads']} threads, "
                  f"CPU {env['cpu']} ({env['cpu_capability'] or 'instruction set unknown'}); mem = peak {mem}; "
                  f"± = half the interquartile range of train ms[/]")


def _time(request: BenchRequest, workloads, entries, torch_device, env: dict) -> list[dict]:
    """Each workload's models timed, interleaved; progress (and each model's line) as it goes."""
    from atnbench.bench.timing import time_workload
    from atnbench.run.progress import steps_for

    records: list[dict] = []
    per_workload = len(entries) * (request.warmup + request.reps + 1)  # every step of every model, then its memory
    progress = steps_for("bench", len(workloads) * per_workload, quiet=request.quiet)
    try:
        for i, w in enumerate(workloads, 1):
            progress.note(f"{w.name} ({i}/{len(workloads)}, B={w.batch}, H={w.hidden}, T={w.T}): building "
                          f"{len(entries)} models (the first use compiles the C++ fast path), then {request.warmup} "
                          f"warm-up and {request.reps} timed steps each, interleaved")
            found = time_workload(w, entries, torch_device, request.reps, request.warmup, progress=progress.advance)
            records.extend({**r, **env} for r in found)
            if request.output is not None:  # each workload's records kept as it ends: a bench cut short keeps them
                _write_records(request.output, records)
            for r in found:  # models are interleaved: each one's numbers are known when its workload ends
                progress.note(model_line(w.name, r))
    finally:
        progress.close()
    return records


def _write_records(path: Path, records: list[dict]) -> None:
    """The records so far, replacing the file whole (a reader never sees half a file): CSV where the
    file's name ends in .csv (JSON in it was a trap), else JSON, what `plot --bench` reads."""
    from atnbench.run.checkpoint import write_atomic

    text = to_csv(records) if path.suffix.lower() == ".csv" else json.dumps(records, indent=2) + "\n"
    write_atomic(path, lambda handle: handle.write(text.encode()))


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

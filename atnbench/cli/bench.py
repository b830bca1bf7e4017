"""``atnbench bench``: time training and inference steps of the models on the paper's task shapes.
The flags, parsed; the work is ``atnbench.bench.command``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from atnbench.cli import options
from atnbench.cli.app import app, user_errors
from atnbench.errors import UserError

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
    output: Annotated[Optional[Path], options.output_file("the records (CSV where FILE ends in .csv, else the JSON plot --bench reads), as well as "
                        "printing them,")] = None,
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
    from atnbench.bench.command import BenchRequest, bench_command

    if json_old and csv_old:
        raise UserError("choose one of --json and --csv")
    fmt = options.deprecated("csv" if csv_old else None, "--csv", "--format csv",
                             options.deprecated("json" if json_old else None, "--json", "--format json", fmt))
    options.check_threads(threads)
    bench_command(BenchRequest(
        workloads=workload, models=models, ks=options.whole_numbers(k, "--k"), reference=reference, reps=reps,
        warmup=warmup, threads=threads, device=device, fmt=options.check_format(fmt, ("table", "json", "csv")),
        output=output, quiet=quiet, T=T, batch=batch))

"""``atnbench verify``: re-run stored runs and say whether their numbers came back."""

from __future__ import annotations

import json
import math
import random
from typing import Annotated, Optional

import typer
from rich.text import Text

from atnbench.cli import options
from atnbench.cli.app import app, err, fail, out, user_errors
from atnbench.cli.runs import model_label


@app.command()
@user_errors
def verify(
    run_id: Optional[str] = typer.Argument(None, help="Run id (or a unique prefix) of a finished run in the store."),
    sample: Optional[int] = typer.Option(None, "--sample", min=1, metavar="N",
                                         help="Re-run N finished runs of --sweep, drawn with a fixed seed."),
    sweep: Optional[str] = typer.Option(None, "--sweep", help="The sweep --sample draws from."),
    store: options.Store = options.STORE,
    fmt: Annotated[Optional[str], options.output_format(("table", "json"))] = None,
):
    """Re-run a stored run from its config and say whether it reproduced bit for bit.

    The run trains again in a scratch store (the store named is only read); every curve point
    and the minimum training and validation losses are compared, and both processors are named:
    the same code and seed give the same numbers only on the same processor class (AVX-512 and
    AVX2 round differently) and path (the C++ fast path or the plain loop). A run made by older
    code that `atnbench canary` vouched for counts as this code's. Exit code 0 whether or not the
    numbers came back; 2 for a run id not in the store.

    Examples: [bold]atnbench verify 5a54e7d9ba6b --store results.db[/];  [bold]atnbench verify --sample 3 --sweep k-ablation[/]
    """
    from atnbench.store import ResultsStore
    from atnbench.evidence.verify import verify as rerun
    from atnbench.zoo import resolve_device

    fmt = options.check_format(fmt, ("table", "json"))
    if (run_id is None) == (sample is None):
        fail("give a run id, or --sample N with --sweep NAME")
    if (sample is None) != (sweep is None):
        fail("--sample and --sweep go together: --sample N --sweep NAME")
    with ResultsStore.open_read_only(store) as results:
        if run_id is not None:
            ids = [results.resolve_id(run_id)]
        else:
            finished = sorted(r.run_id for r in results.runs(sweep=sweep) if r.status in ("done", "diverged"))
            if not finished:
                fail(f"no finished run of sweep {sweep!r} in {results.path}")
            ids = sorted(random.Random(0).sample(finished, min(sample, len(finished))))
            if sample > len(finished):
                err.print(Text(f"note: --sample {sample}: sweep {sweep} has {len(finished)} finished run"
                               f"{'s' if len(finished) != 1 else ''} in {results.path}; checking "
                               f"{'them all' if len(finished) > 1 else 'it'}"), soft_wrap=True)
        chosen = [(results.get_run(i), results.curve(i)) for i in ids]
    from atnbench.run.restore import check_data_unchanged

    for record, _ in chosen:  # before anything is re-run or said to be (evidence.verify checks both too)
        if record.status not in ("done", "diverged"):
            fail(f"run {record.run_id} is {record.status}; only a finished run can be verified")
        check_data_unchanged(record)
    found = []
    for n, (record, curve) in enumerate(chosen, 1):
        err.print(Text(f"[{n}/{len(chosen)}] re-running {record.run_id} ({record.task} T={record.T} "
                       f"{model_label(record)} seed={record.seed})"), soft_wrap=True)
        result = rerun(record, curve, resolve_device(record.config.get("device") or "cpu"))
        found.append(result)
        if fmt != "json":
            for line in result.lines():
                out.print(Text(line), soft_wrap=True)
    if fmt == "json":
        print(json.dumps([{"run_id": v.run_id, "identical": v.identical, "stored": _json(v.stored), "rerun": _json(v.fresh),
                           "stored_processor": v.stored_machine, "this_processor": v.this_machine,
                           "note": v.code_note, "first_difference": v.first_difference} for v in found]))


def _json(numbers: dict) -> dict:
    """Non-finite numbers as null: strict JSON has no NaN (a hand-edited store can hold one)."""
    return {key: None if isinstance(value, float) and not math.isfinite(value) else value
            for key, value in numbers.items()}

"""``atnbench sweep``: the paper's tables and ablations as one command each."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.text import Text

from atnbench.cli import options
from atnbench.cli.app import app, err, fail, finite, out, user_errors
from atnbench.cli.run import task_options
from atnbench.cli.run_flags import config_flags, with_settings
from atnbench.config import ConfigError
from atnbench.run.runspec import check_budget
from atnbench.settings import SWEEP_SETTINGS, flag_names
from atnbench.store import ResultsStore
from atnbench.tables import FitTable

# command-line flag -> the setting it overrides (for the "conflicts with the sweep" check)
FLAG_NAMES = flag_names(SWEEP_SETTINGS)
# settings a flag can pick a sweep's runs by, where the sweep varies them
SELECTABLE = frozenset(FLAG_NAMES) - {"epochs", "steps", "options"}


def _duration(seconds: float) -> str:
    if seconds <= 0:
        return "none"
    hours = seconds / 3600
    if hours >= 1:
        return f"~{hours:.1f} CPU-h"
    return f"~{max(seconds / 60, 0.1):.1f} CPU-min"


def _k_text(config) -> str:
    from atnbench.nn.schemes import SCHEMES

    return str(config.k) if SCHEMES[config.norm].windowed else "-"


def _store_statuses(store: Path, runs) -> dict[str, Optional[str]]:
    """Each run's status in an existing store, read-only (no store yet: nothing is in it). A run
    the store holds finished by older code that a canary vouched for counts as the sweep counts
    it: done (``atnbench.evidence.equivalence``)."""
    from atnbench.evidence.equivalence import finished_equivalent
    from atnbench.evidence.identity import config_key
    from atnbench.store import StoreMissing

    try:
        results = ResultsStore.open_read_only(store)
    except StoreMissing:
        return {}
    with results:
        finished: dict[str, list] = {}
        for record in results.runs():
            if record.status in ("done", "diverged"):
                finished.setdefault(config_key(record.config), []).append(record)
        statuses = {}
        for run in runs:
            status = results.status(run.run_id)
            if status is None:
                config = run.config.to_dict()
                vouched = finished_equivalent(finished.get(config_key(config), []), config)
                status = vouched.status if vouched is not None else None
            statuses[run.run_id] = status
        return statuses


def _left(status: Optional[str]) -> str:
    return {"done": "done", "diverged": "diverged", "failed": "left (resume)", "running": "left (resume)"}.get(
        status, "left")


def _list_sweeps(budget, seeds, json_out: bool) -> None:
    from atnbench.sweep import estimate_seconds, expand, list_sweeps, load_sweep

    rows = []
    for name in list_sweeps():
        spec = load_sweep(name)
        # every seed gives the same runs but for the seed: one seed's, times the seeds, however many
        runs = expand(spec, budget=budget, seeds=seeds[:1] if seeds else None)
        per_seed = len(seeds) if seeds else 1
        rows.append({"name": spec.name, "description": spec.description, "citation": spec.citation,
                     "task": spec.task, "runs": len(runs) * per_seed,
                     "cpu_hours": estimate_seconds([r.config for r in runs]) * per_seed / 3600,
                     "source": str(spec.source)})
    if json_out:
        print(json.dumps(rows))
        return
    table = FitTable(title="atnbench sweeps", lift=False, show_lines=True,
                     caption="cost: a rough single-thread CPU estimate (steps x T x batch x hidden^2, calibrated "
                             "on a laptop CPU; a factor 2-3 either way)" + (f"; budget {budget:g}" if budget else ""))
    for column in ("sweep", "runs", "cost", "what it runs"):
        table.add_column(column, no_wrap=column == "sweep", justify="right" if column == "runs" else "left")
    for row in rows:
        what = row["description"] + (f"\n[dim]{row['citation']}[/]" if row["citation"] else "")
        table.add_row(row["name"], str(row["runs"]), _duration(row["cpu_hours"] * 3600), what)
    out.print(table)


def _flag_text(key: str, value) -> str:
    """How a setting's value is asked for on the command line: --T 100, --bias-outside."""
    name = FLAG_NAMES.get(key, key)
    if "/" in name and isinstance(value, bool):
        return name.split("/")[0 if value else 1]
    return f"{name} {value}"


def _setting_text(config, key: str) -> str:
    """A run's value of a setting as shown: "-" where it has none, "default" for the preset's variant."""
    from atnbench.evidence.identity import setting_of

    value = setting_of(config, key)
    if value is None:
        return "default" if key == "variant" else "-"
    return str(value)


def _held(runs, keys) -> str:
    """The values a sweep's runs hold of some settings, as flags: "--T 100, --T 200"."""
    from atnbench.evidence.identity import setting_of

    flags = []
    for key in keys:
        for run in runs:
            value = setting_of(run.config, key)
            if value is not None or key == "variant":
                flags.append(_flag_text(key, "default" if value is None else value))
    return ", ".join(dict.fromkeys(flags))


def _dry_run(spec, runs, store: Path, json_out: bool) -> None:
    from atnbench.sweep import estimate, measured_rates

    statuses = _store_statuses(store, runs)
    if json_out:
        print(json.dumps([{"run_id": run.run_id, "label": run.label, "status": statuses.get(run.run_id) or "left",
                           "config": run.config.to_dict()} for run in runs]))
        return
    extra = [key for key in spec.varied if key not in ("T", "norm", "k")]
    left = [run for run in runs if statuses.get(run.run_id) not in ("done", "diverged")]
    cost = estimate([r.config for r in left], measured_rates(store))
    table = FitTable(title=f"sweep {spec.name}: {len(runs)} runs, {len(runs) - len(left)} in the store, {len(left)} left",
                     caption=f"{escape(spec.description)}\n{escape(str(spec.source))}; left to run: "
                             f"{_duration(cost.seconds)} ({cost.note()})", key_columns=2)
    for column in ("#", "run id", "task", "T", "model", "k", *extra, "seed", "steps", "status"):
        table.add_column(column, justify="right" if column in ("#", "T", "k", "seed", "steps") else "left",
                         no_wrap=column == "run id")
    from atnbench.zoo import model_name

    for i, run in enumerate(runs, 1):
        c = run.config
        status = statuses.get(run.run_id)
        style = {"done": "green", "diverged": "yellow"}.get(status, "")
        shown = _left(status)
        values = []
        for key in extra:
            values.append(_setting_text(c, key))
        table.add_row(str(i), run.run_id, c.task, str(c.T), model_name(c.cell, c.norm), _k_text(c), *values,
                      str(c.seed), str(c.steps), f"[{style}]{shown}[/]" if style else shown)
    out.print(table)


def _records(runs, store: Path) -> list[dict]:
    from atnbench.config import build_config
    from atnbench.run.selection import selected_summary
    from atnbench.run.train import result_record

    records = []
    with ResultsStore.open_read_only(store) as results:
        for run in runs:
            row = results.get_run(run.run_id)
            if row is None:
                records.append({"run_id": run.run_id, "label": run.label, "status": "not-run"})
            else:
                summary = selected_summary(row.summary, results.curve(run.run_id))  # test: at validation's pick
                records.append({**result_record(build_config(row.config), row.status, summary, row.error),
                                "label": run.label})
    return records


def _summary(spec, result, store: Path) -> FitTable:
    """What the sweep did (its runs counted by outcome) and the store it wrote to."""
    table = FitTable(title=f"sweep {spec.name}", show_header=False, lift=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    held = f" ({result.skipped_diverged} diverged)" if result.skipped_diverged else ""
    rows = [("runs in the sweep", result.total),
            ("already in the store (skipped)", len(result.skipped)),
            ("made by other code (re-run)" if not any("stale" in s for _, s in result.skipped)
             else "made by other code (kept, --keep-stale)", len(result.stale)),
            ("done", result.count("done")), ("diverged", result.count("diverged")),
            ("failed", result.count("failed")), ("interrupted", result.count("interrupted")),
            ("not started", result.count("not-started"))]
    for name, value in rows:
        if value or name in ("runs in the sweep", "done", "diverged", "failed"):  # the outcomes that decide the exit code
            style = {"failed": "red", "diverged": "yellow", "interrupted": "yellow"}.get(name, "")
            text = f"{value}{held}" if name.startswith("already") else str(value)
            table.add_row(name, f"[{style}]{text}[/]" if style and value else text)
    table.add_row("store", escape(str(store)))
    return table


def _study(spec, expand_picked, store: Path, claims_file: Optional[Path], looks_text: Optional[str],
           first_seed: Optional[int], power: Optional[float], max_seeds: int, dry_run: bool):
    """The sweep's study (atnbench.sweep.confirm), its plan said on stderr."""
    from atnbench.report.claims import paper_family, read_family
    from atnbench.sweep import confirm

    family = read_family(claims_file) if claims_file is not None else paper_family()
    return confirm.prepare(spec.name, spec.task, expand_picked, store, family, looks_text, first_seed, power,
                           max_seeds, dry_run, lambda line: err.print(Text(line), soft_wrap=True))


@app.command()
@user_errors
@with_settings(SWEEP_SETTINGS, after="config", sweep=True)
def sweep(
    name: Optional[str] = typer.Argument(None, help="Sweep preset name (see --list) or path to a sweep YAML file."),
    list_: bool = typer.Option(False, "--list", help="List the sweep presets with their size and a rough cost."),
    task: Optional[str] = typer.Option(None, "--task", help="Apply the sweep's grid to this task (a user task too, "
                                       "with --include): its preset gives T; runs are stored as sweep NAME@TASK."),
    include: options.Include = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the expanded runs and what the store holds; run nothing."),
    workers: Optional[int] = typer.Option(None, "--workers", "-j", help="Runs at once in local processes (default: cores / threads)."),
    threads: options.Threads = options.THREADS,
    backend: str = typer.Option("local", "--backend", help="local (this machine) or ray (a Ray cluster)."),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address HOST:PORT (default: start or find a local one). "
                                          "A token-authenticated cluster (Ray's default) needs RAY_AUTH_MODE=token and its token: "
                                          "docs/ray.md. Ray's own log lines are hidden; ATNBENCH_RAY_LOGS=1 shows them."),
    seeds: Annotated[Optional[str], typer.Option("--seeds", "--seed", metavar="SEEDS",
                                                 help="Seeds for every configuration, e.g. 0,1,2 or 0-4 "
                                                      "(default: the sweep's); --seed says the same.")] = None,
    until_decided: bool = typer.Option(
        False, "--until-decided",
        help="Run the sweep's claims as a confirmatory study: a plan (looks, fresh seeds, alpha/m, margins) recorded "
             "in the store before the first run, then each look's seeds for the configurations still undecided, "
             "each look recorded; stops at a decision or for futility. The same command resumes it. "
             "See docs/reproducing.md."),
    looks: Optional[str] = typer.Option(
        None, "--looks", metavar="N,N,...",
        help="Seeds per configuration at each look of --until-decided (default 6,12,18,24,30; the first at least 5)."),
    first_seed: Optional[int] = typer.Option(
        None, "--first-seed", min=0,
        help="The study's first seed (default: one past the highest seed the store holds for the task: fresh seeds)."),
    plan_only: bool = typer.Option(
        False, "--plan-only",
        help="With --until-decided: record the study's plan in the store and price it (as --dry-run); run nothing."),
    claims_file: Optional[Path] = typer.Option(
        None, "--claims", metavar="FILE",
        help="The claims file whose comparisons the study tests (default: the paper's); it is the family: m = its "
             "distinct comparisons."),
    seeds_for_power: Optional[float] = typer.Option(
        None, "--seeds-for-power", metavar="POWER", callback=finite,
        help="Size the --until-decided study from the store's pilot runs (3 seeds a side at least): the most seeds "
             "per configuration Welch's test at alpha/m needs for this power (e.g. 0.8) at the pilot's effects, "
             "for 5 looks; implies --until-decided."),
    max_seeds: int = typer.Option(40, "--max-seeds", min=5, help="The most seeds --seeds-for-power may plan."),
    device: options.Device = options.DEVICE,
    store: options.Store = options.STORE,
    fmt: Annotated[Optional[str], options.output_format(("table", "json"), "; json: the runs' records")] = None,
    quiet: options.Quiet = False,
    config: options.Config = None,
    keep_stale: bool = typer.Option(False, "--keep-stale", help="Count a finished run made by other code (a different code fingerprint) as done instead of re-running it; reports mark it as stale."),
    json_old: bool = options.deprecated_flag("--json", "--format json", is_flag=True),
    **settings,
):
    """Run a sweep of runs (a paper table, an ablation) with skipping, resuming and parallel workers.

    A run flag sets that setting for every run; on a setting the sweep varies it picks the sweep's
    runs with that value (same run ids): [bold]atnbench sweep table2-adding --T 100[/] runs the T=100 half.

    Examples: [bold]atnbench sweep --list[/];  [bold]atnbench sweep k-ablation --budget 0.01 --dry-run[/];
    [bold]atnbench sweep table2-adding --workers 4[/];  [bold]atnbench sweep k-scan --backend ray --address head:6379[/]
    """
    from atnbench.sweep import expand, load_sweep, parse_seeds, run_sweep
    from atnbench.sweep.expand import pick

    json_out = options.check_format(options.deprecated("json" if json_old else None, "--json", "--format json", fmt),
                                    ("table", "json")) == "json"
    budget = settings["budget"]
    seed_list = parse_seeds(seeds) if seeds is not None else None
    if budget is not None:
        check_budget(budget)
    if list_:
        if name is not None:
            fail(f"--list shows every sweep; give it no name (`atnbench sweep {name} --dry-run` shows that sweep's runs)")
        _list_sweeps(budget, seed_list, json_out)
        return
    if name is None:
        fail("give a sweep name or file (atnbench sweep --list shows the presets)")
    options.check_backend(backend, address, workers)
    options.check_threads(threads)

    spec = load_sweep(name)
    if task is not None:
        from atnbench.sweep.spec import retarget

        spec = retarget(spec, task)
    overrides = config_flags(SWEEP_SETTINGS, settings, functools.partial(task_options, spec.task))
    overrides = {key: value for key, value in overrides.items() if value is not None}
    if config is not None:  # the file below the flags, as in `atnbench run`
        from atnbench.run.runspec import read_config_file
        from atnbench.sweep.expand import merge_layers

        file_values = read_config_file(config)
        if "seed" in file_values:
            fail(f"{config}: a sweep's seeds come from the sweep or --seeds, not a config file's seed")
        overrides = merge_layers(file_values, overrides)
    from atnbench.zoo import resolve_device

    # resolved here, on the driver: the thread count and device type are part of each run id
    resolved = resolve_device(device)  # "cuda" on a machine without one: one line now, not N failed runs
    overrides.update(threads=threads, device=resolved.type)
    local_device = str(resolved)
    varied = set(spec.varied) | ({"steps", "epochs"} if {"steps", "epochs"} & set(spec.varied) else set())
    # A flag on a setting the sweep varies picks the sweep's runs with that value (--T 100 on
    # table2-adding: its T=100 runs, the same ids); a length or a file's options it cannot pick.
    picks = {key: overrides.pop(key) for key in list(overrides) if key in varied and key in SELECTABLE}
    for key in overrides:
        if key in varied:
            fail(f"{FLAG_NAMES.get(key, key)} would replace the values sweep {spec.name} varies ({key}); "
                 f"edit a copy of {spec.source} instead")
    def expand_picked(seed_list):
        runs = expand(spec, budget=budget, seeds=seed_list, overrides=overrides)  # every run checked before any runs
        if picks:
            asked = " ".join(_flag_text(key, value) for key, value in picks.items())
            try:
                chosen = pick(spec, runs, picks, budget=budget, seeds=seed_list, overrides=overrides)
            except ConfigError as error:
                fail(f"sweep {spec.name}, {asked}: {getattr(error, 'reason', error)}")
            if not chosen:
                fail(f"sweep {spec.name} has no run with {asked} (it holds {_held(runs, picks)})")
            runs = chosen
        return runs

    study = None
    if until_decided or seeds_for_power is not None:
        if seeds is not None:
            fail("--until-decided runs the study's own fresh seeds; give it or --seeds, not both")
        study, runs = _study(spec, expand_picked, store, claims_file, looks, first_seed, seeds_for_power, max_seeds,
                             dry_run and not plan_only)
        dry_run = dry_run or plan_only
    else:
        if looks is not None or first_seed is not None or claims_file is not None or plan_only:
            fail("--looks, --first-seed, --claims and --plan-only plan a study: give them with --until-decided")
        runs = expand_picked(seed_list)
    if backend == "local":  # a cluster's machines may be bigger than this one: Ray's workers decide
        from atnbench.run.resources import check_fits
        from atnbench.run.runspec import config_estimate

        biggest = max(runs, key=lambda run: config_estimate(run.config).bytes)
        check_fits(config_estimate(biggest.config), local_device, what=f"run {biggest.label} of sweep {spec.name}")
    from atnbench.run.resources import check_buildable

    deepest = max(runs, key=lambda run: run.config.layers, default=None)  # on any machine: a build-time bound
    if deepest is not None:
        check_buildable(deepest.config, what=f"run {deepest.label} of sweep {spec.name}")
    if dry_run:
        _dry_run(spec, runs, store, json_out)
        return
    if backend == "local":  # each data location read once now (Ray's workers may see other files)
        from atnbench.tasks.datacheck import check_task_data

        for config in {json.dumps(run.config.options, sort_keys=True): run.config for run in runs}.values():
            check_task_data(config)

    if backend == "local" and workers is not None:
        from atnbench.evidence.machine import available_cores

        cores = available_cores()
        if workers * threads > cores:
            err.print(f"[yellow]note:[/] {workers} workers x {threads} threads > {cores} cores: runs will compete for CPU")
    if study is not None:
        from atnbench.sweep import confirm

        code = confirm.run(study, runs, Path(store), lambda chosen: run_sweep(
            spec, chosen, store, backend=backend, workers=workers, threads=threads, device=device, address=address,
            quiet=quiet, keep_stale=keep_stale), lambda line: err.print(Text(line), soft_wrap=True))
        if code:
            raise typer.Exit(code)
        return
    result = run_sweep(spec, runs, store, backend=backend, workers=workers, threads=threads, device=device,
                       address=address, quiet=quiet, keep_stale=keep_stale)
    if json_out:
        counts = {"runs": result.total, "skipped": len(result.skipped), "skipped_diverged": result.skipped_diverged}
        counts.update({status: result.count(status) for status in
                       ("done", "diverged", "failed", "interrupted", "not-started")})
        print(json.dumps({"sweep": spec.name, "store": str(Path(store).absolute()), "counts": counts,
                          "runs": _records(runs, store)}))
    else:
        out.print(_summary(spec, result, Path(store).expanduser().absolute()))
        from atnbench.sweep.view import results_table

        out.print(results_table(_records(runs, store), title=f"sweep {spec.name}: finished runs"))
        for job, outcome in result.failures:  # one line each, whole: error messages get copied
            error = escape(str(outcome.get("error") or "-"))  # "pip install 'atnbench[data]'" is not markup
            out.print(f"[red]failed[/] {job.run_id} {escape(job.label)}: {error}", soft_wrap=True, highlight=False)
    if result.signal is not None:
        import signal as signal_module

        left = result.total - len(result.skipped) - result.count("done") - result.count("diverged") - result.count("failed")
        err.print(f"stopped by {signal_module.Signals(result.signal).name}: {left} run(s) left; "
                  f"run the same command again to resume")
    if result.exit_code:
        raise typer.Exit(result.exit_code)

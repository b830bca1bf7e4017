"""``atnbench sweep`` below its flags: a sweep's runs expanded, picked, checked, priced or run,
a study planned and run, and what happened said. The command (``atnbench.cli.sweep``) parses the
flags into a :class:`SweepRequest` and calls :func:`sweep_command`."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

from rich.markup import escape
from rich.text import Text

from atnbench.config import ConfigError, check_budget
from atnbench.errors import UserError
from atnbench.settings import SWEEP_SETTINGS, flag_names
from atnbench.store import ResultsStore
from atnbench.sweep.estimate import cpu_time_text
from atnbench.tables import FitTable, err, out


@dataclass(frozen=True)
class SweepRequest:
    """What ``atnbench sweep`` was asked, its flags parsed and checked one by one."""

    name: Optional[str]
    store: Path
    overrides_for: Callable[[str], dict]  # the run flags as config values, for the sweep's task
    budget: Optional[float] = None
    list_: bool = False
    task: Optional[str] = None
    dry_run: bool = False
    workers: Optional[int] = None
    threads: Optional[int] = None  # None: the --config file's threads, else 1
    backend: str = "local"
    address: Optional[str] = None
    seeds: Optional[str] = None
    until_decided: bool = False
    looks: Optional[str] = None
    first_seed: Optional[int] = None
    plan_only: bool = False
    claims_file: Optional[Path] = None
    seeds_for_power: Optional[float] = None
    max_seeds: int = 40
    device: Optional[str] = None  # None: the --config file's device, else auto
    json_out: bool = False
    quiet: bool = False
    config: Optional[Path] = None
    keep_stale: bool = False


# command-line flag -> the setting it overrides (for the "conflicts with the sweep" check)
FLAG_NAMES = flag_names(SWEEP_SETTINGS)
# settings a flag can pick a sweep's runs by, where the sweep varies them
SELECTABLE = frozenset(FLAG_NAMES) - {"epochs", "steps", "options"}


def _k_text(config) -> str:
    from atnbench.registry import SCHEMES

    return str(config.k) if SCHEMES[config.norm].windowed else "-"


def store_statuses(store: Path, runs, keep_stale: bool = False) -> dict[str, Optional[str]]:
    """Each run's status in an existing store, read-only (no store yet: nothing is in it). A run
    the store holds finished by older code that a canary vouched for counts as the sweep counts
    it: done (``atnbench.evidence.equivalence``); with ``keep_stale`` so does one made by older
    code no canary vouched for ("done (stale, kept)"), as ``runner.plan`` keeps it."""
    from atnbench.evidence.equivalence import finished_equivalent, on_its_data
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
                others = finished.get(config_key(config), [])
                vouched = finished_equivalent(others, config)
                status = vouched.status if vouched is not None else None
                stale = [r for r in others if on_its_data(r)]
                if status is None and keep_stale and stale:
                    status = f"{stale[0].status} (stale, kept)"
            statuses[run.run_id] = status
        return statuses


def _left(status: Optional[str]) -> str:
    if is_finished(status):
        return status  # done, diverged, or kept: "done (stale, kept)"
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
        what = escape(row["description"]) + (f"\n[dim]{escape(row['citation'])}[/]" if row["citation"] else "")
        table.add_row(row["name"], str(row["runs"]), cpu_time_text(row["cpu_hours"] * 3600), what)
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


def is_finished(status: Optional[str]) -> bool:
    """Whether a dry run's status is one the sweep would not run again."""
    return status is not None and status.split(" ")[0] in ("done", "diverged")


def _dry_run(spec, runs, store: Path, json_out: bool, keep_stale: bool = False, studies: bool = False) -> None:
    """The runs a command would make, and their cost; ``studies``: the runs the sweep's studies still
    need (the configurations they compare), a subset of the grid the sweep's description names."""
    from atnbench.sweep import estimate, measured_rates

    statuses = store_statuses(store, runs, keep_stale)
    if json_out:  # the shape a sweep that runs prints: {sweep, store, counts, runs}
        planned = [{"run_id": run.run_id, "label": run.label, "status": statuses.get(run.run_id) or "left",
                    "config": run.config.to_dict()} for run in runs]
        held = sum(1 for run in runs if is_finished(statuses.get(run.run_id)))
        print(json.dumps({"sweep": spec.name, "store": str(Path(store).expanduser().absolute()), "dry_run": True,
                          "counts": {"runs": len(runs), "in_store": held, "left": len(runs) - held},
                          "runs": planned}))
        return
    extra = [key for key in spec.varied if key not in ("T", "norm", "k", "seed", "steps")]  # columns of their own
    left = [run for run in runs if not is_finished(statuses.get(run.run_id))]
    cost = estimate([r.config for r in left], measured_rates(store))
    subset = " (its studies' runs)" if studies else ""
    described = f"the sweep: {spec.description}" if studies else spec.description
    table = FitTable(title=f"sweep {spec.name}{subset}: {len(runs)} runs, {len(runs) - len(left)} in the store, "
                           f"{len(left)} left",
                     caption=f"{escape(described)}\n{escape(str(spec.source))}; left to run: "
                             f"{cpu_time_text(cost.seconds)} ({cost.note()})", key_columns=2)
    for column in ("#", "run id", "task", "T", "model", "k", *extra, "seed", "steps", "status"):
        table.add_column(column, justify="right" if column in ("#", "T", "k", "seed", "steps") else "left",
                         no_wrap=column == "run id")
    from atnbench.registry import model_name

    for i, run in enumerate(runs, 1):
        c = run.config
        status = statuses.get(run.run_id)
        style = {"done": "green", "diverged": "yellow"}.get((status or "").split(" ")[0], "")
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
    from atnbench.sweep.runner import INTERRUPTED, NOT_STARTED

    records = []
    with ResultsStore.open_read_only(store) as results:
        for run in runs:
            row = results.get_run(run.run_id)
            if row is None:
                records.append({"run_id": run.run_id, "label": run.label, "status": NOT_STARTED})
            else:
                summary = selected_summary(row.summary, results.curve(run.run_id))  # test: at validation's pick
                # the counts' words: a run a signal stopped is stored failed, with the error "interrupted"
                status = INTERRUPTED if (row.status, row.error) == ("failed", INTERRUPTED) else row.status
                records.append({**result_record(build_config(row.config), status, summary, row.error),
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
    """The sweep's studies, one per protocol with claims (atnbench.sweep.confirm), their plans said
    on stderr: [(study, its runs)]."""
    from atnbench.report.claims import check_claim_tasks, paper_family, read_family
    from atnbench.sweep import confirm

    family = read_family(claims_file) if claims_file is not None else paper_family()
    if claims_file is not None:  # a typo'd task is refused, as by report --claims, before a plan counts it in m
        check_claim_tasks(family, claims_file, {spec.task} | _stored_tasks(store))
    return confirm.prepare(spec.name, spec.task, spec.varied, expand_picked, store, family, looks_text, first_seed,
                           power, max_seeds, dry_run, lambda line: err.print(Text(line), soft_wrap=True))


def _stored_tasks(store: Path) -> set[str]:
    if not Path(store).is_file():
        return set()
    with ResultsStore.open_read_only(store) as results:
        return set(results.tasks())


def sweep_command(request: SweepRequest) -> int:
    """Do what ``request`` asks; the exit code (0, 1 where a run failed or diverged, 128 + a signal)."""
    from atnbench.sweep import parse_seeds, run_sweep

    seed_list = parse_seeds(request.seeds) if request.seeds is not None else None
    if request.budget is not None:
        check_budget(request.budget)
    if request.list_:
        if request.name is not None:
            raise UserError(f"--list shows every sweep; give it no name (`atnbench sweep {request.name} --dry-run` "
                            f"shows that sweep's runs)")
        _list_sweeps(request.budget, seed_list, request.json_out)
        return 0
    if request.name is None:
        raise UserError("give a sweep name or file (atnbench sweep --list shows the presets)")
    from atnbench.run.runspec import device_and_threads

    device, threads = device_and_threads(request.device, request.threads, request.config)
    request = replace(request, device=device, threads=threads)
    spec, overrides, picks, local_device = _resolve(request)
    planned_studies, runs, dry_run = _plan(request, spec, overrides, picks, seed_list)
    _check_sizes(request, spec, runs, local_device)
    from atnbench.run.outputs import check_store_outside_data

    check_store_outside_data([run.config for run in runs], request.store)
    if dry_run:
        _note_data_root(runs)
        _dry_run(spec, runs, request.store, request.json_out, request.keep_stale, studies=planned_studies is not None)
        return 0
    _check_local_machine(request, runs)
    sweep_run = lambda chosen: run_sweep(  # noqa: E731 - the one call both ways of running make
        spec, chosen, request.store, backend=request.backend, workers=request.workers, threads=request.threads,
        device=request.device, address=request.address, quiet=request.quiet, keep_stale=request.keep_stale)
    if planned_studies is not None:
        from atnbench.sweep import confirm

        return confirm.run_all(planned_studies, Path(request.store), sweep_run,
                               lambda line: err.print(Text(line), soft_wrap=True))
    result = sweep_run(runs)
    _say_result(spec, runs, request, result)
    return result.exit_code


def _resolve(request: SweepRequest):
    """The sweep, the flags' overrides (a file's below them), the settings a flag picks runs by,
    and the device, resolved on the driver: the thread count and device type enter each run id."""
    from atnbench.sweep import load_sweep
    from atnbench.zoo import resolve_device

    spec = load_sweep(request.name)
    overrides = {key: value for key, value in request.overrides_for(request.task or spec.task).items()
                 if value is not None}
    if request.config is not None:  # the file below the flags, as in `atnbench run`
        from atnbench.run.runspec import read_config_file
        from atnbench.sweep.expand import merge_layers

        file_values = read_config_file(request.config)
        if "seed" in file_values:
            raise UserError(f"{request.config}: a sweep's seeds come from the sweep or --seeds, not a config file's seed")
        overrides = merge_layers(file_values, overrides)
    if request.task is not None:  # its description says where T comes from, so after the flags and the file
        from atnbench.sweep.spec import retarget

        spec = retarget(spec, request.task, T=overrides.get("T"))
    resolved = resolve_device(request.device)  # "cuda" on a machine without one: one line now, not N failed runs
    overrides.update(threads=request.threads, device=resolved.type)
    varied = set(spec.varied) | ({"steps", "epochs"} if {"steps", "epochs"} & set(spec.varied) else set())
    # A flag on a setting the sweep varies picks the sweep's runs with that value (--T 100 on
    # table2-adding: its T=100 runs, the same ids); a length or a file's options it cannot pick.
    picks = {key: overrides.pop(key) for key in list(overrides) if key in varied and key in SELECTABLE}
    for key in overrides:
        if key in varied:
            raise UserError(f"{FLAG_NAMES.get(key, key)} would replace the values sweep {spec.name} varies ({key}); "
                            f"edit a copy of {spec.source} instead")
    return spec, overrides, picks, str(resolved)


def _plan(request: SweepRequest, spec, overrides: dict, picks: dict, seed_list):
    """(the studies or None, the runs, whether to run nothing): the studies' looks or the asked seeds."""
    from atnbench.sweep import expand
    from atnbench.sweep.expand import pick

    def expand_picked(seed_list):
        runs = expand(spec, budget=request.budget, seeds=seed_list, overrides=overrides)  # all checked before any runs
        if picks:
            asked = " ".join(_flag_text(key, value) for key, value in picks.items())
            try:
                chosen = pick(spec, runs, picks, budget=request.budget, seeds=seed_list, overrides=overrides)
            except ConfigError as error:
                raise UserError(f"sweep {spec.name}, {asked}: {getattr(error, 'reason', error)}") from None
            if not chosen:
                raise UserError(f"sweep {spec.name} has no run with {asked} (it holds {_held(runs, picks)})")
            runs = chosen
        _note_same_runs(runs)
        return runs

    if request.until_decided or request.seeds_for_power is not None:
        if request.seeds is not None:
            raise UserError("--until-decided runs the study's own fresh seeds; give it or --seeds, not both")
        found = _study(spec, expand_picked, request.store, request.claims_file, request.looks,
                       request.first_seed, request.seeds_for_power, request.max_seeds,
                       request.dry_run and not request.plan_only)
        if request.dry_run:  # what the command would run: the looks left, for the comparisons still open
            from atnbench.sweep import confirm

            return found, [run for study, runs in found for run in confirm.still_needed(study, runs)], True
        return found, [run for _, runs in found for run in runs], request.plan_only
    if request.looks is not None or request.first_seed is not None or request.claims_file is not None \
            or request.plan_only:
        raise UserError("--looks, --first-seed, --claims and --plan-only plan a study: give them with --until-decided")
    return None, expand_picked(seed_list), request.dry_run


def _note_same_runs(runs) -> None:
    """One line for each run the sweep lists once for several of its points (a window k=65 is the
    k=45 run where both cover the whole sequence): the table shows the first point's label only."""
    import re

    said = set()
    for run in runs:
        for label in run.same:
            pair = tuple(re.sub(r" seed=\d+$", "", text) for text in (label, run.label))
            if pair in said:  # once, not once a seed
                continue
            said.add(pair)
            if pair[0] != pair[1]:
                err.print(Text(f"note: {pair[0]} is the run listed as {pair[1]}: at this length both compute "
                               f"the same numbers (one run id)"), soft_wrap=True)
            else:  # `LN` beside `ln`, `k: T` beside `k: 10`, an entry of `runs:` twice
                err.print(Text(f"note: the sweep names {pair[0]} more than once (spelled alike or otherwise): "
                               f"one run"), soft_wrap=True)


def _check_sizes(request: SweepRequest, spec, runs, local_device: str) -> None:
    """The biggest run fits this machine (a cluster's machines decide for Ray); the deepest builds."""
    from atnbench.run.resources import check_buildable, check_fits
    from atnbench.run.runspec import config_estimate

    if not runs:  # a study that is over: nothing left to run
        return
    if request.backend == "local":
        biggest = max(runs, key=lambda run: config_estimate(run.config).bytes)
        check_fits(config_estimate(biggest.config), local_device, what=f"run {biggest.label} of sweep {spec.name}")
    deepest = max(runs, key=lambda run: run.config.layers, default=None)  # on any machine: a build-time bound
    if deepest is not None:
        check_buildable(deepest.config, what=f"run {deepest.label} of sweep {spec.name}")


def one_per_data(runs) -> list:
    """One config of ``runs`` per data location (their ``options``): the data checks read each once."""
    return list({json.dumps(run.config.options, sort_keys=True): run.config for run in runs}.values())


def _note_data_root(runs) -> None:
    """A dry run does not read the data, but a data-root copy the sweep would refuse is said now
    (a cheap check: the files' digests), not after the plan showed its runs as left to run."""
    from atnbench.tasks.datacheck import check_root_copy

    for config in one_per_data(runs):
        try:
            check_root_copy(config.task, config.options or {})
        except UserError as refused:
            err.print(Text(f"note: the sweep would refuse to start: {refused}"), soft_wrap=True, highlight=False)


def _check_local_machine(request: SweepRequest, runs) -> None:
    """Each data location read once now (Ray's workers may see other files); a note where the
    local workers' threads outnumber the cores."""
    if request.backend != "local":
        return
    from atnbench.evidence.machine import available_cores
    from atnbench.tasks.datacheck import check_task_data

    for config in one_per_data(runs):
        check_task_data(config)
    cores = available_cores()
    if request.workers is not None and request.workers * request.threads > cores:
        err.print(f"[yellow]note:[/] {request.workers} workers x {request.threads} threads > {cores} cores: "
                  f"runs will compete for CPU")


def _say_result(spec, runs, request: SweepRequest, result) -> None:
    """The sweep's outcome: JSON, or its summary, its finished runs and one line per failure;
    where a signal stopped it, how many runs are left."""
    if request.json_out:
        counts = {"runs": result.total, "skipped": len(result.skipped), "skipped_diverged": result.skipped_diverged}
        counts.update({status: result.count(status) for status in
                       ("done", "diverged", "failed", "interrupted", "not-started")})
        print(json.dumps({"sweep": spec.name, "store": str(Path(request.store).absolute()), "counts": counts,
                          "runs": _records(runs, request.store)}))
    else:
        from atnbench.sweep.view import results_table

        out.print(_summary(spec, result, Path(request.store).expanduser().absolute()))
        out.print(results_table(_records(runs, request.store), title=f"sweep {spec.name}: finished runs"))
        for job, outcome in result.failures:  # one line each, whole: error messages get copied
            error = escape(str(outcome.get("error") or "-"))  # "pip install 'atnbench[data]'" is not markup
            out.print(f"[red]failed[/] {job.run_id} {escape(job.label)}: {error}", soft_wrap=True, highlight=False)
    if result.signal is not None:
        err.print(result.stopped_text())

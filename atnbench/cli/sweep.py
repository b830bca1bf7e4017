"""``atnbench sweep``: the paper's tables and ablations as one command each. The flags, parsed;
the work is ``atnbench.sweep.command``."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Optional

import typer

from atnbench.cli import options
from atnbench.cli.app import app, finite, user_errors
from atnbench.cli.run import task_options
from atnbench.cli.run_flags import config_flags, with_settings
from atnbench.settings import SWEEP_SETTINGS

Name = Annotated[Optional[str], typer.Argument(help="Sweep preset name (see --list) or path to a sweep YAML file.")]
List = Annotated[bool, typer.Option("--list", help="List the sweep presets with their size and a rough cost.")]
Task = Annotated[Optional[str], typer.Option(
    "--task", help="Apply the sweep's grid to this task (a user task too, with --include): its preset gives T; runs "
                   "are stored as sweep NAME@TASK.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Show the expanded runs and what the store holds; run nothing.")]
Workers = Annotated[Optional[int], typer.Option(
    "--workers", "-j", help="Runs at once in local processes (default: cores / threads).")]
Backend = Annotated[str, typer.Option("--backend", help="local (this machine) or ray (a Ray cluster).")]
Address = Annotated[Optional[str], typer.Option(
    "--address", help="Ray cluster address HOST:PORT (default: start or find a local one). A token-authenticated "
                      "cluster (Ray's default) needs RAY_AUTH_MODE=token and its token: docs/ray.md. Ray's own log "
                      "lines are hidden; ATNBENCH_RAY_LOGS=1 shows them.")]
Seeds = Annotated[Optional[str], typer.Option(
    "--seeds", "--seed", metavar="SEEDS",
    help="Seeds for every configuration, e.g. 0,1,2 or 0-4 (default: the sweep's); --seed says the same.")]
UntilDecided = Annotated[bool, typer.Option(
    "--until-decided",
    help="Run the sweep's claims as a confirmatory study: a plan (looks, fresh seeds, alpha/m, margins) recorded "
         "in the store before the first run, then each look's seeds for the configurations still undecided, "
         "each look recorded; stops at a decision or for futility. The same command resumes it. "
         "See docs/reproducing.md.")]
Looks = Annotated[Optional[str], typer.Option(
    "--looks", metavar="N,N,...",
    help="Seeds per configuration at each look of --until-decided (default 6,12,18,24,30; the first at least 5).")]
FirstSeed = Annotated[Optional[int], typer.Option(
    "--first-seed", min=0,
    help="The study's first seed (default: one past the highest seed the store holds for the task: fresh seeds).")]
PlanOnly = Annotated[bool, typer.Option(
    "--plan-only",
    help="With --until-decided: record the study's plan in the store and price it (as --dry-run); run nothing.")]
Claims = Annotated[Optional[Path], typer.Option(
    "--claims", metavar="FILE",
    help="The claims file whose comparisons the study tests (default: the paper's); it is the family: m = its "
         "distinct comparisons.")]
SeedsForPower = Annotated[Optional[float], typer.Option(
    "--seeds-for-power", metavar="POWER", callback=finite,
    help="Size the --until-decided study from the store's pilot runs (3 seeds a side at least): the most seeds "
         "per configuration Welch's test at alpha/m needs for this power (e.g. 0.8) at the pilot's effects, "
         "for 5 looks; implies --until-decided.")]
MaxSeeds = Annotated[int, typer.Option("--max-seeds", min=5, help="The most seeds --seeds-for-power may plan.")]
Format = Annotated[Optional[str], options.output_format(("table", "json"), "; json: one object: sweep, store, counts and the runs' records, a dry run's too")]
KeepStale = Annotated[bool, typer.Option(
    "--keep-stale", help="Count a finished run made by other code (a different code fingerprint) as done instead of "
                         "re-running it; reports mark it as stale.")]


@app.command()
@user_errors
@with_settings(SWEEP_SETTINGS, after="config", sweep=True)
def sweep(name: Name = None, list_: List = False, task: Task = None, include: options.Include = None,
          dry_run: DryRun = False, workers: Workers = None, threads: options.ConfigThreads = None,
          backend: Backend = "local", address: Address = None, seeds: Seeds = None, until_decided: UntilDecided = False,
          looks: Looks = None, first_seed: FirstSeed = None, plan_only: PlanOnly = False, claims_file: Claims = None,
          seeds_for_power: SeedsForPower = None, max_seeds: MaxSeeds = 40, device: options.ConfigDevice = None,
          store: options.Store = options.STORE, fmt: Format = None, quiet: options.Quiet = False,
          config: options.Config = None, keep_stale: KeepStale = False,
          json_old: bool = options.deprecated_flag("--json", "--format json", is_flag=True), **settings):
    """Run a sweep of runs (a paper table, an ablation) with skipping, resuming and parallel workers.

    A run flag sets that setting for every run; on a setting the sweep varies it picks the sweep's
    runs with that value (same run ids): [bold]atnbench sweep table2-adding --T 100[/] runs the T=100 half.

    Examples: [bold]atnbench sweep --list[/];  [bold]atnbench sweep k-ablation --budget 0.01 --dry-run[/];
    [bold]atnbench sweep table2-adding --workers 4[/];  [bold]atnbench sweep k-scan --backend ray --address head:6379[/]
    """
    if not list_:
        options.check_store_early(store)
    from atnbench.sweep.command import SweepRequest, sweep_command

    fmt = options.deprecated("json" if json_old else None, "--json", "--format json", fmt)
    options.check_backend(backend, address, workers)
    if threads is not None:  # None: the --config file's, else 1 (as device: the file's, else auto)
        options.check_threads(threads)
    code = sweep_command(SweepRequest(
        name=name, store=store, budget=settings["budget"], list_=list_, task=task, dry_run=dry_run, workers=workers,
        threads=threads, backend=backend, address=address, seeds=seeds, until_decided=until_decided, looks=looks,
        first_seed=first_seed, plan_only=plan_only, claims_file=claims_file, seeds_for_power=seeds_for_power,
        max_seeds=max_seeds, device=device, json_out=options.check_format(fmt, ("table", "json")) == "json",
        quiet=quiet, config=config, keep_stale=keep_stale,
        overrides_for=lambda task_name: config_flags(SWEEP_SETTINGS, settings,
                                                     functools.partial(task_options, task_name))))
    if code:
        raise typer.Exit(code)

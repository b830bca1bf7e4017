"""``atnbench canary``: are the published runs still current after a code change? (``atnbench.evidence.canary``)"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from atnbench.cli.app import EXIT_FAILED, app, err, out, sigterm_interrupts, user_errors
from atnbench.config import ConfigError
from atnbench.tables import FitTable

DEFAULT_RUNS = Path("results") / "runs.jsonl"


def _checkout() -> Path:
    """The git checkout this atnbench runs from (the canary compares it with an old revision)."""
    import atnbench

    root = Path(atnbench.__file__).resolve().parents[1]
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"atnbench at {root} is not a git checkout: the canary needs the old revision's code")
    return Path(done.stdout.strip())


def _revision(repo: Path) -> str:
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--", "atnbench"], capture_output=True,
                           text=True)
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def _published(path: Path) -> list[dict]:
    from atnbench.evidence.transfer import read_lines

    return [r for r in read_lines(path) if r["status"] in ("done", "diverged")]


def _old_tree_for(repo: Path, code: str, revisions: list[str], stack):
    """A worktree at the first recorded revision whose code has fingerprint ``code``."""
    from atnbench.evidence.canary import fingerprint_of, worktree

    tried = []
    for revision in revisions:
        try:
            tree = stack.enter_context(worktree(repo, revision))
        except ConfigError as error:
            tried.append(f"{revision} ({error})")
            continue
        found = fingerprint_of(tree)
        if found == code:
            return revision, tree
        tried.append(f"{revision} (code {found})")
    raise ConfigError(f"no recorded revision has code {code}: tried {', '.join(tried) or 'none'}; give --revision")


@app.command()
@user_errors
def canary(
    runs: Path = typer.Option(DEFAULT_RUNS, "--runs", help="JSON Lines file of the runs to vouch for (`atnbench store export`)."),
    steps: int = typer.Option(10, "--steps", min=2, help="Training steps of each canary run."),
    revision: Optional[str] = typer.Option(None, "--revision", help="Git revision of the runs' code (default: the revisions the runs recorded)."),
    write: bool = typer.Option(False, "--record", help="Record the classes whose canaries were bit-identical in atnbench/evidence/code_equivalence.json."),
):
    """Check that this code computes what the runs' code computed: one short canary run per code
    path (task, variant, cell, norm, bias placement, init, optimizer, ...) of the runs, under the
    runs' own revision and under this checkout; losses and final weights must be bit-identical.

    With --record the identical classes are recorded, and reports, sweeps and `atnbench run` count
    those runs as current; a class that differs stays stale. Exit 1 if any canary differs.

    Example: [bold]atnbench canary --record[/]  (after a refactor of atnbench/nn, from the checkout)
    """
    with sigterm_interrupts() as interrupt:
        try:
            differ = _vouch(runs, steps, revision, write)
        except KeyboardInterrupt:  # Ctrl-C or kill: the old revision's worktree is removed on the way out
            raise typer.Exit(128 + interrupt.signum) from None
    if differ:
        raise typer.Exit(EXIT_FAILED)


def _vouch(runs: Path, steps: int, revision: Optional[str], write: bool) -> int:
    """Check the runs' code classes (and record the identical ones); how many differ or went unchecked."""
    from contextlib import ExitStack

    from atnbench.evidence.canary import canaries, check, other_classes, record
    from atnbench.evidence.identity import code_fingerprint
    from atnbench.evidence.machine import cpu_capability

    published = _published(runs)
    current = code_fingerprint()
    by_code: dict[str, list[dict]] = {}
    for run in published:
        code = (run.get("env") or {}).get("code")
        if code and code != current:
            by_code.setdefault(code, []).append(run)
    if not by_code:
        out.print(Text(f"every run in {runs} was made by this code ({current}): nothing to check"))
        return 0
    note = other_classes([run for members in by_code.values() for run in members], cpu_capability())
    if note:
        err.print(Text(note), soft_wrap=True)
    repo = _checkout()
    differ = 0
    for code, members in by_code.items():
        revisions = [revision] if revision else list(dict.fromkeys(
            (r.get("env") or {}).get("atnbench_revision") for r in reversed(members)
            if (r.get("env") or {}).get("atnbench_revision")))
        found, missing = _with_data(canaries([r["config"] for r in members], steps))
        for canary_, why in missing:
            err.print(Text(f"note: not checked, {canary_.config['task']} {canary_.config.get('norm')} "
                           f"({canary_.runs} runs): {why}"), soft_wrap=True)
        differ += len(missing)
        if not found:
            continue
        with ExitStack() as stack:
            old_revision, old_tree = _old_tree_for(repo, code, revisions, stack)
            err.print(Text(f"{len(members)} runs by code {code} (revision {old_revision}): {len(found)} canaries of "
                           f"{steps} steps, under that revision and under this checkout ({current})"))
            outcomes = check(found, old_tree, repo)
        differ += sum(not o.identical for o in outcomes)
        out.print(_table(outcomes, code, current))
        if write:
            entry = record(outcomes, code, current, old_revision, _revision(repo))
            err.print(Text(f"recorded: {len(entry['identical'])} of {len(outcomes)} classes of code {code} are "
                           f"current under {current}"))
    return differ


def _with_data(found: list) -> tuple[list, list]:
    """The canaries whose real data is here, and (canary, why) for those whose data is not: a
    fresh clone without `atnbench data prepare` checks what it can and says what it could not."""
    from atnbench.config import build_config
    from atnbench.tasks.datacheck import check_task_data
    from atnbench.errors import UserError

    ready, missing = [], []
    for canary_ in found:
        try:
            check_task_data(build_config(canary_.config))
        except UserError as why:  # its data is missing or unreadable here
            missing.append((canary_, str(why)))
            continue
        ready.append(canary_)
    return ready, missing


def _table(outcomes, old: str, new: str) -> FitTable:
    table = FitTable(title=f"canaries: code {old} against {new}", key_columns=2)
    for column in ("task", "model", "settings", "runs", "result"):
        table.add_column(column, justify="right" if column == "runs" else "left")
    for outcome in outcomes:
        config = outcome.canary.config
        settings = " ".join(f"{key}={config[key]}" for key in ("variant", "bias_inside", "init", "optimizer")
                            if config.get(key) is not None)
        result = "identical" if outcome.identical else f"DIFFERS: {outcome.difference}"
        table.add_row(config["task"], f"{config.get('cell', 'lstm')} {config.get('norm')}", settings,
                      str(outcome.canary.runs), result)
    return table


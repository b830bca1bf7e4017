"""``atnbench tasks``: list the tasks; ``tasks new`` and ``tasks check`` for a task of your own."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.text import Text

from atnbench.cli import options
from atnbench.cli.app import command_group, out, say, user_errors
from atnbench.config import ConfigError
from atnbench.tables import FitTable

tasks_app = command_group("tasks", "The tasks (shipped and your own), what they measure and where they come from.",
                          invoke_without_command=True, no_args_is_help=False)


@tasks_app.callback()
@user_errors
def tasks(ctx: typer.Context, include: options.Include = None):
    """List the tasks, their presets (paper protocols) and what they measure; your own tasks
    (--include DIR, $ATNBENCH_TASKS) with the file each comes from."""
    if ctx.invoked_subcommand is not None:
        return
    from atnbench.presets import list_task_presets
    from atnbench.tasks.lookup import load_task_preset
    from atnbench.tasks import get_task, task_names
    from atnbench.tasks.registry import TASK_MODULES
    from atnbench.tasks.taskfiles import user_task_files

    # two columns (a task's name, presets and variants over each other; what it measures over its
    # source): the long text wraps in the one wide column, readable at 80 columns
    table = FitTable(title="atnbench tasks", show_lines=True, lift=False)
    table.add_column("task / presets", no_wrap=True)  # short names, never wrapped into the column beside
    table.add_column("what it measures / source")
    presets, user_files = set(list_task_presets()), user_task_files()
    for name in task_names():
        try:
            spec = get_task(name)
            if name in TASK_MODULES and name in presets:
                preset = load_task_preset(name)  # refused, as by `run`, where a file of the user's shadows it
        except ConfigError as err:  # a broken task file of the user's: listed, with what is wrong
            table.add_row(f"[bold]{escape(name)}[/]", f"[red]{escape(str(err))}[/]")
            continue
        if name in TASK_MODULES and name in presets:
            ts = [f"T={t}: k={v.get('k', '-')}" for t, v in sorted(preset.per_T.items())] or [f"T={preset.default_T}"]
            variants = list(preset.variants)
            # the old name over what it now means: a line too long for the column wrapped into the
            # prose beside it, where the two read as one sentence ("... = the 10*ln(8)/(T+20)")
            aliases = [f"{old}\n  = {new or 'the defaults'}" for old, new in preset.aliases.items()]
            source = preset.citation
        else:
            ts, variants, aliases, source = [], [], [], spec.reference
        if name in user_files:
            source = f"your task: {user_files[name]}"
        left = "\n".join([f"[bold]{escape(name)}[/]", *ts, *(f"[dim]variant[/] {v}" for v in variants),
                          *(f"[dim]old name[/] {alias}" for alias in aliases)])
        table.add_row(left, f"{escape(spec.description)}\n[dim]{escape(spec.measures)}[/]\n[italic]{escape(source)}[/]")
    out.print(table)


def say_command(words: str, command: str) -> None:
    """A sentence, then the command it suggests on a line of its own, never broken (copied whole
    at any width)."""
    say(out, words)
    out.print(Text("  " + command, style="bold"), soft_wrap=True, highlight=False)


@tasks_app.command("new")
@user_errors
def new(
    name: str = typer.Argument(..., help="The task's name (its file is NAME.yaml)."),
    data: Path = typer.Option(..., "--from", metavar="FILE", help="A data file: .npz, .csv, .tsv, .parquet, .arrow."),
    folder: Path = typer.Option(Path("."), "--dir", metavar="DIR",
                                help="Where to write NAME.yaml (default: here; created if missing)."),
    problem: Optional[str] = typer.Option(None, "--problem", metavar="KIND",
                                          help="sequence-classification, sequence-regression, step-classification "
                                               "or step-regression (default: inferred from the targets)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing NAME.yaml."),
    allow_pickle: bool = typer.Option(False, "--allow-pickle",
                                      help="Read object arrays of a .npz (unpickled: this runs code from the file; "
                                           "only for a file you trust). Written into NAME.yaml."),
):
    """Write a starting task file for a data file: shapes, problem kind and lengths inferred.

    Example: [bold]atnbench tasks new vowels --from data/train.npz --dir mytasks[/], then
    [bold]atnbench tasks check vowels --include mytasks[/]
    """
    import re

    from atnbench.tasks.taskdraft import draft_task
    from atnbench.tasks.registry import TASK_MODULES

    if name in TASK_MODULES:
        raise ConfigError(f"{name!r} is a shipped task; give yours another name")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ConfigError(f"task name {name!r}: use letters, digits, '-', '_' and '.' (it names NAME.yaml)")
    target = folder / f"{name}.yaml"
    if target.exists() and not force:
        raise ConfigError(f"{target} exists; give --force to replace it")
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--dir {folder}: is a file, not a folder")
    text = draft_task(name, data, folder, problem, allow_pickle)
    folder.mkdir(parents=True, exist_ok=True)  # only once the draft is good: a refusal leaves nothing
    target.write_text(text, encoding="utf-8")
    say_command(f"wrote {target}; check it with:", f"atnbench tasks check {name} --include {shlex.quote(str(folder))}")


def _task_file(name: str):
    """The task file of a task of your own; one line where there is none (or it is a shipped task)."""
    from atnbench.tasks.registry import TASK_MODULES
    from atnbench.tasks.taskfiles import ENV_FOLDERS, find

    path = find(name)
    if path is None and name in TASK_MODULES:  # not "no task file": it is one of atnbench's own
        raise ConfigError(f"{name} is a shipped task (`atnbench tasks` lists them); `tasks check` reads a task "
                          f"of your own (docs/adding-a-task.md)")
    if path is None:
        raise ConfigError(f"no task file {name}.yaml in the search folders (--include DIR or ${ENV_FOLDERS})")
    return path


@tasks_app.command("check")
@user_errors
def check(
    name: str = typer.Argument(..., help="A task of your own (found with --include DIR or $ATNBENCH_TASKS)."),
    include: options.Include = None,
):
    """Read a task of your own and say what it holds: sizes, lengths, classes, the no-information
    baseline; every mistake in the task or data file is one line naming the file and the field."""
    from atnbench.tasks.lookup import load_task_preset
    from atnbench.tasks.taskfiles import read_definition, task_options
    from atnbench.tasks.userprep import PROBLEMS, prepared, summary

    path = _task_file(name)
    definition = read_definition(path)
    from atnbench.run.runspec import resolve_run

    preset = load_task_preset(name)
    config = resolve_run(name, {})  # every check a run makes, the task file's defaults included
    table = FitTable(title=f"atnbench tasks check {name}", show_header=False, lift=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    rows = [("file", str(path))]
    from atnbench.tasks.datacheck import check_task_data

    check_task_data(config)  # one batch (or the data's tensors) made and checked, as a run does before training
    if definition.module is not None:
        from atnbench.tasks import get_task

        spec = get_task(name)
        rows += [("task object", definition.module), ("kind", spec.kind), ("inputs", str(spec.input_size)),
                 ("outputs", str(spec.output_size)), ("loss", spec.loss)]
    else:
        options_ = task_options(definition, path)
        problem = PROBLEMS[definition.problem]
        facts = summary(prepared(options_["user_task"], options_["data_files"]), problem.per_step, config.T)
        rows += [("problem", definition.problem),
                 ("sequences", ", ".join(f"{split} {n}" for split, n in facts["sizes"].items())),
                 ("channels", str(facts["channels"])),
                 ("lengths", "{} to {} steps".format(*facts["lengths"])),
                 ("inputs", f"token ids 0..{facts['vocab'] - 1} through an embedding" if facts["vocab"] is not None
                  else "standardized with the training split's mean and std" if definition.standardize
                  else "as stored")]
        if "classes" in facts:
            shown = ", ".join(map(str, facts["classes"][:12])) + (" ..." if len(facts["classes"]) > 12 else "")
            rows += [("classes", f"{len(facts['classes'])}: {shown}"),
                     ("majority class (training)", f"{facts['majority']}: guessing it is right on "  # not val's
                                                   f"{facts['majority_accuracy']:.1%} of validation")]
        else:
            means = ", ".join(f"{value:.4g}" for value in facts["train_mean"])
            rows += [("target size", str(facts["target_dim"])),
                     ("training mean" + (" (per dimension)" if len(facts["train_mean"]) > 1 else ""), means)]
        rows.append(("no-information loss", f"{facts['baseline_loss']:.4g} on validation (the report's baseline)"))
    rows += [("default T", str(preset.default_T)),
             ("defaults", ", ".join(f"{k}={v}" for k, v in preset.defaults.items() if k != "options"))]
    for key, value in rows:
        table.add_row(key, escape(value))
    out.print(table)
    say_command("ok: run it with:",
                f"atnbench run {shlex.quote(name)} --include {shlex.quote(str(path.parent))} --norm atn")

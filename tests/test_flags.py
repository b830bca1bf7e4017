"""One vocabulary of flags: every command spells a shared flag alike (from cli/options.py), the
old spellings still work with one note line, config files take flag names, and `sweep` takes
the run flags that `run` takes."""

from __future__ import annotations

import json
import textwrap

import typer
from typer.core import TyperOption

from atnbench.cli import app
from atnbench.run.runspec import resolve_run
from helpers import invoke
from atnbench.evidence.identity import run_id_of

TINY = ["--T", "8", "--hidden", "8", "--batch-size", "4", "--iters", "4", "--eval-every", "2", "--val-samples", "8"]
SWEEP = """\
name: tiny
description: a tiny sweep
task: adding
base: {T: 8, hidden: 8, batch_size: 4, steps: 6, eval_every: 2, val_samples: 8}
grid:
  norm: [ln, atn]
seeds: [0]
"""


def _commands(command, prefix: str = ""):
    """(name, command) for a command typer built and every subcommand under it. Typed loosely:
    typer >= 0.17 builds them from its own copy of click, not the click package."""
    yield prefix or "atnbench", command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, f"{prefix} {name}".strip())


def test_every_command_spells_the_shared_flags_alike():
    shared = {"--device": "[auto|cpu|cuda|mps]", "--store": "PATH", "--output": "FILE", "--out-dir": "DIR",
              "--config": "PATH", "--seeds": "SEEDS"}
    seen = {flag: [] for flag in shared}
    for name, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            for flag, metavar in shared.items():
                if flag in param.opts and not param.hidden:
                    assert param.metavar == metavar, (name, flag, param.metavar)
                    seen[flag].append(name)
            if "--format" in param.opts:
                assert param.metavar.startswith("[") and "-f" in param.opts, name
            if "--threads" in param.opts:
                assert param.help.startswith("torch CPU threads"), name
            if any(old in param.opts for old in ("--json", "--csv", "--out", "--plots")):
                assert param.hidden and param.help.startswith("Deprecated: use"), (name, param.opts)
    for command in ("run", "sweep", "report", "evaluate", "reproduce", "runs list", "runs export"):
        assert command in seen["--store"], command
    for command in ("run", "sweep", "evaluate", "reproduce", "bench"):
        assert command in seen["--device"], command
    assert {"run", "sweep"} <= set(seen["--config"]) and {"sweep", "reproduce"} <= set(seen["--seeds"])


def test_run_output_and_format_and_the_old_spellings_with_one_note_each(tmp_path):
    store = tmp_path / "r.db"
    result = invoke("run", "adding", *TINY, "--store", store, "--format", "json", "--output", tmp_path / "a.json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert json.loads((tmp_path / "a.json").read_text()) == record and "deprecated" not in result.stderr
    again = invoke("run", "adding", *TINY, "--store", store, "--force", "--json", "--out", tmp_path / "b.json", "-q")
    assert again.exit_code == 0, again.output
    notes = [line for line in again.stderr.splitlines() if line.startswith("note:")]
    assert notes == ["note: --json is deprecated; use --format json", "note: --out is deprecated; use --output"]
    assert json.loads(again.stdout)["run_id"] == record["run_id"] and (tmp_path / "b.json").is_file()


def test_config_files_take_flag_names_as_well_as_keys(tmp_path):
    flags = tmp_path / "flags.yaml"
    flags.write_text("iters: 6\nbatch-size: 4\neval-every: 2\nval-samples: 8\nhidden: 8\n")
    keys = tmp_path / "keys.yaml"
    keys.write_text("steps: 6\nbatch_size: 4\neval_every: 2\nval_samples: 8\nhidden: 8\n")
    by_flags, by_keys = resolve_run("adding", {}, config_file=flags), resolve_run("adding", {}, config_file=keys)
    assert run_id_of(by_flags) == run_id_of(by_keys) and (by_flags.steps, by_flags.batch_size) == (6, 4)


def test_sweep_takes_the_run_flags_of_run(tmp_path):
    sweep = tmp_path / "tiny.yaml"
    sweep.write_text(textwrap.dedent(SWEEP))
    config = tmp_path / "c.yaml"
    config.write_text("iters: 3\nclip: 0.5\n")
    store = tmp_path / "none.db"

    def dry(*flags):
        result = invoke("sweep", sweep, "--dry-run", "--format", "json", "--store", store, *flags)
        assert result.exit_code == 0, result.output
        return [run["config"] for run in json.loads(result.stdout)["runs"]]

    plain = dry()
    chosen = dry("--seed", "3,4", "--init", "torch", "--config", config, "--clip", "0.25")
    assert sorted({c["seed"] for c in chosen}) == [3, 4] and len(chosen) == 2 * len(plain)
    assert {c["init"] for c in chosen} == {"torch"} and {c["steps"] for c in chosen} == {3}
    assert {c["clip"] for c in chosen} == {0.25}  # the command line over the file
    assert dry("--seed", "3,4") == dry("--seeds", "3,4")
    assert not store.exists()


def _options(command_name: str) -> dict[str, TyperOption]:
    command = typer.main.get_command(app).commands[command_name]
    return {param.name: param for param in command.params if getattr(param, "param_type_name", "") == "option"}


def test_run_and_sweep_take_their_run_flags_from_one_declaration():
    """Every declared setting is an option of `run` (and, unless it is run-only, of `sweep`) with
    the declared spellings and type; neither command declares a RunConfig setting of its own."""
    import dataclasses

    from atnbench.config import RunConfig
    from atnbench.settings import RUN_SETTINGS, SWEEP_SETTINGS

    run, sweep = _options("run"), _options("sweep")
    for settings, options in ((RUN_SETTINGS, run), (SWEEP_SETTINGS, sweep)):
        for setting in settings:
            option = options[setting.param]
            spelled = [*option.opts, *option.secondary_opts]
            declared = [part for flag in setting.flags for part in flag.split("/")]
            assert spelled == declared, (setting.param, spelled, declared)
            assert option.default is None and not option.required
    assert {s.param for s in RUN_SETTINGS} - {s.param for s in SWEEP_SETTINGS} == {"seed"}  # sweep: --seeds
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    declared = {s.config_key for s in RUN_SETTINGS} | {"epochs", "budget"}
    for name, option in {**run, **sweep}.items():
        # machine settings are shared options of their own; sweep --task picks the task, as run's argument does
        if name in fields and name not in ("threads", "device", "task"):
            assert name in declared, f"{name} is a RunConfig setting declared outside atnbench/settings.py"
    # the flag tables come from the same declaration
    from atnbench.sweep.command import FLAG_NAMES
    from atnbench.config import FLAG_NAMES as RENAMED

    assert FLAG_NAMES["steps"] == "--iters" == RENAMED["steps"] and FLAG_NAMES["options"].startswith("--data-dir")

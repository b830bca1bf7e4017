"""Sweep files: a task, settings shared by every run, what varies, and the seeds.

A sweep file (``sweeps/NAME.yaml``, found like task presets: a path, ``./sweeps/`` in the
working folder, the package data, the checkout) reads::

    name: k-ablation                 # optional, default: the file name
    description: "one line"          # required
    citation: "where it comes from"  # optional
    task: copying                    # required; the task preset gives every other setting
    base: {T: 100}                   # settings for every run (RunConfig keys, or epochs)
    grid:                            # settings -> lists; the cartesian product
      norm: [none, ln, atn]
    runs:                            # a list of entries, each its own small grid (a list
      - {norm: [none, ln]}           # value is expanded, a plain value is fixed)
      - {norm: atn, k: [25, 45, 65]}
    seeds: [0, 1, 2]                 # default [0, 1, 2]

``grid`` and ``runs`` may be combined: every grid point is crossed with every ``runs`` entry (a
key may not appear in both). ``k: T`` stands for the run's sequence length. ``variant`` is an
axis like any other (``variant: [released-code, paper-text]``): each value is a named variant
of the task preset (or an old name of one, ``null`` for the preset's defaults), checked when the
sweep expands; the report keeps each variant's runs in their own table. Everything is
checked here and in ``expand``, before any run starts; a mistake is one ``ConfigError`` line
naming the file, the key and what was expected.
"""

from __future__ import annotations

import json

import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from atnbench.config import FIELDS, ConfigError
from atnbench.limits import MAX_PLANNED_RUNS, SEED_MAX
from atnbench.presets import FIELD_TYPES, check_top_level, find_preset_file, list_presets, read_yaml_mapping, type_ok

TOP_LEVEL = ("name", "description", "citation", "task", "base", "grid", "runs", "seeds")
REQUIRED = ("description", "task")
DEFAULT_SEEDS = (0, 1, 2)
# settings a sweep may set per run: RunConfig fields and epochs; the task is the sweep's own and
# seeds have their own list
SETTINGS = (FIELDS | {"epochs"}) - {"task", "seed"}
SPECIAL = {
    "task": "a sweep has one task: set it at the top level",
    "seed": "set the seeds with the top-level 'seeds' list (or --seeds)",
    # the command's, one for all its runs (worker counts, Ray's CPUs and the device check use them)
    "threads": "a sweep's runs train with the command's thread count: --threads (or a --config file's threads)",
    "device": "a sweep's runs train on the command's device: --device (or a --config file's device)",
}


@dataclass(frozen=True)
class SweepSpec:
    name: str
    description: str
    task: str
    source: Path
    citation: Optional[str] = None
    base: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    seeds: tuple[int, ...] = DEFAULT_SEEDS

    @property
    def varied(self) -> list[str]:
        """The settings that vary across the sweep's runs, in file order."""
        keys = list(self.grid)
        for entry in self.runs:
            keys += [key for key in entry if key not in keys]
        return keys


def retarget(spec: SweepSpec, task: str, T: Optional[int] = None) -> SweepSpec:
    """The sweep's grid applied to another task (``--task``): the sweep's sequence lengths were
    chosen for its own task, so the new task's preset gives T (``T``: the one asked for instead);
    the rest of the grid, the base settings and the seeds stay. Its runs are stored as sweep
    ``NAME@TASK``."""
    import dataclasses

    from atnbench.tasks import get_task

    get_task(task)  # an unknown task is one line now
    def without_T(entry: dict) -> dict:
        return {key: value for key, value in entry.items() if key != "T"}

    grid, runs = without_T(spec.grid), [e for e in map(without_T, spec.runs) if e] or []
    # its description and citation were written for its own task (and the paper's protocol there)
    return dataclasses.replace(spec, name=f"{spec.name}@{task}", task=task, base=without_T(spec.base), grid=grid,
                               runs=runs, description=retargeted_description(spec.name, task, grid, runs, T),
                               citation=None)


def retargeted_description(name: str, task: str, grid: dict[str, list], runs: list[dict],
                           T: Optional[int] = None) -> str:
    """"The norm-ablation grid on task vowels (T from its defaults): norm = none, ln, atn"
    ("(T=10)" where the command line or a config file gave T)."""
    varied = [f"{key} = {', '.join(map(str, values))}" for key, values in grid.items()]
    if runs:
        varied.append(f"{len(runs)} listed run{'s' if len(runs) != 1 else ''}")
    length = "T from its defaults" if T is None else f"T={T}"
    return f"The {name} grid on task {task} ({length})" + (f": {'; '.join(varied)}" if varied else "")


def _fail(path: Path, key: str, expected: str) -> ConfigError:
    return ConfigError(f"{path}: key '{key}': {expected}")


def _type_name(expected: Any) -> str:
    return " or ".join("null" if t is type(None) else t.__name__ for t in typing.get_args(expected) or (expected,))


def check_setting(path: Path, where: str, key: Any, value: Any) -> None:
    """One setting of a sweep: a known key with a value of the right type (norms by name)."""
    from atnbench.registry import NORM_ALIASES, canonical_norm

    if key in SPECIAL:
        raise _fail(path, where, SPECIAL[key])
    if key not in SETTINGS:
        from atnbench.run.runspec import FLAG_KEYS

        spelled = FLAG_KEYS.get(key, key.replace("-", "_")) if isinstance(key, str) else key
        if spelled in SETTINGS:  # a flag's name, which a --config file takes: a sweep file names the key
            raise _fail(path, where, f"a sweep file names this setting by its key, {spelled} (--{key} on the command line)")
        raise _fail(path, where, f"unknown setting; expected one of: {', '.join(sorted(SETTINGS))}")
    if key == "norm":
        try:
            if not isinstance(value, str):
                raise ValueError(f"unknown norm {value!r}")
            canonical_norm(value)
        except ValueError as err:  # the registry's own words: the choices, and the nearest name
            from atnbench.registry import SCHEMES

            said = str(err) if isinstance(value, str) else \
                f"{err}; choose one of: {', '.join(list(SCHEMES) + list(NORM_ALIASES))}"
            raise _fail(path, where, said) from None
        return
    if key == "k" and value == "T":
        return
    expected = FIELD_TYPES[key]
    if not type_ok(expected, value):
        hint = " or T (the run's sequence length)" if key == "k" else ""
        if isinstance(value, str) and float in (typing.get_args(expected) or (expected,)):
            hint = " (YAML reads 1e-3 as text: write 1.0e-3)"
        raise _fail(path, where, f"expected {_type_name(expected)}{hint}, got {value!r}")


def _check_values(path: Path, where: str, key: str, values: Any, plain_ok: bool) -> list:
    """A grid list (or, in a runs entry, a plain value) -> the list of values it stands for."""
    if not isinstance(values, list):
        if plain_ok and not isinstance(values, dict):
            values = [values]
        else:
            raise _fail(path, where, f"expected a non-empty list of values, got {values!r}")
    if not values:
        raise _fail(path, where, "empty list; expected at least one value")
    for value in values:
        check_setting(path, where, key, value)
    seen = set()
    for value in values:  # a typo (k: [25, 25] for [25, 45]) would lose a configuration without a word
        marker = json.dumps(value, sort_keys=True, default=str)
        if marker in seen:
            raise _fail(path, where, f"{value!r} appears twice in {values}")
        seen.add(marker)
    return list(values)


def _mapping(path: Path, key: str, value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(path, key, f"expected a mapping of {what}, got {type(value).__name__}")
    return value


def load_sweep(name_or_path: str | Path) -> SweepSpec:
    """Find, read and check a sweep file (see the module doc for the format)."""
    from atnbench.tasks import task_names  # late: the task registry imports torch

    path = find_preset_file("sweeps", name_or_path)
    data = read_yaml_mapping(path)
    check_top_level(path, data, TOP_LEVEL, REQUIRED)
    for key in ("name", "description", "citation"):
        if key in data and not (isinstance(data[key], str) and data[key].strip()):
            raise _fail(path, key, f"expected a one-line string, got {data[key]!r}")
    if data["task"] not in task_names():
        raise _fail(path, "task", f"unknown task {data['task']!r}; expected one of: {', '.join(task_names())}")

    base = _mapping(path, "base", data.get("base") or {}, "run settings")
    for key, value in base.items():
        check_setting(path, f"base.{key}", key, value)

    if "grid" not in data and "runs" not in data:
        raise _fail(path, "grid", "missing; give a grid (setting -> list of values) or a runs list")
    grid: dict[str, list] = {}
    if "grid" in data:
        raw = _mapping(path, "grid", data["grid"] if data["grid"] is not None else {}, "setting -> list of values")
        if not raw:
            raise _fail(path, "grid", "empty; expected at least one setting with a list of values")
        for key, values in raw.items():
            grid[key] = _check_values(path, f"grid.{key}", key, values, plain_ok=False)

    runs: list[dict[str, list]] = []
    if "runs" in data:
        raw_runs = data["runs"]
        if not isinstance(raw_runs, list) or not raw_runs:
            raise _fail(path, "runs", f"expected a non-empty list of run settings, got {raw_runs!r}")
        for i, entry in enumerate(raw_runs):
            entry = _mapping(path, f"runs[{i}]", entry if entry is not None else {}, "run settings")
            checked = {}
            for key, values in entry.items():
                if key in grid:
                    raise _fail(path, f"runs[{i}].{key}", "also set in grid; set it in one place")
                checked[key] = _check_values(path, f"runs[{i}].{key}", key, values, plain_ok=True)
            runs.append(checked)

    seeds = data.get("seeds", list(DEFAULT_SEEDS))
    if not isinstance(seeds, list) or not seeds:
        raise _fail(path, "seeds", f"expected a non-empty list of seeds, got {seeds!r}")
    for seed in seeds:
        if type(seed) is not int or not 0 <= seed <= SEED_MAX:
            raise _fail(path, "seeds", f"expected integers from 0 to {SEED_MAX}, got {seed!r}")
    if len(set(seeds)) != len(seeds):
        raise _fail(path, "seeds", f"a seed appears twice in {seeds}")

    return SweepSpec(
        name=data.get("name", path.stem).strip(), description=data["description"].strip(),
        task=data["task"], source=path, citation=data.get("citation"),
        base=dict(base), grid=grid, runs=runs, seeds=tuple(seeds),
    )


def parse_seeds(text: str) -> tuple[int, ...]:
    """``--seeds 0,1,2`` (also ``0-4`` ranges) -> (0, 1, 2); every seed in [0, SEED_MAX], and no
    more seeds than a plan may hold (a range is counted before it is listed)."""
    ranges: list[tuple[int, int]] = []
    try:
        for part in (p.strip() for p in text.split(",")):
            if "-" in part[1:]:
                low, high = (int(x) for x in part.split("-", 1))
                ranges.append((low, high))
            elif part:
                ranges.append((int(part), int(part)))
    except ValueError:
        raise ConfigError(f"--seeds: expected integers like 0,1,2 or 0-4, got {text!r}") from None
    if not ranges or any(low < 0 or low > high for low, high in ranges):
        raise ConfigError(f"--seeds: expected integers >= 0 like 0,1,2 (a range low-high with low <= high), "
                          f"got {text!r}")
    if any(high > SEED_MAX for _, high in ranges):
        raise ConfigError(f"--seeds: seeds go from 0 to {SEED_MAX}, got {text!r}")
    count = sum(high - low + 1 for low, high in ranges)
    if count > MAX_PLANNED_RUNS:
        raise ConfigError(f"--seeds {text} names {count:,} seeds; a plan holds at most {MAX_PLANNED_RUNS:,} runs: "
                          f"give fewer seeds at a time")
    seeds = [seed for low, high in ranges for seed in range(low, high + 1)]
    if len(set(seeds)) != len(seeds):  # as a sweep file's seeds: a seed twice is a typo, not two runs
        twice = next(seed for i, seed in enumerate(seeds) if seed in seeds[:i])
        raise ConfigError(f"--seeds {text}: seed {twice} is given twice")
    return tuple(seeds)


def check_plan_size(runs: int, what: str) -> None:
    """ConfigError unless ``runs`` (before duplicates are merged) fits one plan (MAX_PLANNED_RUNS):
    a plan is listed, priced and checked run by run, so a bigger one would take minutes to say anything."""
    if runs > MAX_PLANNED_RUNS:
        raise ConfigError(f"{what} is {runs:,} runs; a sweep or reproduce plan holds at most "
                          f"{MAX_PLANNED_RUNS:,}: give fewer seeds (--seeds) or settings at a time")


def list_sweeps() -> list[str]:
    return list_presets("sweeps")

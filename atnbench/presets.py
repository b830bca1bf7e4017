"""Task presets: the paper's hyper-parameters per task, as YAML files found by name.

A preset is data rather than code so that it can be checked against the paper line by line,
and so that a user can override one by putting ``tasks/NAME.yaml`` in the folder they run from.
Every mistake in a preset file is a ``ConfigError`` naming the file and the key, raised at load
time rather than as a confusing failure halfway through a sweep.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional


from atnbench.config import FIELDS, ConfigError, RunConfig

KINDS = ("tasks", "sweeps")
PACKAGE_DIR = Path(__file__).resolve().parent
TOP_LEVEL = ("task", "citation", "default_T", "defaults", "per_T", "variants", "aliases")
REQUIRED = ("task", "citation", "default_T", "defaults")
LAYER_FIELDS = (FIELDS | {"epochs"}) - {"task", "T", "variant"}  # those three the preset sets itself
FIELD_TYPES = {**typing.get_type_hints(RunConfig), "epochs": float}


@dataclass(frozen=True)
class TaskPreset:
    task: str
    citation: str
    default_T: int
    defaults: dict[str, Any]
    per_T: dict[int, dict[str, Any]]
    variants: dict[str, dict[str, Any]]
    source: Path
    # old variant names that still resolve: name -> the variant it now is (None: the defaults)
    aliases: dict[str, Optional[str]] = field(default_factory=dict)
    min_T: int = 1  # the task's shortest T, from the task lookup that read the preset

    def canonical_variant(self, name: Optional[str]) -> Optional[str]:
        """The variant a name stands for: an alias resolves (to None when it names the
        defaults), so runs of the same settings share a run id whatever name was given."""
        if name is not None and name in self.aliases:
            return self.aliases[name]
        if name is not None and name not in self.variants:
            known = ", ".join(sorted(self.variants)) or "(none)"
            raise ConfigError(f"{self.source}: unknown variant {name!r}; known variants: {known}")
        return name


# --- finding files (shared with the sweeps loader) -------------------------------------------

def search_dirs(kind: str) -> list[Path]:
    """Where presets of a kind live, first match wins: the working folder, then package data
    (wheels force-include the top-level folders there), then the source tree (editable installs)."""
    if kind not in KINDS:
        raise ValueError(f"unknown preset kind {kind!r}; choose one of: {', '.join(KINDS)}")
    dirs = [Path.cwd() / kind, PACKAGE_DIR / "preset_data" / kind]
    if (PACKAGE_DIR.parent / "pyproject.toml").is_file():  # a checkout, not site-packages
        dirs.append(PACKAGE_DIR.parent / kind)
    unique: list[Path] = []
    for folder in dirs:
        if folder.resolve() not in [d.resolve() for d in unique]:
            unique.append(folder)
    return unique


def list_presets(kind: str) -> list[str]:
    return sorted({p.stem for folder in search_dirs(kind) if folder.is_dir() for p in folder.glob("*.yaml")})


def list_task_presets() -> list[str]:
    return list_presets("tasks")


def find_preset_file(kind: str, name: str | Path) -> Path:
    """An existing file path as given, else ``NAME.yaml`` in the first of ``search_dirs(kind)``."""
    path = Path(name)
    if path.exists() and not path.is_dir():  # a FIFO or a device too: the reader says what it is
        return path
    folders = search_dirs(kind)
    if path.suffix in (".yaml", ".yml") or len(path.parts) > 1:  # a path, not a preset's name
        raise ConfigError(f"{name}: is a folder, not a {kind[:-1]} file" if path.is_dir() else f"{name}: no such preset file")
    for folder in folders:
        if (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    known = ", ".join(list_presets(kind)) or "(none)"
    searched = ", ".join(str(f) for f in folders)
    raise ConfigError(f"no {kind} preset named {name!r} (searched {searched}); known: {known}")


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """A YAML file of keys, read by the one reader of users' files (``atnbench.userfiles``)."""
    from atnbench.userfiles import read_yaml

    data = read_yaml(path)
    if data is None:
        raise ConfigError(f"{path}: is empty (or only comments); expected a mapping of keys (key: value lines)")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys (key: value lines) at the top level, "
                          f"got {_YAML_KINDS.get(type(data), type(data).__name__)}")
    return data


# What a file holds when it is not a mapping, in YAML's words (a user wrote YAML, not Python).
_YAML_KINDS = {list: "a list", str: "a single text value", int: "a number", float: "a number", bool: "true or false"}


# --- task presets -----------------------------------------------------------------------------

def _fail(path: Path, key: str, expected: str) -> ConfigError:
    return ConfigError(f"{path}: key '{key}': {expected}")


def type_ok(expected: Any, value: Any) -> bool:
    options = typing.get_args(expected) or (expected,)
    if value is None:
        return type(None) in options
    base = next(t for t in options if t is not type(None))
    if base in (int, float):  # an int is a fine float; a bool is neither
        return isinstance(value, (int, float) if base is float else int) and not isinstance(value, bool)
    return isinstance(value, base)


def check_layer(path: Path, where: str, layer: Any) -> dict[str, Any]:
    if not isinstance(layer, dict):
        raise _fail(path, where, f"expected a mapping of run settings, got {type(layer).__name__}")
    for key, value in layer.items():
        if key not in LAYER_FIELDS:
            raise _fail(path, f"{where}.{key}", f"unknown setting; expected one of: {', '.join(sorted(LAYER_FIELDS))}")
        expected = FIELD_TYPES[key]
        if not type_ok(expected, value):
            name = " or ".join("null" if t is type(None) else t.__name__
                               for t in typing.get_args(expected) or (expected,))
            hint = ""
            if isinstance(value, str) and expected in (float, Optional[float]):
                hint = " (YAML reads 1e-3 as text: write 1.0e-3)"
            raise _fail(path, f"{where}.{key}", f"expected {name}, got {value!r}{hint}")
    if "epochs" in layer and "steps" in layer:
        raise _fail(path, f"{where}.epochs", "give epochs or steps, not both")
    from atnbench.config import check_values

    for key, value in layer.items():  # ranges too (hidden >= 1, a finite lr), named with the file and key
        check_values({key: value}, f"{path}: key '{where}.{key}'")
    return layer


def check_top_level(path: Path, data: dict[str, Any], allowed: tuple[str, ...], required: tuple[str, ...]) -> None:
    """Unknown or missing top-level keys of a preset file, named with the file."""
    for key in data:
        if key not in allowed:
            raise _fail(path, key, f"unknown top-level key; expected one of: {', '.join(allowed)}")
    for key in required:
        if key not in data:
            raise _fail(path, key, "missing")


def read_task_preset(path: Path, min_T_of: Callable[[str], Optional[int]]) -> TaskPreset:
    """The preset file at ``path``, checked; ``min_T_of(task)`` is the shortest T the file's task
    takes, None for a name that is no task (the caller's task lookup: presets sit below it)."""
    stat = path.stat()
    return _read_task_preset(path, path.resolve(), stat.st_mtime_ns, stat.st_size, min_T_of)


@functools.lru_cache(maxsize=64)
def _read_task_preset(path: Path, resolved: Path, mtime_ns: int, size: int,
                      min_T_of: Callable[[str], Optional[int]]) -> TaskPreset:
    """One version of a preset file (where it is, modification time, size), read and checked
    once: a sweep resolves it for every run, and parsing the YAML each time was most of its
    expansion. An edited file is read again."""
    data = read_yaml_mapping(path)
    check_top_level(path, data, TOP_LEVEL, REQUIRED)
    min_T = min_T_of(data["task"]) if isinstance(data["task"], str) else None
    if min_T is None:
        raise _fail(path, "task", f"unknown task {data['task']!r} (`atnbench tasks` lists them)")
    if not isinstance(data["citation"], str):
        raise _fail(path, "citation", "expected a one-line string")
    if type(data["default_T"]) is not int or data["default_T"] < 1:
        raise _fail(path, "default_T", f"expected a positive integer, got {data['default_T']!r}")
    per_T, variants = data.get("per_T") or {}, data.get("variants") or {}
    for key, table in (("per_T", per_T), ("variants", variants)):
        if not isinstance(table, dict):
            raise _fail(path, key, f"expected a mapping, got {type(table).__name__}")
    for T, layer in per_T.items():
        if type(T) is not int or T < 1:
            raise _fail(path, f"per_T.{T}", "expected a positive integer T as the key")
        check_layer(path, f"per_T.{T}", layer)
    for name, layer in variants.items():
        if not isinstance(name, str):
            raise _fail(path, f"variants.{name}", "expected a string variant name")
        check_layer(path, f"variants.{name}", layer)
    aliases = data.get("aliases") or {}
    if not isinstance(aliases, dict):
        raise _fail(path, "aliases", f"expected a mapping of old name -> variant (or null), got {type(aliases).__name__}")
    for name, target in aliases.items():
        if not isinstance(name, str) or name in variants:
            raise _fail(path, f"aliases.{name}", "expected a string name that is not also a variant")
        if target is not None and target not in variants:
            raise _fail(path, f"aliases.{name}", f"expected null (the defaults) or a variant name, got {target!r}")
    return TaskPreset(
        task=data["task"], citation=data["citation"], default_T=data["default_T"],
        defaults=dict(check_layer(path, "defaults", data["defaults"])),
        per_T={T: dict(layer) for T, layer in per_T.items()},
        variants={name: dict(layer) for name, layer in variants.items()},
        source=path, aliases=dict(aliases), min_T=min_T,
    )


def resolve_preset(preset: TaskPreset, T: Optional[int] = None, variant: Optional[str] = None) -> dict[str, Any]:
    """RunConfig field values for one T: defaults, then ``per_T[T]``, then ``variants[variant]``.

    A later layer's ``steps`` replaces an earlier ``epochs`` and vice versa; ``epochs`` becomes
    ``steps = epochs * steps_per_epoch`` with the final ``steps_per_epoch``.
    """
    T = preset.default_T if T is None else T
    if T < preset.min_T:
        raise ConfigError(f"{preset.source}: T={T} is too short for the {preset.task} task (min_T={preset.min_T})")
    layers = [preset.defaults, preset.per_T.get(T, {})]
    variant = preset.canonical_variant(variant)
    if variant is not None:
        layers.append(preset.variants[variant])
    merged: dict[str, Any] = {}
    for layer in layers:
        for replaced_by, replaced in (("epochs", "steps"), ("steps", "epochs")):
            if replaced_by in layer:
                merged.pop(replaced, None)
        options = {**(merged.get("options") or {}), **(layer.get("options") or {})}  # merged key by key
        merged.update(layer)
        if options:
            merged["options"] = options
    epochs = merged.pop("epochs", None)
    if epochs is not None:
        if not merged.get("steps_per_epoch"):
            raise ConfigError(f"{preset.source}: key 'epochs': needs steps_per_epoch to convert to steps")
        merged["steps"] = round(epochs * merged["steps_per_epoch"])
    return {"task": preset.task, "T": T, **merged, "variant": variant}

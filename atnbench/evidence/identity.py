"""Run identity: two configs share a run id exactly when they must produce the same numbers.

The id is a hash of ``identity(config)``, the config with

* value types normalised (``momentum: 0`` and ``0.0`` are one run; ``T: 20.0`` is ``20``);
* settings that cannot matter collapsed: the plain cell has no normalization, so its ``eps``,
  ``affine``, ``k`` and bias placement are dropped; ``k`` is dropped for every norm without a
  window; a window at least as long as a generated sequence is that sequence's length (the
  window then always holds every step so far); ``momentum`` is dropped for optimizers without
  one; the CPU thread count is dropped off the CPU;
* data locations replaced by a fingerprint of the data files' contents (moving the data keeps
  the id; changing a file changes it); a task written in Python enters by its file's contents and
  the name of the object it exports, not by where the file lies (until 2026-11-27 its path entered
  too: ``run_ids_under`` still accepts the ids that rule gave, so runs stored under it stay valid);
* settings added after ``FIRST_FIELDS`` left out at their neutral value (their default, e.g.
  ``patience`` 0: early stopping off), so a run stored before the setting existed keeps its id;
* what does matter added: the thread count and device type (reductions, hence the last bits,
  depend on them) and ``code_fingerprint()``;
* a setting added after the first runs were stored (a RunConfig field not in ``FIRST_FIELDS``)
  left out at its neutral value, its default: there it does what the code did before the setting
  existed, so adding it keeps every stored and published run's id.

"The code" is every module that computes a run's numbers: ``atnbench/nn`` (Python and the C++
sources), ``atnbench/tasks``, ``atnbench/data``, ``run/train.py``, ``run/schedule.py``, ``zoo.py`` and
``registry.py`` (each normalization's modules, bias placement and initialisation). The
torch build, like the processor, belongs to the machine: it is recorded with every run, not part
of its id, so one id run on two machines may differ in the last bits (``atnbench store merge``
reports that as a conflict). Python files are fingerprinted by their syntax tree without docstrings, so
comments, docstrings and formatting do not count; C++ files with comments and blank space
removed. A change to anything else (reports, CLI, store) keeps every id.

``config_key`` is the identity without the code fingerprint: the same experiment run by other
code. A stored run with the current ``config_key`` but another fingerprint is *stale*.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import os
import re
import sys
import tempfile
import typing
from pathlib import Path
from typing import Any, Optional

from atnbench.userfiles import cache_base, file_digest

PACKAGE = Path(__file__).resolve().parent.parent
CODE_PATHS = ("nn", "tasks", "data", "run/train.py", "run/schedule.py", "zoo.py", "registry.py")
# task_code: a user task's Python file; task_reads: the files and folders its code reads (its `reads:`)
DATA_OPTIONS = ("data_dir", "data_files", "task_code", "task_reads")
MOMENTUM_OPTIMIZERS = ("rmsprop", "sgd")
# RunConfig's fields when runs were first stored: each enters every id at any value (its default
# included), as it always has, so the ids of stored and published runs stay. Never add to this:
# a later field enters an id only away from its neutral value (``_drop_neutral_settings``).
FIRST_FIELDS = frozenset((
    "task", "T", "norm", "k", "eps", "affine", "bias_inside", "cell", "init", "hidden", "layers", "batch_size",
    "optimizer", "lr", "momentum", "steps", "steps_per_epoch", "eval_every", "val_samples", "clip", "seed",
    "budget", "variant", "options", "threads", "device",
))


def run_id_of(config) -> str:
    """Deterministic id of a config (a RunConfig or a dict of its fields): 12 hex digits of a
    SHA-256 of its identity with the code."""
    return run_id_under(config if isinstance(config, dict) else config.to_dict(), code_fingerprint())


def run_id_under(config: dict[str, Any], code: str) -> str:
    """The run id ``config`` has under the code of fingerprint ``code`` (a record made elsewhere)."""
    return _digest({**identity(config), "code": code})


def run_ids_under(config: dict[str, Any], code: str) -> tuple[str, ...]:
    """Every id ``config`` has had under code ``code``, the current one first: a run stored under an
    earlier rule of identity keeps the id it was given, and is the same run. The one earlier rule:
    a task from a Python file entered by the file's path as well (``identity(code_path=True)``)."""
    current = run_id_under(config, code)
    if not _code_path_entered(config):
        return (current,)
    return current, _digest({**identity(config, code_path=True), "code": code})


def config_keys(config: dict[str, Any]) -> tuple[str, ...]:
    """Every ``config_key`` the config has had, the current one first (``run_ids_under``): a study
    planned under the earlier rule recorded its experiments' keys by it."""
    current = config_key(config)
    return (current, _digest(identity(config, code_path=True))) if _code_path_entered(config) else (current,)


def _code_path_entered(config: dict[str, Any]) -> bool:
    """Whether the earlier rule gave this config another identity: a task from a Python file."""
    options = config.get("options") or {}
    user, code = options.get("user_task"), options.get("task_code")
    return isinstance(user, dict) and isinstance(code, str) and str(user.get("module", "")).startswith(code + ":")


def config_key(config: dict[str, Any]) -> str:
    """The id the config would have under any code: groups a run with its stale copies."""
    return _digest(identity(config))


def _digest(values: dict[str, Any]) -> str:
    blob = json.dumps(values, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def identity(config: dict[str, Any], code_path: bool = False) -> dict[str, Any]:
    """The canonical settings of a config (a dict of RunConfig fields; missing ones default).
    ``code_path``: the rule before 2026-11-27, under which a task from a Python file entered by its
    path too (``run_ids_under``)."""
    from atnbench.config import RunConfig

    fields = {f.name: f for f in dataclasses.fields(RunConfig)}
    values = {name: _default(field) for name, field in fields.items()}
    values.update({key: value for key, value in config.items() if key in fields})
    hints = _field_types()
    values = {name: _normalise(value, hints[name]) for name, value in values.items()}

    norm = values.get("norm") or "none"
    drop_stated_defaults(values)
    if norm == "none":
        for name in ("eps", "affine", "bias_inside"):
            values[name] = None
    from atnbench.registry import is_windowed  # the registry says which norms take a k

    if not is_windowed(norm):
        values["k"] = None
    else:
        user_task = "user_task" in (values.get("options") or {})  # never capped: found by name only where included
        length = None if user_task else _generated_length(values["task"], values["T"])
        if length is not None and values["k"] is not None:
            values["k"] = min(values["k"], length)
    if values.get("optimizer") not in MOMENTUM_OPTIMIZERS:
        values["momentum"] = None
    if values.get("device", "cpu") != "cpu":
        values["threads"] = None
    values["options"] = _options_identity(values.get("options") or {}, code_path)
    _drop_neutral_settings(values, fields, hints)
    return values


def _drop_neutral_settings(values: dict[str, Any], fields: dict[str, dataclasses.Field], hints) -> None:
    """Leave out each setting added after ``FIRST_FIELDS`` where it is at its neutral value (its
    default, normalised as the value is) or None (a rule above found it cannot matter): such a run
    is the run that was made before the setting existed, so it keeps that run's id."""
    for name in [name for name in values if name not in FIRST_FIELDS]:
        if values[name] is None or values[name] == _normalise(_default(fields[name]), hints[name]):
            del values[name]


@functools.cache
def _field_types() -> dict[str, Any]:
    """RunConfig's field types, resolved once (typing.get_type_hints was half of a sweep's expansion)."""
    from atnbench.config import RunConfig

    return typing.get_type_hints(RunConfig)


def drop_stated_defaults(values: dict[str, Any]) -> None:
    """A ``bias_inside`` or ``init`` equal to the norm's default says nothing the default does
    not: stored and identified as the default (None), so writing it out keeps the run id."""
    from atnbench.registry import get_scheme

    try:
        scheme = get_scheme(values.get("norm") or "none")
    except ValueError:  # an unknown norm is refused where the config is checked, not here
        return
    if values.get("bias_inside") is not None and values["bias_inside"] == scheme.bias_inside:
        values["bias_inside"] = None
    if values.get("init") == scheme.init:
        values["init"] = None


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return None


def _normalise(value: Any, hint: Any) -> Any:
    """int fields hold ints, float fields floats, whatever YAML or JSON made of them."""
    if value is None or isinstance(value, bool):
        return value
    types = typing.get_args(hint) or (hint,)
    if float in types and isinstance(value, (int, float)):
        return float(value)
    if int in types and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(key): _normalise_loose(item) for key, item in value.items()}
    return value


def _normalise_loose(value: Any) -> Any:
    """Task options have no declared types: integral floats become ints, recursively."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(key): _normalise_loose(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise_loose(item) for item in value]
    return value


def _generated_length(task: str, T: int) -> int | None:
    """The sequence length of a generated task (each batch starts a fresh window); None for
    real-data tasks, whose windows carry across batches."""
    from atnbench.tasks.registry import shipped_task  # the shipped table only: a user task is never capped

    spec = shipped_task(task)
    return spec.seq_len(T) if spec is not None and spec.make_source is None else None


# values of each setting that ``identity`` may drop, to ask whether it does for a config; both
# bias placements, since the one equal to the norm's default is always dropped
_PROBES = {"k": (1,), "eps": (0.5,), "affine": (True,), "bias_inside": (True, False), "momentum": (0.5,),
           "threads": (1,)}


def uses(config, key: str) -> bool:
    """Whether a setting can change this run (a RunConfig) at all: False where its identity drops
    it (k for a norm without a window, eps and the bias placement for the plain LSTM, momentum
    for Adam). The data options never decide that, so they are left out (no file is read)."""
    if key not in _PROBES:
        return True
    return any(identity({**config.to_dict(), "options": {}, key: value})[key] is not None for value in _PROBES[key])


def setting_of(config, key: str) -> Any:
    """A run's value of one setting as a reader names it: None where the run has no use for it
    (``uses``), the bias placement resolved to the norm's default where the config leaves it."""
    if not uses(config, key):
        return None
    value = getattr(config, key)
    if key == "bias_inside" and value is None:
        from atnbench.registry import get_scheme

        value = get_scheme(config.norm).bias_inside
    return value


def data_paths(options: Any) -> list[Path]:
    """The data files and folders a config's options name (``DATA_OPTIONS``: a path, or a
    split -> path mapping), as ``_options_identity`` reads them."""
    if not isinstance(options, dict):
        return []
    paths = []
    for key in DATA_OPTIONS:
        value = options.get(key)
        if value is not None:
            listed = value.values() if isinstance(value, dict) else value if isinstance(value, list) else (value,)
            paths.extend(Path(str(path)) for path in listed)
    return paths


def data_holding(options: Any, store: Path) -> Optional[Path]:
    """The data file or folder of a config's options (``data_paths``) that holds the results store
    ``store``: the store's own writes (the database and its -wal, its checkpoints and kept models
    beside it) would change that data's fingerprint, so the run's id, while the run trains."""
    where = Path(store).expanduser().resolve()
    for path in data_paths(options):
        data = Path(path).expanduser().resolve()
        if data == where or data in where.parents:
            return Path(path)
    return None


READING_ONLY = ("allow_pickle",)  # a user task's keys that say how its files may be read, not what they hold


def _options_identity(options: dict[str, Any], code_path: bool = False) -> dict[str, Any]:
    options = dict(options)
    if isinstance(options.get("user_task"), dict):  # allowed to unpickle or not, the same data: the same run
        options["user_task"] = {k: v for k, v in options["user_task"].items() if k not in READING_ONLY}
        if not code_path and _code_path_entered({"options": options}):
            # "FILE.py:OBJECT": the file enters by its contents (task_code below), the object by its name
            module = options["user_task"]["module"]
            options["user_task"]["module"] = "task_code" + module[len(options["task_code"]):]
    for key in DATA_OPTIONS:
        if key not in options:
            continue
        value = options.pop(key)
        if isinstance(value, dict):  # split -> file: which file feeds which split is part of the data
            options[f"{key}_content"] = {str(split): _data_fingerprint((str(path),)) for split, path in value.items()}
        elif isinstance(value, list):  # files and folders a task's code reads, each by its contents
            options[f"{key}_content"] = [_data_fingerprint((str(path),)) for path in value]
        else:
            options[f"{key}_content"] = _data_fingerprint((str(value),))
    return options


def _data_fingerprint(paths: tuple[str, ...]) -> str:
    """SHA-256 over the contents of the files at ``paths`` (folders walked, names relative)."""
    digest = hashlib.sha256()
    for root in paths:
        root_path = Path(root)
        files = sorted(p for p in root_path.rglob("*") if p.is_file()) if root_path.is_dir() else [root_path]
        for path in files:
            if path.name.endswith(".vocab.json"):  # atnbench's own cache beside the data
                continue
            name = path.relative_to(root_path).as_posix() if root_path.is_dir() else path.name
            digest.update(name.encode() + b"\0")
            digest.update(file_digest(path).encode())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """16 hex digits over the code that computes a run's numbers (see the module docstring).

    Parsing and dumping the syntax trees of the code's files costs ~0.45 s, paid by every process
    that starts a run; so the value is kept in ``~/.cache/atnbench/fingerprints.json``, under a
    hash of the files' bytes and the Python version (whose parser writes the trees). Any edited
    byte is another key: the cache can miss, never answer for other code."""
    sources = {path: path.read_bytes() for path in _code_files()}  # the key and the value from one reading
    key = _bytes_key(sources)
    cached = _read_cache().get(key)
    if isinstance(cached, str) and re.fullmatch(r"[0-9a-f]{16}", cached):
        return cached
    digest = hashlib.sha256()
    for path, raw in sources.items():
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(_source_digest(path, raw).encode())
    value = digest.hexdigest()[:16]
    _write_cache(key, value)
    return value


FINGERPRINT_CACHE_ENTRIES = 8  # installs, clones and worktrees used alternately on one machine


def _bytes_key(sources: dict[Path, bytes]) -> str:
    digest = hashlib.sha256(sys.version.encode() + b"\0")
    for path, raw in sources.items():
        digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(raw).digest())
    return digest.hexdigest()


def _cache_file() -> Path:
    return cache_base() / "fingerprints.json"


def _read_cache() -> dict:
    try:
        found = json.loads(_cache_file().read_text())
    except (OSError, ValueError, RuntimeError):  # none yet, unreadable, or no home folder
        return {}
    return found if isinstance(found, dict) else {}


def _write_cache(key: str, value: str) -> None:
    """Best effort: a read-only or missing home only means the next process parses again. Written
    whole and renamed into place, so a reader never sees half a file."""
    entries = {k: v for k, v in _read_cache().items() if k != key}
    entries[key] = value
    kept = dict(list(entries.items())[-FINGERPRINT_CACHE_ENTRIES:])
    written = None
    try:
        target = _cache_file()
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=target.parent, prefix=".fingerprints-", delete=False) as handle:
            written = Path(handle.name)
            json.dump(kept, handle)
        os.replace(written, target)
    except (OSError, RuntimeError):
        if written is not None:
            written.unlink(missing_ok=True)


def _code_files() -> list[Path]:
    files: list[Path] = []
    for name in CODE_PATHS:
        path = PACKAGE / name
        if path.is_dir():
            files.extend(p for p in path.rglob("*") if p.suffix in (".py", ".cpp", ".h", ".cu") and p.is_file())
        elif path.is_file():
            files.append(path)
    return sorted(files)


def _source_digest(path: Path, raw: bytes | None = None) -> str:
    """The digest of one file's code; ``raw``: its bytes, already read (decoded as a text-mode read
    of the file would: UTF-8 with replacement, universal newlines)."""
    raw = path.read_bytes() if raw is None else raw
    text = raw.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    if path.suffix == ".py":
        try:
            text = ast.dump(_strip_docstrings(ast.parse(text)), annotate_fields=False)
        except SyntaxError:
            pass
    else:
        text = re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.S)
        text = " ".join(text.split())
    return hashlib.sha256(text.encode()).hexdigest()


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree

"""User tasks: a YAML file outside the package that points at data files or at a task object.

A user task is found by name in the folders of ``$ATNBENCH_TASKS`` (``os.pathsep``-separated;
``--include DIR`` adds one), as ``NAME.yaml``. It reads::

    problem: sequence-classification   # or sequence-regression, step-classification, step-regression
    description: "one line"            # optional
    data:
      train: train.npz                 # paths relative to this file
      test: test.npz                   # optional; validation too
      split: {validation: 0.2, test: 0.0, seed: 0}   # carved from train where no file is given
      x: x                             # array or column names (see atnbench/tasks/userdata.py)
      y: y
      lengths: lengths                 # optional: valid steps of each padded sequence
      layout: NCT                      # arrays laid out (N, channels, T); tables: wide, long or nested
    standardize: true                  # inputs standardized with the training split's statistics
    inputs: features                   # or tokens: integer ids read through an embedding (embedding: 64)
    metric: accuracy                   # classification: accuracy, bpc or ppl; regression: mae
    default_T: 29                      # optional: default, the longest sequence of any split
    defaults: {hidden: 64, lr: 1.0e-3} # RunConfig settings, as in a shipped preset; variants too
    allow_pickle: false                # true: object arrays in .npz/.npy are unpickled (runs the file's code)

or, for a generator or a loader written in Python, ``module: tasks.py:SPEC`` (a file beside the
YAML, or an importable ``package.module:OBJECT``) naming a ``TaskSpec``. The whole definition,
with the data files' absolute paths, goes into the run's ``options``, so a run is a function of
its config and the data's contents enter its id (``atnbench.evidence.identity``). ``T`` caps a sequence's
length: a longer sequence keeps its first T steps.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from atnbench.config import ConfigError
from atnbench.limits import INT_MAX
from atnbench.tasks.registry import SCHEDULE_OPTIONS

ENV_FOLDERS = "ATNBENCH_TASKS"
SPLIT_NAMES = ("train", "validation", "test")
USER_KEYS = ("problem", "data", "module")  # a task YAML with one of these is a user task
# what a user task's runs read of ``options`` besides its definition (atnbench.run.schedule); any
# other key would enter every run's config and id and change nothing
USER_OPTIONS = SCHEDULE_OPTIONS


class Split(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    validation: float = Field(0.2, ge=0, lt=1)
    test: float = Field(0.0, ge=0, lt=1)
    seed: StrictInt = Field(0, ge=0)


class DataBlock(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    train: Union[StrictStr, dict[str, StrictStr]]
    validation: Union[StrictStr, dict[str, StrictStr], None] = None
    test: Union[StrictStr, dict[str, StrictStr], None] = None
    split: Split = Split()
    x: Union[StrictStr, list[StrictStr], None] = None
    y: StrictStr = "y"
    lengths: Optional[StrictStr] = None
    layout: Optional[Literal["wide", "long", "nested", "NTC", "NCT"]] = None  # tables; NumPy arrays
    id: StrictStr = "id"
    time: Optional[StrictStr] = "time"


class Definition(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    name: Optional[StrictStr] = None
    description: Optional[StrictStr] = None
    citation: Optional[StrictStr] = None
    problem: Optional[Literal["sequence-classification", "sequence-regression", "step-classification",
                              "step-regression"]] = None
    data: Optional[DataBlock] = None
    module: Optional[StrictStr] = None
    standardize: StrictBool = True
    inputs: Literal["features", "tokens"] = "features"  # tokens: integer ids through an embedding
    embedding: Optional[StrictInt] = Field(None, ge=1)  # tokens: the embedding size (default 64)
    metric: Optional[Literal["accuracy", "bpc", "ppl", "mae"]] = None  # default: accuracy or mae
    default_T: Optional[StrictInt] = Field(None, ge=1, le=INT_MAX)  # as --T: SQLite's largest integer
    defaults: dict[str, Any] = {}
    allow_pickle: StrictBool = False  # object arrays are read with pickle, which runs code from the file
    reads: list[StrictStr] = []  # a task from code: the files and folders its code reads (they enter the id)
    per_T: dict[int, dict[str, Any]] = {}
    variants: dict[str, dict[str, Any]] = {}


# --- finding ------------------------------------------------------------------------------------

def folders() -> list[Path]:
    """The folders user tasks are looked for in, in order (``$ATNBENCH_TASKS``)."""
    return [Path(p) for p in os.environ.get(ENV_FOLDERS, "").split(os.pathsep) if p]


def include(paths: list[Path]) -> None:
    """Add folders to the search (``--include``), ahead of ``$ATNBENCH_TASKS``; through the
    environment, so a sweep's worker processes look where the command looked."""
    for path in paths:
        if not path.is_dir():
            raise ConfigError(f"--include {path}: " + ("is a file; give the folder that holds task files"
                                                       if path.exists() else "no such folder"))
    given = [str(p.expanduser().absolute()) for p in paths]
    kept = [str(p) for p in folders() if str(p) not in given]
    os.environ[ENV_FOLDERS] = os.pathsep.join(given + kept)


def is_user_task_file(data: dict) -> bool:
    return any(key in data for key in USER_KEYS)


def user_task_files() -> dict[str, Path]:
    """Every user task in the search folders: name -> YAML file (the first folder wins)."""
    from atnbench.presets import read_yaml_mapping

    from atnbench.tasks.registry import TASK_MODULES

    found: dict[str, Path] = {}
    for folder in folders():
        for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else ():
            if path.stem in TASK_MODULES:  # never a user task: refused where it is asked for (find)
                continue
            if path.stem in found or find(path.stem) != path:
                continue
            try:
                mine = is_user_task_file(read_yaml_mapping(path))
            except ConfigError:  # listed, so that looking it up says what is wrong with it
                mine = True
            if mine:
                found[path.stem] = path
    return found


def shadowing(name: str) -> Optional[Path]:
    """A search folder's file named like the shipped task ``name`` (it is never read)."""
    from atnbench.tasks.registry import TASK_MODULES

    if name not in TASK_MODULES:
        return None
    return next((folder / f"{name}.yaml" for folder in folders() if (folder / f"{name}.yaml").is_file()), None)


def find(name: str) -> Optional[Path]:
    """NAME.yaml in the first search folder that has it. A shipped task's name is never a user's:
    a file of that name is refused (by ``run``, ``sweep`` and ``tasks check`` alike), not
    silently passed over for the shipped task."""
    from atnbench.tasks.registry import TASK_MODULES

    shadow = shadowing(name)
    if shadow is not None:
        raise ConfigError(f"{shadow}: {name!r} is a shipped task, which a file of the same name cannot replace; "
                          f"rename the file (a task is found by its file's name)")
    if name in TASK_MODULES or not name or "/" in name or name.startswith("."):
        return None
    for folder in folders():
        path = folder / f"{name}.yaml"
        if path.exists() and not path.is_dir():  # a FIFO or a device too: the reader says what it is
            return path
    return None


# --- reading the YAML ---------------------------------------------------------------------------

def read_definition(path: Path) -> Definition:
    from atnbench.presets import read_yaml_mapping

    try:
        definition = Definition.model_validate(read_yaml_mapping(path))
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"] if not str(part).startswith("function-"))
        got = f", got {first['input']!r}" if first["type"] not in ("missing", "extra_forbidden") else ""
        problem = {"extra_forbidden": "unknown key", "missing": "required"}.get(first["type"], first["msg"])
        raise ConfigError(f"{path}: key '{where}': {problem}{got}") from None
    if (definition.data is None) == (definition.module is None):
        raise ConfigError(f"{path}: give 'data' (files) or 'module' (a TaskSpec in Python), one of them")
    if definition.data is not None and definition.reads:
        raise ConfigError(f"{path}: key 'reads': for a task from code (module:); the files under data: enter "
                          f"each run's id already")
    if definition.data is not None and definition.problem is None:
        raise ConfigError(f"{path}: key 'problem': required with 'data'; one of: sequence-classification, "
                          f"sequence-regression, step-classification, step-regression")
    if definition.problem is not None and definition.metric is not None:
        allowed = ("mae",) if definition.problem.endswith("regression") else ("accuracy", "bpc", "ppl")
        if definition.metric not in allowed:
            raise ConfigError(f"{path}: key 'metric': a {definition.problem} task reports {' or '.join(allowed)}, "
                              f"got {definition.metric!r}")
    if definition.embedding is not None and definition.inputs != "tokens":
        raise ConfigError(f"{path}: key 'embedding': only for inputs: tokens")
    if definition.name is not None and definition.name != path.stem:
        raise ConfigError(f"{path}: key 'name': {definition.name!r} differs from the file's name {path.stem!r}; "
                          f"a task is found by its file's name")
    return definition


def task_options(definition: Definition, path: Path) -> dict[str, Any]:
    """What a run's ``options`` carry of the task: its definition and its files, absolute."""
    base = path.parent.absolute()
    if definition.module is not None:
        target, _, obj = definition.module.rpartition(":")
        if not target or not obj:
            raise ConfigError(f"{path}: key 'module': expected 'file.py:OBJECT' or 'package.module:OBJECT', "
                              f"got {definition.module!r}")
        code = base / target if target.endswith(".py") else Path(_module_file(target, path))
        if not code.is_file():
            raise ConfigError(f"{path}: key 'module': no such file {code}")
        reads = [base / read for read in definition.reads]
        missing = next((read for read in reads if not read.exists()), None)
        if missing is not None:
            raise ConfigError(f"{path}: key 'reads': no such file or folder {missing}")
        return {"user_task": {"module": f"{code}:{obj}" if target.endswith(".py") else definition.module},
                "task_code": str(code), **({"task_reads": [str(read) for read in reads]} if reads else {})}
    data = definition.data
    files: dict[str, str] = {}
    for split in SPLIT_NAMES:
        given = getattr(data, split)
        if isinstance(given, dict):  # .npy files per part
            unknown = set(given) - {"x", "y", "lengths"}
            if unknown:
                raise ConfigError(f"{path}: key 'data.{split}': parts are x, y, lengths, got {sorted(unknown)}")
            files.update({f"{split}.{part}": str(base / file) for part, file in given.items()})
        elif given is not None:
            files[split] = str(base / given)
    for key, file in files.items():
        if "\0" in file:
            raise ConfigError(f"{path}: key 'data.{key}': a file name cannot hold a NUL character, got {file!r}")
    _refuse_training_files_held_out(path, files)
    fields = data.model_dump(exclude={"train", "validation", "test", "split"})
    split = {name: value for name, value in data.split.model_dump().items()
             if name == "seed" or getattr(data, name) is None}  # fractions only where no file is given
    user = {"problem": definition.problem, "fields": fields, "split": split, "standardize": definition.standardize}
    if definition.inputs == "tokens":  # keys only where they are set: older definitions keep their run ids
        user["tokens"] = {"embedding": definition.embedding or 64}
    if definition.metric is not None:
        user["metric"] = definition.metric
    if definition.allow_pickle:
        user["allow_pickle"] = True
    return {"user_task": user, "data_files": files}


def _module_file(target: str, path: Path) -> str:
    spec = importlib.util.find_spec(target.split(".")[0]) and importlib.util.find_spec(target)
    if spec is None or not spec.origin:
        raise ConfigError(f"{path}: key 'module': no importable module {target!r}")
    return spec.origin


def get_user_task(name: str):
    """The TaskSpec of the user task NAME (None if no search folder holds one)."""
    from atnbench.tasks.user import spec_from_options

    path = find(name)
    if path is None:
        return None
    return spec_from_options(name, task_options(read_definition(path), path))


def _fit_length(given: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The suggested defaults fitted to a run length the task file sets (steps or epochs): the
    file's length replaces the step budget, and unless the file sets it too, the evaluation
    interval is the one for that length (``userprep.evaluation_interval``)."""
    from atnbench.tasks.userprep import evaluation_interval

    if "epochs" not in given and "steps" not in given:
        return defaults
    fitted = {key: value for key, value in defaults.items() if key != "steps"}
    per_epoch = given.get("steps_per_epoch") or defaults["steps_per_epoch"]
    steps = given["steps"] if "steps" in given else max(1, round(given["epochs"] * per_epoch))
    if "eval_every" not in given:
        fitted["eval_every"] = evaluation_interval(steps, per_epoch)
    return fitted


def load_preset(path: Path):
    """The TaskPreset of a user task file: its defaults over defaults that fit its data."""
    from atnbench.presets import TaskPreset, check_layer
    from atnbench.tasks.user import spec_from_options

    definition = read_definition(path)
    options = task_options(definition, path)
    given = _check_options(path, "defaults", check_layer(path, "defaults", definition.defaults))
    defaults, longest = {}, None
    if "module" not in options["user_task"]:
        from atnbench.tasks.userprep import prepared, suggested_defaults

        prep = prepared(options["user_task"], options["data_files"])
        # the longest sequence of any split: no test sequence is cut unless the file says T
        defaults = _fit_length(given, suggested_defaults(prep, given.get("batch_size")))
        longest = max(len(seq) for part in prep.splits.values() for seq in part.xs)
    defaults.update(given)
    defaults["options"] = {**(given.get("options") or {}), **options}
    default_T = definition.default_T or longest
    if default_T is None:
        raise ConfigError(f"{path}: key 'default_T': required for a task written in Python")
    return TaskPreset(
        task=path.stem, citation=definition.citation or definition.description or f"user task {path}",
        default_T=default_T, defaults=defaults,
        per_T={T: dict(_check_options(path, f"per_T.{T}", check_layer(path, f"per_T.{T}", layer)))
               for T, layer in definition.per_T.items()},
        variants={v: dict(_check_options(path, f"variants.{v}", check_layer(path, f"variants.{v}", layer)))
                  for v, layer in definition.variants.items()},
        source=path, min_T=spec_from_options(path.stem, options).min_T)


def _check_options(path: Path, where: str, layer: dict[str, Any]) -> dict[str, Any]:
    """A layer whose ``options`` hold only what a user task's run reads (USER_OPTIONS)."""
    given = layer.get("options")
    if given is None:
        return layer
    if not isinstance(given, dict):
        raise ConfigError(f"{path}: key '{where}.options': expected a mapping, got {given!r}")
    unknown = sorted(str(key) for key in given if key not in USER_OPTIONS)
    if unknown:
        raise ConfigError(f"{path}: key '{where}.options.{unknown[0]}': unknown option; a task of your own "
                          f"takes {' and '.join(USER_OPTIONS)} (its data and code are its file's)")
    return layer


def _refuse_training_files_held_out(path: Path, files: dict[str, str]) -> None:
    """A validation or test split read from the training file scores the model on sequences it
    trained on: early stopping, the kept weights and the reported numbers would all be on seen data."""
    def real(split: str) -> set[str]:
        return {os.path.realpath(file) for key, file in files.items() if key == split or key.startswith(f"{split}.")}

    def copied(held: set[str], other: set[str]) -> bool:  # a copy is the same data under another name
        from atnbench.userfiles import file_digest

        def sizes(paths):
            return {os.path.getsize(p) for p in paths if os.path.isfile(p)}

        if not held or not sizes(held) <= sizes(other):  # read only files that could be copies
            return False
        if not all(os.path.isfile(p) for p in held | other):  # not there, or a folder: the data check names it
            return False
        return {file_digest(p) for p in held} <= {file_digest(p) for p in other}  # cached, as for run ids

    train = real("train")
    for split in ("validation", "test"):
        held = real(split)
        if held and (held <= train or copied(held, train)):
            raise ConfigError(f"{path}: key 'data.{split}': {files.get(split) or sorted(held)[0]} is the training "
                              f"file too (or a copy of it); a {split} split must hold other sequences (leave "
                              f"data.{split} out to carve it from the training file: data.split)")
    validation, test = real("validation"), real("test")
    if validation and test and (validation == test or copied(test, validation) and copied(validation, test)):
        raise ConfigError(f"{path}: key 'data.test': {files.get('test') or sorted(test)[0]} holds what data.validation "
                          f"holds; the test split must not be the one validation selects on (its scores would be "
                          f"the selected ones)")

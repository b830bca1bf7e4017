"""From a task name and what the user said to one resolved, validated RunConfig.

Precedence (later wins): built-in defaults < task preset (defaults, per_T, variant) <
``--config FILE`` < command-line flags. ``budget`` then shrinks the run proportionally
(training steps, evaluation interval and validation set) so a paper protocol fits a laptop;
the budget is part of the config, so shrunk runs are labelled and never mistaken for full ones.
Settings that cannot change a run's numbers are canonicalised (``_canonicalise``), so the
same experiment has the same run id whether it came from ``atnbench run`` or a sweep.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional


from atnbench.config import FIELDS, ConfigError, RunConfig, build_config, check_budget, check_values
from atnbench.errors import UserError
from atnbench.evidence.identity import drop_stated_defaults
from atnbench.limits import INT_MAX
from atnbench.presets import resolve_preset
from atnbench.tasks.lookup import load_task_preset
from atnbench.run.resources import Estimate, run_estimate
from atnbench.registry import canonical_norm, get_scheme
from atnbench.tasks import get_task, task_for


def read_config_file(path: Path) -> dict[str, Any]:
    """A YAML or JSON mapping of RunConfig fields (``epochs`` allowed)."""
    from atnbench.userfiles import read_settings

    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"config file {path} is a folder")
    if not path.exists():
        raise ConfigError(f"config file not found: {path}")
    data = read_settings(path)  # a FIFO, a device, a huge or non-UTF-8 file: refused, one line
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    data = flag_names_to_keys(data, str(path))
    unknown = sorted(str(key) for key in set(data) - FIELDS - {"epochs", "variant"})
    if unknown:  # named with its file here: later it was the sweep file's mistake, or nobody's
        raise ConfigError(f"{path}: unknown config key(s): {', '.join(unknown)}; known: "
                          f"{', '.join(sorted(FIELDS | {'epochs', 'iters'}))}")
    # the file's device is --device's (``device_and_threads``): auto too, which a run's config never is
    check_values({key: value for key, value in data.items() if (key, value) != ("device", "auto")}, str(path))
    return data


# a config file may name a setting as its flag does (iters, batch-size, data-dir) or as its key
FLAG_KEYS = {"iters": "steps"}
TASK_FLAGS = ("data_dir", "data_files", "permute")  # flags that land in the task's ``options``


def flag_names_to_keys(data: dict[str, Any], where: str) -> dict[str, Any]:
    """``data`` with flag spellings (``iters``, ``batch-size``, ``data-dir``) turned into config
    keys (``steps``, ``batch_size``, ``options.data_dir``); a setting named twice is an error."""
    keys: dict[str, Any] = {}
    named: dict[str, str] = {}
    for given, value in data.items():
        key = FLAG_KEYS.get(given, given.replace("-", "_")) if isinstance(given, str) else given
        if key in named:
            raise ConfigError(f"{where}: {named[key]} and {given} say the same thing; give one")
        named[key] = given
        keys[key] = value
    task_values = {key: keys.pop(key) for key in TASK_FLAGS if key in keys}
    if task_values:
        options = keys.get("options", {})
        if not isinstance(options, dict):
            raise ConfigError(f"{where}: options must be a mapping of task settings, got {options!r}")
        if "data_dir" in task_values and isinstance(task_values["data_dir"], str):
            task_values["data_dir"] = str(Path(task_values["data_dir"]).expanduser().absolute())
        if isinstance(task_values.get("data_files"), str):
            from atnbench.data import parse_data_files

            task_values["data_files"] = parse_data_files(task_values["data_files"])
        keys["options"] = {**options, **task_values}
    return keys


def _epochs_to_steps(values: dict[str, Any]) -> dict[str, Any]:
    values = dict(values)
    epochs = values.pop("epochs", None)
    if epochs is not None:
        check_values({"epochs": epochs}, "--epochs")
        per_epoch = values.get("steps_per_epoch")
        if not per_epoch:
            raise ConfigError("epochs given, but this task has no steps_per_epoch; give --iters instead")
        steps = float(epochs) * per_epoch
        if not steps <= INT_MAX:  # inf too: int(round(inf)) would raise OverflowError
            raise ConfigError(f"epochs must be at most {INT_MAX // per_epoch} ({per_epoch} steps each), got {epochs!r}")
        if round(steps) < 1:
            raise ConfigError(f"epochs {epochs!r} is less than one step ({per_epoch} steps per epoch)")
        values["steps"] = int(round(steps))
    return values


# Metrics of tasks that score whole text splits (language models): their validation set is the
# whole validation text, which a budget cannot shrink (val_samples does not apply).
WHOLE_SPLIT_METRICS = ("bpc", "ppl")


def apply_budget(values: dict[str, Any], budget: float, whole_splits: bool = False) -> dict[str, Any]:
    """Shrink steps, evaluation interval and validation set by ``budget`` in (0, 1].

    The evaluation cost then shrinks with the budget: as many evaluations, each of a smaller
    validation set. Where every evaluation scores whole splits (``whole_splits``: ptb-char,
    ptb-word, wikitext2) only fewer evaluations can do that, so the interval stays the full
    protocol's (once per epoch there) and the last step is always evaluated. Shrinking it
    kept all 150 evaluations of ptb-char's validation and test text in a run 1% as long.
    """
    values = dict(values, budget=check_budget(budget))
    if budget == 1:
        return values
    steps = values.get("steps", RunConfig.steps)
    values["steps"] = max(1, math.ceil(steps * budget))
    if not whole_splits:
        values["eval_every"] = max(1, math.ceil(values.get("eval_every", RunConfig.eval_every) * budget))
    batch = values.get("batch_size", RunConfig.batch_size)
    values["val_samples"] = max(batch, math.ceil(values.get("val_samples", RunConfig.val_samples) * budget))
    return values


def _canonicalise(values: dict[str, Any], preset_k: int) -> None:
    """One config, one run id: settings that cannot change the numbers take a fixed value.

    k only matters to windowed norms (ATN), so elsewhere it stays the preset's; a
    ``bias_inside`` or ``init`` equal to the norm's default is stored as the default (None).
    """
    if not get_scheme(values["norm"]).windowed:
        values["k"] = preset_k
    drop_stated_defaults(values)


def resolve_run(task_name: str, flags: dict[str, Any], config_file: Optional[Path] = None,
                variant: Optional[str] = None, budget: Optional[float] = None) -> RunConfig:
    """The RunConfig for ``atnbench run TASK`` (and every run of a sweep)."""
    task = get_task(task_name)
    flags = {key: value for key, value in flags.items() if value is not None}
    file_values = read_config_file(config_file) if config_file else {}
    given = set(TASK_FLAGS) & set(file_values.get("options") or {})
    if given and task.make_source is None:  # as for the flags (cli.run.task_options): nothing would read them
        raise ConfigError(f"{task.name} generates its data: {', '.join(sorted(given))} in {config_file} "
                          f"are for real-data tasks")
    preset = load_task_preset(task_name)
    T = flags.get("T", file_values.get("T", preset.default_T))
    variant = preset.canonical_variant(variant or flags.pop("variant", None) or file_values.get("variant"))

    values: dict[str, Any] = {"task": task.name, "T": T}
    values.update(_epochs_to_steps(resolve_preset(preset, T, variant)))
    preset_k = values.get("k", RunConfig.k)
    per_epoch = values.get("steps_per_epoch")
    for layer in (file_values, flags):
        layer = dict(layer)
        if "epochs" in layer and "steps_per_epoch" not in layer:
            layer["steps_per_epoch"] = per_epoch
        if not isinstance(layer.get("options") or {}, dict):
            raise ConfigError(f"options must be a mapping of task settings, got {layer['options']!r}")
        options = {**(values.get("options") or {}), **(layer.get("options") or {})}  # merged key by key
        values.update(_epochs_to_steps(layer))
        if options:
            values["options"] = options
    values["task"], values["T"], values["variant"] = task.name, int(values["T"]), variant
    _refit_evaluations(task.name, values, (file_values, flags))
    _check_options(task, values.get("options") or {}, config_file, set(file_values.get("options") or {}),
                   set(flags.get("options") or {}))
    values["norm"] = canonical_norm(values.get("norm", RunConfig.norm))
    _canonicalise(values, preset_k)
    if values["T"] < task.min_T:
        raise ConfigError(f"T={values['T']} is too short for {task.name}: it needs T >= {task.min_T}")
    if budget is None:
        budget = values.pop("budget", 1.0)
    return build_config(apply_budget(values, float(budget), whole_splits=task.metric in WHOLE_SPLIT_METRICS))


def device_and_threads(device: Optional[str], threads: Optional[int], config_file: Optional[Path]) -> tuple[str, int]:
    """``--device`` and ``--threads`` where given (None: not on the command line), else the config
    file's (flags on the command line override it, as for every setting), else auto and 1. A device
    the file asks for that is not here is refused naming the file, as the flag is."""
    from atnbench.zoo import resolve_device

    given = read_config_file(config_file) if config_file is not None else {}
    if device is None and "device" in given:
        try:
            resolve_device(given["device"])
        except UserError as error:  # "--device cuda asked for, ...": the file asked, not a flag
            raise UserError(str(error).replace("--device ", f"{config_file}: device: ", 1)) from None
    return (device if device is not None else given.get("device", "auto"),
            threads if threads is not None else given.get("threads", 1))


def _refit_evaluations(task_name: str, values: dict[str, Any], layers: tuple[dict, ...]) -> None:
    """A task of your own from data files is evaluated once per pass or every 1/50 of its steps
    (``userprep.evaluation_interval``), fitted to the length its task file gives. A length given
    by a flag, a config file or a sweep (``--iters 60``) kept the 2,000-step default's interval
    (two evaluations of 60 steps, to select from); it gets the interval for its own length,
    unless an ``eval_every`` is given too (there, or in the task file)."""
    lengths = any("steps" in layer or "epochs" in layer for layer in layers)
    if not lengths or any("eval_every" in layer for layer in layers):
        return
    user = (values.get("options") or {}).get("user_task")
    if not isinstance(user, dict) or "module" in user:  # a shipped preset's interval is its paper's
        return
    from atnbench.tasks.taskfiles import find, read_definition
    from atnbench.tasks.userprep import evaluation_interval

    path = find(task_name)
    if path is not None and "eval_every" not in read_definition(path).defaults:
        values["eval_every"] = evaluation_interval(values["steps"], values.get("steps_per_epoch") or 1)


def _check_options(task, options: dict, config_file: Optional[Path], in_file: set, in_flags: set) -> None:
    """A task option that nothing reads (``options: {foo: 1}``) would make another run id for the
    same numbers, and a report row of its own: refused, naming the options the task reads. A task
    of your own takes its definition, data and code from its task file (checked where it is read,
    ``taskfiles``): a config file or a flag may add only the schedule's options to it."""
    from atnbench.run.schedule import check_schedule
    from atnbench.tasks.registry import SCHEDULE_OPTIONS, TASK_MODULES

    if task.name in TASK_MODULES:
        known, given = (*task.options, *SCHEDULE_OPTIONS), set(options)
    else:
        known, given = SCHEDULE_OPTIONS, in_file | in_flags
    unknown = sorted(str(key) for key in given if key not in known)
    if not unknown:
        try:
            check_schedule(options)
        except ConfigError as error:
            named = config_file is not None and not in_file.isdisjoint(SCHEDULE_OPTIONS)
            raise ConfigError(f"{config_file}: {error}" if named else str(error)) from None
        return
    key = unknown[0]
    if key in in_flags and key in TASK_FLAGS:
        raise ConfigError(f"--{key.replace('_', '-')}: {task.name} is a task of your own, whose data its task file "
                          f"names (data:); give none here")
    where = f"{config_file}: " if key in in_file else ""
    if task.name not in TASK_MODULES:
        raise ConfigError(f"{where}options: {key!r}: {task.name} is a task of your own, whose definition, data and "
                          f"code its task file gives; a run's options may add only {', '.join(SCHEDULE_OPTIONS)}")
    raise ConfigError(f"{where}options: {key!r} is not an option of {task.name}: nothing reads it, so it would only "
                      f"make another run id for the same numbers; {task.name} reads: {', '.join(sorted(known))}")


def config_estimate(config) -> Estimate:
    """A RunConfig's estimate; the task's input/output widths (a vocabulary for real data)."""
    task = task_for(config)
    width = task.input_size or 1
    # real-data tasks: tokens are embedded, and the validation set is the dataset's (not val_samples)
    synthetic = task.make_source is None
    T = task.seq_len(config.T) if synthetic else config.T
    return run_estimate(T, config.batch_size, config.hidden, config.layers, width, task.output_size or 1,
                        val_samples=config.val_samples if synthetic else 0, gates=3 if config.cell == "gru" else 4)

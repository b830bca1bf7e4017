"""Finding a task by name: the shipped ones (``registry``), then a user's own (``taskfiles``).

This is the top of the task layer: it knows both kinds, and nothing below it imports it, so the
registry, the user-task readers and the presets stay one way down (registry <- user task code
<- lookup). A task's preset is found the same way: a user task's file, else a shipped preset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from atnbench.errors import UserError
from atnbench.presets import TaskPreset, find_preset_file, read_task_preset
from atnbench.tasks import taskfiles
from atnbench.tasks.registry import TASK_MODULES, TaskSpec, shipped_task
from atnbench.tasks.user import spec_from_options


def task_names() -> list[str]:
    """The shipped tasks and the user tasks of the search folders (``taskfiles``)."""
    return sorted(set(TASK_MODULES) | set(taskfiles.user_task_files()))


def get_task(name: str) -> TaskSpec:
    spec = shipped_task(name) or taskfiles.get_user_task(name)
    if spec is None:
        raise UserError(f"unknown task {name!r}; choose one of: {', '.join(task_names())} "
                        f"(a task of your own: --include DIR or ${taskfiles.ENV_FOLDERS})")
    return spec


def task_of(name: str, options: Optional[dict] = None) -> TaskSpec:
    """The task of a run: a user task from the definition its options carry (so a run is a
    function of its config, wherever its task file is now), a shipped one by name."""
    if "user_task" in (options or {}):
        return spec_from_options(name, options)
    return get_task(name)


def task_for(config) -> TaskSpec:
    """``task_of`` a RunConfig."""
    return task_of(config.task, config.options)


def tasks() -> dict[str, TaskSpec]:
    """Every task by name (imports each task module)."""
    return {name: get_task(name) for name in task_names()}


def load_task_preset(name_or_path: str | Path) -> TaskPreset:
    """A task's preset: the file of a user task of the search folders (--include,
    $ATNBENCH_TASKS), else a shipped preset (or a preset file's path)."""
    user_file = taskfiles.find(name_or_path) if isinstance(name_or_path, str) else None
    if user_file is not None:
        return taskfiles.load_preset(user_file)
    return read_task_preset(find_preset_file("tasks", name_or_path), _min_T_of)


def _min_T_of(name: str) -> Optional[int]:
    """The shortest T of the task a preset file names; None where no task has that name."""
    spec = shipped_task(name)
    if spec is None and taskfiles.find(name) is not None:
        spec = taskfiles.get_user_task(name)
    return spec.min_T if spec is not None else None

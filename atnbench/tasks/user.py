"""The TaskSpec of a user task, from the definition a run's options carry.

A user task's file is found and read by ``atnbench.tasks.taskfiles`` (outside the code that computes
runs' numbers: finding a file changes no number); what its definition computes lives here and in
``userprep``/``userdata``, under the code fingerprint.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from atnbench.config import ConfigError
from atnbench.userfiles import file_stat


def spec_from_options(name: str, options: dict[str, Any]):
    """The TaskSpec of a user task from a run's options (the same for every run of one config)."""
    user = options["user_task"]
    if "module" in user:  # read again once its file changes, as its run id does
        code = Path(options["task_code"])
        if not code.is_file():  # moved or deleted since: not an error of the user's code
            raise ConfigError(f"{code}: no such file: task {name!r} is written in Python there, and a run of it "
                              f"reads it from where it was included")
        return _code_spec(name, user["module"], options["task_code"], file_stat(options["task_code"]))
    from atnbench.tasks.userprep import data_spec

    return data_spec(name, user, options.get("data_files") or {})


@functools.lru_cache(maxsize=16)
def _code_spec(name: str, target: str, file: str, stat: tuple[int, int]):
    import dataclasses

    from atnbench.tasks.registry import TaskSpec
    from atnbench.tasks.usercode import calling, guarded

    module_name, _, obj = target.rpartition(":")
    with calling(f"{file} (importing it)"):  # its errors, exits and prints are the user's (usercode.py)
        if module_name.endswith(".py"):
            loader = importlib.util.spec_from_file_location(f"atnbench_user_task_{name}", module_name)
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        elif module_name in sys.modules:  # imported before: its file changed since (the cache key)
            module = importlib.reload(sys.modules[module_name])
        else:
            module = importlib.import_module(module_name)
    spec = getattr(module, obj, None)
    if not isinstance(spec, TaskSpec):
        raise ConfigError(f"{file}: {obj} is {'missing' if spec is None else type(spec).__name__}; "
                          f"expected an atnbench.tasks.TaskSpec")
    return guarded(dataclasses.replace(spec, name=name), file, obj)

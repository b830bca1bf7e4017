"""The TaskSpec of a user task, from the definition a run's options carry.

A user task's file is found and read by ``atnbench.taskfiles`` (outside the code that computes
runs' numbers: finding a file changes no number); what its definition computes lives here and in
``userprep``/``userdata``, under the code fingerprint.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from typing import Any

from atnbench.config import ConfigError


def spec_from_options(name: str, options: dict[str, Any]):
    """The TaskSpec of a user task from a run's options (the same for every run of one config)."""
    user = options["user_task"]
    if "module" in user:
        return _code_spec(name, user["module"])
    from atnbench.tasks.userprep import data_spec

    return data_spec(name, user, options.get("data_files") or {})


@functools.lru_cache(maxsize=16)
def _code_spec(name: str, target: str):
    import dataclasses

    from atnbench.tasks.registry import TaskSpec

    module_name, _, obj = target.rpartition(":")
    try:
        if module_name.endswith(".py"):
            loader = importlib.util.spec_from_file_location(f"atnbench_user_task_{name}", module_name)
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except Exception as err:  # the user's code: any failure to import is theirs to fix
        raise ConfigError(f"{module_name}: cannot import it ({type(err).__name__}: {err})") from None
    spec = getattr(module, obj, None)
    if not isinstance(spec, TaskSpec):
        raise ConfigError(f"{module_name}: {obj} is {'missing' if spec is None else type(spec).__name__}; "
                          f"expected an atnbench.tasks.TaskSpec")
    return dataclasses.replace(spec, name=name)

"""What a run record read from outside (a JSON Lines file, another store) must be before it is
written into a store: one pydantic schema, checked record by record.

A record is refused when a field has the wrong type (a ``T`` given as a string, a loss given as
a word: no coercion), a number is not finite (``1e999``, NaN, inf; a missing value is ``null``,
as the store writes it), a step or size is negative, an integer does not fit SQLite's 64 bits,
the task is unknown, the run id is not 12 hexadecimal characters, or the run id does not follow
from the config (recomputed with ``identity`` under the code fingerprint the record carries, or this code's;
a config that names data files on disk is checked by format only, since those files need not be
on this machine). ``problem`` names the first field at fault.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, PlainValidator, StrictStr, ValidationError

SQLITE_MAX = 2**63 - 1
TEXT_SUMMARY_KEYS = frozenset({"metric", "model"})  # every other summary value is a number (or null)


def _number(value: Any) -> Any:
    """A JSON number SQLite can hold: not a bool, not a string, finite, within 64 bits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number, got {value!r}")
    if isinstance(value, int) and not -SQLITE_MAX - 1 <= value <= SQLITE_MAX:
        raise ValueError(f"{value} does not fit a 64-bit integer")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number (null where there is none), got {value!r}")
    return value


def _count(value: Any) -> Any:
    if isinstance(value, float) or _number(value) < 0:
        raise ValueError(f"must be a whole number ≥ 0, got {value!r}")
    return value


def _summary(values: dict) -> dict:
    for key, value in values.items():
        if key in TEXT_SUMMARY_KEYS:
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{key} must be text or null, got {value!r}")
        elif value is not None:
            try:
                _number(value)
            except ValueError as error:
                raise ValueError(f"{key} {error}") from None
    return values


def _run_id(value: Any) -> str:
    if not isinstance(value, str) or re.fullmatch(r"[0-9a-f]{12}", value) is None:
        raise ValueError(f"must be 12 hexadecimal characters (as atnbench names runs), got {value!r}")
    return value


Number = Annotated[Any, PlainValidator(_number)]
Count = Annotated[Any, PlainValidator(_count)]


class CurvePoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: Count
    wall_s: Optional[Number] = None
    train_loss: Optional[Number] = None
    val_loss: Optional[Number] = None
    metrics: dict[str, Optional[Number]] = {}


class Config(BaseModel):
    """The run config's identity columns; the rest is checked by the run-id recomputation."""

    model_config = ConfigDict(extra="allow")

    task: StrictStr
    T: Count
    seed: Optional[Count] = None
    norm: StrictStr
    k: Optional[Count] = None


class Record(BaseModel):
    model_config = ConfigDict(extra="allow")

    run_id: Annotated[Any, PlainValidator(_run_id)]
    status: StrictStr
    config: Config
    env: dict[str, Any] = {}
    summary: Annotated[dict[str, Any], AfterValidator(_summary)] = {}
    curve: list[CurvePoint] = []
    sweeps: list[StrictStr] = []


def problem(record: dict) -> Optional[str]:
    """None when the record may be written; else one phrase naming the field and what is wrong."""
    try:
        checked = Record.model_validate(record)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        return f"{where or 'record'}: {_message(first)}"
    from atnbench.store import STATUSES
    from atnbench.tasks import task_names

    if checked.status not in STATUSES:
        return f"status: unknown status {checked.status!r} (one of {', '.join(STATUSES)})"
    user_task = "user_task" in (record["config"].get("options") or {})  # a user's task: its definition travels with it
    if checked.config.task not in task_names() and not user_task:
        return f"config.task: unknown task {checked.config.task!r} (known: {', '.join(task_names())})"
    expected = expected_run_id(record)
    if expected is not None and expected != checked.run_id:
        return f"run_id: {checked.run_id} does not follow from the config (it gives {expected})"
    return None


def expected_run_id(record: dict) -> Optional[str]:
    """The run id the record's config gives under its own code fingerprint (this code's when it
    records none); None when it cannot be told here (the config names data files)."""
    from atnbench import identity

    code = (record.get("env") or {}).get("code", identity.code_fingerprint())  # none recorded: this code's
    options = record["config"].get("options") or {}
    if not isinstance(code, str) or any(key in options for key in identity.DATA_OPTIONS):
        return None
    try:
        return identity.run_id_under(record["config"], code)
    except (TypeError, ValueError, KeyError):
        return "(none: the config does not resolve)"


def _message(error: dict) -> str:
    text = error["msg"].removeprefix("Value error, ")
    if error["type"] != "value_error" and "input" in error and not isinstance(error["input"], (dict, list)):
        text += f" (got {error['input']!r})"
    return text

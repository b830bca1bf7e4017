"""What a run record read from outside (a JSON Lines file, another store) must be before it is
written into a store: one pydantic schema, checked record by record.

A record is refused when a field has the wrong type (a ``T`` given as a string, a loss given as
a word: no coercion), a number is not finite (``1e999``, NaN, inf; a missing value is ``null``,
as the store writes it), a step or size is negative, an integer does not fit SQLite's 64 bits,
a curve's ``wall_s`` is negative or a step appears twice in it, a date is no ISO-8601 date, an
``error`` is no text, a done run has no curve (its numbers could not be traced to
one), the task is unknown, the run id is not 12 hexadecimal characters, a column the store lists runs by (``task``, ``T``, ``norm``, ``k``, ``seed``,
``budget``) is given at the top level with another value or type than its config's (the store
would list and report the run by the top-level one), or the run id does not follow from the config (recomputed with ``identity`` under the
code fingerprint the record carries, this code's where it carries none or ``null``). A config that
names data files (``identity.DATA_OPTIONS``) has them in its id by content: its id is recomputed
when every one of them is on this machine, and otherwise checked by format only (``id_checkable``
says which; the import says how many). ``problem`` names the first field at fault.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, PlainValidator, StrictStr, ValidationError

from atnbench.evidence import identity

SQLITE_MAX = 2**63 - 1
TEXT_SUMMARY_KEYS = frozenset({"metric", "model"})  # every other summary value is a number (or null)
COUNT_SUMMARY_KEYS = frozenset({"steps", "params", "best_step"})  # whole numbers >= 0, as the trainer writes them
DURATION_SUMMARY_KEYS = frozenset({"wall_s", "steps_per_s"})  # >= 0 (a rate: steps per second of wall time)


def _number(value: Any) -> Any:
    """A JSON number SQLite can hold: not a bool, not a string, finite, within 64 bits."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number, got {value!r}")
    if isinstance(value, int) and not -SQLITE_MAX - 1 <= value <= SQLITE_MAX:
        raise ValueError(f"{value} does not fit a 64-bit integer")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number (null where there is none), got {value!r}")
    return value


def _duration(value: Any) -> Any:
    if _number(value) < 0:
        raise ValueError(f"must be ≥ 0 seconds, got {value!r}")
    return value


def _finite_values(value: Any) -> Any:
    """Any JSON value whose numbers are finite: a config setting, checked before the run id is
    recomputed from it (an ``1e999`` would otherwise only show as an id that does not follow)."""
    where = _non_finite(value)
    if where is not None:
        path, number = where
        raise ValueError(f"{path + ' ' if path else ''}must be a finite number, got {number!r}")
    return value


def _non_finite(value: Any, path: str = "") -> Optional[tuple[str, float]]:
    """The path of the first non-finite number in a JSON value and the number, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = _non_finite(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


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
            check = _count if key in COUNT_SUMMARY_KEYS else _nonnegative if key in DURATION_SUMMARY_KEYS else _number
            try:
                check(value)
            except ValueError as error:
                raise ValueError(f"{key} {error}") from None
    return values


def _nonnegative(value: Any) -> Any:
    if _number(value) < 0:
        raise ValueError(f"must be ≥ 0, got {value!r}")
    return value


def _moment(value: Any) -> Any:
    """An ISO-8601 date/time as the store reads it (``parse_moment``), or null (now)."""
    from atnbench.store.results import parse_moment

    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"must be an ISO-8601 date/time as text, got {value!r}")
    try:
        parse_moment(value)
    except ValueError:
        raise ValueError(f"not an ISO-8601 date/time: {value!r}") from None
    return value


def _distinct_steps(curve: list) -> list:
    """One evaluation per step: the store keys a curve by (run, step)."""
    seen = set()
    for point in curve:
        if point.step in seen:
            raise ValueError(f"step {point.step} appears twice; a curve has one evaluation per step")
        seen.add(point.step)
    return curve


def _run_id(value: Any) -> str:
    if not isinstance(value, str) or re.fullmatch(r"[0-9a-f]{12}", value) is None:
        raise ValueError(f"must be 12 hexadecimal characters (as atnbench names runs), got {value!r}")
    return value


Number = Annotated[Any, PlainValidator(_number)]
Count = Annotated[Any, PlainValidator(_count)]
Duration = Annotated[Any, PlainValidator(_duration)]
Setting = Annotated[Any, PlainValidator(_finite_values)]


class CurvePoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step: Count
    wall_s: Optional[Duration] = None
    train_loss: Optional[Number] = None
    val_loss: Optional[Number] = None
    metrics: dict[str, Optional[Number]] = {}


class Config(BaseModel):
    """The run config's identity columns typed; every other setting has finite numbers, and
    the run-id recomputation checks the rest."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, Setting]

    task: StrictStr
    T: Count
    seed: Optional[Count] = None
    norm: StrictStr
    k: Optional[Count] = None
    budget: Optional[Number] = None


class Env(BaseModel):
    """Where the run ran; only the code fingerprint matters to the check (it is in the run id)."""

    model_config = ConfigDict(extra="allow")

    code: Optional[StrictStr] = None


class Record(BaseModel):
    model_config = ConfigDict(extra="allow")

    run_id: Annotated[Any, PlainValidator(_run_id)]
    status: StrictStr
    config: Config
    env: Env = Env()
    summary: Annotated[dict[str, Any], AfterValidator(_summary)] = {}
    curve: Annotated[list[CurvePoint], AfterValidator(_distinct_steps)] = []
    sweeps: list[StrictStr] = []
    created_at: Annotated[Any, PlainValidator(_moment)] = None
    updated_at: Annotated[Any, PlainValidator(_moment)] = None
    error: Optional[StrictStr] = None  # the store keeps it as text
    schema_version: Optional[Count] = None
    # the store's columns, as an export writes them: each must say what the config says
    task: Optional[StrictStr] = None
    T: Optional[Count] = None
    norm: Optional[StrictStr] = None
    k: Optional[Count] = None
    seed: Optional[Count] = None
    budget: Optional[Number] = None


COLUMNS = ("task", "T", "norm", "k", "seed", "budget")


def _column_problem(record: dict) -> Optional[str]:
    """A top-level column whose value differs from its config's (an int and a float are one
    number: SQLite keeps a budget as a float)."""
    for name in COLUMNS:
        if name not in record:
            continue
        given, stated = record[name], record["config"].get(name)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (given, stated))
        if not (given == stated and (numbers or type(given) is type(stated))):
            return f"{name}: {given!r} at the top level, {stated!r} in config.{name}; a record's columns repeat its config"
    return None


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

    column = _column_problem(record)
    if column is not None:
        return column
    if checked.status not in STATUSES:
        return f"status: unknown status {checked.status!r} (one of {', '.join(STATUSES)})"
    if checked.status == "done" and not checked.curve:  # its numbers are read from its curve
        return "curve: empty, and a done run has at least one evaluation (the report reads its numbers from it)"
    user_task = "user_task" in (record["config"].get("options") or {})  # a user's task: its definition travels with it
    if checked.config.task not in task_names() and not user_task:
        return f"config.task: unknown task {checked.config.task!r} (known: {', '.join(task_names())})"
    expected = expected_run_ids(record)
    if expected and checked.run_id not in expected:
        data = " and the contents of its data files here" if identity.data_paths(_options(record)) else ""
        return f"run_id: {checked.run_id} does not follow from the config{data} (it gives {expected[0]})"
    return None


def id_checkable(record: dict) -> bool:
    """Whether the record's run id can be recomputed here: not when its config names data files
    (``identity.DATA_OPTIONS``) that are not all on this machine, since the id holds their
    contents' fingerprint and nothing here can stand in for it."""
    return all(path.exists() for path in identity.data_paths(_options(record)))


def expected_run_ids(record: dict) -> tuple[str, ...]:
    """The run ids the record's config gives under its own code fingerprint (this code's when it
    records none or null), the current rule's first (``identity.run_ids_under``); none when they
    cannot be told here (``id_checkable``)."""
    if not id_checkable(record):
        return ()
    code = (record.get("env") or {}).get("code")
    try:
        return identity.run_ids_under(record["config"], identity.code_fingerprint() if code is None else code)
    except (TypeError, ValueError, KeyError):
        return ("(none: the config does not resolve)",)


def _options(record: dict) -> Any:
    return record["config"].get("options") or {}


def _message(error: dict) -> str:
    text = error["msg"].removeprefix("Value error, ")
    if error["type"] != "value_error" and "input" in error and not isinstance(error["input"], (dict, list)):
        text += f" (got {error['input']!r})"
    return text

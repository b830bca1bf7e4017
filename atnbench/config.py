"""Run configuration: one typed record of everything that determines a training run.

Resolution order (later wins): built-in defaults < task preset (its ``defaults``, then its
``per_T`` entry, then a named ``variant``) < ``--config FILE`` < command-line flags. The run id
is a hash of the resolved fields that change the numbers (``atnbench.evidence.identity``: the thread
count and device type included, the output folder not), so the same config always maps to the
same row of the results store.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import field
from typing import Annotated, Any, Optional

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from atnbench.errors import UserError
from atnbench.limits import FLOAT32_MAX, INT_MAX, MAX_THREADS, SEED_MAX
from atnbench.settings import RENAMED_FLAGS

OPTIMIZERS = ("rmsprop", "adam", "sgd", "asgd")
FLOAT_AS_TEXT_HINT = " (YAML reads 1e-3 as text: write 1.0e-3)"

Positive = Annotated[int, Field(ge=1, le=INT_MAX)]  # stored as an SQLite integer


class ConfigError(UserError):
    """A configuration that cannot run; the message is one readable line."""


class SettingError(ConfigError):
    """A run setting a task cannot take (``T`` that does not divide an image), found as its data
    source is built: said as the setting's, not as a problem of the data."""


# strict: a value of the wrong type is an error, not silently converted (an int is a fine
# float, and is stored as one, so momentum 0 and 0.0 are the same config); no NaN/infinity.
@dataclass(frozen=True, config=ConfigDict(strict=True, allow_inf_nan=False))  # = STRICT, below
class RunConfig:
    task: str
    T: Positive
    norm: str = "atn"
    k: Positive = 10
    eps: Annotated[float, Field(ge=0)] = 1e-5
    affine: bool = True
    bias_inside: Optional[bool] = None
    cell: str = "lstm"
    init: Optional[str] = None  # None: the model's default (schemes.py); "atn" or "torch"
    hidden: Positive = 128
    layers: Positive = 1
    batch_size: Positive = 64
    optimizer: str = "rmsprop"
    lr: Annotated[float, Field(gt=0, le=FLOAT32_MAX)] = 1e-3  # the optimizer steps in float32
    momentum: Annotated[float, Field(ge=0, lt=1)] = 0.0  # at 1 and above the velocity never decays
    steps: Positive = 1000
    steps_per_epoch: Optional[Positive] = None
    eval_every: Positive = 100
    # early stopping: evaluations in a row without a lower validation loss before the run stops;
    # 0 (the neutral value, kept out of the run id): every step of the budget is trained
    patience: Annotated[int, Field(ge=0, le=INT_MAX)] = 0
    val_samples: Positive = 1000
    clip: Optional[Annotated[float, Field(gt=0)]] = None
    seed: Annotated[int, Field(ge=0, le=SEED_MAX)] = 0  # as --seeds: torch would take -1, numpy's generators not
    budget: Annotated[float, Field(gt=0, le=1)] = 1.0
    variant: Optional[str] = None
    options: dict = field(default_factory=dict)  # task-specific extras (data paths, permute, ...)
    threads: Annotated[int, Field(ge=1, le=MAX_THREADS)] = 1  # torch CPU threads: reductions, hence the last bits, depend on it
    device: str = "cpu"  # the device type the run trains on: cpu, cuda or mps

    def __post_init__(self):
        for key in CHOICES:
            message = choice_problem(key, getattr(self, key))
            if message is not None:
                raise ConfigError(message)

    @property
    def epochs(self) -> Optional[float]:
        return self.steps / self.steps_per_epoch if self.steps_per_epoch else None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# the settings that take one of a few names: (the names, how the error calls the setting)
CHOICES = {"optimizer": (OPTIMIZERS, "optimizer"), "cell": (("lstm", "gru"), "cell"),
           "init": ((None, "atn", "torch"), "init"), "device": (("cpu", "cuda", "mps"), "device type")}


def choice_problem(key: str, value: Any) -> Optional[str]:
    """The error for a value of ``key`` (one of ``CHOICES``) that is none of its names, else None."""
    names, called = CHOICES[key]
    if value in names:
        return None
    shown = [name for name in names if name is not None]
    listed = f"one of: {', '.join(shown)}" if len(shown) > 3 else " or ".join([", ".join(shown[:-1]), shown[-1]])
    return f"unknown {called} {value!r}; choose {listed}"


FIELDS = {f.name for f in dataclasses.fields(RunConfig)}


def setting_default(name: str) -> Any:
    """A RunConfig field's default (None for no such field): what a stored config that does not
    name the setting ran with (a run stored before the setting existed ran at its neutral value)."""
    field = next((f for f in dataclasses.fields(RunConfig) if f.name == name), None)
    if field is None or field.default is dataclasses.MISSING:
        return field.default_factory() if field is not None and field.default_factory is not dataclasses.MISSING \
            else None
    return field.default
STRICT = ConfigDict(strict=True, allow_inf_nan=False)
# one validator per field (and for ``epochs``, which becomes steps), to check a layer of values
# (a config file) on its own and name the file, before it is merged with the preset
_CHECKERS = {name: TypeAdapter(hint, config=STRICT)
             for name, hint in {**typing.get_type_hints(RunConfig, include_extras=True),
                                "epochs": Annotated[float, Field(gt=0)]}.items()}


def check_values(values: dict[str, Any], where: str) -> None:
    """Type and range of each known key, with ``where`` (a file name) in the one-line error."""
    for key, value in values.items():
        if key in _CHECKERS:
            try:
                _CHECKERS[key].validate_python(value)
            except ValidationError as err:
                raise ConfigError(f"{where}: {explain(err, key)}") from None
        problem = choice_problem(key, value) if key in CHOICES else None
        if key == "norm" and isinstance(value, str):
            from atnbench.registry import canonical_norm

            try:
                canonical_norm(value)
            except ValueError as err:
                problem = str(err)
        if problem is not None:
            raise ConfigError(f"{where}: {problem}")


def check_budget(budget: float) -> float:
    """``budget`` if it is a fraction of the protocol, in (0, 1]; the one message for every command."""
    if not 0 < budget <= 1:  # NaN fails this too
        raise ConfigError(f"--budget must be in (0, 1], got {budget:g}")
    return budget


def build_config(values: dict[str, Any]) -> RunConfig:
    """A RunConfig from a dict of field values; unknown keys are an error naming the key."""
    unknown = sorted(str(key) for key in set(values) - FIELDS)
    if unknown:
        raise ConfigError(f"unknown config key(s): {', '.join(unknown)}; known: {', '.join(sorted(FIELDS))}")
    try:
        return RunConfig(**values)
    except ValidationError as err:
        raise ConfigError(explain(err)) from None
    except TypeError as err:  # a missing required field
        raise ConfigError(str(err)) from None


_BOUNDS = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"), "less_than_equal": ("<=", "le"),
           "less_than": ("<", "lt")}
_TYPE_NAMES = {"int_type": "a whole number", "float_type": "a number", "bool_type": "true or false",
               "string_type": "text", "dict_type": "a mapping", "int_from_float": "a whole number"}


# config keys whose command-line flag has another name, so either can be recognised in a message
FLAG_NAMES = RENAMED_FLAGS


def number_text(value) -> str:
    """A bound as written: whole numbers in full (9223372036854775807, not 9.22337e+18)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def explain(error: ValidationError, name: Optional[str] = None) -> str:
    """pydantic's first complaint as one line in atnbench's words: ``k must be >= 1, got 0``."""
    first = error.errors()[0]
    name = name or ".".join(str(part) for part in first["loc"] if not isinstance(part, int)) or "config"
    if name in FLAG_NAMES:
        name = f"{name} ({FLAG_NAMES[name]})"
    kind, value = first["type"], first.get("input")
    if kind in _BOUNDS:
        symbol, key = _BOUNDS[kind]
        return f"{name} must be {symbol} {number_text(first['ctx'][key])}, got {value!r}"
    if kind in ("missing", "missing_argument"):
        return f"{name} is required"
    if kind == "value_error":  # one of our own checks (__post_init__): its message as it is
        return str(first["ctx"]["error"])
    if kind == "finite_number":
        return f"{name} must be a finite number, got {value!r}"
    if kind in _TYPE_NAMES or kind.endswith("_type"):
        expected = _TYPE_NAMES.get(kind, kind.removesuffix("_type"))
        hint = FLOAT_AS_TEXT_HINT if isinstance(value, str) and kind == "float_type" else ""
        return f"{name}: expected {expected}, got {value!r}{hint}"
    return f"{name}: {first['msg']}, got {value!r}"

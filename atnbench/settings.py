"""The run settings a command line can give, declared once.

Each entry is one flag of ``atnbench run`` (and, where ``sweep_help`` is set, of ``atnbench
sweep``, which applies it to every run): its flag spelling, help, value type and the RunConfig key
it sets. From this table come both commands' options (``atnbench.cli.run_flags``), the flag names
in sweep's messages and the "(--iters)" in a config error (``atnbench.config.FLAG_NAMES``).

A value's range is checked where the value is kept: on the RunConfig field (pydantic), so a flag,
a config file and a preset are refused in the same words. Adding a setting: a RunConfig field,
then one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

SWEEP_HELP = "Run flag for every run."


@dataclass(frozen=True)
class RunSetting:
    """One run flag: ``flags`` as typer spells it (an on/off pair as "--on/--off", then aliases)."""

    param: str  # the command's parameter name (what typer passes the value as)
    flags: tuple[str, ...]
    help: str
    type: type
    key: str = ""  # the RunConfig key it sets (default: ``param``); the data flags all set ``options``
    sweep_help: Optional[str] = SWEEP_HELP  # None: not a sweep flag (sweep has --seeds)
    check: str = ""  # a check where the value is typed: "finite" (no NaN/inf), "seed" (the seed range)
    metavar: Optional[str] = None
    in_flags: bool = True  # passed in a run's flags; False: the command applies it itself (--budget)

    @property
    def config_key(self) -> str:
        return self.key or self.param

    @property
    def flag(self) -> str:
        """The flag as messages name it: "--T", "--affine/--no-affine"."""
        return self.flags[0]


def _setting(param: str, flag: str, help: str, kind: type, **more) -> RunSetting:
    return RunSetting(param, (flag,) if isinstance(flag, str) else tuple(flag), help, kind, **more)


INIT_HELP = ("Weight initialisation: atn (W_x orthogonal, W_h identity per gate, the ATN authors') or torch "
             "(PyTorch's default). Default: torch for the plain LSTM/GRU, atn for normalized cells.")

RUN_SETTINGS: tuple[RunSetting, ...] = (
    _setting("T", "--T", "Sequence length (default: the preset's).", int,
             sweep_help="Run flag for every run; on a setting the sweep varies, its runs with this value."),
    _setting("norm", "--norm", "Normalization: {norms} (the registry's, see `atnbench models`).", str),
    _setting("k", "--k", "ATN window (time steps); default: the preset's for this T.", int,
             sweep_help="Run flag for every run (windowed norms only)."),
    _setting("eps", "--eps", "Epsilon inside the normalization's square root.", float, check="finite"),
    _setting("cell", "--cell", "Recurrent cell: lstm or gru.", str),
    _setting("init", "--init", INIT_HELP, str, metavar="[atn|torch]", sweep_help=INIT_HELP),
    _setting("hidden", "--hidden", "Hidden size.", int),
    _setting("layers", "--layers", "Number of stacked recurrent layers.", int),
    _setting("batch_size", "--batch-size", "Training batch size.", int),
    _setting("lr", "--lr", "Learning rate.", float, check="finite"),
    _setting("optimizer", "--optimizer", "rmsprop, adam, sgd or asgd.", str),
    _setting("momentum", "--momentum", "Momentum (rmsprop, sgd).", float, check="finite"),
    _setting("epochs", "--epochs", "Training length in the preset's epochs.", float, check="finite"),
    _setting("iters", "--iters", "Training length in optimizer steps (overrides --epochs).", int, key="steps",
             sweep_help="Run flag for every run (optimizer steps)."),
    _setting("eval_every", "--eval-every", "Evaluate on the validation set every N steps.", int),
    _setting("patience", "--patience",
             "Early stopping: end the run once N evaluations in a row found no lower validation loss "
             "(its best-validation weights are kept); 0 trains every step. Default: the task's (10 for "
             "a task from data files, 0 for the paper's fixed protocols and for a task from code).", int),
    _setting("val_samples", "--val-samples", "Size of the held-out validation set.", int),
    _setting("clip", "--clip", "Clip the gradient norm at this value.", float, check="finite"),
    _setting("affine", "--affine/--no-affine", "Trainable gain and bias in the normalizations.", bool),
    _setting("bias_inside", "--bias-inside/--bias-outside",
             "LSTM bias inside or outside the normalization (default: per norm).", bool),
    _setting("seed", "--seed", "Random seed (model initialisation and data); default: the preset's.", int,
             check="seed", sweep_help=None),
    _setting("variant", "--variant", "A named variant of the task preset (see `atnbench tasks`).", str,
             sweep_help="Task preset variant for every run."),
    _setting("data_dir", "--data-dir", "Real-data tasks: folder holding the dataset (see `atnbench tasks`).", Path,
             key="options", metavar="DIR",
             sweep_help="Real-data tasks: folder holding the dataset (see `atnbench tasks`)."),
    _setting("data_files", "--data-files", "Real-data tasks: SPLIT=PATH[,SPLIT=PATH...] (train, validation, test).",
             str, key="options", metavar="SPLIT=PATH[,...]",
             sweep_help="Real-data tasks: SPLIT=PATH[,SPLIT=PATH...] (train, validation, test)."),
    _setting("permute", "--permute/--no-permute", "smnist-noise: pixels in one fixed, seeded random order.", bool,
             key="options", sweep_help="smnist-noise: pixels in one fixed, seeded random order."),
    _setting("budget", ("--budget", "--scale"), "Shrink the protocol to this fraction (0, 1] of its steps.", float,
             check="finite", in_flags=False,
             sweep_help="Shrink every run to this fraction (0, 1] of its steps."),
)

SWEEP_SETTINGS = tuple(setting for setting in RUN_SETTINGS if setting.sweep_help is not None)


def flag_names(settings: tuple[RunSetting, ...]) -> dict[str, str]:
    """RunConfig key -> the flag(s) that set it ("steps": "--iters"; the data flags joined:
    "options": "--data-dir/--data-files/--permute"), for the settings passed in a run's flags."""
    names: dict[str, list[str]] = {}
    for setting in settings:
        if setting.in_flags:
            names.setdefault(setting.config_key, []).append(setting.flag.split("/")[0] if setting.key == "options"
                                                            else setting.flag)
    return {key: "/".join(flags) for key, flags in names.items()}


# config keys whose flag is spelled otherwise ("steps" is --iters, "batch_size" --batch-size),
# so a config error can name both
RENAMED_FLAGS = {key: flag for key, flag in flag_names(RUN_SETTINGS).items()
                 if key != "options" and flag.lstrip("-").split("/")[0] != key}

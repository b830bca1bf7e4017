"""Did a finished run learn anything? Its best validation loss against the task's no-information
baseline, the loss of a guess that ignores the inputs (the training class frequencies, the
training mean, or the task's own; ``TaskSpec.baseline``).

A run that ends there scored what a constant guess scores (GunPoint with ATN at the old
defaults: 20 steps, chance accuracy), and its table alone does not show it: ``at_baseline``
is the one line that says so and what to try. Only for a task of your own: a paper's protocol is
fixed, and its runs at the baseline (the plain LSTM's plateau on the copying task) are findings.
"""

from __future__ import annotations

import math
from typing import Any, Optional

# a best validation loss above (1 - MARGIN) x the baseline counts as at it: GunPoint at chance
# ends at 0.70 against 0.72, a model that learned the task at a tenth of it
MARGIN = 0.05
# above WORSE x the baseline the run ended far worse than a constant guess (an untrained model's
# loss is not far above it: random labels at initialisation, 0.94 against 0.68): it blew up
WORSE = 2.0


def stopped_early(config, record: dict[str, Any]) -> bool:
    """Whether early stopping ended the run: done before its last step (``steps`` counts the
    steps trained; a run ends early otherwise only by diverging)."""
    return bool(config.patience) and record.get("status") == "done" and record.get("steps", 0) < config.steps


def at_baseline(config, record: dict[str, Any]) -> Optional[str]:
    """One line for a finished run of a task of your own whose best validation loss is at the
    no-information baseline (None for a run below it, one that did not finish, a shipped task or
    a task without a baseline)."""
    best, baseline = record.get("min_val_loss"), record.get("baseline")
    if "user_task" not in (config.options or {}) or record.get("status") != "done" or best is None \
            or not baseline or best < (1 - MARGIN) * baseline:
        return None
    if best > WORSE * baseline:  # far worse than a constant guess: the steps blew it up, not too few of them
        return (f"the best validation loss {best:.4g} is above the no-information baseline {baseline:.4g} (what a "
                f"guess that ignores the inputs scores): training made the model worse than that guess; try a "
                f"smaller learning rate (--lr {config.lr / 10:.2g}), or gradient clipping (--clip 1)")
    # --iters is the steps before the budget shrinks them (runspec.apply_budget: ceil(iters x budget)):
    # 2 x steps / budget where that gives twice this run's, else the fewest that do (ceil rounds up)
    budget = getattr(config, "budget", 1.0) or 1.0
    iters = math.ceil(2 * config.steps / budget)
    if math.ceil(iters * budget) != 2 * config.steps:
        iters = math.floor((2 * config.steps - 1) / budget) + 1
    more = f"--iters {iters}" + (f" at --budget {budget:g}" if budget != 1 else "")
    tries = [f"more steps ({more})", f"another learning rate (--lr {config.lr / 3:.2g} or "
             f"{config.lr * 3:.2g})", f"another norm (--norm {'atn' if config.norm == 'ln' else 'ln'})"]
    if stopped_early(config, record):
        tries.insert(0, f"a longer patience (--patience {2 * config.patience}; it stopped early at step "
                        f"{record.get('steps')})")
    return (f"the best validation loss {best:.4g} is not {MARGIN:.0%} below the no-information baseline {baseline:.4g} (what a "
            f"guess that ignores the inputs scores): this run learned nothing from them; try " + ", ".join(tries))

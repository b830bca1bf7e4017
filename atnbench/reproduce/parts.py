"""The ATN paper's evaluation as one resumable plan: its parts are sweep presets.

``atnbench reproduce`` expands every part (a sweep preset at a budget, over the seeds asked
for), runs what the store does not hold yet through the sweep engine (skip, resume, workers,
Ray), and writes the report folder (``atnbench.report.document``). Each part keeps its own
sweep membership in the store; its tables are built from the runs its sweep made and the runs
its plan names (the same experiment made by another sweep counts: same config, same run id).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from atnbench.config import ConfigError, check_budget


@dataclass(frozen=True)
class Part:
    name: str  # the sweep preset
    what: str  # what it reproduces, for the report
    budget: float = 1.0  # the default budget: the paper's full protocol unless stated
    dataset: Optional[str] = None  # real data it needs (atnbench.data.catalog); None: generated

    def data_missing(self) -> Optional[str]:
        """Why this part cannot run here (its data is not prepared in the data root, or not the published
        copy, which its runs refuse), or None."""
        if self.dataset is None:
            return None
        from atnbench.data.catalog import get_dataset
        from atnbench.data.common import data_root
        from atnbench.sweep import expand, load_sweep
        from atnbench.sweep.command import one_per_data
        from atnbench.tasks.datacheck import check_root_copy, verify_copy

        dataset = get_dataset(self.dataset)
        folder = data_root() / dataset.subdir
        problems = verify_copy(dataset, folder)
        if problems is None:
            return f"no {dataset.name} data in {folder} (`atnbench data prepare {dataset.name}`)"
        if problems:  # its runs would refuse it, hours into the reproduction
            return (f"the {dataset.name} copy in {folder} is not the published one ({problems[0]}; `atnbench data "
                    f"prepare {dataset.name}` writes it)")
        runs = expand(load_sweep(self.name))
        try:  # what each run checks (the files its loader would read too): its runs would refuse it, hours in
            for config in one_per_data(runs):
                check_root_copy(config.task, config.options or {})
        except ConfigError as refused:
            return str(refused)
        return None


# The order is the paper's: Tables 1-3, then the ablations of Sect. 5.
PARTS: dict[str, Part] = {p.name: p for p in (
    Part("table1-copying", "Table 1: copying, T=100 and T=200"),
    Part("table2-adding", "Table 2: adding, T=100 and T=200"),
    Part("table3-denoise", "Table 3: denoise, T=100 and T=200"),
    Part("k-ablation", "Fig. 7 / Sect. 5.3: ATN's window k on copying, T=100"),
    Part("norm-ablation", "Sect. 5: ATN against BN, BLN and ATN-BN"),
    Part("bias-placement", "Sect. 5.1: the LSTM bias inside or outside the normalization"),
    Part("copying-protocols", "Copying T=100 under the released code's protocol (the default) and the paper "
                              "text's (variant paper-text)"),
    Part("table4-ptb-char", "Table 4: character-level Penn Treebank, bits per character (real data)",
         dataset="ptb-char"),
    Part("fig5-bias-outside", "Fig. 5 / Sect. 5.1: LN and ATN with the bias outside, noisy pixel MNIST "
                              "(5,000-digit subset, real data)", dataset="mnist-5k"),
)}


@dataclass
class PlannedPart:
    part: Part
    budget: float
    runs: list  # PlannedRun


def parse_budgets(text: Optional[str]) -> tuple[Optional[float], dict[str, float]]:
    """``0.25`` (every part) or ``0.25,table1-copying=1`` (a default, then per part): one default
    at most and one budget per part, or a ConfigError saying which was given twice."""
    if text is None:
        return None, {}
    default, per_part = None, {}
    items = [piece.strip() for piece in text.split(",") if piece.strip()]
    if not items:
        raise ConfigError(f"--budget: no budget in {text!r} (give e.g. 0.25 or table3-denoise=0.25)")
    for item in items:
        name, equals, value = item.rpartition("=")
        try:
            budget = float(value)
        except ValueError:
            raise ConfigError(f"--budget: {value!r} is not a number (give e.g. 0.25 or table3-denoise=0.25)") from None
        check_budget(budget)
        if not equals:
            if default is not None:
                raise ConfigError(f"--budget: two budgets for every part ({default:g} and {budget:g}); give one, "
                                  f"and PART=VALUE for a part that differs")
            default = budget
        elif name not in PARTS:
            raise ConfigError(f"--budget: unknown part {name!r}; parts: {', '.join(PARTS)}")
        elif name in per_part:
            raise ConfigError(f"--budget: two budgets for {name} ({per_part[name]:g} and {budget:g}); give one")
        else:
            per_part[name] = budget
    return default, per_part


def available(parts: list[Part]) -> tuple[list[Part], list[tuple[Part, str]]]:
    """(the parts that can run here, [(part, why not)] for those whose real data is missing)."""
    ready, missing = [], []
    for part in parts:
        why = part.data_missing()
        (missing.append((part, why)) if why else ready.append(part))
    return ready, missing


def select_parts(only: Optional[str]) -> list[Part]:
    if not only:
        return list(PARTS.values())
    names = [name.strip() for name in only.split(",") if name.strip()]
    if not names:
        raise ConfigError(f"--only: no part in {only!r}; parts: {', '.join(PARTS)}")
    unknown = [name for name in names if name not in PARTS]
    if unknown:
        raise ConfigError(f"--only: unknown part(s) {', '.join(unknown)}; parts: {', '.join(PARTS)}")
    return [PARTS[name] for name in PARTS if name in names]


def plan(parts: list[Part], seeds: Optional[tuple[int, ...]], budget: Optional[float],
         per_part: dict[str, float], overrides: dict) -> list[PlannedPart]:
    """Every part's runs, checked before anything runs (parts whose data is missing are left
    out: see ``available``)."""
    from atnbench.sweep import expand, load_sweep
    from atnbench.sweep.expand import points
    from atnbench.sweep.spec import check_plan_size

    sweeps = {part.name: load_sweep(part.name) for part in parts}
    check_plan_size(sum(len(seeds or spec.seeds) * len(points(spec)) for spec in sweeps.values()),
                    "the reproduce plan")  # counted before any part is expanded
    planned = []
    for part in parts:
        part_budget = per_part.get(part.name, budget if budget is not None else part.budget)
        runs = expand(sweeps[part.name], budget=part_budget, seeds=seeds, overrides=overrides)
        planned.append(PlannedPart(part, part_budget, runs))
    return planned

"""Confirmatory studies: seeds run in planned looks, each look recorded, decisions under a rule
fixed before the first run.

A study is made for one sweep's claims (``sweep NAME --until-decided``). Before any of its runs,
its plan is recorded in the store (``study:NAME`` in the ``meta`` table): the claims file it tests
(the family, by name and digest, and its m), the family's alpha and each comparison's alpha / m
(Bonferroni: one share per declared comparison, so superiority and equivalence decisions of the
whole file hold together at alpha), the looks (seeds per configuration at each), the fresh seeds,
the spending function, the equivalence margins, the futility threshold, the processor class, and
the exact run ids of every (configuration, seed) under the planning code, with their config keys
(the same experiments under any code). Each look is then recorded once, with its date, the seeds
it used, the run standing for each planned (configuration, seed) and, per comparison, the
statistic, the boundary and the decision; a recorded look is never recomputed, so a decision
stands whatever is run later.

A planned run is an experiment, not a build of atnbench: where the planned id has not finished, a
finished run of the same config key stands for it when a canary vouched that its code and the
planning code compute the same numbers for its class (both count as current,
``atnbench.evidence.equivalence``). So a study planned before a refactor goes on after it; a
change that moves numbers leaves the planned ids waiting for the planning code's runs.

At look j a comparison whose sides have n_a, n_b seeds is at information fraction
t_j = harmonic mean(n_a, n_b) / N (N the planned maximum). Its Welch test crosses when the
two-sided p is below the look's nominal level from ``atnbench.report.sequential`` (spending
alpha / m): **reproduced** on the claimed side, **contradicted** on the other. Else it is
**equivalent** when the repeated interval from a design spending 2 alpha / m (two one-sided
tests at alpha / m) lies inside ±margin. Else, at the last look, **inconclusive**; before it,
**futile** (non-binding: it cannot raise the error) when under the current trend the conditional
probability of any decision at the last look is below ``futility``, otherwise the comparison
stays open and the next look runs the seeds its sides need.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Callable, Iterable, Optional

from scipy import stats

from atnbench.errors import UserError
from atnbench.report import sequential
from atnbench.evidence.machine import comparable_classes, path_free, processor_class
from atnbench.report.claims import Family, Side, comparison_key, margin_side, parse_side
from atnbench.report.rule import MIN_SEEDS
from atnbench.report.welch import welch_test

PREFIX = "study:"
SPENDING = "Lan-DeMets O'Brien-Fleming-type alpha spending, two-sided (Welch's t-test at each look)"
FUTILITY = 0.10
OPEN, REPRODUCED, CONTRADICTED, EQUIVALENT, FUTILE, UNDECIDED = (
    "open", "reproduced", "contradicted", "equivalent", "futile", "inconclusive")
DECIDED = (REPRODUCED, CONTRADICTED, EQUIVALENT, FUTILE, UNDECIDED)
FINISHED = ("done", "diverged")


@dataclass(frozen=True)
class Planned:
    """One comparison of a study: the claimed-lower and claimed-higher sides."""

    claims: tuple[str, ...]  # ids of the claims that declare it
    lower: str  # side texts
    higher: str
    stat: str
    higher_is_better: bool
    margin: Optional[float]  # absolute; None: no equivalence decision
    margin_of: Optional[str]  # relative margin: the side whose mean it is a fraction of
    margin_reason: str = ""


@dataclass(frozen=True)
class Study:
    name: str
    family: str
    family_digest: str
    m: int
    alpha: float  # the family's
    looks: tuple[int, ...]  # seeds per configuration at each look
    first_seed: int
    processor: Optional[str]
    task: str
    T: Optional[int]
    budget: float
    variant: Optional[str]
    comparisons: tuple[Planned, ...]
    run_ids: dict  # side text -> run ids of seeds first_seed, first_seed + 1, ...
    planned_at: str
    code: str
    spending: str = SPENDING
    futility: float = FUTILITY
    recorded: tuple[dict, ...] = ()  # the looks taken
    config_keys: dict = field(default_factory=dict)  # side text -> config keys of those seeds (empty: planned before)
    sweep: str = ""  # the sweep it was planned from (empty: planned before it was recorded)

    @property
    def alpha_each(self) -> float:
        return self.alpha / self.m

    @property
    def max_seeds(self) -> int:
        return self.looks[-1]

    def seeds(self, n: int) -> list[int]:
        return list(range(self.first_seed, self.first_seed + n))

    def decisions(self) -> dict[tuple[str, str], dict]:
        """(lower, higher) -> the comparison's entry at the last look that judged it."""
        found = {}
        for look in self.recorded:
            for entry in look["comparisons"]:
                found[(entry["lower"], entry["higher"])] = {**entry, "look": look["look"], "date": look["date"]}
        return found

    def open_comparisons(self) -> list[Planned]:
        decided = {key for key, entry in self.decisions().items() if entry["decision"] in DECIDED}
        return [c for c in self.comparisons if (c.lower, c.higher) not in decided]

    def next_look(self) -> Optional[int]:
        """Index of the next look, or None when the study is over."""
        if len(self.recorded) >= len(self.looks) or not self.open_comparisons():
            return None
        return len(self.recorded)

    def runs_used(self, side: str, n: int) -> list[str]:
        """The runs that stood for the side's first n planned seeds at the last look that used as
        many; the planned ids where no look recorded them."""
        for look in reversed(self.recorded):
            used = look.get("runs", {}).get(side)
            if used is not None and len(used) >= n:
                return list(used[:n])
        return list(self.run_ids[side][:n])

    def seeds_held(self, side: str) -> int:
        """Seeds of configuration ``side`` that are the study's: its whole plan while the study is
        open; once it is over (every comparison decided, or the last look taken), those of the look
        that decided each comparison the side is in (the last look taken for one left undecided).
        Planned seeds it never came to are anyone's: run later, they are exploratory."""
        if self.next_look() is not None or not self.recorded:
            return self.max_seeds
        taken = self.looks[len(self.recorded) - 1]
        decisions = self.decisions()
        return max((self.looks[decisions[(c.lower, c.higher)]["look"] - 1] if (c.lower, c.higher) in decisions
                    else taken for c in self.comparisons if side in (c.lower, c.higher)), default=taken)

    def all_runs(self) -> set[str]:
        """Every run id the study holds (planned, as :meth:`seeds_held` counts) or a look used."""
        return {run_id for side, ids in self.run_ids.items() for run_id in ids[:self.seeds_held(side)]} \
            | self.runs_looked_at()

    def runs_looked_at(self) -> set[str]:
        """Every run a recorded look used: the study's evidence so far."""
        return {run_id for look in self.recorded for used in look.get("runs", {}).values() for run_id in used
                if run_id}

    def planned_experiments(self) -> set[str]:
        """The config keys of every planned seed it holds (:meth:`seeds_held`): a run of one of them
        is this study's, whichever (vouched) code made it, looked at yet or not."""
        return {key for side, keys in self.config_keys.items() for key in keys[:self.seeds_held(side)]}

    def named_from(self, other: "Study") -> "Study":
        """This plan with the sweep and config keys ``other`` (the same plan) records, where this
        copy was recorded before plans named them."""
        return replace(self, config_keys=self.config_keys or other.config_keys, sweep=self.sweep or other.sweep)

    def line(self) -> str:
        taken = len(self.recorded)
        count = len(self.comparisons)
        return (f"study {self.name}: {count} comparison{'s' if count != 1 else ''} of {self.family} (m = {self.m}, alpha "
                f"{self.alpha:g} → {self.alpha_each:.3g} each), looks at {', '.join(map(str, self.looks))} seeds "
                f"from seed {self.first_seed}, {taken} of {len(self.looks)} taken, planned {self.planned_at[:10]}")


# -- store -----------------------------------------------------------------------------------------


def _from_json(value: dict) -> Study:
    value = dict(value)
    value["comparisons"] = tuple(Planned(**{**c, "claims": tuple(c["claims"])}) for c in value["comparisons"])
    value["looks"] = tuple(value["looks"])
    value["recorded"] = tuple(value.get("recorded", ()))
    return Study(**value)


def load(store, name: Optional[str] = None) -> list[Study]:
    """The studies a store records (one by name, or all)."""
    found = store.meta(PREFIX + (name or ""))
    studies = []
    for key, value in found.items():
        if name is not None and key != PREFIX + name:
            continue
        try:
            studies.append(_from_json(value))
        except (TypeError, KeyError, ValueError):
            from atnbench.store.errors import log

            log.warning(f"{store.path}: {key} is not a study this atnbench reads; skipped")
    return studies


def save(store, study: Study) -> None:
    store.set_meta(PREFIX + study.name, asdict(study))


# -- planning --------------------------------------------------------------------------------------


def off_protocol(config, side) -> list[str]:
    """How a run config differs from its task's protocol at its budget and variant (the preset's, or
    a task of your own's file's defaults), field by field ("hidden 16 (protocol 64)"), besides
    the settings the claim's side names (its k, a bias placement, ...): what a study may not change."""
    from atnbench.report.paper import OWN_TASK_FIELDS, PROTOCOL_FIELDS
    from atnbench.run.runspec import resolve_run
    from atnbench.tasks.registry import TASK_MODULES

    expected = resolve_run(config.task, {"T": config.T, "norm": config.norm, "cell": config.cell},
                           variant=config.variant, budget=config.budget).to_dict()
    named = {key for key, _ in side.settings}
    fields = PROTOCOL_FIELDS + (OWN_TASK_FIELDS if config.task not in TASK_MODULES else ())
    return [f"{name} {getattr(config, name)} (protocol {expected.get(name)})" for name in fields
            if name not in named and getattr(config, name) != expected.get(name)]


def side_matches(side: Side, config) -> bool:
    """Whether a run config is this side: its model, its k where given, its settings."""
    from atnbench.registry import get_scheme, model_name

    if model_name(config.cell, config.norm) != side.model:
        return False
    if side.k is not None and config.k != side.k:
        return False
    named = dict(side.settings)
    default_bias = get_scheme(config.norm).bias_inside
    if "bias_inside" not in named and config.bias_inside not in (None, default_bias):
        return False  # a side without the setting means the default placement
    for key, value in named.items():
        have = getattr(config, key, None)
        if key == "bias_inside" and have is None:
            have = default_bias
        if have != value:
            return False
    return True


def claims_of(family: Family, runs) -> list[Planned]:
    """Every comparison the family declares whose two sides are configurations among ``runs``
    (one task, T, budget, variant: the sweep's), each once."""
    if not runs:
        return []
    config = runs[0].config
    from atnbench.report.aggregate import higher_is_better

    planned: dict[tuple, Planned] = {}
    for claim in family.claims:
        if claim.task != config.task or (claim.T is not None and claim.T != config.T):
            continue
        if claim.budget != config.budget or claim.variant != config.variant:
            continue
        for lower, higher in claim.pairs:
            if not (any(side_matches(lower, r.config) for r in runs) and any(side_matches(higher, r.config) for r in runs)):
                continue
            key = comparison_key(claim, (lower, higher))
            margin = claim.margin  # absolute, or a fraction of the mean of the side ``of``
            this = Planned((claim.id,), lower.text, higher.text, claim.stat, higher_is_better(claim.stat),
                           None if margin is None else margin.value,
                           None if margin is None or margin.of is None else margin_side(margin.of, lower, higher).text,
                           "" if margin is None else margin.reason)
            if key in planned:
                _check_one_test(planned[key], this)
                planned[key] = replace(planned[key], claims=planned[key].claims + (claim.id,))
                continue
            planned[key] = this
    return list(planned.values())


def _check_one_test(first: Planned, other: Planned) -> None:
    """Claims that share a pair of sides share its one test: its boundaries, futility and margin
    are the first claim's. Another order or margin would be judged by the first's (a claim with no
    margin found "equivalent" inside another's, the verdict moving with the order of the file)."""
    if (first.lower, first.higher) != (other.lower, other.higher):
        apart = "in opposite orders"
    elif (first.margin, first.margin_of) != (other.margin, other.margin_of):
        apart = "with other margins"
    else:
        return
    raise UserError(f"claims {first.claims[0]!r} and {other.claims[0]!r} compare {first.lower!r} and {first.higher!r} "
                    f"{apart}: a study tests a pair of sides once, in one direction with one margin; make them one "
                    f"claim, or plan the other in a claims file of its own")


def parse_looks(text: str) -> tuple[int, ...]:
    try:
        looks = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UserError(f"--looks: seeds per configuration at each look, increasing, e.g. 6,12,18,24,30; "
                        f"got {text!r}") from None
    if not looks or any(b <= a for a, b in zip(looks, looks[1:])):
        raise UserError(f"--looks: the seeds at each look must increase, got {text!r}")
    if looks[0] < MIN_SEEDS:
        raise UserError(f"--looks: the first look needs at least {MIN_SEEDS} seeds a side (a test on fewer means "
                        f"nothing; docs/reproducing.md), got {looks[0]}")
    if looks[-1] > 1000:
        raise UserError(f"--looks: at most 1000 seeds per configuration, got {looks[-1]}")
    return looks


def make(name: str, family: Family, comparisons: list[Planned], sides_runs: dict, looks: tuple[int, ...],
         first_seed: int, task: str, T, budget: float, variant, alpha: float, config_keys: dict,
         code: Optional[str] = None, sweep: str = "") -> Study:
    """A new plan; ``code`` is the fingerprint its run ids are under (the running code's by default)."""
    from atnbench.evidence.identity import code_fingerprint
    from atnbench.evidence.machine import cpu_capability

    return Study(name=name, family=family.name, family_digest=family.tests_digest, m=family.m, alpha=alpha,
                 looks=looks, first_seed=first_seed, processor=cpu_capability(), task=task, T=T, budget=budget,
                 variant=variant, comparisons=tuple(comparisons), run_ids=sides_runs,
                 planned_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), code=code or code_fingerprint(),
                 config_keys=config_keys, sweep=sweep)


def same_plan(kept: Study, new: Study, family=None) -> Optional[str]:
    """Why ``new`` is not the plan ``kept`` recorded (None when it is). ``family``: the claims
    ``new`` was planned from, which knows a digest an older plan recorded (``Family.planned``)."""
    renamed = kept.family_digest == new.family_digest or (family is not None and family.planned(kept.family_digest))
    if kept.family != new.family and not renamed:
        return "family"  # a claims file renamed is the same family when its tests are (``Family.tests_digest``)
    for what in ("looks", "first_seed", "alpha", "m", "comparisons", "run_ids"):
        if getattr(kept, what) != getattr(new, what):
            return what.replace("_", " ")
    if kept.config_keys and new.config_keys and kept.config_keys != new.config_keys:
        return "config keys"
    return None


# -- a look ----------------------------------------------------------------------------------------


@dataclass
class SideData:
    values: list[float] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)  # processor class of each value's run
    codes: list[str] = field(default_factory=list)
    path_free: bool = True  # every run's numbers the same on the C++ path and the loop (machine.path_free)
    missing: int = 0  # planned runs not finished yet
    diverged: int = 0


def side_data(store, run_ids: Iterable[Optional[str]], stat: str) -> SideData:
    from atnbench.report.aggregate import RunData, run_values

    data = SideData()
    for run_id in run_ids:
        record = store.get_run(run_id) if run_id is not None else None
        if record is None or record.status not in FINISHED:
            data.missing += 1
            continue
        if record.status == "diverged":
            data.diverged += 1
            continue
        value = run_values(RunData(record, tuple(store.curve(run_id)))).get(stat)
        if value is None:
            data.missing += 1
            continue
        data.values.append(value)
        data.classes.append(processor_class(record.env, record.config))
        data.path_free = data.path_free and path_free(record.config)
        data.codes.append(str(record.env.get("code") or "unknown"))
    return data


def standing_runs(store, study: Study, side: str, n: int, experiments: Callable[[], dict]) -> list[Optional[str]]:
    """The run standing for each of the side's first n planned seeds: the planned run where it
    finished, else a finished run of the same config key whose code and the planning code both
    count as current (a canary vouched for them); None where none has finished. ``experiments()``:
    config key -> the store's runs of that experiment (``experiments_of``; read on first need)."""
    from atnbench.evidence.equivalence import stand_in

    keys = study.config_keys.get(side, [])
    found = []
    for i, run_id in enumerate(study.run_ids[side][:n]):
        record = store.get_run(run_id)
        if record is not None and record.status in FINISHED:
            found.append(run_id)
            continue
        if i >= len(keys):
            found.append(None)
            continue
        other = stand_in(experiments().get(keys[i], ()), made_by=study.code)
        found.append(other.run_id if other is not None else None)
    return found


def experiments_of(store, study: Study) -> Callable[[], dict[str, list]]:
    """config key -> the store's runs of the study's task and length, read once on first call."""
    from atnbench.evidence.identity import config_keys

    @functools.cache
    def read() -> dict[str, list]:
        grouped: dict[str, list] = {}
        for record in store.runs(task=study.task, T=study.T):
            for key in config_keys(record.config):  # a plan made under an earlier rule of identity keeps its keys
                grouped.setdefault(key, []).append(record)
        return grouped

    return read


def fraction(n_a: int, n_b: int, maximum: int) -> float:
    return min(1.0, statistics.harmonic_mean([n_a, n_b]) / maximum) if n_a and n_b else 0.0


def judge(planned: Planned, a: list[float], b: list[float], fractions: tuple[float, ...], alpha: float, last: bool,
          futility: float, classes: tuple[list[str], list[str]] = ((), ())) -> dict:
    """One comparison at one look: the Welch statistic (stratified by processor class where the
    sides mix classes differently), the look's boundary and the decision."""
    sign = -1.0 if planned.higher_is_better else 1.0
    signed_a, signed_b = [sign * v for v in a], [sign * v for v in b]
    test = welch_test(signed_a, signed_b, classes)
    nominal = sequential.nominal_levels(fractions, alpha)[-1]
    nominal_eq = sequential.nominal_levels(fractions, min(0.5, 2 * alpha))[-1]
    margin = planned.margin
    if planned.margin_of is not None and margin is not None:  # a fraction of that side's mean
        of = margin_side(parse_side(planned.margin_of), parse_side(planned.lower), parse_side(planned.higher))
        if of is None:  # a plan recorded before claims files were checked for it
            raise UserError(f"the margin of {planned.lower} < {planned.higher} is '{planned.margin_of}', which names "
                            f"neither side (or both): it cannot be judged")
        margin = margin * abs(statistics.fmean(a if of.text == planned.lower else b))
    entry = {"lower": planned.lower, "higher": planned.higher, "n": [len(a), len(b)], "fraction": fractions[-1],
             "difference": sign * test.diff, "se": test.se, "df": test.df, "p": test.p, "nominal_level": nominal,
             "boundary_z": float(stats.norm.isf(nominal / 2)), "stratified": test.stratified, "margin": margin}
    if test.se == 0:
        entry["decision"] = OPEN if not last else UNDECIDED
        entry["reason"] = "no spread: the test is undefined"
        return entry
    half = stats.t.isf(nominal / 2, test.df) * test.se
    half_eq = stats.t.isf(nominal_eq / 2, test.df) * test.se
    entry["interval"] = sorted([sign * (test.diff - half), sign * (test.diff + half)])
    entry["equivalence_interval"] = sorted([sign * (test.diff - half_eq), sign * (test.diff + half_eq)])
    if test.p < nominal:
        decision = REPRODUCED if test.diff < 0 else CONTRADICTED
        reason = f"p = {test.p:.3g} < {nominal:.3g}, the look's level"
    elif margin is not None and abs(test.diff) + half_eq < margin:
        decision, reason = EQUIVALENT, f"the interval of the difference lies inside ±{margin:.4g}"
    elif last:
        decision, reason = UNDECIDED, f"p = {test.p:.3g} ≥ {nominal:.3g} at the last look"
    else:
        chance = decision_chance(test, fractions[-1], alpha, margin)
        entry["conditional_probability"] = chance
        if chance < futility:
            decision = FUTILE
            reason = f"under the current trend a decision at the last look has probability {chance:.2f} < {futility:g}"
        else:
            decision, reason = OPEN, f"p = {test.p:.3g} ≥ {nominal:.3g}, the look's level; next look"
    entry["decision"], entry["reason"] = decision, reason
    return entry


def decision_chance(test, t: float, alpha: float, margin: Optional[float]) -> float:
    """The conditional probability, under the current trend (the observed difference is the true
    one), that the last look decides: crosses its boundary, or (with a margin) finds equivalence.
    Normal approximation on the B-value scale; used for non-binding futility only."""
    z = test.diff / test.se
    final_c = stats.norm.isf(min(0.5, 2 * alpha) / 2)  # the equivalence design's last boundary, about
    theta = z / math.sqrt(t)  # drift per unit information
    b_now, left = z * math.sqrt(t), 1 - t
    if left <= 0:
        return 0.0
    mean_final, sd_final = b_now + theta * left, math.sqrt(left)
    c_final = stats.norm.isf(sequential.nominal_levels((1.0,), alpha)[0] / 2)
    cross = stats.norm.sf((c_final - mean_final) / sd_final) + stats.norm.cdf((-c_final - mean_final) / sd_final)
    if margin is None:
        return float(cross)
    se_final = test.se * math.sqrt(t)  # the difference's standard error at the planned maximum
    diff_final_mean, diff_final_sd = test.diff, test.se * math.sqrt(t * left)
    room = margin - final_c * se_final
    equivalent = 0.0 if room <= 0 else float(
        stats.norm.cdf((room - diff_final_mean) / diff_final_sd) - stats.norm.cdf((-room - diff_final_mean) / diff_final_sd))
    return float(min(1.0, cross + equivalent))


def take_look(store, study: Study) -> Optional[dict]:
    """Analyse the next look from the store's runs and record it; None when its runs are not all
    finished yet (the look waits: it is never taken on part of its seeds by choice)."""
    index = study.next_look()
    if index is None:
        return None
    n = study.looks[index]
    used, experiments = {}, experiments_of(store, study)
    for planned in study.open_comparisons():
        for side in (planned.lower, planned.higher):
            if side not in used:
                used[side] = standing_runs(store, study, side, n, experiments)
    look = analyse_look(store, study, index, used)
    if look is not None:
        save(store, replace(study, recorded=study.recorded + (look,)))
    return look


def analyse_look(store, study: Study, index: int, used: dict) -> Optional[dict]:
    """Look ``index`` of ``study`` (its earlier looks recorded) on the runs ``used`` (side -> run
    ids): what ``take_look`` records, and what ``check_recorded`` recomputes. None while a run is
    missing or unfinished."""
    n = study.looks[index]
    previous = study.decisions()
    entries = []
    for planned in study.open_comparisons():
        a = side_data(store, used[planned.lower], planned.stat)
        b = side_data(store, used[planned.higher], planned.stat)
        if a.missing or b.missing:
            return None
        history = tuple(look["fractions"][f"{planned.lower} < {planned.higher}"] for look in study.recorded
                        if f"{planned.lower} < {planned.higher}" in look.get("fractions", {}))
        t = fraction(len(a.values), len(b.values), study.max_seeds)
        fractions = tuple(f for f in history if f < t) + (t,)
        if len(a.values) < 2 or len(b.values) < 2 or t <= 0:
            entry = {"lower": planned.lower, "higher": planned.higher, "n": [len(a.values), len(b.values)],
                     "decision": OPEN if index < len(study.looks) - 1 else UNDECIDED,
                     "reason": f"{a.diverged + b.diverged} diverged runs leave too few values"}
        else:
            entry = judge(planned, a.values, b.values, fractions, study.alpha_each, index == len(study.looks) - 1,
                          study.futility, comparable_classes((a.classes, b.classes), (a.path_free, b.path_free)))
        entry["classes"] = [_counts(a.classes), _counts(b.classes)]
        entry["codes"] = [sorted(set(a.codes)), sorted(set(b.codes))]
        entry["diverged"] = [a.diverged, b.diverged]
        entry["previous"] = previous.get((planned.lower, planned.higher), {}).get("decision")
        entries.append(entry)
    return {"look": index + 1, "seeds": n, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "fractions": {f"{e['lower']} < {e['higher']}": e.get("fraction", 0.0) for e in entries},
            "comparisons": entries, "runs": used}


def check_recorded(store, study: Study, family: Optional[Family] = None) -> Optional[str]:
    """Why ``study``'s record is not what its runs give (None when it is): its alpha is the rule's;
    its m is its family's where that claims file is known here (``family``, the same digest) and
    at least its own comparisons' count; and every recorded look, recomputed from the runs it
    names in ``store``, gives the decisions, seed counts and p-values it records. So a study
    brought in from a file (or edited there) cannot carry a verdict its runs do not give."""
    from atnbench.report.rule import ALPHA

    if study.alpha != ALPHA:
        return f"alpha {study.alpha:g}, where the rule's is {ALPHA:g}"
    if study.m < len({(c.lower, c.higher) for c in study.comparisons}):
        return f"m = {study.m}, fewer than its own {len(study.comparisons)} comparisons"
    if family is not None and family.name == study.family and family.planned(study.family_digest) \
            and family.m != study.m:
        return f"m = {study.m}, where its claims file {family.name} has m = {family.m}"
    if len(study.recorded) > len(study.looks):
        return f"{len(study.recorded)} looks recorded, {len(study.looks)} planned"
    taken = replace(study, recorded=())
    for index, look in enumerate(study.recorded):
        where = f"look {index + 1}"
        try:
            if look["look"] != index + 1 or taken.next_look() != index:
                return f"{where} is out of order, or taken after the study ended"
            used = look.get("runs") or {  # a look recorded before looks named their runs: the planned ids
                side: study.run_ids[side][:study.looks[index]]
                for c in taken.open_comparisons() for side in (c.lower, c.higher)}
            again = analyse_look(store, taken, index, used)
        except (KeyError, TypeError, AttributeError):
            return f"{where} names runs no planned comparison reads"
        if again is None:
            return f"{where}: runs it names are not in this store, or not finished"
        kept = [(e.get("lower"), e.get("higher"), e.get("decision"), e.get("n"), e.get("p")) for e in look["comparisons"]]
        redone = [(e["lower"], e["higher"], e["decision"], e["n"], e.get("p")) for e in again["comparisons"]]
        for before, now in itertools.zip_longest(kept, redone):
            if before is None or now is None or before[:4] != now[:4] or not _same_p(before[4], now[4]):
                shown = before or now
                return (f"{where}, {shown[0]} < {shown[1]}: recorded {_entry_text(before)}, its runs give "
                        f"{_entry_text(now)}")
        taken = replace(taken, recorded=taken.recorded + (look,))
    return None


def _same_p(recorded, recomputed) -> bool:
    if recorded is None or recomputed is None:
        return recorded is recomputed
    return isinstance(recorded, (int, float)) and math.isclose(recorded, recomputed, rel_tol=1e-9)


def _entry_text(entry) -> str:
    if entry is None:
        return "no such comparison"
    p = entry[4]
    return f"{entry[2]} (n = {entry[3]}, p = {format(p, '.3g') if isinstance(p, (int, float)) else p})"


def _counts(classes: list[str]) -> dict[str, int]:
    return {c: classes.count(c) for c in sorted(set(classes))}


def needed_sides(study: Study) -> set[str]:
    """The configurations the open comparisons still need."""
    return {side for c in study.open_comparisons() for side in (c.lower, c.higher)}


# -- pricing ---------------------------------------------------------------------------------------


def power_at(effect: float, looks: tuple[int, ...], alpha: float) -> float:
    """The design's power at a standardized effect (difference / common sd), normal approximation."""
    maximum = looks[-1]
    theta = abs(effect) * math.sqrt(maximum / 2)
    return sequential.crossing_probability(tuple(n / maximum for n in looks), alpha, theta)


# -- moving studies between stores (store export/import --studies) ---------------------------------


def from_records(records, source: str) -> list[Study]:
    """The studies of a JSON list (``store export --studies``), each checked for its shape; a
    UserError naming the file and entry otherwise. Read before any store is opened."""
    if not isinstance(records, list):
        raise UserError(f"{source}: expected a JSON list of studies (atnbench store export --studies)")
    incoming, first = [], {}
    for i, record in enumerate(records):
        try:
            found = _from_json(record)
        except (TypeError, KeyError, ValueError, AttributeError):
            raise UserError(f"{source}: entry {i} is not a study atnbench reads") from None
        if found.name in first and incoming[first[found.name]] != found:  # else the store was blamed for it
            raise UserError(f"{source}: entries {first[found.name]} and {i} are two studies named {found.name} "
                            f"that differ; a study's name is one plan")
        first.setdefault(found.name, i)
        incoming.append(found)
    return incoming


def _refuse_off_protocol(store, study: Study, source: str) -> None:
    """A study planned off the protocol its claims are judged on (where planning did not refuse
    it: another machine, an older atnbench) does not come in: its decisions would be verdicts."""
    from atnbench.config import build_config

    for side, run_ids in study.run_ids.items():
        record = next((found for found in map(store.get_run, run_ids) if found is not None), None)
        off = off_protocol(build_config(record.config), parse_side(side)) if record is not None else []
        if off:
            raise UserError(f"{source}: study {study.name}: the runs of side {side!r} differ from the protocol its "
                            f"claims are judged on: {', '.join(off)}; nothing imported")


def _refuse_a_second_study(study: Study, kept, source: str, path) -> None:
    """A comparison is tested in one study of its claims file (a plan leaves out those another
    study tests): one planned on another machine, where that study was not, may not come in
    beside it, or the comparison would be decided twice, each time at its full share of alpha."""
    def places(s: Study) -> set:
        return {(s.task, s.T, s.budget, s.variant, c.lower, c.higher) for c in s.comparisons}

    for other in kept:
        if other.family == study.family and other.name != study.name:
            shared = sorted(places(study) & places(other))
            if shared:
                task, T, _, _, lower, higher = shared[0]
                raise UserError(f"{source}: study {study.name} tests {lower} < {higher} ({task} T={T}), which study "
                                f"{other.name} in {path} already tests: a comparison is tested in one study (a "
                                f"second would spend its alpha again); nothing imported")


def bring_in(store, incoming: list[Study], source: str) -> tuple[int, int]:
    """``incoming`` studies into ``store``, whose runs are already there: a new one added, the same
    plan with more looks taken extended (or with its sweep and config keys, where the kept copy
    lacks them), the same plan and looks kept. A study of the same name with another plan, looks
    that disagree, or a record its runs do not give (``check_recorded``) is a UserError naming
    it; call it inside the store's ``batch()`` with the runs, so that nothing is written then.
    Returns (added or extended, already there), each study counted once."""
    from atnbench.report.claims import paper_family

    kept = {study.name: study for study in load(store)}
    changed: dict[str, Study] = {}
    for study in incoming:
        old = kept.get(study.name)
        if old is None:
            _refuse_a_second_study(study, kept.values(), source, store.path)
            _refuse_off_protocol(store, study, source)
            new = study
        else:
            why = same_plan(old, study)
            if why is not None:
                raise UserError(f"{source}: study {study.name} differs from the one in {store.path} in its {why}")
            shorter, longer = sorted((old.recorded, study.recorded), key=len)
            if list(longer[:len(shorter)]) != list(shorter):
                raise UserError(f"{source}: study {study.name}'s recorded looks disagree with {store.path}'s")
            newer = study if len(study.recorded) > len(old.recorded) else old
            new = newer.named_from(study if newer is old else old)
            if new == old:
                continue
        why = check_recorded(store, new, paper_family())
        if why is not None:
            raise UserError(f"{source}: study {study.name} is not what its runs give ({why}); nothing imported")
        kept[study.name] = changed[study.name] = new
    for study in changed.values():
        save(store, study)
    names = {study.name for study in incoming}
    return len(changed), len(names) - len(changed)

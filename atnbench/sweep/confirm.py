"""``sweep NAME --until-decided``: a sweep's claims run as a study in planned looks
(``atnbench.report.study``): the plan recorded before the first run, the seeds of each look run for
the configurations still undecided, each look recorded, stop at a decision or for futility."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from atnbench.errors import UserError
from atnbench.report import study as studies
from atnbench.report.claims import Family

DEFAULT_LOOKS = (6, 12, 18, 24, 30)


def next_fresh_seed(store_path: Path, task: str, Ts) -> int:
    """One past the highest seed the store holds for the task at these lengths: seeds no run of
    the store (a pilot, an earlier exploration) has used."""
    from atnbench.store import ResultsStore

    if not Path(store_path).is_file():
        return 0
    with ResultsStore.open_read_only(store_path) as results:
        seeds = [r.seed for r in results.runs(task=task) if r.T in set(Ts) and r.seed is not None]
    return max(seeds, default=-1) + 1


def kept(store_path: Path, name: str) -> Optional[studies.Study]:
    from atnbench.store import ResultsStore

    if not Path(store_path).is_file():
        return None
    with ResultsStore.open_read_only(store_path) as results:
        found = studies.load(results, name)
    return found[0] if found else None


def planned_id(run, code: str) -> str:
    """The id a sweep's run has under the code of fingerprint ``code`` (a plan's run ids)."""
    from atnbench.evidence.identity import run_id_under

    return run_id_under(run.config.to_dict(), code)


def in_plan(runs: list, code: str, planned: set) -> list:
    """The runs of ``runs`` whose id under ``code`` is among ``planned``, by any rule of identity
    (a plan made under an earlier one keeps the ids it recorded: ``identity.run_ids_under``)."""
    from atnbench.evidence.identity import run_ids_under

    return [run for run in runs if not planned.isdisjoint(run_ids_under(run.config.to_dict(), code))]


def plan(name: str, runs: list, family: Family, looks: tuple[int, ...], first_seed: int, alpha: float,
         code: Optional[str] = None, taken: Optional[dict] = None, sweep: Optional[str] = None) -> studies.Study:
    """The study of ``runs`` (one protocol of a sweep, seeds first_seed .. first_seed + max - 1),
    its run ids under ``code`` (a kept plan's code, so plans by other code compare; the running
    code's by default); without the comparisons ``taken`` by other studies (``planned_elsewhere``;
    ``prepare`` plans no study whose every comparison is taken)."""
    from atnbench.evidence.identity import config_key
    from atnbench.report.claims import parse_side

    comparisons = studies.claims_of(family, runs)
    if not comparisons:
        config = runs[0].config
        raise UserError(f"no claim of {family.name} compares two configurations of this sweep at its protocol "
                        f"({config.task} T={config.T}, budget {config.budget:g}{', variant ' + config.variant if config.variant else ''}); "
                        f"a study tests claims (--claims FILE for your own, with budget: if not the full protocol)")
    config = runs[0].config
    comparisons = [c for c in comparisons if place(config, c) not in (taken or {})]
    seeds = list(range(first_seed, first_seed + looks[-1]))
    run_ids, keys = {}, {}
    for side in sorted({s for c in comparisons for s in (c.lower, c.higher)}):
        wanted = parse_side(side)
        matching = [run for run in runs if studies.side_matches(wanted, run.config)]
        by_seed = {run.config.seed: run for run in matching}
        chosen = [by_seed[s] for s in seeds if s in by_seed]
        if len(chosen) != len(seeds) or len(matching) != len(seeds):
            raise UserError(f"side {side!r} matches {len(matching) / len(seeds):g} runs per seed in this sweep; "
                            f"a study needs exactly one configuration per side")
        off = studies.off_protocol(chosen[0].config, wanted)
        if off:
            own = "its task file's defaults (or make these its defaults)" if "user_task" in (config.options or {}) \
                else "the preset's settings"
            raise UserError(f"side {side!r}: these runs differ from the protocol the claims are judged on "
                            f"({config.task} T={config.T} at budget {config.budget:g}): {', '.join(off)}; a study "
                            f"decides a claim on that protocol only (a reduced one: the claim's budget:), so run it "
                            f"at {own}")
        run_ids[side] = [planned_id(run, code) if code else run.run_id for run in chosen]
        keys[side] = [config_key(run.config.to_dict()) for run in chosen]
    return studies.make(name, family, comparisons, run_ids, looks, first_seed, config.task, config.T, config.budget,
                        config.variant, alpha, keys, code, sweep or name)


def record_or_reuse(store_path: Path, new: studies.Study, dry_run: bool,
                    family: Optional[Family] = None) -> tuple[studies.Study, str]:
    """The study the store records under this name (it must be the same plan), else ``new``,
    recorded now (not on a dry run)."""
    from atnbench.store import ResultsStore

    old = kept(store_path, new.name)
    if old is not None:
        differs = studies.same_plan(old, new, family)
        if differs is not None:
            raise UserError(f"{store_path} records study {old.name} (planned {old.planned_at[:10]}) with other "
                            f"{differs}; a plan is fixed before its runs: run it as recorded (its looks "
                            f"{','.join(map(str, old.looks))}, from seed {old.first_seed}), or use another --store")
        if not (old.config_keys and old.sweep) and not dry_run:  # planned before plans named their experiments
            old = old.named_from(new)
            with ResultsStore(store_path) as results:
                studies.save(results, old)
            return old, "reused: the plan recorded before its runs (its sweep and its runs' config keys recorded now)"
        return old, "reused: the plan recorded before its runs"
    if dry_run:
        return new, "dry run: not recorded"
    with ResultsStore(store_path) as results:
        studies.save(results, new)
    return new, "recorded in the store before any of its runs"


def protocol_of(config) -> tuple:
    """What a study holds fixed: one task's length, budget and variant (a claim names them)."""
    return (config.T, config.budget, config.variant)


def study_name(name: str, varied, config) -> str:
    """The study of one protocol of sweep ``name``: the sweep's name, with the length and variant
    where the sweep varies them (table1-copying-T100), so each study keeps its name whatever
    runs a flag picks."""
    return "-".join([name] + ([f"T{config.T}"] if "T" in varied else [])
                    + ([config.variant or "default"] if "variant" in varied else []))


def prepare(name: str, task: str, varied, expand_seeds: Callable, store: Path, family: Family,
            looks_text: Optional[str], first_seed: Optional[int], power: Optional[float], max_seeds: int,
            dry_run: bool, say: Callable[[str], None]) -> list[tuple[studies.Study, list]]:
    """The studies of sweep ``name`` (a reproduce part's): one per protocol (length, variant) the
    family has claims about, each the one the store records, else planned now and recorded unless
    ``dry_run``. ``expand_seeds(seeds)`` gives the sweep's runs for those seeds; ``varied``, the
    settings the sweep varies (they name the studies). Returns each study with the runs of every
    seed it may run."""
    probe = expand_seeds((0,))
    found, skipped = [], []
    for protocol in sorted({protocol_of(run.config) for run in probe}, key=str):
        same = [run for run in probe if protocol_of(run.config) == protocol]
        this = study_name(name, varied, same[0].config)
        where = f"T={protocol[0]}" + (f", variant {protocol[2]}" if protocol[2] else "")
        comparisons = studies.claims_of(family, same)
        if not comparisons:
            skipped.append((f"{where}: no claim of {family.name}", same))
            continue
        old = kept(store, this)
        taken = {} if old is not None else planned_elsewhere(store, this, family)
        others = {taken.get(place(same[0].config, c)) for c in comparisons}
        if None not in others:
            skipped.append((f"{where}: every comparison is tested in study {', '.join(sorted(others))}", None))
            continue

        def expand_protocol(seeds, protocol=protocol):
            return [run for run in expand_seeds(seeds) if protocol_of(run.config) == protocol]

        found.append(_prepare_one(this, name, old, taken, task, expand_protocol, store, family, looks_text,
                                  first_seed, power, max_seeds, dry_run, say))
    if not found:
        unclaimed = [runs for _, runs in skipped if runs is not None]
        if len(unclaimed) == len(skipped):
            plan(name, unclaimed[0], family, DEFAULT_LOOKS, 0, 0.05)  # raises: no claim is about its runs
        raise UserError("no study: " + "; ".join(why for why, _ in skipped) + " (a comparison is tested in one "
                        "study: a second would spend its alpha twice)")
    for why, _ in skipped:
        say(f"no study for {why}")
    return found


def _prepare_one(name: str, sweep: str, old: Optional[studies.Study], taken: dict, task: str, expand_seeds: Callable,
                 store: Path, family: Family, looks_text: Optional[str], first_seed: Optional[int],
                 power: Optional[float], max_seeds: int, dry_run: bool,
                 say: Callable[[str], None]) -> tuple[studies.Study, list]:
    """The study of one protocol: ``old``, the one the store records, else planned now from
    ``looks_text``, a pilot sizing (``power``) or the default looks, without the comparisons
    ``taken`` by other studies."""
    from atnbench.report import plan as sizing
    from atnbench.report.verdicts import ALPHA

    probe = expand_seeds((0,))
    Ts = {run.config.T for run in probe}
    if first_seed is None:
        first_seed = old.first_seed if old else next_fresh_seed(store, task, Ts)
    elif old is None and first_seed < (fresh := next_fresh_seed(store, task, Ts)):
        raise UserError(f"--first-seed {first_seed}: the store holds runs of {task} at seeds up to {fresh - 1} (a "
                        f"pilot, an exploration: seen before this plan); a study's seeds are fresh, its plan recorded "
                        f"before any of their runs, so give --first-seed {fresh} or more (the default is {fresh})")
    if looks_text is not None:
        looks = studies.parse_looks(looks_text)
    elif old is not None:
        looks = old.looks
    elif power is not None:
        if not 0 < power < 1:
            raise UserError(f"--seeds-for-power is a power in (0, 1), e.g. 0.8; got {power:g}")
        found = sizing.size(studies.claims_of(family, probe), [run.config for run in probe],
                            sizing.pilot_groups(store, task, Ts), ALPHA / family.m, power)
        most, capped = sizing.maximum(found, max_seeds)  # a pilot it cannot plan from: the error alone says why
        for line in found:
            say("  pilot: " + line.text())
        looks = sizing.looks_up_to(most)
        say(f"--seeds-for-power {power:g}: at most {looks[-1]} seeds per configuration"
            + (f" (capped at --max-seeds {max_seeds})" if capped else ""))
    else:
        looks = DEFAULT_LOOKS
    runs = expand_seeds(tuple(range(first_seed, first_seed + looks[-1])))
    new = plan(name, runs, family, looks, first_seed, ALPHA, code=old.code if old else None, taken=taken,
               sweep=old.sweep if old and old.sweep else sweep)
    study, note = record_or_reuse(store, new, dry_run, family)
    for line in plan_lines(study):
        say(line)
    for c in studies.claims_of(family, probe):
        other = taken.get(place(probe[0].config, c))
        if other is not None:
            say(f"  {c.lower} < {c.higher}: tested in study {other}, not here")
    say(f"  plan {note}")
    planned = {run_id for ids in study.run_ids.values() for run_id in ids}
    return study, in_plan(runs, study.code, planned)


def place(config, comparison) -> tuple:
    """Where a comparison is tested: (task, T, budget, variant, lower, higher); ``config`` a run's
    config or a study (both have the four)."""
    return (config.task, config.T, config.budget, config.variant, comparison.lower, comparison.higher)


def planned_elsewhere(store: Path, name: str, family: Family) -> dict[tuple, str]:
    """``place`` -> the study of the family that already tests it.
    A comparison is tested in one study: a second would spend its share of alpha twice."""
    from atnbench.store import ResultsStore

    if not Path(store).is_file():
        return {}
    with ResultsStore.open_read_only(store) as results:
        others = [s for s in studies.load(results) if s.name != name and s.family == family.name]
    return {place(s, c): s.name for s in others for c in s.comparisons}  # a study has a config's task, T, budget, variant


def plan_lines(study: studies.Study) -> list[str]:
    """The plan, one line a fact: what a reviewer checks first."""
    from atnbench.report import sequential

    fractions = tuple(n / study.max_seeds for n in study.looks)
    levels = sequential.nominal_levels(fractions, study.alpha_each)
    lines = [study.line(),
             f"  test: {study.spending}; futility (non-binding): a decision under the current trend less likely "
             f"than {study.futility:g}",
             "  nominal level at each look: " + ", ".join(f"{n} seeds: p < {p:.2g}" for n, p in zip(study.looks, levels)),
             f"  processor class: {study.processor or 'unknown'}; code {study.code}"]
    for c in study.comparisons:
        margin = ("no equivalence margin" if c.margin is None else
                  f"margin ±{c.margin:.4g}" if c.margin_of is None else f"margin ±{c.margin:.0%} of {c.margin_of}")
        lines.append(f"  {c.lower} < {c.higher} ({c.stat}; {margin}; claims {', '.join(c.claims)})")
    return lines


def look_lines(look: dict, study: studies.Study) -> list[str]:
    lines = [f"look {look['look']} of {len(study.looks)} ({look['seeds']} seeds a side), recorded {look['date']}:"]
    for entry in look["comparisons"]:
        lines.append(f"  {entry['lower']} < {entry['higher']}: {entry['decision']} ({entry.get('reason', '')})")
    return lines


def run(study: studies.Study, runs: list, store_path: Path, run_sweep: Callable, say: Callable) -> int:
    """Run the looks left: each look's seeds for the configurations still needed, then the look
    recorded. Returns the exit code of the last sweep of runs (0 when every look could be taken)."""
    from atnbench.evidence.identity import run_ids_under
    from atnbench.store import ResultsStore

    by_id = {run_id: run for run in runs  # the plan's ids, under its code, by any rule of identity
             for run_id in run_ids_under(run.config.to_dict(), study.code)}
    while (index := study.next_look()) is not None:
        n = study.looks[index]
        wanted = [rid for side in sorted(studies.needed_sides(study)) for rid in study.run_ids[side][:n]]
        say(f"look {index + 1} of {len(study.looks)}: {n} seeds a side for {len(studies.needed_sides(study))} "
            f"configurations ({len(wanted)} runs, those in the store skipped)")
        result = run_sweep([by_id[rid] for rid in wanted])
        if result.signal is not None:
            say(result.stopped_text())  # the look waits; said as a plain sweep says it
        if result.signal is not None or result.exit_code:
            return result.exit_code or 1
        with ResultsStore(store_path) as results:
            look = studies.take_look(results, study)
            study = studies.load(results, study.name)[0]
        if look is None:
            say(f"look {index + 1}: not every planned run finished (failed or diverged runs are re-run by the same "
                f"command); the look waits")
            return 1
        for line in look_lines(look, study):
            say(line)
    say(f"study {study.name}: over; " + "; ".join(over_lines(study, store_path)))
    return 0


def over_lines(study: studies.Study, store_path: Path) -> list[str]:
    """Each comparison's end, as ``report`` gives it: the look's decision, or "uninformative" where
    both rows sit at the baseline whatever the test said (the sweep said "inconclusive" where the
    report said "uninformative", QA)."""
    from atnbench.report.plan import pilot_groups
    from atnbench.report.verdicts import UNINFORMATIVE, study_verdicts

    shown = study_verdicts(study, pilot_groups(store_path, study.task, [study.T]))
    lines = []
    for key, entry in study.decisions().items():
        seen = shown.get(key)
        if seen is not None and seen.verdict == UNINFORMATIVE:
            lines.append(f"{key[0]} < {key[1]}: {UNINFORMATIVE} ({seen.reason}; its test: {entry['decision']})")
        else:
            lines.append(f"{key[0]} < {key[1]}: {entry['decision']}")
    return lines


def still_needed(study: studies.Study, runs: list) -> list:
    """The runs of ``runs`` that the study's looks left may ask for (``run``): every seed up to
    its maximum of the configurations its open comparisons compare; none once it is over."""
    if study.next_look() is None:
        return []
    wanted = {run_id for side in studies.needed_sides(study) for run_id in study.run_ids[side]}
    return in_plan(runs, study.code, wanted)


def run_all(planned: list[tuple[studies.Study, list]], store_path: Path, run_sweep: Callable, say: Callable) -> int:
    """Each study's looks in turn (``run``); stops at a signal's exit code, else the worst code."""
    worst = 0
    for study, runs in planned:
        code = run(study, runs, store_path, run_sweep, say)
        if code >= 128:
            return code
        worst = max(worst, code)
    return worst


def left_to_run(study: studies.Study, store_path: Path):
    """The single-thread CPU time (``sweep.estimate.Estimate``) of the planned runs the study may
    still need: every seed up to its maximum of the configurations its open comparisons compare,
    less those finished (or stood in for by vouched code); None where the plan cannot be expanded
    again here (planned before plans named their sweep, or from a sweep file not here)."""
    from atnbench.evidence.identity import config_keys
    from atnbench.store import ResultsStore
    from atnbench.sweep import estimate, expand, load_sweep, measured_rates

    if not (study.sweep and study.config_keys):
        return None
    try:
        runs = expand(load_sweep(study.sweep), budget=study.budget, seeds=tuple(study.seeds(study.max_seeds)),
                      overrides={"threads": 1, "device": "cpu"})
    except (UserError, OSError):  # a ConfigError is a UserError
        return None
    by_key = {key: run for run in runs for key in config_keys(run.config.to_dict())}
    needed = []
    with ResultsStore.open_read_only(store_path) as results:
        experiments = studies.experiments_of(results, study)
        for side in sorted(studies.needed_sides(study)):
            standing = studies.standing_runs(results, study, side, study.max_seeds, experiments)
            needed += [by_key.get(key) for key, found in zip(study.config_keys[side], standing) if found is None]
    if None in needed:
        return None
    return estimate([run.config for run in needed], measured_rates(store_path))

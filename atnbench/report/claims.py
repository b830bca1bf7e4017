"""Claims files: what a claim says, and the family of comparisons a file declares.

A claims file (the paper's ``paper_claims.yaml``, or a user's) lists claims; each claim is one or
more comparisons "A is lower than B" on one statistic of one task's runs. **The file is the
family** over which the error is controlled: m is the number of *distinct* comparisons it
declares (the same pair of sides on the same task, length, protocol and statistic counted once,
whichever claim names it and in whichever order), run or not. So a claim's verdict never moves
with a report's filters, with other claims files, or with which comparisons have data yet
(``atnbench.report.verdicts`` gives each comparison alpha / m).

A claim is judged on one protocol: ``budget`` (default 1, the full protocol) and ``variant``
(default: the preset's own). Runs of the same task at another budget or variant are shown beside
it as exploratory numbers, never decided.

A claim may declare an equivalence ``margin``: absolute (``margin: 0.005``, in the statistic's
unit) or relative to a named side's mean (``margin: "5% of ln"``; the mean over the comparison's
own seeds, so that margin is itself an estimate — prefer an absolute one where the unit is
known), with ``margin_reason`` saying why that size is practically nothing.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml

CLAIMS_FILE = Path(__file__).resolve().parent / "paper_claims.yaml"
CLAIM_KEYS = {"id", "claim", "source", "task", "T", "stat", "order", "pairs", "budget", "variant", "margin",
              "margin_reason"}
# the statistics a claim may compare (atnbench.report.aggregate.run_values names them)
_METRICS_LOW = ("bpc", "ppl", "mae")
KNOWN_STATS = frozenset(
    [f"{kind}_{split}_loss" for kind in ("min", "final") for split in ("train", "val")]
    + ["test_loss_at_best_val", "max_val_accuracy", "final_val_accuracy", "test_accuracy_at_best_val"]
    + [f"{kind}_val_{m}" for kind in ("min", "final") for m in _METRICS_LOW]
    + [f"test_{m}_at_best_val" for m in _METRICS_LOW])
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s+of\s+(.+?)\s*$")


class ClaimsError(ValueError):
    """A claims file that cannot be read as claims: one line naming the file and the entry."""


@dataclass(frozen=True)
class Side:
    """A row of a group, by model, optionally k, optionally run settings (e.g. bias_inside)."""

    model: str
    k: Optional[int] = None
    settings: tuple[tuple[str, Any], ...] = ()

    @property
    def text(self) -> str:
        parts = [self.model] + ([f"k={self.k}"] if self.k is not None else [])
        return " ".join(parts + [f"{key}={str(value).lower()}" for key, value in self.settings])


@dataclass(frozen=True)
class Margin:
    """An equivalence margin: ``value`` in the statistic's unit, or ``value`` (a fraction) of the
    mean of the side ``of``."""

    value: float
    of: Optional[Side] = None
    reason: str = ""

    @property
    def text(self) -> str:
        return f"±{self.value:.4g}" if self.of is None else f"±{self.value:.0%} of {self.of.text}"


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    source: str
    task: str
    T: Optional[int]  # None: any T
    stat: str
    pairs: tuple[tuple[Side, Side], ...]  # (claimed lower, claimed higher)
    budget: float = 1.0  # the protocol the claim is judged on
    variant: Optional[str] = None
    margin: Optional[Margin] = None


def comparison_key(claim: Claim, pair: tuple[Side, Side]) -> tuple:
    """What makes two declared comparisons the same test: task, length, protocol, statistic and
    the unordered pair of sides."""
    return (claim.task, claim.T, claim.budget, claim.variant, claim.stat, frozenset(side.text for side in pair))


@dataclass(frozen=True)
class Family:
    """A claims file as one family of tests."""

    name: str  # the file's name: shown with every verdict
    claims: tuple[Claim, ...]
    digest: str  # sha256 of the file's text (what studies planned before ``tests_digest`` recorded)

    @functools.cached_property
    def tests_digest(self) -> str:
        """sha256 of what the claims test (ids, tasks, lengths, statistics, sides, protocols,
        margins), not of the file's words: a study is bound to it, so a comment or a claim's
        prose edited, the claims reordered or the file renamed leave its family as it was; a
        claim, side or margin added or changed makes another family (another m)."""
        def tested(claim: Claim) -> str:
            content = {key: value for key, value in dataclasses.asdict(claim).items() if key not in ("text", "source")}
            if content["margin"] is not None:  # its value and side; its reason is prose
                content["margin"] = {key: value for key, value in content["margin"].items() if key != "reason"}
            return json.dumps(content, sort_keys=True, default=str)

        return hashlib.sha256("\n".join(sorted(tested(claim) for claim in self.claims)).encode()).hexdigest()

    def planned(self, digest: str) -> bool:
        """Whether a study that recorded ``digest`` was planned for this family: its tests' digest,
        or the file's own bytes (studies planned before, the published one among them)."""
        return bool(digest) and digest in (self.tests_digest, self.digest)

    @functools.cached_property
    def keys(self) -> tuple[tuple, ...]:
        seen: dict[tuple, None] = {}
        for claim in self.claims:
            for pair in claim.pairs:
                seen.setdefault(comparison_key(claim, pair), None)
        return tuple(seen)

    @property
    def m(self) -> int:
        return len(self.keys)


def _fail(path: Path, where: str, message: str) -> ClaimsError:
    return ClaimsError(f"{path}: {where}: {message}")


def _known_models() -> list[str]:
    from atnbench.registry import models

    return sorted(models())


def _suggest(word: str, known) -> str:
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_side(text: Any, path: Path = CLAIMS_FILE, where: str = "side") -> Side:
    """"atn k=45 bias_inside=false" -> Side("atn", 45, (("bias_inside", False),)); a model the
    zoo does not know, a k that is not a positive whole number, a repeated key, a setting no run
    has (a typo matched no run, silently) or one the claim itself fixes (steps: its budget):
    ClaimsError."""
    if not isinstance(text, str) or not text.split():
        raise _fail(path, where, f"a side is 'model [key=value ...]', got {text!r}")
    model, *rest = text.split()
    known = _known_models()
    if model not in known:
        raise _fail(path, where, f"unknown model {model!r}{_suggest(model, known)}; models: {', '.join(known)}")
    k, settings, keys = None, [], set()
    for item in rest:
        key, sep, raw = item.partition("=")
        if not sep or not key or not raw:
            raise _fail(path, where, f"{text!r}: expected key=value, got {item!r}")
        if key in keys:
            raise _fail(path, where, f"{text!r}: {key} given twice")
        keys.add(key)
        value: Any = {"true": True, "false": False}.get(raw.lower(), raw)
        if isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        elif isinstance(value, str):  # lr=0.01, lr=1e-2: a number as the run's config holds it
            try:
                number = float(value)
            except ValueError:
                pass
            else:
                value = number if math.isfinite(number) else value
        if key == "k":
            if type(value) is not int or value < 1:
                raise _fail(path, where, f"{text!r}: k is a window length, a whole number >= 1, got {raw!r}")
            k = value
        elif key in CLAIM_OWN:
            raise _fail(path, where, f"{text!r}: {key} is not a side's to name: {CLAIM_OWN[key]}")
        elif key not in side_settings():
            raise _fail(path, where, f"{text!r}: unknown setting {key!r}{_suggest(key, side_settings())}; a side names "
                                     f"run settings: {', '.join(side_settings())}")
        else:
            settings.append((key, value))
    return Side(model, k, tuple(settings))


# keys a side may not name: what the claim itself fixes (its protocol), or what the model name says
CLAIM_OWN = {"task": "the claim's task: says it", "T": "the claim's T: says it",
             "budget": "the claim's budget: says it", "steps": "the claim's budget: says it (a fraction of "
             "the protocol's steps)", "variant": "the claim's variant: says it",
             "seed": "seeds are what a comparison compares over", "norm": "the model name says it",
             "cell": "the model name says it", "options": "a task's options are not a side's settings"}


@functools.lru_cache(maxsize=1)
def side_settings() -> tuple[str, ...]:
    """The run settings a side may name: a run config's fields less what the claim fixes."""
    from atnbench.config import RunConfig

    return tuple(field.name for field in dataclasses.fields(RunConfig)
                 if field.name not in CLAIM_OWN and field.name != "k")


def _margin(entry: dict, path: Path, where: str) -> Optional[Margin]:
    raw, reason = entry.get("margin"), entry.get("margin_reason", "")
    if raw is None:
        if "margin_reason" in entry:
            raise _fail(path, where, "margin_reason without a margin")
        return None
    if not isinstance(reason, str):
        raise _fail(path, where, "margin_reason: expected text")
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        if not 0 < raw < float("inf"):
            raise _fail(path, where, f"margin: a positive number (in the statistic's unit), got {raw!r}")
        return Margin(float(raw), None, reason)
    match = _RELATIVE.match(raw) if isinstance(raw, str) else None
    if not match:
        raise _fail(path, where, f"margin: a positive number or 'P% of SIDE' (e.g. '5% of ln'), got {raw!r}")
    if not 0 < float(match.group(1)) < 100:  # a band as wide as the side's own value says nothing
        raise _fail(path, where, f"margin: P in 'P% of SIDE' must be above 0 and below 100, got {raw!r}")
    return Margin(float(match.group(1)) / 100, parse_side(match.group(2), path, f"{where}.margin"), reason)


def _claim(entry: Any, i: int, path: Path, default_source: str) -> Claim:
    where = f"claims[{i}]"
    if not isinstance(entry, dict):
        raise _fail(path, where, f"expected a mapping, got {type(entry).__name__}")
    unknown = sorted(set(map(str, entry)) - CLAIM_KEYS)
    if unknown:
        raise _fail(path, where, f"unknown key {unknown[0]!r}{_suggest(unknown[0], CLAIM_KEYS)}; "
                                 f"keys: {', '.join(sorted(CLAIM_KEYS))}")
    for key in ("id", "claim", "task"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise _fail(path, f"{where}.{key}", "required text")
    where = f"claim {entry['id']!r}"
    T = entry.get("T")
    if T is not None and (type(T) is not int or T < 1):
        raise _fail(path, f"{where}.T", f"a positive whole number or nothing, got {T!r}")
    stat = entry.get("stat", "min_val_loss")
    if not isinstance(stat, str) or stat not in KNOWN_STATS:
        raise _fail(path, f"{where}.stat", f"unknown statistic {stat!r}"
                    f"{_suggest(stat, KNOWN_STATS) if isinstance(stat, str) else ''}")
    budget = entry.get("budget", 1.0)
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget <= 1:
        raise _fail(path, f"{where}.budget", f"a fraction of the protocol in (0, 1], got {budget!r}")
    variant = entry.get("variant")
    if variant is not None and not isinstance(variant, str):
        raise _fail(path, f"{where}.variant", f"a preset variant's name, got {variant!r}")
    if ("order" in entry) == ("pairs" in entry):
        raise _fail(path, where, "give 'order' (best first) or 'pairs' (a list of [lower, higher]), one of them")
    if "order" in entry:
        order = entry["order"]
        if not isinstance(order, list) or len(order) < 2:
            raise _fail(path, f"{where}.order", "a list of at least two sides, best first")
        sides = [parse_side(s, path, f"{where}.order") for s in order]
        pairs = list(zip(sides, sides[1:]))
    else:
        listed = entry["pairs"]
        if not isinstance(listed, list) or not listed or not all(isinstance(p, list) and len(p) == 2 for p in listed):
            raise _fail(path, f"{where}.pairs", "a list of [lower, higher] pairs")
        pairs = [(parse_side(a, path, f"{where}.pairs"), parse_side(b, path, f"{where}.pairs")) for a, b in listed]
    for lower, higher in pairs:
        if lower == higher or (lower.model == higher.model and lower.settings == higher.settings
                               and (lower.k is None or higher.k is None)):
            raise _fail(path, where, f"{lower.text} < {higher.text} compares a row with itself; name what tells "
                                     f"the two apart (e.g. k=25 and k=65)")
    margin = _margin(entry, path, where)
    for lower, higher in pairs if margin is not None and margin.of is not None else ():
        if margin_side(margin.of, lower, higher) is None:
            which = "both sides" if names_side(margin.of, lower) else "neither side"
            raise _fail(path, f"{where}.margin", f"'{margin.of.text}' names {which} of {lower.text} < {higher.text}; "
                                                 f"a relative margin is a fraction of one side's mean: name it as "
                                                 f"that side is named")
    source = entry.get("source", default_source)
    return Claim(id=entry["id"], text=entry["claim"], source=str(source), task=entry["task"], T=T, stat=stat,
                 pairs=tuple(pairs), budget=float(budget), variant=variant, margin=margin)


def names_side(of: Side, side: Side) -> bool:
    """Whether a relative margin's side ``of`` names this side of a pair: its model, its k where
    ``of`` gives one, and any setting ``of`` gives ("10% of atn" names "atn k=5")."""
    return of.model == side.model and (of.k is None or of.k == side.k) and set(of.settings) <= set(side.settings)


def margin_side(of: Side, lower: Side, higher: Side) -> Optional[Side]:
    """The side of the pair whose mean a relative margin is a fraction of; None where ``of`` names
    neither or both (a claims file saying so is refused when read)."""
    named = [side for side in (lower, higher) if names_side(of, side)]
    return named[0] if len(named) == 1 else None


def family_from(path: Path, data: Any, digest: str) -> Family:
    """The family a claims file's parsed YAML declares; every mistake one ClaimsError line naming
    the file and the entry."""
    path = Path(path)
    if not isinstance(data, dict):
        raise ClaimsError(f"{path}: expected a mapping with a 'claims' list")
    entries = data.get("claims")
    if not isinstance(entries, list) or not entries:
        raise ClaimsError(f"{path}: key 'claims': expected a list of claims (id, claim, task, order or pairs)")
    claims = [_claim(entry, i, path, str(data.get("source", path.name))) for i, entry in enumerate(entries)]
    ids = [c.id for c in claims]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ClaimsError(f"{path}: claim id {repeated[0]!r} used twice; ids name claims in reports and plans")
    return Family(path.name, tuple(claims), digest)


def read_family(path: Path) -> Family:
    """A claims file (the paper's, or a user's ``--claims FILE``) read through the package's YAML
    reader; every mistake one ConfigError line naming the file."""
    from atnbench.config import ConfigError
    from atnbench.presets import read_yaml_mapping

    path = Path(path)
    if not path.exists():  # anything else that is not a regular file: the reader says what it is
        raise ConfigError(f"--claims {path}: no such file")
    data = read_yaml_mapping(path)
    try:
        return family_from(path, data, hashlib.sha256(path.read_bytes()).hexdigest())
    except ClaimsError as error:
        raise ConfigError(str(error)) from None


def check_claim_tasks(family: Family, path: Path, stored: set[str]) -> None:
    """A claim about a task no one here knows (not shipped, not in the search folders, no runs in
    the store) is a typo, not a claim without runs yet: one line, with the nearest name."""
    import difflib

    from atnbench.config import ConfigError
    from atnbench.tasks.lookup import task_names

    known = set(task_names()) | stored
    for claim in family.claims:
        if claim.task not in known:
            close = difflib.get_close_matches(claim.task, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"--claims {path}: claim {claim.id!r}: unknown task {claim.task!r}{hint}; a task of "
                              f"your own: --include DIR")


@functools.lru_cache(maxsize=1)
def paper_family() -> Family:
    return family_from(CLAIMS_FILE, yaml.safe_load(CLAIMS_FILE.read_text(encoding="utf-8")),
                       hashlib.sha256(CLAIMS_FILE.read_bytes()).hexdigest())


def paper_claims() -> tuple[Claim, ...]:
    return paper_family().claims

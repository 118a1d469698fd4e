"""Routing scores: per-skill precision, recall and F1, the confusion matrix and the library
score, each with a 95% interval.

Definitions (``picked`` is the skill the selector loaded, None for none):
- library score: the share of items routed correctly, ``none`` included (an item that wants
  no skill is right when none is picked; a ``should_trigger: false`` item when its skill is
  not picked); Wilson interval.
- a skill's precision: of the items it was picked for, the share that wanted it; recall: of
  the items that wanted it, the share it was picked for; Wilson intervals. F1 is their
  harmonic mean, with a percentile bootstrap interval (items resampled, fixed seed, so the
  same picks always give the same interval). A skill never picked has no precision (null),
  one never wanted no recall.
- An item whose selector call failed is an error: counted, never scored.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from skillvc.routing.triggers import NONE, TriggerItem
from skillvc.training.matrix_stats import wilson

BOOTSTRAP = 400
SEED = 20240541


@dataclass(frozen=True)
class Pick:
    item: str
    picked: str | None
    via: str  # tool | text | unparsed | agent (an agent's activation) | error
    error: str | None = None
    answer: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.item,
            "picked": self.picked,
            "via": self.via,
            **({"error": self.error} if self.error else {}),
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _interval(pair: tuple[float, float] | None) -> list[float] | None:
    return None if pair is None else [round(pair[0], 4), round(pair[1], 4)]


def _prf(tp: int, fp: int, fn: int) -> tuple[float | None, float | None, float | None]:
    p = tp / (tp + fp) if tp + fp else None
    r = tp / (tp + fn) if tp + fn else None
    if p is None or r is None:
        f = None if (p is None and r is None) else 0.0 if tp == 0 else None
    else:
        f = 0.0 if p + r == 0 else 2 * p * r / (p + r)
    return p, r, f


@dataclass(frozen=True)
class SkillScore:
    name: str
    tp: int
    fp: int
    fn: int
    f1_interval: tuple[float, float] | None = None

    @property
    def precision(self) -> float | None:
        return _prf(self.tp, self.fp, self.fn)[0]

    @property
    def recall(self) -> float | None:
        return _prf(self.tp, self.fp, self.fn)[1]

    @property
    def f1(self) -> float | None:
        return _prf(self.tp, self.fp, self.fn)[2]

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": _round(self.precision),
            "recall": _round(self.recall),
            "f1": _round(self.f1),
            "precision_interval": _interval(wilson(self.tp, self.tp + self.fp)),
            "recall_interval": _interval(wilson(self.tp, self.tp + self.fn)),
            "f1_interval": _interval(self.f1_interval),
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "wanted": self.tp + self.fn,
            "picked": self.tp + self.fp,
        }


@dataclass(frozen=True)
class RoutingScore:
    names: tuple[str, ...]
    items: tuple[TriggerItem, ...]
    picks: tuple[Pick, ...]
    skills: dict[str, SkillScore] = field(default_factory=dict)

    @property
    def scored(self) -> list[tuple[TriggerItem, Pick]]:
        return [(i, p) for i, p in zip(self.items, self.picks, strict=True) if p.ok]

    @property
    def n(self) -> int:
        return len(self.scored)

    @property
    def errors(self) -> int:
        return sum(1 for p in self.picks if not p.ok)

    @property
    def correct(self) -> int:
        return sum(1 for i, p in self.scored if i.correct(p.picked))

    @property
    def library(self) -> float | None:
        return self.correct / self.n if self.n else None

    def outcomes(self) -> dict[str, bool]:
        """Item id -> routed correctly (scored items only): what the gate pairs."""
        return {i.id: i.correct(p.picked) for i, p in self.scored}

    def confusion(self) -> dict[str, dict[str, int]]:
        """{expected label: {picked (a skill or none): count}}; rows in library order, then
        none, then the ``not <skill>`` rows of should_trigger-false items."""
        cols = [*self.names, NONE]
        rows = [*self.names, NONE]
        for item, _ in self.scored:
            if item.label not in rows:
                rows.append(item.label)
        matrix = {r: dict.fromkeys(cols, 0) for r in rows}
        for item, pick in self.scored:
            matrix[item.label][pick.picked or NONE] += 1
        return {r: v for r, v in matrix.items() if r in self.names or r == NONE or any(v.values())}

    def to_dict(self) -> dict[str, Any]:
        return {
            "library": _round(self.library),
            "library_interval": _interval(wilson(self.correct, self.n)),
            "n": self.n,
            "correct": self.correct,
            "errors": self.errors,
            "unparsed": sum(1 for p in self.picks if p.via == "unparsed"),
            "skills": {name: self.skills[name].to_dict() for name in self.names},
            "confusion": self.confusion(),
        }

    def csv_rows(self) -> list[list[str]]:
        """The confusion matrix as CSV rows: a header, then one row per expected label."""
        confusion = self.confusion()
        cols = [*self.names, NONE]
        out = [["expected \\ picked", *cols]]
        for label, row in confusion.items():
            out.append([label, *(str(row[c]) for c in cols)])
        return out


def _counts(pairs: Sequence[tuple[TriggerItem, Pick]], name: str) -> tuple[int, int, int]:
    tp = fp = fn = 0
    for item, pick in pairs:
        wanted = item.expected == name
        chosen = pick.picked == name
        tp += wanted and chosen
        fp += chosen and not wanted
        fn += wanted and not chosen
    return tp, fp, fn


def score(
    names: Sequence[str], items: Sequence[TriggerItem], picks: Sequence[Pick]
) -> RoutingScore:
    base = RoutingScore(tuple(names), tuple(items), tuple(picks))
    pairs = base.scored
    rng = random.Random(SEED)
    resamples = (
        [[rng.randrange(len(pairs)) for _ in pairs] for _ in range(BOOTSTRAP)] if pairs else []
    )
    skills = {}
    for name in names:
        tp, fp, fn = _counts(pairs, name)
        f1s = []
        for sample in resamples:
            f = _prf(*_counts([pairs[k] for k in sample], name))[2]
            if f is not None:
                f1s.append(f)
        f1s.sort()
        band = (
            (f1s[int(0.025 * len(f1s))], f1s[min(len(f1s) - 1, int(0.975 * len(f1s)))])
            if f1s
            else None
        )
        skills[name] = SkillScore(name, tp, fp, fn, band)
    return RoutingScore(tuple(names), tuple(items), tuple(picks), skills)

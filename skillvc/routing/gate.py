"""The routing gate's verdict on one library change: does the library route better, and does
any skill lose its prompts (a steal)?

Two libraries, the current and the candidate, route the same val prompts; every rule pairs
them prompt by prompt (the one-sided exact sign test of ``skillvc.training.significance``: the
exact McNemar test on the prompts routed right at one side only). A candidate is accepted only
when all three hold:

1. **No direct steal.** No other skill X whose recall fell on val (more of its own prompts
   lost than gained) lost one of them *to an edited skill*. That is not a statistical claim:
   a deterministic selector (temperature 0) routes a prompt the same way every time it sees
   the same listing, so a prompt of X that the edited skill now takes was taken by the edit.
   It is the confusion matrix's diff, read directly: the edit wins by taking X's prompts. (A
   stochastic selector, an agent or a temperature above 0, may also move a prompt by chance;
   the rule then errs toward refusing.)
2. **No skill's recall falls significantly.** For every skill (the edited one included), the
   sign test on its own prompts (``skill`` = that skill; ``should_trigger: false`` and ``none``
   items are no one's recall) of "lost" (right before, wrong after) against "gained": the
   one-sided p of a loss. A p at most alpha refuses. This catches losses the edit causes
   indirectly (an LLM selector that, shown the new description, sends X's prompts to a third
   skill or to none), which a selector's sensitivity to any change of its prompt can also
   produce by chance; the test tells the two apart as well as n allows. Each skill is tested
   at the full alpha, uncorrected for the number of skills: correction would make the guard
   more lenient, and a false refusal costs one edit while a false acceptance costs a skill.
3. **The library routes significantly better.** More prompts gained than lost, and the sign
   test's one-sided p at most alpha.

With few val prompts per skill, rule 2 alone rarely fires (3 of 3 lost with none gained is p
= 0.125): rule 1 is what refuses a small steal, rule 2 what refuses a large loss however it
came about.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillvc.routing.metrics import RoutingScore
from skillvc.routing.triggers import TriggerItem
from skillvc.training import significance as sig


@dataclass(frozen=True)
class SkillShift:
    """How one skill's own val prompts moved between two libraries."""

    skill: str
    lost: tuple[str, ...]  # its prompts routed right before and wrong after
    gained: tuple[str, ...]  # its prompts routed wrong before and right after
    taken: dict[str, tuple[str, ...]] = field(default_factory=dict)  # lost prompts by new pick

    @property
    def fell(self) -> bool:
        """Its recall fell: more of its prompts lost than gained."""
        return len(self.lost) > len(self.gained)

    @property
    def p_value(self) -> float | None:
        """One-sided exact p of a loss (lost against gained); None when nothing moved."""
        if not (self.lost or self.gained):
            return None
        return sig.sign_test_p(len(self.lost), len(self.gained))

    def to_dict(self) -> dict[str, Any]:
        return {
            "lost": list(self.lost),
            "gained": list(self.gained),
            "taken_by": {k: list(v) for k, v in self.taken.items()},
            "p_value": self.p_value,
        }


@dataclass(frozen=True)
class RoutingVerdict:
    up: tuple[str, ...]  # prompts routed right by the candidate only
    down: tuple[str, ...]  # by the current library only
    alpha: float
    edited: tuple[str, ...]
    shifts: dict[str, SkillShift]  # per skill whose own prompts moved, in library order

    @property
    def p_value(self) -> float | None:
        """One-sided exact p of the library's gain; None when no prompt flipped."""
        if not (self.up or self.down):
            return None
        return sig.sign_test_p(len(self.up), len(self.down))

    @property
    def gain(self) -> bool:
        return len(self.up) > len(self.down)

    @property
    def significant(self) -> bool:
        return self.gain and sig.significant(self.p_value, self.alpha)

    @property
    def steals(self) -> dict[str, int]:
        """Skills (not edited) whose recall fell and that lost prompts to an edited skill:
        skill -> how many it lost to them."""
        out: dict[str, int] = {}
        for name, s in self.shifts.items():
            if name in self.edited or not s.fell:
                continue
            taken = sum(len(v) for k, v in s.taken.items() if k in self.edited)
            if taken:
                out[name] = taken
        return out

    @property
    def losses(self) -> dict[str, float]:
        """Skills whose recall fell significantly: skill -> the p of its loss."""
        return {
            name: s.p_value
            for name, s in self.shifts.items()
            if s.fell and s.p_value is not None and sig.significant(s.p_value, self.alpha)
        }

    @property
    def accepted(self) -> bool:
        return self.significant and not self.steals and not self.losses

    @property
    def reason(self) -> str:
        if self.steals:
            return "steals from " + ", ".join(f"{k} ({v} prompts)" for k, v in self.steals.items())
        if self.losses:
            return "; ".join(
                f"{k}'s recall falls significantly (lost {len(self.shifts[k].lost)}, gained "
                f"{len(self.shifts[k].gained)}; p = {p:.3g})"
                for k, p in self.losses.items()
            )
        if not self.gain:
            return "no strict improvement of the library"
        if not self.significant:
            return f"gain not significant at alpha {sig.shown_alpha(self.alpha):g}"
        return "the library routes better"

    def loss_line(self) -> str:
        """``docx lost 1, gained 0 (p = 0.5); ...``: each skill whose prompts moved, with the p
        of its loss; ``no skill lost any of its own prompts`` when none did."""
        parts = [
            f"{k} lost {len(s.lost)}, gained {len(s.gained)} "
            f"({sig.describe(s.p_value, self.alpha)})"
            for k, s in self.shifts.items()
            if s.lost
        ]
        return "; ".join(parts) if parts else "no skill lost any of its own prompts"

    def to_dict(self) -> dict[str, Any]:
        return {
            "p_value": self.p_value,
            "alpha": sig.shown_alpha(self.alpha),
            "steals": self.steals,
            "losses": self.losses,
            "skills": {k: s.to_dict() for k, s in self.shifts.items()},
        }


def judge(
    items: Sequence[TriggerItem],
    before: RoutingScore,
    after: RoutingScore,
    alpha: float,
    edited: Collection[str] = (),
) -> RoutingVerdict:
    """The verdict on ``after`` against ``before`` over ``items`` (both scored them; an item
    either side failed to route is left out), ``edited``: the skills whose description changed."""
    now, then = before.outcomes(), after.outcomes()
    picks = {p.item: p.picked for p in after.picks if p.ok}
    shared = [i for i in items if i.id in now and i.id in then]
    up = tuple(i.id for i in shared if then[i.id] and not now[i.id])
    down = tuple(i.id for i in shared if now[i.id] and not then[i.id])
    shifts: dict[str, SkillShift] = {}
    for name in before.names:
        own = [i for i in shared if i.expected == name and i.avoid is None]
        lost = tuple(i.id for i in own if now[i.id] and not then[i.id])
        gained = tuple(i.id for i in own if then[i.id] and not now[i.id])
        if not (lost or gained):
            continue
        taken: dict[str, list[str]] = {}
        for item in lost:
            taken.setdefault(picks.get(item) or "none", []).append(item)
        shifts[name] = SkillShift(name, lost, gained, {k: tuple(v) for k, v in taken.items()})
    return RoutingVerdict(up, down, alpha, tuple(edited), shifts)

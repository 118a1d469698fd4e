"""The skill's worth: the task set scored with no skill (or another revision) beside the skill.

``worth(ws, rev, baseline, split)`` evaluates the baseline (``"none"``: the target with no skill
at all, no system prompt; else a git revision) and the skill at ``rev`` on the same items,
pairs them, and judges the difference with the one verdict every surface uses
(``significance.sign_test_p`` on the items that flipped, stated by ``significance.stated`` at
the gate's alpha, ``REVIEW_ALPHA`` where the gate has none). It records one ``skill.worth``
event, which ``report`` (Markdown and HTML) shows. A skill that does not beat its baseline
significantly is said to, in those words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillvc.core.progress import Progress
from skillvc.core.store import EventStore
from skillvc.review.evaluation import (
    Comparison,
    SkillVersion,
    _evaluate,
    check_split,
    pair,
    read_skill,
)
from skillvc.training.significance import (
    REVIEW_ALPHA,
    alpha_of,
    effective_confidence,
    sign_test_p,
    significant,
    stated,
    verdict,
)
from skillvc.workspace.workspace import Workspace

NO_SKILL = "none"


@dataclass(frozen=True)
class Worth:
    comparison: Comparison
    baseline_label: str
    skill_label: str
    p_value: float | None
    alpha: float
    beats: bool

    @property
    def verdict(self) -> str:
        return verdict(self.p_value, self.alpha)

    @property
    def stated(self) -> str:
        return stated(self.p_value, self.alpha)

    def sentence(self) -> str:
        c = self.comparison
        if self.beats:
            return f"{self.skill_label} beats {self.baseline_label} on {c.b.split}: {self.stated}."
        return (
            f"{self.skill_label} does not beat {self.baseline_label} on {c.b.split}: {self.stated}."
        )

    def payload(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "split": c.b.split,
            "baseline": c.a.rev,
            "baseline_label": self.baseline_label,
            "rev": c.b.rev,
            "skill": c.b.skill,
            "skill_label": self.skill_label,
            "metric": c.metric,
            "n": c.n,
            "baseline_mean": c.a_mean,
            "skill_mean": c.b_mean,
            "diff": c.diff,
            "stderr": c.stderr,
            "up": list(c.up),
            "down": list(c.down),
            "p_value": self.p_value,
            "alpha": self.alpha,
            "verdict": self.verdict,
            "stated": self.stated,
            "beats": self.beats,
            "sentence": self.sentence(),
        }

    def to_dict(self) -> dict[str, Any]:
        return self.comparison.to_dict() | {"worth": self.payload()}


def worth(
    ws: Workspace,
    rev: str | None,
    baseline: str,
    split: str,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Worth:
    check_split(split)
    skill = read_skill(ws, rev)
    if baseline == NO_SKILL:
        base = SkillVersion(NO_SKILL, NO_SKILL, "")
        base_label = "no skill"
    else:
        base = read_skill(ws, baseline)
        base_label = f"the skill at {baseline}"
    progress = progress or Progress.off()
    comparison = pair(
        _evaluate(ws, base, split, workers, progress),
        _evaluate(ws, skill, split, workers, progress),
    )
    alpha = alpha_of(effective_confidence(ws.config.train)) or REVIEW_ALPHA
    p_value = sign_test_p(len(comparison.up), len(comparison.down)) if comparison.n else None
    beats = significant(p_value, alpha) and (comparison.diff or 0.0) > 0
    label = "the skill" if rev is None else f"the skill at {rev}"
    result = Worth(comparison, base_label, label, p_value, alpha, beats)
    with ws.store(create=True) as store:
        store.append("skill.worth", result.payload())
    return result


def latest_worth(store: EventStore) -> dict[str, Any] | None:
    """The newest ``skill.worth`` event's payload (what ``report`` shows), or None."""
    found = store.events(types=["skill.worth"], newest_first=True, limit=1)
    return dict(found[0].payload) if found else None

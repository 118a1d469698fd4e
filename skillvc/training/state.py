"""The state of a run as the loop goes: a projection of its events.

Nothing here is persisted on its own. A resumed run rebuilds this state by replaying the loop
against the log, which is why every field is derived only from recorded answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skillvc.packages.model import SKILL_FILE, SkillPackage
from skillvc.skill.edits import Edit
from skillvc.skill.skilldoc import SkillDocument
from skillvc.training.repeats import LOST

Edits = list[dict[str, Any]]


@dataclass
class RunState:
    doc: SkillDocument  # the current skill (a package's SKILL.md)
    head: str  # the commit that holds it
    # A skill package: every file of the current version (SKILL.md's bytes are ``doc``'s);
    # None for a single-file skill.
    package: SkillPackage | None = None
    current_val: float | None = None  # its val score
    step: int = 0
    buffer: Edits = field(default_factory=list)  # rejected edits shown to reflections
    # Edits that changed no answer or lost a test of their own against the current skill
    # (``Gating.refuted_edits``), by normalised text (``repeats.edit_key``) -> why
    # (``repeats.CHANGED_NOTHING`` or ``repeats.LOST``): not evaluated again while it is the
    # current skill, unless a logged decision releases them (``Trainer.release_held``).
    refuted: dict[str, str] = field(default_factory=dict)
    # How often each train item was shown to the optimizer as a failure: a step whose every
    # proposal repeats a refuted edit reflects again on the failures shown least.
    shown: dict[str, int] = field(default_factory=dict)
    # skillvc's worked-examples edit per rule it states (training/forms.py), while the current
    # skill is current: the same rule brings the same edit, so a refuted one stays held back.
    forms: dict[str, Edit] = field(default_factory=dict)
    epoch_changed: bool = False  # a candidate or slow update was accepted this epoch
    meta: str = ""  # the meta skill: optimizer-side notes, never shipped
    epoch_accepted: Edits = field(default_factory=list)
    epoch_rejected: Edits = field(default_factory=list)
    accepted: int = 0  # step candidates; slow updates are counted apart
    rejected: int = 0
    slow_accepted: int = 0
    slow_rejected: int = 0
    calls_saved: int = 0  # by early stopping in the gate
    # Reflections whose optimizer call was answered, and those whose answer was usable.
    reflections: int = 0
    reflections_usable: int = 0

    @property
    def skill(self) -> str:
        """The current version's identity text: the skill's text, or a package's bundle."""
        if self.package is None:
            return self.doc.render().decode("utf-8")
        return self.package.bundle()

    def accept(
        self,
        doc: SkillDocument,
        sha: str,
        edits: Edits,
        *,
        slow: bool = False,
        package: SkillPackage | None = None,
    ) -> None:
        self.doc, self.head = doc, sha
        self.refuted = {}  # their tests were against the skill this one replaces
        self.forms = {}
        self.epoch_changed = True
        if package is not None:
            assert package.files[SKILL_FILE] == doc.render()
            self.package = package
        if slow:
            self.slow_accepted += 1
        else:
            self.accepted += 1
        self.epoch_accepted.extend(edits)

    def reject(
        self,
        edits: Edits,
        buffer_size: int,
        *,
        slow: bool = False,
        evidence: dict[str, Any] | None = None,
    ) -> None:
        # Only facts a full and an early-stopped gate agree on enter the buffer, so early
        # stopping never changes what later reflections see; candidate_size tells the optimizer
        # whether an edit failed on its own or inside a bundle.
        # With attribution, ``evidence`` (paired counts, p-value, inconclusive) goes with them.
        rejected = [
            {**e, "decision": "rejected", "candidate_size": len(edits), **(evidence or {})}
            for e in edits
        ]
        # Not [-buffer_size:] alone: [-0:] is the whole list, so a size of 0 kept everything.
        self.buffer = (self.buffer + rejected)[-buffer_size:] if buffer_size > 0 else []
        if slow:
            self.slow_rejected += 1
        else:
            self.rejected += 1
        self.epoch_rejected.extend(rejected)

    def drop(self, dropped: Edits, buffer_size: int, bundle_size: int) -> None:
        """Edits attribution took out of a passing bundle: into the rejected buffer with their
        evidence, as edits rejected inside a bundle (the step itself is not counted here)."""
        entries = [{**e, "candidate_size": bundle_size} for e in dropped]
        self.buffer = (self.buffer + entries)[-buffer_size:] if buffer_size > 0 else []
        self.epoch_rejected.extend(entries)

    def new_epoch(self, release: bool = False) -> dict[str, str]:
        """Start an epoch; ``release``: give the held edits that lost (never those that changed
        nothing) a second look, returned. The caller decides and logs it
        (``Trainer.release_held``): only where the target is noisy and the epoch changed
        nothing. Held for good there, an edit that only helps with others (a harmful rule's
        replacement, while the rules it unmasks are missing) could leave a run that never
        accepts anything; after an epoch that changed the skill they stay held: they lost
        against the skill still current, and a test of one again would be a second chance at
        the same question."""
        self.epoch_accepted, self.epoch_rejected = [], []
        released: dict[str, str] = {}
        if release:
            released = {k: why for k, why in self.refuted.items() if why == LOST}
            self.refuted = {k: why for k, why in self.refuted.items() if k not in released}
        self.epoch_changed = False
        return released

"""Edits refuted against the current skill, matched by their normalised text (issue 46).

An edit that changed no answer, or lost a test of its own, against the current skill is held
back: the loop does not evaluate it again while that skill is current, whether the optimizer
proposes it word for word or reworded only in case, whitespace or punctuation. A real
optimizer at temperature 0 proposes the same rejected replace step after step; its id (a hash
of the exact text) would miss "Use dashes." against "use dashes", so the key is the text with
those differences taken out.

Invariants:
- ``edit_key`` is a pure function of an edit's file, op, target and content (not its anchor or
  rationale: the same text added elsewhere is the same proposal), so a resumed run holds the
  same edits back.
- A held edit says why (``CHANGED_NOTHING`` or ``LOST``). Only a stochastic target may give
  a lost edit a second look, and only as a logged decision (``Trainer.release_held``); an
  edit that changed nothing, or any edit on a deterministic target, stays held until the
  skill changes: the same answers would come back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from skillvc.core.config import Config
from skillvc.skill.edits import SKILL_FILE, Edit

CHANGED_NOTHING = "changed nothing"
LOST = "lost"

_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)

# Simulator worlds whose target ignores the temperature (``sim:support`` alone samples).
_SAMPLING_SIM_WORLDS = ("support",)


def normalised(text: str | None) -> str:
    """``text`` lower-cased, every run of punctuation and whitespace one space."""
    return _NOT_WORD.sub(" ", (text or "").lower()).strip()


def edit_key(edit: Edit | Mapping[str, Any]) -> str:
    """What makes two proposals the same edit: file, op, target and content, normalised."""
    fields: tuple[str, ...]
    if isinstance(edit, Edit):
        fields = (edit.file, edit.op, edit.target, edit.content)
    else:
        fields = tuple(str(edit.get(k) or "") for k in ("file", "op", "target", "content"))
    file, op, target, content = fields
    return "\x1f".join((file or SKILL_FILE, op, normalised(target), normalised(content)))


def deterministic_target(config: Config) -> bool:
    """Whether the target gives the same answers to the same skill again: temperature 0, or a
    simulator world that does not sample. Asking such a target again tells nothing new."""
    model = config.target.model
    if model.startswith("sim:"):
        world = model.split(":", 1)[1]
        if world not in _SAMPLING_SIM_WORLDS:
            return True
    return config.target.temperature <= 0

"""skillvc's own description edit: the requests a skill missed, quoted in its description.

The routing counterpart of ``training/forms.py`` (issue 46). On the real 1.5B optimizer the
support library's first step proposed "Help customers with orders and parcels." for the skill
that missed prompts about parcels that arrived broken, and the next step proposed it again:
a small optimizer does not write what the misrouted prompts share. skillvc writes the edit
itself: the skill that missed the most of the batch's prompts keeps its description and gains
"Use it for requests such as: ..." with up to three of those prompts, quoted. It is offered to
the gate after the optimizer's edits, in a slot of its own (it never takes one of theirs); the
gate, which scores the whole library and refuses a steal, decides whether it helps.

Invariants:
- A pure function of the library, the batch and its picks (resume by replay relies on it).
- Within the spec's limits (1,024 characters, no angle brackets): a prompt that would break
  them is left out, and no edit is made when none fits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from skillvc.models.agents.description import MAX_CHARS
from skillvc.routing.library import Library
from skillvc.routing.metrics import Pick
from skillvc.routing.optimize import DescriptionEdit
from skillvc.routing.triggers import TriggerItem

EXAMPLES = 3
MAX_PROMPT_CHARS = 120
LEAD = "Use it for requests such as:"


def missed_prompts_edit(
    library: Library, batch: Sequence[TriggerItem], picks: Sequence[Pick]
) -> DescriptionEdit | None:
    """The description edit for the skill that missed the most of ``batch``'s prompts (ties
    by name), quoting up to ``EXAMPLES`` of them; None when no skill missed a prompt or no
    quote fits."""
    missed: dict[str, list[str]] = {}
    for item, pick in zip(batch, picks, strict=True):
        if pick.ok and item.expected is not None and not item.correct(pick.picked):
            missed.setdefault(item.expected, []).append(item.prompt)
    if not missed:
        return None
    counts = Counter({skill: len(prompts) for skill, prompts in missed.items()})
    skill = min(counts, key=lambda s: (-counts[s], s))
    current = library.get(skill).description
    quotes = [q for q in dict.fromkeys(_quote(p) for p in missed[skill]) if q and q not in current]
    base = current.split(LEAD)[0].strip()
    shown = _between(current) if LEAD in current else []
    new = ""
    for quote in quotes[:EXAMPLES]:
        attempt = f"{base} {LEAD} {'; '.join([*shown, quote])}."
        if len(attempt) > MAX_CHARS:
            break
        shown.append(quote)
        new = attempt
    if not new or new == current:
        return None
    n = counts[skill]
    rationale = (
        f"{n} train prompt{'s' if n != 1 else ''} meant for {skill} went elsewhere "
        "(derived by skillvc from the misrouted prompts)"
    )
    return DescriptionEdit(skill, current, new, rationale)


def _quote(prompt: str) -> str:
    text = " ".join(prompt.split())
    if "<" in text or ">" in text or '"' in text:
        return ""
    if len(text) > MAX_PROMPT_CHARS:
        text = text[:MAX_PROMPT_CHARS].rsplit(" ", 1)[0] + " ..."
    return f'"{text}"'


def _between(description: str) -> list[str]:
    """The quotes an earlier edit put after ``LEAD``."""
    tail = description.split(LEAD, 1)[1]
    return [f'"{q}"' for q in tail.split('"')[1::2]]

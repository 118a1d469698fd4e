"""A description induced from one skill's own requests against its neighbours' (issue 41).

The library-wide reflection (``optimize.py``) asks the optimizer to read every description and
every misrouted prompt at once. On the real 1.5B optimizer that never gave an edit the gate
kept on the ``support`` library: its descriptions widened a skill into its neighbours'
requests ("Help customers with orders and parcels."). Asked a narrower question, what this
skill's requests have in common and what sets them apart from those of the others, the same
model wrote descriptions that routed better: on val, the refunds queue's raised the library
from 0.524 to 0.667 on its own (refunds recall 0 -> 0.67, no skill's recall lower), where the
reflection's best was 0.571 with a steal.

One call a step, for the skill that missed the most of the batch's prompts and has had no
induced description refused against the current library (the next one otherwise). Its answer
is plain text, the description itself; it is offered to the gate like any edit, in a slot of
its own.

Invariants:
- The prompt is a pure function of the library, the train split, the batch and its picks
  (resume by replay relies on it); the train split is training data, never val or test.
- The answer is checked like any description (the spec's limits; the name never changes).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence

from skillvc.core.hashing import sha256_hex
from skillvc.models.calls import CallFailed, ModelClient
from skillvc.routing.library import Library
from skillvc.routing.metrics import Pick
from skillvc.routing.optimize import DescriptionEdit, refusal
from skillvc.routing.triggers import TriggerItem

KIND = "route_induce"
OWN = 8  # the skill's own requests shown
PER_NEIGHBOUR = 2  # each other skill's requests shown ...
OTHERS = 12  # ... up to this many in all, the skills it is confused with first
MAX_ANSWER_TOKENS = 200

TEMPLATE = """<!-- skillvc-prompt: route_induce -->
An agent reads the name and description of each skill in a library and from them alone \
picks the one skill that handles a user's request.

Requests that belong to the "{skill}" skill:
{own}

Requests that do NOT belong to "{skill}" (another skill handles each):
{others}

Write the description of the "{skill}" skill: one or two sentences that say what its requests \
have in common and what sets them apart from the others, so that a reader picks "{skill}" for \
exactly the first list. Do not quote the requests. Reply with the description only."""


def induce_template() -> str:
    """The prompt's hash (in the run's settings: a changed prompt is another run)."""
    return sha256_hex(TEMPLATE)[:16]


def chosen_skill(
    batch: Sequence[TriggerItem], picks: Sequence[Pick], skip: Collection[str]
) -> str | None:
    """The skill that missed the most of ``batch``'s prompts (ties by name), not in ``skip``."""
    missed = Counter(
        item.expected
        for item, pick in zip(batch, picks, strict=True)
        if pick.ok and item.expected is not None and not item.correct(pick.picked)
    )
    ranked = sorted((s for s in missed if s not in skip), key=lambda s: (-missed[s], s))
    return ranked[0] if ranked else None


def messages(
    library: Library,
    skill: str,
    train: Sequence[TriggerItem],
    batch: Sequence[TriggerItem],
    picks: Sequence[Pick],
) -> list[dict[str, str]]:
    """The prompt: ``skill``'s train requests (the batch's missed ones first) and up to
    ``PER_NEIGHBOUR`` of each other skill's (first those the selector gave to ``skill``), at
    most ``OTHERS`` in all: in a larger library, the skills it was confused with first."""
    pairs = [(item, pick) for item, pick in zip(batch, picks, strict=True) if pick.ok]
    took = {
        item.id
        for item, pick in pairs
        if pick.picked == skill and item.expected not in (None, skill)
    }
    missed = {
        item.id for item, pick in pairs if item.expected == skill and not item.correct(pick.picked)
    }
    confused = {str(item.expected) for item, _ in pairs if item.id in took} | {
        str(pick.picked) for item, pick in pairs if item.id in missed
    }
    own = sorted(
        (i for i in train if i.expected == skill), key=lambda i: (i.id not in missed, i.id)
    )[:OWN]
    others: list[str] = []
    neighbours = [n for n in library.names if n != skill]
    if len(neighbours) * PER_NEIGHBOUR > OTHERS:  # too many to show: the confused ones first
        neighbours.sort(key=lambda n: n not in confused)
    for name in neighbours:
        theirs = sorted(
            (i for i in train if i.expected == name and i.avoid is None),
            key=lambda i: (i.id not in took, i.id),
        )
        others += [f"- {_line(i.prompt)} (goes to {name})" for i in theirs[:PER_NEIGHBOUR]]
    user = TEMPLATE.format(
        skill=skill,
        own="\n".join(f"- {_line(i.prompt)}" for i in own),
        others="\n".join(others[:OTHERS]) or "(none)",
    )
    return [{"role": "user", "content": user}]


def induce(
    client: ModelClient,
    library: Library,
    skill: str,
    train: Sequence[TriggerItem],
    batch: Sequence[TriggerItem],
    picks: Sequence[Pick],
    *,
    step: int | None = None,
) -> tuple[DescriptionEdit | None, str]:
    """The induced description edit for ``skill``, or None and why not."""
    own = sum(1 for i in train if i.expected == skill)
    if own < 2:
        return None, f"{skill} has {own} train request{'s' if own != 1 else ''}: too few"
    try:
        reply = client.call(
            "optimizer",
            messages(library, skill, train, batch, picks),
            step=step,
            params={"max_tokens": MAX_ANSWER_TOKENS},
        )
    except CallFailed as exc:
        return None, str(exc)
    text = description_of(reply.text)
    if not text:
        return None, "the optimizer's answer holds no description"
    refused = refusal(library, skill, text)
    if refused:
        return None, refused
    current = library.get(skill).description
    why = (
        f"induced by the optimizer from {min(own, OWN)} of {skill}'s train requests against "
        "its neighbours' (skillvc's prompt)"
    )
    return DescriptionEdit(skill, current, text, why), ""


def description_of(answer: str) -> str:
    """The description in a plain-text answer: its first paragraph, without a label, quotes
    or Markdown emphasis, on one line."""
    text = answer.strip()
    fence = re.fullmatch(r"```\w*\n(.*?)\n```", text, re.S)
    if fence:
        text = fence.group(1).strip()
    text = re.split(r"\n\s*\n", text, maxsplit=1)[0]
    text = re.sub(r"^\W*description\W*:\s*", "", text, flags=re.I)
    text = " ".join(text.replace("**", "").split())
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def _line(prompt: str) -> str:
    return " ".join(prompt.split())

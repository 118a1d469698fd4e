"""The backward pass of routing: the optimizer reads misrouted prompts and proposes
description edits.

The prompt shows the whole library (every name and description: the competition), the
batch's misrouted prompts (where each went, where it should have gone), how many prompts each
skill got right, and the rejected buffer (descriptions tried and refused, and why). An answer
is ``{"edits": [{"skill", "description", "rationale"}]}``; an edit is refused (and logged as
``edit.refused``) when it names no skill of the library, tries to rename one, or breaks the
Agent Skills limits (1,024 characters, no angle brackets), or changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillvc.core.hashing import content_id, sha256_hex
from skillvc.models.calls import CallFailed, ModelClient
from skillvc.models.prompts import ParseError, parse_json_object
from skillvc.routing.library import MAX_CHARS, DescriptionRefused, Library
from skillvc.routing.metrics import Pick
from skillvc.routing.triggers import NONE, TriggerItem

KIND = "route_descriptions"

SYSTEM = (
    "You improve the descriptions of a library of agent skills so that an agent loads the "
    "right skill for each request. You answer with JSON only."
)

TEMPLATE = """<!-- skillvc-prompt: route_descriptions -->
An agent sees only each skill's name and description, and from them alone loads one skill \
for a user's request, or none. Below are the library, the requests of this batch that were \
routed wrongly (where each went, and where it should have gone), and description edits \
tried before and rejected: they did not make the whole library route better on held-out \
requests, or they took requests that belong to another skill.

Propose at most {budget} description edits, each replacing one skill's whole description. \
Write what the skill is for and when to use it, in the words users' requests use. Do not widen \
a description to take requests that belong to another skill: an edit is judged on the whole \
library's routing, and one that steals from a neighbour is refused. Never rename a skill. A \
description is one line of at most {max_chars} characters with no '<' or '>'.

<library>
{library}
</library>

<routed_right>
{right}
</routed_right>

<misrouted>
{misrouted}
</misrouted>

<rejected>
{rejected}
</rejected>

Answer with JSON only: {{"edits": [{{"skill": "<name>", "description": "<the new \
description>", "rationale": "<why, citing the requests>"}}]}}"""


def template_hash() -> str:
    return sha256_hex(SYSTEM + TEMPLATE)[:16]


@dataclass(frozen=True)
class DescriptionEdit:
    skill: str
    before: str
    after: str
    rationale: str = ""

    @property
    def id(self) -> str:
        return content_id({"skill": self.skill, "description": self.after}, length=12)

    def to_dict(self) -> dict[str, Any]:
        """As the log shows an edit: a replace of the skill's description line."""
        return {
            "id": self.id,
            "op": "replace",
            "skill": self.skill,
            "target": f"description: {self.before}",
            "content": f"description: {self.after}",
            "rationale": self.rationale,
        }


@dataclass
class Proposals:
    edits: list[DescriptionEdit] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None


def messages(
    library: Library,
    items: Sequence[TriggerItem],
    picks: Sequence[Pick],
    rejected: Sequence[Mapping[str, Any]],
    budget: int,
) -> list[dict[str, str]]:
    wrong: list[dict[str, Any]] = []
    right: dict[str, int] = {}
    for item, pick in zip(items, picks, strict=True):
        if not pick.ok:
            continue
        if item.correct(pick.picked):
            right[item.label] = right.get(item.label, 0) + 1
        else:
            case = {
                "id": item.id,
                "prompt": item.prompt,
                "expected": item.expected if item.avoid is None else f"not {item.avoid}",
                "picked": pick.picked or NONE,
            }
            wrong.append(case)
    user = TEMPLATE.format(
        budget=budget,
        max_chars=MAX_CHARS,
        library=json.dumps([{"name": n, "description": d} for n, d in library.listing()], indent=1),
        right=json.dumps(right, sort_keys=True),
        misrouted=json.dumps(wrong, indent=1, ensure_ascii=False),
        rejected=json.dumps(list(rejected), indent=1, ensure_ascii=False),
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def propose(
    client: ModelClient,
    library: Library,
    items: Sequence[TriggerItem],
    picks: Sequence[Pick],
    rejected: Sequence[Mapping[str, Any]],
    budget: int,
    *,
    step: int | None = None,
) -> Proposals:
    out = Proposals()
    try:
        reply = client.call(
            "optimizer", messages(library, items, picks, rejected, budget), step=step
        )
        answer = parse_json_object(reply.text, "edits")
    except CallFailed as exc:
        out.failure = str(exc)
        return out
    except ParseError as exc:
        out.failure = f"the optimizer's answer is not the JSON asked for ({exc})"
        return out
    raw = answer.get("edits")
    seen: set[tuple[str, str]] = set()
    for entry in raw if isinstance(raw, list) else []:
        edit, why = _edit(library, entry)
        if edit is None:
            out.refused.append({"edit": entry if isinstance(entry, dict) else {}, "reason": why})
        elif (edit.skill, edit.after) not in seen:
            seen.add((edit.skill, edit.after))
            out.edits.append(edit)
    return out


def _edit(library: Library, entry: Any) -> tuple[DescriptionEdit | None, str]:
    if not isinstance(entry, dict):
        return None, "not an object"
    skill, new = entry.get("skill"), entry.get("description")
    if not isinstance(skill, str) or skill not in library.names:
        return None, f"names no skill of the library ({skill!r})"
    if entry.get("name") not in (None, skill):
        return None, "renames the skill (a name never changes)"
    if not isinstance(new, str):
        return None, "has no description"
    new = " ".join(new.split())
    if new.startswith("description:"):
        new = new[len("description:") :].strip()
    refused = refusal(library, skill, new)
    if refused:
        return None, refused
    rationale = entry.get("rationale")
    current = library.get(skill).description
    return DescriptionEdit(skill, current, new, str(rationale or "")[:1000]), ""


def refusal(library: Library, skill: str, description: str) -> str:
    """Why ``description`` cannot replace ``skill``'s ('' when it can): it changes nothing or
    breaks the spec's limits."""
    if description == library.get(skill).description:
        return "changes nothing"
    try:
        library.with_description(skill, description)
    except DescriptionRefused as exc:
        return str(exc)
    return ""

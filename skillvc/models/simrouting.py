"""``sim:routing``: a toy world where which skill loads depends on the descriptions' words.

A documented simulator, not a model. The simulated selector reads the ``<available_skills>``
listing (``skillvc.routing.listing``) and the user's prompt, and loads the skill whose
description shares the most content words with the prompt (lower case, a trailing "s"
dropped, stop words left out); the first listed wins a tie; no shared word loads none. So a
description that never names what its prompts talk about is never loaded, and a greedy one
("any file or document") steals its neighbours' prompts, as real selectors do.

Asked to induce one skill's description (prompt kind ``route_induce``), it lists the words at
least two of that skill's requests use and none of the other requests shown.

The simulated optimizer (prompt kind ``route_descriptions``) reads the misrouted prompts:
for a skill that missed prompts it adds their most frequent words that its description lacks
(sometimes a word another skill's prompts use too: an edit that would steal, which the gate
must refuse), and for a skill that took prompts meant for another it drops the words that
matched them. It never proposes a description it was shown as rejected.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

_STOP_WORDS = """a an the and or of for to in on at by with from into about this that
    these those it its
    is are be was were been can could should would will may might do does did done have has
    had i me my we our you your he she they them their what which who how when where why
    please help want need some any all my use used using when skill skills task tasks request
    requests user users not no yes also just like get make made one two new"""
STOP = frozenset(_STOP_WORDS.split())
_SKILL = re.compile(r"<name>(.*?)</name>\s*<description>(.*?)</description>", re.S)
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    out = set()
    for w in _WORD.findall(text.lower()):
        if w in STOP or len(w) < 3:
            continue
        out.add(w[:-1] if w.endswith("s") and len(w) > 3 else w)
    return out


def listing(system: str) -> list[tuple[str, str]]:
    return [(n.strip(), d.strip()) for n, d in _SKILL.findall(system)]


def select(system: str, prompt: str) -> str | None:
    asked = words(prompt)
    best, best_score = None, 0
    for name, description in listing(system):
        s = len(asked & words(description))
        if s > best_score:
            best, best_score = name, s
    return best


def respond(system: str, prompt: str, tool_names: Sequence[str]) -> dict[str, Any]:
    """The selector's turn: a select_skill call when offered, else the name as text."""
    picked = select(system, prompt) or "none"
    if "select_skill" in tool_names:
        call = {"id": "call_0", "name": "select_skill", "arguments": json.dumps({"skill": picked})}
        return {"text": "", "tool_calls": [call]}
    return {"text": picked}


def _section(prompt: str, tag: str) -> Any:
    m = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", prompt, re.S)
    try:
        return json.loads(m.group(1)) if m else []
    except json.JSONDecodeError:
        return []


def _ordered(text: str) -> list[str]:
    """The prompt's content words as written (one per stem), in order."""
    seen: list[str] = []
    stems: set[str] = set()
    for w in _WORD.findall(text.lower()):
        stem = words(w)
        if stem and not stem & stems:
            stems |= stem
            seen.append(w)
    return seen


def optimize(prompt: str, rng: random.Random) -> str:
    library: Mapping[str, str] = {
        str(s.get("name")): str(s.get("description") or "") for s in _section(prompt, "library")
    }
    cases = _section(prompt, "misrouted")
    rejected = {
        (str(e.get("skill")), " ".join(str(e.get("description") or "").split()))
        for e in _section(prompt, "rejected")
    }
    m = re.search(r"propose at most (\d+)", prompt)
    budget = int(m.group(1)) if m else 2
    missed: dict[str, Counter[str]] = {}
    stole: dict[str, Counter[str]] = {}
    for c in cases:
        expected, picked, text = c.get("expected"), c.get("picked"), str(c.get("prompt", ""))
        if expected in library:
            missed.setdefault(expected, Counter()).update(
                w for w in _ordered(text) if not words(w) & words(library[expected])
            )
        if picked in library and picked != expected:
            stole.setdefault(picked, Counter()).update(words(text) & words(library[picked]))
    proposals: list[dict[str, str]] = []
    for skill, counts in sorted(missed.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        ranked = [w for w, _ in counts.most_common()]
        for attempt in range(3):
            take = ranked[attempt * 2 : attempt * 2 + 3] if attempt else ranked[:3]
            if rng.random() < 0.25 and len(ranked) > 3:
                take = [*take[:2], rng.choice(ranked[3:])]  # a word that may steal
            if not take:
                break
            new = f"{library[skill].rstrip('.')}. Use it for {', '.join(take)}."
            if (skill, " ".join(new.split())) not in rejected and len(new) <= 1024:
                proposals.append(
                    {
                        "skill": skill,
                        "description": new,
                        "rationale": f"{sum(counts.values())} prompts about {', '.join(take)} "
                        f"never loaded {skill}.",
                    }
                )
                break
    for skill, counts in sorted(stole.items()):
        current = library[skill]
        drop = {w for w, _ in counts.most_common(2)}
        kept = [t for t in current.split() if not (words(t) & drop)]
        new = " ".join(kept)
        if len(words(new)) >= 3 and new != current and (skill, new) not in rejected:
            proposals.append(
                {
                    "skill": skill,
                    "description": new,
                    "rationale": f"{skill} took prompts meant for others through "
                    f"{', '.join(sorted(drop))}.",
                }
            )
    return json.dumps({"edits": proposals[: max(1, budget)]})


def induce(prompt: str) -> str:
    """A plain-text description for the ``route_induce`` prompt: up to six words that at least
    two of the skill's requests use and none of the others' do, most used first."""
    own_part, _, other_part = prompt.partition("do NOT belong")
    lines = [ln[2:] for ln in own_part.splitlines() if ln.startswith("- ")]
    others = set().union(*(words(ln) for ln in other_part.splitlines() if ln.startswith("- ")))
    counts = Counter(w for ln in lines for w in _ordered(ln) if not words(w) & others)
    common = [w for w, n in counts.most_common() if n >= 2][:6]
    return f"Requests about {', '.join(common)}." if common else "Requests of this kind."

"""The simulator's answer to ``skillvc tasks draft``: task items drafted from the skill's own text.

This is a toy, not a model, in the same way as ``sim:tasks`` (``skillvc.models.simtasks``): it
lets a newcomer go from a bare SKILL.md to drafted, reviewed and trained items without a key,
and it is the draft's test fake. It reads nothing but the prompt and knows nothing the skill
does not say, so its items are only as good as the skill's rule-like lines.

What it drafts (every ``sim:`` world answers a draft prompt the same way)
    - for each rule-like line of the skill (a list item or a sentence of the form "When X, Y",
      "If X, Y", "Y when X", "Always Y", "Never Y"), ``typical`` requests that describe the
      situation X in a user's words, then ``edge`` requests with a complication added; each
      with one acceptable answer: what the rule says to do (Y, at most ``ANSWER_WORDS`` words);
    - a few ``should_not_apply`` requests that name the skill's topic but ask for something
      none of its rules covers, answered ``NOT_APPLICABLE``.

Invariants:
- Deterministic: the same prompt gets the same items.
- An input restates its situation without articles and at most ``SITUATION_WORDS`` words of
  it, and an answer is at most ``ANSWER_WORDS`` words, so no text repeats 12 words in a row of
  the skill (the draft drops such items); the framings of one rule share few words, so its
  items are no near-duplicates of each other.
- An input already in the prompt's ``<existing_tasks>`` is not drafted again: a second draft
  takes the framings the first left unused, and runs out when they are all used.
- Items come grouped by rule, typical ones first, so the draft's split pattern gives each
  rule items in train and in val.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from skillvc.models.prompts import load_section, section

NOT_APPLICABLE = "The skill does not apply"
ANSWER_WORDS = 10
SITUATION_WORDS = 10
# Shares of the items asked for (rounded, at least one each where there is room).
SHOULD_NOT_APPLY_SHARE = 0.1
EDGE_SHARE = 0.2

# A user's framings of one situation; no two share a word, so their token sets stay far apart.
TYPICAL = (
    "Quick question from the team: {s}. What's the right move here?",
    "Situation today, {s}. How do you want me to respond?",
    "I'm handling a case where {s}. What should I do?",
    "Can you help? {S}, and I am not sure of the next step.",
    "Heads up: {s}. Tell me exactly what to do.",
    "Customer on hold right now because {s}; advise please.",
    "Need guidance fast ({s}), so what is our approach?",
    "Another one came in: {s}. Your call?",
    "Scenario for you, {s}: which action fits?",
    "My colleague asked me this morning; {s}. Any advice?",
)
# The same situation with a complication the skill may or may not address.
EDGE = (
    "Not sure it counts: {s}, though the details are fuzzy. Does it still hold?",
    "Tricky: {s}, but my manager suggested otherwise. Which wins?",
    "{S}; also, information is missing from the request. Proceed how?",
    "Unusual variant: {s}, twice within one week. Same handling?",
    "Edge case? {S}, yet nobody can confirm it. Respond anyway?",
)
# Requests that name the topic but that no rule of a skill covers.
ELSEWHERE = (
    "Unrelated to {t} procedures: can you suggest a good book for a long flight?",
    "Write a four-line poem about {t}, just for fun.",
    "What's the history of the word '{t}'? Curious, nothing urgent.",
    "Translate 'thank you for your patience' into Spanish; no {t} policy needed.",
    "Recommend a lunch spot near the office; nothing to do with {t}.",
    "Summarise the rules of chess in two sentences (no {t} involved).",
)

_FRONTMATTER = re.compile(r"\A---\n(.*?)\n---\n?", re.S)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.+)$")
_LEADING = re.compile(
    r"^(?P<cue>when|whenever|if|for)\s+(?P<cond>[^,;:]+?)\s*[,;:]\s*(?P<act>.+)$", re.I
)
_TRAILING = re.compile(r"^(?P<act>.+?)\s+(?:when|whenever|if)\s+(?P<cond>.+)$", re.I)
_ALWAYS = re.compile(r"^(?:always|never|do not|don't|must|only)\b", re.I)
_ARTICLES = frozenset({"a", "an", "the"})
_FILLER = re.compile(r"^(?:then|always|please|you should|you must|make sure to)\s+", re.I)
_MARKUP = re.compile(r"[*_`]+")


@dataclass(frozen=True)
class Rule:
    """A rule-like line of the skill: the situation it is for and what it says to do."""

    situation: str
    answer: str
    section: str


def rules(skill: str) -> list[Rule]:
    """The skill's rule-like lines, in order (none inside code fences or frontmatter)."""
    body = _FRONTMATTER.sub("", skill, count=1)
    found: list[Rule] = []
    heading = ""
    fenced = False
    for line in body.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        match = _HEADING.match(line)
        if match:
            heading = match.group(1).strip()
            continue
        item = _LIST_ITEM.match(line)
        text = _MARKUP.sub("", item.group(1) if item else line).strip().rstrip(".!")
        if not text or (not item and not (_LEADING.match(text) or _ALWAYS.match(text))):
            continue
        rule = _rule(text, heading)
        if rule is not None and rule not in found:
            found.append(rule)
    return found


def _rule(text: str, heading: str) -> Rule | None:
    leading, trailing = _LEADING.match(text), _TRAILING.match(text)
    if leading:
        situation, act = leading["cond"], leading["act"]
    elif trailing:
        situation, act = trailing["cond"], trailing["act"]
    else:
        # "Never book X; ask for Y": the situation is what the rule is about (book X).
        about = _ALWAYS.sub("", re.split(r"[;:]", text, maxsplit=1)[0]).strip()
        situation, act = f"request involves {about}", text
    first = re.split(r"\s*;\s*", act.strip(), maxsplit=1)[0]  # its first clause
    answer = _words(_FILLER.sub("", first), ANSWER_WORDS)
    situation = _situation(situation)
    if len(answer.split()) < 2 or len(situation.split()) < 2:
        return None
    return Rule(situation, answer[:1].upper() + answer[1:], heading)


def _words(text: str, limit: int) -> str:
    return " ".join(text.split()[:limit])


def _situation(text: str) -> str:
    """The situation in other words: no articles, at most ``SITUATION_WORDS`` words."""
    kept = [w for w in text.split() if w.lower() not in _ARTICLES]
    return " ".join(kept[:SITUATION_WORDS]).rstrip(".,;:")


def topic(skill: str) -> str:
    """What the skill is about, in a word or two: its name, else its first heading."""
    front = _FRONTMATTER.match(skill)
    if front:
        name = re.search(r"^name:\s*(.+)$", front.group(1), re.M)
        if name:
            return name.group(1).strip().strip("'\"").replace("-", " ")
    for line in skill.splitlines():
        match = _HEADING.match(line)
        if match:
            return match.group(1).strip().lower()
    return "this skill"


def _framed(framing: str, situation: str) -> str:
    return framing.format(s=situation, S=situation[:1].upper() + situation[1:])


def draft_items(skill: str, n: int, existing: set[str]) -> list[dict[str, Any]]:
    """Up to ``n`` items for ``skill``, none of whose inputs is in ``existing``."""
    found = rules(skill)
    elsewhere = [f.format(t=topic(skill)) for f in ELSEWHERE]
    elsewhere = [t for t in elsewhere if t not in existing]
    if not found:
        return [_item(t, NOT_APPLICABLE, "should_not_apply", "") for t in elsewhere[:n]]
    n_not = min(len(elsewhere), max(1, round(n * SHOULD_NOT_APPLY_SHARE)))
    n_edge = max(1, round(n * EDGE_SHARE)) if n >= 3 else 0
    wanted = {"typical": n - n_not - n_edge, "edge": n_edge}
    items: list[dict[str, Any]] = []
    for kind, framings in (("typical", TYPICAL), ("edge", EDGE)):
        if kind == "edge":  # what the typical framings had no room for
            wanted[kind] = n - n_not - len(items)
        # Each rule's unused framings, then the share of each rule (the first ones get the rest).
        fresh = [
            [t for t in (_framed(f, r.situation) for f in framings) if t not in existing]
            for r in found
        ]
        share = _shares(wanted[kind], [len(f) for f in fresh])
        for rule, texts, k in zip(found, fresh, share, strict=True):
            items.extend(_item(t, rule.answer, kind, rule.section) for t in texts[:k])
    items.extend(_item(t, NOT_APPLICABLE, "should_not_apply", "") for t in elsewhere[:n_not])
    return items[:n]


def _shares(total: int, room: list[int]) -> list[int]:
    """``total`` spread as evenly as ``room`` allows, the first ones taking the remainder."""
    share = [0] * len(room)
    left = max(total, 0)
    while left and any(s < r for s, r in zip(share, room, strict=True)):
        for i, r in enumerate(room):
            if left and share[i] < r:
                share[i] += 1
                left -= 1
    return share


def _item(text: str, answer: str, kind: str, heading: str) -> dict[str, Any]:
    return {"input": text, "kind": kind, "section": heading, "targets": [answer]}


def draft(prompt: str) -> str:
    """The simulated optimizer's answer to a ``draft_tasks`` prompt."""
    asked = re.search(r"Draft (\d+) test tasks", prompt)
    existing = load_section(prompt, "existing_tasks")
    shown = {str(t) for t in existing} if isinstance(existing, list) else set()
    items = draft_items(section(prompt, "skill"), int(asked.group(1)) if asked else 20, shown)
    return json.dumps({"items": items}, ensure_ascii=False)

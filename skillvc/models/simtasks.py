"""``sim:tasks``: a simulator that learns from your own task set's targets (no key, no network).

This is a simulator, not a model. It lets a newcomer see the loop work on their own repository
before spending anything: rollouts, reflections, gates, accepted and rejected edits, commits.
It is an honest toy in the same way as ``sim:support`` (``skillvc.models.simworld``): a skill
scores better only by stating better rules, and nothing is read from the val split.

The target
    reads rules of one form from the skill, ``- When the input mentions "<cue>", answer
    "<answer>".``, and answers the first rule whose cue occurs in the task input
    (case-insensitively); with no rule that applies it answers ``I don't know.``. So a rule
    helps every item whose input holds its cue and whose target is its answer, and hurts the
    items whose input holds the cue but want another answer.

The optimizer
    reads a reflection's cases (input, expected answer, score) and, for each failure, proposes
    a rule: the cue is the word of that input that best predicts the expected answer among the
    cases it sees (most cases with that answer, fewest with another), so a cue can be too broad
    or too narrow and the gate decides. It skips rules the skill states and rules in the
    rejected buffer. A task set whose items share cues with their answers (labels, actions,
    categories) shows accepted edits; one whose answers are all different (open questions)
    shows refused ones: that is what the toy can and cannot learn, not a verdict on the set.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from skillvc.models.prompts import edits_in, load_section, section

DONT_KNOW = "I don't know."
_RULE = re.compile(r'When the input mentions "(?P<cue>[^"]+)", answer "(?P<answer>[^"]*)"', re.I)
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]{2,}")
# Words too common to tell items apart.
_STOP = frozenset(
    " ".join(
        (
            "the and for with that this what which who whom whose when where why how are was",
            "were is be been being from into about your you our their them they his her its",
            "has have had does did do not can could would should will shall may might must",
            "answer question please give tell name one",
        )
    ).split()
)


def rules(skill: str) -> list[tuple[str, str]]:
    """The (cue, answer) rules the skill states, in order."""
    return [(m["cue"], m["answer"]) for m in _RULE.finditer(skill)]


def rule_text(cue: str, answer: str) -> str:
    return f'- When the input mentions "{cue}", answer "{answer}".'


def answer(skill: str, task: str) -> str:
    """The simulated target's reply: the first rule whose cue is in the task, else none."""
    text = task.lower()
    for cue, said in rules(skill):
        if cue.lower() in text:
            return f'Following the rule for "{cue}".\n<answer>{said}</answer>'
    return f"No rule of the skill applies.\n<answer>{DONT_KNOW}</answer>"


def words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)} - _STOP


def cue_for(case: dict[str, Any], cases: list[dict[str, Any]]) -> str | None:
    """The word of ``case``'s input that best predicts its expected answer among ``cases``."""
    expected = str(case.get("expected", ""))
    best: tuple[int, int, str] | None = None
    for word in sorted(words(str(case.get("input", "")))):
        same = sum(
            1
            for c in cases
            if word in words(str(c.get("input", ""))) and str(c.get("expected", "")) == expected
        )
        other = sum(
            1
            for c in cases
            if word in words(str(c.get("input", ""))) and str(c.get("expected", "")) != expected
        )
        score = (same - 2 * other, len(word), word)
        if best is None or score[:2] > best[:2]:
            best = score
    return best[2] if best is not None else None


def optimize(kind: str | None, prompt: str, rng: random.Random) -> str:
    """The simulated optimizer's answer to one optimizer prompt of ``kind``."""
    if kind == "reflect":
        return json.dumps({"edits": _reflect(prompt, rng)})
    if kind == "slow_update":
        cases = load_section(prompt, "comparison") or []
        fixed = sum(1 for c in cases if c.get("before", 0) < 1 <= c.get("after", 0))
        broke = sum(1 for c in cases if c.get("after", 0) < 1 <= c.get("before", 0))
        return json.dumps(
            {"guidance": f"This epoch's rules fixed {fixed} items and broke {broke}."}
        )
    if kind == "meta_update":
        return json.dumps({"notes": section(prompt, "previous_notes")})
    if kind == "repair":
        return section(prompt, "previous_answer")
    return json.dumps({"edits": []})


def _reflect(prompt: str, rng: random.Random) -> list[dict[str, Any]]:
    skill = section(prompt, "skill")
    cases = [c for c in (load_section(prompt, "cases") or []) if isinstance(c, dict)]
    # A rejected edit is evidence against it unless its test was inconclusive (too few val
    # items to tell): those may be proposed again, as sim:support's optimizer does.
    refused = {
        (e.get("content") or "").strip()
        for e in edits_in(prompt, "rejected_edits")
        if not e.get("inconclusive")
    }
    stated = {cue.lower() for cue, _ in rules(skill)}
    m = re.search(r"propose at most (\d+) edits", prompt)
    budget = int(m.group(1)) if m else 4
    edits: list[dict[str, Any]] = []
    seen: set[str] = set()
    failures = [c for c in cases if c.get("score", 0) < 1 and str(c.get("expected", "")).strip()]
    rng.shuffle(failures)
    for case in failures:
        cue = cue_for(case, cases)
        if cue is None or cue in stated:
            continue
        content = rule_text(cue, str(case["expected"]).strip())
        if content in refused or content in seen:
            continue
        seen.add(content)
        edits.append(
            {
                "op": "add",
                "content": content,
                "rationale": f"Item {case.get('id')} expected {case['expected']!r}.",
            }
        )
    return edits[: max(budget * 2, 1)]

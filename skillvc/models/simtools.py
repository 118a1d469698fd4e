"""The simulator's tool-using world, ``sim:inventory``: stock questions answered with a tool.

This is a simulator, not a model, and it runs through the real tool loop
(``skillvc.models.tools``): the simulated target asks for tool calls in the neutral form, the
loop runs the repository's real tool (the demo's ``tools/inventory.py``), and the target reads
the result back from the conversation. It is honest the way ``sim:support`` is: the target can
only know a stock level by calling the tool, and it calls the tool, and formats its answer, only
as the skill tells it to.

The world
    Each task asks how many units of a SKU a warehouse holds; the expected answer is
    ``"<n> units"``, or ``"out of stock"`` when the count is 0. The target knows a rule when the
    skill holds the rule's key phrase: ``CALL`` (call ``stock_level`` before answering) and
    ``ZERO`` (a 0 is "out of stock"; without it the target says "0 units"). Without ``CALL`` it
    guesses; ``GUESS`` (harmful) makes it guess even with ``CALL``; ``POLITE`` changes nothing.

The simulated optimizer reads each failure's trajectory: no ``stock_level`` call -> ``CALL``
(sometimes ``GUESS`` or ``POLITE`` instead), a 0 answered as a number -> ``ZERO``; it skips
what the rejected buffer refuted.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TOOL = "stock_level"


@dataclass(frozen=True)
class Rule:
    key: str  # the phrase the skill must contain (lower case, spaces folded)
    text: str  # the line the optimizer proposes


CALL = Rule(
    "call the stock_level tool",
    "Always call the stock_level tool with the SKU and the warehouse before answering; "
    "never answer a stock question from memory.",
)
ZERO = Rule(
    "answer out of stock",
    'When stock_level returns 0, answer out of stock (exactly "out of stock").',
)
GUESS = Rule(
    "estimate stock from the sku",
    "To save time, estimate stock from the SKU's popularity instead of calling tools.",
)
POLITE = Rule("thank the customer", "Thank the customer for asking.")
RULES = (CALL, ZERO, GUESS, POLITE)
QUESTION = re.compile(r"SKU\s+([A-Z]{2}\d{3}).*?\bat the (\w+) warehouse", re.IGNORECASE)


def known(skill: str) -> set[str]:
    folded = " ".join(skill.lower().replace('"', "").split())
    return {r.key for r in RULES if r.key in folded}


def respond(
    system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[str]
) -> dict[str, Any]:
    """The simulated target's next turn: ``{"text": ...}`` or ``{"tool_calls": [...]}``."""
    rules = known(system)
    question = next((_text(m) for m in messages if m.get("role") == "user"), "")
    result = next(
        (m for m in reversed(messages) if m.get("role") == "tool" and m.get("name") == TOOL), None
    )
    if result is None:
        match = QUESTION.search(question)
        if CALL.key in rules and GUESS.key not in rules and TOOL in tools and match:
            arguments = {"sku": match.group(1).upper(), "warehouse": match.group(2).lower()}
            return {
                "tool_calls": [{"id": "call_1", "name": TOOL, "arguments": json.dumps(arguments)}]
            }
        return {"text": "We should have about 10 units."}  # a guess, right only by luck
    if result.get("is_error"):
        return {"text": "I could not check the stock."}
    count = str(result.get("content", "")).strip()
    if count == "0" and ZERO.key in rules:
        return {"text": "out of stock"}
    return {"text": f"{count} units"}


def reflect(
    skill: str,
    cases: Sequence[Mapping[str, Any]],
    rejected: Mapping[str, int],
    rng: random.Random,
) -> list[dict[str, Any]]:
    """The simulated optimizer's edits for a minibatch of ``cases`` (reflection's JSON).
    ``rejected`` maps a refuted line's text (lower case) to the size of the smallest candidate
    it was refuted in: one refuted alone is never proposed again, one refuted in a bundle only
    when two failures of this minibatch support it."""
    rules = known(skill)
    proposals: list[Rule] = []
    for case in cases:
        if case.get("score", 0) >= 1:
            continue
        trajectory = str(case.get("trajectory") or "")
        output = str(case.get("output") or "")
        expected = str(case.get("expected") or "")
        if f"-> {TOOL}" not in trajectory:
            if GUESS.key in rules:
                proposals.append(Rule(GUESS.key, ""))  # a delete of the harmful line
                continue
            roll = rng.random()
            proposals.append(CALL if roll < 0.6 else GUESS if roll < 0.8 else POLITE)
        elif "out of stock" in expected and "out of stock" not in output:
            proposals.append(ZERO)
    support = {r.key: sum(1 for p in proposals if p.key == r.key) for r in proposals}
    # The minibatch's best-supported diagnosis first; one edit per reflection, as a cautious
    # optimizer proposes (the first candidate is then one rule, not a bundle).
    proposals.sort(key=lambda r: -support[r.key])
    edits: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rule in proposals:
        if edits:
            break
        if rule.key in seen or rule.key in rules and rule.text:
            continue
        seen.add(rule.key)
        size = rejected.get(rule.text.lower())
        if size is not None and (size <= 1 or support[rule.key] < 2):
            continue
        if not rule.text:
            line = next(
                (ln for ln in skill.splitlines() if rule.key in " ".join(ln.lower().split())), None
            )
            if line is not None:
                edits.append(
                    {
                        "op": "delete",
                        "target": line,
                        "rationale": "The agent guessed instead of calling stock_level.",
                    }
                )
            continue
        edits.append(
            {
                "op": "add",
                "content": f"- {rule.text}",
                "rationale": f"Failed cases show the agent needs: {rule.text}",
            }
        )
    return edits


def slow_update(cases: Sequence[Mapping[str, Any]]) -> str:
    """The epoch-end note: how many training tasks the epoch's changes fixed and broke."""
    fixed = sum(1 for c in cases if c.get("before", 0) < 1 <= c.get("after", 0))
    broke = sum(1 for c in cases if c.get("after", 0) < 1 <= c.get("before", 0))
    return f"This epoch's changes fixed {fixed} training tasks and broke {broke}."


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return " ".join(p.get("text", "") for p in content if isinstance(p, Mapping))

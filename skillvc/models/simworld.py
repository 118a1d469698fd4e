"""The simulator's toy world: Acme's customer-support returns policy.

This is a simulator, not a model. It exists so the whole training loop can run offline, in
seconds, deterministically, in the demo, the tests and the benchmarks. It is honest in the one
way that matters: the simulated target answers an item right only when the skill states the
policy rules that item needs, so a skill can only score better by saying better things.

The world
    Each task is a support ticket: an issue (damaged, late, wrong item, ...), days since
    delivery, and the customer's tier. The right action follows from the *true policy*: the
    ``GOOD`` rules below, applied in priority order. The simulated target knows a rule only if
    the skill contains the rule's key phrase; it applies the rules it knows in priority order
    and otherwise falls back to "refund". ``HARMFUL`` rules sound plausible but give wrong
    actions where they apply (and win over good rules there); ``REDUNDANT`` rules change
    nothing. A small deterministic noise (more for long skills) makes some answers wrong
    regardless, so the gate sees realistic ties and near-ties.

The simulated optimizer (see ``skillvc.models.backends.sim``) reads the failures in a reflection
prompt, diagnoses the rule each one needs, and proposes it, or sometimes a harmful or redundant
rule instead. It skips edits listed in the rejected buffer or marked to avoid in the meta skill,
which is why ``--no-buffer`` visibly repeats rejected edits.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from skillvc.core.hashing import sha256_hex

ACTIONS = (
    "refund",
    "replace",
    "deny",
    "escalate",
    "ship-part",
    "exchange",
    "store-credit",
    "repair",
)
ISSUES = (
    "damaged",
    "late",
    "wrong-item",
    "changed-mind",
    "defective",
    "missing-parts",
    "billing-error",
)
DEFAULT_ACTION = "refund"


@dataclass(frozen=True)
class Case:
    issue: str
    days: int
    tier: str  # standard | gold


@dataclass(frozen=True)
class Rule:
    key: str  # the key phrase the target looks for in the skill (lowercase)
    text: str  # the sentence an optimizer would write into the skill
    kind: str  # good | harmful | redundant
    applies: Callable[[Case], bool]
    action: str | None  # None for redundant rules
    fix: str | None = None  # harmful rules: key of the good rule that should replace them


GOOD: tuple[Rule, ...] = (
    Rule(
        "billing errors go to",
        "Billing errors go to the billing team: escalate them.",
        "good",
        lambda c: c.issue == "billing-error",
        "escalate",
    ),
    Rule(
        "after 30 days",
        "After 30 days from delivery, deny returns unless the item is defective.",
        "good",
        lambda c: c.days > 30 and c.issue != "defective",
        "deny",
    ),
    Rule(
        "damaged on arrival",
        "Damaged on arrival: offer a replacement, not a refund.",
        "good",
        lambda c: c.issue == "damaged",
        "replace",
    ),
    Rule(
        "missing parts",
        "Missing parts: ship the missing part instead of refunding.",
        "good",
        lambda c: c.issue == "missing-parts",
        "ship-part",
    ),
    Rule(
        "wrong item was sent",
        "If the wrong item was sent, exchange it for the right one.",
        "good",
        lambda c: c.issue == "wrong-item",
        "exchange",
    ),
    Rule(
        "late deliveries earn",
        "Late deliveries earn store credit, not a refund.",
        "good",
        lambda c: c.issue == "late",
        "store-credit",
    ),
    Rule(
        "defects within a year",
        "Repair defects within a year under warranty; do not refund them.",
        "good",
        lambda c: c.issue == "defective" and c.days <= 365,
        "repair",
    ),
    Rule(
        "standard customers who changed",
        "Standard customers who changed their mind get store credit; gold customers get a refund.",
        "good",
        lambda c: c.issue == "changed-mind" and c.tier == "standard",
        "store-credit",
    ),
)

HARMFUL: tuple[Rule, ...] = (
    Rule(
        "escalate every gold",
        "Escalate every gold customer's ticket to a manager.",
        "harmful",
        lambda c: c.tier == "gold",
        "escalate",
    ),
    Rule(
        "after 14 days",
        "After 14 days from delivery, deny all returns.",
        "harmful",
        lambda c: c.days > 14,
        "deny",
        fix="after 30 days",
    ),
    Rule(
        "late orders get a full",
        "Late orders get a full refund.",
        "harmful",
        lambda c: c.issue == "late",
        "refund",
        fix="late deliveries earn",
    ),
    Rule(
        "replace anything",
        "Replace anything the customer is unhappy with.",
        "harmful",
        lambda c: c.issue in ("changed-mind", "missing-parts"),
        "replace",
    ),
)

REDUNDANT: tuple[Rule, ...] = (
    Rule(
        "thank the customer",
        "Thank the customer for their patience.",
        "redundant",
        lambda c: False,
        None,
    ),
    Rule(
        "order number",
        "Always quote the order number in the reply.",
        "redundant",
        lambda c: False,
        None,
    ),
    Rule(
        "empathetic", "Be empathetic and keep a friendly tone.", "redundant", lambda c: False, None
    ),
)

ALL_RULES = GOOD + HARMFUL + REDUNDANT

# Harmful rules are blanket statements; where they apply they win over the good rules.
_PRIORITY = HARMFUL + GOOD

_TICKET = re.compile(
    r"Issue: (?P<issue>[a-z-]+)\. Days since delivery: (?P<days>\d+)\. Tier: (?P<tier>\w+)\."
)


def true_action(case: Case) -> str:
    for rule in GOOD:
        if rule.applies(case):
            return rule.action or DEFAULT_ACTION
    return DEFAULT_ACTION


def needed_rule(case: Case) -> Rule | None:
    """The good rule that decides this case under the true policy (None: the default)."""
    for rule in GOOD:
        if rule.applies(case):
            return rule
    return None


def rule(key: str) -> Rule:
    return next(r for r in ALL_RULES if r.key == key)


def known_rules(skill: str) -> list[Rule]:
    text = " ".join(skill.lower().split())
    return [r for r in ALL_RULES if r.key in text]


def parse_case(text: str) -> Case | None:
    m = _TICKET.search(text)
    if m is None:
        return None
    return Case(issue=m["issue"], days=int(m["days"]), tier=m["tier"])


def describe(case: Case, rng: random.Random) -> str:
    openers = {
        "damaged": "My {product} arrived smashed to pieces.",
        "late": "My {product} came two weeks later than promised.",
        "wrong-item": "I ordered a {product} but got something else.",
        "changed-mind": "I don't want the {product} any more.",
        "defective": "My {product} stopped working.",
        "missing-parts": "The {product} box is missing pieces.",
        "billing-error": "I was charged twice for my {product}.",
    }
    product = rng.choice(["blender", "lamp", "kettle", "backpack", "drone", "chair", "toaster"])
    story = openers[case.issue].format(product=product)
    return (
        f'Customer writes: "{story}"\n'
        f"Issue: {case.issue}. Days since delivery: {case.days}. Tier: {case.tier}.\n"
        "Which action should support take? Answer with one of: "
        + ", ".join(ACTIONS)
        + ", inside <answer></answer>."
    )


# Other simulated target models: the same world, some rules read differently. A variant maps
# a rule's key to where that model applies it; such a rule wins over every other rule there
# (a model that over-generalises it). ``support-literal`` reads "Late deliveries earn store
# credit" as "tickets older than a week earn store credit", so the edit that adds it helps
# ``sim:support`` and hurts ``sim:support-literal`` (the matrix tests and bench rely on this).
VARIANTS: dict[str, dict[str, Callable[[Case], bool]]] = {
    "support-literal": {"late deliveries earn": lambda c: c.days > 7},
}


def answer(skill: str, task: str, *, salt: str = "", variant: str | None = None) -> str:
    """What the simulated target replies to ``task`` when it follows ``skill`` (``variant``:
    one of ``VARIANTS``, another simulated model of the same world)."""
    case = parse_case(task)
    if case is None:
        return "I cannot tell what this ticket is about.\n<answer>escalate</answer>"
    known = {r.key for r in known_rules(skill)}
    overrides = VARIANTS[variant] if variant else None
    return decide(case, known, len(known), f"{salt}|{skill}|{task}", overrides)


def policy_rule(
    case: Case, known: set[str], overrides: dict[str, Callable[[Case], bool]] | None = None
) -> Rule | None:
    """The rule a reader who knows the rules keyed ``known`` applies to ``case`` (None: the
    default action): a variant's over-read rules first, then priority order."""
    for key, applies in (overrides or {}).items():
        if key in known and applies(case):
            return rule(key)
    for candidate in _PRIORITY:
        if candidate.key in known and candidate.applies(case):
            return candidate
    return None


def decide(
    case: Case,
    known: set[str],
    rules_read: int,
    noise_key: str,
    overrides: dict[str, Callable[[Case], bool]] | None = None,
) -> str:
    """The simulated target's reply for ``case`` when it knows the rules keyed ``known``.

    It applies the first known rule in priority order (else the default action). Then a
    deterministic noise keyed by ``noise_key`` makes some answers wrong whatever the skill
    says; reading many rules (``rules_read`` past 9) dilutes attention a little more."""
    used = policy_rule(case, known, overrides)
    action = (used.action if used else None) or DEFAULT_ACTION
    noise = 0.04 + 0.01 * max(0, rules_read - 9)
    roll = int(sha256_hex(noise_key)[:8], 16) / 0xFFFFFFFF
    if roll < noise:
        action = [a for a in ACTIONS if a != action][int(roll * 1e6) % (len(ACTIONS) - 1)]
        used = None
    why = f"Following the rule: {used.text}" if used else "No specific rule applies."
    return f"{why}\n<answer>{action}</answer>"


def generate_items(n: int, seed: int) -> list[dict[str, object]]:
    """``n`` task items of this world (id, input, target), deterministic for ``seed``."""
    rng = random.Random(seed)
    items: list[dict[str, object]] = []
    for i in range(n):
        issue = ISSUES[i % len(ISSUES)] if i < len(ISSUES) * 2 else rng.choice(ISSUES)
        days = rng.choice([rng.randint(1, 14), rng.randint(15, 30), rng.randint(31, 90)])
        if issue == "defective" and rng.random() < 0.3:
            days = rng.randint(366, 600)
        case = Case(issue=issue, days=days, tier=rng.choice(["standard", "standard", "gold"]))
        items.append(
            {"id": f"ticket-{i + 1:03d}", "input": describe(case, rng), "target": true_action(case)}
        )
    return items


_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.S | re.I)


def final_answer(text: str) -> str:
    """The answer an output commits to: its last ``<answer>`` tag, else its last line."""
    found = _ANSWER.findall(text)
    if found:
        return " ".join(found[-1].lower().split())
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " ".join(lines[-1].lower().split()) if lines else ""


def judge(prompt: str) -> str:
    """The simulated judge: 1 when the output's final answer is one of the acceptable answers.

    It reads the judge prompt's "Acceptable answers:" and "Output to grade:" parts (see
    ``scorers.JudgeScorer``), so it grades only what a real judge would see.
    """
    m = re.search(r"Acceptable answers:\n(.*?)\n\nOutput to grade:\n(.*)\Z", prompt, re.S)
    if m is None:
        return "No acceptable answers to compare with.\nSCORE: 0"
    # One acceptable answer per "- " entry; an entry may span lines (a harvested final answer).
    accepted = {final_answer(e) for e in re.split(r"(?m)^- ", m.group(1))[1:] if e.strip()}
    given = final_answer(m.group(2))
    ok = given in accepted
    return (
        f"The output answers {given!r}; {'accepted' if ok else 'not accepted'}.\nSCORE: {int(ok)}"
    )


# A simulated judge of known quality: ``sim:judge-<pct>`` flips <pct>% of its verdicts (the
# same items whatever the rubric: the flip is keyed on the task input and the graded output).
JUDGE_WORLD = re.compile(r"^judge-(\d{1,2})$")
_GRADED = re.compile(
    r"Task input:\n(?P<input>.*?)\n\nAcceptable answers:\n(?P<answers>.*?)\n\n"
    r"Output to grade:\n(?P<output>.*)\Z",
    re.S,
)


def graded(rubric: str, prompt: str, error_rate: float) -> str:
    """The simulated judge of known error rate: it grades by the acceptable answers when the
    prompt gives some, else by the policy rules ``rubric`` states (a rubric that says more
    grades better); then ``error_rate`` of its verdicts are flipped."""
    m = _GRADED.search(prompt)
    if m is None:
        return "There is nothing to grade.\nSCORE: 0"
    given = final_answer(m["output"])
    accepted = {final_answer(e) for e in re.split(r"(?m)^- ", m["answers"])[1:] if e.strip()}
    case = parse_case(m["input"])
    if accepted:
        ok, why = given in accepted, "the acceptable answers"
    elif case is None:
        ok, why = False, "nothing (the ticket cannot be read)"
    else:
        used = policy_rule(case, {r.key for r in known_rules(rubric)})
        ok, why = given == ((used.action if used else None) or DEFAULT_ACTION), "the rubric"
    roll = int(sha256_hex(f"judge-error|{m['input']}|{m['output']}")[:8], 16) / 0xFFFFFFFF
    if roll < error_rate:
        ok = not ok
    return f"Graded by {why}: {'accepted' if ok else 'not accepted'}.\nSCORE: {int(ok)}"


def draft_rubric(examples: list[dict[str, object]]) -> str:
    """A rubric from the examples a drafter sees: the answers kept, the ones corrected.

    Deterministic and honest: it states only what the examples show (the final answers the
    person was left with, and that a corrected answer was wrong), nothing from the true policy.
    """
    kept: list[str] = []
    for ex in examples:
        answer = final_answer(str(ex.get("final_answer", "")))
        if answer and answer not in kept:
            kept.append(answer)
    corrected = sum(1 for ex in examples if ex.get("corrections"))
    lines = [
        "The answer is correct when its final answer (the <answer> tag) is the action the "
        "person accepted for this request.",
        f"Accepted final answers seen: {', '.join(kept[:8]) or 'none'}.",
    ]
    if corrected:
        lines.append(
            f"In {corrected} of {len(examples)} examples the person corrected the first answer: "
            "an answer that differs from the accepted one is wrong."
        )
    return "\n".join(lines)


def meta_notes(
    previous: str,
    rejected: Sequence[dict[str, Any]],
    accepted: Sequence[dict[str, Any]],
    sig: Callable[[dict[str, Any]], str],
    where: Callable[[dict[str, Any]], str],
) -> str:
    """The simulated optimizer's meta skill: notes from evidence only. An edit rejected on its
    own, or twice (same ``sig``), becomes ``AVOID<where>: <text>``, an accepted one
    ``HELPED<where>: <text>``; ``where`` is "" for a one-file skill and " in <file>" for a
    package. Earlier notes of that form are kept, in order."""
    marks = tuple(f"{kind}{w}" for kind in ("AVOID", "HELPED") for w in (":", " in "))
    notes = [line for line in previous.splitlines() if line.startswith(marks)]
    counts: dict[str, int] = {}
    for edit in rejected:
        counts[sig(edit)] = counts.get(sig(edit), 0) + 1
    for edit in rejected:
        text = " ".join((edit.get("content") or edit.get("target") or "").split()).lstrip("- ")
        alone = edit.get("candidate_size", 1) <= 1
        note = f"AVOID{where(edit)}: {text}"
        if text and (alone or counts[sig(edit)] >= 2) and note not in notes:
            notes.append(note)
    for edit in accepted:
        text = " ".join((edit.get("content") or "").split()).lstrip("- ")
        note = f"HELPED{where(edit)}: {text}"
        if text and note not in notes:
            notes.append(note)
    return "\n".join(notes)


# The stochastic mode (a target at temperature > 0) ----------------------------------------
#
# A real model at temperature > 0 does not always do what the skill says. Here, per call, the
# target gives the action its known rules decide with probability 1 - error and one of the other
# actions (uniformly) otherwise, where error = ``error_rate(temperature)``. The draw is keyed by
# the call's identity (skill, task, sample, seed), so the log's cache and resume stay exact,
# and nothing else (no length dilution): a redundant rule's true effect is exactly 0, a good
# rule's is positive, a harmful rule's negative, and ``true_accuracy`` of any skill is exact
# over a fixed reference population of tickets.

REFERENCE_SEED = 20260101
REFERENCE_SIZE = 2000


def error_rate(temperature: float) -> float:
    """The chance a stochastic call departs from the action its skill's rules decide."""
    return min(0.9, 0.25 * temperature)


def decided_action(case: Case, known: set[str]) -> str:
    """The action the first known rule in priority order gives (else the default)."""
    for rule in _PRIORITY:
        if rule.key in known and rule.applies(case):
            return rule.action or DEFAULT_ACTION
    return DEFAULT_ACTION


def p_correct(case: Case, known: set[str], temperature: float) -> float:
    """The probability that one stochastic call answers ``case`` right."""
    error = error_rate(temperature)
    if decided_action(case, known) == true_action(case):
        return 1 - error
    return error / (len(ACTIONS) - 1)


def answer_stochastic(skill: str, task: str, temperature: float, *, salt: str = "") -> str:
    """The simulated target's reply at ``temperature`` > 0: one draw, keyed by the call."""
    case = parse_case(task)
    if case is None:
        return "I cannot tell what this ticket is about.\n<answer>escalate</answer>"
    known = {r.key for r in known_rules(skill)}
    action = decided_action(case, known)
    roll = int(sha256_hex(f"{salt}|{temperature}|{skill}|{task}")[:12], 16) / float(16**12)
    error = error_rate(temperature)
    if roll >= 1 - error:
        others = [a for a in ACTIONS if a != action]
        action = others[min(len(others) - 1, int((roll - (1 - error)) / error * len(others)))]
    return f"Applying the skill's policy.\n<answer>{action}</answer>"


_REFERENCE: list[Case] = []


def reference_cases() -> list[Case]:
    """The fixed population the true accuracy is taken over (the tickets' distribution)."""
    if not _REFERENCE:
        for item in generate_items(REFERENCE_SIZE, REFERENCE_SEED):
            case = parse_case(str(item["input"]))
            assert case is not None
            _REFERENCE.append(case)
    return _REFERENCE


def true_accuracy(skill: str, temperature: float) -> float:
    """The exact expected accuracy of ``skill`` at ``temperature`` over the reference tickets."""
    known = {r.key for r in known_rules(skill)}
    cases = reference_cases()
    return sum(p_correct(c, known, temperature) for c in cases) / len(cases)


def best_reachable(temperature: float) -> float:
    """The true accuracy of the skill stating every good rule and nothing else."""
    return true_accuracy("\n".join(r.text for r in GOOD), temperature)


def rule_effects(temperature: float, base: str = "") -> dict[str, float]:
    """Each rule's true effect: the change in true accuracy from adding it to ``base``."""
    before = true_accuracy(base, temperature)
    return {r.key: true_accuracy(base + "\n" + r.text, temperature) - before for r in ALL_RULES}


def line_kinds(skill: str) -> dict[str, int]:
    """How many lines of ``skill`` state a good, harmful or redundant (neutral) rule."""
    counts = {"good": 0, "harmful": 0, "redundant": 0}
    for line in skill.splitlines():
        for r in known_rules(line):
            counts[r.kind] += 1
    return counts


def generate_labels(n: int, seed: int, *, with_targets: bool = True) -> list[dict[str, object]]:
    """``n`` items graded by a person who knows the true policy (judge calibration): each has
    an output that is right about half the time, and the person's 0/1 label of it. With
    ``with_targets`` the acceptable answer is given too (a reference-based judge); without,
    a judge has only its rubric to go by."""
    rng = random.Random(f"labels|{seed}")
    rows: list[dict[str, object]] = []
    for item in generate_items(n, seed):
        right = str(item["target"])
        given = right if rng.random() < 0.5 else rng.choice([a for a in ACTIONS if a != right])
        row: dict[str, object] = {
            "id": f"label-{str(item['id']).split('-')[-1]}",
            "input": item["input"],
            "output": f"Decided by the policy.\n<answer>{given}</answer>",
            "label": int(given == right),
        }
        if with_targets:
            row["target"] = right
        rows.append(row)
    return rows

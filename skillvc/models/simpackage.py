"""The simulator's package-aware world (``sim:support-package``): where a rule is written matters.

A simulator, not a model. It is ``skillvc.models.simworld``'s support world (same tickets,
rules, task items, default answer and noise; ``sim:support`` itself is untouched) with one thing
added: an agent reads SKILL.md and opens a reference file only when SKILL.md sends it there, so
a rule helps a ticket only where the agent reads it for that ticket. It lets the demo and the
tests show training that edits, and creates, reference files.

The world
    Each ticket has a topic, from its issue (``TOPICS``): damage (damaged, defective, missing
    parts), returns (wrong item, changed mind), billing (billing error), shipping (late).
    SKILL.md points a topic to a file with a line that names the topic (case-insensitive) and
    holds a relative Markdown link, e.g.
    ``- Damage (...): read [references/damage.md](references/damage.md).``; the first such line,
    and its first link, decide.
    A topic rule (``RULE_TOPICS``: the good rule of each issue but ``after 30 days``, and the
    harmful ``late orders get a full``) counts for a ticket only when it sits in the file the
    ticket's topic points to: that file's ``## Reference file: <path>`` section of the chat
    prompt (``skillvc.packages.render``), or with an installing harness the file of that path in
    ``request.files``. Written into SKILL.md, or into another topic's file, it does nothing for
    the ticket; a pointed file the target was not sent (cut for size) gives it no rule at all.
    A topic SKILL.md points nowhere is read from SKILL.md itself: its rules count there. So a
    one-file skill works in this world as in the support world, and moving a topic out of
    SKILL.md takes the file *and* the pointer (with the pointer, the topic's rules left in
    SKILL.md stop counting).
    General rules (every other rule) count when SKILL.md states them, wherever the topic points.
    The target then answers as in the support world: harmful rules first, then the good ones in
    priority order, else "refund"; the deterministic noise is keyed on everything it was sent
    and grows with the number of rules in what it reads for the ticket (SKILL.md plus the
    topic's file), so a lean SKILL.md pays.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from skillvc.models import simworld
from skillvc.models.simworld import Case, Rule
from skillvc.packages.links import resolve
from skillvc.packages.model import SKILL_FILE
from skillvc.packages.render import HEADER


@dataclass(frozen=True)
class Topic:
    name: str  # lowercase; a pointer line of SKILL.md names it
    title: str  # how a reference file's heading and a pointer line write it
    issues: tuple[str, ...]
    about: str  # what its tickets are about (a pointer line's and a new file's wording)

    @property
    def path(self) -> str:
        """Where the simulated optimizer creates this topic's reference file."""
        return f"references/{self.name}.md"


TOPICS: tuple[Topic, ...] = (
    Topic(
        "damage",
        "Damage",
        ("damaged", "defective", "missing-parts"),
        "damaged, defective or incomplete items",
    ),
    Topic("returns", "Returns", ("wrong-item", "changed-mind"), "wrong item sent, changed mind"),
    Topic("billing", "Billing", ("billing-error",), "billing errors"),
    Topic("shipping", "Shipping", ("late",), "late deliveries"),
)

# The rules that count only in their topic's file (by key); every other rule is general.
RULE_TOPICS = {
    "billing errors go to": "billing",
    "damaged on arrival": "damage",
    "missing parts": "damage",
    "defects within a year": "damage",
    "wrong item was sent": "returns",
    "standard customers who changed": "returns",
    "late deliveries earn": "shipping",
    "late orders get a full": "shipping",
}

_SECTION = re.compile(r"\n\n" + re.escape(HEADER.split("{path}")[0]) + r"(?P<path>[^\n]+)\n\n")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def topic_of(case: Case) -> Topic:
    return next(t for t in TOPICS if case.issue in t.issues)


def topic_named(name: str) -> Topic:
    return next(t for t in TOPICS if t.name == name)


def rule_topic(rule: Rule) -> str | None:
    """The topic whose file a rule must sit in, or None for a general rule (SKILL.md)."""
    return RULE_TOPICS.get(rule.key)


def split_prompt(system: str) -> tuple[str, dict[str, str]]:
    """SKILL.md's text and the reference files appended to a chat system prompt, by path."""
    parts = _SECTION.split(system)
    skill, rest = parts[0], parts[1:]
    return skill, {rest[i]: rest[i + 1] for i in range(0, len(rest) - 1, 2)}


def pointer_lines(skill: str) -> dict[str, tuple[str, str]]:
    """Topic name -> (its pointer line as written, the package path it links to)."""
    found: dict[str, tuple[str, str]] = {}
    for line in skill.splitlines():
        targets = [
            t for t in _LINK.findall(line) if not _SCHEME.match(t) and not t.startswith(("/", "#"))
        ]
        path = (
            resolve(SKILL_FILE, targets[0].split("#", 1)[0].split("?", 1)[0]) if targets else None
        )
        if path is None:
            continue
        low = line.lower()
        for topic in TOPICS:
            if topic.name in low and topic.name not in found:
                found[topic.name] = (line, path)
    return found


def pointer(skill: str, topic: Topic) -> str | None:
    """The package path SKILL.md points ``topic`` to (None: nowhere, it is read from SKILL.md)."""
    entry = pointer_lines(skill).get(topic.name)
    return entry[1] if entry else None


def has(text: str, rule: Rule) -> bool:
    return rule.key in " ".join(text.lower().split())


def effective_rules(skill: str, files: dict[str, str], case: Case) -> list[Rule]:
    """The rules that count for ``case``: general ones in SKILL.md, the topic's in its file."""
    topic = topic_of(case)
    where = pointer(skill, topic)
    home = skill if where is None else files.get(where, "")
    out = []
    for rule in simworld.ALL_RULES:
        owner = rule_topic(rule)
        if (owner is None and has(skill, rule)) or (owner == topic.name and has(home, rule)):
            out.append(rule)
    return out


def answer(system: str, task: str, files: Sequence[tuple[str, str]] = (), *, salt: str = "") -> str:
    """What the simulated target replies to ``task`` with this skill package: ``system`` is
    the chat prompt (SKILL.md and its linked files) or, with ``files``, SKILL.md alone and the
    installed files beside it."""
    case = simworld.parse_case(task)
    if case is None:
        return "I cannot tell what this ticket is about.\n<answer>escalate</answer>"
    skill, sections = split_prompt(system)
    sections.update(dict(files))
    known = {r.key for r in effective_rules(skill, sections, case)}
    # The support world's noise, over what the agent reads for this ticket.
    where = pointer(skill, topic_of(case))
    read = skill + ("" if where is None else sections.get(where, ""))
    files_part = "".join(f"|{p}|{t}" for p, t in files)
    key = f"{salt}|{system}{files_part}|{task}"
    return simworld.decide(case, known, len(simworld.known_rules(read)), key)

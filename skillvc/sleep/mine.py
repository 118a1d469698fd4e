"""Mining recurring task kinds from the prompts of many sessions.

A prompt is normalised (lowercase; quoted names and code identifiers -> ``<name>``, paths ->
``<path>``, numbers -> ``<n>``, whitespace collapsed), then prompts are grouped greedily, oldest
first: a prompt joins the first kind whose first prompt is *similar*, else it starts a kind.
Two normalised prompts are similar when the Jaccard index of their token sets is at least
``threshold`` (default 0.6), or it is at least half that and difflib's ratio of the two
strings is at least ``threshold + 0.2`` (capped at 0.95): the first catches reworded prompts,
the second prompts that differ in one long token (only prompts of up to
``DIFFLIB_MAX_CHARS`` characters: it is quadratic). (The half-threshold guard also keeps mining
fast: difflib runs only on pairs with words in common.) A kind recurs when prompts from at
least ``min_support`` distinct sessions (default 3) belong to it; the others are one-off
requests, counted and left out.

Templated kinds. A recurring instruction with a varying payload ("Summarise this IT ticket in
one line: <a different ticket each time>") is not similar as a whole: the payload dominates
the token sets. So the prompts left out by the grouping above are mined once more for their
recurring *part*: each prompt is cut into segments (lines, sentences, and at a colon), each
segment normalised; a segment of at least ``MIN_SEGMENT_TOKENS`` tokens, or the first
``MIN_PREFIX_TOKENS`` to ``MAX_PREFIX_TOKENS`` tokens of one, is a candidate template. A
candidate seen in prompts of at least ``min_support`` sessions is kept; candidates are taken
greedily by weight (sessions x tokens, so a long instruction beats both a short generic phrase
and a sub-pattern of a few payloads), each taking the prompts not yet taken that contain it,
and it is a kind when those span ``min_support`` sessions. The instruction may come before,
after or around the payload.

Invariants: the result is a pure function of the exchanges and the two settings (the order of
the input does not matter: exchanges are sorted by timestamp, session and prompt first), and a
kind's id is a hash of its first prompt's normalised text, so a kind keeps its id as later
sessions add to it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillvc.core.hashing import content_id

DEFAULT_MIN_SUPPORT = 3
DEFAULT_THRESHOLD = 0.6
DIFFLIB_MAX_CHARS = 400

_QUOTED = re.compile(r"`[^`\n]+`|\"[^\"\n]{1,80}\"|'[^'\n]{1,80}'")
_PATH = re.compile(
    r"(?:~|\.{1,2})/[\w.\-/]*"  # ~/notes.txt, ./x, ../y
    r"|/?[\w.\-]+(?:/[\w.\-]*)+"  # a/b, src/app/, /etc/x
    r"|\b[\w\-]+\.(?:py|js|ts|md|json|toml|yaml|yml|txt|rs|go|java|c|h|cpp|sh|jsonl|csv)\b"
)
_IDENT = re.compile(r"\b[a-z]+(_[a-z0-9]+)+\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b")
_NUMBER = re.compile(r"\bv?\d+([.:\-]\d+)*\b")  # 42, 1.2.3, v2, 2026-01-01, 10:30
_TOKEN = re.compile(r"<\w+>|[a-z][a-z\-']*")


def normalise(prompt: str) -> str:
    """The prompt with its particulars replaced by placeholders (see the module docstring)."""
    text = _QUOTED.sub(" <name> ", prompt)
    text = _PATH.sub(" <path> ", text)
    text = _IDENT.sub(" <name> ", text)  # before lowercasing: camelCase is an identifier
    text = text.lower()
    text = _NUMBER.sub(" <n> ", text)
    return " ".join(text.split())


def tokens(normalised: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(normalised))


def similar(
    a: str,
    b: str,
    threshold: float = DEFAULT_THRESHOLD,
    ta: frozenset[str] | None = None,
    tb: frozenset[str] | None = None,
) -> bool:
    """Whether two normalised prompts are one kind (``ta``/``tb``: their tokens, if known)."""
    ta = tokens(a) if ta is None else ta
    tb = tokens(b) if tb is None else tb
    jaccard = len(ta & tb) / len(ta | tb) if ta or tb else 1.0
    if jaccard >= threshold:
        return True
    if jaccard < threshold / 2:
        return False  # too few words in common for a character-level match to mean much
    if len(a) > DIFFLIB_MAX_CHARS or len(b) > DIFFLIB_MAX_CHARS:
        # difflib is quadratic: on two long prompts (a pasted ticket, a log) it takes seconds,
        # and what they share is found by the template pass (``mine_templates``) instead.
        return False
    needed = min(threshold + 0.2, 0.95)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    # The quick ratios are upper bounds of ratio(): most pairs are ruled out without it.
    return (
        matcher.real_quick_ratio() >= needed
        and matcher.quick_ratio() >= needed
        and matcher.ratio() >= needed
    )


@dataclass
class Kind:
    id: str
    name: str  # the first prompt's normalised text, shortened: what people see in --review
    normalised: str
    members: list[Mapping[str, Any]] = field(default_factory=list)
    tokens: frozenset[str] = frozenset()

    @property
    def sessions(self) -> set[str]:
        return {str(m["session"]) for m in self.members}

    @property
    def support(self) -> int:
        return len(self.sessions)


@dataclass
class Mined:
    kinds: list[Kind]  # recurring kinds only, in order of first appearance
    one_offs: int  # prompts left out because their kind did not recur
    one_off_kinds: int


def mine(
    exchanges: Sequence[Mapping[str, Any]],
    *,
    min_support: int = DEFAULT_MIN_SUPPORT,
    threshold: float = DEFAULT_THRESHOLD,
) -> Mined:
    """Group exchanges (dicts with at least session, timestamp, prompt) into recurring kinds."""
    ordered = sorted(
        exchanges, key=lambda e: (str(e["timestamp"]), str(e["session"]), str(e["prompt"]))
    )
    kinds: list[Kind] = []
    for exchange in ordered:
        norm = normalise(str(exchange["prompt"]))
        toks = tokens(norm)
        for kind in kinds:
            if similar(kind.normalised, norm, threshold, kind.tokens, toks):
                kind.members.append(exchange)
                break
        else:
            name = norm if len(norm) <= 72 else norm[:71] + "…"
            kinds.append(Kind(f"k{content_id(norm, 8)}", name, norm, [exchange], toks))
    recurring = [k for k in kinds if k.support >= min_support]
    left = [k for k in kinds if k.support < min_support]
    templated = mine_templates([m for k in left for m in k.members], min_support)
    taken = {id(m) for k in templated for m in k.members}
    rest = [k for k in left if any(id(m) not in taken for m in k.members)]
    one_offs = sum(1 for k in rest for m in k.members if id(m) not in taken)
    return Mined(recurring + templated, one_offs, len(rest))


MIN_SEGMENT_TOKENS = 3  # a whole recurring line or sentence: "summarise in one line"
MIN_PREFIX_TOKENS = 5  # the start of a segment: shorter starts ("can you help me") are common
MAX_PREFIX_TOKENS = 12
MAX_SEGMENTS = 40  # a long payload (a log) adds no candidates past this many segments
_SEGMENT = re.compile(r"\n+|(?<=[.?!])\s+|:\s+")


def segments(prompt: str) -> list[tuple[str, ...]]:
    """The prompt's segments (lines, sentences, colon-separated parts) as normalised tokens."""
    parts = [p for p in _SEGMENT.split(prompt) if p.strip()]
    if len(parts) > MAX_SEGMENTS:  # the instruction is at the start or the end
        parts = parts[: MAX_SEGMENTS // 2] + parts[-MAX_SEGMENTS // 2 :]
    return [t for t in (tuple(_TOKEN.findall(normalise(p))) for p in parts) if t]


# Words that say nothing about the task: a line made of them ("Thanks in advance.", "Can you
# help me with this?") recurs across unrelated requests and is no template.
STOPWORDS = frozenset(
    str.split(
        "a an the this that these those it its i me my we our you your he she they them to of in "
        "on at by for from with and or but so if as is are was were be been do does did can could "
        "would should will shall may might must have has had not no yes please thanks thank "
        "cheers hi hello hey regards best advance much very so help quick one just also again "
        "here there what how why when where which who ok okay"
    )
)
MIN_CONTENT_TOKENS = 2


def candidates(prompt: str) -> set[tuple[str, ...]]:
    """The candidate templates one prompt holds (see the module docstring): each has at least
    ``MIN_CONTENT_TOKENS`` tokens that are not ``STOPWORDS`` or placeholders."""
    out: set[tuple[str, ...]] = set()
    for seg in segments(prompt):
        if len(seg) >= MIN_SEGMENT_TOKENS:
            out.add(seg)
        for n in range(MIN_PREFIX_TOKENS, min(len(seg), MAX_PREFIX_TOKENS + 1)):
            out.add(seg[:n])
    return {c for c in out if _content(c) >= MIN_CONTENT_TOKENS}


def _content(cand: tuple[str, ...]) -> int:
    return sum(1 for t in cand if t not in STOPWORDS and not t.startswith("<"))


def mine_templates(
    exchanges: Sequence[Mapping[str, Any]], min_support: int = DEFAULT_MIN_SUPPORT
) -> list[Kind]:
    """Templated kinds among ``exchanges`` (see the module docstring), oldest prompt first."""
    ordered = sorted(
        exchanges, key=lambda e: (str(e["timestamp"]), str(e["session"]), str(e["prompt"]))
    )
    holders: dict[tuple[str, ...], list[int]] = {}  # candidate -> prompts holding it
    for i, exchange in enumerate(ordered):
        for cand in candidates(str(exchange["prompt"])):
            holders.setdefault(cand, []).append(i)
    sessions = {c: {str(ordered[i]["session"]) for i in held} for c, held in holders.items()}
    kept = [c for c, s in sessions.items() if len(s) >= min_support]
    kept.sort(key=lambda c: (-len(sessions[c]) * len(c), -len(c), c))
    free = set(range(len(ordered)))
    kinds: list[Kind] = []
    for cand in kept:
        members = [i for i in holders[cand] if i in free]
        if len({str(ordered[i]["session"]) for i in members}) < min_support:
            continue
        free.difference_update(members)
        text = " ".join(cand) + " …"
        name = text if len(text) <= 72 else text[:71] + "…"
        kinds.append(
            Kind(
                f"k{content_id('template:' + text, 8)}",
                name,
                text,
                [ordered[i] for i in members],
                frozenset(cand),
            )
        )
    kinds.sort(key=lambda k: (str(k.members[0]["timestamp"]), k.id))
    return kinds

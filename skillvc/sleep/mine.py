"""Mining recurring task kinds from the prompts of many sessions.

A prompt is normalised (lowercase; quoted names and code identifiers -> ``<name>``, paths ->
``<path>``, numbers -> ``<n>``, whitespace collapsed), then prompts are grouped greedily, oldest
first: a prompt joins the first kind whose first prompt is *similar*, else it starts a kind.
Two normalised prompts are similar when the Jaccard index of their token sets is at least
``threshold`` (default 0.6), or it is at least half that and difflib's ratio of the two
strings is at least ``threshold + 0.2`` (capped at 0.95): the first catches reworded prompts,
the second prompts that differ in one long token. (The half-threshold guard also keeps mining
fast: difflib runs only on pairs with words in common.) A kind recurs when prompts from at
least ``min_support`` distinct sessions (default 3) belong to it; the others are one-off
requests, counted and left out.

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

from skillvc.hashing import content_id

DEFAULT_MIN_SUPPORT = 3
DEFAULT_THRESHOLD = 0.6

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
    return Mined(recurring, sum(len(k.members) for k in left), len(left))

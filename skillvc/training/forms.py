"""Worked examples of the expected answers' form, derived by skillvc from train failures.

Issue 46: on two sets whose expected answers all follow a house convention ("OKAFOR, Jonas",
"ORD-000022"), a 1.5B optimizer never stated the convention, however plainly the evidence
put it, not even by copying an edit written out for it. When most of a step's failures give
the expected content in another form, skillvc writes the edit itself: two worked examples
(the case's message and the expected answer, beside what the target said) and the rewrite
the expected answers share where it is measurable (a shared prefix or suffix, the parts in
reverse order, a part's letter case, the joiner, numbers zero-padded to one width). It is
offered to the gate beside the optimizer's proposals; the gate, not the optimizer, decides
whether it helps. Measured on the real 1.5B target (docs/benchmarks.md): val 0/20 -> 11/20
(names) and 0/20 -> 9/20 (orders) for an edit of this shape, where the rule alone or examples
of answers alone gave 0-3/20 (the small target copied the example's name). "Another form"
is read widely (``_same_content``: numbers by value, shortened words, initials, a label
vocabulary of the target's own), since which conventions it recognises decides where the edit
can help: money and a label vocabulary went 0/20 -> 20/20 on the real target's val.

Invariants:
- A pure function of the cases: the same failures give the same edit, which resume by replay
  relies on (``prompts.DERIVED`` changes with what it derives); the loop keeps one edit per
  rule while a skill is current, so a refuted one is held back like any refuted edit
  (``repeats.edit_key``).
- Nothing is derived from failures whose answers differ in content (a wrong fact or choice):
  worked examples would teach train answers, not a form.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillvc.skill.edits import Edit
from skillvc.training.evidence import (
    MAX_ANSWER_CHARS,
    PARTS,
    answer_pair,
    common_prefix,
    common_suffix,
    numbers,
    parts,
)

EXAMPLES = 2
MAX_MESSAGE_CHARS = 400  # a longer message is shown as its answer pair alone
HEAD = "Worked examples of the expected answer form (from training):"


@dataclass(frozen=True)
class FormEdit:
    """The derived edit, the rule it states ('' when none is measurable) and its evidence."""

    edit: Edit
    rule: str
    form_failures: int
    failures: int

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "form_failures": self.form_failures, "failures": self.failures}


def form_edit(
    cases: Sequence[Mapping[str, Any]], skill: str = "", expected: Sequence[str] = ()
) -> FormEdit | None:
    """The worked-examples edit for a step's failure ``cases`` (``optimize._case`` dicts), or
    None when fewer than two, or fewer than half, of them give the expected content in
    another form. Where ``expected`` (every expected answer of the step's batch) is a few
    labels, an answer outside them that stands for one of them each time ("Yes" for
    "APPROVED") is a form too. Where ``skill`` (the current SKILL.md text) holds examples
    already, the edit adds new ones under the same heading, and the rule only if it is not
    there yet (None when it would add nothing)."""
    shaped = [(c, *answer_pair(c)) for c in cases]
    shaped = [(c, e, o) for c, e, o in shaped if e and len(e) <= MAX_ANSWER_CHARS]
    house = _house([e for _, e, _ in shaped])
    renamed = _renamed(shaped, _labels(expected))
    form = [
        (c, e, o)
        for c, e, o in shaped
        if o and e != o and (_same_content(o, e, house) or (c, e, o) in renamed)
    ]
    if len(form) < 2 or len(form) * 2 < len(shaped):
        return None
    whole = [(e, o) for _, e, o in form if _content_in(o, e)]
    rule = _rule(whole) if len(whole) >= 2 and len(whole) * 2 >= len(form) else ""
    if not rule and len(renamed) * 2 >= len(form):
        names = " and ".join(f'"{e}"' for e in dict.fromkeys(e for _, e, _ in renamed))
        rule = f"uses the house's labels, such as {names}"
    said: dict[str, tuple[Mapping[str, Any], str, str]] = {}
    for c, e, o in form:
        said.setdefault(_label(o), (c, e, o))
    examples = [_example(c, e, o) for c, e, o in [*said.values(), *form]]  # unlike answers first
    lines = list(dict.fromkeys(x for x in examples if x not in skill))[:EXAMPLES]
    if rule and f"Every expected answer {rule}." not in skill:
        lines.append(f"Every expected answer {rule}.")
    if not lines:
        return None
    why = (
        f"{len(form)} of {len(shaped)} failures give the expected content in another form "
        "(derived by skillvc from their expected answers)"
    )
    return FormEdit(_examples_add(HEAD, lines, skill, why), rule, len(form), len(shaped))


def _examples_add(head: str, lines: Sequence[str], skill: str, rationale: str) -> Edit:
    """The add of ``lines`` under ``head``: a new block, or under the skill's own ``head``
    where it holds one already (never a second block)."""
    anchor = head if skill.count(head) == 1 else None
    content = "\n".join(lines if anchor else [head, *lines])
    return Edit("add", content=content, anchor=anchor, rationale=rationale)


LABEL_HEAD = "Worked examples of the expected answers (from training):"
MAX_LABEL_CHARS = 40


def label_edit(
    cases: Sequence[Mapping[str, Any]], expected: Sequence[str], skill: str = ""
) -> FormEdit | None:
    """Worked examples for a label task: ``expected`` (every expected answer of the step's
    batch) is a few short labels, at most one distinct label for every two items (a queue, a
    category, a verdict), and at least two, and half, of the failure ``cases`` missed theirs.
    The examples are failures with different expected labels where there are (the message and
    its label in the output's wrapping, beside what the target said). None otherwise, or when
    the skill shows them already.

    Why: on the real 1.5B target, routing support tickets by a policy with exceptions, two
    worked examples from train took val from 7/20 to 14/20; the optimizer's best edit reached
    12-13/20. On number answers (arithmetic) worked examples hurt (7/20 -> 2/20): those are
    no label task, and the gate refuses what hurts anyway."""
    known = _labels(expected)
    if not known:
        return None
    shaped = [(c, *answer_pair(c)) for c in cases]
    missed = [(c, e, o) for c, e, o in shaped if e and _label(e) in known]
    if len(missed) < 2 or len(missed) * 2 < len(shaped):
        return None
    by_label: dict[str, tuple[Mapping[str, Any], str, str]] = {}
    for c, e, o in missed:
        by_label.setdefault(e.lower(), (c, e, o))
    chosen = list(by_label.values())
    chosen += [m for m in missed if m not in chosen]
    examples = [_example(c, e, o) for c, e, o in chosen]
    lines = list(dict.fromkeys(x for x in examples if x not in skill))[:EXAMPLES]
    if not lines:
        return None
    why = (
        f"{len(missed)} of {len(shaped)} failures missed their label, one of {len(known)} "
        "the batch expects (derived by skillvc from train cases)"
    )
    edit = _examples_add(LABEL_HEAD, lines, skill, why)
    return FormEdit(edit, LABELS, len(missed), len(shaped))


LABELS = "labels"  # the rule a label edit states: none, one edit while a skill is current


def _label(answer: str) -> str:
    return " ".join(answer.split()).lower()


def _labels(expected: Sequence[str]) -> frozenset[str]:
    """The labels of a batch's ``expected`` answers when they are a few short labels: at
    least four answers, each at most ``MAX_LABEL_CHARS`` long, at most one distinct label for
    every two (empty otherwise)."""
    labels = [_label(e) for e in expected if e.strip()]
    known = frozenset(labels)
    if len(labels) < 4 or any(len(x) > MAX_LABEL_CHARS for x in known):
        return frozenset()
    return known if len(known) * 2 <= len(labels) else frozenset()


def _renamed(
    shaped: Sequence[tuple[Mapping[str, Any], str, str]], known: frozenset[str]
) -> list[tuple[Mapping[str, Any], str, str]]:
    """The failures whose answer is no label of the batch but stands for one label every time
    it is given ("Yes" for "APPROVED", "No" for "DENIED"): the house's names for the target's
    own, a form. At least two such names for two labels; a wrong label of the batch (a wrong
    queue) is content."""
    outside = [
        (c, e, o)
        for c, e, o in shaped
        if o and _label(e) in known and _label(o) not in known and len(o) <= MAX_LABEL_CHARS
    ]
    means: dict[str, set[str]] = {}
    for _, e, o in outside:
        means.setdefault(_label(o), set()).add(_label(e))
    steady = [(c, e, o) for c, e, o in outside if len(means[_label(o)]) == 1]
    if len({_label(o) for _, _, o in steady}) < 2 or len({_label(e) for _, e, _ in steady}) < 2:
        return []
    return steady


def _example(case: Mapping[str, Any], expected: str, answer: str) -> str:
    """One worked example: the message and the expected answer in the output's own wrapping
    (its answer tags), beside the answer the target gave."""
    raw = str(case.get("output") or "").strip()
    shown = expected
    if raw.count(answer) == 1 and len(raw) <= len(answer) + 40:
        shown = raw.replace(answer, expected)
    message = " ".join(str(case.get("input") or "").split())
    said = f'(not "{answer}")' if answer else "(the target gave no answer)"
    if message and len(message) <= MAX_MESSAGE_CHARS:
        return f'Message: "{message}" Answer: {shown} {said}'
    return f"Answer: {shown} {said}"


def _norm(part: str) -> str:
    return part.lstrip("0") or "0" if part.isdigit() else part


def _same_content(output: str, expected: str, house: frozenset[str] = frozenset()) -> bool:
    """Whether ``output`` gives ``expected``'s content in another form: every part of it is
    a part of ``expected`` ("22" of "ORD-000022"), at least half of each side's parts are
    the other's ("January 15, 2024" of "2024-01-15": a month name is no part of a date's
    digits), or both hold the same numbers by value ("1234.50 USD" of "$1,234.50", "15:30"
    of "3:30 PM", "25%" of "0.25") and every word of ``expected`` is in ``output`` or is the
    ``house``'s own text ("ORD-000788" of "The order is 788."); a word may be shortened
    ("Jan 5" of "January 5", "apples" of "apple") or given by its initials ("NYC" of "New York
    City"). A wrong name or number shares no part, and a number of the other sign is another
    number ("-6" for "6")."""
    wanted, given = _values(expected), _values(output)
    if wanted != given and {abs(v) for v in wanted} == {abs(v) for v in given}:
        return False
    if _content_in(output, expected):
        return True
    said, have = {_norm(p) for p in parts(output)}, {_norm(p) for p in parts(expected)}
    if _acronym(said, have) or _acronym(have, said):
        return True
    # Half of each side's parts in the other, the same or shortened.
    near_said = sum(1 for p in said if any(_akin(p, q) for q in have))
    near_have = sum(1 for q in have if any(_akin(p, q) for p in said))
    if near_said and near_said * 2 >= len(said) and near_have * 2 >= len(have):
        return True
    if not wanted or wanted != given:
        return False
    return all(p in said or p in house for p in have if not p.isdigit())


def _akin(a: str, b: str) -> bool:
    """The same word, or one a shortening of the other ("jan" of "january", "apple" of
    "apples"), of at least three letters."""
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    return short.isalpha() and long.isalpha() and len(short) >= 3 and long.startswith(short)


def _acronym(one: set[str], many: set[str]) -> bool:
    """Whether ``one`` is a single word of the initials of ``many``'s words ("nyc" of "new
    york city"), in some order."""
    words = [w for w in many if w.isalpha()]
    if len(one) != 1 or len(words) < 2 or len(words) != len(many):
        return False
    (word,) = one
    return word.isalpha() and sorted(word) == sorted(w[0] for w in words)


def _values(text: str) -> set[float]:
    """The numbers ``text`` holds, by value (``evidence.numbers``)."""
    return set(numbers(text))


def _house(expected: Sequence[str]) -> frozenset[str]:
    """The words at least two, and two thirds, of the expected answers share: the house's own
    text ("ord" of "ORD-000022", a currency, a unit), not an answer's content."""
    counts = Counter(p for e in expected for p in set(parts(e)) if not p.isdigit())
    n = len(expected)
    return frozenset(p for p, k in counts.items() if k >= 2 and k * 3 >= n * 2)


def _content_in(output: str, expected: str) -> bool:
    """Whether every part of ``output`` is a part of ``expected`` (case aside, numbers without
    their leading zeros): the same answer, written another way."""
    have = {_norm(p) for p in parts(expected)}
    said = [_norm(p) for p in parts(output)]
    return bool(said) and all(p in have for p in said)


def _rule(pairs: Sequence[tuple[str, str]]) -> str:
    """The rewrite most form failures share, in words ('' when none is measurable)."""
    n, clauses = len(pairs), []
    expected = [e for e, _ in pairs]
    prefix = common_prefix(expected)
    if _literal(prefix, pairs) and sum(1 for _, o in pairs if o.startswith(prefix)) * 2 < n:
        clauses.append(f'starts with "{prefix}"')
    suffix = common_suffix(expected)
    if _literal(suffix, pairs) and sum(1 for _, o in pairs if o.endswith(suffix)) * 2 < n:
        clauses.append(f'ends with "{suffix}"')
    for case, test in (("in capitals", str.isupper), ("in lower case", str.islower)):
        changed = sum(1 for e, o in pairs if test(e) and _cased(o) and not test(o))
        if changed * 3 >= n * 2:
            clauses.append(f"is written {case}")
    multi = [(e, o) for e, o in pairs if len(parts(o)) > 1]
    if len(multi) * 2 >= n:
        order = _order(multi)
        if order:
            clauses.append(order)
    width = _width(pairs)
    if width:
        clauses.append(f"has its number padded with leading zeros to {width} digits")
    return ", and ".join(clauses)


def _cased(text: str) -> bool:
    return any(ch.isalpha() for ch in text)


def _literal(affix: str, pairs: Sequence[tuple[str, str]]) -> bool:
    """Whether a shared prefix or suffix is the house's own text, not a part of the answer
    (every date of a set in one year shares "2024-", which the outputs hold too)."""
    if not affix.strip():
        return False
    said = {_norm(p) for _, o in pairs for p in parts(o)}
    return not any(_norm(p) in said for p in parts(affix))


def _order(pairs: Sequence[tuple[str, str]]) -> str:
    """The order of the plain answer's parts, the first one's letter case and the joiner,
    each where most pairs agree and the outputs differ."""
    words = []
    orders = Counter(tuple(_positions(e, o)) for e, o in pairs)
    order, k = orders.most_common(1)[0]
    agreed = [(e, o) for e, o in pairs if tuple(_positions(e, o)) == order]
    if k * 3 >= len(pairs) * 2 and len(order) > 1 and list(order) != sorted(order):
        if list(order) == sorted(order, reverse=True):
            words.append("has the parts of the plain answer in reverse order")
        else:
            named = ", ".join(str(i + 1) for i in order)
            words.append(f"has the parts of the plain answer in the order {named}")
        firsts = Counter(_case_of(_slots(e, o)[0]) for e, o in agreed)
        case, k = firsts.most_common(1)[0]
        if case and k * 3 >= len(agreed) * 2:
            words.append(f"the first {case}")
    joiners = Counter(_joiner(e) for e, _ in pairs)
    joiner, k = joiners.most_common(1)[0]
    if joiner and k * 3 >= len(pairs) * 2 and sum(_joiner(o) == joiner for _, o in pairs) < k:
        words.append(f'its parts joined by "{joiner}"')
    return ", ".join(words)


def _positions(expected: str, output: str) -> list[int]:
    """Where each part of ``expected`` that comes from ``output`` stands in ``output``."""
    said = [_norm(p) for p in parts(output)]
    return [said.index(_norm(p.lower())) for p in _slots(expected, output)]


def _slots(expected: str, output: str) -> list[str]:
    """The parts of ``expected`` that come from ``output``, in ``expected``'s order."""
    have = {_norm(p) for p in parts(output)}
    return [p for p in PARTS.findall(expected) if _norm(p.lower()) in have]


def _case_of(part: str) -> str:
    if part.isupper() and any(ch.isalpha() for ch in part):
        return "in capitals"
    if part.islower():
        return "in lower case"
    return ""


def _joiner(expected: str) -> str:
    """The text between the first two parts of ``expected`` ('' for one part)."""
    found = list(PARTS.finditer(expected))
    return expected[found[0].end() : found[1].start()] if len(found) > 1 else ""


def _width(pairs: Sequence[tuple[str, str]]) -> int:
    """The width the output's number is zero-padded to in the expected answers, when every
    pair with one number agrees and at least one is padded (0 otherwise)."""
    widths, padded = set(), False
    for e, o in pairs:
        digits = re.findall(r"\d+", o)
        if len(digits) != 1:
            continue
        value = _norm(digits[0])
        runs = [r for r in re.findall(r"\d+", e) if _norm(r) == value]
        if not runs:
            return 0
        widths.add(len(runs[0]))
        padded = padded or (runs[0].startswith("0") and len(runs[0]) > len(digits[0]))
    return widths.pop() if len(widths) == 1 and padded else 0

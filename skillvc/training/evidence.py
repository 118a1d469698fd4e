"""What the expected answers share that the outputs lack, measured (issue 46).

A small optimizer shown twelve cases whose expected answers all follow one convention proposed
its own default convention instead, twice. The shape of the answers is cheap and exact to
measure, so skillvc measures it and puts it in the reflection prompt (``<evidence>``, after the
cases): the separators each side uses, the letter case, the digits, the length, a prefix or
suffix every expected answer shares, and per case whether the output holds the same parts in
another case, with other separators or in another order.

Only what tells the two sides apart is said, at most ``MAX_LINES`` lines, so a minibatch whose
answers differ in content alone (a wrong fact, a wrong choice) costs no token. A pure function
of the cases: the same minibatch gives the same text, which resume by replay relies on
(``prompts.DERIVED`` changes whenever it would give other text).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from skillvc.tasks.scorers import extract_answer

MAX_LINES = 6
MAX_ANSWER_CHARS = 400  # longer answers are prose: their shape says little
PARTS = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)  # a run of letters, or of digits
_SEPARATORS = " -_/.,:;|+()[]'\"#@&*=~"
NAMES = {" ": "a space", "\n": "a line break"}


def shape_evidence(cases: Sequence[Mapping[str, Any]]) -> str:
    """The ``<evidence>`` section for a minibatch of failures ('' when there is nothing to
    say): lines comparing the expected answers with the answers the outputs gave."""
    pairs = [answer_pair(c) for c in cases]
    pairs = [(e, o) for e, o in pairs if e and len(e) <= MAX_ANSWER_CHARS]
    if len(pairs) < 2:
        return ""
    lines = [*_relation(cases), *_per_case(pairs), *_shared(pairs)]
    if not lines:
        return ""
    n = len(pairs)
    head = f"Measured by skillvc on {n} failures (expected answer vs the output's answer):"
    body = "\n".join(f"- {line}" for line in lines[:MAX_LINES])
    return f"\n<evidence>\n{head}\n{body}\n</evidence>"


def answer_pair(case: Mapping[str, Any]) -> tuple[str, str]:
    expected = case.get("expected")
    if isinstance(expected, list):
        expected = expected[0] if expected else ""
    return str(expected or "").strip(), extract_answer(str(case.get("output") or ""))


def parts(text: str) -> list[str]:
    return [p.lower() for p in PARTS.findall(text)]


_TIME = re.compile(r"\b(\d{1,2}):(\d{2})\s*([ap])\.?\s?m\b\.?", re.I)
_NUMBER = re.compile(r"((?<![^\s(])-)?(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(\s?%)?")
MAX_NUMBERS = 5  # a message with more numbers is searched for no relation


def numbers(text: str) -> list[float]:
    """The numbers ``text`` holds, in order, by value: thousands separators dropped, a
    percentage as a fraction, a 12-hour time as its 24-hour parts, a minus sign only where it
    starts a word (the "-" of "ORD-0022" or "2024-01-05" is a joiner)."""
    text = _TIME.sub(lambda m: f"{_hour(m)}:{m.group(2)}", text)
    out = []
    for sign, whole, frac, pct in _NUMBER.findall(text):
        value = float(f"{sign}{whole.replace(',', '')}{frac}")
        out.append(round(value / 100 if pct else value, 9))
    return out


def _hour(m: re.Match[str]) -> int:
    hour, pm = int(m.group(1)) % 12, m.group(3).lower() == "p"
    return hour + 12 if pm else hour


def _relation(cases: Sequence[Mapping[str, Any]]) -> list[str]:
    """A line where every expected answer is one number that a simple linear rule computes
    from one number of the case's message, the same one each time ("(the number in the
    message - 32) x 5/9, rounded to a whole number"): a conversion a small optimizer does not
    infer from the cases alone. At least three such cases, and half of the minibatch; no line
    for the identity (the answer is the number itself: a form, not a rule)."""
    rows = []
    for case in cases:
        expected, _ = answer_pair(case)
        given = numbers(str(case.get("input") or ""))
        if given and re.fullmatch(r"-?\d+(?:\.\d+)?", expected):
            rows.append((given, float(expected), "." not in expected))
    if len(rows) < 3 or len(rows) * 2 < len(cases):
        return []
    count = Counter(len(xs) for xs, _, _ in rows).most_common(1)[0][0]
    rows = [row for row in rows if len(row[0]) == count]
    if len(rows) < 3 or count > MAX_NUMBERS:
        return []
    for j in range(count):
        found = _linear([(xs[j], y) for xs, y, _ in rows], whole=all(w for *_, w in rows))
        if found:
            which = "the number in the message" if count == 1 else f"the message's number {j + 1}"
            rule = found.replace("x0", which)
            return [f"every expected answer is {rule} ({len(rows)} of {len(cases)} cases)"]
    return []


def _linear(points: Sequence[tuple[float, float]], *, whole: bool) -> str:
    """The rule ``y = a * (x - c)``, with ``a`` a simple fraction and ``c`` a whole number,
    that gives every point's ``y`` (rounded to a whole number when ``whole``), in words with
    ``x0`` standing for ``x``; '' when none does, or for the identity."""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return ""
    mx, my = statistics.fmean(xs), statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    if abs(slope) < 1e-9:
        return ""
    a = Fraction(slope).limit_denominator(12)
    if a == 0:  # a slope no simple fraction states (a percentage of a large number)
        return ""
    c = round(mx - my / float(a))
    predicted = [float(a) * (x - c) for x in xs]
    tolerance = 0.5 if whole else 1e-6
    if any(abs(p - y) > tolerance for p, (_, y) in zip(predicted, points, strict=True)):
        return ""
    if a == 1 and c == 0:
        return ""
    rounded = whole and any(p != round(p) for p in predicted)
    base = "x0" if c == 0 else f"(x0 - {c})" if c > 0 else f"(x0 + {-c})"
    rule = base if a == 1 else f"{base} x {a}"
    return rule + (", rounded to a whole number" if rounded else "")


def _per_case(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """How many outputs hold the expected answer's content in another form, by kind."""
    kinds = {
        "differ only in letter case": lambda e, o: e != o and e.lower() == o.lower(),
        "have the same parts with other separators or spacing": lambda e, o: (
            e.lower() != o.lower() and parts(e) == parts(o)
        ),
        "have the same parts in another order": lambda e, o: (
            parts(e) != parts(o) and sorted(parts(e)) == sorted(parts(o)) != []
        ),
        "contain the expected answer and more text": lambda e, o: (
            e.lower() != o.lower() and e.lower() in o.lower()
        ),
    }
    n, out = len(pairs), []
    for words, test in kinds.items():
        k = sum(1 for e, o in pairs if test(e, o))
        if k:
            out.append(f"{k} of {n} outputs {words}")
    return out


def _shared(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Features most expected answers have and most outputs lack (or the reverse)."""
    expected = [e for e, _ in pairs]
    outputs = [o for _, o in pairs]
    n, out = len(pairs), []
    for affix, common in (("start", common_prefix), ("end", common_suffix)):
        shared = common(expected)
        if len(shared.strip()) >= 1 and not all(e == shared for e in expected):
            k = sum(
                1 for o in outputs if (o.startswith if affix == "start" else o.endswith)(shared)
            )
            if k < n:
                out.append(f'every expected answer {affix}s with "{shared}"; {k} of {n} outputs do')
    for sep in _SEPARATORS + "\n":
        a = sum(1 for e in expected if sep in e)
        b = sum(1 for o in outputs if sep in o)
        if _apart(a, b, n):
            out.append(f"{_name(sep)} is in {a} of {n} expected answers, {b} of {n} outputs")
    for name, test in _CASES.items():
        a, b = sum(1 for e in expected if test(e)), sum(1 for o in outputs if test(o))
        if _apart(a, b, n):
            out.append(f"{name}: {a} of {n} expected answers, {b} of {n} outputs")
    digits = [sum(ch.isdigit() for ch in e) for e in expected]
    a = sum(1 for d in digits if d)
    b = sum(1 for o in outputs if any(ch.isdigit() for ch in o))
    if _apart(a, b, n):
        out.append(f"digits: in {a} of {n} expected answers, {b} of {n} outputs")
    elif a == n and len(set(digits)) == 1:
        same = sum(1 for o in outputs if sum(ch.isdigit() for ch in o) == digits[0])
        if same * 2 <= n:
            out.append(f"every expected answer has {digits[0]} digits; {same} of {n} outputs do")
    counts = {len(parts(e)) for e in expected}
    if len(counts) == 1 and (count := counts.pop()) > 1:
        same = sum(1 for o in outputs if len(parts(o)) == count)
        if same * 2 <= n:
            out.append(f"every expected answer has {count} parts; {same} of {n} outputs do")
    lo, hi = min(map(len, expected)), max(map(len, expected))
    median = statistics.median(map(len, outputs))
    if median > 2 * hi or median < lo / 2:
        out.append(f"length: expected answers {lo}-{hi} characters, outputs' median {median:g}")
    return out


_CASES: dict[str, Callable[[str], bool]] = {
    "all lower case": lambda s: any(c.isalpha() for c in s) and s == s.lower(),
    "all upper case": lambda s: any(c.isalpha() for c in s) and s == s.upper(),
    "capitalised words": lambda s: (
        bool(PARTS.findall(s)) and all(w[:1].isupper() for w in PARTS.findall(s) if w[:1].isalpha())
    ),
}


def _apart(a: int, b: int, n: int) -> bool:
    """Whether a feature in ``a`` of ``n`` expected answers and ``b`` of ``n`` outputs tells
    them apart: most of one side has it and at most a third of the other."""
    return (a * 3 >= n * 2 and b * 3 <= n) or (b * 3 >= n * 2 and a * 3 <= n)


def _name(sep: str) -> str:
    return NAMES.get(sep, f'"{sep}"')


def common_prefix(texts: Sequence[str]) -> str:
    """The prefix every text shares, cut back to whole parts ("ID-" of "ID-12" and "ID-47",
    not the "202" of two years)."""
    first = min(texts, key=len)
    i = 0
    while i < len(first) and all(t[i] == first[i] for t in texts):
        i += 1
    if all(len(t) == i or not t[i].isalnum() for t in texts) or not first[i - 1 : i].isalnum():
        return first[:i]
    cut = max((j for j in range(i) if not first[j].isalnum()), default=-1)
    return first[: cut + 1]


def common_suffix(texts: Sequence[str]) -> str:
    return common_prefix([t[::-1] for t in texts])[::-1]

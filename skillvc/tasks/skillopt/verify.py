"""SkillOpt's verifiers, as pure functions of an answer and what the item expects.

Each follows the rule of its environment in github.com/microsoft/SkillOpt (0.2.0,
``skillopt/envs/<env>/evaluator.py``), rewritten here:

* LiveMathematicianBench: the answer's choice label (an exact label, a choice's exact text, or
  a label as the first word) against the correct label;
* DocVQA: ANLS, 1 minus the normalised Levenshtein distance to the nearest gold answer, 0 at or
  past 0.5; hard only for a (near) exact answer (ANLS >= 0.999);
* OfficeQA: exact match after its own normalisation (numbers keep ``.``, ``-`` and ``%``;
  commas and unit words go), with token F1 as the soft score; no ``<answer>`` tag, no answer;
* SpreadsheetBench: every cell of the answer position compared by value (numbers rounded to 2
  places, times as text without microseconds, datetimes as whole Excel days, an empty string
  equal to an empty cell, other types never equal).

Answers are read as SkillOpt reads them: the last ``<answer>...</answer>``, else the last
non-empty line (OfficeQA: the tag is required).
"""

from __future__ import annotations

import datetime
import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)


def tagged_or_last_line(text: str) -> str:
    """The last ``<answer>`` tag's text, else the last non-empty line, stripped."""
    found = _TAG.findall(text or "")
    if found:
        return str(found[-1]).strip()
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def tagged(text: str) -> str | None:
    """The first ``<answer>`` tag's text (OfficeQA reads the first), None without one."""
    found = _TAG.search(text or "")
    return found.group(1).strip() if found else None


# -- LiveMathematicianBench ---------------------------------------------------------------------


def choice_label(text: str) -> str:
    return str(text).strip().upper().rstrip(".):")


def livemath_pick(answer_text: str, choices: Iterable[Mapping[str, Any]]) -> str:
    """The label an answer picks among ``choices`` ({"label", "text"}); "" when none."""
    answer = tagged_or_last_line(answer_text)
    options = [(choice_label(c.get("label", "")), str(c.get("text", "")).strip()) for c in choices]
    labels = {label for label, _ in options}
    label = choice_label(answer)
    if label in labels:
        return label
    for option, text in options:
        if text and text.lower() == answer.lower():
            return option
    words = answer.split()
    first = choice_label(words[0]) if words else ""
    return first if first in labels else label


# -- DocVQA -------------------------------------------------------------------------------------

ANLS_THRESHOLD = 0.5


def _levenshtein(a: str, b: str) -> int:
    if len(a) > len(b):
        a, b = b, a
    row = list(range(len(a) + 1))
    for j, cb in enumerate(b, start=1):
        previous, row[0] = row[0], j
        for i, ca in enumerate(a, start=1):
            previous, row[i] = row[i], min(row[i] + 1, row[i - 1] + 1, previous + (ca != cb))
    return row[-1]


def anls(answer: str, golds: Iterable[str]) -> float:
    """The best ANLS of ``answer`` over ``golds`` (lowercased, whitespace collapsed)."""
    pred = " ".join(str(answer).lower().split())
    best = 0.0
    for gold in golds:
        target = " ".join(str(gold).lower().split())
        if not pred and not target:
            return 1.0
        if not pred or not target:
            continue
        distance = _levenshtein(pred, target) / max(len(pred), len(target))
        if distance < ANLS_THRESHOLD:
            best = max(best, 1.0 - distance)
    return best


# -- OfficeQA -----------------------------------------------------------------------------------

_KEPT = set("0123456789.-%")
_UNITS = re.compile(r"\b(million|millions|billion|billions|dollars|dollar|nominal)\b")


def officeqa_normalize(text: str) -> str:
    text = str(text).lower().strip().replace(",", "")
    text = "".join(ch for ch in text if ch not in string.punctuation or ch in _KEPT)
    return " ".join(_UNITS.sub(" ", text).split())


def officeqa_f1(answer: str, gold: str) -> float:
    pred, want = officeqa_normalize(answer).split(), officeqa_normalize(gold).split()
    if not pred or not want:
        return 1.0 if pred == want else 0.0
    common = sum((Counter(pred) & Counter(want)).values())
    if not common:
        return 0.0
    precision, recall = common / len(pred), common / len(want)
    return 2 * precision * recall / (precision + recall)


# -- SpreadsheetBench ---------------------------------------------------------------------------

_EXCEL_EPOCH = datetime.datetime(1899, 12, 30)


def cell_value(value: Any) -> Any:
    """A cell's value as SpreadsheetBench compares it."""
    if isinstance(value, bool):
        return round(float(value), 2)
    if isinstance(value, (int, float)):
        return round(float(value), 2)
    if isinstance(value, datetime.datetime):
        delta = value - _EXCEL_EPOCH
        return round(delta.days + delta.seconds / 86400.0, 0)
    if isinstance(value, datetime.time):
        return str(value)[:-3]
    if isinstance(value, str):
        try:
            return round(float(value), 2)
        except ValueError:
            return value
    return value


def cells_equal(expected: Any, got: Any) -> bool:
    a, b = cell_value(expected), cell_value(got)
    if a in ("", None) and b in ("", None):
        return True
    return type(a) is type(b) and a == b


def _column_number(name: str) -> int:
    number = 0
    for ch in name.upper():
        number = number * 26 + ord(ch) - 64
    return number


def _column_name(number: int) -> str:
    name = ""
    while number > 0:
        number, rest = divmod(number - 1, 26)
        name = chr(65 + rest) + name
    return name


def cell_names(cell_range: str) -> list[str]:
    """``A1:B2`` -> A1, A2, B1, B2 (column by column); a single cell as itself."""
    if ":" not in cell_range:
        return [cell_range]
    start, end = cell_range.split(":", 1)

    def split(cell: str) -> tuple[int, int]:
        letters = "".join(ch for ch in cell if ch.isalpha())
        digits = "".join(ch for ch in cell if ch.isdigit())
        return _column_number(letters), int(digits)

    (c1, r1), (c2, r2) = split(start), split(end)
    return [f"{_column_name(c)}{r}" for c in range(c1, c2 + 1) for r in range(r1, r2 + 1)]


def compare_workbooks(expected: Any, got: Any, answer_position: str) -> tuple[bool, str]:
    """Whether workbook ``got`` holds ``expected``'s values at ``answer_position`` (openpyxl
    workbooks; ``Sheet!A1:B3,C1`` or ``A1:B3`` for the first sheet) and the first difference."""
    for part in (answer_position or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "!" in part:
            sheet, cells = part.split("!", 1)
            sheet = sheet.strip().strip("'\"")
        else:
            sheet, cells = expected.sheetnames[0], part
        cells = cells.strip().strip("'\"")
        if sheet not in got.sheetnames:
            return False, f"worksheet {sheet!r} not found"
        want, have = expected[sheet], got[sheet]
        for name in cell_names(cells):
            if not cells_equal(want[name].value, have[name].value):
                return (
                    False,
                    f"{sheet}!{name}: got {have[name].value!r}, expected {want[name].value!r}",
                )
    return True, ""

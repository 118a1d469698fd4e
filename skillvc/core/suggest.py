""" "Did you mean": the nearest known name to a mistyped one, and where skillvc.toml says it.

Used by every error that names something unknown (a config key or section, a scorer, a
simulator world, a model backend), so a typo gets one suggestion, not a list of every name.

Invariant: pure functions over the text given; nothing is read or written here.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

CUTOFF = 0.6  # difflib's ratio below which a name is not offered (``learning_rte``: 0.96)


def nearest(name: str, choices: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (case-insensitively), or None when none is close."""
    known = {c.lower(): c for c in choices}
    found = difflib.get_close_matches(name.lower(), list(known), n=1, cutoff=CUTOFF)
    return known[found[0]] if found else None


def did_you_mean(
    name: str, choices: Iterable[str], *, listed: str = "Known", then: str = "", quote: str = "'"
) -> str:
    """``Did you mean 'x'? <then>`` for a close name, else ``<listed>: a, b, c.`` (every
    choice); ``quote`` wraps the suggestion (``[]`` for a table: ``[tasks]``)."""
    names = sorted(set(choices))
    best = nearest(name, names)
    if best is not None:
        left, right = (quote[0], quote[-1]) if quote else ("", "")
        return f"Did you mean {left}{best}{right}?" + (f" {then}" if then else "")
    return f"{listed}: {', '.join(names)}."


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")


def config_line(text: str, section: str, key: str | None = None) -> int | None:
    """The 1-based line of ``text`` (a TOML file) that opens table ``[section]``, or with
    ``key`` the line that sets ``key`` inside it; None when it is not written that way (an
    inline table, a dotted key: the error then names no line)."""
    current: str | None = None
    quoted = rf"""(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')""" if key else ""
    for number, line in enumerate(text.splitlines(), start=1):
        m = _HEADER.match(line)
        if m is not None:
            current = ".".join(part.strip().strip("\"'") for part in m.group(1).split("."))
            if key is None and current == section:
                return number
            continue
        if key is not None and current == section and re.match(rf"^\s*{quoted}\s*=", line):
            return number
    return None

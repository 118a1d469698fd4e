"""Lines that fit the terminal's width.

Only a terminal is fitted, and only the text of the commands that ask for it
(``fits_terminal``: train, eval, runs, demo; log, show, diff and help through
``pager.screen_options``), never ``--json``, ``--nl`` or ``--csv``: a pipe, a file or a test's
captured output gets every line as it was written, so scripts and ``grep`` see whole lines (git
does the same), and JSON, YAML or Markdown copied off a terminal is not broken by a wrap.

A line too long for the terminal is wrapped at a space, its continuation indented two columns
past the line's own indentation; a word longer than the width is cut. ANSI colour codes take
no columns and are carried over a wrap, so a coloured diff line stays coloured on every row.

Width counts one column per character; East Asian wide characters count as one too (a known
limitation: such a line may take a few more columns than the terminal has).
"""

from __future__ import annotations

import functools
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

from skillvc.secrets import ScrubbingWriter

F = TypeVar("F", bound=Callable[..., Any])

_SGR = re.compile(r"\x1b\[[0-9;]*m")
CONTINUATION = 2  # extra indentation of a wrapped line's continuation rows


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The columns of the terminal ``stream`` (default stdout) writes to; None when it is not a
    terminal (then nothing is fitted)."""
    stream = sys.stdout if stream is None else stream
    columns = getattr(stream, "columns", None)  # a pager's buffer (``pager._Paged``)
    if isinstance(columns, int):
        return columns
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        return None
    return max(20, shutil.get_terminal_size((80, 24)).columns)


def visible_len(text: str) -> int:
    """Columns ``text`` takes on a terminal (colour codes take none)."""
    return len(_SGR.sub("", text))


def fit_line(line: str, width: int | None) -> list[str]:
    """``line`` as rows of at most ``width`` columns (None: the line as it is)."""
    if width is None or visible_len(line) <= width:
        return [line]
    chars: list[str] = []  # the visible characters
    codes: list[str] = []  # the colour codes just before each character
    states: list[str] = []  # the codes in force at each character
    pending, state = "", ""
    pos = 0
    for m in [*_SGR.finditer(line), None]:
        for ch in line[pos : m.start() if m else len(line)]:
            state = _apply(state, pending)
            chars.append(ch)
            codes.append(pending)
            states.append(state)
            pending = ""
        if m:
            pending += m.group()
            pos = m.end()
    trailing = pending
    plain = "".join(chars)
    indent = len(plain) - len(plain.lstrip(" "))
    more = min(indent + CONTINUATION, width // 2)
    rows: list[str] = []
    start, first = 0, True
    while True:
        room = width if first else width - more
        if len(plain) - start <= room:
            end = len(plain)
        else:
            cut = plain.rfind(" ", start + 1, start + room + 1)
            # A break inside the indentation would leave an empty row: cut the word instead.
            end = cut if cut > start and plain[start:cut].strip() else start + room
        piece = "".join(
            (states[i] if i == start else codes[i]) + chars[i] for i in range(start, end)
        )
        done = end >= len(plain)
        if done:
            piece += trailing
        elif states[end - 1]:
            piece += "\x1b[0m"  # the colour goes on at the next row's start
        rows.append(("" if first else " " * more) + piece)
        if done:
            return rows
        start, first = end, False
        while start < len(plain) and plain[start] == " ":
            start += 1
        if start >= len(plain):
            rows[-1] += trailing
            return rows


def _apply(state: str, codes: str) -> str:
    """The colour codes in force after ``codes``: a reset forgets those before it."""
    for code in _SGR.findall(codes):
        state = "" if code in ("\x1b[0m", "\x1b[m") else state + code
    return state


def fit_text(text: str, width: int | None) -> str:
    """Every line of ``text`` fitted to ``width`` (None: ``text`` as it is)."""
    if width is None:
        return text
    return "\n".join(row for line in text.split("\n") for row in fit_line(line, width))


class _FittingWriter(ScrubbingWriter):
    """A terminal stream whose whole lines are fitted to its width as they are written.

    A chunk holding a carriage return is a redrawn live line (``progress``), fitted by its
    writer: it passes through as it is, after any text still waiting for its newline. A flush
    writes out a line still waiting for its newline (a prompt) as it is.
    """

    def __init__(self, stream: TextIO, width: int) -> None:
        super().__init__(stream)
        self._width = width
        self._partial = ""

    def write(self, text: str) -> int:
        if "\r" in text:
            self._stream.write(self._partial + text)
            self._partial = ""
            return len(text)
        *whole, self._partial = (self._partial + text).split("\n")
        if whole:
            from skillvc.secrets import scrub_values

            # Scrubbed before the wrap: a wrap must not split a secret the stream below
            # (``secrets.scrubbed_output``) would then no longer recognise.
            self._stream.write(fit_text(scrub_values("\n".join(whole)), self._width) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self._stream.write(self._partial)
            self._partial = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return True


def fits_terminal(fn: F) -> F:
    """A command whose text lines fit the terminal (``fitted_output``); its ``--json``,
    ``--nl`` and ``--csv`` output is left whole (its progress on stderr still fits)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        machine = kwargs.get("as_json") or kwargs.get("table_format")
        with fitted_output(("stderr",) if machine else ("stdout", "stderr")):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@contextmanager
def fitted_output(streams: tuple[str, ...] = ("stdout", "stderr")) -> Iterator[None]:
    """Within the block, lines written to ``streams`` on a terminal fit its width."""
    saved = sys.stdout, sys.stderr
    for name in streams:
        stream = getattr(sys, name)
        width = terminal_width(stream)
        if width is not None:
            setattr(sys, name, _FittingWriter(stream, width))
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, _FittingWriter):
                stream.flush()
        sys.stdout, sys.stderr = saved

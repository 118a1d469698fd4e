"""Warnings for credentials in a user's own task files (kept as they are, but named).

A task's input comes from the user's committed file and is stored and sent as is (it is what
the skill is trained on); ``validate``, ``eval`` and ``train`` read the file and say, once per
file and process, at which line a credential-shaped value sits and of what kind, never the
value, so the user learns to take it out and rotate it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from skillvc.secrets import findings

_lock = threading.Lock()
_warned: set[tuple[str, int]] = set()  # (file, hash of its content): a changed file warns again
# Files read while ``scanned_later`` is open: (display, text), scanned by ``warn_in_background``.
_later: ContextVar[list[tuple[str, str]] | None] = ContextVar("task_files_later", default=None)


@contextmanager
def scanned_later() -> Iterator[list[tuple[str, str]]]:
    """Task files read inside are not scanned now; the list it yields collects them for
    ``warn_in_background``. For a training run: the scan (and compiling the detectors it
    needs, about 0.15 s) then runs while its first calls are out, not before them."""
    files: list[tuple[str, str]] = []
    token = _later.set(files)
    try:
        yield files
    finally:
        _later.reset(token)


def warn_in_background(files: Sequence[tuple[str, str]]) -> threading.Thread:
    """``warn_task_file`` for each of ``files`` on a thread of its own (started, returned)."""

    def scan() -> None:
        for display, text in files:
            warn_task_file(display, text)

    thread = threading.Thread(target=scan, name="task-file-scan")
    thread.start()
    return thread


def warn_task_file(display: str, text: str) -> list[str]:
    """Print (to stderr) and return one warning per finding in the task file ``display`` with
    content ``text``; nothing the second time the same file is read by this process (nor
    now, inside ``scanned_later``)."""
    later = _later.get()
    if later is not None:
        later.append((display, text))
        return []
    key = (display, hash(text))
    with _lock:
        if key in _warned:
            return []
        _warned.add(key)
    found = findings(text)
    seen: set[tuple[int, str]] = set()
    lines = []
    for f in found:
        line = text.count("\n", 0, f.start) + 1
        if (line, f.kind) not in seen:
            seen.add((line, f.kind))
            lines.append(
                f"warning: {display}:{line} holds what looks like a credential ({f.kind}); the "
                "task file is used as is: take the value out and rotate it if it is real."
            )
    for message in lines:
        print(message, file=sys.stderr)
    return lines

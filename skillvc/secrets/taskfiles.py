"""Warnings for credentials in a user's own task files (kept as they are, but named).

A task's input comes from the user's committed file and is stored and sent as is (it is what
the skill is trained on); ``validate``, ``eval`` and ``train`` read the file and say, once per
file and process, at which line a credential-shaped value sits and of what kind, never the
value, so the user learns to take it out and rotate it.
"""

from __future__ import annotations

import sys
import threading

from skillvc.secrets import findings

_lock = threading.Lock()
_warned: set[tuple[str, int]] = set()  # (file, hash of its content): a changed file warns again


def warn_task_file(display: str, text: str) -> list[str]:
    """Print (to stderr) and return one warning per finding in the task file ``display`` with
    content ``text``; nothing the second time the same file is read by this process."""
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

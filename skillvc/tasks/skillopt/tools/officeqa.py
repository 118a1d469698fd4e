"""OfficeQA's document tools: find, read and search the item's documents.

``[tools] python = ["skillvc.tasks.skillopt.tools.officeqa"]``. The documents an item names
(``source_files``, found under ``[tasks] data_root``) are copied into the rollout's scratch
directory, and these tools see that directory only, as SkillOpt's ``glob``/``read``/``grep``
see the item's candidate files: a path that leads out of it is refused.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

READ_CHARS = 4000  # a read's excerpt is cut here
GREP_MATCHES = 20
GLOB_MATCHES = 50


def _inside(workdir: Path, path: str) -> Path:
    full = (workdir / path).resolve()
    if not full.is_relative_to(workdir.resolve()) or not full.is_file():
        raise ValueError(f"no document {path!r}; glob('*') lists them")
    return full


def glob(pattern: str, workdir: Path) -> str:
    """List the documents whose name or relative path matches a glob pattern, e.g. '*.txt'."""
    found = []
    for path in sorted(workdir.rglob("*")):
        rel = path.relative_to(workdir).as_posix()
        if path.is_file() and (
            fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(path.name, pattern)
        ):
            found.append(rel)
        if len(found) >= GLOB_MATCHES:
            break
    return "\n".join(found) or "[no matches]"


def read(path: str, workdir: Path, start: int = 1, limit: int = 80) -> str:
    """Read a document's lines from line `start` (1-based), at most `limit` lines."""
    lines = _inside(workdir, path).read_text(encoding="utf-8", errors="replace").splitlines(True)
    first = max(start, 1) - 1
    excerpt = "".join(lines[first : first + max(limit, 1)])
    return excerpt[:READ_CHARS] or "[empty: no lines there]"


def grep(pattern: str, path: str, workdir: Path) -> str:
    """The lines of a document that contain `pattern` (case-insensitive), numbered."""
    needle = pattern.lower()
    if not needle:
        raise ValueError("the pattern is empty")
    text = _inside(workdir, path).read_text(encoding="utf-8", errors="replace")
    hits = [
        f"{number}: {line.rstrip()}"
        for number, line in enumerate(text.splitlines(), start=1)
        if needle in line.lower()
    ]
    return "\n".join(hits[:GREP_MATCHES]) or "[no matches]"

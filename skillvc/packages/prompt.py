"""What the optimizer sees of a skill package: its file list, sizes and contents, bounded.

SKILL.md is shown whole, as a single-file skill is (the ``<skill>`` section of the reflection
prompt). The other files follow as one JSON list (``<package_files>``), each with its path,
size in bytes, whether a chain of links from SKILL.md reaches it (``linked``: an unlinked file
is never read by an agent) and its text; then the carried files an agent harness installs
with them (scripts, assets: path and size only, never edited). The texts share ``budget``
characters: each file gets an equal share of what is left, and a longer file keeps its head
and tail with the number of characters cut between them, so the optimizer sees where a file
starts and ends.

Invariant: pure and deterministic in the package and the budget, so a resumed run renders the
same prompts (and finds its recorded answers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from skillvc.packages.links import linked_files, reachable_files
from skillvc.packages.model import SKILL_FILE, SkillPackage
from skillvc.packages.packagefile import PackageFile

HEADER = "## Package file: {path}"


def clip(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, its head and tail kept around a cut marker."""
    if len(text) <= limit:
        return text
    marker = "\n[... {n} characters cut ...]\n"
    keep = max(0, limit - len(marker.format(n=len(text))))
    head, tail = keep - keep // 2, keep // 2
    cut = len(text) - head - tail
    return text[:head] + marker.format(n=cut) + (text[-tail:] if tail else "")


def reading_order(package: SkillPackage) -> list[str]:
    """Files other than SKILL.md: the linked ones in the order a reader meets them (links of
    SKILL.md first, then theirs), then the unlinked ones by path."""
    order: list[str] = []
    todo = [SKILL_FILE]
    while todo:
        for name in linked_files(package, todo.pop(0)):
            if name != SKILL_FILE and name not in order:
                order.append(name)
                todo.append(name)
    return order + [n for n in package.names if n != SKILL_FILE and n not in order]


def optimizer_files(
    package: SkillPackage, budget: int, carried: Sequence[PackageFile] = ()
) -> list[dict[str, Any]]:
    """The ``<package_files>`` entries (see the module docstring); ``carried`` files (what an
    installing harness writes beside SKILL.md: scripts, assets) follow as path and size,
    marked ``"carried": true``, without their bytes."""
    texts = package.texts()
    reachable = reachable_files(package)
    names = reading_order(package)
    out = []
    left = budget
    for i, name in enumerate(names):
        share = left // (len(names) - i)
        text = clip(texts.get(name, ""), share)
        left -= len(text)
        out.append(
            {
                "path": name,
                "bytes": len(package.files[name]),
                "linked": name in reachable,
                "text": text,
            }
        )
    out += [{"path": f.path, "bytes": len(f.content), "carried": True} for f in carried]
    return out


def readable(package: SkillPackage, budget: int) -> str:
    """The package as one text for prompts that show whole versions (the slow update):
    SKILL.md, then each other file under a ``## Package file: <path>`` header."""
    parts = [package.texts().get(SKILL_FILE, "")]
    for entry in optimizer_files(package, budget):
        parts.append(f"\n\n{HEADER.format(path=entry['path'])}\n\n{entry['text']}")
    return "".join(parts)

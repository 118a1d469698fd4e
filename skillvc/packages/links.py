"""Relative Markdown links between a package's files, and the rule that they resolve inside it.

A link is ``[text](target)`` or ``[text](target "title")``; a target with a scheme (``https:``,
``mailto:``), an absolute path or only a ``#fragment`` is not a file link. ``#fragment`` and
``?query`` are dropped; the rest is resolved against the linking file's directory. A link that
leaves the package or names no package file is broken (rule ``package-link``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from pathlib import Path

from skillvc.core.errors import SkillvcError
from skillvc.inputs import reader as inputs
from skillvc.packages.model import DEFAULT_INCLUDE, SKILL_FILE, SkillPackage, matches
from skillvc.skill.formats import Problem

RULE_LINK = "package-link"
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"\n]*\")?\s*\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _targets(text: str) -> Iterator[str]:
    for match in _LINK.finditer(text):
        target = match.group(1)
        if _SCHEME.match(target) or target.startswith(("/", "#")):
            continue
        target = target.split("#", 1)[0].split("?", 1)[0]
        if target:
            yield target


def resolve(source: str, target: str) -> str | None:
    """``target`` linked from package file ``source`` as a package path (None: it leaves)."""
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    if joined == ".." or joined.startswith("../"):
        return None
    return joined


def linked_files(package: SkillPackage, source: str = SKILL_FILE) -> list[str]:
    """The package files ``source`` links to, in order of first link, without repeats."""
    text = package.texts().get(source, "")
    out: list[str] = []
    for target in _targets(text):
        path = resolve(source, target)
        if path is not None and path in package.files and path != source and path not in out:
            out.append(path)
    return out


def reachable_files(package: SkillPackage) -> set[str]:
    """The package files a reader of SKILL.md can reach by following relative links (SKILL.md
    included): what an agent is ever pointed to."""
    seen, todo = {SKILL_FILE}, [SKILL_FILE]
    while todo:
        for name in linked_files(package, todo.pop()):
            if name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def orphan_files(package: SkillPackage) -> list[str]:
    """Package files no chain of relative links from SKILL.md reaches, sorted."""
    reachable = reachable_files(package)
    return [name for name in package.names if name not in reachable]


def broken_links(package: SkillPackage) -> list[Problem]:
    """One problem per relative link (in any package file) that does not resolve inside it."""
    return [problem for _, problem in broken_link_targets(package)]


def broken_link_targets(package: SkillPackage) -> list[tuple[str | None, Problem]]:
    """``broken_links`` with the package path each link resolves to (None: it leaves)."""
    problems = []
    for source, text in sorted(package.texts().items()):
        for target in _targets(text):
            path = resolve(source, target)
            if path is not None and path in package.files:
                continue
            if path is not None and _is_dir(package, path):
                continue
            where = package.repo_path(source)
            why = "leaves the skill package" if path is None else "names no file of the package"
            message = f"{where}: the link to {target!r} {why}."
            problems.append((path, Problem(where, RULE_LINK, message)))
    return problems


def _is_dir(package: SkillPackage, path: str) -> bool:
    """A link to a package folder (``references/``) is fine when it holds package files."""
    prefix = "" if path == "." else path.rstrip("/") + "/"
    return any(name.startswith(prefix) for name in package.files)


def directory_links(directory: Path) -> list[str]:
    """The files of skill directory ``directory`` that its SKILL.md links to, as
    ``linked_files`` would find them in its default package (``*.md`` and ``*.txt``); none
    without a readable SKILL.md. Reads SKILL.md only, never walks the directory (it may be
    the repository's top). ``skillvc init`` makes a skill whose SKILL.md links such files a
    package."""
    try:
        raw = inputs.read_bytes(
            directory / SKILL_FILE, SKILL_FILE, max_bytes=inputs.SKILL_MAX_BYTES
        )
        text = raw.decode("utf-8-sig")
    except (SkillvcError, UnicodeDecodeError):  # a pipe, a device, too large: no links
        return []
    out: list[str] = []
    for target in _targets(text):
        path = resolve(SKILL_FILE, target)
        if path is None or path in out or path == SKILL_FILE or ".git" in path.split("/"):
            continue
        if matches(path, DEFAULT_INCLUDE, ()) and (directory / path).is_file():
            out.append(path)
    return out

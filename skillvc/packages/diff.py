"""Unified diffs of skill versions: one file's text, or every changed file of a package.

Invariants:
- A package diff is one git-style unified diff: a section per file whose bytes differ, in
  sorted order of path, each named from the repository root (``a/<root>/<file>``). A file only
  in the newer version is ``--- /dev/null``; one only in the older is ``+++ /dev/null``.
- Each section is exactly ``skillvc.skill.edits.unified_diff`` of that file, so a package's SKILL.md
  section reads as a single-file skill's diff does, and ``skillvc apply`` reads it back.
- A version is given as its identity text (a skill's text or a package bundle, as the event
  log holds it); text that is not a bundle is a package of one file, SKILL.md.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skillvc.core.errors import SkillDocumentError, SkillFileMissing
from skillvc.packages.model import SKILL_FILE, SkillPackage, bundle_files, load_package
from skillvc.skill.edits import unified_diff
from skillvc.skill.skilldoc import SkillDocument

if TYPE_CHECKING:
    from skillvc.core.config import Config
    from skillvc.repo.skillrepo import SkillRepo

DEV_NULL = "/dev/null"


@dataclass(frozen=True)
class VersionDiff:
    """A diff between two skill versions and the repository paths it changes (sorted)."""

    patch: str
    files: tuple[str, ...]


def package_root(path: str) -> str:
    """The package directory of a configured skill path: the path itself when it names the
    directory, else the directory holding its SKILL.md ("" = the repository root)."""
    norm = posixpath.normpath(path.rstrip("/")) if path.strip("/") else ""
    if norm in ("", "."):
        return ""
    return posixpath.dirname(norm) if posixpath.basename(norm) == SKILL_FILE else norm


def files_diff(
    before: Mapping[str, bytes], after: Mapping[str, bytes], root: str = ""
) -> VersionDiff:
    """The diff of a package's files (package-relative names -> bytes) from ``before`` to
    ``after``; paths in it are ``root``-prefixed (see the module invariants)."""
    sections, changed = [], []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        path = f"{root}/{name}" if root else name
        changed.append(path)
        section = unified_diff(_document(old, name, path), _document(new, name, path), path=path)
        # git names a missing side /dev/null; the hunk ranges (-0,0 / +0,0) already say so.
        if old is None:
            section = section.replace(f"--- a/{path}\n", f"--- {DEV_NULL}\n", 1)
        elif new is None:
            section = section.replace(f"+++ b/{path}\n", f"+++ {DEV_NULL}\n", 1)
        sections.append(section)
    return VersionDiff("".join(sections), tuple(changed))


def version_diff(before: str, after: str, path: str) -> VersionDiff:
    """The diff between two identity texts. Two single-file texts give exactly
    ``unified_diff`` named ``path`` (the skill file); bundles give a package diff under
    ``package_root(path)``."""
    old_files, new_files = bundle_files(before), bundle_files(after)
    if old_files is None and new_files is None:
        patch = unified_diff(SkillDocument.parse(before), SkillDocument.parse(after), path=path)
        return VersionDiff(patch, (path,) if patch else ())
    # A plain text beside a bundle (never written by one run) is read as SKILL.md alone.
    old = {SKILL_FILE: before} if old_files is None else old_files
    new = {SKILL_FILE: after} if new_files is None else new_files
    return files_diff(_encoded(old), _encoded(new), package_root(path))


def package_diff(
    config: Config, repo: SkillRepo, rev_a: str, rev_b: str | None
) -> tuple[VersionDiff, SkillPackage, SkillPackage]:
    """The configured package's diff from revision ``rev_a`` to ``rev_b`` (None: the working
    tree), with both versions. A revision without the package's SKILL.md is SkillFileMissing,
    as it is for a single-file skill."""
    before = _package_at(config, repo, rev_a)
    after = _package_at(config, repo, rev_b)
    return files_diff(before.files, after.files, before.root), before, after


def _package_at(config: Config, repo: SkillRepo, rev: str | None) -> SkillPackage:
    package = load_package(config, repo, rev) if rev is not None else load_package(config)
    if package is None:
        raise ValueError("package_diff needs the config of a skill package")
    if SKILL_FILE not in package.files:
        where = "in the working tree" if rev is None else f"in revision {rev}"
        raise SkillFileMissing(f"{package.repo_path(SKILL_FILE)} does not exist {where}.")
    return package


def _document(raw: bytes | None, name: str, path: str) -> SkillDocument:
    """File ``name``'s document (an empty one when absent); only SKILL.md has frontmatter."""
    try:
        return SkillDocument.parse(raw or b"", frontmatter=name == SKILL_FILE)
    except SkillDocumentError as exc:  # its message does not say which file
        raise SkillDocumentError(f"{path}: {exc.message}") from None


def _encoded(files: Mapping[str, str]) -> dict[str, bytes]:
    return {name: text.encode("utf-8") for name, text in files.items()}

"""The files of a skill directory that are not package files: carried along untouched.

A package's text files are what training reads and edits (``skillvc.packages.model``).
Everything else in the directory (scripts, assets, binaries, and text files that ``include`` /
``exclude`` leave out) is *carried*: a harness that installs the skill (``command``,
``claude-code``, ``codex``) writes it beside SKILL.md byte for byte, with its executable bit,
so ``scripts/fill.py`` stays runnable. A chat target gets none of it.

Invariants:

- Read from the version being evaluated, as the package is: a revision's tree (blobs and
  modes), or the working tree's files that git sees (tracked, or untracked and not ignored), so
  an ignored ``__pycache__/`` or editor backup is never carried and the working tree carries
  what a commit of it would. Training never edits a carried file, so every version of a run
  carries its base commit's files.
- Symbolic links are never followed, carried or installed: a link in the skill directory (to
  a file or a folder, inside the package or not) and a submodule are left out and named in
  ``Carried.skipped``, so nothing outside the package is read because of one and nothing an
  agent runs can reach through one. A link that SKILL.md points to is then a broken link
  (``skillvc.packages.checks.check_package_files``).
- Never carried: anything under ``.git`` or ``.skillvc``, and, when the package is the
  repository's root, ``skillvc.toml`` and the task files: an agent must not read the answers.
- A carried file is a ``PackageFile`` holding bytes: calls key it by its SHA-256 and the event
  log records only that hash, never its bytes.
"""

from __future__ import annotations

import posixpath
import stat
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from skillvc.core.paths import _forbidden
from skillvc.inputs import reader as inputs
from skillvc.packages.model import REGULAR_MODES, SkillPackage
from skillvc.packages.packagefile import PackageFile

if TYPE_CHECKING:
    from skillvc.core.config import Config
    from skillvc.repo.skillrepo import SkillRepo

EXECUTABLE_MODE = "100755"


@dataclass(frozen=True)
class Carried:
    """A package version's carried files, and the symbolic links (and submodules) left out."""

    files: tuple[PackageFile, ...] = ()  # sorted by path
    skipped: tuple[str, ...] = ()  # package-relative paths, sorted

    @property
    def paths(self) -> list[str]:
        return [f.path for f in self.files]


def load_carried(
    config: Config,
    package: SkillPackage,
    repo: SkillRepo,
    rev: str | None = None,
    *,
    read: bool = True,
) -> Carried:
    """The carried files of the configured skill's ``package`` at ``rev`` (None: the working
    tree). ``read=False`` only lists what is skipped (a chat target needs no bytes)."""
    omit = _scored_files(config, package.root)
    if rev is None:
        return _in_worktree(repo, package, omit, read)
    return _at_rev(repo, package, rev, omit, read)


def _at_rev(
    repo: SkillRepo, package: SkillPackage, rev: str, omit: Collection[str], read: bool
) -> Carried:
    wanted: list[tuple[str, str, str]] = []
    skipped = []
    for rel, mode, sha in repo.list_entries(package.root, rev):
        if rel in package.files or rel in omit or _forbidden(rel.split("/")):
            continue
        if mode not in REGULAR_MODES:
            skipped.append(rel)
        else:
            wanted.append((rel, mode, sha))
    if not read:
        return Carried((), tuple(skipped))
    blobs = repo.read_blobs([sha for _, _, sha in wanted])
    files = tuple(
        PackageFile(rel, data=blobs[sha], executable=mode == EXECUTABLE_MODE)
        for rel, mode, sha in wanted
    )
    return Carried(files, tuple(skipped))


def _in_worktree(
    repo: SkillRepo, package: SkillPackage, omit: Collection[str], read: bool
) -> Carried:
    directory = repo.root / package.root if package.root else repo.root
    real = directory.resolve()
    files, skipped = [], []
    for rel in repo.visible_files(package.root):
        if rel in omit or _forbidden(rel.split("/")):
            continue
        path = directory / rel
        try:
            info = path.lstat()
        except OSError:  # a tracked file deleted from the disk
            continue
        # A tracked path under a folder the working tree replaced with a link: not followed.
        through_link = path.parent.resolve() != real.joinpath(*rel.split("/")[:-1])
        if through_link or stat.S_ISLNK(info.st_mode) or stat.S_ISDIR(info.st_mode):
            skipped.append(rel)  # a link, a path through one, a submodule
        elif rel not in package.files and stat.S_ISREG(info.st_mode) and read:
            data = inputs.read_bytes(path, rel, max_bytes=inputs.SKILL_MAX_BYTES)
            files.append(PackageFile(rel, data=data, executable=bool(info.st_mode & stat.S_IXUSR)))
    return Carried(tuple(files), tuple(skipped))


def _scored_files(config: Config, root: str) -> set[str]:
    """skillvc.toml and the task files, as paths relative to a package at ``root`` (only a
    package at the repository root holds them)."""
    if root:
        return set()
    from skillvc.core.config import CONFIG_FILE

    tasks = config.tasks
    named = [CONFIG_FILE, *(p for p in (tasks.path, tasks.train, tasks.val, tasks.test) if p)]
    if tasks.skillopt_dir:
        base = posixpath.normpath(tasks.skillopt_dir)
        named += [f"{base}/{split}/items.json" for split in ("train", "val", "test")]
    return {posixpath.normpath(p) for p in named}

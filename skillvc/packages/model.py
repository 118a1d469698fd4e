"""The package model: which files of a skill directory belong to the skill, and their bytes.

Invariants:
- A package is a directory holding ``SKILL.md``; its files are the ones matching ``include``
  (default: Markdown and plain text, at any depth) and no ``exclude`` glob, as posix paths
  relative to the directory, sorted. Anything else in the directory (scripts, binaries) is
  carried along untouched (``skillvc.packages.carried``), never read as text or edited.
- A symbolic link in the directory is never a package file, whatever its name, and is never
  followed (nor a submodule): a link could make training read, and its commits write, a file
  outside the package. ``skillvc.packages.carried`` names the links left out.
- Each file is a ``SkillDocument`` that renders back byte for byte; only ``SKILL.md`` may have
  frontmatter (in a reference file a leading ``---`` block is just text).
- Reading at a revision reads the committed tree, never the working tree.
- A package's *bundle* is its identity as one text: canonical JSON of ``{"files": {path: text},
  "format": BUNDLE_FORMAT}`` (UTF-8 decoded without stripping a BOM, so ``from_bundle`` gives
  back the same bytes). The training loop, the call cache and the event log use it wherever a
  single-file skill uses its text, so two versions differ exactly when some file differs.
"""

from __future__ import annotations

import fnmatch
import json
import os
import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from skillvc.core.errors import SkillDocumentError
from skillvc.core.hashing import canonical_json
from skillvc.inputs import reader as inputs
from skillvc.skill.skilldoc import SkillDocument

if TYPE_CHECKING:
    from skillvc.core.config import Config
    from skillvc.repo.skillrepo import SkillRepo

SKILL_FILE = "SKILL.md"
DEFAULT_INCLUDE = ("*.md", "*.txt")
BUNDLE_FORMAT = "skillvc-package/1"
_BUNDLE_START = '{"files":{'  # canonical JSON sorts "files" before "format"
# Git modes of regular files (plain and executable): not symbolic links (120000) or
# submodules (160000), which a package never follows.
REGULAR_MODES = ("100644", "100755")


def walk_files(directory: Path) -> list[str]:
    """The regular files under ``directory`` as sorted posix paths relative to it; symbolic
    links (to files or directories) are neither listed nor followed, nor is ``.git``."""
    out = []
    for top, dirs, names in os.walk(directory):  # followlinks=False: a linked dir is a name
        here = Path(top)
        dirs[:] = [d for d in dirs if d != ".git" and not (here / d).is_symlink()]
        for name in names:
            path = here / name
            if path.is_symlink():
                continue
            if path.is_file():
                out.append(path.relative_to(directory).as_posix())
                continue
            kind = inputs.file_kind(path.lstat().st_mode)
            if kind is not None:  # a pipe or a device: named, never read nor called missing
                rel = path.relative_to(directory).as_posix()
                raise SkillDocumentError(
                    f"{rel} in the skill package {directory.name} is {kind}, not a regular file.",
                    hint="Remove it or replace it with a regular file.",
                )
    return sorted(out)


def matches(path: str, include: Sequence[str], exclude: Sequence[str]) -> bool:
    """True when ``path`` (posix, package-relative) is a package file under these globs.

    A glob without a slash matches the file name at any depth; one with a slash matches the
    whole relative path (``fnmatch``: ``*`` crosses slashes)."""

    def hit(globs: Sequence[str]) -> bool:
        name = path.rsplit("/", 1)[-1]
        return any(fnmatch.fnmatchcase(path if "/" in g else name, g) for g in globs)

    return path == SKILL_FILE or (hit(include) and not hit(exclude))


@dataclass(frozen=True)
class SkillPackage:
    """One skill directory's text files: ``files`` maps package-relative paths to bytes."""

    root: str  # the directory, posix and relative to the repository root ("" = the root)
    files: Mapping[str, bytes]

    @property
    def names(self) -> list[str]:
        return sorted(self.files)

    @property
    def skill(self) -> bytes:
        return self.files[SKILL_FILE]

    def repo_path(self, name: str) -> str:
        """``name`` as a path relative to the repository root."""
        return f"{self.root}/{name}" if self.root else name

    def document(self, name: str) -> SkillDocument:
        """File ``name`` parsed; frontmatter is SKILL.md's alone."""
        return SkillDocument.parse(self.files[name], frontmatter=name == SKILL_FILE)

    def texts(self) -> dict[str, str]:
        """Every file decoded (undecodable files are left out: validate reports them)."""
        out = {}
        for name, raw in self.files.items():
            try:
                out[name] = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                continue
        return out

    def bundle(self) -> str:
        """The package as one canonical text (see the module docstring); every file must be
        UTF-8 (``skillvc.packages.checks.check_package_files`` refuses a package where one
        is not)."""
        files = {name: raw.decode("utf-8") for name, raw in sorted(self.files.items())}
        return canonical_json({"files": files, "format": BUNDLE_FORMAT})

    @classmethod
    def from_bundle(cls, root: str, text: str) -> SkillPackage:
        """The package a bundle holds (``root`` is where it lives in the repository)."""
        files = bundle_files(text)
        if files is None:
            raise ValueError("not a skill package bundle")
        return cls(root, {name: body.encode("utf-8") for name, body in files.items()})

    def with_file(self, name: str, raw: bytes) -> SkillPackage:
        """This package with file ``name`` holding ``raw`` (added when new)."""
        return SkillPackage(self.root, {**self.files, name: raw})

    @classmethod
    def from_dir(
        cls,
        directory: Path,
        root: str,
        include: Sequence[str] = DEFAULT_INCLUDE,
        exclude: Sequence[str] = (),
    ) -> SkillPackage:
        """The package in the working tree at ``directory`` (whose repo path is ``root``)."""
        files = {}
        for rel in walk_files(directory):
            if matches(rel, include, exclude):
                files[rel] = inputs.read_bytes(
                    directory / rel,
                    f"The skill package file {posixpath.join(root, rel)}",
                    max_bytes=inputs.SKILL_MAX_BYTES,
                    error=SkillDocumentError,
                )
        return cls(root, files)

    @classmethod
    def from_rev(
        cls,
        repo: SkillRepo,
        root: str,
        rev: str,
        include: Sequence[str] = DEFAULT_INCLUDE,
        exclude: Sequence[str] = (),
    ) -> SkillPackage:
        """The package as committed in ``rev``."""
        wanted = {
            rel: sha
            for rel, mode, sha in repo.list_entries(root, rev)
            if mode in REGULAR_MODES and matches(rel, include, exclude)
        }
        blobs = repo.read_blobs(list(wanted.values()))
        return cls(root, {rel: blobs[sha] for rel, sha in wanted.items()})


def package_globs(config: Config) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The configured skill's ``(include, exclude)`` globs (``include`` defaults to
    ``DEFAULT_INCLUDE``): which files of its directory are the package's text files."""
    return tuple(config.skill.include or DEFAULT_INCLUDE), tuple(config.skill.exclude)


def is_package_file(config: Config, name: str) -> bool:
    """True when package-relative ``name`` is a text file of the configured package."""
    return matches(name, *package_globs(config))


def load_package(
    config: Config, repo: SkillRepo | None = None, rev: str | None = None
) -> SkillPackage | None:
    """The configured skill's package (working tree, or ``rev`` of ``repo``), or None for a
    single-file skill."""
    directory = config.package_dir
    if directory is None:
        return None
    include, exclude = package_globs(config)
    if rev is not None and repo is not None:
        return SkillPackage.from_rev(repo, directory, rev, include, exclude)
    return SkillPackage.from_dir(config.root / directory, directory, include, exclude)


def bundle_files(text: str) -> dict[str, str] | None:
    """The files of a package bundle, or None when ``text`` is not one (a single-file skill's
    text). Only ``SkillPackage.bundle`` output is recognised: canonical JSON with the format
    tag, a ``SKILL.md`` and nothing else."""
    if not text.startswith(_BUNDLE_START):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or set(value) != {"files", "format"}:
        return None
    files = value["files"]
    if value["format"] != BUNDLE_FORMAT or not isinstance(files, dict) or SKILL_FILE not in files:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return None
    return files


def skill_file_text(skill: str) -> str:
    """SKILL.md's text of a skill version: the text itself, or a bundle's SKILL.md."""
    files = bundle_files(skill)
    return skill if files is None else files[SKILL_FILE]

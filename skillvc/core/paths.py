"""Every path skillvc reads from configuration or a patch resolves inside the work tree.

Invariant: ``inside_repo`` returns ``root / path`` only when ``path`` is relative, does not
climb out with ``..``, does not pass through a
symlink that leads out of ``root`` (or into ``.git/``), and names nothing under ``.git/`` or
``.skillvc/`` (case-insensitively, also the spellings macOS and Windows treat as ``.git``);
otherwise it raises ``PathOutsideRepo`` naming the setting and the path. It reads no file, so
a refused path's content is never seen.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path, PureWindowsPath

from skillvc.core.errors import PathOutsideRepo

STATE_DIR = ".skillvc"
# Code points HFS+ ignores in names (git's is_hfs_dotgit list): ".g\u200cit" is ".git" there.
_CONTROL = re.compile("[\x01-\x1f\x7f]")
_IGNORED = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")


def _is_git_dir(part: str) -> bool:
    # Windows drops trailing dots and spaces and knows ".git" by its short name "git~1".
    name = _IGNORED.sub("", part).rstrip(". ").lower()
    return name in (".git", "git~1")


def is_state_dir(name: str) -> bool:
    """True for a top-level name a case-insensitive file system (macOS, Windows) opens as
    ``.skillvc``: ``.SkillVC``, ``.skillvc.``, ``.skill\u200cvc``."""
    return _IGNORED.sub("", name).rstrip(". ").lower() == STATE_DIR


def _forbidden(parts: tuple[str, ...] | list[str]) -> bool:
    return any(_is_git_dir(p) for p in parts) or (bool(parts) and is_state_dir(parts[0]))


def refuse_control(path: str, key: str) -> None:
    """PathOutsideRepo when ``path`` holds a control character (a newline, a tab). git quotes
    such names and line-based protocols (cat-file --batch) split them, so a path with a
    newline would train and then be "missing" for check: every command refuses it first."""
    if _CONTROL.search(path):
        raise PathOutsideRepo(
            f"{key} names {path!r}, which holds a control character (a newline, tab or the like)."
        )


def inside_repo(root: Path, path: str, key: str) -> Path:
    """``root / path`` when ``path`` stays inside the work tree ``root``, else PathOutsideRepo.

    ``key`` names where the path came from, e.g. "[skill] path in skillvc.toml".
    """

    def refused(reason: str) -> PathOutsideRepo:
        return PathOutsideRepo(f"{key} names {path!r}, which {reason}.")

    text = str(path)
    if not text.strip() or "\0" in text:
        raise refused("is not a file path")
    if text.startswith(("/", "\\")) or os.path.isabs(text) or PureWindowsPath(text).drive:
        raise refused("is an absolute path")
    norm = posixpath.normpath(text.replace(os.sep, "/"))
    parts = norm.split("/")
    if parts[0] == "..":
        raise refused("leads out of the repository")
    if norm == ".":
        raise refused("is not a file path")
    if _forbidden(parts):
        raise refused("is under .git/ or .skillvc/")
    candidate = root / norm
    try:
        # Not strict: a missing file resolves as far as it exists, and the caller reports it.
        real = candidate.resolve()
        rel = real.relative_to(root.resolve())
    except ValueError:
        raise refused("passes through a symlink that leads out of the repository") from None
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        raise refused("is a symlink that cannot be resolved") from None
    if _forbidden(rel.parts):
        raise refused("is a symlink into .git/ or .skillvc/")
    return candidate

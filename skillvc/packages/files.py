"""Naming a package file from the command line (``skillvc blame FILE``).

A user names a file of the package relative to the package directory (``references/forms.md``,
what edits, prompts and errors call it), from the repository root, or from the current
directory; the first reading that names a file of the package wins. Nothing else resolves: a
path outside the package directory, or inside it but not a package file (no such file, or one
``include``/``exclude`` leave out), is ``NotAPackageFile``, one sentence naming the package.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Collection
from pathlib import Path

from skillvc.core.errors import NotAPackageFile


def readings(root: Path, package: str, given: str, cwd: Path) -> list[str]:
    """The repository-relative paths ``given`` may mean (normalised, posix), in the order
    they are tried: package-relative, from the current directory, from the repository root.
    A reading that leaves the repository starts with ``..``."""
    text = given.replace(os.sep, "/")
    out = []
    if not posixpath.isabs(text):
        out.append(posixpath.normpath(posixpath.join(package, text)) if package else text)
    here = Path(cwd, given)
    try:
        out.append(here.resolve().relative_to(root.resolve()).as_posix())
    except ValueError:
        out.append(posixpath.normpath(os.path.relpath(here, root).replace(os.sep, "/")))
    if not posixpath.isabs(text):
        out.append(text)
    return [posixpath.normpath(p) for p in dict.fromkeys(out)]


def package_file(
    root: Path, package: str, names: Collection[str], given: str, cwd: Path
) -> str | None:
    """The repository path of the package file ``given`` names, or None. ``package`` is the
    package directory ("" = the root), ``names`` its files (package-relative)."""
    prefix = f"{package}/" if package else ""
    for path in readings(root, package, given, cwd):
        if path.startswith(prefix) and path[len(prefix) :] in names:
            return path
    return None


def require_package_file(
    root: Path,
    package: str,
    names: Collection[str],
    given: str,
    cwd: Path,
    *,
    or_revision: bool = False,
) -> str:
    """``package_file``, or NotAPackageFile saying whether ``given`` lies outside the package
    or names no file of it (``or_revision``: nor a git revision, which it might have meant)."""
    found = package_file(root, package, names, given, cwd)
    if found is not None:
        return found
    where = package or "."
    shown = sorted(names)
    hint = "Name one of its files: " + ", ".join(shown[:6]) + (", ..." if len(shown) > 6 else "")
    prefix = f"{package}/" if package else ""
    for path in readings(root, package, given, cwd)[1:]:  # the package-relative one is inside
        outside = path == ".." or path.startswith("../") or not path.startswith(prefix)
        if outside and (path.startswith("..") or (root / path).exists()):
            raise NotAPackageFile(
                f"{given} is outside the skill package {where}/.", hint=hint + "."
            )
    if or_revision:
        raise NotAPackageFile(
            f"{given} is neither a file of the skill package {where}/ nor a git revision.",
            hint=hint + ", or a revision.",
        )
    raise NotAPackageFile(f"{given} is not a file of the skill package {where}/.", hint=hint + ".")

"""One file a harness installs beside SKILL.md, as model calls carry it (``PackageFile``).

It lives with the packages (below the model layer) because rendering a package for a call and
carrying its scripts build these; the backends only send them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from skillvc.core.hashing import sha256_hex


@dataclass(frozen=True)
class PackageFile:
    """One file a harness that installs the skill writes beside SKILL.md.

    Either a package *text* file (``text``: what training edits; the cache key holds its text,
    as it always has) or a *carried* file (``data``: a script, asset or binary installed byte
    for byte with its executable bit; the cache key and the event log hold its SHA-256, never
    its bytes, so a changed script is a new call and an unchanged one is answered from the log
    without a copy of it in every event). ``path`` is package-relative and posix.
    """

    path: str
    text: str | None = None
    data: bytes | None = field(default=None, repr=False)
    executable: bool = False

    def __post_init__(self) -> None:
        if (self.text is None) == (self.data is None):
            raise ValueError("a PackageFile holds either text or data")

    @property
    def content(self) -> bytes:
        """The bytes to write."""
        return self.data if self.data is not None else (self.text or "").encode("utf-8")

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the bytes (computed once: a carried file goes out with every call)."""
        return sha256_hex(self.content)

    def key(self) -> list[Any]:
        """This file in a call's cache key: ``[path, text]`` for a text file (the form keys
        had before carried files existed), ``[path, {"sha256", "executable"}]`` otherwise."""
        if self.text is not None:
            return [self.path, self.text]
        return [self.path, {"executable": self.executable, "sha256": self.digest}]

    def record(self) -> Any:
        """This file in a ``model.call`` event: its text, or the carried file's hash, size and
        executable bit (the bytes are in the repository at the version evaluated)."""
        if self.text is not None:
            return self.text
        return {"bytes": len(self.content), "executable": self.executable, "sha256": self.digest}

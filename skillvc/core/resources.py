"""Files shipped with skillvc: ``templates/`` and ``hooks/``.

In the wheel they live inside the package (``skillvc/templates``, ``skillvc/hooks``, see
pyproject.toml); in a source checkout they sit at the repository top, next to the package.
Both layouts are read through ``importlib.resources`` first, so an installed skillvc never
depends on a checkout.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

if sys.version_info >= (3, 11):
    from importlib.resources.abc import Traversable
else:  # pragma: no cover - Python 3.10
    from importlib.abc import Traversable

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # skillvc/, above core/


def resource_dir(kind: str) -> Traversable:
    """The shipped ``templates`` or ``hooks`` directory."""
    if kind not in ("templates", "hooks"):
        raise ValueError(f"unknown resource kind {kind!r}")
    packaged = resources.files("skillvc").joinpath(kind)
    if packaged.is_dir():
        return packaged
    return _PACKAGE_DIR.parent / kind  # source checkout / editable install


def read_text(kind: str, name: str) -> str:
    """The text of one shipped file, e.g. ``read_text("templates", "skillvc.toml")``."""
    node = resource_dir(kind)
    for part in name.split("/"):
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8")


def read_bytes(kind: str, name: str) -> bytes:
    node = resource_dir(kind)
    for part in name.split("/"):
        node = node.joinpath(part)
    return node.read_bytes()

"""Stable ids from content: canonical JSON (sorted keys, fixed separators) hashed with SHA-256.

Identical things (edits, skill versions, model calls) get identical ids, so they dedupe by
construction and a resumed run finds the very records an uninterrupted run would have made.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace; unicode kept as is."""
    # NaN and infinities are not JSON; SQLite's JSON functions (and so every view) reject them.
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def content_id(value: Any, length: int = 16) -> str:
    """A short stable id for any JSON-able value (prefix of the SHA-256 of its canonical JSON)."""
    return sha256_hex(canonical_json(value))[:length]

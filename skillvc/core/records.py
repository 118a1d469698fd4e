"""Plain-dict views of records (the keys of ``--json`` output and of event payloads)."""

from __future__ import annotations

from typing import Any


def fields_of(record: object, names: str) -> dict[str, Any]:
    """``record``'s attributes named in ``names`` (separated by white space), in that order."""
    return {name: getattr(record, name) for name in names.split()}

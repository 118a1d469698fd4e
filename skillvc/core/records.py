"""Plain-dict views of records (the keys of ``--json`` output and of event payloads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def fields_of(record: object, names: str) -> dict[str, Any]:
    """``record``'s attributes named in ``names`` (separated by white space), in that order."""
    return {name: getattr(record, name) for name in names.split()}


def entries_of(mapping: Mapping[str, Any], names: str) -> dict[str, Any]:
    """``mapping``'s values of the keys named in ``names`` (separated by white space)."""
    return {name: mapping[name] for name in names.split()}

"""The shapes the tool loop shares with backends and tool sources.

A conversation with tools is a list of messages in one provider-neutral form, which each
backend translates to its own wire format (``skillvc.models.backends``):

- ``{"role": "system" | "user", "content": str}`` (a user message's ``content`` may instead be
  a list of parts: ``{"type": "text", "text": ...}`` and ``{"type": "image", "media_type":
  "image/png", "data": <base64>}``);
- ``{"role": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments"}]}``
  (``tool_calls`` only when the turn called tools; ``arguments`` is the JSON text as sent);
- ``{"role": "tool", "tool_call_id": str, "name": str, "content": str, "is_error": bool}``.

A backend given ``CallRequest.tools`` (``ToolSpec.as_dict()`` each) offers them in its native
format and reports the calls of the answer in ``CallResult.meta["tool_calls"]`` (the same
``{"id", "name", "arguments"}`` dicts), never as text.

Invariant: a tool's identity is the hash of its name, description and parameter schema, so a
changed tool misses the log's cache and an unchanged one hits it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skillvc.core.hashing import content_id


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the model sees it."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )  # a JSON Schema object

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }

    def identity(self) -> str:
        return content_id(self.as_dict(), length=16)


@dataclass(frozen=True)
class ToolCall:
    """One call a model asked for: ``arguments`` is its JSON text, unparsed."""

    id: str
    name: str
    arguments: str

    def as_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call gave back to the model: its result as text, or a one-line reason it
    failed (``is_error``). A tool's misbehaviour is an outcome, never an exception."""

    content: str
    is_error: bool = False


class ToolSource(Protocol):
    """Where tools come from (a Python module, an MCP server, the code tool).

    ``specs`` lists the source's tools (asked once, at start); ``call`` runs one with parsed,
    schema-checked arguments in ``workdir`` (the rollout's scratch directory) and returns its
    raw result or raises; the ``Toolbox`` turns raises, hangs and oversized results into
    ``ToolOutcome`` errors. ``fingerprint`` is what, besides the specs, changes the source's
    answers (a module's file hash, a server's argv). ``close`` ends what the source started.
    """

    def specs(self) -> Sequence[ToolSpec]: ...

    def call(
        self, name: str, arguments: Mapping[str, Any], *, workdir: Path, timeout_s: float
    ) -> Any: ...

    def fingerprint(self) -> Mapping[str, Any]: ...

    def close(self) -> None: ...

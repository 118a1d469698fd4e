"""The model backend contract.

A backend turns one ``CallRequest`` (model, messages, parameters) into one ``CallResult``. It
knows nothing about caching, events or retries: ``skillvc.models.calls.ModelClient`` does those for
every backend alike. A backend signals failures with exceptions only:

- ``TransientError`` — worth retrying (429, 5xx, timeouts, dropped connections); may carry the
  server's ``Retry-After`` in seconds;
- ``AuthenticationFailed`` — stops the run at the first call;
- ``BackendError`` — anything else that retrying cannot fix.

Error messages never contain API keys (use ``skillvc.core.errors.redact``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from skillvc.core.errors import BackendError
from skillvc.core.hashing import content_id, sha256_hex


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


@dataclass(frozen=True)
class CallRequest:
    role: str  # target | optimizer | judge | doctor
    model: str  # full model string, e.g. "openai:gpt-4o-mini"
    messages: tuple[Mapping[str, str], ...]  # [{"role": "system"|"user"|"assistant", "content"}]
    params: Mapping[str, Any] = field(default_factory=dict)  # temperature, max_tokens, seed, ...
    sample: int = 0  # index of a repeated sample of the same prompt
    # A skill package's other files (text and carried), which a harness that installs the
    # skill writes beside SKILL.md (the system text), sorted by path; empty for other calls.
    files: tuple[PackageFile, ...] = ()

    @property
    def key(self) -> str:
        """The cache key: same (model, params, messages, sample, files) -> same answer from
        the log. ``files`` counts only when there are some, so other keys are as they were;
        a carried file counts by its hash (``PackageFile.key``)."""
        identity: dict[str, Any] = {
            "model": self.model,
            "params": dict(self.params),
            "messages": [dict(m) for m in self.messages],
            "sample": self.sample,
        }
        if self.files:
            identity["files"] = [f.key() for f in self.files]
        return content_id(identity, length=32)

    @property
    def system(self) -> str:
        return "\n\n".join(m["content"] for m in self.messages if m["role"] == "system")

    @property
    def user(self) -> str:
        return "\n\n".join(m["content"] for m in self.messages if m["role"] == "user")


@dataclass(frozen=True)
class CallResult:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    meta: Mapping[str, Any] = field(default_factory=dict)  # finish_reason, exit code, stderr...
    cost_usd: float | None = None  # the backend's own report (an agent CLI's); wins over prices
    # Provider prompt caching: input tokens read from the provider's cache and written to it
    # (Anthropic). Both are part of ``prompt_tokens``, which counts every input token.
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class TransientError(BackendError):
    """A failure worth retrying (rate limit, server error, timeout, dropped connection)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@runtime_checkable
class Backend(Protocol):
    """One configured model. ``complete`` must be safe to call from several threads."""

    model: str

    def complete(self, request: CallRequest) -> CallResult: ...

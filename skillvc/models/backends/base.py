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
from skillvc.core.hashing import content_id
from skillvc.packages.packagefile import PackageFile


@dataclass(frozen=True)
class CallRequest:
    role: str  # target | optimizer | judge | doctor
    model: str  # full model string, e.g. "openai:gpt-4o-mini"
    # [{"role": "system"|"user"|"assistant", "content"}]; with tools, also assistant turns'
    # tool calls and tool results, in the neutral form of ``skillvc.models.tools.spec``.
    messages: tuple[Mapping[str, Any], ...]
    params: Mapping[str, Any] = field(default_factory=dict)  # temperature, max_tokens, seed, ...
    sample: int = 0  # index of a repeated sample of the same prompt
    # A skill package's other files (text and carried), which a harness that installs the
    # skill writes beside SKILL.md (the system text), sorted by path; empty for other calls.
    files: tuple[PackageFile, ...] = ()
    # Tools offered to the model (``ToolSpec.as_dict()`` each): the backend sends them in its
    # native format and reports the answer's calls in ``CallResult.meta["tool_calls"]``.
    tools: tuple[Mapping[str, Any], ...] = ()
    # A library of skills (``<name>/SKILL.md`` each, text) that an agent harness installs side
    # by side where its CLI looks for skills, with no skill in the system text: routing read
    # from the agent's own activation (``skillvc.routing.measure``). Empty for other calls.
    library: tuple[PackageFile, ...] = ()

    @functools.cached_property
    def key(self) -> str:
        """The cache key: same (model, params, messages, sample, files, tools, library) -> same
        answer from the log. ``files`` (``tools``, ``library``) count only when there are some,
        so other keys are as they were;
        a carried file counts by its hash (``PackageFile.key``). Computed once: a request is
        frozen, and hashing its canonical JSON was a tenth of a simulated run's CPU."""
        identity: dict[str, Any] = {
            "model": self.model,
            "params": dict(self.params),
            "messages": [dict(m) for m in self.messages],
            "sample": self.sample,
        }
        if self.files:
            identity["files"] = [f.key() for f in self.files]
        if self.tools:
            identity["tools"] = [dict(t) for t in self.tools]
        if self.library:
            identity["library"] = [f.key() for f in self.library]
        return content_id(identity, length=32)

    @property
    def system(self) -> str:
        return "\n\n".join(text_of(m) for m in self.messages if m["role"] == "system")

    @property
    def user(self) -> str:
        return "\n\n".join(text_of(m) for m in self.messages if m["role"] == "user")


def text_of(message: Mapping[str, Any]) -> str:
    """A message's text: its content, or the text parts of a list of parts (images left out)."""
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


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

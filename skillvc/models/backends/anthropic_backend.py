"""``anthropic:<model>``: the Anthropic Messages API.

Configuration rules:

- Key: the environment variable named by ``api_key_env``, else ``ANTHROPIC_API_KEY``. It is
  always passed explicitly, so the SDK never falls back to profiles or federation files on
  disk. A missing key raises ``AuthenticationFailed`` at the first call, not at construction.
- Base URL: ``base_url``, else ``ANTHROPIC_BASE_URL``, else the SDK default.
- Messages: every ``system`` message is joined (blank line between) into the top-level
  ``system`` parameter, the Anthropic way; user and assistant messages keep their order.
- Parameters: ``max_tokens`` is required by the API (4096 when unset); ``temperature`` is sent
  in the request body (this SDK version has no keyword for it); ``reasoning_effort`` becomes
  ``output_config.effort``; ``seed`` has no Anthropic equivalent and is not sent (it still
  separates cache entries).
- The answer is every text block of the reply, concatenated.
- Tools (``CallRequest.tools``) are sent as ``tools`` (``input_schema`` = the parameter
  schema) and the neutral tool conversation of ``skillvc.models.tools.spec`` as content
  blocks: an assistant turn's text (when it has any) and a ``tool_use`` block per call, whose
  ``input`` is the call's arguments parsed; arguments that are not a JSON object (a call read
  leniently from another model's text, say) are sent as ``{}``, since Anthropic takes only an
  object there and the tool loop has already answered such a call with an error result.
  Consecutive tool results become one user message of ``tool_result`` blocks (``is_error``
  as given), and image parts ``image`` blocks of base64 source. The reply's ``tool_use``
  blocks are ``meta["tool_calls"]`` (arguments = ``json.dumps(input)``, keys as sent) whenever
  tools were offered. A request without tools or parts goes out as before tools existed.
- Prompt caching: a system prompt (the skill, the stable prefix of every rollout) long enough
  to be cached (``MIN_CACHEABLE_TOKENS`` for the model's family, estimated at 4 characters a
  token) is sent as one text block marked ``cache_control: ephemeral`` (5 minutes); a shorter
  one is sent as a plain string, as before. An optimizer prompt whose part before its cases
  (``skillvc.models.prompts.cache_point``) is that long, with the system prompt, has a cache
  point there too: its user message is sent as two text blocks, the first marked. The cache
  key of ``skillvc.models.calls`` is computed from the request's messages and parameters, not
  from this body, so it does not change. Usage:
  Anthropic's ``input_tokens`` excludes cache reads and writes; ``prompt_tokens`` adds them back
  (every input token, as OpenAI counts), with ``cached_tokens`` and ``cache_write_tokens``.

Invariants: the SDK's own retries are off (``max_retries=0``), so ``skillvc.models.calls`` owns the
retry policy; failures leave as ``TransientError``, ``AuthenticationFailed`` or
``BackendError`` with the key redacted; one SDK client per backend, created lazily under a
lock (SDK clients are thread-safe).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import anthropic

from skillvc.core.config import ModelConfig
from skillvc.models.backends.base import CallRequest, CallResult, TransientError
from skillvc.models.backends.retry import backend_sdk_errors, require_key
from skillvc.models.prompts import cache_point

DEFAULT_MAX_TOKENS = 4096
KEY_HINT = (
    "Export the key (e.g. export {var}=...), or name another variable with api_key_env in "
    "skillvc.toml."
)

# Minimum cacheable prompt length in tokens per model family (Anthropic prompt caching docs):
# shorter prefixes are processed without caching even when marked, so marking them only
# changes the request body. First match wins; unknown models use the most common minimum.
MIN_CACHEABLE_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-sonnet-4-6", 2048),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
DEFAULT_MIN_CACHEABLE_TOKENS = 1024  # Sonnet 4.5, 4, 3.7, Opus 4.1, 4
CHARS_PER_TOKEN = 4  # a cheap estimate; English prose runs 3.5-4.5 characters a token


def min_cacheable_tokens(name: str) -> int:
    """The minimum cacheable prompt length of model ``name`` (without the provider prefix)."""
    for prefix, tokens in MIN_CACHEABLE_TOKENS:
        if name.startswith(prefix):
            return tokens
    return DEFAULT_MIN_CACHEABLE_TOKENS


def cache_usage(usage: Any) -> tuple[int, int, int]:
    """(every input token, cache reads, cache writes) of an Anthropic ``usage`` object."""
    read = getattr(usage, "cache_read_input_tokens", 0) or 0
    write = getattr(usage, "cache_creation_input_tokens", 0) or 0
    return (getattr(usage, "input_tokens", 0) or 0) + read + write, read, write


class AnthropicBackend:
    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.model = config.model
        self.name = config.model.split(":", 1)[1] if ":" in config.model else config.model
        self.key_env = config.api_key_env or "ANTHROPIC_API_KEY"
        self._client: anthropic.Anthropic | None = None
        self._key = ""
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: ModelConfig) -> AnthropicBackend:
        return cls(config)

    @property
    def base_url(self) -> str | None:
        return self.config.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None

    def warm(self) -> None:
        """Build the SDK's client ahead of the first call (see ``OpenAIBackend.warm``)."""
        _ = self._get_client().messages

    def _get_client(self) -> anthropic.Anthropic:
        with self._lock:
            if self._client is None:
                key = require_key(self.key_env, KEY_HINT.format(var=self.key_env))
                self._key = key
                self._client = anthropic.Anthropic(
                    api_key=key,
                    base_url=self.base_url,
                    timeout=self.config.timeout_s,
                    max_retries=0,
                )
            return self._client

    def _arguments(self, request: CallRequest) -> dict[str, Any]:
        p = request.params
        args: dict[str, Any] = {
            "model": self.name,
            "max_tokens": p.get("max_tokens") or DEFAULT_MAX_TOKENS,
            "messages": anthropic_messages(m for m in request.messages if m["role"] != "system"),
        }
        if request.tools:
            args["tools"] = anthropic_tools(request.tools)
        system = request.system
        minimum = CHARS_PER_TOKEN * min_cacheable_tokens(self.name)
        last = args["messages"][-1] if args["messages"] else None
        plain = last is not None and last["role"] == "user" and isinstance(last["content"], str)
        cut = cache_point(last["content"]) if last is not None and plain else None
        if last is not None and cut is not None and len(system) + cut >= minimum:
            # An optimizer prompt's shared part (rules, skill, rejected edits, ...; the same in
            # every minibatch of a step) is a cache point of its own, before the cases.
            text = last["content"]
            last["content"] = [
                {"type": "text", "text": text[:cut], "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": text[cut:]},
            ]
        if system and len(system) >= minimum:
            args["system"] = [
                {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
            ]
        elif system:
            args["system"] = system
        if p.get("reasoning_effort") is not None:
            args["output_config"] = {"effort": p["reasoning_effort"]}
        if p.get("temperature") is not None:
            args["extra_body"] = {"temperature": p["temperature"]}
        return args

    def complete(self, request: CallRequest) -> CallResult:
        client = self._get_client()
        start = time.perf_counter()
        with backend_sdk_errors(anthropic, anthropic.AnthropicError, self):
            response = client.messages.create(**self._arguments(request))
        latency_ms = (time.perf_counter() - start) * 1000.0
        content = getattr(response, "content", None)
        if not isinstance(content, list):
            raise TransientError(f"{self.model} answered without message content.")
        text = "".join(block.text for block in content if getattr(block, "type", None) == "text")
        calls = [
            {
                "id": getattr(block, "id", "") or "",
                "name": getattr(block, "name", "") or "",
                "arguments": json.dumps(getattr(block, "input", None) or {}),
            }
            for block in content
            if getattr(block, "type", None) == "tool_use"
        ]
        usage = getattr(response, "usage", None)
        prompt_tokens, cached, written = cache_usage(usage)
        return CallResult(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=(getattr(usage, "output_tokens", 0) or 0),
            latency_ms=latency_ms,
            meta={"finish_reason": getattr(response, "stop_reason", None)}
            | ({"tool_calls": calls} if request.tools or calls else {}),
            cached_tokens=cached,
            cache_write_tokens=written,
        )


# -- the wire format: the neutral conversation (skillvc.models.tools.spec) as content blocks


def anthropic_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages API messages (system messages already taken out); a plain message is
    ``{"role", "content"}`` as it always was."""
    out: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the blocks of the tool results being joined
    for m in messages:
        role, content = m["role"], m.get("content")
        if role == "tool":
            if results is None:  # the first result of a turn opens its user message
                results = []
                out.append({"role": "user", "content": results})
            results.append(
                {
                    "type": "tool_result",
                    "tool_use_id": m["tool_call_id"],
                    "content": content,
                    "is_error": bool(m.get("is_error", False)),
                }
            )
            continue
        results = None
        if role == "assistant" and m.get("tool_calls"):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
            blocks += [
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": tool_input(c)}
                for c in m["tool_calls"]
            ]
            out.append({"role": "assistant", "content": blocks})
        elif isinstance(content, list):
            out.append({"role": role, "content": [_part(p) for p in content]})
        else:
            out.append({"role": role, "content": content})
    return out


def tool_input(call: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as the object ``tool_use`` takes (``{}`` when they are not one)."""
    try:
        value = json.loads(call.get("arguments") or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _part(part: Mapping[str, Any]) -> dict[str, Any]:
    if part.get("type") == "image":
        source = {"type": "base64", "media_type": part["media_type"], "data": part["data"]}
        return {"type": "image", "source": source}
    return {"type": "text", "text": part.get("text", "")}


def anthropic_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
        for t in tools
    ]

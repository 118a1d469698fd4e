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

Invariants: the SDK's own retries are off (``max_retries=0``), so ``skillvc.calls`` owns the
retry policy; failures leave as ``TransientError``, ``AuthenticationFailed`` or
``BackendError`` with the key redacted; one SDK client per backend, created lazily under a
lock (SDK clients are thread-safe).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import anthropic

from skillvc.backends.base import CallRequest, CallResult, TransientError
from skillvc.backends.retry import require_key, translated_sdk_errors
from skillvc.config import ModelConfig

DEFAULT_MAX_TOKENS = 4096
KEY_HINT = (
    "Export the key (e.g. export {var}=...), or name another variable with api_key_env in "
    "skillvc.toml."
)


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
            "messages": [
                {"role": m["role"], "content": m["content"]}
                for m in request.messages
                if m["role"] != "system"
            ],
        }
        if request.system:
            args["system"] = request.system
        if p.get("reasoning_effort") is not None:
            args["output_config"] = {"effort": p["reasoning_effort"]}
        if p.get("temperature") is not None:
            args["extra_body"] = {"temperature": p["temperature"]}
        return args

    def complete(self, request: CallRequest) -> CallResult:
        client = self._get_client()
        start = time.perf_counter()
        with translated_sdk_errors(
            anthropic,
            anthropic.AnthropicError,
            model=self.model,
            timeout_s=self.config.timeout_s,
            key=self._key,
            key_env=self.key_env,
        ):
            response = client.messages.create(**self._arguments(request))
        latency_ms = (time.perf_counter() - start) * 1000.0
        content = getattr(response, "content", None)
        if not isinstance(content, list):
            raise TransientError(f"{self.model} answered without message content.")
        text = "".join(block.text for block in content if getattr(block, "type", None) == "text")
        usage = getattr(response, "usage", None)
        return CallResult(
            text=text,
            prompt_tokens=(getattr(usage, "input_tokens", 0) or 0),
            completion_tokens=(getattr(usage, "output_tokens", 0) or 0),
            latency_ms=latency_ms,
            meta={"finish_reason": getattr(response, "stop_reason", None)},
        )

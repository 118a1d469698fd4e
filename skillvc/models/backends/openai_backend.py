"""``openai:<model>``: OpenAI Chat Completions, OpenAI-compatible servers and Azure OpenAI.

Configuration rules (documented for users in ``skillvc doctor``'s hints):

- Key: the environment variable named by ``api_key_env``, else ``OPENAI_API_KEY``
  (``AZURE_OPENAI_API_KEY`` for Azure). A missing key raises ``AuthenticationFailed`` at the
  first call, never at construction, so ``skillvc doctor`` can construct and report it;
  except on a loopback base URL (localhost, 127.0.0.0/8, ::1), which gets the placeholder
  ``local`` when no key is set (``uses_placeholder_key``).
- Base URL: ``base_url``, else ``OPENAI_BASE_URL``, else the SDK default. This is how vLLM,
  Ollama, LM Studio and LiteLLM are used (they accept any placeholder key).
- Azure: exactly when ``azure = true``; no environment variable switches it on, so a stray
  ``AZURE_OPENAI_ENDPOINT`` in a shell never reroutes an OpenAI run. Endpoint:
  ``azure_endpoint`` else ``AZURE_OPENAI_ENDPOINT``; API version: ``api_version`` else
  ``AZURE_OPENAI_API_VERSION`` else ``OPENAI_API_VERSION``; deployment: ``deployment`` else
  the model name. ``base_url`` is not used for Azure.
- Token limit: reasoning models (o1/o3/o4..., gpt-5...) get ``max_completion_tokens`` and no
  ``temperature`` (they reject both ``max_tokens`` and any temperature but the default);
  every other model gets ``max_tokens``, which OpenAI-compatible servers understand.
- A local server (llama.cpp, Ollama, vLLM: ``skillvc.models.backends.local`` asks it, once) gets a
  CPU-sized timeout (``LOCAL_TIMEOUT_S``) unless ``timeout_s`` was changed from its default,
  its answers are marked ``local`` (free unless ``[prices]`` prices the model), and a request's
  ``response_format`` (a JSON Schema) is passed on.
- API: Chat Completions (``POST /chat/completions``) unless ``api = "responses"``, which
  sends the same conversation to the Responses API (``POST /responses``: ``input`` items,
  ``max_output_tokens``, ``reasoning.effort``, ``text.format``; ``seed`` has no equivalent there
  and is not sent; ``store`` is false, as skillvc sends the whole conversation every time).
  Not for Azure (refused when the config loads).
- Tools (``CallRequest.tools``) and the neutral tool conversation of
  ``skillvc.models.tools.spec`` go out in each API's function-calling format: Chat
  Completions' ``tools``/``tool_calls``/``role: tool`` messages, the Responses API's
  ``function_call``/``function_call_output`` items (``strict: false``, so a schema need not
  list every property as required). OpenAI has no error flag for a tool result: its
  ``is_error`` is left to the result's text. Image parts become data-URL image parts. The
  answer's calls are ``meta["tool_calls"]`` (with the API's ``finish_reason``) whenever tools
  were offered; a request without tools or parts goes out exactly as before tools existed.

Invariants: the SDK's own retries are off (``max_retries=0``), so ``skillvc.models.calls`` owns the
retry policy; every failure leaves as ``TransientError``, ``AuthenticationFailed`` or
``BackendError`` with the key redacted from its message; one SDK client per backend, created
lazily under a lock (SDK clients are thread-safe).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import openai
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from skillvc.core.config import ModelConfig
from skillvc.core.errors import ConfigError
from skillvc.models.backends.base import CallRequest, CallResult, TransientError
from skillvc.models.backends.local import (
    LOCAL_TIMEOUT_S,
    PLACEHOLDER_KEY,
    ServerInfo,
    is_loopback,
    probe,
)
from skillvc.models.backends.retry import require_key, translated_sdk_errors

DEFAULT_TIMEOUT_S = ModelConfig().timeout_s
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")
KEY_HINT = (
    "Export the key (e.g. export {var}=...), or name another variable with api_key_env in "
    "skillvc.toml (a server on this machine, at localhost or 127.0.0.1, needs none)."
)


def is_reasoning_model(name: str) -> bool:
    return bool(_REASONING_MODEL.match(name.rsplit("/", 1)[-1]))


class OpenAIBackend:
    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.model = config.model
        self.name = config.model.split(":", 1)[1] if ":" in config.model else config.model
        self.azure = config.azure
        self.key_env = config.api_key_env or (
            "AZURE_OPENAI_API_KEY" if self.azure else "OPENAI_API_KEY"
        )
        self._client: openai.OpenAI | None = None
        self._key = ""
        self._lock = threading.Lock()
        self._server: ServerInfo | None = None
        self._probed = False
        self._probe_lock = threading.Lock()  # apart: _make_client asks it under _lock

    @classmethod
    def from_config(cls, config: ModelConfig) -> OpenAIBackend:
        return cls(config)

    @property
    def deployment(self) -> str:
        return self.config.deployment or self.name

    # The resolution rules of the module docstring, in one place (``skillvc doctor`` reports
    # exactly what the client will use).

    @property
    def base_url(self) -> str | None:
        return self.config.base_url or os.environ.get("OPENAI_BASE_URL") or None

    @property
    def azure_endpoint(self) -> str | None:
        return self.config.azure_endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT") or None

    @property
    def api_version(self) -> str | None:
        return (
            self.config.api_version
            or os.environ.get("AZURE_OPENAI_API_VERSION")
            or os.environ.get("OPENAI_API_VERSION")
            or None
        )

    @property
    def uses_placeholder_key(self) -> bool:
        """No key is set and the server is on this machine: a placeholder key goes there."""
        return not self.azure and not os.environ.get(self.key_env) and is_loopback(self.base_url)

    def server_info(self) -> ServerInfo | None:
        """What the local server at ``base_url`` says about itself (asked once; None for
        Azure, the default OpenAI address, or a server that does not say)."""
        with self._probe_lock:
            if not self._probed:
                self._probed = True
                url = None if self.azure else self.base_url
                if url is not None:
                    key = os.environ.get(self.key_env, "").strip()
                    headers = {"Authorization": f"Bearer {key}"} if key else {}
                    self._server = probe(url, self.name, headers)
            return self._server

    @property
    def timeout_s(self) -> float:
        """The call timeout: a local server's is CPU-sized unless timeout_s was set."""
        if self.config.timeout_s == DEFAULT_TIMEOUT_S and self.server_info() is not None:
            return LOCAL_TIMEOUT_S
        return self.config.timeout_s

    def warm(self) -> None:
        """Do ahead of the first call what it would do first: ask a local server what it
        is and build the SDK's client (its TLS context: tens of milliseconds)."""
        self.server_info()
        self._get_client()

    def _get_client(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                self._client = self._make_client()
            return self._client

    def _make_client(self) -> openai.OpenAI:
        key = PLACEHOLDER_KEY if self.uses_placeholder_key else ""
        key = key or require_key(self.key_env, KEY_HINT.format(var=self.key_env))
        self._key = "" if self.uses_placeholder_key else key  # a placeholder is no secret
        c = self.config
        if self.azure:
            endpoint, version = self.azure_endpoint, self.api_version
            if not endpoint or not version:
                missing = "azure_endpoint" if not endpoint else "api_version"
                raise ConfigError(
                    f"{self.model} has azure = true but no {missing}.",
                    hint="Set azure_endpoint and api_version in skillvc.toml, or export "
                    "AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_VERSION.",
                )
            return openai.AzureOpenAI(
                azure_endpoint=endpoint,
                azure_deployment=self.deployment,
                api_version=version,
                api_key=key,
                timeout=c.timeout_s,
                max_retries=0,
            )
        return openai.OpenAI(
            api_key=key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0
        )

    def _params(self, request: CallRequest) -> dict[str, Any]:
        p = request.params
        out: dict[str, Any] = {}
        # The model name, not the deployment: Azure deployments are often named freely.
        reasoning = is_reasoning_model(self.name)
        if p.get("temperature") is not None and not reasoning:
            out["temperature"] = p["temperature"]
        if p.get("max_tokens") is not None:
            out["max_completion_tokens" if reasoning else "max_tokens"] = p["max_tokens"]
        for name in ("seed", "reasoning_effort", "response_format"):
            if p.get(name) is not None:
                out[name] = p[name]
        return out

    def _responses_params(self, request: CallRequest) -> dict[str, Any]:
        """``_params`` under the Responses API's names (``seed`` has no equivalent there)."""
        p = request.params
        out: dict[str, Any] = {}
        reasoning = is_reasoning_model(self.name)
        if p.get("temperature") is not None and not reasoning:
            out["temperature"] = p["temperature"]
        if p.get("max_tokens") is not None:
            out["max_output_tokens"] = p["max_tokens"]
        if p.get("reasoning_effort") is not None:
            out["reasoning"] = {"effort": p["reasoning_effort"]}
        if p.get("response_format") is not None:
            out["text"] = {"format": text_format(p["response_format"])}
        return out

    def chat_body(self, request: CallRequest) -> dict[str, Any]:
        """The Chat Completions body of ``request``."""
        body: dict[str, Any] = {
            "model": self.deployment if self.azure else self.name,
            "messages": chat_messages(request.messages),
            **self._params(request),
        }
        if request.tools:
            body["tools"] = chat_tools(request.tools)
        return body

    def responses_body(self, request: CallRequest) -> dict[str, Any]:
        """The Responses API body of ``request``."""
        body: dict[str, Any] = {
            "model": self.name,
            "input": responses_input(request.messages),
            "store": False,
            **self._responses_params(request),
        }
        if request.tools:
            body["tools"] = responses_tools(request.tools)
        return body

    def complete(self, request: CallRequest) -> CallResult:
        responses = self.config.api == "responses"
        if responses and self.azure:
            raise ConfigError(
                f'{self.model} has azure = true and api = "responses"; skillvc sends Azure '
                "requests through Chat Completions only.",
                hint='Remove api = "responses" for this model.',
            )
        server = self.server_info()
        client = self._get_client()
        start = time.perf_counter()
        with translated_sdk_errors(
            openai,
            openai.OpenAIError,
            model=self.model,
            timeout_s=self.timeout_s,
            key=self._key,
            key_env=self.key_env,
        ):
            # The SDK's documented way to send a request as given: the typed ``create`` first
            # walks every message through its TypedDict transform, 30 % of a call's CPU (1.6 of
            # 5.5 ms on a 2-core machine), which a wave of 16 calls pays one after another.
            # Our body is plain JSON already; the answer is parsed into the same type.
            response: Any
            if responses:
                response = client.post(
                    "/responses", cast_to=Response, body=self.responses_body(request)
                )
            else:
                response = client.post(
                    "/chat/completions", cast_to=ChatCompletion, body=self.chat_body(request)
                )
        latency_ms = (time.perf_counter() - start) * 1000.0
        local = {"local": True, "server": server.server} if server is not None else {}
        if responses:
            return self._responses_result(request, response, latency_ms, local)
        choices = getattr(response, "choices", None)
        if not choices:
            # A gateway that answers 200 with no choices is having a bad moment, not a verdict.
            raise TransientError(f"{self.model} answered without any choices.")
        choice = choices[0]
        message = getattr(choice, "message", None)
        usage = getattr(response, "usage", None)
        # OpenAI caches prompts of 1024+ tokens by itself; prompt_tokens includes the cached.
        details = getattr(usage, "prompt_tokens_details", None)
        calls = chat_tool_calls(message)
        return CallResult(
            text=getattr(message, "content", None) or "",
            prompt_tokens=(usage.prompt_tokens or 0) if usage else 0,
            completion_tokens=(usage.completion_tokens or 0) if usage else 0,
            latency_ms=latency_ms,
            meta={"finish_reason": getattr(choice, "finish_reason", None)}
            | ({"tool_calls": calls} if request.tools or calls else {})
            | local,
            cached_tokens=(getattr(details, "cached_tokens", 0) or 0),
        )

    def _responses_result(
        self, request: CallRequest, response: Any, latency_ms: float, local: dict[str, Any]
    ) -> CallResult:
        output = getattr(response, "output", None)
        if not isinstance(output, list):
            raise TransientError(f"{self.model} answered without any output.")
        texts: list[str] = []
        calls: list[dict[str, str]] = []
        for item in output:
            kind = getattr(item, "type", None)
            if kind == "message":
                for part in getattr(item, "content", None) or ():
                    if getattr(part, "type", None) == "output_text":
                        texts.append(getattr(part, "text", "") or "")
            elif kind == "function_call":
                calls.append(
                    {
                        "id": getattr(item, "call_id", None) or f"call_{len(calls)}",
                        "name": getattr(item, "name", "") or "",
                        "arguments": arguments_text(getattr(item, "arguments", None)),
                    }
                )
        usage = getattr(response, "usage", None)
        details = getattr(usage, "input_tokens_details", None)
        return CallResult(
            text="".join(texts),
            prompt_tokens=(getattr(usage, "input_tokens", 0) or 0),
            completion_tokens=(getattr(usage, "output_tokens", 0) or 0),
            latency_ms=latency_ms,
            meta={"finish_reason": responses_finish_reason(response, calls)}
            | ({"tool_calls": calls} if request.tools or calls else {})
            | local,
            cached_tokens=(getattr(details, "cached_tokens", 0) or 0),
        )


# -- the wire formats: the neutral conversation (skillvc.models.tools.spec) in each API's shape


def data_url(part: Mapping[str, Any]) -> str:
    """An image part as a data URL."""
    return f"data:{part['media_type']};base64,{part['data']}"


def chat_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages; a plain message is ``{"role", "content"}`` as it always was."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role, content = m["role"], m.get("content")
        if role == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": content})
        elif role == "assistant" and m.get("tool_calls"):
            calls = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in m["tool_calls"]
            ]
            # Chat Completions wants null, not "", beside tool calls without text.
            out.append({"role": "assistant", "content": content or None, "tool_calls": calls})
        elif isinstance(content, list):
            out.append({"role": role, "content": [_chat_part(p) for p in content]})
        else:
            out.append({"role": role, "content": content})
    return out


def _chat_part(part: Mapping[str, Any]) -> dict[str, Any]:
    if part.get("type") == "image":
        return {"type": "image_url", "image_url": {"url": data_url(part)}}
    return {"type": "text", "text": part.get("text", "")}


def chat_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t["description"],
                "parameters": t["parameters"],
            },
        }
        for t in tools
    ]


def chat_tool_calls(message: Any) -> list[dict[str, str]]:
    """The function calls of a Chat Completions message, as ``{"id", "name", "arguments"}``.

    Lenient with OpenAI-compatible servers: a missing id becomes ``call_<n>`` (the tool loop
    pairs results with calls by id) and arguments sent as an object become its JSON text."""
    calls: list[dict[str, str]] = []
    for call in getattr(message, "tool_calls", None) or ():
        function = getattr(call, "function", None)
        if function is None:  # a custom (non-function) tool call: never offered by skillvc
            continue
        calls.append(
            {
                "id": getattr(call, "id", None) or f"call_{len(calls)}",
                "name": getattr(function, "name", "") or "",
                "arguments": arguments_text(getattr(function, "arguments", None)),
            }
        )
    return calls


def arguments_text(arguments: Any) -> str:
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def responses_input(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Responses API ``input`` items: a message each (system ones included, in order), a
    ``function_call`` item per call of an assistant turn (after its text, if any), and a
    ``function_call_output`` item per tool result."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role, content = m["role"], m.get("content")
        if role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m["tool_call_id"], "output": content}
            )
            continue
        calls = (m.get("tool_calls") or ()) if role == "assistant" else ()
        if isinstance(content, list):
            items.append({"role": role, "content": [_responses_part(p) for p in content]})
        elif content or not calls:
            items.append({"role": role, "content": content or ""})
        for c in calls:
            items.append(
                {
                    "type": "function_call",
                    "call_id": c["id"],
                    "name": c["name"],
                    "arguments": c["arguments"],
                }
            )
    return items


def _responses_part(part: Mapping[str, Any]) -> dict[str, Any]:
    if part.get("type") == "image":
        return {"type": "input_image", "image_url": data_url(part), "detail": "auto"}
    return {"type": "input_text", "text": part.get("text", "")}


def responses_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    # strict defaults to true in the Responses API, which refuses a schema with optional
    # properties; Chat Completions' default (not strict) is what every tool source writes for.
    return [
        {
            "type": "function",
            "name": t["name"],
            "description": t["description"],
            "parameters": t["parameters"],
            "strict": False,
        }
        for t in tools
    ]


def text_format(response_format: Mapping[str, Any]) -> dict[str, Any]:
    """Chat Completions' ``response_format`` as the Responses API's ``text.format``."""
    if response_format.get("type") == "json_schema":
        return {"type": "json_schema", **dict(response_format.get("json_schema") or {})}
    return dict(response_format)


def responses_finish_reason(response: Any, calls: Sequence[Mapping[str, str]]) -> str:
    """A Responses API answer's end in Chat Completions' words (``tool_calls``, ``length``,
    ``stop``), which the callers of every backend read."""
    if calls:
        return "tool_calls"
    details = getattr(response, "incomplete_details", None)
    if getattr(details, "reason", None) == "max_output_tokens":
        return "length"
    return "stop"

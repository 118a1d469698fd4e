"""What a local OpenAI-compatible server says about itself: context size, slots, structured output.

A local server (llama.cpp's ``llama-server``, Ollama, vLLM, LM Studio) answers the OpenAI Chat
Completions API and, besides it, a route of its own that tells what it can do:

- llama.cpp: ``GET /props`` -> ``default_generation_settings.n_ctx`` (the context of one slot)
  and ``total_slots`` (requests it runs at once; more wait in its queue);
- Ollama: ``GET /api/version``, then ``POST /api/show`` -> ``num_ctx`` in ``parameters``
  (else Ollama's default of 2,048), bounded by ``model_info["<arch>.context_length"]``;
- vLLM (and llama.cpp again): ``GET /v1/models`` -> ``max_model_len`` (``meta.n_ctx``).

``probe`` asks these routes in that order and returns a ``ServerInfo`` (None when none
answered: a hosted API or an unknown server, used exactly as before). Training uses it to fit
optimizer prompts into the context (``skillvc.models.prompts.render(fit=...)``), to bound answers,
to ask for JSON through a schema, to cap ``workers`` at the server's slots and to wait as long as
a CPU model needs. The info a run used is recorded in its ``run.started`` event, so a resumed
run fits its prompts exactly as the interrupted one did, whatever the server says later.

Invariant: only GET/POST to the configured base URL's host; a short timeout; never raises.
"""

from __future__ import annotations

import ipaddress
import json
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# (re-exported: a server's callers measure a prompt here)
from skillvc.models.prompts import estimate_tokens as estimate_tokens

PROBE_TIMEOUT_S = 5.0
OLLAMA_DEFAULT_CTX = 2048  # what Ollama gives a model whose Modelfile sets no num_ctx
# Answer tokens an optimizer call may use on a server of ``n_ctx`` tokens: a quarter of the
# context, at most 1,024 (a JSON list of a few edits needs a few hundred), at least 256.
MAX_ANSWER_TOKENS = 1024
# A CPU model takes tens of seconds per call and queued requests wait for a free slot: the
# run's timeout for a local server whose timeout_s was left at its default (120 s).
LOCAL_TIMEOUT_S = 900.0
# (the estimate lives beside the prompts it measures: ``prompts`` fits a prompt with it, and
# the prompts package sits below the backends)
SAFETY_TOKENS = 64


@dataclass(frozen=True)
class ServerInfo:
    """What a local server reported (None: it did not say)."""

    server: str  # llama.cpp | ollama | vllm
    n_ctx: int | None = None  # context tokens of one request (llama.cpp: per slot)
    slots: int | None = None  # requests served at once
    json_schema: bool = True  # accepts response_format {"type": "json_schema"}
    model: str | None = None  # the model the server names

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ServerInfo:
        names = ("server", "n_ctx", "slots", "json_schema", "model")
        return cls(**{k: data[k] for k in names if k in data})

    def answer_tokens(self, configured: int | None) -> int | None:
        """The optimizer's answer cap: ``max_tokens`` when set, else a share of the context."""
        if configured is not None or self.n_ctx is None:
            return configured
        return max(256, min(MAX_ANSWER_TOKENS, self.n_ctx // 4))

    def prompt_limit(self, answer_tokens: int | None) -> int | None:
        """Estimated prompt tokens that leave room for the answer (None: no known limit)."""
        if self.n_ctx is None:
            return None
        return self.n_ctx - (answer_tokens or 0) - SAFETY_TOKENS

    def describe(self) -> str:
        parts = [f"context {self.n_ctx:,} tokens" if self.n_ctx else "context not reported"]
        if self.slots:
            parts.append(f"{self.slots} slot{'s' if self.slots != 1 else ''}")
        parts.append("json_schema output" if self.json_schema else "no json_schema output")
        model = f" serving {self.model}" if self.model else ""
        return f"{self.server}{model} ({', '.join(parts)})"


# What a loopback server is sent when no key is set: local servers accept any key, so a newcomer
# needs no variable for one. Never invented for any other address (that would send a made-up
# key to someone else's server); never the user's key sent anywhere it was not meant for.
PLACEHOLDER_KEY = "local"


def is_loopback(url: str | None) -> bool:
    """True for an http(s) URL on this machine: localhost, 127.0.0.0/8 or ::1."""
    if not url or not url.startswith(("http://", "https://")):
        return False
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def served_models(base_url: str, headers: Mapping[str, str] | None = None) -> list[str] | None:
    """The model ids ``GET <base_url>/models`` lists (None: the server did not answer a list)."""
    if not base_url.startswith(("http://", "https://")):
        return None
    listed = _get(f"{base_url.rstrip('/')}/models", dict(headers or {}))
    ids = [_str(e.get("id")) for e in _entries(listed)]
    names = [i for i in ids if i]
    return names or None


def server_root(base_url: str) -> str:
    """``http://host:port/v1`` -> ``http://host:port`` (the server's own routes live there)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = re.sub(r"/v1$", "", parts.path)
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def probe(base_url: str, model: str, headers: Mapping[str, str] | None = None) -> ServerInfo | None:
    """Ask the server at ``base_url`` what it is (see the module docstring); never raises."""
    if not base_url.startswith(("http://", "https://")):
        return None
    root = server_root(base_url)
    sent = dict(headers or {})
    props = _get(f"{root}/props", sent)
    if isinstance(props, dict) and {"total_slots", "default_generation_settings"} & set(props):
        settings = props.get("default_generation_settings") or {}
        n_ctx = _int(settings.get("n_ctx")) or _int(props.get("n_ctx"))
        models = _get(f"{base_url.rstrip('/')}/models", sent)
        name = _first_model(models)
        if n_ctx is None:
            n_ctx = _model_len(models)
        return ServerInfo(
            "llama.cpp",
            n_ctx=n_ctx,
            slots=_int(props.get("total_slots")),
            model=name or _str(props.get("model_alias")),
        )
    # Ollama says what it is on a GET first: a POST goes to /api/show only on an Ollama, so
    # a server of another kind sees nothing but GETs from a probe.
    version = _get(f"{root}/api/version", sent)
    if isinstance(version, dict) and "version" in version:
        show = _post(f"{root}/api/show", {"model": model}, sent)
        show = show if isinstance(show, dict) else {}
        return ServerInfo("ollama", n_ctx=_ollama_ctx(show), model=model)
    models = _get(f"{base_url.rstrip('/')}/models", sent)
    length = _model_len(models)
    if length is not None:
        return ServerInfo("vllm", n_ctx=length, model=_first_model(models))
    return None


def _ollama_ctx(show: Mapping[str, Any]) -> int:
    """Ollama's context for a request: the Modelfile's num_ctx, else its default, within the
    model's trained length."""
    params = str(show.get("parameters") or "")
    m = re.search(r"^\s*num_ctx\s+(\d+)", params, re.M)
    ctx = int(m.group(1)) if m else OLLAMA_DEFAULT_CTX
    info = show.get("model_info") or {}
    trained = [_int(v) for k, v in info.items() if str(k).endswith(".context_length")]
    bound = min((t for t in trained if t), default=None)
    return min(ctx, bound) if bound else ctx


def _model_len(models: Any) -> int | None:
    for entry in _entries(models):
        length = _int(entry.get("max_model_len")) or _int((entry.get("meta") or {}).get("n_ctx"))
        if length:
            return length
    return None


def _first_model(models: Any) -> str | None:
    for entry in _entries(models):
        return _str(entry.get("id"))
    return None


def _entries(models: Any) -> list[dict[str, Any]]:
    data = models.get("data") if isinstance(models, dict) else None
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _get(url: str, headers: Mapping[str, str]) -> Any:
    return _request(urllib.request.Request(url, headers=dict(headers)))


def _post(url: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> Any:
    data = json.dumps(body).encode("utf-8")
    hdrs = {**headers, "Content-Type": "application/json"}
    return _request(urllib.request.Request(url, data=data, headers=hdrs, method="POST"))


# No proxy: the probe goes to the configured address itself, as the SDK's calls do there.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _request(req: urllib.request.Request) -> Any:
    try:
        with _OPENER.open(req, timeout=PROBE_TIMEOUT_S) as response:
            return json.loads(response.read(1_000_000))
    except (urllib.error.URLError, OSError, ValueError):
        return None

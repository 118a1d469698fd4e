"""A scriptable fake model API on 127.0.0.1, for driving the real SDKs over real HTTP.

It speaks four routes:

- ``POST /v1/chat/completions`` (OpenAI Chat Completions, with ``usage``);
- ``POST /openai/deployments/<deployment>/chat/completions?api-version=...`` (Azure OpenAI);
- ``POST /v1/messages`` (Anthropic Messages, content blocks and input/output token usage);
- ``POST /v1/responses`` (the OpenAI Responses API: ``output`` items and input/output usage).

An answer may call tools (``Behaviour(tool_calls=[{"id", "name", "arguments"}])``, arguments
as JSON text): each route answers in its own format (``tool_calls`` and finish reason
``tool_calls``; ``tool_use`` blocks, whose ``input`` is the parsed arguments, and stop reason
``tool_use``; ``function_call`` items). ``neutral_messages(body)`` reads any route's request
back into the provider-neutral conversation of ``skillvc.models.tools.spec``.

Every request is recorded (method, path, query, headers, JSON body) in ``server.requests``.
Scripted behaviours are consumed first-in first-out, one per request, whatever the route:
``answer``, ``rate_limit`` (429 + Retry-After), ``error`` (any status), ``slow`` (sleep, then
answer), ``drop`` (close the socket without a response) and ``malformed`` (200 with a body that
is not JSON). With nothing enqueued it asks ``server.responder(body)``, so a long run can be
driven without scripting each call: the responder returns the answer text, or a ``Behaviour``
(e.g. a 500 for some requests only) that is then played like a scripted one.

A local server's own routes, when a test sets them: ``server.get_routes`` maps a GET path
(``/props``, ``/v1/models``, ``/api/version``) to the JSON it answers, and ``post_routes`` a
POST path other than the chat routes (``/api/show``). ``context_limit`` makes it enforce a
llama.cpp context: a chat request whose prompt counts more tokens (``count_tokens``) gets
llama.cpp's 400 and no answer. ``max_in_flight`` is the most chat requests it held at once.
GETs are recorded in ``server.gets``, never in ``requests``.

Invariant: it binds to 127.0.0.1 only, port 0 (the OS picks a free port); no traffic leaves
the machine.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qs, urlsplit

import pytest


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str  # without the query string
    query: dict[str, str]
    headers: dict[str, str]  # names lower-cased
    body: bytes
    json: Any


@dataclass(frozen=True)
class Behaviour:
    """What to do with one request."""

    kind: str = "answer"  # answer | status | drop | malformed
    text: str | None = None  # None: ask the responder
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # sleep before answering (a slow server)
    # As each route reports it: OpenAI's prompt_tokens include the cached ones, Anthropic's
    # input_tokens exclude cache reads and writes.
    prompt_tokens: int = 11
    completion_tokens: int = 7
    cached_tokens: int = 0  # usage.prompt_tokens_details.cached_tokens / cache_read_input_tokens
    cache_write_tokens: int = 0  # Anthropic's cache_creation_input_tokens
    finish_reason: str | None = None  # None: the route's normal "stop" (or tool-call) value
    message: str = "scripted error"
    # The answer's tool calls, {"id", "name", "arguments" (JSON text)} each; with calls and
    # no text, the answer is the calls alone (the responder is not asked for text).
    tool_calls: Sequence[Mapping[str, str]] = ()


Responder = Callable[[dict[str, Any]], str | Behaviour]

# A tokenizer harsher than real ones on skillvc's prompts: every digit, every punctuation mark
# and every 5 letters are a token (1,284 tokens for a reflection prompt that Qwen2.5's own
# tokenizer makes 1,054 of), plus a few per message for the chat template.
_TOKEN = re.compile(r"\d|[A-Za-z]{1,5}|[^\sA-Za-z\d]")


def count_tokens(messages: list[dict[str, str]]) -> int:
    return sum(len(_TOKEN.findall(m["content"])) + 4 for m in messages)


def _default_responder(body: dict[str, Any]) -> str:
    return "ok"


_T = TypeVar("_T", bound="HttpFake")


class _Server(ThreadingHTTPServer):
    # A provider takes a burst of connections: socketserver's default listen backlog (5) drops
    # some when a wave opens more at once, and the client's TCP resends a dropped connection
    # attempt after 1 s.
    request_queue_size = 128


class HttpFake:
    """An HTTP server on a free port of 127.0.0.1, served from a thread between ``start`` and
    ``stop``: what the loopback server and the batch fake share."""

    def _listen(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._httpd = _Server(("127.0.0.1", 0), handler)
        # Daemon threads: a handler still sleeping in a "slow" behaviour must not block teardown.
        self._httpd.daemon_threads = True
        # A short poll interval keeps shutdown (each test's teardown) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self: _T) -> _T:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class LoopbackServer(HttpFake):
    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.gets: list[str] = []
        self.get_routes: dict[str, Any] = {}
        self.post_routes: dict[str, Any] = {}
        self.context_limit: int | None = None
        self.prompt_tokens_seen: list[int] = []  # counted when context_limit is set
        self.in_flight = 0
        self.max_in_flight = 0
        self.responder: Responder = _default_responder
        self._queue: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._listen(_handler_for(self))

    # -- scripting --------------------------------------------------------------------------

    def enqueue(self, *behaviours: Behaviour) -> None:
        with self._lock:
            self._queue.extend(behaviours)

    def answer(self, text: str | None = None, **kw: Any) -> None:
        self.enqueue(Behaviour(text=text, **kw))

    def rate_limit(self, retry_after: str | None = "2", **headers: str) -> None:
        hdrs = dict(headers)
        if retry_after is not None:
            hdrs["Retry-After"] = retry_after
        self.enqueue(Behaviour(kind="status", status=429, headers=hdrs, message="Rate limited."))

    def error(self, status: int = 500, message: str = "scripted error") -> None:
        self.enqueue(Behaviour(kind="status", status=status, message=message))

    def unauthorized(self) -> None:
        """401 whose body echoes the key it was sent, as careless servers do."""
        self.enqueue(Behaviour(kind="status", status=401, message="Incorrect API key: {key}"))

    def slow(self, seconds: float, text: str | None = None) -> None:
        self.enqueue(Behaviour(text=text, delay_s=seconds))

    def drop(self) -> None:
        self.enqueue(Behaviour(kind="drop"))

    def malformed(self) -> None:
        self.enqueue(Behaviour(kind="malformed"))

    def _next(self) -> Behaviour | None:
        """The next scripted behaviour, or None when the responder decides."""
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def _record(self, rec: Recorded) -> None:
        with self._lock:
            self.requests.append(rec)


def _openai_body(req: dict[str, Any], text: str, b: Behaviour) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if b.tool_calls:
        message["content"] = text or None  # as OpenAI answers a turn of calls alone
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in b.tool_calls
        ]
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.get("model", "unknown"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": b.finish_reason or ("tool_calls" if b.tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": b.prompt_tokens,
            "completion_tokens": b.completion_tokens,
            "total_tokens": b.prompt_tokens + b.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": b.cached_tokens},
        },
    }


def _anthropic_body(req: dict[str, Any], text: str, b: Behaviour) -> dict[str, Any]:
    return {
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": req.get("model", "unknown"),
        # Two text blocks, so tests see that the backend joins every text block; then a
        # tool_use block per call (a turn of calls alone has no text blocks).
        "content": (
            [
                {"type": "text", "text": text[: len(text) // 2]},
                {"type": "text", "text": text[len(text) // 2 :]},
            ]
            if text or not b.tool_calls
            else []
        )
        + [
            {
                "type": "tool_use",
                "id": c["id"],
                "name": c["name"],
                "input": json.loads(c["arguments"]),
            }
            for c in b.tool_calls
        ],
        "stop_reason": b.finish_reason or ("tool_use" if b.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": b.prompt_tokens,
            "output_tokens": b.completion_tokens,
            "cache_creation_input_tokens": b.cache_write_tokens,
            "cache_read_input_tokens": b.cached_tokens,
        },
    }


def _responses_body(req: dict[str, Any], text: str, b: Behaviour) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if text or not b.tool_calls:
        output.append(
            {
                "type": "message",
                "id": "msg_loopback",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    for i, c in enumerate(b.tool_calls):
        output.append(
            {
                "type": "function_call",
                "id": f"fc_loopback_{i}",
                "call_id": c["id"],
                "name": c["name"],
                "arguments": c["arguments"],
                "status": "completed",
            }
        )
    # The Responses API has no finish reason: a cut answer is "incomplete", with the reason.
    cut = b.finish_reason == "length"
    return {
        "id": "resp_loopback",
        "object": "response",
        "created_at": int(time.time()),
        "model": req.get("model", "unknown"),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": req.get("tools") or [],
        "usage": {
            "input_tokens": b.prompt_tokens,
            "input_tokens_details": {"cached_tokens": b.cached_tokens},
            "output_tokens": b.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": b.prompt_tokens + b.completion_tokens,
        },
    }


def _error_body(anthropic: bool, status: int, message: str) -> dict[str, Any]:
    kind = {401: "authentication_error", 429: "rate_limit_error"}.get(status, "api_error")
    if anthropic:
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": None, "param": None}}


def _handler_for(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect
        # Headers and body go out as separate writes: without TCP_NODELAY, Nagle holds the
        # body until the client's delayed ACK (~40 ms a request on Linux loopback).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # quiet test output
            pass

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            with server._lock:
                server.gets.append(path)
            if path in server.get_routes:
                self._send(200, server.get_routes[path])
                return
            self._send(404, {"error": {"message": f"no route {path}"}})

        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            if parts.path in server.post_routes:
                self._send(200, server.post_routes[parts.path])
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            server._record(Recorded("POST", parts.path, query, headers, raw, body))

            if parts.path.endswith("/chat/completions"):
                shape = _openai_body
            elif parts.path == "/v1/messages":
                shape = _anthropic_body
            elif parts.path == "/v1/responses":
                shape = _responses_body
            else:
                self._send(404, {"error": {"message": f"no route {parts.path}"}})
                return

            req = body if isinstance(body, dict) else {}
            if server.context_limit is not None:
                n = count_tokens(chat_messages(req))
                with server._lock:
                    server.prompt_tokens_seen.append(n)
                if n > server.context_limit:  # llama.cpp's answer to an over-long prompt
                    error = {
                        "code": 400,
                        "message": "the request exceeds the available context size, try "
                        "increasing it",
                        "type": "exceed_context_size_error",
                        "n_prompt_tokens": n,
                        "n_ctx": server.context_limit,
                    }
                    self._send(400, {"error": error})
                    return
            with server._lock:
                server.in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server.in_flight)
            try:
                self._answer(req, headers, shape)
            finally:
                with server._lock:
                    server.in_flight -= 1

        def _answer(
            self,
            req: dict[str, Any],
            headers: dict[str, str],
            shape: Callable[[dict[str, Any], str, Behaviour], dict[str, Any]],
        ) -> None:
            b = server._next()
            if b is None:
                decided = server.responder(req)
                b = decided if isinstance(decided, Behaviour) else Behaviour(text=decided)
            if b.delay_s:
                time.sleep(b.delay_s)
            if b.kind == "drop":
                # No status line at all: the client sees the connection close under it.
                self.close_connection = True
                return
            if b.kind == "malformed":
                self._send_raw(200, b'{"choices": [ this is not json', {})
                return
            if b.kind == "status":
                key = headers.get("x-api-key") or headers.get("api-key") or ""
                key = key or headers.get("authorization", "").removeprefix("Bearer ")
                message = b.message.replace("{key}", key)
                anthropic = shape is _anthropic_body
                self._send(b.status, _error_body(anthropic, b.status, message), b.headers)
                return
            text = b.text
            if text is None and b.tool_calls:
                text = ""  # the calls alone
            if text is None:  # a scripted answer without text: the responder writes it
                decided = server.responder(req)
                text = decided if isinstance(decided, str) else (decided.text or "")
            self._send(200, shape(req, text, b), b.headers)

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            self._send_raw(status, json.dumps(payload).encode(), headers or {})

        def _send_raw(self, status: int, data: bytes, headers: dict[str, str]) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test); nothing to answer

    return Handler


def chat_messages(body: dict[str, Any]) -> list[dict[str, str]]:
    """The chat messages of an OpenAI, Anthropic or Responses request body (a system prompt
    first), each as ``{"role", "content"}`` with its text: content blocks joined, images left
    out, a tool result as a ``tool`` message, a turn of tool calls alone as ``""``."""

    def text(content: Any) -> str:
        if isinstance(content, list):  # parts
            return "".join(p.get("text", "") for p in content if p.get("type") == "text")
        return str(content or "")

    return [{"role": m["role"], "content": text(m.get("content"))} for m in neutral_messages(body)]


def neutral_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A request body of any route as the provider-neutral conversation of
    ``skillvc.models.tools.spec`` (what a backend was asked to send): a content of text blocks
    only is their text joined; a tool result's ``name`` is its call's; OpenAI's formats carry no
    ``is_error``, so theirs read False."""
    if "input" in body:
        messages = _from_responses(body)
    else:
        system = body.get("system")  # Anthropic's: a string or text blocks
        messages = [{"role": "system", "content": _joined(_parts(system))}] if system else []
        for m in body.get("messages") or []:
            messages.extend(_from_message(m))
    names = {c["id"]: c["name"] for m in messages for c in m.get("tool_calls") or ()}
    for m in messages:
        if m["role"] == "tool":
            m["name"] = names.get(m["tool_call_id"], "")
    return messages


def _image(url: str) -> dict[str, Any]:
    media_type, _, data = url.removeprefix("data:").partition(";base64,")
    return {"type": "image", "media_type": media_type, "data": data}


def _parts(content: Any) -> list[dict[str, Any]]:
    """Content as neutral parts (text and images) of any of the three formats."""
    if not isinstance(content, list):
        return [{"type": "text", "text": str(content or "")}]
    parts: list[dict[str, Any]] = []
    for p in content:
        kind = p.get("type")
        if kind in ("text", "input_text", "output_text"):
            parts.append({"type": "text", "text": p.get("text", "")})
        elif kind == "image_url":
            parts.append(_image(p["image_url"]["url"]))
        elif kind == "input_image":
            parts.append(_image(p["image_url"]))
        elif kind == "image":
            source = p["source"]
            parts.append(
                {"type": "image", "media_type": source["media_type"], "data": source["data"]}
            )
    return parts


def _joined(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Text parts alone as one string (a cache point's split undone); with images, the parts."""
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def _from_message(m: dict[str, Any]) -> list[dict[str, Any]]:
    """One Chat Completions or Anthropic message; an Anthropic one of tool results is a
    ``tool`` message per result."""
    role, content = m.get("role", "user"), m.get("content")
    if role == "tool":
        return [_tool(m["tool_call_id"], content, False)]
    blocks = content if isinstance(content, list) else []
    results = [b for b in blocks if b.get("type") == "tool_result"]
    out = [_tool(b["tool_use_id"], b.get("content"), bool(b.get("is_error"))) for b in results]
    calls = [
        {"id": b["id"], "name": b["name"], "arguments": json.dumps(b.get("input"))}
        for b in blocks
        if b.get("type") == "tool_use"
    ] + [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in m.get("tool_calls") or ()
    ]
    rest = [b for b in blocks if b.get("type") not in ("tool_use", "tool_result")]
    if calls or rest or not results:
        message: dict[str, Any] = {
            "role": role,
            "content": _joined(_parts(rest if isinstance(content, list) else content)),
        }
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    return out


def _from_responses(body: dict[str, Any]) -> list[dict[str, Any]]:
    items = body["input"]
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    messages: list[dict[str, Any]] = []
    if body.get("instructions"):
        messages.append({"role": "system", "content": body["instructions"]})
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call_output":
            messages.append(_tool(item["call_id"], item.get("output"), False))
        elif kind == "function_call":
            call = {"id": item["call_id"], "name": item["name"], "arguments": item["arguments"]}
            last = messages[-1] if messages else None
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "content": ""}
                messages.append(last)
            last.setdefault("tool_calls", []).append(call)
        else:
            messages.append(
                {"role": item.get("role", "user"), "content": _joined(_parts(item.get("content")))}
            )
    return messages


def _tool(call_id: str, content: Any, is_error: bool) -> dict[str, Any]:
    text = content if isinstance(content, str) else _joined(_parts(content))
    return {
        "role": "tool",
        "tool_call_id": call_id,
        "name": "",
        "content": text,
        "is_error": is_error,
    }


def is_optimizer_prompt(messages: list[dict[str, str]]) -> bool:
    """skillvc's optimizer prompts are marked ``<!-- skillvc-prompt: kind -->``; tasks are not."""
    return any("<!-- skillvc-prompt:" in m["content"] for m in messages if m["role"] == "user")


def simulator_responder(world: str = "support") -> Callable[[dict[str, Any]], str]:
    """A responder that answers like ``sim:<world>``, so training over HTTP is meaningful: a
    target request (system = skill, user = task) gets the simulated target's answer, an
    optimizer prompt gets the simulated optimizer's JSON."""
    from skillvc.models.backends.base import CallRequest
    from skillvc.models.backends.sim import SimBackend

    sim = SimBackend(f"sim:{world}")

    def respond(body: dict[str, Any]) -> str:
        messages = chat_messages(body)
        role = "optimizer" if is_optimizer_prompt(messages) else "target"
        request = CallRequest(role=role, model=sim.model, messages=tuple(messages))
        return sim.complete(request).text

    return respond


class Server(Protocol):
    def start(self) -> Any: ...
    def stop(self) -> None: ...


S = TypeVar("S", bound=Server)


def serving(server: S) -> Iterator[S]:
    """A fixture's body: ``server`` started, and stopped after the test."""
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    yield from serving(LoopbackServer())

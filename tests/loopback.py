"""A scriptable fake model API on 127.0.0.1, for driving the real SDKs over real HTTP.

It speaks three routes:

- ``POST /v1/chat/completions`` (OpenAI Chat Completions, with ``usage``);
- ``POST /openai/deployments/<deployment>/chat/completions?api-version=...`` (Azure OpenAI);
- ``POST /v1/messages`` (Anthropic Messages, content blocks and input/output token usage).

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
from collections.abc import Callable, Iterator
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
    finish_reason: str | None = None  # None: the route's normal "stop" value
    message: str = "scripted error"


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
    return {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": req.get("model", "unknown"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": b.finish_reason or "stop",
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
        # Two text blocks, so tests see that the backend joins every text block.
        "content": [
            {"type": "text", "text": text[: len(text) // 2]},
            {"type": "text", "text": text[len(text) // 2 :]},
        ],
        "stop_reason": b.finish_reason or "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": b.prompt_tokens,
            "output_tokens": b.completion_tokens,
            "cache_creation_input_tokens": b.cache_write_tokens,
            "cache_read_input_tokens": b.cached_tokens,
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

            openai_route = parts.path.endswith("/chat/completions")
            anthropic_route = parts.path == "/v1/messages"
            if not (openai_route or anthropic_route):
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
                self._answer(req, headers, anthropic_route)
            finally:
                with server._lock:
                    server.in_flight -= 1

        def _answer(
            self, req: dict[str, Any], headers: dict[str, str], anthropic_route: bool
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
                self._send(b.status, _error_body(anthropic_route, b.status, message), b.headers)
                return
            text = b.text
            if text is None:  # a scripted answer without text: the responder writes it
                decided = server.responder(req)
                text = decided if isinstance(decided, str) else (decided.text or "")
            shape = _anthropic_body if anthropic_route else _openai_body
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
    """The chat messages of an OpenAI or Anthropic request body (Anthropic's ``system`` first)."""

    def text(content: Any) -> str:
        if isinstance(content, list):  # content blocks
            return "".join(b.get("text", "") for b in content if isinstance(b, dict))
        return str(content or "")

    messages = [{"role": "system", "content": text(body["system"])}] if body.get("system") else []
    for m in body.get("messages") or []:
        messages.append({"role": m.get("role", "user"), "content": text(m.get("content"))})
    return messages


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

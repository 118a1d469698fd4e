"""``skillvc review``'s local page: a small HTTP server on 127.0.0.1 with a token in its URL.

Invariants:
- It listens on 127.0.0.1 only (a free port unless one is given) and answers nothing without
  the token (``?review=`` or the ``X-Skillvc-Review`` header; compared in constant time). The
  parameter is not called ``token``: skillvc's output scrubber redacts what follows that word,
  and the URL must reach the person whole.
- It answers only requests addressed to itself: the Host header must name 127.0.0.1 or
  localhost with its port (a DNS-rebinding page's host is refused), and a request with an
  Origin header (every browser write has one) must come from that same origin; a write
  without one is refused too.
- The page and its assets are files shipped in the package (``templates/review``, read with
  importlib.resources): no CDN, no fonts, nothing fetched from elsewhere, and a
  Content-Security-Policy that allows nothing but itself.
- Every write goes through ``skillvc.coldstart.queue`` (``decide``, ``label``), the same
  validated path as the command line, and so is an event; a task file a request names must be
  one of the configured ones, inside the repository.
"""

from __future__ import annotations

import hmac
import json
import secrets
import string
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from skillvc.coldstart import queue
from skillvc.core.errors import NotFound, SkillvcError
from skillvc.core.resources import read_text
from skillvc.workspace.workspace import Workspace

ASSETS = {"review.js": "text/javascript", "review.css": "text/css"}
MAX_BODY = 1_000_000
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class ReviewServer:
    """The review page for ``ws``, served from a thread (``start``) or the caller's
    (``serve_forever``) until ``stop``."""

    def __init__(self, ws: Workspace, *, port: int = 0, token: str | None = None) -> None:
        self.ws = ws
        self.token = token or secrets.token_urlsafe(24)
        self.lock = threading.Lock()  # one write at a time, in the order they came
        server = self

        class Handler(_Handler):
            review = server

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.origin}/?review={self.token}"

    def start(self) -> ReviewServer:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def allowed_hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}


class _Handler(BaseHTTPRequestHandler):
    review: ReviewServer
    server_version = "skillvc-review"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        return  # the token is in every URL: request lines are not printed

    # -- the checks ---------------------------------------------------------------------------

    def _refusal(self, write: bool) -> tuple[int, str] | None:
        host = self.headers.get("Host", "")
        if host not in self.review.allowed_hosts():
            return 403, "This page answers only requests to 127.0.0.1 (wrong Host header)."
        origin = self.headers.get("Origin")
        allowed = {f"http://{h}" for h in self.review.allowed_hosts()}
        if origin is not None and origin not in allowed:
            return 403, "Requests from another origin are refused."
        if write and origin is None:
            return 403, "A write must come from the review page itself (no Origin header)."
        query = parse_qs(urlsplit(self.path).query)
        given = self.headers.get("X-Skillvc-Review") or (query.get("review") or [""])[0]
        if not hmac.compare_digest(given.encode(), self.review.token.encode()):
            return 403, "The review page needs the token printed by 'skillvc review'."
        return None

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")  # the token stays on this page
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, value: Any) -> None:
        from skillvc.secrets import redact_json_counted

        body = json.dumps(redact_json_counted(value)[0], ensure_ascii=False).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8")

    def _error(self, status: int, message: str, hint: str | None = None) -> None:
        self._json(status, {"error": message, "hint": hint})

    # -- routes -------------------------------------------------------------------------------

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        refused = self._refusal(write=False)
        if refused:
            self._error(*refused)
            return
        path = urlsplit(self.path).path
        if path == "/":
            page = string.Template(read_text("templates", "review/index.html")).substitute(
                token=self.review.token, skill=_html(self.review.ws.skill_relpath)
            )
            self._send(200, page.encode("utf-8"), "text/html; charset=utf-8")
        elif path.startswith("/assets/") and path[len("/assets/") :] in ASSETS:
            name = path[len("/assets/") :]
            body = read_text("templates", f"review/{name}").encode("utf-8")
            self._send(200, body, f"{ASSETS[name]}; charset=utf-8")
        elif path == "/api/items":
            self._call(lambda: {"items": [e.to_dict() for e in queue.entries(self.review.ws)]})
        else:
            self._error(404, f"No page {path}.")

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        refused = self._refusal(write=True)
        if refused:
            self._error(*refused)
            return
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._error(413, "The request is too large.")
            return
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._error(400, "The request is not JSON.")
            return
        if not isinstance(body, dict):
            self._error(400, "The request must be a JSON object.")
            return
        ws = self.review.ws
        if path == "/api/decide":
            self._call(
                lambda: queue.decide(
                    ws,
                    str(body.get("id", "")),
                    str(body.get("decision", "")),
                    input=body.get("input"),
                    targets=body.get("targets"),
                    rubric=body.get("rubric"),
                    file=body.get("file"),
                    by="review page",
                ).to_dict()
            )
        elif path == "/api/label":
            self._call(
                lambda: queue.label(
                    ws,
                    str(body.get("id", "")),
                    str(body.get("output", "")),
                    body.get("label") in (1, True, "pass"),
                    str(body.get("note") or ""),
                    by="review page",
                )
            )
        else:
            self._error(404, f"No route {path}.")

    def _call(self, fn: Any) -> None:
        from skillvc.core.errors import PathOutsideRepo

        try:
            with self.review.lock:
                result = fn()
        except PathOutsideRepo as exc:
            self._error(403, exc.message, exc.hint)
        except NotFound as exc:
            self._error(404, exc.message, exc.hint)
        except SkillvcError as exc:
            self._error(400, exc.message, exc.hint)
        else:
            self._json(200, result)


def _html(text: str) -> str:
    import html

    return html.escape(text, quote=True)

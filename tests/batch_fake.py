"""A fake of the OpenAI Batch and Anthropic Message Batches APIs on 127.0.0.1.

It follows the documented wire formats, so the real SDKs drive it over real HTTP:

- OpenAI: ``POST /v1/files`` (multipart upload, ``purpose=batch``), ``POST /v1/batches``,
  ``GET /v1/batches/{id}``, ``GET /v1/batches`` (newest first), ``GET /v1/files/{id}/content``
  (the output or error JSONL: ``{"id", "custom_id", "response": {"status_code", "request_id",
  "body"}, "error"}``); and the sync ``POST /v1/chat/completions`` for comparison runs.
- Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches/{id}``,
  ``GET /v1/messages/batches``, ``GET /v1/messages/batches/{id}/results`` (JSONL of
  ``{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error"}}``).

Answers come from ``responder`` (the loopback simulator by default). ``hold`` keeps every batch
in progress (a batch that takes hours); ``fails(custom_id)`` makes one request of a batch fail.
``creates`` counts batch creations per provider: resubmissions show up there.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

import pytest
from loopback import HttpFake, serving, simulator_responder


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class BatchFake(HttpFake):
    def __init__(self) -> None:
        self.responder: Callable[[dict[str, Any]], str] = simulator_responder("support")
        self.fails: Callable[[str], bool] = lambda custom_id: False
        self.hold = False
        self.creates = {"openai": 0, "anthropic": 0}
        self.sync_calls = 0
        self.files: dict[str, bytes] = {}
        self.openai: dict[str, dict[str, Any]] = {}
        self.anthropic: dict[str, dict[str, Any]] = {}
        self._inputs: dict[str, list[dict[str, Any]]] = {}
        self._n = 0
        self._lock = threading.Lock()
        self._listen(_handler(self))

    def new_id(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}{self._n:06d}"

    # -- OpenAI ---------------------------------------------------------------------------

    def openai_create(self, body: dict[str, Any]) -> dict[str, Any]:
        lines = [json.loads(x) for x in self.files[body["input_file_id"]].splitlines() if x]
        bid = self.new_id("batch_")
        now = time.time()
        self._inputs[bid] = lines
        self.openai[bid] = {
            "id": bid,
            "object": "batch",
            "endpoint": body["endpoint"],
            "errors": None,
            "input_file_id": body["input_file_id"],
            "completion_window": body["completion_window"],
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": int(now),
            "in_progress_at": None,
            "expires_at": int(now) + 86400,
            "completed_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        self.creates["openai"] += 1
        return self.openai[bid]

    def openai_retrieve(self, bid: str) -> dict[str, Any]:
        batch = self.openai[bid]
        if batch["status"] == "validating":
            batch["status"], batch["in_progress_at"] = "in_progress", int(time.time())
        elif batch["status"] == "in_progress" and not self.hold:
            self._openai_finish(batch)
        return batch

    def _openai_finish(self, batch: dict[str, Any]) -> None:
        done, failed = [], []
        for i, line in enumerate(self._inputs[batch["id"]]):
            rid = f"batch_req_{batch['id']}_{i}"
            if self.fails(line["custom_id"]):
                body = {"error": {"message": "scripted batch failure", "type": "server_error"}}
                response = {"status_code": 500, "request_id": rid, "body": body}
                failed.append({"id": rid, "custom_id": line["custom_id"], "response": response})
                continue
            text = self.responder(line["body"])
            completion = {
                "id": f"chatcmpl-{i}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": line["body"]["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            }
            response = {"status_code": 200, "request_id": rid, "body": completion}
            done.append({"id": rid, "custom_id": line["custom_id"], "response": response})
        for key, entries in (("output_file_id", done), ("error_file_id", failed)):
            if entries:
                fid = self.new_id("file-")
                self.files[fid] = "".join(
                    json.dumps(e | {"error": None}) + "\n" for e in entries
                ).encode()
                batch[key] = fid
        batch["status"], batch["completed_at"] = "completed", int(time.time())
        batch["request_counts"] = {
            "total": len(done) + len(failed),
            "completed": len(done),
            "failed": len(failed),
        }

    # -- Anthropic ------------------------------------------------------------------------

    def anthropic_create(self, body: dict[str, Any]) -> dict[str, Any]:
        bid = self.new_id("msgbatch_")
        now = time.time()
        self._inputs[bid] = body["requests"]
        self.anthropic[bid] = {
            "id": bid,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {
                "processing": len(body["requests"]),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "ended_at": None,
            "created_at": _iso(now),
            "expires_at": _iso(now + 86400),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": None,
        }
        self.creates["anthropic"] += 1
        return self.anthropic[bid]

    def anthropic_retrieve(self, bid: str) -> dict[str, Any]:
        batch = self.anthropic[bid]
        if batch["processing_status"] == "in_progress" and not self.hold:
            lines = []
            for i, req in enumerate(self._inputs[bid]):
                if self.fails(req["custom_id"]):
                    error = {
                        "type": "error",
                        "error": {"type": "api_error", "message": "scripted batch failure"},
                    }
                    lines.append(
                        {
                            "custom_id": req["custom_id"],
                            "result": {"type": "errored", "error": error},
                        }
                    )
                    continue
                text = self.responder(req["params"])
                message = {
                    "id": f"msg_{i}",
                    "type": "message",
                    "role": "assistant",
                    "model": req["params"]["model"],
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "stop_sequence": None,
                    "usage": {"input_tokens": 11, "output_tokens": 7},
                }
                lines.append(
                    {
                        "custom_id": req["custom_id"],
                        "result": {"type": "succeeded", "message": message},
                    }
                )
            self.files[bid] = "".join(json.dumps(x) + "\n" for x in lines).encode()
            ok = sum(1 for x in lines if x["result"]["type"] == "succeeded")
            batch["request_counts"] |= {
                "processing": 0,
                "succeeded": ok,
                "errored": len(lines) - ok,
            }
            batch["processing_status"], batch["ended_at"] = "ended", _iso(time.time())
            batch["results_url"] = f"{self.url}/v1/messages/batches/{bid}/results"
        return batch


def _result(req: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    return {"custom_id": req["custom_id"], "result": result}


def _page(items: list[dict[str, Any]], openai: bool) -> dict[str, Any]:
    data = sorted(items, key=lambda b: b["id"], reverse=True)  # newest first
    page: dict[str, Any] = {
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }
    return {"object": "list", **page} if openai else page


def _handler(fake: BatchFake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as separate writes: without TCP_NODELAY, Nagle holds the
        # body until the client's delayed ACK (~40 ms a request on Linux loopback).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = urlsplit(self.path).path.rstrip("/")
            parts = path.split("/")
            if path == "/v1/batches":
                return self._json(_page(list(fake.openai.values()), True))
            if path.startswith("/v1/batches/") and parts[3] in fake.openai:
                return self._json(fake.openai_retrieve(parts[3]))
            if path.startswith("/v1/files/") and path.endswith("/content"):
                return self._raw(fake.files[parts[3]], "application/octet-stream")
            if path == "/v1/messages/batches":
                return self._json(_page(list(fake.anthropic.values()), False))
            if path.startswith("/v1/messages/batches/") and path.endswith("/results"):
                return self._raw(fake.files[parts[4]], "application/binary")
            if path.startswith("/v1/messages/batches/") and parts[4] in fake.anthropic:
                return self._json(fake.anthropic_retrieve(parts[4]))
            return self._json({"error": {"message": f"no route {path}"}}, 404)

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if path == "/v1/files":
                return self._json(self._upload(raw))
            body = json.loads(raw or b"{}")
            if path == "/v1/batches":
                return self._json(fake.openai_create(body))
            if path == "/v1/messages/batches":
                return self._json(fake.anthropic_create(body))
            if path == "/v1/chat/completions":
                fake.sync_calls += 1
                text = fake.responder(body)
                return self._json(
                    {
                        "id": "chatcmpl-sync",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": text},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
                    }
                )
            return self._json({"error": {"message": f"no route {path}"}}, 404)

        def _upload(self, raw: bytes) -> dict[str, Any]:
            head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
            message = BytesParser(policy=HTTP).parsebytes(head + raw)
            fields: dict[str, Any] = {}
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                fields[str(name)] = (part.get_filename(), part.get_payload(decode=True))
            assert fields["purpose"][1] == b"batch", fields["purpose"]
            filename, data = fields["file"]
            fid = fake.new_id("file-")
            fake.files[fid] = data
            return {
                "id": fid,
                "object": "file",
                "bytes": len(data),
                "created_at": int(time.time()),
                "filename": filename,
                "purpose": "batch",
                "status": "processed",
            }

        def _json(self, payload: Any, status: int = 200) -> None:
            self._raw(json.dumps(payload).encode(), "application/json", status)

        def _raw(self, data: bytes, kind: str, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def batch_fake() -> Iterator[BatchFake]:
    yield from serving(BatchFake())

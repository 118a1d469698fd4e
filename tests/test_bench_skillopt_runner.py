"""bench/skillopt_runner.py: what the side-by-side benches share (issue 46), on loopback only."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from skillopt_runner import CountingProxy, skillopt_config, write_split  # noqa: E402


@pytest.fixture
def upstream() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A fake server: /props says 2 slots; a chat completion answers "ok" with usage."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(200, {"total_slots": 2} if self.path == "/props" else {"data": []})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            if body.get("model") == "broken":
                self._send(400, {"error": "no"})
                return
            usage = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
            self._send(200, {"choices": [{"message": {"content": "ok"}}], "usage": usage})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()
    server.server_close()


def post(url: str, body: dict[str, Any]) -> int:
    request = urllib.request.Request(
        f"{url}/chat/completions", data=json.dumps(body).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_the_proxy_names_the_roles_model_sets_their_temperature_and_counts(
    upstream: tuple[str, list[dict[str, Any]]],
) -> None:
    url, seen = upstream
    roles, caps = {"target": 0.0, "optimizer": 0.7}, {"optimizer": 1024}
    proxy = CountingProxy(url, "model.gguf", roles, caps).start()
    try:
        assert post(proxy.url, {"model": "target", "messages": []}) == 200
        body = {"model": "optimizer", "messages": [], "temperature": 0.2}
        assert post(proxy.url, body | {"max_completion_tokens": 16384}) == 200
        assert post(proxy.url, {"model": "model.gguf", "messages": []}) == 200
        assert post(proxy.url, {"model": "broken", "messages": []}) == 400
        props = proxy.url.removesuffix("/v1") + "/props"
        with urllib.request.urlopen(props, timeout=10) as r:  # GETs pass through
            assert json.load(r) == {"total_slots": 2}
    finally:
        proxy.stop()
    # A role's request goes out under the served model's name, with the role's temperature
    # where it sent none; any other request passes unchanged.
    assert [(b["model"], b.get("temperature")) for b in seen] == [
        ("model.gguf", 0.0),
        ("model.gguf", 0.2),
        ("model.gguf", None),
        ("broken", None),
    ]
    # A capped role's answer is held to its cap; others ask what they ask.
    assert seen[1]["max_completion_tokens"] == seen[1]["max_tokens"] == 1024
    assert "max_completion_tokens" not in seen[0]
    assert proxy.figures() == {
        "calls": 3,
        "failed_calls": 1,
        "prompt_tokens": 30,
        "completion_tokens": 9,
        "tokens": 39,
        "calls_by_role": {"target": 1, "optimizer": 1, "model.gguf": 1},
        "tokens_by_role": {"target": 13, "optimizer": 13, "model.gguf": 13},
    }


def test_skillopt_config_sets_the_schedule_over_the_template(tmp_path: Path) -> None:
    text = skillopt_config(
        {"train": {"num_epochs": 1}, "optimizer": {"use_slow_update": False}, "env": {"x": 3}},
        url="http://127.0.0.1:1/v1", train=6, batch=12, seed=2, skill=tmp_path / "SKILL.md",
        split=tmp_path / "split", out=tmp_path / "out",
    )  # fmt: skip
    config = yaml.safe_load(text)
    assert config["train"] == {
        "num_epochs": 1, "train_size": 6, "batch_size": 12, "accumulation": 1, "seed": 2,
    }  # fmt: skip
    assert config["optimizer"]["use_slow_update"] is False
    assert config["optimizer"]["learning_rate"] == 4  # the template's, not overridden
    assert config["env"]["x"] == 3 and config["env"]["name"] == "searchqa"
    assert config["model"]["azure_openai_endpoint"] == "http://127.0.0.1:1/v1"


def test_write_split_gives_skillopt_its_items(tmp_path: Path) -> None:
    evals = tmp_path / "evals"
    evals.mkdir()
    for name in ("train", "val", "test"):
        row = {"id": f"{name}-1", "input": f"question {name}", "target": "42"}
        (evals / f"{name}.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    write_split(evals, tmp_path / "split")
    items = json.loads((tmp_path / "split" / "val" / "items.json").read_text(encoding="utf-8"))
    assert items == [{"id": "val-1", "question": "question val", "answers": ["42"], "context": ""}]

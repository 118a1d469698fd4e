"""Running SkillOpt 0.2.0 beside skillvc: what the side-by-side benches share.

SkillOpt (``pip install skillopt==0.2.0``) is a measuring aid, never a dependency of skillvc:
it runs in a process of its own, from the interpreter given (``--skillopt-python``), and its
prompt files are read from a checkout of github.com/microsoft/SkillOpt (``--skillopt-src``;
the wheel ships none). Used by ``bench_vs_skillopt.py`` (a fake world on loopback) and by
``bench_real_model.py --side-by-side`` (a real local server, through ``CountingProxy``).

- ``SKILLOPT_YAML``: SkillOpt's config for its SearchQA environment (one target call per
  item, the answer inside <answer></answer>), its models on an OpenAI-compatible base URL;
  ``skillopt_config`` fills it and sets other keys (the schedule) over it.
- ``write_split``: a skillvc task directory's train/val/test JSONL as SkillOpt's split dir.
- ``run_skillopt``: SkillOpt's own training script, its prompt loader pointed at the checkout.
- ``CountingProxy``: a loopback proxy to a real server that counts every request and the
  tokens the server reports, names SkillOpt's roles' model and sets their temperatures (its
  Chat Completions calls send none, and a server's default is not the schedule's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

SKILLOPT_YAML = """\
model:
  backend: azure_openai
  optimizer: optimizer
  target: target
  optimizer_backend: openai_chat
  target_backend: openai_chat
  reasoning_effort: ""
  azure_openai_endpoint: "{url}"
  azure_openai_auth_mode: openai_compatible
  azure_openai_api_key: fake-world
train:
  num_epochs: 2
  train_size: {train}
  batch_size: {batch}
  accumulation: 1
  seed: {seed}
gradient:
  minibatch_size: 2
  merge_batch_size: 8
  analyst_workers: 16
  failure_only: false
optimizer:
  learning_rate: 4
  min_learning_rate: 2
  lr_scheduler: cosine
  lr_control_mode: fixed
  skill_update_mode: patch
  use_slow_update: true
  slow_update_samples: {batch}
  use_meta_skill: true
evaluation:
  use_gate: true
  sel_env_num: 0
  test_env_num: 0
  eval_test: true
env:
  name: searchqa
  skill_init: "{skill}"
  split_mode: split_dir
  split_dir: "{split}"
  out_root: "{out}"
  max_turns: 1
  max_completion_tokens: 1024
  workers: 16
  limit: 0
"""

# Runs SkillOpt's own training script with its prompt loader pointed at the checkout. With
# SKILLOPT_CLIENT_TIMEOUT set, its OpenAI clients wait that many seconds and do not resend: a
# CPU server answers a long prompt in more than the SDK's default 600 s, and a resent request
# would be computed twice (the server goes on with the first).
BOOTSTRAP = """\
import os, sys
import skillopt.prompts as p
p._PROMPTS_DIR = sys.argv.pop(1) + "/skillopt/prompts"
p._REFLACT_DIR = p._PROMPTS_DIR.rsplit("/", 1)[0]
if os.environ.get("SKILLOPT_CLIENT_TIMEOUT"):
    import functools
    import skillopt.model.azure_openai as a
    a.OpenAI = functools.partial(
        a.OpenAI, timeout=float(os.environ["SKILLOPT_CLIENT_TIMEOUT"]), max_retries=0
    )
import runpy
runpy.run_module("scripts.train", run_name="__main__")
"""


def skillopt_config(overrides: dict[str, dict[str, Any]] | None = None, **fill: Any) -> str:
    """``SKILLOPT_YAML`` filled with ``fill`` (url, train, batch, seed, skill, split, out),
    then each ``overrides[section][key]`` set over it."""
    config = yaml.safe_load(SKILLOPT_YAML.format(**fill))
    for section, values in (overrides or {}).items():
        config.setdefault(section, {}).update(values)
    return str(yaml.safe_dump(config, sort_keys=False))


def write_split(evals: Path, split: Path) -> None:
    """skillvc's ``evals/{train,val,test}.jsonl`` as SkillOpt's split dir: ``<split>/<name>/
    items.json``, each item's question its input, its one gold answer its target."""
    for name in ("train", "val", "test"):
        rows = [json.loads(line) for line in (evals / f"{name}.jsonl").read_text().splitlines()]
        items = [
            {"id": r["id"], "question": r["input"], "answers": [r["target"]], "context": ""}
            for r in rows
        ]
        (split / name).mkdir(parents=True, exist_ok=True)
        (split / name / "items.json").write_text(json.dumps(items), encoding="utf-8")


def run_skillopt(
    python: str,
    src: Path,
    config: Path,
    *,
    cwd: Path | None = None,
    timeout: float = 1800,
    log: Path | None = None,
) -> tuple[str, float]:
    """SkillOpt's training script on ``config``: its stdout and the wall time. Its output goes
    to ``log`` as it comes when one is given (a long run can be watched), else is captured."""
    argv = [python, "-c", BOOTSTRAP, str(src), "--config", str(config)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    if log is None:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env
        )
        code, out, err = done.returncode, done.stdout, done.stderr
    else:
        with log.open("w", encoding="utf-8") as sink:
            code = subprocess.run(
                argv, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout, cwd=cwd, env=env
            ).returncode
        out, err = log.read_text(encoding="utf-8", errors="replace"), ""
    wall = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"SkillOpt failed:\n{out[-3000:]}\n{err[-3000:]}")
    return out, wall


# -- counting the calls to a real server ---------------------------------------------------------


@dataclass
class Counted:
    start: float
    end: float
    role: str
    prompt_tokens: int
    completion_tokens: int
    status: int


class _Server(ThreadingHTTPServer):
    # A provider's endpoint takes a burst of connections. socketserver's default listen backlog
    # (5) dropped connection attempts when a wave opened 16-32 at once; the client's TCP resends
    # a dropped SYN after 1 s, which put a whole second into about one run in four.
    request_queue_size = 128
    daemon_threads = True


class Loopback:
    """A loopback HTTP server on a free port, served from a daemon thread: the benches' fake
    world and counting proxy (each sets ``server`` through ``serve``)."""

    server: ThreadingHTTPServer | None

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = _Server(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def add_skillopt_arguments(parser: argparse.ArgumentParser) -> None:
    """``--skillopt-python`` and ``--skillopt-src``, as both benches take them."""
    parser.add_argument(
        "--skillopt-python",
        default=os.environ.get("SKILLOPT_PYTHON", sys.executable),
        help="the interpreter SkillOpt 0.2.0 is installed in (default: this one)",
    )
    parser.add_argument(
        "--skillopt-src",
        default=os.environ.get("SKILLOPT_SRC", ""),
        help="a checkout of github.com/microsoft/SkillOpt (its prompt files)",
    )


@dataclass
class CountingProxy(Loopback):
    """A loopback OpenAI-compatible endpoint in front of ``upstream`` (a base URL ending in
    /v1): requests pass through unchanged, except that a request whose ``model`` is a key of
    ``roles`` is sent as ``model`` with ``roles[key]`` as its temperature when it has none, and
    its answer held to ``caps[key]`` tokens where it asks for more. Every POST is recorded
    with the tokens the server reports in ``usage``."""

    upstream: str
    model: str = ""
    roles: dict[str, float] = field(default_factory=dict)
    caps: dict[str, int] = field(default_factory=dict)
    timeout_s: float = 3600
    calls: list[Counted] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    def start(self) -> CountingProxy:
        proxy = self
        base = self.upstream.rstrip("/").removesuffix("/v1")

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self, data: bytes | None) -> tuple[int, bytes, str]:
                request = urllib.request.Request(  # noqa: S310 - a loopback bench
                    base + self.path, data=data, method=self.command
                )
                for key in ("Content-Type", "Authorization", "Accept"):
                    if self.headers.get(key):
                        request.add_header(key, self.headers[key])
                try:
                    with urllib.request.urlopen(request, timeout=proxy.timeout_s) as r:  # noqa: S310
                        return r.status, r.read(), r.headers.get("Content-Type", "")
                except urllib.error.HTTPError as e:
                    return e.code, e.read(), e.headers.get("Content-Type", "")

            def _reply(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind or "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._reply(*self._forward(None))

            def do_POST(self) -> None:
                start = time.perf_counter()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                role = str(body.get("model", ""))
                if role in proxy.roles:
                    body["model"] = proxy.model or role
                    body.setdefault("temperature", proxy.roles[role])
                    if role in proxy.caps:
                        for key in ("max_completion_tokens", "max_tokens"):
                            asked = body.get(key)
                            body[key] = min(int(asked or proxy.caps[role]), proxy.caps[role])
                status, data, kind = self._forward(json.dumps(body).encode())
                usage: dict[str, Any] = {}
                with contextlib.suppress(ValueError, AttributeError):
                    usage = json.loads(data).get("usage") or {}
                with proxy.lock:
                    proxy.calls.append(
                        Counted(
                            start,
                            time.perf_counter(),
                            role,
                            int(usage.get("prompt_tokens") or 0),
                            int(usage.get("completion_tokens") or 0),
                            status,
                        )
                    )
                self._reply(status, data, kind)

        self.serve(Handler)
        return self

    def figures(self) -> dict[str, Any]:
        """Calls (answered with 200), failed calls, tokens, and both by role."""
        with self.lock:
            calls = list(self.calls)
        ok = [c for c in calls if c.status == 200]
        by_role: dict[str, int] = {}
        tokens_by_role: dict[str, int] = {}
        for c in ok:
            by_role[c.role] = by_role.get(c.role, 0) + 1
            tokens_by_role[c.role] = (
                tokens_by_role.get(c.role, 0) + c.prompt_tokens + c.completion_tokens
            )
        return {
            "calls": len(ok),
            "failed_calls": len(calls) - len(ok),
            "prompt_tokens": sum(c.prompt_tokens for c in ok),
            "completion_tokens": sum(c.completion_tokens for c in ok),
            "tokens": sum(c.prompt_tokens + c.completion_tokens for c in ok),
            "calls_by_role": by_role,
            "tokens_by_role": tokens_by_role,
        }

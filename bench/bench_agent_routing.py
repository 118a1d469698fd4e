"""Routing read from a real agent CLI's activation (issue 41, item 2b), end to end.

Not part of CI: it needs the real ``claude`` (``npm install @anthropic-ai/claude-code``) or
``codex`` (``npm install @openai/codex``). It writes a library of three skills (csv, pdf,
slides; csv's description names none of its prompts' words) with 5 train and 7 val trigger
prompts into a fresh git repository, points the CLI at a fake model API that this script
serves on 127.0.0.1, and runs ``eval --routing``, ``train --routing`` (``sim:routing`` as the
optimizer) and ``eval --routing`` again with the CLI as the selector. The fake model is a toy
selector over *the CLI's own listing*: it reads the skills the CLI lists to the model (Claude
Code's ``<system-reminder>`` for the Skill tool, Codex's ``<skills_instructions>`` with its
skill roots), picks the one whose description shares the most words of five letters or more
with the prompt, and loads it the CLI's way (a ``Skill`` tool call; a shell ``cat`` of the
expanded SKILL.md path), then answers "Done.". So what is checked is the CLI's side: that it
lists the installed library, and that skillvc reads the load from its output.

Run it where nothing can leave the loopback interface, e.g. in a network namespace::

    unshare -n sh -c 'ip link set lo up && python bench/bench_agent_routing.py \\
        --claude /tmp/cc/node_modules/.bin/claude'
    unshare -n sh -c 'ip link set lo up && python bench/bench_agent_routing.py \\
        --codex /tmp/codex/node_modules/.bin/codex'
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from skillvc.routing.evaluate import evaluate_routing
from skillvc.routing.train import summary_lines, train_routing
from skillvc.workspace.workspace import open_workspace

SKILLS = {
    "csv": "Tables of values.",
    "pdf": "Portable documents, merge and split.",
    "slides": "Presentations and decks.",
}
VAL = [
    ("pdf-0", "Merge these two documents", "pdf"),
    ("pdf-1", "Split the report into pages", "pdf"),
    ("slides-0", "Build presentations for Monday", "slides"),
    ("csv-0", "Parse the spreadsheet export", "csv"),
    ("csv-1", "Clean the spreadsheet columns", "csv"),
    ("csv-2", "Sort spreadsheet rows by date", "csv"),
    ("none-0", "Tell me a joke", None),
]
TRAIN = [
    ("t-csv-0", "Dedupe the spreadsheet entries", "csv"),
    ("t-csv-1", "Total each spreadsheet column", "csv"),
    ("t-csv-2", "Export the spreadsheet columns", "csv"),
    ("t-pdf-0", "Merge the contract documents", "pdf"),
    ("t-none-0", "What time is it", None),
]
DECISIONS: list[dict[str, Any]] = []  # what the fake model saw and picked, per first turn


def words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 5}


def pick(listed: dict[str, str], prompt: str) -> str | None:
    best, score = None, 0
    for name, description in listed.items():
        s = len(words(description) & words(prompt))
        if s > score:
            best, score = name, s
    return best


def texts(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        elif isinstance(c, list):
            out += [str(b.get("text", "")) for b in c if isinstance(b, dict)]
    return out


def claude_turn(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages API content block: a Skill call on a task's first turn, else text."""
    messages = body.get("messages") or []
    results = any(
        isinstance(b, dict) and b.get("type") == "tool_result"
        for m in messages
        if isinstance(m.get("content"), list)
        for b in m["content"]
    )
    tools = [t.get("name") for t in body.get("tools") or []]
    if results or "Skill" not in tools or not messages:
        return {"type": "text", "text": "Done."}
    listed: dict[str, str] = {}
    for t in texts(messages):
        at = t.find("The following skills are available for use with the Skill tool:")
        for line in t[at:].splitlines()[1:] if at >= 0 else []:
            m = re.match(r"^- ([A-Za-z0-9._:-]+): (.*)$", line)
            if m:
                listed[m.group(1)] = m.group(2)
    prompt = next(
        (t for t in reversed(texts(messages[-1:])) if t and "<system-reminder>" not in t), ""
    )
    chosen = pick(listed, prompt)
    DECISIONS.append({"prompt": prompt, "listed": sorted(listed), "pick": chosen})
    if chosen is None:
        return {"type": "text", "text": "Done."}
    return {"type": "tool_use", "id": "toolu_1", "name": "Skill", "input": {"skill": chosen}}


def codex_turn(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses API output item: a shell read of SKILL.md on a task's first turn, else text."""
    items = body.get("input") or []
    if any(i.get("type") == "function_call_output" for i in items):
        return _message("Done.")
    listed: dict[str, str] = {}
    paths: dict[str, str] = {}
    for t in [body.get("instructions") or "", *texts(items)]:
        roots = dict(re.findall(r"^- `(r\d+)` = `([^`]+)`", t, re.M))
        for m in re.finditer(r"^- ([A-Za-z0-9._:-]+): (.*?) \(file: ([^)]+)\)\s*$", t, re.M):
            root, _, rest = m.group(3).partition("/")
            listed[m.group(1)] = m.group(2)
            paths[m.group(1)] = f"{roots[root]}/{rest}" if root in roots else m.group(3)
    users = [i for i in items if i.get("role") == "user"]
    prompt = next(
        (t.strip() for t in reversed(texts(users)) if t and not t.lstrip().startswith("<")), ""
    )
    chosen = pick(listed, prompt)
    DECISIONS.append({"prompt": prompt, "listed": sorted(listed), "pick": chosen})
    if chosen is None:
        return _message("Done.")
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "exec_command",
        "arguments": json.dumps({"cmd": f"cat {paths[chosen]}"}),
        "status": "completed",
    }


def _message(text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": content}  # fmt: skip


class FakeApi(BaseHTTPRequestHandler):
    """Anthropic Messages (``/v1/messages``, streamed or not) and OpenAI Responses
    (``/v1/responses``, streamed) with one turn each, from ``claude_turn``/``codex_turn``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send("application/json", json.dumps({"data": [], "object": "list"}))

    def do_POST(self) -> None:
        size = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(size) or b"{}")
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            return self._send("application/json", json.dumps({"input_tokens": 100}))
        if path.endswith("/messages"):
            return self._messages(body)
        if path.endswith("/responses"):
            return self._responses(body)
        self._send("application/json", "{}")

    def _messages(self, body: dict[str, Any]) -> None:
        block = claude_turn(body)
        stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
        message = {"id": "msg_1", "type": "message", "role": "assistant",
                   "model": body.get("model"), "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": 100, "output_tokens": 5}}  # fmt: skip
        if not body.get("stream"):
            done = {**message, "content": [block], "stop_reason": stop}
            return self._send("application/json", json.dumps(done))
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"message": {**message, "content": []}}),
            ("content_block_start", {"index": 0, "content_block": start}),
            ("content_block_delta", {"index": 0, "delta": delta}),
            ("content_block_stop", {"index": 0}),
            ("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}}),
            ("message_stop", {}),
        ]
        self._sse(events)

    def _responses(self, body: dict[str, Any]) -> None:
        item = codex_turn(body)
        response: dict[str, Any] = {"id": "resp_1", "object": "response", "output": []}
        response.update(model=body.get("model"), status="in_progress")
        usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": 105}  # fmt: skip
        done = {**response, "status": "completed", "output": [item], "usage": usage}
        self._sse(
            [
                ("response.created", {"response": response}),
                ("response.output_item.added", {"output_index": 0, "item": item}),
                ("response.output_item.done", {"output_index": 0, "item": item}),
                ("response.completed", {"response": done}),
            ]
        )

    def _sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        data = "".join(
            f"event: {name}\ndata: {json.dumps({'type': name, **payload})}\n\n"
            for name, payload in events
        )
        self._send("text/event-stream", data)

    def _send(self, kind: str, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(repo: Path, preset: str, executable: str, port: int) -> None:
    git(repo, "init", "-q", "-b", "main")
    for name, description in SKILLS.items():
        path = repo / "skills" / name / "SKILL.md"
        path.parent.mkdir(parents=True)
        path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n")
    (repo / "evals").mkdir()
    for split, rows in (("train", TRAIN), ("val", VAL)):
        lines = [json.dumps({"id": i, "input": p, "skill": s}) + "\n" for i, p, s in rows]
        (repo / "evals" / f"{split}.jsonl").write_text("".join(lines))
    url = f"http://127.0.0.1:{port}"
    if preset == "claude-code":
        target = (
            f'args = ["--model", "claude-sonnet-4-5"]\n\n[target.env]\nANTHROPIC_BASE_URL = '
            f'"{url}"\nANTHROPIC_AUTH_TOKEN = "local"\n'
            'CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1"\nDISABLE_AUTOUPDATER = "1"\n'
        )
    else:
        (repo / "codex").mkdir()
        (repo / "codex" / "config.toml").write_text(
            'model = "gpt-5-codex"\nmodel_provider = "local"\n\n[model_providers.local]\n'
            f'name = "local"\nbase_url = "{url}/v1"\nenv_key = "LOCAL_KEY"\n'
            'wire_api = "responses"\n'
        )
        target = 'files = ["codex/config.toml"]\n\n[target.env]\nLOCAL_KEY = "local"\n'
    tables = "".join(f'[skills.{n}]\npath = "skills/{n}/SKILL.md"\n\n' for n in SKILLS)
    (repo / "skillvc.toml").write_text(
        f'[target]\nmodel = "command:{preset}"\nharness = "{preset}"\n'
        f'executable = "{executable}"\ntask_timeout_s = 120\n{target}\n'
        '[optimizer]\nmodel = "sim:routing"\n\n[train]\nworkers = 2\n\n'
        '[routing]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\nepochs = 1\n\n' + tables
    )
    (repo / ".gitignore").write_text(".skillvc/\n")
    for key, value in (("user.name", "bench"), ("user.email", "bench@example.invalid")):
        git(repo, "config", key, value)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a library of three skills")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--claude", help="the real claude executable")
    parser.add_argument("--codex", help="the real codex executable")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    if bool(args.claude) == bool(args.codex):
        parser.error("give one of --claude PATH or --codex PATH")
    preset, executable = ("claude-code", args.claude) if args.claude else ("codex", args.codex)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), FakeApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    repo = Path(tempfile.mkdtemp(prefix="bench-agent-routing-"))
    make_repo(repo, preset, str(Path(executable).resolve()), args.port)
    ws = open_workspace(repo, any_skill=True)
    before, _ = evaluate_routing(ws, None, "val")
    summary = train_routing(open_workspace(repo, any_skill=True), progress=lambda line: None)
    after, facts = evaluate_routing(open_workspace(repo, any_skill=True), None, "val")
    server.shutdown()
    print(f"selector {preset} ({executable}); the fake model's first turns:")
    for d in DECISIONS[: len(VAL)]:
        print(f"  {d['prompt']!r}: picked {d['pick']}; listed {', '.join(d['listed'])}")
    print("picks before:", {p.item: p.picked for p in before.picks})
    print("picks after: ", {p.item: p.picked for p in after.picks})
    print("\n".join(summary_lines(summary)))
    print(f"repository: {repo}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""skillvc side by side with SkillOpt in one fake OpenAI-compatible world (issue 27).

The world: the simulator's support world (``sim:support``) behind a loopback HTTP server on
127.0.0.1 that speaks Chat Completions, answers every request after a fixed latency (default
200 ms) and records it (start, end, model, prompt and completion tokens, counted as the
simulator counts them: 4 characters a token). Both trainers talk to it through the real
``openai`` SDK, with the same split (bench_rounds.py's configs) and hyperparameters: 2 epochs,
batch 8, minibatch 2, learning rate 4 -> 2 (cosine), slow update and meta skill, and for
skillvc what SkillOpt runs: the paper's bundle gate (``attribution = false``) and SkillOpt's
slow-update schedule (``slow_update_from_epoch = 2``: SkillOpt leaves the guidance region
empty at the end of epoch 1 and compares two epochs' skills from the end of epoch 2 on, where
skillvc's default also compares the seed skill with epoch 1's).

Printed per trainer: requests, dependent rounds (maximal sets of overlapping requests), tokens
(prompt + completion) and wall time; then the ratios skillvc / SkillOpt (issue 27's targets:
tokens <= 0.5x, requests <= 0.9x, wall <= 0.55x; issue 44's for skillvc's default: requests
<= 1.0x, tokens <= 0.5x, wall <= 0.55x).

Issue 44: ``--gate default`` runs skillvc with its defaults (attribution on, its own slow-update
schedule) instead of the paper's recipe, ``--gate both`` (the default) both; for each run the
bench also prints the bound on dependent rounds its decisions need (``bench_rounds.bound``,
read from its event log) and, with ``--breakdown``, its requests by stage (``breakdown.py``).
``--seeds 1-7 --configs small,large`` runs several, then pooled ratios with the worst seed and
how many meet each goal; ``--skillopt-record FILE`` keeps SkillOpt's figures (each run added
with ``--skillopt``; without it the recorded median stands in); ``--json FILE`` writes every
run's figures.

SkillOpt (``pip install skillopt==0.2.0``, a measuring aid, never a dependency of skillvc) is run
when it is installed and ``--skillopt`` is given; see ``skillopt_figures``. Without it, skillvc's
figures are printed with the ratios issue 27 states (skillvc before it / SkillOpt).

    python bench/bench_vs_skillopt.py [--latency-ms 200] [--config small] [--seed 1]
        [--seeds 1-7 --configs small,large] [--gate bundle|default|both] [--breakdown]
        [--set KEY=VALUE] [--skillopt-record FILE] [--json FILE] [--env searchqa|officeqa]
        [--skillopt --skillopt-src PATH-TO-A-CHECKOUT-OF-microsoft/SkillOpt
        --skillopt-python PYTHON-WITH-SKILLOPT-0.2.0]

``--env officeqa`` is a tool-using world instead (``officeqa_world.py``): SkillOpt runs its own
OfficeQA environment (its glob/read/grep tool loop) and skillvc what ``skillvc init
--from-skillopt`` makes of the same config (``[tools] python`` = the shipped OfficeQA tools);
it prints both sides' seed and final val and test, rollouts, requests, tokens and wall time.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rounds import CONFIGS, TOML, make_repo  # noqa: E402
from skillopt_runner import (  # noqa: E402 - shared with bench_real_model.py
    SKILLOPT_YAML,
    Loopback,
    add_skillopt_arguments,
    run_skillopt,
    write_split,
)

from skillvc.models.backends import CallRequest  # noqa: E402
from skillvc.models.backends.sim import SimBackend  # noqa: E402

# The issue's measurement (SkillOpt 0.2.0 vs skillvc before issue 27, small config, 200 ms):
# skillvc's share of SkillOpt's figures. Shown when SkillOpt itself is not run.
ISSUE_RATIOS = {"requests": (0.91, 0.93), "rounds": (0.51, 0.53), "tokens": (0.56, 0.65)}
ISSUE_WALL = (0.60, 0.67)
TARGETS = {"tokens": 0.5, "requests": 0.9, "wall": 0.55}


@dataclass
class Request:
    start: float
    end: float
    model: str
    prompt_tokens: int
    completion_tokens: int
    opens: bool = False  # a target request that starts a conversation (a rollout's first turn)


@dataclass
class FakeWorld(Loopback):
    """The loopback Chat Completions server; ``respond(model, messages, body)`` answers: a
    text, or a tool world's turn (``{"text": ...}`` or ``{"tool_calls": [...]}``)."""

    respond: Callable[[str, list[dict[str, Any]], dict[str, Any]], str | dict[str, Any]]
    latency_s: float = 0.2
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    def start(self) -> FakeWorld:
        world = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # else Nagle adds ~40 ms to a reply (delayed ACK)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # no server props: skillvc treats it as a hosted API
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                start = time.perf_counter()
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                messages = [_message(m) for m in body.get("messages", [])]
                reply = world.respond(body.get("model", ""), messages, body)
                text, calls = (reply, []) if isinstance(reply, str) else _turn(reply)
                time.sleep(max(0.0, world.latency_s - (time.perf_counter() - start)))
                # A tool world's prompt also holds the tool schemas and the calls made so far,
                # as a provider counts them (none of them in SearchQA's world).
                sent = " ".join(m["content"] for m in messages) + _tool_text(body, messages)
                prompt = max(1, len(sent) // 4)
                completion = max(
                    1, len(text + "".join(c["function"]["arguments"] for c in calls)) // 4
                )
                with world.lock:
                    world.requests.append(
                        Request(
                            start,
                            time.perf_counter(),
                            body.get("model", ""),
                            prompt,
                            completion,
                            not any(m["role"] in ("assistant", "tool") for m in messages),
                        )
                    )
                payload = {
                    "id": f"chatcmpl-{len(world.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", ""),
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": text if text or not calls else None,
                            }
                            | ({"tool_calls": calls} if calls else {}),
                            "finish_reason": "tool_calls" if calls else "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": prompt,
                        "completion_tokens": completion,
                        "total_tokens": prompt + completion,
                    },
                }
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.serve(Handler)
        return self

    def figures(self, wall: float, started: float | None = None) -> dict[str, Any]:
        rounds: list[tuple[float, float]] = []
        for r in sorted(self.requests, key=lambda r: r.start):
            if rounds and r.start < rounds[-1][1]:
                rounds[-1] = (rounds[-1][0], max(rounds[-1][1], r.end))
            else:
                rounds.append((r.start, r.end))
        by_model: dict[str, int] = {}
        tokens_by_model: dict[str, int] = {}
        for r in self.requests:
            by_model[r.model] = by_model.get(r.model, 0) + 1
            tokens_by_model[r.model] = (
                tokens_by_model.get(r.model, 0) + r.prompt_tokens + r.completion_tokens
            )
        return {
            "requests": len(self.requests),
            "rounds": len(rounds),
            "prompt_tokens": sum(r.prompt_tokens for r in self.requests),
            "completion_tokens": sum(r.completion_tokens for r in self.requests),
            "tokens": sum(r.prompt_tokens + r.completion_tokens for r in self.requests),
            "wall": wall,
            # From the first request's start to the last one's end: the run without its
            # process start and its work before the first call and after the last.
            "span": max(r.end for r in self.requests) - min(r.start for r in self.requests)
            if self.requests
            else 0.0,
            "by_model": by_model,
            "tokens_by_model": tokens_by_model,
            # Target requests that open a conversation: one a rollout in a tool world.
            "rollouts": sum(1 for r in self.requests if r.opens and r.model == "target"),
            # The trainer's own time before its first request and after its last one.
            "head": min(r.start for r in self.requests) - started
            if started is not None and self.requests
            else 0.0,
            "tail": started + wall - max(r.end for r in self.requests)
            if started is not None and self.requests
            else 0.0,
        }


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _message(m: dict[str, Any]) -> dict[str, Any]:
    """A request's message as the world reads it: role and text, and a tool world's calls."""
    out = {"role": m["role"], "content": _text(m.get("content"))}
    for key in ("tool_calls", "tool_call_id"):
        if m.get(key):
            out[key] = m[key]
    return out


def _turn(reply: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """A tool world's turn (``{"text"}`` or ``{"tool_calls": [{id, name, arguments}]}``) in
    Chat Completions' words."""
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for c in reply.get("tool_calls") or ()
    ]
    return str(reply.get("text") or ""), calls


def _tool_text(body: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    tools = json.dumps(body["tools"]) if body.get("tools") else ""
    calls = "".join(
        c.get("function", {}).get("name", "") + c.get("function", {}).get("arguments", "")
        for m in messages
        for c in m.get("tool_calls") or ()
    )
    return tools + calls


def sim_respond(model: str, messages: list[dict[str, str]], body: dict[str, Any]) -> str:
    """skillvc's prompts answered by the simulator: model "target" or "optimizer"."""
    role = "optimizer" if model == "optimizer" else "target"
    params: dict[str, Any] = {k: body[k] for k in ("temperature", "seed") if k in body}
    request = CallRequest(role, "sim:support", tuple(messages), params)
    return SimBackend("sim:support").complete(request).text


# bench_rounds' config, its models served by the loopback world, in the paper's bundle gate.
SKILLVC_DEFAULT_TOML = TOML.replace(
    '[target]\nmodel = "sim:support"', '[target]\nmodel = "openai:target"\nbase_url = "{url}"'
).replace(
    '[optimizer]\nmodel = "sim:support"',
    '[optimizer]\nmodel = "openai:optimizer"\nbase_url = "{url}"',
)
# The paper's recipe, as SkillOpt runs it: the bundle gate and SkillOpt's slow-update schedule.
SKILLVC_TOML = (
    TOML.replace(
        '[target]\nmodel = "sim:support"', '[target]\nmodel = "openai:target"\nbase_url = "{url}"'
    )
    .replace(
        '[optimizer]\nmodel = "sim:support"',
        '[optimizer]\nmodel = "openai:optimizer"\nbase_url = "{url}"',
    )
    .replace("seed = {seed}", "attribution = false\nslow_update_from_epoch = 2\nseed = {seed}")
)


def skillvc_figures(
    sizes: dict[str, int],
    seed: int,
    latency_s: float,
    gate: str = "bundle",
    settings: tuple[str, ...] = (),
) -> dict[str, Any]:
    """skillvc's ``train`` command in a process of its own, as SkillOpt runs (the fake world's
    server threads stay in this process, off the trainer's interpreter lock). ``gate``:
    ``bundle`` (the paper's recipe, as SkillOpt runs it) or ``default`` (skillvc's defaults);
    ``settings``: more ``[train]`` lines (``key = value``)."""
    from bench_rounds import bound
    from breakdown import breakdown
    from git import Repo

    world = FakeWorld(sim_respond, latency_s).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "repo"
            make_repo(repo, sizes, seed)
            template = SKILLVC_TOML if gate == "bundle" else SKILLVC_DEFAULT_TOML
            toml = template.format(url=world.url, batch=sizes["batch"], seed=seed)
            if settings:
                toml = toml.replace("seed = ", "\n".join(settings) + "\nseed = ", 1)
            (repo / "skillvc.toml").write_text(toml, encoding="utf-8")
            Repo(repo).git.commit("-q", "-am", "the fake world's models")
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "skillvc", "train", "-q"],
                cwd=repo,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            wall = time.perf_counter() - start
            if done.returncode != 0:
                raise RuntimeError(f"skillvc failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
            db = repo / ".skillvc" / "events.db"
            split = breakdown(db)
            events = _sequenced(db)
            run = json.loads(
                _run([sys.executable, "-m", "skillvc", "runs", "--json"], repo).stdout
            )[0]
    finally:
        world.stop()
    out = world.figures(wall, start)
    out["result"] = (
        f"val {run['baseline_val']:.3f} -> {run['best_val']:.3f}, test {run['baseline_test']:.3f}"
        f" -> {run['test']:.3f}; steps {run['steps']}: {run['accepted']} accepted, "
        f"{run['rejected']} rejected"
    )
    out["breakdown"] = split
    # The dependent rounds this run's decisions need (bench_rounds.bound: 16 workers).
    out["bound"] = bound(events, workers=16, minibatch=2, early_stop=True)
    return out


def _sequenced(db: Path) -> list[tuple[str, dict[str, Any]]]:
    import sqlite3

    con = sqlite3.connect(str(db))
    try:
        (run_id,) = con.execute(
            "SELECT run_id FROM events WHERE type = 'run.started' ORDER BY id DESC LIMIT 1"
        ).fetchone()
        rows = con.execute(
            "SELECT type, payload FROM events WHERE run_id = ? AND seq IS NOT NULL ORDER BY seq",
            [run_id],
        ).fetchall()
    finally:
        con.close()
    return [(t, json.loads(p)) for t, p in rows]


# -- SkillOpt in the same world ----------------------------------------------------------------
#
# SkillOpt's own loop (its trainer and its SearchQA environment: one target call per item, the
# answer inside <answer></answer>, exact match) on the same split, its prompts answered by the
# same simulator: a target call as the simulated target answers it (the skill is in the system
# message), an analyst's call (one per minibatch) by the simulated optimizer of skillvc's
# reflection (the same skill and cases, its edits written in SkillOpt's ops), a merge by the
# union of the patches' edits (support counted), a ranking by support, the slow update and the
# meta skill by a fixed short text. SkillOpt's wheel ships no prompt files (its package data
# is missing): they are read from a checkout of github.com/microsoft/SkillOpt (--skillopt-src).


class SkillOptWorld:
    """Answers SkillOpt's requests (see above); ``stages`` counts them by prompt."""

    guidance = "Apply the policies above to the ticket's issue, days and tier."
    meta = "Prefer general rules."

    def __init__(self, src: Path) -> None:
        self.prompts: dict[str, str] = {}
        for path in sorted((src / "skillopt").glob("**/prompts/*.md")):
            env = path.parent.parent.name
            name = path.stem if env == "skillopt" else f"{env}/{path.stem}"
            self.prompts[name] = path.read_text(encoding="utf-8").strip()
        self.stages: dict[str, int] = {}
        self.lock = threading.Lock()

    def stage(self, system: str) -> str:
        for name, text in self.prompts.items():
            if system.strip().startswith(text[:200]):
                return name
        return "other"

    def __call__(
        self, model: str, messages: list[dict[str, Any]], body: dict[str, Any]
    ) -> str | dict[str, Any]:
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = next((m["content"] for m in messages if m["role"] == "user"), "")
        name = "target" if model == "target" else self.stage(system)
        with self.lock:
            self.stages[name] = self.stages.get(name, 0) + 1
        if model == "target":
            return self.target(messages, body)
        base = name.rsplit("/", 1)[-1]
        if base.startswith("analyst_"):
            return json.dumps(self.analyst(user, failures=base == "analyst_error"))
        if base.startswith("merge_"):
            return json.dumps({"reasoning": "union, by support", "edits": _merged(user)})
        if base.startswith("ranking"):
            edits = _edits_in(user)
            order = sorted(
                range(len(edits)), key=lambda i: -int(edits[i].get("support_count") or 1)
            )
            return json.dumps({"reasoning": "by support", "selected_indices": order})
        if base == "slow_update":
            return json.dumps({"reasoning": "", "slow_update_content": self.guidance})
        if base == "meta_skill":
            return json.dumps({"reasoning": "", "meta_skill_content": self.meta})
        return "{}"

    def target(self, messages: list[dict[str, Any]], body: dict[str, Any]) -> str | dict[str, Any]:
        return sim_respond("target", messages, body)

    def analyst(self, user: str, *, failures: bool) -> dict[str, Any]:
        from skillvc.models import prompts

        skill = user.split("## Current Skill\n", 1)[-1].split("\n\n## ", 1)[0]
        m = re.search(r"at most L=(\d+)", user)
        budget = m.group(1) if m else "4"
        cases = []
        for block in user.split("### Trajectory ")[1:]:
            ident = re.search(r"\(id=([^)]*)\)", block)
            gold = re.search(r"Gold answers: (\[.*?\])", block)
            cases.append(
                {
                    "id": ident.group(1) if ident else "",
                    "input": block,
                    "expected": ast.literal_eval(gold.group(1))[0] if gold else "",
                    "score": 0.0 if failures else 1.0,
                }
            )
        kind = "failures" if failures else "successes"
        messages = prompts.render(
            "reflect", n_cases=str(len(cases)), kind=kind, kind_note=kind, budget=budget,
            skill=skill, cases=cases, rejected=[], meta="(none yet)",
        )  # fmt: skip
        ours = json.loads(sim_respond("optimizer", messages, {}))["edits"]
        edits = []
        for e in ours:
            if e["op"] == "add" and e.get("anchor"):
                edits.append({"op": "insert_after", "target": e["anchor"], "content": e["content"]})
            elif e["op"] == "add":
                edits.append({"op": "append", "content": e["content"]})
            else:
                edits.append({k: e[k] for k in ("op", "target", "content") if k in e})
        return {
            "batch_size": len(cases),
            "failure_summary": [],
            "patch": {"reasoning": "the simulated optimizer", "edits": edits},
        }


def _edits_in(text: str) -> list[dict[str, Any]]:
    """The edits of the JSON after the skill in a SkillOpt prompt (patches, or a list)."""
    decoder = json.JSONDecoder()
    start = text.find("## ", text.find("## Current Skill") + 3)
    for i in range(max(start, 0), len(text)):
        if text[i] not in "[{":
            continue
        try:
            value, _ = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            continue
        found = _collect(value)
        if found:
            return found
    return []


def _collect(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict) and "op" in value:
        return [value]
    if isinstance(value, dict):
        inner = value.get("edits", value.get("patch"))
        return _collect(inner) if inner is not None else []
    if isinstance(value, list):
        return [e for v in value for e in _collect(v)]
    return []


def _merged(user: str) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for e in _edits_in(user):
        key = json.dumps([e.get("op"), e.get("target") or "", e.get("content") or ""])
        if key in out:
            out[key]["support_count"] += int(e.get("support_count") or 1)
        else:
            out[key] = {**e, "support_count": int(e.get("support_count") or 1)}
    return sorted(out.values(), key=lambda e: -e["support_count"])


def skillopt_figures(
    sizes: dict[str, int], seed: int, latency_s: float, src: Path, python: str = sys.executable
) -> dict[str, Any]:
    world = SkillOptWorld(src)
    server = FakeWorld(world, latency_s).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "repo"
            make_repo(repo, sizes, seed)
            split = Path(tmp) / "split"
            write_split(repo / "evals", split)
            config = Path(tmp) / "skillopt.yaml"
            config.write_text(
                SKILLOPT_YAML.format(
                    url=server.url, train=sizes["train"], batch=sizes["batch"], seed=seed,
                    skill=repo / "skills/acme-returns/SKILL.md", split=split, out=Path(tmp) / "out",
                ),
                encoding="utf-8",
            )  # fmt: skip
            start = time.perf_counter()
            stdout, wall = run_skillopt(python, src, config)
            lines = [line for line in stdout.splitlines() if "test" in line.lower()]
    finally:
        server.stop()
    out = server.figures(wall, start)
    out["by_model"] = {**out["by_model"], "stages": dict(sorted(world.stages.items()))}
    out["result"] = "; ".join(line.strip() for line in lines[-2:])
    return out


# -- a tool-using environment: OfficeQA -----------------------------------------------------------
#
# officeqa_world.py's fake world (documents only the document tools reach, a target that calls
# them and converts units only as the skill says, an optimizer that proposes the missing rules
# from failed trajectories) behind the same loopback server. SkillOpt runs its own OfficeQA
# environment (its rollout loop sends its glob/read/grep schemas and runs the calls the fake
# target makes in ``message.tool_calls``, its offline search mode) from OFFICEQA_YAML; skillvc
# runs what ``skillvc init --from-skillopt`` makes of the same YAML: the officeqa task set and
# scorer, ``[tools] python`` = the shipped skillvc.tasks.skillopt.tools.officeqa, the same
# models, schedule, gate and sizes. Both see the same split and documents.

OFFICEQA_YAML = (
    SKILLOPT_YAML.split("env:\n", 1)[0]
    + """\
env:
  name: officeqa
  skill_init: "{skill}"
  split_mode: split_dir
  split_dir: "{split}"
  data_dirs:
    - "{docs}"
  out_root: "{out}"
  workers: 16
  max_tool_turns: 8
  max_completion_tokens: 1024
  search_mode: offline
  limit: 0
"""
)


def officeqa_repo(repo: Path, sizes: dict[str, int], seed: int) -> None:
    """A git repository with the generated split, its documents and the seed skill."""
    from git import Repo
    from officeqa_world import make_split

    repo.mkdir(parents=True)
    make_split(repo, sizes, seed)
    git = Repo.init(repo).git
    git.add("-A")
    git.commit("-q", "-m", "the fake OfficeQA world")


def officeqa_yaml(at: Path, url: str, sizes: dict[str, int], seed: int, out: Path) -> str:
    """OFFICEQA_YAML with paths under ``at`` (the repository's root, or '' for relative)."""

    def path(rel: str) -> str:
        return str(at / rel) if str(at) else rel

    return OFFICEQA_YAML.format(
        url=url, train=0, batch=sizes["batch"], seed=seed, skill=path("skills/officeqa/SKILL.md"),
        split=path("data/officeqa_split"), docs=path("data/officeqa_docs"), out=out,
    )  # fmt: skip


def officeqa_respond(
    model: str, messages: list[dict[str, Any]], body: dict[str, Any]
) -> str | dict[str, Any]:
    """skillvc's requests in the OfficeQA world: the target's turns, the optimizer's prompts."""
    from officeqa_world import respond, skillvc_optimizer

    if model == "target":
        return respond(messages)
    return skillvc_optimizer("\n".join(m["content"] for m in messages if m["role"] == "user"))


def skillvc_officeqa(sizes: dict[str, int], seed: int, latency_s: float) -> dict[str, Any]:
    """skillvc on the OfficeQA world: ``init --from-skillopt`` of SkillOpt's YAML, then
    ``train``, each in a process of its own."""
    from git import Repo

    world = FakeWorld(officeqa_respond, latency_s).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "repo"
            officeqa_repo(repo, sizes, seed)
            config = Path(tmp) / "skillopt.yaml"
            config.write_text(
                officeqa_yaml(Path(""), world.url, sizes, seed, Path(tmp) / "out"),
                encoding="utf-8",
            )
            _run([sys.executable, "-m", "skillvc", "init", "--from-skillopt", str(config)], repo)
            git = Repo(repo).git
            git.add("skillvc.toml", ".gitignore")
            git.commit("-q", "-m", "skillvc.toml from SkillOpt's config")
            start = time.perf_counter()
            _run([sys.executable, "-m", "skillvc", "train", "-q"], repo)
            wall = time.perf_counter() - start
            runs = json.loads(
                _run([sys.executable, "-m", "skillvc", "runs", "--json"], repo).stdout
            )
            report = json.loads(
                _run([sys.executable, "-m", "skillvc", "report", "--json"], repo).stdout
            )
    finally:
        world.stop()
    out = world.figures(wall, start)
    out["scores"] = skillvc_scores(runs, report)
    return out


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:4])} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done


def skillvc_scores(runs: list[dict[str, Any]], report: dict[str, Any]) -> dict[str, Any]:
    """Seed and final val and test, and the steps, from skillvc's own report of the run."""
    run = runs[0]
    return {
        "baseline_val": run["baseline_val"], "best_val": run["best_val"],
        "baseline_test": run["baseline_test"], "test": run["test"], "steps": run["steps"],
        "accepted": run["accepted"], "rejected": run["rejected"],
        "val_curve": run["val_curve"], "rollouts": report["usage"]["calls"],
    }  # fmt: skip


def show_scores(f: dict[str, Any]) -> None:
    rollouts = f["rollouts"]
    turns = f["by_model"].get("target", 0) / rollouts if rollouts else 0.0
    print(f"  rollouts          {rollouts:>8}   ({turns:.2f} target requests a rollout)")
    s = f["scores"]
    if "best_val" in s:  # skillvc
        print(
            f"  val {s['baseline_val']:.3f} -> {s['best_val']:.3f}, test {s['baseline_test']:.3f}"
            f" -> {s['test']:.3f}; steps {s['steps']}: {s['accepted']} accepted, "
            f"{s['rejected']} rejected; val curve {s['val_curve']}"
        )
        return
    print(
        f"  val {_f(s['baseline_selection_hard'])} -> {_f(s['best_selection_hard'])} (final "
        f"skill {_f(s['final_selection_hard'])}), test {_f(s['baseline_test_hard'])} -> "
        f"{_f(s['test_hard'])} (final skill {_f(s['final_test_hard'])}); steps "
        f"{s['total_accepts'] + s['total_rejects'] + s['total_skips']}: {s['total_accepts']} "
        f"accepted, {s['total_rejects']} rejected, {s['total_skips']} without a patch"
    )


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def skillopt_officeqa(
    sizes: dict[str, int], seed: int, latency_s: float, src: Path, python: str
) -> dict[str, Any]:
    """SkillOpt 0.2.0's own trainer and OfficeQA environment on the same world and split."""
    from officeqa_world import GUIDANCE, respond, skillopt_analyst

    class World(SkillOptWorld):
        guidance = GUIDANCE
        meta = "Prefer rules about how to use the document tools."

        def target(self, messages: list[dict[str, Any]], body: dict[str, Any]) -> dict[str, Any]:
            return respond(messages)

        def analyst(self, user: str, *, failures: bool) -> dict[str, Any]:
            return skillopt_analyst(user, failures=failures)

    world = World(src)
    server = FakeWorld(world, latency_s).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(tmp) / "repo"
            officeqa_repo(repo, sizes, seed)
            config = Path(tmp) / "skillopt.yaml"
            out_root = Path(tmp) / "out"
            config.write_text(
                officeqa_yaml(repo, server.url, sizes, seed, out_root), encoding="utf-8"
            )
            start = time.perf_counter()
            _, wall = run_skillopt(python, src, config, cwd=Path(tmp))
            summary = json.loads((out_root / "summary.json").read_text(encoding="utf-8"))
    finally:
        server.stop()
    out = server.figures(wall, start)
    out["by_model"] = {**out["by_model"], "stages": dict(sorted(world.stages.items()))}
    out["scores"] = {
        k: summary.get(k)
        for k in (
            "baseline_selection_hard", "best_selection_hard", "final_selection_hard",
            "baseline_test_hard", "test_hard", "final_test_hard", "total_accepts",
            "total_rejects", "total_skips",
        )
    }  # fmt: skip
    return out


def show(name: str, f: dict[str, Any]) -> None:
    print(f"== {name} ==")
    print(f"  requests          {f['requests']:>8}   {f['by_model']}")
    print(f"  dependent rounds  {f['rounds']:>8}")
    print(
        f"  tokens            {f['tokens']:>8,}   "
        f"({f['prompt_tokens']:,} prompt + {f['completion_tokens']:,} completion; "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(f["tokens_by_model"].items()))
        + ")"
    )
    print(
        f"  wall time         {f['wall']:>8.1f} s   (first request to last: {f['span']:.1f} s; "
        f"before the first {f['head']:.1f} s, after the last {f['tail']:.1f} s)"
    )
    if f.get("result"):
        print(f"  {f['result']}")


def officeqa_main(args: argparse.Namespace, sizes: dict[str, int], latency: float) -> None:
    ours = skillvc_officeqa(sizes, args.seed, latency)
    show(f"skillvc, OfficeQA ({args.config}, {args.latency_ms} ms a request)", ours)
    show_scores(ours)
    if not args.skillopt:
        print("SkillOpt not run (--skillopt)")
        return
    if not (Path(args.skillopt_src) / "skillopt" / "prompts").is_dir():
        raise SystemExit("--skillopt needs --skillopt-src: a checkout of microsoft/SkillOpt")
    theirs = skillopt_officeqa(
        sizes, args.seed, latency, Path(args.skillopt_src), args.skillopt_python
    )
    show(f"SkillOpt, OfficeQA ({args.config}, {args.latency_ms} ms a request)", theirs)
    show_scores(theirs)
    print("== skillvc / SkillOpt ==")
    for key in ("requests", "rounds", "tokens", "wall", "span"):
        ratio = ours[key] / theirs[key] if theirs[key] else float("nan")
        print(f"  {key:<9} {ratio:>6.2f}x")


GOALS = {"requests": 1.0, "tokens": 0.5, "wall": 0.55}  # issue 44: the default's targets


def _seeds(text: str) -> list[int]:
    """``1-7`` or ``1,3,4``."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def skillopt_cached(
    args: argparse.Namespace, config: str, seed: int, latency: float
) -> dict[str, Any] | None:
    """SkillOpt's figures for (config, seed): run now (``--skillopt``), recorded in
    ``--skillopt-record`` when they were run before, or None."""
    record = Path(args.skillopt_record) if args.skillopt_record else None
    saved: dict[str, Any] = {}
    if record is not None and record.exists():
        saved = json.loads(record.read_text(encoding="utf-8"))
    key = f"{config}/{seed}/{args.latency_ms}"
    if args.skillopt:
        theirs = skillopt_figures(
            CONFIGS[config], seed, latency, Path(args.skillopt_src), args.skillopt_python
        )
        if record is not None:
            saved.setdefault(key, []).append({k: v for k, v in theirs.items() if k != "result"})
            record.write_text(json.dumps(saved, indent=1, sort_keys=True), encoding="utf-8")
        return theirs
    if key in saved:  # the median run of those recorded, by wall time
        runs = sorted(saved[key], key=lambda r: r["wall"])
        empty = {"by_model": {}, "tokens_by_model": {}, "prompt_tokens": 0}
        return (
            empty
            | {"completion_tokens": 0, "head": 0.0, "tail": 0.0}
            | runs[len(runs) // 2]
            | {"recorded": len(runs)}
        )
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--config", default="small", choices=sorted(CONFIGS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--seeds", help="several seeds (1-7 or 1,3), each on --configs; pooled ratios at the end"
    )
    parser.add_argument("--configs", help="with --seeds: small,large (default: --config)")
    parser.add_argument(
        "--gate",
        default="both",
        choices=("bundle", "default", "both", "none"),
        help="skillvc's arm: the paper's recipe as SkillOpt runs it (attribution = false, "
        "SkillOpt's slow-update schedule), skillvc's defaults, both (default), or none (to record "
        "SkillOpt's figures alone)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [train] setting for skillvc's default arm (TOML value)",
    )
    parser.add_argument(
        "--breakdown", action="store_true", help="skillvc's requests by stage (its event log)"
    )
    parser.add_argument("--skillopt", action="store_true", help="also run SkillOpt (installed)")
    parser.add_argument("--json", help="write every run's figures (both trainers) to this file")
    parser.add_argument(
        "--skillopt-record",
        default="",
        help="a JSON file of SkillOpt's figures: --skillopt adds each run to it; without "
        "--skillopt the recorded figures (the median run by wall time) stand for SkillOpt's",
    )
    parser.add_argument(
        "--env",
        default="searchqa",
        choices=("searchqa", "officeqa"),
        help="the world: SearchQA-style (no tools) or OfficeQA (the document tools)",
    )
    add_skillopt_arguments(parser)
    args = parser.parse_args()
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    os.environ["SKILLVC_SIM_LATENCY_MS"] = "0"  # the server holds every request instead
    os.environ.setdefault("OPENAI_API_KEY", "fake-world")
    latency = args.latency_ms / 1000
    if args.env == "officeqa":
        return officeqa_main(args, CONFIGS[args.config], latency)
    if args.skillopt and not (Path(args.skillopt_src) / "skillopt" / "prompts").is_dir():
        parser.error("--skillopt needs --skillopt-src: a checkout of microsoft/SkillOpt")
    settings = tuple(f"{k} = {v}" for k, _, v in (a.partition("=") for a in args.set))
    arms: tuple[str, ...] = {"both": ("bundle", "default"), "none": ()}.get(args.gate, (args.gate,))
    seeds = _seeds(args.seeds) if args.seeds else [args.seed]
    configs = (args.configs or args.config).split(",")
    pooled: dict[str, list[tuple[dict[str, Any], dict[str, Any] | None]]] = {a: [] for a in arms}
    for config in configs:
        for seed in seeds:
            sizes = CONFIGS[config]
            ours = {
                arm: skillvc_figures(
                    sizes, seed, latency, arm, settings if arm == "default" else ()
                )
                for arm in arms
            }
            theirs = skillopt_cached(args, config, seed, latency)
            for arm in arms:
                label = "paper's recipe" if arm == "bundle" else "default"
                show(f"skillvc, {label} ({config}, seed {seed}, {args.latency_ms} ms)", ours[arm])
                print(f"  bound on rounds   {ours[arm]['bound']:>8}   (from this run's decisions)")
                if args.breakdown:
                    from breakdown import show as show_breakdown

                    show_breakdown(ours[arm]["breakdown"], "  ")
                pooled[arm].append((ours[arm], theirs))
            if theirs is None:
                print("SkillOpt not run (--skillopt) nor recorded (--skillopt-record)")
                continue
            note = f", recorded ({theirs['recorded']} runs)" if theirs.get("recorded") else ""
            show(f"SkillOpt ({config}, seed {seed}, {args.latency_ms} ms{note})", theirs)
            for arm in arms:
                _ratios(f"skillvc {arm} / SkillOpt", [(ours[arm], theirs)])
    if args.json:
        keep = ("requests", "rounds", "tokens", "wall", "span", "bound", "tokens_by_model")
        rows = [
            {"arm": arm, "config": config, "seed": seed}
            | {f"skillvc_{k}": o.get(k) for k in keep}
            | ({f"skillopt_{k}": t.get(k) for k in keep} if t is not None else {})
            | {"stages": o["breakdown"]["stages"], "skillvc_result": o.get("result")}
            for arm in arms
            for (config, seed), (o, t) in zip(
                [(c, s) for c in configs for s in seeds], pooled[arm], strict=True
            )
        ]
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    if len(configs) * len(seeds) > 1:
        for arm in arms:
            pairs = [(o, t) for o, t in pooled[arm] if t is not None]
            at_bound = sum(1 for o, _ in pooled[arm] if o["rounds"] <= o["bound"])
            print(
                f"== skillvc {arm}, pooled over {len(pooled[arm])} runs: requests "
                f"{sum(o['requests'] for o, _ in pooled[arm]):,}, tokens "
                f"{sum(o['tokens'] for o, _ in pooled[arm]):,}; dependent rounds (overlapping "
                f"sets) at or under the bound its decisions need in {at_bound} =="
            )
            if pairs:
                _ratios(f"skillvc {arm} / SkillOpt, pooled", pairs, each=True)


def _ratios(
    title: str,
    pairs: Sequence[tuple[dict[str, Any], dict[str, Any] | None]],
    each: bool = False,
) -> None:
    """Ratios of summed figures, with issue 44's goals; ``each``: also the worst pair."""
    print(f"== {title} ==")
    for key in ("requests", "rounds", "tokens", "wall", "span"):
        ours = sum(o[key] for o, _ in pairs)
        theirs = sum(t[key] for _, t in pairs if t is not None)
        ratio = ours / theirs if theirs else float("nan")
        goal = f"   (goal <= {GOALS[key]}x)" if key in GOALS else ""
        worst = ""
        if each:
            ratios = [o[key] / t[key] for o, t in pairs if t is not None and t[key]]
            met = sum(1 for r in ratios if r <= GOALS.get(key, 0))
            worst = f"   worst {max(ratios):.2f}x" + (
                f", goal met in {met} of {len(ratios)}" if key in GOALS else ""
            )
        print(f"  {key:<9} {ratio:>6.2f}x{goal}{worst}")


if __name__ == "__main__":
    main()

"""Local OpenAI-compatible servers (issue 22): what skillvc learns from them and how it uses it.

The loopback server plays llama.cpp's ``llama-server``: ``GET /props`` reports a 4,096-token
context and its slots, and a chat request whose prompt counts more tokens than that gets
llama.cpp's 400. The real OpenAI SDK talks to it; the CLI trains against it.
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import loopback as lb
import pytest
from click.testing import CliRunner, Result
from conftest import git

from skillvc.cli import cli
from skillvc.core.store import open_store
from skillvc.models import prompts
from skillvc.models.backends.local import ServerInfo, estimate_tokens, probe
from skillvc.models.prompts import prompt_kind
from skillvc.training.demo import create_demo_repo
from skillvc.training.structured import edits_schema, salvage, skill_lines

SKILL = "skills/acme-returns/SKILL.md"
N_CTX = 4096
MODEL = "qwen2.5-coder-1.5b-instruct"


def llama_cpp(server: lb.LoopbackServer, slots: int = 2) -> lb.LoopbackServer:
    """Make the loopback server answer like llama-server with a 4,096-token context."""
    server.get_routes["/props"] = {
        "default_generation_settings": {"n_ctx": N_CTX, "params": {"temperature": 0.8}},
        "total_slots": slots,
        "model_alias": MODEL,
    }
    server.get_routes["/v1/models"] = {
        "object": "list",
        "data": [{"id": MODEL, "object": "model", "meta": {"n_ctx": N_CTX}}],
    }
    server.context_limit = N_CTX
    return server


def make_repo(tmp_path: Path, server: lb.LoopbackServer, mp: pytest.MonkeyPatch) -> Path:
    repo = tmp_path / "repo"
    create_demo_repo(repo)
    model = f'model = "openai:{MODEL}"\nbase_url = "{server.url}/v1"'
    (repo / "skillvc.toml").write_text(
        f'[skill]\npath = "{SKILL}"\n\n'
        '[tasks]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\n'
        'test = "evals/test.jsonl"\nscorer = "exact"\n\n'
        f"[target]\n{model}\ntemperature = 0.0\n\n"
        f"[optimizer]\n{model}\ntemperature = 0.0\n\n"
        "[train]\nepochs = 1\nbatch_size = 20\nminibatch_size = 10\n"
        "workers = 6\nseed = 7\nslow_update = false\n",
        encoding="utf-8",
    )
    for split, n in (("train", 20), ("val", 10), ("test", 4)):
        path = repo / "evals" / f"{split}.jsonl"
        path.write_text("".join(path.read_text().splitlines(True)[:n]), encoding="utf-8")
    git(repo, "commit", "-qam", "Train against a local llama.cpp server")
    mp.setenv("OPENAI_API_KEY", "local")
    mp.chdir(repo)
    return repo


def events(repo: Path, type: str) -> list[dict[str, Any]]:
    with open_store(repo / ".skillvc/events.db") as store:
        return [e.payload for e in store.events(types=[type])]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def optimizer_requests(server: lb.LoopbackServer) -> list[dict[str, Any]]:
    return [r.json for r in server.requests if lb.is_optimizer_prompt(lb.chat_messages(r.json))]


# -- what the server says -----------------------------------------------------------------------


def test_probe_reads_llama_cpp_ollama_and_vllm(loopback: lb.LoopbackServer) -> None:
    url = f"{loopback.url}/v1"
    assert probe(url, MODEL) is None, "a server that says nothing is used as before"

    llama_cpp(loopback, slots=3)
    assert probe(url, MODEL) == ServerInfo("llama.cpp", n_ctx=N_CTX, slots=3, model=MODEL)

    loopback.get_routes.clear()
    loopback.get_routes["/api/version"] = {"version": "0.5.7"}
    loopback.post_routes["/api/show"] = {
        "parameters": "num_ctx                        8192\nstop  <|im_end|>",
        "model_info": {"qwen2.context_length": 32768},
    }
    assert probe(url, "qwen2.5") == ServerInfo("ollama", n_ctx=8192, model="qwen2.5")
    loopback.post_routes["/api/show"] = {"parameters": "", "model_info": {}}
    assert probe(url, "qwen2.5") == ServerInfo("ollama", n_ctx=2048, model="qwen2.5")

    loopback.get_routes.clear()
    loopback.get_routes["/v1/models"] = {
        "data": [{"id": "Qwen/Qwen2.5-7B", "max_model_len": 32768}]
    }
    assert probe(url, "Qwen/Qwen2.5-7B") == ServerInfo("vllm", n_ctx=32768, model="Qwen/Qwen2.5-7B")
    assert loopback.requests == [], "a probe sends no chat request"


def test_doctor_prints_what_the_local_server_said(
    loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    make_repo(tmp_path, llama_cpp(loopback), monkeypatch)

    result = run("doctor")

    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("ok    optimizer server"))
    assert line == (
        f"ok    optimizer server: llama.cpp serving {MODEL} (context 4,096 tokens, 2 slots, "
        "json_schema output); optimizer prompts fitted to ~3,008 tokens, answers capped at "
        "1,024, edits asked for through a JSON Schema, workers at most 2, timeout 900 s, cost "
        "local ($0 unless [prices] names the model)."
    )


# -- prompts fitted to the context --------------------------------------------------------------


def long_cases(n: int, chars: int) -> list[dict[str, Any]]:
    return [
        {"id": f"t{i}", "input": f"question {i} " + "x" * chars, "output": "y" * chars,
         "expected": "deny", "score": 0.0}
        for i in range(n)
    ]  # fmt: skip


def reflect_values(cases: list[dict[str, Any]], skill: str = "Be brief.") -> dict[str, Any]:
    return {
        "n_cases": str(len(cases)),
        "kind": "failures",
        "kind_note": "n",
        "budget": "3",
        "skill": skill,
        "cases": cases,
        "rejected": [{"op": "add", "content": "z" * 900, "decision": "rejected"}] * 12,
        "meta": "(none yet)",
    }


def test_a_prompt_is_fitted_to_its_limit_deterministically() -> None:
    values = reflect_values(long_cases(8, 3000))
    assert estimate_tokens(prompts.render("reflect", **values)) > 10_000

    fitted = prompts.render("reflect", fit=3000, **values)

    assert estimate_tokens(fitted) <= 3000
    assert fitted == prompts.render("reflect", fit=3000, **values)
    user = fitted[1]["content"]
    shown = json.loads(prompts.section(user, "cases"))
    assert shown[0]["id"] == "t0" and len(shown) >= 1, "the first cases are kept"
    assert f"Above are {len(shown)} tasks" in user
    assert "characters cut" in shown[0]["input"]
    # A prompt that fits is left exactly as it was.
    small = reflect_values(long_cases(2, 10)) | {"rejected": []}
    assert prompts.render("reflect", fit=3000, **small) == prompts.render("reflect", **small)


def test_a_skill_too_long_for_the_context_is_refused_before_any_call() -> None:
    values = reflect_values(long_cases(1, 10), skill="A rule. " * 2000)
    with pytest.raises(prompts.PromptTooLong, match="is the skill too long"):
        prompts.render("reflect", fit=3000, **values)


def test_a_run_never_sends_a_prompt_over_the_servers_context(
    loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Long answers make long cases: unfitted, one reflection prompt of 10 of them would be
    several times the context. Every request fits, and the optimizer's carry the schema."""
    simulate = lb.simulator_responder()
    reasoning = "Let me think about the policy step by step. " * 60  # ~2,600 characters

    def respond(body: dict[str, Any]) -> str | lb.Behaviour:
        answer = simulate(body)
        if lb.is_optimizer_prompt(lb.chat_messages(body)):
            return answer
        return lb.Behaviour(text=f"{reasoning}\n{answer}", delay_s=0.02)

    loopback.responder = respond
    repo = make_repo(tmp_path, llama_cpp(loopback), monkeypatch)

    result = run("train", "--json")

    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["status"] == "finished" and summary["reflections_usable"] >= 1
    assert loopback.prompt_tokens_seen and max(loopback.prompt_tokens_seen) <= N_CTX
    assert len(loopback.prompt_tokens_seen) == len(loopback.requests)
    assert loopback.max_in_flight <= 2, "workers were capped at the server's 2 slots"
    reflections = [
        b for b in optimizer_requests(loopback) if prompt_kind(lb.chat_messages(b)[1]["content"])
        == "reflect"
    ]  # fmt: skip
    assert reflections
    shrunk = [
        b for b in reflections if "characters cut" in lb.chat_messages(b)[1]["content"]
    ]  # fmt: skip
    assert shrunk, "the reflection prompts were cut to fit"
    for body in reflections:
        assert body["max_tokens"] == 1024
        schema = body["response_format"]["json_schema"]["schema"]
        shapes = schema["properties"]["edits"]["items"]["anyOf"]
        add = next(s for s in shapes if s["properties"]["op"]["enum"] == ["add"])
        assert "target" not in add["properties"] and add["required"][:2] == ["op", "content"]
        replace = next(s for s in shapes if s["properties"]["op"]["enum"] == ["replace"])
        skill = prompts.section(lb.chat_messages(body)[1]["content"], "skill")
        named = replace["properties"]["target"]["enum"]
        assert named and all(skill.count(line) == 1 for line in named), "targets are skill lines"
        assert add["properties"]["anchor"]["enum"] == named
        assert schema["required"] == ["analysis", "edits"]
    (started,) = events(repo, "run.started")
    assert started["servers"]["optimizer"] == {
        "server": "llama.cpp",
        "n_ctx": N_CTX,
        "slots": 2,
        "json_schema": True,
        "model": MODEL,
    }
    calls = events(repo, "model.call")
    assert {c["cost_usd"] for c in calls} == {0.0}, "a local model's calls cost nothing"
    assert summary["unpriced_calls"] == 0 and summary["cost_usd"] == 0.0
    (projected,) = events(repo, "run.projected")
    assert projected["unpriced"] == [] and projected["cost_usd"] == 0.0


# -- structured output a small model cannot break -----------------------------------------------

# The shapes Qwen2.5-Coder-1.5B produced, and worse.
FENCED_TARGET = (
    "```json\n"
    '{"edits": [{"op": "add", "target": "- A damaged item within 30 days is refunded.", '
    '"content": "", "rationale": "t1 and t4"}]}\n```'
)
ONE_BAD_AMONG_GOOD = json.dumps(
    {
        "edits": [
            {"op": "ADD", "content": "- Late deliveries get store credit.", "rationale": "t2"},
            {"op": "replace", "content": "no target given", "rationale": "t3"},
            {"op": "rewrite", "target": "x", "content": "y", "rationale": "t5"},
        ]
    }
)
TRUNCATED = '{"edits": [{"op": "add", "content": "- Always always always always always'


class SmallModel:
    """An optimizer answering reflections with the scripted shapes in turn (repairs: once
    with valid JSON, once truncated again), everything else like the simulator."""

    def __init__(self) -> None:
        self.simulate = lb.simulator_responder()
        self.reflections = [FENCED_TARGET, ONE_BAD_AMONG_GOOD, TRUNCATED, TRUNCATED]
        self.repairs = [
            json.dumps({"edits": [{"op": "add", "content": "- Escalate gold-tier damage."}]}),
            TRUNCATED,
        ]
        self.kinds: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str | lb.Behaviour:
        messages = lb.chat_messages(body)
        if not lb.is_optimizer_prompt(messages):
            return self.simulate(body)
        kind = prompt_kind(messages[1]["content"]) or ""
        self.kinds.append(kind)
        if kind == "reflect" and self.reflections:
            text = self.reflections.pop(0)
            return lb.Behaviour(text=text, finish_reason="length" if text == TRUNCATED else None)
        if kind == "repair" and self.repairs:
            text = self.repairs.pop(0)
            return lb.Behaviour(text=text, finish_reason="length" if text == TRUNCATED else None)
        return self.simulate(body)


def test_malformed_answers_keep_their_valid_edits_and_record_the_rest(
    loopback: lb.LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = SmallModel()
    loopback.responder = model
    repo = make_repo(tmp_path, llama_cpp(loopback), monkeypatch)
    toml = repo / "skillvc.toml"  # two steps of two reflections each: the four shapes
    toml.write_text(toml.read_text().replace("batch_size = 20", "batch_size = 10"))
    toml.write_text(toml.read_text().replace("minibatch_size = 10", "minibatch_size = 5"))
    git(repo, "commit", "-qam", "smaller steps")

    result = run("train", "--json")

    assert result.exit_code == 0, result.output
    assert model.kinds.count("reflect") >= 4 and not model.reflections
    # Each truncated answer got exactly one repair call, no more.
    assert model.kinds.count("repair") == 2
    proposed = [e["edit"] for e in events(repo, "edit.proposed")]
    contents = [e["content"] for e in proposed]
    # The add whose text was in "target", inside a fence: read as the add it meant.
    assert "- A damaged item within 30 days is refunded." in contents
    fenced = next(e for e in proposed if e["content"].startswith("- A damaged"))
    assert fenced["op"] == "add" and fenced["target"] == ""
    # The valid edit of a flawed answer is kept; the two bad ones are refused with reasons.
    assert "- Late deliveries get store credit." in contents
    refused = events(repo, "edit.refused")
    reasons = sorted(r["reason"] for r in refused)
    assert reasons == [
        "A replace edit needs a non-empty target.",
        "Unknown edit op 'rewrite'; use one of add, replace, delete.",
    ]
    assert all(r["kind"] in ("failures", "successes") for r in refused)
    # A truncated answer repaired once is used; truncated twice, the reflection fails, recorded.
    assert "- Escalate gold-tier damage." in contents
    (failed,) = events(repo, "reflection.failed")
    assert failed["error"].startswith("unusable optimizer answer after one repair")
    assert "cut off at its token limit" in failed["error"]
    summary = json.loads(result.stdout)
    assert summary["status"] == "finished"
    assert summary["reflections_usable"] == summary["reflections"] - 1


def test_salvage_reads_leniently_and_checks_strictly() -> None:
    kept, refused = salvage(
        {
            "edits": [
                {"op": "add", "target": "- new rule", "rationale": "r"},
                {"op": "delete", "target": "- old rule"},
                {"op": "add", "content": "x" * 5000},
                "not an edit",
            ]
        }
    )
    assert [(e.op, e.content, e.target) for e in kept] == [
        ("add", "- new rule", ""),
        ("delete", "", "- old rule"),
    ]
    assert [r["reason"] for r in refused] == [
        "The edit's content has 5000 characters (at most 1200).",
        "An edit must be an object, not str.",
    ]
    assert re.fullmatch(r"x{300}", refused[0]["edit"]["content"]), "kept short in the log"
    schema = edits_schema(2)
    assert schema["properties"]["edits"]["maxItems"] == 2


def test_targets_are_held_to_the_lines_of_the_skill() -> None:
    text = (
        "---\nname: s\ndescription: d\n---\n# Rules\n- Be brief.\n- Be brief.\n"
        "- Quote the order id.\n<!-- SLOW_UPDATE_START -->\n- kept\n"
        "<!-- SLOW_UPDATE_END -->\n"
    )
    lines = skill_lines(text)
    # The frontmatter, the protected region and a line that occurs twice cannot be named.
    assert lines == ["# Rules", "- Quote the order id."]
    shapes = edits_schema(2, lines=lines)["properties"]["edits"]["items"]["anyOf"]
    assert [s["properties"]["op"]["enum"][0] for s in shapes] == ["add", "replace", "delete"]
    assert shapes[1]["properties"]["target"] == {"type": "string", "enum": lines}
    one_line = skill_lines("Reply with the answer in <answer></answer> tags.\n")
    ops = [
        s["properties"]["op"]["enum"][0]
        for s in edits_schema(2, lines=one_line)["properties"]["edits"]["items"]["anyOf"]
    ]
    assert ops == ["add", "replace"], "a one-line skill's only line is never deleted"
    assert skill_lines("".join(f"- rule {i}\n" for i in range(500))) is None, "free text"
    free = edits_schema(2)["properties"]["edits"]["items"]["anyOf"][1]["properties"]["target"]
    assert "enum" not in free and free["minLength"] == 1

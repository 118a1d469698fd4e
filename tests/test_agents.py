"""Agent presets (claude-code, codex) driven with fake CLIs that speak their documented formats."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from skillvc.cli import cli
from skillvc.core.config import ModelConfig, parse_config
from skillvc.core.errors import ConfigError
from skillvc.core.store import open_store
from skillvc.models.agents.backend import AgentBackend
from skillvc.models.agents.description import (
    DescriptionRefused,
    targets_description,
    with_description,
)
from skillvc.models.agents.presets import activated, parse_claude_code, parse_codex
from skillvc.models.agents.trajectory import Step, Trajectory, render
from skillvc.models.backends.base import CallRequest
from skillvc.models.backends.command import AgentFailed
from skillvc.models.backends.sim import WORLD_DESCRIPTION
from skillvc.models.calls import CallFailed, ModelClient
from skillvc.models.harness import get_backend
from skillvc.models.simworld import GOOD, HARMFUL
from skillvc.review.evaluation import evaluate
from skillvc.review.report import render_markdown, run_report
from skillvc.review.trust import check_change
from skillvc.skill.edits import Edit
from skillvc.skill.skilldoc import SkillDocument
from skillvc.training.loop import train
from skillvc.workspace.workspace import open_workspace
from tests.conftest import copy_repo, git

AGENTS = Path(__file__).parent / "fixtures" / "agents"
SCRIPTS = {"claude-code": "fake_claude.py", "codex": "fake_codex.py"}
SKILL = "---\nname: returns\ndescription: Acme customer returns.\n---\n# Returns\n\nBe brief.\n"
TASK = (
    'Customer writes: "The invoice charged me twice."\nIssue: billing-error. Days since '
    "delivery: 3. Tier: standard.\nWhich action should support take? Answer with one of: refund, "
    "replace, deny, escalate, ship-part, exchange, store-credit, repair, inside <answer></answer>."
)
SECRET = "sk-ant-api03-secretvalue0123456789abcdef"


def fake_cli(directory: Path, preset: str, version: str | None = None) -> Path:
    """An executable named like the real CLI that runs the fake with this interpreter."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ("claude" if preset == "claude-code" else "codex")
    env = f"FAKE_AGENT_VERSION='{version}' " if version else ""
    path.write_text(f'#!/bin/sh\n{env}exec "{sys.executable}" "{AGENTS / SCRIPTS[preset]}" "$@"\n')
    path.chmod(0o755)
    return path


def python_cli(path: Path, script: Path) -> Path:
    """An executable at ``path`` that runs ``script`` with this interpreter."""
    path.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    path.chmod(0o755)
    return path


def backend(
    tmp_path: Path, preset: str = "claude-code", version: str | None = None, **kw: Any
) -> AgentBackend:
    exe = fake_cli(tmp_path / "bin", preset, version)
    config = ModelConfig(model=f"command:{preset}", harness=preset, executable=str(exe), **kw)
    result = get_backend(config, tmp_path)
    assert isinstance(result, AgentBackend)
    return result


def request(user: str = TASK, skill: str = SKILL) -> CallRequest:
    messages = ({"role": "system", "content": skill}, {"role": "user", "content": user})
    return CallRequest(role="target", model="command:claude-code", messages=messages)


@pytest.fixture
def scratch_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private system temp directory, to see whether a run leaves anything in it."""
    path = tmp_path / "systmp"
    path.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    return path


# -- one call ---------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["claude-code", "codex"])
def test_one_task_answer_trajectory_usage_activation(
    tmp_path: Path, preset: str, scratch_tmp: Path, isolated_env: Path
) -> None:
    result = backend(tmp_path, preset).complete(request())

    assert result.text == "No specific rule applies.\n<answer>refund</answer>"
    assert result.meta["activated"] is True
    assert result.meta["agent"] == preset
    assert result.meta["version"] == (
        "2.1.3 (Claude Code)" if preset == "claude-code" else "codex-cli 0.64.0"
    )
    trajectory = Trajectory.from_json(result.meta["trajectory"])
    assert trajectory.answer == result.text
    calls = trajectory.tool_calls
    assert len(calls) == 1
    if preset == "claude-code":
        assert (calls[0].name, json.loads(calls[0].text)) == ("Skill", {"skill": "returns"})
        assert result.cost_usd is not None and result.cost_usd > 0
    else:
        assert calls[0].name == "shell"
        assert ".agents/skills/returns/SKILL.md" in calls[0].text
        assert result.cost_usd is None  # Codex reports tokens only
    assert result.prompt_tokens > 0 and result.completion_tokens > 0
    assert list(scratch_tmp.iterdir()) == [], "the scratch directory is removed"
    assert list(isolated_env.iterdir()) == [], "nothing is written into the real HOME"


def test_skill_without_description_is_not_loaded(tmp_path: Path) -> None:
    result = backend(tmp_path).complete(request(skill="---\nname: returns\n---\nBe brief.\n"))
    assert result.meta["activated"] is False
    assert result.meta["skill_name"] == "returns"


def test_the_environment_is_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "env_agent.py"
    script.write_text(
        "import json, os, sys\n"
        "if sys.argv[1:] == ['--version']:\n    print('9.9'); sys.exit(0)\n"
        "sys.stdin.read()\n"
        "env = {k: v for k, v in os.environ.items()}\n"
        "print(json.dumps({'type': 'result', 'subtype': 'success', 'is_error': False,"
        " 'result': json.dumps(env)}))\n"
    )
    exe = python_cli(tmp_path / "claude", script)
    monkeypatch.setenv("MY_KEY", SECRET)
    monkeypatch.setenv("PERSONAL_TOKEN", "do-not-pass-me")
    config = ModelConfig(
        model="command:claude-code",
        harness="claude-code",
        executable=str(exe),
        env={"ANTHROPIC_API_KEY": "${MY_KEY}", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
    )
    result = AgentBackend(config).complete(request())
    env = json.loads(result.text.replace("[redacted]", "REDACTED"))

    assert "PERSONAL_TOKEN" not in env and "MY_KEY" not in env
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["ANTHROPIC_API_KEY"] == "REDACTED", "the key reached the agent, not the log"
    scratch = Path(env["HOME"]).parent
    assert env["CLAUDE_CONFIG_DIR"] == str(scratch / "home" / ".claude")
    assert env["TMPDIR"] == str(scratch / "tmp")
    assert not scratch.exists()
    assert SECRET not in result.meta["trajectory"]


def test_setup_files_are_copied_into_the_config_dir(tmp_path: Path) -> None:
    settings = tmp_path / "agent" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"model": "sonnet"}')
    script = tmp_path / "files_agent.py"
    script.write_text(
        "import json, os, sys\n"
        "if sys.argv[1:] == ['--version']:\n    print('1'); sys.exit(0)\n"
        "sys.stdin.read()\n"
        "text = open(os.path.join(os.environ['CLAUDE_CONFIG_DIR'], 'settings.json')).read()\n"
        "print(json.dumps({'type': 'result', 'subtype': 'success', 'result': text}))\n"
    )
    python_cli(tmp_path / "claude", script)
    config = ModelConfig(
        model="command:claude-code",
        harness="claude-code",
        executable="./claude",  # relative to the repository root
        files=["agent/settings.json"],
    )
    assert AgentBackend(config, tmp_path).complete(request()).text == '{"model": "sonnet"}'


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "mode", "expected"),
    [
        (
            "claude-code",
            "api-text",
            "Agent 'claude' (Claude Code) exited with code 1: API Error: 400 "
            '{"type":"error","error":{"type":"invalid_request_error","message":"model: '
            'bad-model (key [redacted])"}}. [stdout: API Error: 400 {"type":"error","error":'
            '{"type":"invalid_request_error","message":"model: bad-model (key [redacted])"}}; '
            "stderr: (empty)]",
        ),
        (
            "codex",
            "api",
            "Agent 'codex' (Codex) exited with code 1: unexpected status 401 Unauthorized: "
            "Incorrect API key provided. [stdout: ",
        ),
    ],
)
def test_agent_errors_are_quoted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preset: str, mode: str, expected: str
) -> None:
    monkeypatch.setenv("MY_KEY", SECRET)
    agent = backend(
        tmp_path, preset, env={"FAKE_AGENT_FAIL": mode, "ANTHROPIC_API_KEY": "${MY_KEY}"}
    )
    store = open_store(tmp_path / "events.db")
    client = ModelClient(store, {"target": agent}, {"target": agent.config})
    with pytest.raises(CallFailed) as info:
        client.call("target", request().messages)
    assert expected in info.value.message
    error = store.events(types=["model.error"])[0].payload
    assert expected in error["error"]
    assert error["kind"] == "AgentFailed"
    assert SECRET not in info.value.message and SECRET not in json.dumps(error)


def test_a_json_error_result_is_parsed_and_quoted(tmp_path: Path) -> None:
    agent = backend(tmp_path, env={"FAKE_AGENT_FAIL": "api-json"})
    with pytest.raises(AgentFailed) as info:
        agent.complete(request())
    assert info.value.message.startswith(
        "Agent 'claude' (Claude Code) exited with code 1: API Error: 400 "
        '{"type":"error","error":{"type":"invalid_request_error","message":"model: bad-model'
    )
    # The stdout quoted is what the agent said (issue 23), not the JSON fields of its last line.
    assert "[stdout: API Error: 400 " in info.value.message
    assert "total_cost_usd" not in info.value.message
    assert info.value.returncode == 1
    assert "--- stderr ---\n" in info.value.stderr_tail


def test_missing_executable_is_one_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError) as info:
        get_backend(ModelConfig(model="command:claude-code", harness="claude-code"))
    assert info.value.message == "Claude Code's executable 'claude' was not found on PATH."
    assert info.value.hint == 'Install it, or set executable = "/path/to/claude" in [target].'


def test_unset_env_reference_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        backend(tmp_path, env={"ANTHROPIC_API_KEY": "${NOT_SET_ANYWHERE}"})
    assert info.value.message == (
        'env ANTHROPIC_API_KEY = "${NOT_SET_ANYWHERE}" in skillvc.toml reads '
        "${NOT_SET_ANYWHERE}, which is not set."
    )
    assert (
        info.value.hint == "Export NOT_SET_ANYWHERE before running skillvc, or change [target] env."
    )
    with pytest.raises(ConfigError, match=r"must not set HOME"):
        backend(tmp_path, env={"HOME": "/root"})


def test_config_accepts_the_presets(tmp_path: Path) -> None:
    config = parse_config(
        '[target]\nmodel = "command:claude-code"\nharness = "claude-code"\n'
        'executable = "bin/claude"\nfiles = ["agent/settings.json"]\n'
        '[target.env]\nANTHROPIC_API_KEY = "${ANTHROPIC_API_KEY}"\n',
        tmp_path,
    )
    assert config.target.harness == "claude-code"
    assert config.target.env == {"ANTHROPIC_API_KEY": "${ANTHROPIC_API_KEY}"}
    with pytest.raises(ConfigError) as info:
        parse_config('[target]\nmodel = "command:x"\nharness = "cursor"\n', tmp_path)
    assert info.value.message == (
        "[target] harness 'cursor' is not one of chat, command, claude-code, codex."
    )


# -- the cache --------------------------------------------------------------------------------


def test_cache_key_covers_version_env_and_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(tmp_path / "events.db")
    monkeypatch.setenv("MY_KEY", SECRET)

    def client_for(version: str | None = None, **kw: Any) -> ModelClient:
        agent = backend(tmp_path, version=version, **kw)
        return ModelClient(store, {"target": agent}, {"target": agent.config})

    env = {"ANTHROPIC_API_KEY": "${MY_KEY}"}
    first = client_for(env=env).call("target", request().messages)
    again = client_for(env=env).call("target", request().messages)
    assert not first.cached and again.cached and again.key == first.key

    monkeypatch.setenv("MY_KEY", SECRET + "-rotated")
    rotated = client_for(env=env).call("target", request().messages)
    assert not rotated.cached, "a changed environment value misses the cache"

    upgraded = client_for("2.2.0 (Claude Code)", env=env).call("target", request().messages)
    assert not upgraded.cached, "a new CLI version misses the cache"

    (tmp_path / "settings.json").write_text("{}")
    with_file = client_for(env=env, files=["settings.json"]).call("target", request().messages)
    (tmp_path / "settings.json").write_text('{"model": "opus"}')
    changed = client_for(env=env, files=["settings.json"]).call("target", request().messages)
    assert not with_file.cached and not changed.cached

    params = [e.payload["params"] for e in store.events(types=["model.call"])]
    assert params[0]["agent"]["env"] == {
        "ANTHROPIC_API_KEY": params[0]["agent"]["env"]["ANTHROPIC_API_KEY"]
    }
    assert params[0]["agent"]["version"] == "2.1.3 (Claude Code)"
    assert SECRET not in json.dumps(params), "names and hashes, never values"


# -- trajectories -----------------------------------------------------------------------------


def test_parse_claude_code_stream() -> None:
    lines = [
        {"type": "system", "subtype": "init", "session_id": "s1", "model": "m", "tools": []},
        {
            "type": "assistant",
            "message": {
                "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}},
                ]
            },
        },
        {
            "type": "user",
            "message": {
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "no such file"}],
                        "is_error": True,
                    }
                ]
            },
        },
        {
            "type": "result",
            "subtype": "error_max_turns",
            "is_error": True,
            "num_turns": 2,
            "total_cost_usd": 0.01,
            "usage": {"input_tokens": 5, "cache_read_input_tokens": 10, "output_tokens": 3},
        },
    ]
    t = parse_claude_code("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    assert [s.kind for s in t.steps] == ["message", "tool_call", "tool_result", "error"]
    assert t.steps[2] == Step("tool_result", "no such file", "Read", is_error=True)
    assert (t.prompt_tokens, t.completion_tokens, t.cost_usd) == (15, 3, 0.01)
    assert t.error == "error_max_turns"
    assert t.info == {
        "session_id": "s1",
        "model": "m",
        "subtype": "error_max_turns",
        "num_turns": 2,
        "result": True,
    }


def test_parse_codex_jsonl_and_activation() -> None:
    lines = [
        {"type": "thread.started", "thread_id": "th"},
        {"type": "turn.started"},
        {
            "type": "item.completed",
            "item": {
                "id": "i1",
                "type": "command_execution",
                "command": "cat .agents/skills/returns/SKILL.md",
                "aggregated_output": "x",
                "exit_code": 0,
                "status": "completed",
            },
        },
        {"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": "done"}},
        {
            "type": "turn.completed",
            "usage": {"input_tokens": 50, "cached_input_tokens": 20, "output_tokens": 7},
        },
    ]
    t = parse_codex("\n".join(json.dumps(x) for x in lines))
    assert t.answer == "done" and (t.prompt_tokens, t.completion_tokens) == (50, 7)
    assert activated(t, "returns") and not activated(t, "other")
    assert t.error is None and t.info["result"] is True


def test_render_keeps_head_and_tail_under_budget() -> None:
    steps = tuple(Step("tool_call", f"step {i} " + "x" * 80, "Bash") for i in range(100))
    text = render(Trajectory("claude-code", steps), budget=1200, activated=False)
    lines = text.splitlines()
    assert lines[0].startswith("NOTE: the agent never loaded the skill")
    assert lines[1].startswith("-> Bash: step 0 ") and lines[-1].startswith("-> Bash: step 99 ")
    assert any(ln.startswith("[... ") and ln.endswith(" steps cut ...]") for ln in lines)
    assert len(text) <= 1200 + 40


# -- training through each preset ---------------------------------------------------------------


def agent_repo(seed: Path, dest: Path, preset: str, exe: Path, extra: str = "") -> Path:
    """The demo repo with an agent target and a smaller task set, committed."""
    root = copy_repo(seed, dest)
    for split, n in (("train", 20), ("val", 10), ("test", 6)):
        path = root / "evals" / f"{split}.jsonl"
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:n]))
    toml = root / "skillvc.toml"
    text = toml.read_text().replace(
        '[target]\nmodel = "sim:support"',
        f'[target]\nmodel = "command:{preset}"\nharness = "{preset}"\nexecutable = "{exe}"{extra}',
    )
    text = text.replace("epochs = 3", "epochs = 1").replace("batch_size = 20", "batch_size = 5")
    text = text.replace("workers = 8", "workers = 2")
    toml.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"target: {preset}")
    return root


def fake_agent_repo(seed: Path, tmp_path: Path, preset: str) -> Path:
    """``agent_repo`` at ``tmp_path/repo`` with the fake CLI of ``preset`` in ``tmp_path/bin``."""
    return agent_repo(seed, tmp_path / "repo", preset, fake_cli(tmp_path / "bin", preset))


@pytest.mark.parametrize("preset", ["claude-code", "codex"])
def test_training_through_each_preset(
    demo_seed: Path, tmp_path: Path, preset: str, scratch_tmp: Path, isolated_env: Path
) -> None:
    root = fake_agent_repo(demo_seed, tmp_path, preset)
    home_before = sorted(isolated_env.rglob("*"))
    # The paper's bundle gate: this small val cannot make a gain significant at the default
    # confidence, and the preset's plumbing, not the gate, is what this test is about.
    summary = train(open_workspace(root), overrides={"train": {"attribution": False}})

    assert summary.status == "finished"
    assert summary.accepted >= 1 and summary.best_val > summary.baseline_val
    store = open_store(root / ".skillvc" / "events.db")
    started = store.events(run_id=summary.run_id, types=["run.started"])[0].payload
    version = "2.1.3 (Claude Code)" if preset == "claude-code" else "codex-cli 0.64.0"
    assert started["agents"] == {"target": version}, "the CLI version is recorded in the run"
    rollouts = store.events(run_id=summary.run_id, types=["rollout"])
    assert rollouts and all(r.payload["activated"] is True for r in rollouts)
    assert all(r.payload["trajectory"] for r in rollouts)

    # The optimizer saw what the agent did.
    prompts = [
        "\n".join(m["content"] for m in json.loads(store.get_blob(e.payload["prompt"])))
        for e in store.events(types=["model.call"])
        if e.payload["role"] == "optimizer"
    ]
    loaded = "-> Skill: " if preset == "claude-code" else "-> shell: bash -lc 'cat .agents"
    assert any(loaded in p and '"skill_loaded": true' in p for p in prompts)
    assert any("(the skill's text, " in p for p in prompts)
    assert not any("you may replace the frontmatter description" in p for p in prompts)

    # Usage and cost: the agent's own report, summed into the run's totals.
    calls = [e.payload for e in store.events(types=["model.call"]) if e.payload["role"] == "target"]
    tokens = sum(c["prompt_tokens"] + c["completion_tokens"] for c in calls)
    assert tokens > 0
    target_tokens = summary.tokens - sum(
        e.payload["prompt_tokens"] + e.payload["completion_tokens"]
        for e in store.events(types=["model.call"])
        if e.payload["role"] != "target"
    )
    assert target_tokens == tokens
    if preset == "claude-code":
        assert summary.cost_usd == pytest.approx(sum(c["cost_usd"] for c in calls))
        assert summary.unpriced_calls == 0
    else:
        assert summary.unpriced_calls == len(calls)  # Codex gives no cost, no price set

    report = run_report(store, summary.run_id, "skills/acme-returns/SKILL.md")
    assert report["activation"] == {"loaded": len(rollouts), "of": len(rollouts), "rate": 1.0}
    assert f"Skill loaded by the agent in {len(rollouts)}/{len(rollouts)} rollouts (100%)." in (
        render_markdown(report)
    )
    result = evaluate(open_workspace(root), None, "val")
    assert result.activation == {"loaded": 10, "of": 10, "rate": 1.0}
    assert result.fresh_calls == 0, "the best skill's val answers come from the log"
    assert list(scratch_tmp.iterdir()) == [], "no scratch directory is left behind"
    assert sorted(isolated_env.rglob("*")) == home_before, "nothing is written into HOME"


def test_personal_claude_md_changes_no_score(
    demo_seed: Path, tmp_path: Path, isolated_env: Path
) -> None:
    exe = fake_cli(tmp_path / "bin", "claude-code")
    personal = isolated_env / ".claude" / "CLAUDE.md"
    personal.parent.mkdir()
    personal.write_text("\n".join(r.text for r in HARMFUL) + "\n")

    # The file matters: the CLI run by hand, with this HOME, answers differently.
    items = [
        json.loads(line) for line in (demo_seed / "evals" / "val.jsonl").read_text().splitlines()
    ]
    skill = (demo_seed / "skills" / "acme-returns" / "SKILL.md").read_text()
    by_hand = []
    for item in items[:10]:
        work = tmp_path / "work" / item["id"]
        (work / ".claude" / "skills" / "acme-returns").mkdir(parents=True)
        (work / ".claude" / "skills" / "acme-returns" / "SKILL.md").write_text(skill)
        out = subprocess.run(
            [str(exe), "-p", "--output-format", "stream-json", "--verbose"],
            input=item["input"],
            cwd=work,
            capture_output=True,
            text=True,
            env={**os.environ, "HOME": str(isolated_env)},
            check=True,
        ).stdout
        by_hand.append(parse_claude_code(out).answer)

    with_file = evaluate(
        open_workspace(agent_repo(demo_seed, tmp_path / "a", "claude-code", exe)), None, "val"
    )
    personal.unlink()
    without = evaluate(
        open_workspace(agent_repo(demo_seed, tmp_path / "b", "claude-code", exe)), None, "val"
    )
    answers = [i.got for i in without.items]
    assert [i.got for i in with_file.items] == answers
    assert [(i.hard, i.soft) for i in with_file.items] == [(i.hard, i.soft) for i in without.items]
    assert any(f"<answer>{a}</answer>" not in h for a, h in zip(answers, by_hand, strict=True))


# -- the CLI ------------------------------------------------------------------------------------


def test_eval_and_doctor_show_the_agent(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fake_agent_repo(demo_seed, tmp_path, "codex")
    monkeypatch.chdir(root)

    result = CliRunner().invoke(cli, ["eval"])
    assert result.exit_code == 0, result.output
    assert "  skill loaded by the agent in 10/10 items (100%)" in result.stdout.splitlines()
    data = json.loads(CliRunner().invoke(cli, ["eval", "--json"]).stdout)
    assert data["activation"] == {"loaded": 10, "of": 10, "rate": 1.0}
    assert {i["activated"] for i in data["items"]} == {True}
    assert data["fresh_calls"] == 0

    doctor = CliRunner().invoke(cli, ["doctor"])
    assert (
        "ok    target backend: command:codex runs codex (codex-cli 0.64.0) per task, hermetically."
    ) in doctor.stdout.splitlines()


def test_doctor_reports_a_missing_agent_cli(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = agent_repo(demo_seed, tmp_path / "repo", "claude-code", tmp_path / "nope" / "claude")
    monkeypatch.chdir(root)
    result = CliRunner().invoke(cli, ["doctor"])
    assert result.exit_code == 6
    assert (
        f"FAIL  target backend: Claude Code's executable '{tmp_path}/nope/claude' was not found. "
        'Fix: Install it, or set executable = "/path/to/claude" in [target].'
    ) in result.stdout.splitlines()


def test_check_uses_the_base_setup_files(demo_seed: Path, tmp_path: Path) -> None:
    """A pull request that changes a setup file (CLAUDE.md copied into the agent's config dir)
    cannot change the agent the check runs: the base's file is used for both sides."""
    exe = fake_cli(tmp_path / "bin", "claude-code")
    root = copy_repo(demo_seed, tmp_path / "seedcopy")
    (root / "agent").mkdir()
    (root / "agent" / "CLAUDE.md").write_text("# Personal notes\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "agent setup")
    root = agent_repo(root, tmp_path / "repo", "claude-code", exe, '\nfiles = ["agent/CLAUDE.md"]')
    base = evaluate(open_workspace(root), None, "val")
    git(root, "checkout", "-q", "-b", "pr")
    (root / "agent" / "CLAUDE.md").write_text("\n".join(r.text for r in GOOD) + "\n")
    git(root, "commit", "-q", "-am", "PR: smarter agent settings")
    with_pr_file = evaluate(open_workspace(root), None, "val").mean
    assert with_pr_file is not None and base.mean is not None
    assert with_pr_file > base.mean + 0.3  # the PR's file would change the scores

    result = check_change(root, "main", "HEAD", "val")
    assert result.comparison is not None
    assert result.comparison.b.mean == result.comparison.a.mean == base.mean < 0.5


def test_timeout_and_missing_result_are_errors(tmp_path: Path, scratch_tmp: Path) -> None:
    script = tmp_path / "slow_agent.py"
    script.write_text(
        "import sys, time\n"
        "if sys.argv[1:] == ['--version']:\n    print('1'); sys.exit(0)\n"
        "task = sys.stdin.read()\n"
        'print(\'{"type": "system", "subtype": "init"}\', flush=True)\n'
        "print('working on it', file=sys.stderr, flush=True)\n"
        "if 'slow' in task:\n    time.sleep(30)\n"
    )
    exe = python_cli(tmp_path / "claude", script)
    config = ModelConfig(
        model="command:claude-code", harness="claude-code", executable=str(exe), task_timeout_s=1
    )
    agent = AgentBackend(config)
    with pytest.raises(AgentFailed) as info:
        agent.complete(request("slow"))
    assert info.value.timed_out
    assert info.value.message == (
        "Agent 'claude' (Claude Code) timed out after 1 s and was killed: working on it. "
        "[stdout: (no message); stderr: working on it]"
    )
    with pytest.raises(AgentFailed) as info:
        agent.complete(request("quick"))
    assert info.value.message == (  # an init line says nothing (issue 23: no JSON noise)
        "Agent 'claude' (Claude Code) ended without a final result: working on it. "
        "[stdout: (no message); stderr: working on it]"
    )
    assert list(scratch_tmp.iterdir()) == []


# -- train_description ----------------------------------------------------------------------------


def test_train_description_makes_the_agent_load_the_skill(demo_seed: Path, tmp_path: Path) -> None:
    root = fake_agent_repo(demo_seed, tmp_path, "claude-code")
    skill = root / "skills" / "acme-returns" / "SKILL.md"
    rules = "\n".join(f"- {r.text}" for r in GOOD)
    skill.write_text(
        "---\nname: acme-returns\ndescription: Formats spreadsheet columns.\n---\n"
        f"# Acme returns\n\n## Policies\n{rules}\n"
    )
    toml = root / "skillvc.toml"
    toml.write_text(toml.read_text().replace("[train]\n", "[train]\ntrain_description = true\n"))
    git(root, "commit", "-q", "-am", "a skill whose description matches no ticket")
    ws = open_workspace(root)
    before = evaluate(ws, None, "val")
    assert before.activation == {"loaded": 0, "of": 10, "rate": 0.0}

    summary = train(ws)
    assert summary.accepted >= 1 and summary.best_val > summary.baseline_val
    doc = SkillDocument.parse(skill.read_text())
    assert doc.frontmatter == {"name": "acme-returns", "description": WORLD_DESCRIPTION}
    assert all(r.text in doc.body for r in GOOD)
    after = evaluate(open_workspace(root), None, "val")
    assert after.activation == {"loaded": 10, "of": 10, "rate": 1.0}


def test_description_limits() -> None:
    doc = SkillDocument.parse("---\nname: x\ndescription: Old.\nlicense: MIT\n---\n# X\n")
    assert targets_description(doc, Edit("replace", "Old.", "New."))
    assert targets_description(doc, Edit("replace", "description: Old.", "New."))
    assert not targets_description(doc, Edit("replace", "# X", "# Y"))
    quoted = with_description(doc, 'description: "Use for: tickets"')
    assert quoted.text == (
        "---\nname: x\ndescription: 'Use for: tickets'\nlicense: MIT\n---\n# X\n"
    )
    with pytest.raises(DescriptionRefused, match="1025 characters; the limit is 1024"):
        with_description(doc, "x" * 1025)
    with pytest.raises(DescriptionRefused, match="XML tags"):
        with_description(doc, "Use for <tickets>")
    with pytest.raises(DescriptionRefused, match="empty"):
        with_description(doc, "  ")

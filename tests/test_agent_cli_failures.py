"""Agent CLIs that retry, stall or write outside their scratch: fakes in the CLIs' own formats.

The fakes print what Claude Code 2.1 and Codex 0.169 printed against a loopback server with a
refused key or no server at all (``api_retry`` system lines, ``Reconnecting... n/5`` errors).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillvc.cli import cli
from skillvc.core.errors import AuthenticationFailed
from skillvc.models.agents import backend as agent_backend
from skillvc.models.agents.presets import PRESETS, notes, parse_codex
from skillvc.models.backends.command import AgentFailed, AgentRefused
from tests.test_agents import agent_repo, backend, fake_cli, request


def test_a_refused_key_stops_the_agent_at_its_second_retry_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-ant-api03-wrongwrongwrong0123456789")
    agent = backend(
        tmp_path, env={"FAKE_AGENT_FAIL": "retry-401", "ANTHROPIC_API_KEY": "${MY_KEY}"}
    )
    started = time.monotonic()
    with pytest.raises(AgentRefused) as info:
        agent.complete(request())
    assert time.monotonic() - started < 4, "not the CLI's ten retries (5 s here, 3 min real)"
    assert isinstance(info.value, AuthenticationFailed)  # stops a run at its first call
    assert info.value.message == (
        "Agent 'claude' (Claude Code) was stopped: its API requests were refused, and retrying "
        "cannot fix that: API request failed (HTTP 401 authentication_failed); retry 2 of 10, "
        "next in 0 s. [stdout: API request failed (HTTP 401 authentication_failed); retry 1 of "
        "10, next in 0 s | API request failed (HTTP 401 authentication_failed); retry 2 of 10, "
        "next in 0 s; stderr: (empty)]"
    )


def test_a_timeout_quotes_the_retry_the_agent_was_waiting_on(tmp_path: Path) -> None:
    agent = backend(
        tmp_path,
        env={"FAKE_AGENT_FAIL": "retry-refused", "FAKE_AGENT_RETRY_S": "0.4"},
        task_timeout_s=1.5,
    )
    with pytest.raises(AgentFailed) as info:
        agent.complete(request())
    assert info.value.timed_out and not isinstance(info.value, AgentRefused)
    assert info.value.message.startswith(
        "Agent 'claude' (Claude Code) timed out after 1.5 s and was killed: still retrying: "
        "API request failed (no response (connection refused or lost)); retry "
    )
    assert "stdout: (empty)" not in info.value.message
    assert '"type"' not in info.value.message, "the agent's words, not its JSON"


def test_an_error_result_after_the_retries_names_the_refusal(tmp_path: Path) -> None:
    """Claude Code's final result carries api_error_status: a 401 there is a refused key."""
    stdout = "\n".join(
        json.dumps(e)
        for e in (
            {"type": "system", "subtype": "init", "session_id": "s"},
            {
                "type": "assistant",
                "message": {"content": [{"type": "text", "text": "Invalid API key"}]},
            },
            {
                "type": "result",
                "subtype": "success",
                "is_error": True,
                "api_error_status": 401,
                "result": "Invalid API key · Fix external API key",
                "usage": {"input_tokens": 0},
            },
        )
    )
    said = notes(PRESETS["claude-code"], stdout)
    assert [(n.kind, n.text) for n in said] == [
        ("message", "Invalid API key"),
        ("error", "Invalid API key · Fix external API key"),
    ]


def test_codex_reconnect_notices_are_not_its_error() -> None:
    stdout = "\n".join(
        json.dumps(e)
        for e in (
            {"type": "thread.started", "thread_id": "t"},
            {"type": "error", "message": "Reconnecting... 1/5 (stream disconnected)"},
            {"type": "item.completed", "item": {"type": "agent_message", "text": "refund"}},
            {"type": "turn.completed", "usage": {"input_tokens": 5, "output_tokens": 1}},
        )
    )
    trajectory = parse_codex(stdout)
    assert trajectory.error is None and trajectory.answer == "refund"
    assert [n.kind for n in notes(PRESETS["codex"], stdout)] == ["retry", "message"]


def test_codex_answers_after_reconnecting_and_its_refused_key_stops_it(tmp_path: Path) -> None:
    ok = backend(tmp_path / "a", "codex", env={"FAKE_AGENT_RECONNECT": "1"})
    assert ok.complete(request()).text
    refused = backend(tmp_path / "b", "codex", env={"FAKE_AGENT_FAIL": "api-retry"})
    with pytest.raises(AgentRefused, match=r"HTTP|401 Unauthorized"):
        refused.complete(request())


def test_the_codex_daemon_folder_in_the_system_temp_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    monkeypatch.setattr(agent_backend, "SYSTEM_TMP", str(systmp))
    agent = backend(tmp_path, "codex", env={"FAKE_CODEX_SYSTMP": str(systmp)})
    assert agent.complete(request()).text
    assert list(systmp.iterdir()) == [], "codex-daemon-<uid> outlived the task"

    # One that existed before skillvc ran (the user's own Codex) is left alone.
    theirs = systmp / f"codex-daemon-{os.getuid()}"
    theirs.mkdir()
    assert agent.complete(request()).text
    assert theirs.is_dir()


def test_doctor_sends_each_agent_one_tiny_prompt(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = fake_cli(tmp_path / "bin", "claude-code")
    root = agent_repo(demo_seed, tmp_path / "repo", "claude-code", exe)
    monkeypatch.chdir(root)
    lines = CliRunner().invoke(cli, ["doctor"]).stdout.splitlines()
    assert any(
        ln.startswith("ok    target agent prompt: answered one tiny prompt in ") for ln in lines
    )
    lines = CliRunner().invoke(cli, ["doctor", "--no-agent-prompt"]).stdout.splitlines()
    assert "skip  target agent prompt: not sent (--no-agent-prompt)." in lines

    toml = root / "skillvc.toml"
    toml.write_text(
        toml.read_text().replace(
            f'executable = "{exe}"',
            f'executable = "{exe}"\nenv = {{ FAKE_AGENT_FAIL = "retry-401" }}',
        )
    )
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["doctor"])
    assert time.monotonic() - started < 30
    assert result.exit_code == 6
    assert (
        "FAIL  target agent prompt: Agent 'claude' (Claude Code) was stopped: its API requests "
        "were refused, and retrying cannot fix that: API request failed (HTTP 401 "
        "authentication_failed)"
    ) in result.stdout

"""Learning from sessions: transcripts in the real Claude Code and Codex formats, written here
from the formats' documentation, with recurring and one-off prompts and planted secrets."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import copy_repo, git

from skillvc.cli import cli
from skillvc.models import simworld
from skillvc.sleep import mine, redact, transcripts

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n"
    "-----END RSA PRIVATE KEY-----"
)
ENV_SECRET = "envsecret-Vx7Q9zLp3mN8"
SECRETS = [
    "sk-ant-api03-" + "Qx7" * 14,
    "sk-proj-" + "Z9ab" * 8,
    "AKIAIOSFODNN7EXAMPL3",
    "ghp_" + "a1B2" * 9,
    "xoxb-1234567890-abcdefghij",
    "AIza" + "SyD3" * 8 + "abc",
    "hunter2-correct-horse",
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
    "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LWJlYXJlcg",
    ENV_SECRET,
    "/home/alice",
]
# Where each secret is planted: in a recurring prompt, a tool result, an answer, a one-off.
PLANTS = [
    f"Use the key {SECRETS[0]} for this.",
    f"export OPENAI_API_KEY={SECRETS[1]}",
    f"aws id {SECRETS[2]}",
    f"token {SECRETS[3]} and slack {SECRETS[4]} and google {SECRETS[5]}",
    f"db password={SECRETS[6]}",
    PEM,
    f"Authorization: Bearer {SECRETS[8]}",
    f"the service token is {ENV_SECRET}",
    "see /home/alice/work/notes.txt",
]


def ticket_items(n: int, seed: int) -> list[dict[str, Any]]:
    return simworld.generate_items(n, seed)


def claude_lines(session: str, start: str, cwd: str, exchanges: list[dict[str, Any]]) -> list[dict]:
    """A Claude Code session file's lines (~/.claude/projects/<project>/<session>.jsonl)."""
    lines: list[dict[str, Any]] = [
        {"type": "summary", "summary": "Support tickets", "leafUuid": str(uuid.uuid4())}
    ]
    parent = None

    def base(kind: str, stamp: str) -> dict[str, Any]:
        nonlocal parent
        me = str(uuid.uuid4())
        line = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": cwd,
            "sessionId": session,
            "version": "2.0.74",
            "gitBranch": "main",
            "type": kind,
            "uuid": me,
            "timestamp": stamp,
        }
        parent = me
        return line

    # Injected lines a person did not type: a slash command wrapper and a meta caveat.
    lines.append(
        base("user", start)
        | {"message": {"role": "user", "content": "<command-name>/clear</command-name>"}}
    )
    lines.append(
        base("user", start)
        | {"isMeta": True, "message": {"role": "user", "content": "Caveat: The messages below"}}
    )
    for n, ex in enumerate(exchanges):
        stamp = f"{start[:11]}{10 + n:02d}:00:00.000Z"
        lines.append(base("user", stamp) | {"message": {"role": "user", "content": ex["prompt"]}})
        tool_id = f"toolu_{uuid.uuid4().hex[:20]}"
        first = ex.get("wrong") or ex["answer"]
        lines.append(
            base("assistant", stamp)
            | {
                "requestId": "req_1",
                "message": {
                    "model": "claude-sonnet-4-5",
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Let me look at the policy file."},
                        {
                            "type": "tool_use",
                            "id": tool_id,
                            "name": "Read",
                            "input": {"file_path": f"{cwd}/policy.md"},
                        },
                    ],
                    "stop_reason": "tool_use",
                    "usage": {"input_tokens": 120, "output_tokens": 30},
                },
            }
        )
        result_text = ex.get("tool_output", "policy text")
        lines.append(
            base("user", stamp)
            | {
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "tool_use_id": tool_id,
                            "type": "tool_result",
                            "content": result_text,
                            "is_error": bool(ex.get("tool_error")),
                        }
                    ],
                },
                "toolUseResult": {"type": "text", "file": {"filePath": f"{cwd}/policy.md"}},
            }
        )
        lines.append(
            base("assistant", stamp)
            | {
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": first}],
                    "usage": {"input_tokens": 200, "output_tokens": 12},
                }
            }
        )
        if ex.get("wrong"):
            lines.append(
                base("user", stamp) | {"message": {"role": "user", "content": ex["correction"]}}
            )
            lines.append(
                base("assistant", stamp)
                | {
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": ex["answer"]}],
                    }
                }
            )
    # A subagent's line: not the person's prompt.
    lines.append(
        base("user", start)
        | {"isSidechain": True, "message": {"role": "user", "content": "sidechain task"}}
    )
    return lines


def codex_lines(session: str, start: str, cwd: str, exchanges: list[dict[str, Any]]) -> list[dict]:
    """A Codex rollout file's lines (~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl)."""

    def line(kind: str, payload: dict[str, Any], stamp: str = start) -> dict[str, Any]:
        return {"timestamp": stamp, "type": kind, "payload": payload}

    out = [
        line(
            "session_meta",
            {
                "id": session,
                "timestamp": start,
                "cwd": cwd,
                "originator": "codex_cli_rs",
                "cli_version": "0.46.0",
                "instructions": None,
                "source": "cli",
            },
        ),
        line(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [
                    {
                        "type": "input_text",
                        "text": f"<environment_context>{cwd}</environment_context>",
                    }
                ],
            },
        ),
    ]
    for n, ex in enumerate(exchanges):
        stamp = f"{start[:11]}{10 + n:02d}:00:00.000Z"
        out.append(
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": ex["prompt"]}],
                },
                stamp,
            )
        )
        out.append(
            line(
                "event_msg",
                {"type": "user_message", "message": ex["prompt"], "kind": "plain"},
                stamp,
            )
        )
        out.append(
            line(
                "turn_context",
                {"cwd": cwd, "model": "gpt-5-codex", "approval_policy": "never"},
                stamp,
            )
        )
        out.append(
            line(
                "response_item",
                {"type": "reasoning", "summary": [], "encrypted_content": "x"},
                stamp,
            )
        )
        out.append(
            line(
                "response_item",
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": json.dumps({"command": ["cat", "policy.md"]}),
                    "call_id": f"call_{n}",
                },
                stamp,
            )
        )
        output = json.dumps(
            {
                "output": ex.get("tool_output", "policy text"),
                "metadata": {
                    "exit_code": 1 if ex.get("tool_error") else 0,
                    "duration_seconds": 0.1,
                },
            }
        )
        out.append(
            line(
                "response_item",
                {"type": "function_call_output", "call_id": f"call_{n}", "output": output},
                stamp,
            )
        )
        first = ex.get("wrong") or ex["answer"]
        out.append(
            line(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": first}],
                },
                stamp,
            )
        )
        out.append(line("event_msg", {"type": "agent_message", "message": first}, stamp))
        if ex.get("wrong"):
            out.append(
                line(
                    "response_item",
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": ex["correction"]}],
                    },
                    stamp,
                )
            )
            out.append(
                line(
                    "response_item",
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": ex["answer"]}],
                    },
                    stamp,
                )
            )
        out.append(
            line(
                "event_msg",
                {
                    "type": "token_count",
                    "info": {"total_token_usage": {"input_tokens": 900 + n, "output_tokens": 40}},
                },
                stamp,
            )
        )
    return out


def night_exchanges(night: int, sessions: int) -> list[list[dict[str, Any]]]:
    """Per session: two support tickets (recurring), plus one one-off prompt, with secrets."""
    items = ticket_items(sessions * 2, seed=100 + night)
    out = []
    for s in range(sessions):
        plant = PLANTS[(s + night * sessions) % len(PLANTS)]
        exs = []
        for k, item in enumerate(items[2 * s : 2 * s + 2]):
            ex: dict[str, Any] = {
                "prompt": str(item["input"]) + (f"\n{plant}" if k == 0 else ""),
                "answer": f"Per the policy.\n<answer>{item['target']}</answer>",
                "tool_output": plant,
                "tool_error": k == 1,
            }
            if (s + k) % 3 == 0:
                wrong = "refund" if item["target"] != "refund" else "deny"
                ex["wrong"] = f"<answer>{wrong}</answer> {plant}"
                ex["correction"] = f"No, that's wrong: check the policy again. {plant}"
            exs.append(ex)
        one_off = [
            f"Rename the function parseConfig{night}{s} in src/app{s}.py and update its callers",
            f"What is the capital of country number {s}? {plant}",
            f"Draft a haiku about autumn leaves for night {night}",
            f"Summarise the meeting notes from {s} March in three bullet points",
        ][s % 4]
        exs.append({"prompt": one_off, "answer": f"Done. {plant}"})
        out.append(exs)
    return out


def write_night(home: Path, night: int, sessions: int = 4) -> tuple[Path, Path]:
    """Write a night of sessions in both formats; returns (claude project dir, codex dir)."""
    project = home / ".claude" / "projects" / "-home-alice-skills"
    codex = home / ".codex" / "sessions"
    cwd = "/home/alice/skills"
    for s, exs in enumerate(night_exchanges(night, sessions)):
        sid = str(uuid.UUID(int=night * 1000 + s))
        start = f"2026-01-{night:02d}T0{s}:00:00.000Z"
        project.mkdir(parents=True, exist_ok=True)
        lines = claude_lines(sid, start, cwd, exs)
        jsonl(project / f"{sid}.jsonl", lines)
        day = codex / "2026" / "01" / f"{night:02d}"
        day.mkdir(parents=True, exist_ok=True)
        cid = str(uuid.UUID(int=500000 + night * 1000 + s))
        lines = codex_lines(cid, start, cwd, exs)
        name = f"rollout-2026-01-{night:02d}T0{s}-00-00-{cid}.jsonl"
        jsonl(day / name, lines)
    return project, codex


def leaked(blob: bytes) -> list[str]:
    """The planted secrets found in ``blob``: raw, or base64 of the environment's secret."""
    found = [s for s in SECRETS if s.encode() in blob]
    if b"alice" in blob:  # the user name, e.g. in Claude Code's -home-alice-skills folder
        found.append("alice")
    if base64.b64encode(ENV_SECRET.encode()).rstrip(b"=") in blob:
        found.append("base64(env secret)")
    return found


def jsonl(path: Path, rows: list[dict[str, Any]], tail: str = "") -> Path:
    """Write ``rows`` to ``path`` one JSON object a line (then ``tail``)."""
    path.write_text("".join(json.dumps(x) + "\n" for x in rows) + tail)
    return path


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_SECRET)


# -- readers ----------------------------------------------------------------------------------


def test_claude_code_reader_keeps_typed_prompts_answers_and_tool_failures(tmp_path: Path) -> None:
    exs = [
        {"prompt": "first task", "answer": "done A", "tool_error": True},
        {"prompt": "second task", "wrong": "bad", "correction": "No, that's wrong.", "answer": "B"},
    ]
    lines = claude_lines("abc", "2026-01-01T00:00:00.000Z", "/w", exs)
    path = jsonl(tmp_path / "s.jsonl", lines, "{not json\n")
    session = transcripts.read_claude_code(path)
    assert session.session_id == "abc"
    assert session.usage == {"input_tokens": 640, "output_tokens": 84}
    assert session.skipped == 1
    got = transcripts.exchanges(session)
    assert [(x.prompt, x.answer, x.corrections, x.tool_errors) for x in got] == [
        ("first task", "done A", (), 1),
        ("second task", "B", ("No, that's wrong.",), 0),
    ]


def test_codex_reader_reads_rollouts_and_exit_codes(tmp_path: Path) -> None:
    exs = [
        {"prompt": "fix the build", "answer": "fixed", "tool_error": True},
        {"prompt": "add a test", "wrong": "x", "correction": "Use pytest instead", "answer": "ok"},
    ]
    lines = codex_lines("u1", "2026-01-01T00:00:00.000Z", "/w", exs)
    path = jsonl(tmp_path / "rollout-2026-01-01T00-00-00-u1.jsonl", lines)
    session = transcripts.read_codex(path)
    assert (session.session_id, session.cwd) == ("u1", "/w")
    assert session.usage == {"input_tokens": 901, "output_tokens": 40}
    got = transcripts.exchanges(session)
    assert [(x.prompt, x.answer, x.corrections, x.tool_errors) for x in got] == [
        ("fix the build", "fixed", (), 1),
        ("add a test", "ok", ("Use pytest instead",), 0),
    ]


def test_find_sessions_never_follows_a_link_out_of_the_directory(tmp_path: Path) -> None:
    inside, outside = tmp_path / "project", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (inside / "a.jsonl").write_text("{}\n")
    (outside / "b.jsonl").write_text("{}\n")
    (inside / "b.jsonl").symlink_to(outside / "b.jsonl")
    assert [p.name for p in transcripts.find_sessions("claude-code", inside)] == ["a.jsonl"]


# -- redaction and mining ---------------------------------------------------------------------


def test_redactor_removes_every_planted_secret_and_counts_them(secret_env: None) -> None:
    r = redact.Redactor(home="/nonexistent-home")
    text = "\n".join(PLANTS) + "\n" + base64.b64encode(ENV_SECRET.encode()).decode()
    out, counts = r.redact(text)
    assert leaked(out.encode()) == []
    assert counts == {
        "api_key": 5,
        "aws_key": 1,
        "assignment": 1,
        "private_key": 1,
        "bearer": 1,
        "env_value": 2,
        "home_path": 1,
    }
    assert r.redact(out) == (out, {})  # redacting twice changes nothing more
    assert "~/work/notes.txt" in out
    folder = "/nonexistent-home/.claude/projects/-home-bob-src-app/s.jsonl"
    assert r.redact(folder) == ("~/.claude/projects/~-src-app/s.jsonl", {"home_path": 2})


def test_normalise_and_mining_group_near_duplicates_and_leave_out_one_offs() -> None:
    assert mine.normalise('Fix `parse_config` in /src/app/main.py, line 42 "now"') == (
        "fix <name> in <path> , line <n> <name>"
    )
    assert mine.normalise("Move src/app/ and ~/notes.txt to v2.0.1 of fooBar") == (
        "move <path> and <path> to <n> of <name>"
    )
    rows = [
        {"session": f"s{i}", "timestamp": f"t{i}", "prompt": p}
        for i, p in enumerate(
            [
                "Bump the version to 1.2.3 and tag the release",
                "bump the version to 2.0.0 and tag the release",
                "Bump the version to 2.1.0 and tag the release please",
                "Write a poem about the sea",
                "bump the version to 3.0.0 and tag the release",
            ]
        )
    ]
    mined = mine.mine(rows, min_support=3)
    assert [(k.support, k.name) for k in mined.kinds] == [
        (4, "bump the version to <n> and tag the release")
    ]
    assert (mined.one_offs, mined.one_off_kinds) == (1, 1)
    assert mine.mine(list(reversed(rows))).kinds[0].id == mined.kinds[0].id


# -- harvest ----------------------------------------------------------------------------------


@pytest.fixture
def repo(demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = copy_repo(demo_seed, tmp_path / "acme")
    monkeypatch.chdir(root)
    return root


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def all_bytes(root: Path) -> bytes:
    db = root / ".skillvc" / "events.db"
    blob = b"".join(p.read_bytes() for p in db.parent.glob("events.db*"))
    blob += subprocess.run(
        ["git", "log", "-p", "--all"], cwd=root, capture_output=True, check=True
    ).stdout
    for p in root.rglob("*"):
        # skillvc.toml is the user's own config: it names the transcript folder on purpose.
        skip = ".git" in p.parts or "events.db" in p.name or p.name == "skillvc.toml"
        if p.is_file() and not skip:
            blob += p.read_bytes()
    return blob


def test_harvest_refuses_without_opt_in(repo: Path, isolated_env: Path) -> None:
    project, _ = write_night(isolated_env, 1)
    result = CliRunner().invoke(cli, ["harvest", "--from", "claude-code", str(project)])
    assert result.exit_code == 2
    assert result.output == (
        "Error: Harvesting agent sessions is opt-in per project, and skillvc.toml has no "
        "[harvest] section.\nHint: Add [harvest] (source, dirs) to skillvc.toml, or name the "
        "transcript directory and pass --yes to harvest it once.\n"
    )
    assert b"harvest" not in b"".join(p.read_bytes() for p in repo.glob(".skillvc/events.db*"))


@pytest.mark.parametrize("source", ["claude-code", "codex"])
def test_harvest_finds_recurring_kinds_and_no_secret_gets_out(
    repo: Path, isolated_env: Path, secret_env: None, source: str
) -> None:
    project, codex = write_night(isolated_env, 1)
    directory = project if source == "claude-code" else codex
    (repo / "skillvc.toml").write_text(
        (repo / "skillvc.toml").read_text()
        + f'\n[harvest]\nsource = "{source}"\ndirs = ["{directory}"]\n'
    )
    first = invoke("harvest")
    assert first.exit_code == 0, first.output
    assert (
        "harvest-1: 4 new sessions read (0 already harvested), 1 recurring kind, " in first.output
    )
    assert "4 one-off prompts left out." in first.output
    assert "8 items await review" in first.output
    task_file = repo / "evals" / "harvested.jsonl"
    assert not task_file.exists()  # nothing reviewed, nothing written

    listed = invoke("harvest", "--review")
    assert listed.exit_code == 0
    kind = listed.output.split("kind ", 1)[1].split()[0]
    assert "rubric: The answer is correct when its final answer" in listed.output
    assert "rubric: Accepted final answers seen:" in listed.output
    assert listed.output.count("[ ] h") == 8

    approved = invoke("harvest", "--review", "--approve", kind)
    assert "Wrote 8 reviewed items to evals/harvested.jsonl." in approved.output
    rows = [json.loads(line) for line in task_file.read_text().splitlines()]
    assert len(rows) == 8 and {r["split"] for r in rows} == {"train", "val"}
    assert all(r["target"].startswith("Per the policy.") for r in rows)  # the accepted answer
    assert sum(r["metadata"]["corrections"] for r in rows) == 3
    assert sum(r["metadata"]["tool_errors"] for r in rows) == 4
    assert all(r["metadata"]["kind"] == kind for r in rows)
    assert any(r["metadata"]["redacted"] for r in rows)
    assert "Issue:" in rows[0]["input"]

    again = invoke("harvest")
    assert "harvest-2: 0 new sessions read (4 already harvested)" in again.output
    outputs = (first.output + listed.output + approved.output + again.output).encode()
    assert leaked(outputs) == []
    assert leaked(all_bytes(repo)) == []


def test_review_refuses_an_unknown_id(repo: Path) -> None:
    result = CliRunner().invoke(cli, ["harvest", "--review", "--approve", "knope"])
    assert result.exit_code == 1
    assert result.output == (
        "Error: No harvested kind or item 'knope'.\n"
        "Hint: List them with 'skillvc harvest --review'.\n"
    )


# -- sleep ------------------------------------------------------------------------------------


def test_sleep_trains_on_a_dated_branch_and_a_second_night_reads_only_new_sessions(
    repo: Path, isolated_env: Path, secret_env: None
) -> None:
    project, _ = write_night(isolated_env, 1)
    # About the nightly branch, not the gate: with a 4-item val only the paper's bundle gate
    # can keep an edit (attribution asks for significance), and the branch must get commits.
    toml = repo / "skillvc.toml"
    assert "[train]\n" in toml.read_text()
    toml.write_text(toml.read_text().replace("[train]\n", "[train]\nattribution = false\n", 1))
    before = git(repo, "rev-parse", "main")
    status_before = git(repo, "status", "--porcelain")
    night1 = invoke("sleep", "--yes", "--date", "2026-01-01", "-q", str(project))
    assert night1.exit_code == 0, night1.output
    assert (
        "harvest-1: 4 new sessions, 1 recurring kind, 4 one-off prompts left out" in night1.output
    )
    assert git(repo, "rev-parse", "main") == before
    assert git(repo, "branch", "--show-current") == "main"
    assert git(repo, "status", "--porcelain") == status_before
    log = git(repo, "log", "--format=%s", "main..skillvc/sleep/2026-01-01").splitlines()
    assert log[-1] == "skillvc sleep: 8 reviewed tasks harvested from agent sessions"
    assert len(log) >= 2, log  # the task set, then training commits
    report = (repo / ".skillvc" / "reports" / "sleep-2026-01-01.md").read_text()
    assert report.startswith("# skillvc sleep 2026-01-01\n")
    assert "## Significance" in report and "| p-value (one-sided) |" in report
    assert "> **Warning:** The val set has only 4 items" in report
    assert git(repo, "worktree", "list").count("\n") == 0  # the worktree is gone

    write_night(isolated_env, 2)
    night2 = invoke("sleep", "--yes", "--date", "2026-01-02", "-q", str(project))
    assert night2.exit_code == 0, night2.output
    assert "harvest-2: 4 new sessions" in night2.output
    data = json.loads(
        invoke("sleep", "--yes", "--date", "2026-01-02", "--json", str(project)).output
    )
    assert (data["harvest"]["sessions_new"], data["harvest"]["sessions_seen"]) == (0, 8)
    assert data["branch"] == "skillvc/sleep/2026-01-02.2"
    assert git(repo, "rev-parse", "main") == before
    assert leaked(night1.output.encode() + night2.output.encode()) == []
    assert leaked(all_bytes(repo)) == []


def test_sleep_with_paid_models_needs_a_budget(repo: Path, isolated_env: Path) -> None:
    project, _ = write_night(isolated_env, 1)
    toml = repo / "skillvc.toml"
    toml.write_text(
        toml.read_text().replace(
            'model = "sim:support"\ntemperature = 0.7',
            'model = "anthropic:claude-sonnet-4-5"\ntemperature = 0.7',
        )
    )
    result = CliRunner().invoke(cli, ["sleep", "--yes", str(project)])
    assert result.exit_code == 5
    assert result.output == (
        "Error: skillvc sleep trains with paid models (anthropic:claude-sonnet-4-5) and needs "
        "a budget.\nHint: Pass --budget-usd AMOUNT or set budget_usd in [harvest] of "
        "skillvc.toml.\n"
    )


def test_an_explicit_directory_with_yes_harvests_once_and_writes_reviewed_items(
    repo: Path, isolated_env: Path
) -> None:
    _, codex = write_night(isolated_env, 1)
    result = invoke("harvest", "--from", "codex", "--yes", "--json", str(codex))
    data = json.loads(result.output)
    assert (data["sessions_new"], data["one_offs"], data["unreviewed"]) == (4, 4, 0)
    assert data["task_file"] == "evals/harvested.jsonl" and data["items_written"] == 8
    # A transcript that grew (a resumed session) is read again and replaces its old version.
    path = sorted(codex.rglob("rollout-*.jsonl"))[0]
    extra = codex_lines("x", "2026-01-01T09:00:00.000Z", "/w", [{"prompt": "p", "answer": "a"}])
    path.write_text(path.read_text() + json.dumps(extra[2]) + "\n")
    again = json.loads(invoke("harvest", "--from", "codex", "--yes", "--json", str(codex)).output)
    assert (again["sessions_new"], again["sessions_seen"]) == (1, 3)
    assert again["exchanges"] == data["exchanges"] + 1  # the new prompt, no duplicates


def test_a_user_rubric_replaces_the_drafted_one_and_is_redacted(
    repo: Path, isolated_env: Path, secret_env: None
) -> None:
    project, _ = write_night(isolated_env, 1)
    invoke("harvest", "--from", "claude-code", "--yes", str(project))
    kind = json.loads(invoke("harvest", "--review", "--json").output)["kinds"][0]["id"]
    edited = invoke("harvest", "--review", "--rubric", kind, f"Only the action counts {ENV_SECRET}")
    assert "  rubric: Only the action counts [REDACTED:env_value]" in edited.output
    assert leaked(all_bytes(repo)) == []


def test_the_simulator_drafts_a_rubric_only_from_what_it_is_shown() -> None:
    examples = [
        {"final_answer": "ok\n<answer>repair</answer>", "corrections": ["No, wrong"]},
        {"final_answer": "<answer>deny</answer>", "corrections": []},
    ]
    assert simworld.draft_rubric(examples) == (
        "The answer is correct when its final answer (the <answer> tag) is the action the "
        "person accepted for this request.\nAccepted final answers seen: repair, deny.\n"
        "In 1 of 2 examples the person corrected the first answer: an answer that differs "
        "from the accepted one is wrong."
    )
    prompt = "Task input:\nt\n\nAcceptable answers:\n- Per policy.\n<answer>deny</answer>\n\n"
    assert simworld.judge(prompt + "Output to grade:\n<answer>deny</answer>").endswith("SCORE: 1")
    assert simworld.judge(prompt + "Output to grade:\nPer policy.").endswith("SCORE: 0")


def test_sleep_trains_nothing_unreviewed(repo: Path, isolated_env: Path) -> None:
    project, _ = write_night(isolated_env, 1)
    toml = repo / "skillvc.toml"
    toml.write_text(toml.read_text() + f'\n[harvest]\ndirs = ["{project}"]\n')
    result = invoke("sleep", "--date", "2026-01-01", "-q")
    assert result.exit_code == 0
    assert result.output == (
        "harvest-1: 4 new sessions, 1 recurring kind, 4 one-off prompts left out, 8 items "
        "await review.\nWarning: 0 reviewed harvested items (8 await review): training needs "
        "reviewed items in both train and val; review them with 'skillvc harvest --review'.\n"
        "Report: .skillvc/reports/sleep-2026-01-01.md\n"
    )
    assert "skillvc/sleep" not in git(repo, "branch", "--list")


def test_timer_templates_run_skillvc_sleep_nightly() -> None:
    import plistlib

    from skillvc.core.resources import resource_dir

    folder = resource_dir("templates").joinpath("sleep")
    plist = plistlib.loads(folder.joinpath("dev.skillvc.sleep.plist").read_bytes())
    assert plist["ProgramArguments"][1:3] == ["sleep", "--quiet"]
    assert plist["StartCalendarInterval"] == {"Hour": 3, "Minute": 30}
    service = folder.joinpath("skillvc-sleep.service").read_text()
    assert "ExecStart=%h/.local/bin/skillvc sleep --quiet --budget-usd 2" in service
    assert "OnCalendar=*-*-* 03:30:00" in folder.joinpath("skillvc-sleep.timer").read_text()
    cron = [
        line
        for line in folder.joinpath("crontab.txt").read_text().splitlines()
        if not line.startswith("#")
    ]
    assert cron[0].startswith("30 3 * * * ") and " sleep --quiet --budget-usd 2 " in cron[0]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--budget-usd", "nan"], "Error: --budget-usd nan is not a number of dollars."),
        (["--budget-usd", "1e400"], "Error: --budget-usd inf is not a number of dollars."),
        (["--date", "2026-02-30"], "Error: --date '2026-02-30' is not a date (YYYY-MM-DD)."),
    ],
)
def test_a_bad_budget_or_date_stops_sleep_before_anything_runs(
    repo: Path, isolated_env: Path, args: list[str], error: str
) -> None:
    """NaN and infinity passed click's FloatRange: no budget could ever be exceeded."""
    project, _ = write_night(isolated_env, 1)
    result = CliRunner().invoke(cli, ["sleep", "--yes", *args, str(project)])
    assert result.exit_code == 5, result.output
    assert result.output.splitlines()[0] == error
    assert result.output.splitlines()[1].startswith("Hint: Pass ")
    assert not (repo / ".skillvc" / "reports").exists()
    assert "skillvc/sleep/" not in git(repo, "branch", "--all")


def test_a_sleep_that_runs_out_of_budget_keeps_its_commits_and_reports(
    repo: Path, isolated_env: Path
) -> None:
    project, _ = write_night(isolated_env, 1)
    toml = repo / "skillvc.toml"
    toml.write_text(
        toml.read_text() + '\n[prices."sim:support"]\ninput = 1000.0\noutput = 1000.0\n'
    )
    result = invoke(
        "sleep", "--yes", "--budget-usd", "0.01", "--date", "2026-01-03", "-q", str(project)
    )
    assert result.exit_code == 0, result.output
    assert "Warning: Run run-" in result.output and "stopped after step 1" in result.output
    assert git(repo, "rev-parse", "main") != git(repo, "rev-parse", "skillvc/sleep/2026-01-03")
    report = (repo / ".skillvc" / "reports" / "sleep-2026-01-03.md").read_text()
    assert "(stopped)" in report and "## Significance" in report
    # The stopped night is not resumed by the user's own training on main.
    own = invoke("train", "-q", "--json", "--budget-usd", "100000")  # priced: needs a budget
    assert own.exit_code == 0, own.output
    assert json.loads(own.output)["status"] == "finished"
    assert git(repo, "branch", "--show-current") == "main"


def test_a_bad_harvest_section_is_one_clear_error(repo: Path) -> None:
    toml = repo / "skillvc.toml"
    seed = toml.read_text()
    toml.write_text(seed + '\n[harvest]\nsorce = "codex"\n')
    result = CliRunner().invoke(cli, ["harvest"])
    assert result.exit_code == 5
    assert result.output.startswith("Error: Unknown key 'sorce' in [harvest] of skillvc.toml ")
    toml.write_text(seed + '\n[harvest]\nsource = "copilot"\ndirs = ["."]\n')
    result = CliRunner().invoke(cli, ["harvest"])
    assert (result.exit_code, result.output) == (
        5,
        "Error: [harvest] source 'copilot' is not one of claude-code, codex.\n"
        "Hint: Fix skillvc.toml; its comments and the manual's tables (docs/) list every key.\n",
    )

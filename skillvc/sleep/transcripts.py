"""Readers for agent session transcripts: Claude Code and Codex JSONL files.

Invariants:
- Only files under the directories the caller names are read: every candidate file is resolved
  (symbolic links followed) and skipped unless it still lies inside its directory.
- Reading never fails on one odd line: a line that is not a JSON object, or of a type we do not
  know, is skipped and counted (``Session.skipped``), because these formats grow new line types.
- Text is returned as found; redaction (``skillvc.sleep.redact``) happens before anything is
  stored or sent.

Fields relied on (checked against the formats' public descriptions and Codex's rollout code):

Claude Code, ``~/.claude/projects/<cwd with '/' as '-'>/<session-uuid>.jsonl``, one object per
line: ``type`` ("user", "assistant"; "summary", "system", "file-history-snapshot",
"queue-operation" are ignored), ``sessionId``, ``timestamp`` (ISO 8601), ``cwd``,
``isSidechain`` (subagent lines, ignored), ``isMeta`` (injected, not typed by the user),
``message.role``, ``message.content`` (a string or blocks: ``text``, ``tool_use`` {id, name,
input}, ``tool_result`` {tool_use_id, content, is_error}), ``message.usage`` on assistant lines
(input/output/cache tokens) and ``toolUseResult`` on user lines that carry tool results.

Codex, ``~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<uuid>.jsonl``: lines ``{timestamp, type,
payload}`` with ``type`` "session_meta" (payload.id, payload.cwd), "response_item" (payload.type
"message" with role user/assistant and content [{type: input_text|output_text, text}],
"function_call" {name, arguments, call_id}, "function_call_output" {call_id, output}, "reasoning"
(ignored)), "event_msg" (payload.type "token_count" carries usage; user_message/agent_message
repeat the response items and are ignored) and "turn_context" (ignored).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SOURCES = ("claude-code", "codex")

# User lines that are not prompts a person typed: slash-command wrappers and their output,
# hook and system reminders, Codex's injected environment and instruction blocks.
_INJECTED = re.compile(
    r"^\s*(<(command-name|command-message|command-args|local-command-stdout|"
    r"local-command-stderr|system-reminder|environment_context|user_instructions|"
    r"user-prompt-submit-hook|user_shell_command|turn_aborted)>|# AGENTS\.md instructions|"
    r"Caveat: The messages below|\[Request interrupted by user)",
)


@dataclass(frozen=True)
class Turn:
    """One step of a session: a user prompt, an assistant text, a tool call or its result."""

    role: str  # user | assistant | tool_call | tool_result
    text: str
    timestamp: str = ""
    is_error: bool = False


@dataclass
class Session:
    source: str
    session_id: str
    path: Path
    cwd: str = ""
    started: str = ""
    turns: list[Turn] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    skipped: int = 0  # lines that were not JSON objects of a known shape


def find_sessions(source: str, directory: Path) -> list[Path]:
    """The transcript files of ``source`` under ``directory`` (never outside it), sorted."""
    root = directory.resolve()
    pattern = "*.jsonl" if source == "claude-code" else "**/rollout-*.jsonl"
    found = []
    for path in sorted(root.glob(pattern)):
        real = path.resolve()
        if not real.is_file() or not real.is_relative_to(root):
            continue  # a symbolic link out of the directory we were given
        found.append(real)
    return found


def read_session(source: str, path: Path) -> Session:
    if source == "claude-code":
        return read_claude_code(path)
    return read_codex(path)


def _lines(path: Path, session: Session) -> Iterator[dict[str, Any]]:
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError:
                session.skipped += 1  # a line cut short by a crash, say
                continue
            if isinstance(obj, dict):
                yield obj
            else:
                session.skipped += 1


def _add_usage(usage: dict[str, int], values: Any) -> None:
    if not isinstance(values, dict):
        return
    for key, value in values.items():
        if isinstance(value, int) and not isinstance(value, bool):
            usage[key] = usage.get(key, 0) + value


def _block_text(content: Any) -> str:
    """The text of a tool result's content: a string or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b
        )
    return ""


def read_claude_code(path: Path) -> Session:
    session = Session("claude-code", path.stem, path)
    for obj in _lines(path, session):
        kind = obj.get("type")
        if kind not in ("user", "assistant") or obj.get("isSidechain"):
            continue
        session.session_id = str(obj.get("sessionId") or session.session_id)
        session.cwd = session.cwd or str(obj.get("cwd") or "")
        stamp = str(obj.get("timestamp") or "")
        session.started = session.started or stamp
        message = obj.get("message")
        if not isinstance(message, dict):
            session.skipped += 1
            continue
        content = message.get("content")
        if kind == "assistant":
            _add_usage(session.usage, message.get("usage"))
        if isinstance(content, str):
            role = "assistant" if kind == "assistant" else "user"
            if role == "user" and (obj.get("isMeta") or _INJECTED.match(content)):
                continue
            session.turns.append(Turn(role, content, stamp))
            continue
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text":
                text = str(block.get("text", ""))
                if kind == "user" and (obj.get("isMeta") or _INJECTED.match(text)):
                    continue
                session.turns.append(
                    Turn("assistant" if kind == "assistant" else "user", text, stamp)
                )
            elif btype == "tool_use":
                call = (
                    f"{block.get('name', '')} {json.dumps(block.get('input', {}), sort_keys=True)}"
                )
                session.turns.append(Turn("tool_call", call, stamp))
            elif btype == "tool_result":
                session.turns.append(
                    Turn(
                        "tool_result",
                        _block_text(block.get("content")),
                        stamp,
                        is_error=bool(block.get("is_error")),
                    )
                )
    return session


def read_codex(path: Path) -> Session:
    # The file name ends in the session's uuid; session_meta.id is preferred when present.
    session = Session("codex", path.stem.removeprefix("rollout-"), path)
    for obj in _lines(path, session):
        kind, payload = obj.get("type"), obj.get("payload")
        stamp = str(obj.get("timestamp") or "")
        if not isinstance(payload, dict):
            session.skipped += 1
            continue
        if kind == "session_meta":
            session.session_id = str(payload.get("id") or session.session_id)
            session.cwd = str(payload.get("cwd") or session.cwd)
            session.started = str(payload.get("timestamp") or stamp)
            continue
        if kind == "event_msg":
            if payload.get("type") == "token_count":
                info = payload.get("info")
                if isinstance(info, dict):  # cumulative totals: keep the last one
                    total = info.get("total_token_usage")
                    if isinstance(total, dict):
                        session.usage = {}
                        _add_usage(session.usage, total)
            continue
        if kind != "response_item":
            continue
        session.started = session.started or stamp
        ptype = payload.get("type")
        if ptype == "message":
            role = payload.get("role")
            parts = payload.get("content")
            if role not in ("user", "assistant") or not isinstance(parts, list):
                continue
            text = "\n".join(
                str(p.get("text", ""))
                for p in parts
                if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
            )
            if role == "user" and _INJECTED.match(text):
                continue
            session.turns.append(Turn(str(role), text, stamp))
        elif ptype in ("function_call", "custom_tool_call", "local_shell_call"):
            args = payload.get("arguments", payload.get("input", payload.get("action", "")))
            session.turns.append(Turn("tool_call", f"{payload.get('name', '')} {args}", stamp))
        elif ptype in ("function_call_output", "custom_tool_call_output"):
            output = payload.get("output")
            failed = False
            if isinstance(output, dict):  # older rollouts: {content, success}
                failed = output.get("success") is False
                output = output.get("content", "")
            text = _block_text(output)
            if not failed and isinstance(text, str):
                # exec results are JSON with the process's exit code: non-zero is a failure
                m = re.search(r'"exit_code"\s*:\s*(-?\d+)', text) or re.search(
                    r"Exit code: (-?\d+)", text
                )
                failed = bool(m and m.group(1) != "0")
            session.turns.append(Turn("tool_result", text, stamp, is_error=failed))
    return session


# A follow-up that says the previous answer was wrong: it belongs to the task before it (as
# evidence of failure), not a task of its own.
_CORRECTION = re.compile(
    r"^\s*(no\b|nope\b|wrong\b|incorrect\b|not quite\b|not what i\b|that'?s (wrong|not|incorrect)"
    r"|that is (wrong|not)|actually\b|you (forgot|missed|broke)|try again\b|still (wrong|broken|"
    r"failing)\b)|\binstead\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Exchange:
    """One task a person gave the agent, and what the session shows about how it went."""

    prompt: str
    timestamp: str
    answer: str  # the last assistant text before the next task (what the user was left with)
    corrections: tuple[str, ...] = ()
    tool_calls: int = 0
    tool_errors: int = 0


def is_correction(text: str) -> bool:
    return bool(_CORRECTION.search(text))


def exchanges(session: Session) -> list[Exchange]:
    """The session's task prompts with their final answers, corrections and tool failures."""
    out: list[Exchange] = []
    current: dict[str, Any] | None = None

    def close() -> None:
        if current is not None and current["prompt"].strip():
            out.append(
                Exchange(
                    prompt=current["prompt"],
                    timestamp=current["timestamp"],
                    answer=current["answer"],
                    corrections=tuple(current["corrections"]),
                    tool_calls=current["tool_calls"],
                    tool_errors=current["tool_errors"],
                )
            )

    for turn in session.turns:
        if turn.role == "user":
            if not turn.text.strip():
                continue
            if current is not None and is_correction(turn.text):
                current["corrections"].append(turn.text)
                continue
            close()
            current = {
                "prompt": turn.text,
                "timestamp": turn.timestamp,
                "answer": "",
                "corrections": [],
                "tool_calls": 0,
                "tool_errors": 0,
            }
        elif current is None:
            continue
        elif turn.role == "assistant" and turn.text.strip():
            current["answer"] = turn.text
        elif turn.role == "tool_call":
            current["tool_calls"] += 1
        elif turn.role == "tool_result" and turn.is_error:
            current["tool_errors"] += 1
    close()
    return out

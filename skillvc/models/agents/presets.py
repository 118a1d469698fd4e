"""The agent CLIs skillvc knows: how to run each one headless and how to read what it printed.

A ``Preset`` holds, for one CLI: the program name looked up on PATH, the arguments of a
non-interactive run with structured output (the task text goes on stdin), where the skill is
installed in the task's working directory, the variable that points the CLI at its own
configuration directory, and the parser of its output.

Formats, as documented by each CLI (checked November 2026):

- Claude Code, ``claude -p --output-format stream-json --verbose``: one JSON object a line;
  ``{"type": "system", "subtype": "init", "session_id", "model", "tools", ...}``, then
  ``assistant`` messages whose ``message.content`` holds ``text``/``tool_use``/``thinking``
  blocks, ``user`` messages holding ``tool_result`` blocks, and one final ``result`` object
  (``subtype``: success | error_max_turns | error_during_execution, ``is_error``, ``result``,
  ``total_cost_usd``, ``usage``, ``num_turns``, ``duration_ms``). An API failure is
  ``API Error: 400 ...``, as plain text or as the ``result`` of an ``is_error`` result, and
  exit code 1. Project skills live in ``.claude/skills/<name>/SKILL.md`` of the working
  directory; ``CLAUDE_CONFIG_DIR`` replaces ``~/.claude`` (settings, CLAUDE.md, transcripts).
- Codex, ``codex exec --json --skip-git-repo-check -`` (``-``: the prompt is read from stdin):
  JSONL events ``thread.started`` (``thread_id``), ``turn.started``, ``item.started`` /
  ``item.updated`` / ``item.completed`` (``item.type``: agent_message, reasoning,
  command_execution, file_change, mcp_tool_call, web_search, todo_list, error),
  ``turn.completed`` (``usage``: input_tokens, cached_input_tokens, output_tokens),
  ``turn.failed`` (``error.message``) and ``error`` (``message``). Codex reports no cost.
  Skills: developers.openai.com/codex/skills lists the REPO scope ``$CWD/.agents/skills``
  (then parent folders up to the repo root), the USER scope ``$HOME/.agents/skills`` and,
  in earlier releases, ``$CODEX_HOME/skills``; we install into the working directory's
  ``.agents/skills/<name>/SKILL.md``. ``CODEX_HOME`` replaces ``~/.codex`` (config.toml,
  AGENTS.md, sessions).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillvc.models.agents.trajectory import Step, Trajectory


@dataclass(frozen=True)
class Note:
    """One meaningful thing an agent said in its structured output, for messages: its text,
    an error, or a notice that it is retrying an API request (and whether retrying can help)."""

    text: str
    kind: str = "message"  # message | error | retry
    permanent: bool = False  # a retry notice for a reason that retrying cannot fix


@dataclass(frozen=True)
class Preset:
    name: str  # the harness value: claude-code | codex
    title: str  # for messages: "Claude Code"
    program: str  # looked up on PATH unless [target] executable is set
    argv: tuple[str, ...]  # after the program; the task text goes on stdin
    install_path: str  # skill location inside the working directory; {name} = skill name
    config_env: str  # the variable naming the CLI's own configuration directory
    config_dir: str  # that directory, relative to the scratch HOME
    parse: Callable[[str], Trajectory]
    note: Callable[[Mapping[str, Any]], Note | None]  # one output event, as a Note if it says much
    # Paths the CLI writes in the system temp folder whatever TMPDIR says ({uid}: the user's id).
    stray_temp: tuple[str, ...] = ()


def notes(preset: Preset, stdout: str) -> list[Note]:
    """What the agent said, in order: its structured events read by ``preset.note``, and any
    plain-text line (``API Error: ...``) as an error; JSON bookkeeping (init, usage) is left out."""
    out: list[Note] = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            value = json.loads(line) if line.startswith("{") else None
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            found = preset.note(value)
            if found is not None and found.text.strip():
                out.append(found)
        elif not line.startswith("{"):
            out.append(Note(line, "error"))
    return out


# Claude Code retries these statuses ~10 times over about 3 minutes; a key that was refused
# twice will not be accepted on the third try.
_PERMANENT_STATUSES = (401, 403)
_PERMANENT_ERRORS = ("authentication_failed", "permission_error", "billing_error")
_CODEX_RETRY = re.compile(r"Reconnecting\.\.\. (\d+)/(\d+) \((.*)\)$", re.S)
_CODEX_PERMANENT = re.compile(r"unexpected status (401|403)\b")


def note_claude_code(ev: Mapping[str, Any]) -> Note | None:
    kind = ev.get("type")
    if kind == "system" and ev.get("subtype") == "api_retry":
        status = ev.get("error_status")
        error = str(ev.get("error") or "unknown")
        if error == "unknown" and status is None:
            error = "no response (connection refused or lost)"
        http = f"HTTP {status} " if isinstance(status, int) else ""
        delay = ev.get("retry_delay_ms")
        wait = f", next in {delay / 1000:.0f} s" if isinstance(delay, (int, float)) else ""
        text = (
            f"API request failed ({http}{error}); retry {_int(ev.get('attempt'))} of "
            f"{_int(ev.get('max_retries'))}{wait}"
        )
        permanent = status in _PERMANENT_STATUSES or error in _PERMANENT_ERRORS
        return Note(text, "retry", permanent)
    if kind == "assistant":
        message = ev.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return Note(content)
        texts = [
            str(b.get("text", ""))
            for b in (content if isinstance(content, list) else [])
            if isinstance(b, dict) and b.get("type") == "text"
        ]
        return Note("\n".join(texts)) if texts else None
    if kind == "result":
        subtype = ev.get("subtype")
        failed = ev.get("is_error") is True or (isinstance(subtype, str) and subtype != "success")
        result = ev.get("result") if isinstance(ev.get("result"), str) else ""
        errors = ev.get("errors")
        listed = "; ".join(map(str, errors)) if isinstance(errors, list) else ""
        text = result or listed or (str(subtype) if failed else "")
        return Note(text, "error" if failed else "message")
    return None


def note_codex(ev: Mapping[str, Any]) -> Note | None:
    kind = ev.get("type")
    if kind == "error":
        message = str(ev.get("message", ""))
        retry = _CODEX_RETRY.match(message)
        if retry:
            reason = retry.group(3)
            text = f"API request failed ({reason}); retry {retry.group(1)} of {retry.group(2)}"
            return Note(text, "retry", bool(_CODEX_PERMANENT.search(reason)))
        return Note(message, "error")
    if kind == "turn.failed":
        err = ev.get("error")
        return Note(str(err.get("message", "")) if isinstance(err, dict) else str(err), "error")
    if kind == "item.completed" and isinstance(ev.get("item"), dict):
        item = ev["item"]
        if item.get("type") == "agent_message":
            return Note(str(item.get("text", "")))
        if item.get("type") == "error":
            return Note(str(item.get("message", "")), "error")
    return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _events(stdout: str) -> list[Mapping[str, Any]]:
    """The JSON objects among stdout's lines; other lines (plain-text errors) are skipped."""
    out: list[Mapping[str, Any]] = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _text_of(content: Any) -> str:
    """A tool result's content: a string, or a list of blocks whose text parts are joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [b.get("text", "") for b in content if isinstance(b, dict)]
        return "\n".join(p for p in parts if isinstance(p, str) and p)
    return "" if content is None else json.dumps(content, sort_keys=True)


def parse_claude_code(stdout: str) -> Trajectory:
    steps: list[Step] = []
    names: dict[str, str] = {}  # tool_use id -> tool name, to label results
    info: dict[str, Any] = {}
    answer, error, cost = "", None, None
    prompt = completion = 0
    last_text = ""
    for ev in _events(stdout):
        kind = ev.get("type")
        if kind == "system" and ev.get("subtype") == "init":
            info.update(
                {k: ev[k] for k in ("session_id", "model") if isinstance(ev.get(k), str)},
            )
        elif kind in ("assistant", "user"):
            message = ev.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                btype = block.get("type")
                if btype == "text" and kind == "assistant":
                    last_text = str(block.get("text", ""))
                    steps.append(Step("message", last_text))
                elif btype == "thinking":
                    steps.append(Step("reasoning", str(block.get("thinking", ""))))
                elif btype == "tool_use":
                    name = str(block.get("name", ""))
                    names[str(block.get("id", ""))] = name
                    steps.append(
                        Step("tool_call", json.dumps(block.get("input"), sort_keys=True), name)
                    )
                elif btype == "tool_result":
                    name = names.get(str(block.get("tool_use_id", "")), "")
                    steps.append(
                        Step(
                            "tool_result",
                            _text_of(block.get("content")),
                            name,
                            is_error=block.get("is_error") is True,
                        )
                    )
        elif kind == "result":
            result = ev.get("result")
            answer = result if isinstance(result, str) else ""
            usage = _dict(ev.get("usage"))
            # Cached input is input too: the prompt the model saw, whoever paid for it.
            prompt = sum(
                _int(usage.get(k))
                for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
            )
            completion = _int(usage.get("output_tokens"))
            total = ev.get("total_cost_usd")
            if isinstance(total, (int, float)) and not isinstance(total, bool):
                cost = float(total)
            for k in ("subtype", "num_turns", "duration_ms", "api_error_status"):
                if k in ev:
                    info[k] = ev[k]
            subtype = ev.get("subtype")
            if ev.get("is_error") is True or (isinstance(subtype, str) and subtype != "success"):
                errors = ev.get("errors")
                listed = "; ".join(map(str, errors)) if isinstance(errors, list) else ""
                error = answer or listed or str(subtype or "error")
                steps.append(Step("error", error))
            info["result"] = True
    if "result" not in info and last_text:
        answer = last_text  # no result line (killed, old CLI): the last thing it said
    return Trajectory("claude-code", tuple(steps), answer, prompt, completion, cost, error, info)


def parse_codex(stdout: str) -> Trajectory:
    steps: list[Step] = []
    info: dict[str, Any] = {}
    answer, error = "", None
    prompt = completion = 0
    for ev in _events(stdout):
        kind = ev.get("type")
        if kind == "thread.started" and isinstance(ev.get("thread_id"), str):
            info["thread_id"] = ev["thread_id"]
        elif kind == "item.completed" and isinstance(ev.get("item"), dict):
            item = ev["item"]
            itype = item.get("type")
            if itype == "agent_message":
                answer = str(item.get("text", ""))
                steps.append(Step("message", answer))
            elif itype == "reasoning":
                steps.append(Step("reasoning", str(item.get("text", ""))))
            elif itype == "command_execution":
                steps.append(Step("tool_call", str(item.get("command", "")), "shell"))
                code = item.get("exit_code")
                steps.append(
                    Step(
                        "tool_result",
                        str(item.get("aggregated_output", "")),
                        "shell",
                        is_error=(isinstance(code, int) and code != 0)
                        or item.get("status") == "failed",
                    )
                )
            elif itype == "file_change":
                changes = item.get("changes") if isinstance(item.get("changes"), list) else []
                text = ", ".join(
                    f"{c.get('kind', '?')} {c.get('path', '?')}"
                    for c in changes
                    if isinstance(c, dict)
                )
                steps.append(Step("tool_call", text, "file_change"))
            elif itype == "mcp_tool_call":
                name = f"{item.get('server', '')}.{item.get('tool', '')}"
                steps.append(
                    Step("tool_call", json.dumps(item.get("arguments"), sort_keys=True), name)
                )
                if item.get("result") is not None or item.get("error") is not None:
                    failed = item.get("error") is not None or item.get("status") == "failed"
                    body = item.get("error") if failed else item.get("result")
                    steps.append(Step("tool_result", _text_of(body), name, is_error=failed))
            elif itype == "web_search":
                steps.append(Step("tool_call", str(item.get("query", "")), "web_search"))
            elif itype == "error":
                steps.append(Step("error", str(item.get("message", ""))))
        elif kind in ("turn.completed", "turn.failed"):
            usage = _dict(ev.get("usage"))
            # input_tokens already includes cached_input_tokens (the OpenAI convention).
            prompt += _int(usage.get("input_tokens"))
            completion += _int(usage.get("output_tokens"))
            info["turns"] = _int(info.get("turns")) + 1
            if kind == "turn.failed":
                err = ev.get("error")
                error = str(err.get("message", "")) if isinstance(err, dict) else str(err)
                steps.append(Step("error", error))
            else:
                info["result"] = True
        elif kind == "error":
            message = str(ev.get("message", ""))
            steps.append(Step("error", message))
            if not _CODEX_RETRY.match(message):  # "Reconnecting... 2/5 (...)" may still heal
                error = message
    return Trajectory("codex", tuple(steps), answer, prompt, completion, None, error, info)


PRESETS: dict[str, Preset] = {
    "claude-code": Preset(
        name="claude-code",
        title="Claude Code",
        program="claude",
        argv=("-p", "--output-format", "stream-json", "--verbose"),
        install_path=".claude/skills/{name}/SKILL.md",
        config_env="CLAUDE_CONFIG_DIR",
        config_dir=".claude",
        parse=parse_claude_code,
        note=note_claude_code,
    ),
    "codex": Preset(
        name="codex",
        title="Codex",
        program="codex",
        argv=("exec", "--json", "--skip-git-repo-check", "-"),
        install_path=".agents/skills/{name}/SKILL.md",
        config_env="CODEX_HOME",
        config_dir=".codex",
        parse=parse_codex,
        note=note_codex,
        stray_temp=("codex-daemon-{uid}",),
    ),
}


def activated(trajectory: Trajectory, skill_name: str) -> bool:
    """Did the agent load the skill: a ``Skill`` tool call naming it, or any tool call (a
    Read, a shell ``cat``) that names the installed ``skills/<name>/SKILL.md``?"""
    installed = f"skills/{skill_name}/SKILL.md"
    for step in trajectory.tool_calls:
        if installed in step.text:
            return True
        if step.name == "Skill":
            try:
                args = json.loads(step.text)
            except json.JSONDecodeError:
                continue
            values = args.values() if isinstance(args, dict) else [args]
            # "name" or "plugin:name" (a plugin's skill) both load it.
            if any(isinstance(v, str) and v.split(":")[-1] == skill_name for v in values):
                return True
    return False


def loaded_skills(trajectory: Trajectory, names: Sequence[str]) -> list[str]:
    """The skills of an installed library the agent loaded, in the order it first loaded
    them: by the rules of ``activated``, one tool call at a time; a call that names several
    skills' files (``cat a/SKILL.md b/SKILL.md``) loads them in the order it names them."""
    order: list[str] = []
    for step in trajectory.tool_calls:
        hits: list[tuple[int, str]] = []
        for name in names:
            at = step.text.find(f"skills/{name}/SKILL.md")
            if at >= 0:
                hits.append((at, name))
            elif activated(Trajectory(trajectory.agent, (step,)), name):  # a Skill tool call
                hits.append((-1, name))
        for _, name in sorted(hits):
            if name not in order:
                order.append(name)
    return order


def files_used(trajectory: Trajectory, skill_name: str, paths: list[str]) -> list[str]:
    """The package files (package-relative ``paths``) that a tool call names under the
    installed ``skills/<name>/``: a reference the agent read, a script it ran. Sorted."""
    installed = f"skills/{skill_name}/"
    texts = [step.text for step in trajectory.tool_calls]
    return sorted(p for p in paths if any(installed + p in text for text in texts))

"""The bounded agent loop: model turn -> tool calls -> results -> ... -> answer.

One rollout of a chat target that may act. Each turn sends the conversation so far (in the
neutral form of ``skillvc.models.tools.spec``) with the tools offered; the calls of the answer
are run through a ``Toolbox`` and their results appended; a turn without calls is the answer.
With an interactive environment (``skillvc.models.tools.environment``) a turn without calls is
an action instead: the environment's observation comes back as the next user message until it
says it is done.

Invariants:
- the loop ends: after ``max_turns`` model turns, or when the model asks for the same call
  (name and arguments) ``REPEATS`` times in a row, it stops with a one-line ``failure`` and the
  answer it has (usually none), which the scorer then scores: the model's misbehaviour is a
  failed rollout, never a failed run;
- a tool's misbehaviour (raises, hangs, unknown name, bad arguments) is a result the model sees
  (``ToolOutcome.is_error``), as a real agent would see it;
- a model that writes its call as text (small local models answer ``{"name": ..., "arguments":
  ...}`` in ``content`` with finish reason ``stop``) is read leniently: a reply that is nothing
  but such calls to offered tools counts as those calls;
- every turn, call, result and observation is a ``Step`` of the trajectory, in order; tokens
  are summed over the turns.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from skillvc.models.agents.trajectory import Step, Trajectory
from skillvc.models.backends.base import CallRequest, CallResult
from skillvc.models.tools.environment import EnvironmentFailed
from skillvc.models.tools.spec import ToolCall, ToolOutcome, ToolSpec

REPEATS = 3  # the same call this many times in a row ends the rollout
HARNESS = "tools"  # ``Trajectory.agent`` of a chat target's loop


class Caller(Protocol):
    """What runs a call: ``Toolbox.call`` (the loop needs nothing else of it)."""

    def call(self, call: ToolCall, workdir: Path) -> ToolOutcome: ...


class Episode(Protocol):
    """One run of an interactive environment (``skillvc.models.tools.environment``)."""

    def step(self, action: str) -> tuple[str, float, bool]: ...


@dataclass
class LoopResult:
    answer: str
    trajectory: Trajectory
    turns: int
    tool_calls: int
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failure: str | None = None  # why the loop stopped without a proper answer
    reward: float | None = None  # an environment's last reward
    done: bool = False  # an environment said the episode ended
    results: list[CallResult] = field(default_factory=list)


def run_loop(
    complete: Callable[[CallRequest], CallResult],
    request: CallRequest,
    *,
    tools: Sequence[ToolSpec],
    caller: Caller | None,
    workdir: Path,
    max_turns: int,
    episode: Episode | None = None,
) -> LoopResult:
    """Run ``request`` (system + user messages) to an answer, calling tools on the way."""
    offered = tuple(t.as_dict() for t in tools)
    names = {t.name for t in tools}
    messages: list[Mapping[str, Any]] = list(request.messages)
    steps: list[Step] = []
    out = LoopResult("", Trajectory(HARNESS), 0, 0)
    last_calls: list[tuple[str, str]] = []
    while True:
        if out.turns >= max_turns:
            out.failure = (
                f"the episode did not end within max_turns ({max_turns})"
                if episode is not None
                else f"reached max_turns ({max_turns}) without an answer"
            )
            break
        turn = dataclasses.replace(request, messages=tuple(messages), tools=offered)
        result = complete(turn)
        out.turns += 1
        out.results.append(result)
        out.prompt_tokens += result.prompt_tokens
        out.completion_tokens += result.completion_tokens
        calls = _native_calls(result) or (text_calls(result.text, names) if names else [])
        calls = [
            dataclasses.replace(c, id=c.id or f"call_{out.turns}_{i}") for i, c in enumerate(calls)
        ]
        text = "" if calls and not result.meta.get("tool_calls") else result.text
        if text.strip():
            steps.append(Step("message", text))
        if not calls:
            if episode is None:
                out.answer = result.text
                break
            try:
                observation, reward, done = episode.step(result.text)
            except EnvironmentFailed as exc:
                out.answer = result.text
                out.failure = f"the environment failed: {exc}"
                break
            out.reward, out.done = float(reward), bool(done)
            steps.append(Step("observation", observation, name=f"reward {out.reward:g}"))
            out.answer = result.text
            if done:
                break
            messages.append({"role": "assistant", "content": result.text})
            messages.append({"role": "user", "content": observation})
            continue
        messages.append(
            {"role": "assistant", "content": text, "tool_calls": [c.as_dict() for c in calls]}
        )
        for call in calls:
            out.tool_calls += 1
            steps.append(Step("tool_call", call.arguments, name=call.name))
            outcome = (
                caller.call(call, workdir)
                if caller is not None
                else ToolOutcome(f"unknown tool {call.name!r}: no tools are configured", True)
            )
            steps.append(Step("tool_result", outcome.content, call.name, outcome.is_error))
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.name,
                    "content": outcome.content,
                    "is_error": outcome.is_error,
                }
            )
        signature = [(c.name, _canonical_arguments(c.arguments)) for c in calls]
        last_calls = [*last_calls, *signature][-REPEATS:]
        if len(last_calls) == REPEATS and len(set(last_calls)) == 1 and len(signature) == 1:
            out.failure = (
                f"the model called {calls[0].name} with the same arguments {REPEATS} times in a row"
            )
            break
    if out.failure:
        steps.append(Step("error", out.failure))
    out.trajectory = Trajectory(
        HARNESS,
        steps=tuple(steps),
        answer=out.answer,
        prompt_tokens=out.prompt_tokens,
        completion_tokens=out.completion_tokens,
        error=out.failure,
        info={"turns": out.turns, "tool_calls": out.tool_calls}
        | ({"reward": out.reward, "done": out.done} if episode is not None else {}),
    )
    return out


def _native_calls(result: CallResult) -> list[ToolCall]:
    calls = result.meta.get("tool_calls") or []
    return [
        ToolCall(str(c.get("id") or ""), str(c.get("name") or ""), str(c.get("arguments") or "{}"))
        for c in calls
        if isinstance(c, Mapping)
    ]


def _canonical_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True)
    except ValueError:
        return arguments.strip()


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
_TAGS = re.compile(r"</?tool_call>|</?function_call>")


def text_calls(text: str, names: set[str]) -> list[ToolCall]:
    """Tool calls a model wrote as text: the whole reply (fences and ``<tool_call>`` tags
    aside) is one JSON object, a list of them, or one object per line, each naming an offered
    tool with its arguments (``arguments`` or ``parameters``, an object or its JSON text).
    Anything else is an answer, not a call: prose that merely quotes a call stays prose."""
    body = _TAGS.sub("\n", _FENCE.sub("", text.strip())).strip()
    if not body or body[0] not in "[{":
        return []
    chunks = _json_chunks(body)
    if chunks is None and body.startswith("{{") and body.endswith("}}"):
        # Qwen2.5's template shows the call inside doubled braces; the 1.5B model copies them.
        chunks = _json_chunks(body[1:-1])
    if chunks is None:
        return []
    calls = []
    for chunk in chunks:
        if not isinstance(chunk, dict):
            return []
        if isinstance(chunk.get("function"), dict):  # {"type": "function", "function": {...}}
            chunk = chunk["function"]
        name = chunk.get("name")
        arguments = chunk.get("arguments", chunk.get("parameters", {}))
        if name not in names or not isinstance(arguments, (dict, str)):
            return []
        text_args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls.append(ToolCall("", str(name), text_args))
    return calls


def _json_chunks(body: str) -> list[Any] | None:
    """One JSON value (a list is its items) or one per line; None when it is neither."""
    try:
        value = json.loads(body)
        return value if isinstance(value, list) else [value]
    except ValueError:
        try:
            return [json.loads(line) for line in body.splitlines() if line.strip()]
        except ValueError:
            return None

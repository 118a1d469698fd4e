"""What an agent did on one task: its steps, final answer, usage, cost and own error report.

A ``Trajectory`` is parsed from the agent CLI's structured output by a preset's parser
(``skillvc.models.agents.presets``). It is stored in the event log as canonical JSON (a blob, so two
identical trajectories are stored once) and rendered compactly for reflection prompts.

Invariants: ``to_json``/``from_json`` round-trip exactly; ``render`` never exceeds its budget
by more than the one "cut" marker line, and keeps the head (how the agent started: did it load
the skill?) and the tail (how it ended: the answer or the error), cutting the middle.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from skillvc.core.hashing import canonical_json

STEP_CHARS = 600  # one step's text in a rendering: a long tool result is clipped, not dropped
RENDER_BUDGET = 3000  # characters of a whole rendering (per case in a reflection prompt)


@dataclass(frozen=True)
class Step:
    kind: str  # message | tool_call | tool_result | reasoning | error
    text: str = ""  # message text, tool input (JSON), tool result, error message
    name: str = ""  # tool name (tool_call; tool_result when known)
    is_error: bool = False  # a tool result that failed


@dataclass(frozen=True)
class Trajectory:
    agent: str  # preset name: claude-code | codex
    steps: tuple[Step, ...] = ()
    answer: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # as the agent reported it; None when it did not say
    error: str | None = None  # the agent's own error report (is_error result, turn.failed)
    info: Mapping[str, Any] = field(default_factory=dict)  # session id, model, turns, ...

    def to_json(self) -> str:
        return canonical_json(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Trajectory:
        data = json.loads(text)
        steps = tuple(Step(**s) for s in data.pop("steps", []))
        return cls(steps=steps, **data)

    @property
    def tool_calls(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "tool_call"]


def _line(step: Step) -> str:
    text = " ".join(step.text.split())  # one line per step: newlines and runs of spaces fold
    if len(text) > STEP_CHARS:
        text = text[: STEP_CHARS - 20] + f" [... {len(text) - STEP_CHARS + 20} chars cut]"
    if step.kind == "tool_call":
        return f"-> {step.name or 'tool'}: {text}"
    if step.kind == "tool_result":
        return f"<- {'ERROR ' if step.is_error else ''}{step.name or 'result'}: {text}"
    if step.kind == "error":
        return f"!! error: {text}"
    if step.kind == "reasoning":
        return f"(thinking) {text}"
    return f"agent: {text}"


def render(
    trajectory: Trajectory,
    *,
    budget: int = RENDER_BUDGET,
    activated: bool | None = None,
    skill_name: str | None = None,
) -> str:
    """A compact, line-per-step view for an optimizer: head and tail kept, middle cut."""
    header: list[str] = []
    if activated is False:
        header.append(
            f"NOTE: the agent never loaded the skill{f' {skill_name!r}' if skill_name else ''}; "
            "its description may not match this task."
        )
    if trajectory.error:
        header.append(f"!! the agent reported an error: {_line(Step('error', trajectory.error))}")
    lines = []
    loading = False
    for step in trajectory.steps:
        if step.kind == "tool_result" and loading and not step.is_error:
            # The skill's own text: the optimizer has it already; say that it arrived.
            lines.append(f"<- {step.name or 'result'}: (the skill's text, {len(step.text)} chars)")
        else:
            lines.append(_line(step))
        loading = step.kind == "tool_call" and (step.name == "Skill" or "SKILL.md" in step.text)
    return "\n".join([*header, *_fit(lines, max(0, budget - sum(len(h) + 1 for h in header)))])


def _fit(lines: Sequence[str], budget: int) -> list[str]:
    if sum(len(ln) + 1 for ln in lines) <= budget:
        return list(lines)
    head: list[str] = []
    tail: list[str] = []
    used, i, j = 0, 0, len(lines) - 1
    # Alternate: the start and the end are the informative parts of a long run.
    while i <= j:
        take_head = len(head) <= len(tail)
        line = lines[i] if take_head else lines[j]
        if used + len(line) + 1 > budget:
            break
        used += len(line) + 1
        if take_head:
            head.append(line)
            i += 1
        else:
            tail.append(line)
            j -= 1
    cut = j - i + 1
    marker = [f"[... {cut} steps cut ...]"] if cut else []
    return [*head, *marker, *reversed(tail)]

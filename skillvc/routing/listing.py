"""What the selector is shown, and how its pick is read back.

The listing follows the Agent Skills integration guide (agentskills.io, "Integrating skills
into your agent"), which Claude Code's own ``Skill`` tool also follows: at start the agent gets
each skill's ``name`` and ``description`` only, as an ``<available_skills>`` block of
``<skill>`` elements (``<name>``, ``<description>``, ``<location>``), and decides from them
alone which skill to load; the body is read only after that choice. The system prompt below is
that block plus one instruction; the user message is the prompt, verbatim.

The pick comes back through a ``select_skill`` tool (one argument, ``skill``: a listed name
or ``none``) where the provider has tools (``openai:``, ``anthropic:``, the simulator), else as
text (the name alone). A tool-less answer, or an answer in text despite the tool, is read
leniently: the whole answer when it is a listed name or ``none``, else the first listed name
it mentions; an answer naming no skill counts as ``none`` and is marked ``unparsed``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from skillvc.models.tools.spec import ToolSpec

TOOL_NAME = "select_skill"

SYSTEM = """You are an AI agent that can load skills. A skill is a folder of instructions for \
one kind of task; you load a skill only when the user's request is the kind of task its \
description says it is for. These skills are available:

<available_skills>
{skills}
</available_skills>

Decide from the names and descriptions alone which one skill to load for the user's request, \
or none when no description fits. {how}"""

HOW_TOOL = f"Call the {TOOL_NAME} tool with the skill's name, or with none."
HOW_TEXT = "Answer with the skill's name alone, or with none, and nothing else."

SKILL = """<skill>
<name>{name}</name>
<description>{description}</description>
<location>{location}</location>
</skill>"""


def system_prompt(listing: Sequence[tuple[str, str, str]], *, tools: bool) -> str:
    """``listing``: (name, description, location) per skill, in library order."""
    block = "\n".join(SKILL.format(name=n, description=d, location=loc) for n, d, loc in listing)
    return SYSTEM.format(skills=block, how=HOW_TOOL if tools else HOW_TEXT)


def select_tool(names: Sequence[str]) -> ToolSpec:
    return ToolSpec(
        name=TOOL_NAME,
        description="Load one of the available skills for the user's request, or none.",
        parameters={
            "type": "object",
            "properties": {
                "skill": {
                    "type": "string",
                    "enum": [*names, "none"],
                    "description": "The name of the skill to load, or none.",
                }
            },
            "required": ["skill"],
        },
    )


def read_pick(text: str, meta: Mapping[str, Any], names: Sequence[str]) -> tuple[str | None, str]:
    """(picked skill or None, how it was read: ``tool``, ``text`` or ``unparsed``)."""
    for call in meta.get("tool_calls") or []:
        if call.get("name") != TOOL_NAME:
            continue
        try:
            args = json.loads(call.get("arguments") or "{}")
        except json.JSONDecodeError:
            args = {}
        value = args.get("skill") if isinstance(args, dict) else None
        if isinstance(value, str):
            found = _name_in(value, names)
            if found is not None or value.strip().lower() == "none":
                return found, "tool"
    answer = text.strip().strip("`'\"*.").strip()
    if answer.lower() in ("none", "no skill", "no_skill"):
        return None, "text"
    found = _name_in(answer, names)
    return (found, "text") if found is not None else (None, "unparsed")


def _name_in(text: str, names: Sequence[str]) -> str | None:
    stripped = text.strip().strip("`'\"*.").strip()
    for name in names:
        if stripped.lower() == name.lower():
            return name
    hits = []
    for name in names:
        m = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.I)
        if m is not None:
            hits.append((m.start(), -len(name), name))
    return min(hits)[2] if hits else None

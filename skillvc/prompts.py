"""Optimizer prompts (rendered from ``templates/prompts``) and parsing of the optimizer's JSON.

The templates' hashes are recorded in every run (``run.started``), so a change of prompt is a
visible change of the training recipe. Data sections are wrapped in XML-like tags
(``<cases>``, ``<rejected_edits>``, ...) holding JSON or plain text, which both real models and
the simulator read reliably.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Mapping
from typing import Any

from skillvc.hashing import sha256_hex
from skillvc.resources import read_text

TEMPLATE_NAMES = (
    "system",
    "reflect",
    "repair",
    "slow_update",
    "meta_update",
    # Rules added to the reflection prompt by an option or a skill package (``rule``).
    "description_rule",
    "package_rule",
)
EDITS_FORMAT = (
    '{"edits": [{"op": "add|replace|delete", "target": "...", "content": "...", '
    '"anchor": "...", "rationale": "..."}]}'
)


ANSWER_FORMAT = (
    '{"edits": [{"op": "add|replace|delete", "target": "...", "content": "...", '
    '"anchor": "...", "rationale": "why, citing the tasks"}]}'
)
# A skill package (skillvc.packages): every edit names its file.
PACKAGE_EDITS_FORMAT = (
    '{"edits": [{"file": "SKILL.md", "op": "add|replace|delete", "target": "...", '
    '"content": "...", "anchor": "...", "rationale": "..."}]}'
)
PACKAGE_ANSWER_FORMAT = (
    '{"edits": [{"file": "SKILL.md or a path from package_files", "op": "add|replace|delete", '
    '"target": "...", "content": "...", "anchor": "...", "rationale": "why, citing the tasks"}]}'
)

# Placeholders only some runs fill (an opt-in's extra rule, a package's files); otherwise the
# value here, which renders the prompt exactly as it was before the placeholder existed.
OPTIONAL = {
    "description_rule": "",
    "package_rule": "",
    "package_files": "",
    "answer_format": ANSWER_FORMAT,
}


def template(name: str) -> str:
    return read_text("templates", f"prompts/{name}.md")


def rule(name: str) -> str:
    """A rule template as it is inserted into a prompt: its text without the file's final
    newline (a leading newline is part of the rule)."""
    return template(name).rstrip("\n")


def template_hashes() -> dict[str, str]:
    return {name: sha256_hex(template(name))[:16] for name in TEMPLATE_NAMES}


def render(name: str, **values: Any) -> list[dict[str, str]]:
    """Chat messages for one optimizer call: the shared system prompt and the filled template."""
    values = {**OPTIONAL, **values}
    user = string.Template(template(name)).substitute(
        {
            k: v if isinstance(v, str) else json.dumps(v, indent=1, ensure_ascii=False)
            for k, v in values.items()
        }
    )
    return [
        {"role": "system", "content": template("system").strip()},
        {"role": "user", "content": user.strip()},
    ]


def section(prompt: str, tag: str) -> str:
    """The text between ``<tag>`` and ``</tag>`` in a rendered prompt ('' when absent)."""
    m = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", prompt, re.S)
    return m.group(1) if m else ""


def prompt_kind(prompt: str) -> str | None:
    m = re.search(r"<!-- skillvc-prompt: (\w+) -->", prompt)
    return m.group(1) if m else None


class ParseError(ValueError):
    """The optimizer's answer is not the JSON object the prompt asked for."""


_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.S)


def parse_json_object(text: str, required_key: str) -> Mapping[str, Any]:
    """The JSON object in ``text`` (bare, fenced, or surrounded by prose) with ``required_key``."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    candidates.append(text)
    last_error = "no JSON object found"
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError as exc:
            last_error = f"invalid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            continue
        if isinstance(value, list) and required_key == "edits":
            value = {"edits": value}
        if isinstance(value, dict) and required_key in value:
            return value
        last_error = f'the JSON object has no "{required_key}" key'
    raise ParseError(last_error)

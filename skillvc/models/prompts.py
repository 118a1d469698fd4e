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

from skillvc.core.hashing import sha256_hex
from skillvc.core.resources import read_text

TEMPLATE_NAMES = (
    "system",
    "reflect",
    "repair",
    "slow_update",
    "meta_update",
    # Rules added to the reflection prompt by an option or a skill package (``rule``).
    "description_rule",
    "package_rule",
    # The answer's shape, one per op (an add has no "target": a small model that was offered
    # one put its new text there); templates, so a change of them is a change of recipe.
    "answer_format",
    "package_answer_format",
)


def template(name: str) -> str:
    return read_text("templates", f"prompts/{name}.md")


def rule(name: str) -> str:
    """A rule template as it is inserted into a prompt: its text without the file's final
    newline (a leading newline is part of the rule)."""
    return template(name).rstrip("\n")


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
# One shape per op, with a worked example: what an optimizer on a local server is shown (and
# what its schema enforces, skillvc.training.structured). Other optimizers get the formats
# above, so their prompts (and recorded answers) stay as they were.
OP_ANSWER_FORMAT = rule("answer_format")
OP_PACKAGE_ANSWER_FORMAT = rule("package_answer_format")


def answer_formats(package: bool, per_op: bool) -> tuple[str, str]:
    """(the reflection prompt's answer format, the repair call's) for a run's optimizer."""
    if per_op:
        shown = OP_PACKAGE_ANSWER_FORMAT if package else OP_ANSWER_FORMAT
        return shown, shown
    if package:
        return PACKAGE_ANSWER_FORMAT, PACKAGE_EDITS_FORMAT
    return ANSWER_FORMAT, EDITS_FORMAT


# Placeholders only some runs fill (an opt-in's extra rule, a package's files); otherwise the
# value here, which renders the prompt exactly as it was before the placeholder existed.
OPTIONAL = {
    "description_rule": "",
    "package_rule": "",
    "package_files": "",
    "answer_format": ANSWER_FORMAT,
}


def template_hashes() -> dict[str, str]:
    return {name: sha256_hex(template(name))[:16] for name in TEMPLATE_NAMES}


def render(name: str, *, fit: int | None = None, **values: Any) -> list[dict[str, str]]:
    """Chat messages for one optimizer call: the shared system prompt and the filled template.

    ``fit``: the prompt's token limit (a local server's context less the answer's room). A
    prompt estimated over it is shrunk, in a fixed order, until it fits: each case's and edit's
    long texts are cut (head and tail kept) to 1,000, 400, then 160 characters; then the
    largest of the lists (cases: the first kept, at least one; rejected and accepted edits:
    the newest kept) is halved, again and again; then the free texts (meta skill, notes, a
    previous answer) are cut. ``PromptTooLong`` when even that does not fit (a skill too long
    for the context). Deterministic: the same values and limit give the same prompt.
    """
    if fit is not None:
        return _render_fitting(name, fit, values)
    return _render(name, values)


def _render(name: str, values: Mapping[str, Any]) -> list[dict[str, str]]:
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


class PromptTooLong(ValueError):
    """An optimizer prompt does not fit the model's context even at its smallest."""


# What ``render(fit=...)`` may shrink: lists (which end is kept) and free texts.
_LISTS = {"cases": "head", "rejected": "tail", "accepted": "tail"}
_TEXTS = ("previous", "meta", "previous_notes", "previous_guidance")
_CLIPS = (1000, 400, 160)
_TEXT_CLIPS = (2000, 600, 200)
_CLIPPED_FIELDS = ("input", "output", "expected", "trajectory", "target", "content", "rationale")


def _render_fitting(name: str, limit: int, values: Mapping[str, Any]) -> list[dict[str, str]]:
    from skillvc.models.backends.local import estimate_tokens

    counts = {k: len(v) for k, v in values.items() if k in _LISTS and isinstance(v, list)}
    floor = {k: 1 if k == "cases" and n else 0 for k, n in counts.items()}
    clips = [None, *_CLIPS]
    text_clips = [None, *_TEXT_CLIPS]
    while True:
        shown = _shrunk(values, counts, clips[0], text_clips[0])
        messages = _render(name, shown)
        tokens = estimate_tokens(messages)
        if tokens <= limit:
            return messages
        if len(clips) > 1:
            clips.pop(0)
            continue
        big = [k for k in counts if counts[k] > floor[k]]
        if big:
            key = max(big, key=lambda k: len(json.dumps(shown[k], ensure_ascii=False)))
            counts[key] = max(floor[key], counts[key] // 2)
            continue
        if len(text_clips) > 1:
            text_clips.pop(0)
            continue
        raise PromptTooLong(
            f"the {name} prompt needs about {tokens:,} tokens even cut to its minimum, over "
            f"the {limit:,} the model's context leaves for it (is the skill too long for it?)"
        )


def _shrunk(
    values: Mapping[str, Any], counts: Mapping[str, int], clip: int | None, text_clip: int | None
) -> dict[str, Any]:
    out = dict(values)
    for key, n in counts.items():
        items = list(values[key])
        kept = items[:n] if _LISTS[key] == "head" else items[len(items) - n :]
        if clip is not None:
            kept = [_clip_fields(item, clip) for item in kept]
        out[key] = kept
        if key == "cases" and "n_cases" in out:
            out["n_cases"] = str(n)
    if text_clip is not None:
        for key in _TEXTS:
            if isinstance(out.get(key), str):
                out[key] = cut(out[key], text_clip)
    return out


def _clip_fields(item: Any, limit: int) -> Any:
    if not isinstance(item, dict):
        return item
    return {
        k: cut(v, limit) if k in _CLIPPED_FIELDS and isinstance(v, str) else v
        for k, v in item.items()
    }


def cut(text: str, limit: int) -> str:
    """``text`` within about ``limit`` characters, its head and tail kept."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


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

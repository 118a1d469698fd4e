"""The optimizer's JSON: a schema per op, a lenient reading and a strict check of each edit.

A small model breaks a schema that offers every field to every op (a 1.5B model put an add's
new text in ``target`` and left ``content`` empty, inside a ```json fence). So:

- ``edits_schema``: the answer's JSON Schema, one object shape per op (``add``: content and an
  optional anchor, no target; ``replace``: target and content; ``delete``: target), with
  ``maxItems`` (the step's edit budget) and ``maxLength`` bounds. It is sent as
  ``response_format`` to a local server that enforces JSON Schema (llama.cpp, Ollama, vLLM
  turn it into a grammar), so the model cannot produce another shape or loop forever inside a
  string; other models get the same shapes as text in the prompt. Given the skill's lines
  (``skill_lines``), a replace's or delete's ``target`` and an add's ``anchor`` are held to
  them (an ``enum``), so every edit the model can write lands where it says: the 1.5B model
  otherwise "replaced" sentences of the task, which are not in the skill. A delete is offered
  only when the skill has two lines or more (deleting a one-line skill's only line is never an
  improvement, and a small model reaches for it). The answer starts with a short ``analysis``
  (the failures classified and counted, and what the target should do differently), which a
  small model writes better than it jumps to an edit; it is not stored anywhere but in the
  answer.
- ``salvage``: each proposed edit is read leniently (an add whose text is in ``target``, an
  op in capitals, a stray target on an add) and then checked strictly (``Edit``'s own rules
  and the length bounds). Valid edits are kept; each refused one comes back with its reason,
  which the loop records (``edit.refused``) instead of discarding the whole reflection.

Everything here is a pure function of the answer, so a resumed run reads it identically.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillvc.skill.edits import Edit
from skillvc.skill.skilldoc import SkillDocument

MAX_CONTENT_CHARS = 1200  # one edit's new text: a rule or two with an example
MAX_TARGET_CHARS = 600  # text copied from the skill (a line or a short paragraph)
MAX_RATIONALE_CHARS = 300
MAX_TEXT_CHARS = 2000  # a slow update's guidance, the meta skill's notes
MAX_ANALYSIS_CHARS = 800  # the answer's analysis: its failures classified and counted, briefly
# A skill of more lines than this keeps free-text targets (the enum would be most of the
# grammar, and a long skill is one a model copies from well enough).
MAX_ENUM_LINES = 120


def _string(max_chars: int) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_chars}


def skill_lines(text: str) -> list[str] | None:
    """The lines of a skill an edit may name as its target or anchor: each non-blank line of
    the editable text (outside frontmatter and protected regions), stripped, that occurs
    exactly once in the document and fits ``MAX_TARGET_CHARS``. None for a skill longer than
    ``MAX_ENUM_LINES`` lines (its targets stay free text)."""
    doc = SkillDocument.parse(text)
    editable = [doc.text[a:b] for a, b in doc.editable_spans()]
    lines = [line.strip() for chunk in editable for line in chunk.splitlines() if line.strip()]
    if len(lines) > MAX_ENUM_LINES:
        return None
    out: list[str] = []
    for line in lines:
        if line not in out and len(line) <= MAX_TARGET_CHARS and doc.text.count(line) == 1:
            out.append(line)
    return out


def edits_schema(
    budget: int, *, package: bool = False, lines: list[str] | None = None
) -> dict[str, Any]:
    """The JSON Schema of a reflection's answer: an analysis, then at most ``budget`` edits,
    one shape per op; with ``lines`` (``skill_lines``) targets and anchors are those lines."""
    rationale = {"type": "string", "maxLength": MAX_RATIONALE_CHARS}

    def shape(op: str, required: list[str], **fields: Any) -> dict[str, Any]:
        props: dict[str, Any] = {"op": {"type": "string", "enum": [op]}}
        if package:
            props["file"] = _string(200)
        props.update(fields)
        props["rationale"] = rationale
        return {
            "type": "object",
            "properties": props,
            "required": ["op", *(["file"] if package else []), *required, "rationale"],
            "additionalProperties": False,
        }

    named = not package and bool(lines)
    target = {"type": "string", "enum": lines} if named else _string(MAX_TARGET_CHARS)
    anchor = {"type": "string", "enum": lines} if named else _string(MAX_TARGET_CHARS)
    anchor.pop("minLength", None)
    ops = [
        shape("add", ["content"], content=_string(MAX_CONTENT_CHARS), anchor=anchor),
        shape("replace", ["target", "content"], target=target, content=_string(MAX_CONTENT_CHARS)),
    ]
    if not named or len(lines or ()) >= 2:
        ops.append(shape("delete", ["target"], target=target))
    return {
        "type": "object",
        "properties": {
            "analysis": {"type": "string", "maxLength": MAX_ANALYSIS_CHARS},
            "edits": {"type": "array", "maxItems": max(budget, 1), "items": {"anyOf": ops}},
        },
        "required": ["analysis", "edits"],
        "additionalProperties": False,
    }


def text_schema(key: str, max_chars: int = MAX_TEXT_CHARS) -> dict[str, Any]:
    """The JSON Schema of a ``{"<key>": "..."}`` answer (slow update, meta skill)."""
    return {
        "type": "object",
        "properties": {key: {"type": "string", "maxLength": max_chars}},
        "required": [key],
        "additionalProperties": False,
    }


def response_format(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI's ``response_format`` for ``schema`` (what llama.cpp, Ollama and vLLM accept)."""
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def salvage(payload: Mapping[str, Any]) -> tuple[list[Edit], list[dict[str, Any]]]:
    """The valid edits of ``payload["edits"]`` and a refusal ``{"edit", "reason"}`` for each
    other one. Raises ValueError when there is no list of edits at all."""
    raw = payload.get("edits")
    if isinstance(raw, Mapping):  # one edit instead of a list of one
        raw = [raw]
    if not isinstance(raw, list):
        raise ValueError('"edits" is not a list')
    kept: list[Edit] = []
    refused: list[dict[str, Any]] = []
    for entry in raw:
        try:
            kept.append(read_edit(entry))
        except ValueError as exc:
            refused.append({"edit": _shown(entry), "reason": str(exc)})
    return kept, refused


def read_edit(entry: Any) -> Edit:
    """One edit, read leniently and then checked strictly (ValueError says what is wrong)."""
    if not isinstance(entry, Mapping):
        raise ValueError(f"An edit must be an object, not {type(entry).__name__}.")
    values = dict(entry)
    op = values.get("op", values.get("type", values.get("action")))
    if isinstance(op, str):
        values["op"] = op.strip().lower()
        values.pop("type", None)
        values.pop("action", None)
    if values.get("op") == "add":
        target, content = values.get("target"), values.get("content")
        if isinstance(target, str) and target.strip() and not (content or "").strip():
            values["content"] = target  # the new text in the wrong field: the 1.5B model's habit
        values.pop("target", None)  # an add has no target: its place is its anchor
    edit = Edit.from_dict(values)
    for name, limit in (
        ("content", MAX_CONTENT_CHARS),
        ("target", MAX_TARGET_CHARS),
        ("anchor", MAX_TARGET_CHARS),
    ):
        value = getattr(edit, name) or ""
        if len(value) > limit:
            raise ValueError(f"The edit's {name} has {len(value)} characters (at most {limit}).")
    if not edit.content.strip() and edit.op != "delete":
        raise ValueError(f"An {edit.op} edit needs content that is not only whitespace.")
    return edit


def _shown(entry: Any, limit: int = 300) -> Any:
    """A refused edit as the log keeps it: its string fields cut to ``limit`` characters."""
    if isinstance(entry, Mapping):
        return {
            str(k): (v[:limit] if isinstance(v, str) else v)
            for k, v in entry.items()
            if isinstance(v, (str, int, float, bool)) or v is None
        }
    return str(entry)[:limit]

"""Optimizer prompts (rendered from ``templates/prompts``) and parsing of the optimizer's JSON.

The templates' hashes are recorded in every run (``run.started``), so a change of prompt is a
visible change of the training recipe. Data sections are wrapped in XML-like tags
(``<cases>``, ``<rejected_edits>``, ...) holding JSON, plain text or, for lists of edits, one
line an edit (``edit_lines``), which both real models and the simulator read reliably.

The templates put what a run or a step shares first (rules, the skill, the rejected edits, the
meta skill, the answer's format) and what one call alone has last (a minibatch's cases), so the
calls of a step share a long prefix that provider prompt caching serves at a fraction of the
price (``bench/bench_tokens.py`` measures it).
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Mapping, Sequence
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
    '{"analysis": "...", "edits": [{"op": "add|replace|delete", "target": "...", '
    '"content": "...", "anchor": "...", "rationale": "the pattern it fixes"}]}'
)
# A skill package (skillvc.packages): every edit names its file.
PACKAGE_EDITS_FORMAT = (
    '{"edits": [{"file": "SKILL.md", "op": "add|replace|delete", "target": "...", '
    '"content": "...", "anchor": "...", "rationale": "..."}]}'
)
PACKAGE_ANSWER_FORMAT = (
    '{"analysis": "...", "edits": [{"file": "SKILL.md or a path from package_files", '
    '"op": "add|replace|delete", "target": "...", "content": "...", "anchor": "...", '
    '"rationale": "the pattern it fixes"}]}'
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
    "evidence": "",
}


# What skillvc derives from a step's cases into the prompts and edits (the reflection's
# <evidence>, training/evidence.py; its own worked-examples edits, training/forms.py). The same
# cases derived another way send other prompts and gate other edits, so a run started before a
# change is not resumed by replay; change this whenever either derives other text.
DERIVED = "2026-11-28"


def template_hashes() -> dict[str, str]:
    """The prompt templates' hashes and ``DERIVED``: what a resumed run must find unchanged."""
    hashes = {name: sha256_hex(template(name))[:16] for name in TEMPLATE_NAMES}
    return {**hashes, "derived": DERIVED}


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
    user = string.Template(template(name)).substitute({k: _shown(k, v) for k, v in values.items()})
    return [
        {"role": "system", "content": template("system").strip()},
        {"role": "user", "content": user.strip()},
    ]


def _shown(key: str, value: Any) -> str:
    """A value as its placeholder shows it: text as is, lists of edits one line an edit,
    other data as JSON."""
    if isinstance(value, str):
        return value
    if key in EDIT_LISTS and isinstance(value, list):
        return edit_lines(value)
    if key in ONE_LINE_ITEMS and isinstance(value, list) and value:
        # Still a JSON list, one item a line: no indentation to pay for on every field.
        return "[\n" + ",\n".join(json.dumps(v, ensure_ascii=False) for v in value) + "\n]"
    return json.dumps(value, indent=1, ensure_ascii=False)


# Placeholders that hold lists of edits (the rejected-edit buffer, an epoch's accepted and
# rejected edits): shown one line an edit, about a third of their pretty-printed JSON.
EDIT_LISTS = ("rejected", "accepted")
NO_EDITS = "(none)"
# Lists of cases (a reflection's minibatch, a slow update's comparison): JSON, one case a line.
ONE_LINE_ITEMS = ("cases",)
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_EDIT_LINE = re.compile(
    rf"- \[(?P<op>\w+)(?: in (?P<file>{_QUOTED}))?(?: after (?P<anchor>{_QUOTED}))?\] "
    rf"(?P<first>{_QUOTED})(?: -> (?P<second>{_QUOTED}))?(?: \((?P<why>.*)\))?$"
)


def edit_lines(edits: Sequence[Mapping[str, Any]]) -> str:
    """Edits one line each: ``- [op in "file" after "anchor"] "target" -> "content" (why)``.

    Texts are JSON strings (one line, quotes escaped); an add shows its content, a delete its
    target, a replace both. ``why``: how the gate decided (rejected alone, in a bundle of n,
    dropped from a passing bundle) and its paired evidence on val, where it has some; an
    accepted edit has none. An edit judged more than once is one line with its verdicts in
    order, separated by `` | ``. ``parse_edit_lines`` reads it back, one entry a verdict."""
    if not edits:
        return NO_EDITS
    lines: list[tuple[str, list[str]]] = []
    judged: dict[str, list[str]] = {}  # an edit's verdicts, by its head
    for edit in edits:
        head, why = _edit_head(edit), _why(edit)
        if why and head in judged:
            judged[head].append(why)
            continue
        whys = [why] if why else []  # no verdict (an accepted edit): a line of its own
        lines.append((head, whys))
        if why:
            judged[head] = whys
    return "\n".join(head + (f" ({' | '.join(whys)})" if whys else "") for head, whys in lines)


def _q(text: Any) -> str:
    return json.dumps("" if text is None else str(text), ensure_ascii=False)


def _edit_head(edit: Mapping[str, Any]) -> str:
    op = str(edit.get("op") or "edit")
    head = op
    if edit.get("file"):
        head += f" in {_q(edit['file'])}"
    if edit.get("anchor"):
        head += f" after {_q(edit['anchor'])}"
    if op == "add":
        body = _q(edit.get("content"))
    elif op == "delete":
        body = _q(edit.get("target"))
    else:
        body = f"{_q(edit.get('target'))} -> {_q(edit.get('content'))}"
    return f"- [{head}] {body}"


def _why(edit: Mapping[str, Any]) -> str:
    decision = edit.get("decision")
    size = edit.get("candidate_size")
    parts = []
    if decision == "dropped":
        parts.append(f"dropped from a passing bundle of {size}" if size else "dropped")
    elif size == 1:
        parts.append("rejected alone")
    elif size:
        parts.append(f"rejected in a bundle of {size}")
    elif decision:
        parts.append(str(decision))
    evidence = edit.get("evidence")
    if isinstance(evidence, Mapping):
        p = evidence.get("p_value")
        parts.append(
            f"val: {evidence.get('up', 0)} better, {evidence.get('down', 0)} worse"
            + (f", p {p:.2g}" if isinstance(p, (int, float)) else "")
        )
    if edit.get("changed_nothing"):
        parts.append(CHANGED_NOTHING)
    elif edit.get("inconclusive"):
        parts.append("inconclusive")
    return "; ".join(parts)


# What the buffer says of an edit whose candidate gave the same answer on every val item.
CHANGED_NOTHING = "CHANGED NOTHING: not one answer differed"


def parse_edit_lines(text: str) -> list[dict[str, Any]]:
    """The edits of an ``edit_lines`` text (op, file, anchor, target, content, decision,
    candidate_size, inconclusive, changed_nothing; the evidence's figures are not read back);
    lines of another shape are skipped."""
    out = []
    for line in text.splitlines():
        m = _EDIT_LINE.match(line.strip())
        if m is None:
            continue
        edit: dict[str, Any] = {"op": m["op"]}
        for key in ("file", "anchor"):
            if m[key]:
                edit[key] = json.loads(m[key])
        first = json.loads(m["first"])
        second = json.loads(m["second"]) if m["second"] else None
        if m["op"] == "add":
            edit["content"] = first
        elif m["op"] == "delete":
            edit["target"] = first
        else:
            edit["target"], edit["content"] = first, second or ""
        for why in (m["why"] or "").split(" | "):
            out.append({**edit, **_verdict(why)})
    return out


def _verdict(why: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if why.startswith("rejected alone"):
        out["decision"], out["candidate_size"] = "rejected", 1
    elif bundle := re.match(r"(rejected in|dropped from a passing) (?:a )?bundle of (\d+)", why):
        out["decision"] = "rejected" if bundle[1] == "rejected in" else "dropped"
        out["candidate_size"] = int(bundle[2])
    if "inconclusive" in why:
        out["inconclusive"] = True
    if CHANGED_NOTHING in why:
        out["changed_nothing"] = True
    return out


def edits_in(prompt: str, tag: str) -> list[dict[str, Any]]:
    """The list of edits under ``<tag>`` in a rendered prompt (``edit_lines``: every list of
    edits is rendered so, and a run never resumes across a change of templates)."""
    return parse_edit_lines(section(prompt, tag))


class PromptTooLong(ValueError):
    """An optimizer prompt does not fit the model's context even at its smallest."""


# What ``render(fit=...)`` may shrink: lists (which end is kept) and free texts.
_LISTS = {"cases": "head", "rejected": "tail", "accepted": "tail"}
_TEXTS = ("previous", "meta", "previous_notes", "previous_guidance")
_CLIPS = (1000, 400, 160)
_TEXT_CLIPS = (2000, 600, 200)
_CLIPPED_FIELDS = (
    "input",
    "output",
    "expected",
    "trajectory",
    "reference",
    "target",
    "content",
    "rationale",
)


# Estimated tokens: 2.5 bytes a token over-counts the tokenizers measured (Qwen2.5: 3.35 on a
# reflection prompt, 2.90 on digit-heavy JSON, 3.98 on English prose), plus the chat template's
# few tokens per message; a margin (``backends.local.SAFETY_TOKENS``) covers what an estimate
# cannot know.
BYTES_PER_TOKEN = 2.5
TOKENS_PER_MESSAGE = 8


def estimate_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """An upper estimate of the prompt tokens of chat ``messages`` (see BYTES_PER_TOKEN)."""
    size = sum(len(m["content"].encode("utf-8")) for m in messages)
    return math.ceil(size / BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE * (len(messages) + 1)


def _render_fitting(name: str, limit: int, values: Mapping[str, Any]) -> list[dict[str, str]]:
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
            key = max(big, key=lambda k: len(_shown(k, shown[k])))
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


def cache_point(text: str) -> int | None:
    """Where the part of a rendered prompt that the calls of a step share ends: the start of
    its ``<cases>`` section (None: the prompt has none). A backend that must mark a cache
    point to be served from the provider's cache (Anthropic) marks one there."""
    i = text.find("\n<cases>\n")
    return i + 1 if i >= 0 else None


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


def load_section(prompt: str, tag: str) -> Any:
    """The JSON in the prompt's ``<tag>`` section ([] when it is absent or not JSON)."""
    text = section(prompt, tag).strip()
    try:
        return json.loads(text) if text else []
    except json.JSONDecodeError:
        return []

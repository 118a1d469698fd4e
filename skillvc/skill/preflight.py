"""Checks that run before the first model call of ``train``, ``eval`` and ``check``.

``check_skill`` refuses a skill document with a problem ``skillvc validate`` reports that
breaks the document itself: empty, not UTF-8, frontmatter that is not a YAML mapping, or
unbalanced protected-region markers (which training relies on). It also refuses a skill too
large to send to a model. Skills sent to a model are capped in tokens, estimated cheaply and
without a tokenizer as ``ceil(bytes / 4)`` of the UTF-8 file (``estimate_tokens``): English
prose runs at about four bytes a token in the tokenizers of OpenAI and Anthropic, and a byte
count needs no model-specific vocabulary.

Invariants:

* Pure: reads only the bytes it is given (no git, no disk, no model), so a refusal happens
  before anything is sent or logged.
* Not refused here: the byte size budget of ``validate`` (``[skill] max_bytes``), which
  bounds what training may grow the skill to (an over-budget skill may still be trained
  smaller; the token cap bounds what reaches a model), and a format's conventions (a
  SKILL.md's name matching its directory, a description, Cursor or Copilot keys), which decide
  whether an agent finds the skill, not what a model reads. ``validate`` and the hooks check
  those, and training refuses edits that would break any of them.
* Every refusal is one ``SkillDocumentError`` (exit 5): one sentence naming the file and the
  first problem (with the count of the others), and a hint.
"""

from __future__ import annotations

import shlex

from skillvc.core.errors import SkillDocumentError
from skillvc.skill.formats import RULE_MARKERS, RULE_YAML, check_bytes

DEFAULT_MAX_TOKENS = 5_000  # the Agent Skills guidance for a SKILL.md body
BYTES_PER_TOKEN = 4
# The validate rules whose problems break the document itself (see the module docstring).
BLOCKING_RULES = frozenset({RULE_YAML, RULE_MARKERS})


class SkillTooLarge(SkillDocumentError):
    """The skill is larger than the token cap on what is sent to a model."""

    hint = "Shorten the skill, or raise [skill] max_tokens in skillvc.toml."


def estimate_tokens(data: bytes) -> int:
    """Tokens ``data`` costs a model, estimated as ``ceil(len(data) / 4)``."""
    return -(-len(data) // BYTES_PER_TOKEN)


def check_skill(path: str, data: bytes, *, max_tokens: int, where: str = "") -> None:
    """Refuse (SkillDocumentError, exit 5) a skill that must not reach a model.

    ``path`` is the repo-relative path (it decides the format rules); ``where`` says which
    version it is, e.g. "at HEAD~1" or "in the working tree", for the message.
    """
    shown = f"The skill file {path}{' ' + where if where else ''}"
    if not data.strip():
        raise SkillDocumentError(
            f"{shown} is empty.",
            hint="Write the skill's instructions into it and commit it.",
        )
    tokens = estimate_tokens(data)
    if tokens > max_tokens:
        raise SkillTooLarge(
            f"{shown} is about {tokens:,} tokens ({len(data):,} bytes / {BYTES_PER_TOKEN}), "
            f"over the cap of {max_tokens:,} tokens on what is sent to a model."
        )
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillDocumentError(
            f"{shown} is not UTF-8 text (bad byte 0x{data[exc.start]:02x} at offset {exc.start})."
        ) from None
    problems = [p for p in check_bytes(path, data) if p.rule in BLOCKING_RULES]
    if problems:
        first = problems[0].message
        # Problem messages start with the path; say which version, then the problem itself.
        detail = first[len(path) + 2 :] if first.startswith(f"{path}: ") else first
        if detail[1:2].islower():  # "The skill ..." reads on after the colon; "YAML" stays
            detail = detail[:1].lower() + detail[1:]
        more = len(problems) - 1
        others = f" (and {more} more problem{'s' if more != 1 else ''})" if more else ""
        raise SkillDocumentError(
            f"{shown} fails validation{others}: {detail}",
            hint=f"Run 'skillvc validate {shlex.quote(path)}' to list every problem, fix them "
            "and commit.",
        )

"""Format rules for the skill documents agents load, detected from the file's path.

Formats (see ``detect_format``):

* ``agent-skill`` — Agent Skills ``SKILL.md`` as the specification states it
  (https://agentskills.io/specification, "SKILL.md format" > "Frontmatter"): frontmatter is
  required; ``name`` is 1-64 characters of a-z, 0-9 and '-' (no leading, trailing or double
  '-') and equals the parent directory's name; ``description`` is 1-1024 characters and not
  blank; the optional ``license`` is a string, ``compatibility`` a string of 1-500 characters,
  ``metadata`` a mapping of string keys to string values, and ``allowed-tools`` a string (the
  spec: space-delimited; Claude Code also reads a YAML list of strings, so a list of strings
  passes too). Other top-level keys are allowed: the spec defines only these six, but clients
  add their own and read them from the same frontmatter (Claude Code documents
  ``argument-hint``, ``disable-model-invocation``, ``user-invocable``, ``model``, ``context``,
  ``agent``, ``hooks`` and more: https://code.claude.com/docs/en/skills#frontmatter-reference),
  so an unknown key is never an error. Size: the spec recommends a body under 500 lines and
  about 5,000 tokens ("Progressive disclosure"); above that ``check_warnings`` warns, it is
  not an error.
* ``cursor`` — Cursor rules ``*.mdc``: ``description`` a string, ``globs`` a string or a list of
  strings, ``alwaysApply`` a boolean; every key is optional (an empty value counts as unset)
  and unknown keys are allowed.
* ``copilot`` — GitHub Copilot ``*.instructions.md``: ``applyTo`` a non-empty string glob.
* ``markdown`` — anything else: only the common checks.

A skill package's reference files (``references/forms.md``: every package file but SKILL.md)
are checked by ``check_reference``: UTF-8, protected-region markers and the size budget, never
frontmatter (a leading ``---`` block in a reference file is text, ``skillvc.packages.model``).
``reference_warnings`` holds them to the spec's size guidance for SKILL.md's body: the spec
gives no number for a reference file, only that it be focused because an agent loads it on
demand (https://agentskills.io/specification, "references/"), and an agent reads one whole
just as it reads the body on activation, so the body's figures are the natural bound.

Common checks for every format: the frontmatter, when there is one, is a valid YAML mapping;
protected-region markers are well formed; the file fits a size budget (16,000 bytes unless
told otherwise). The budget is skillvc's own, not a format rule: it only blocks growth
(``new_problems``; the staged check of the hook compares with HEAD), so a file already over it
can still be edited as long as the edit does not make it larger.

Invariants:

* Checking is pure: it reads the ``SkillDocument`` it is given and nothing else (no git, no
  disk), so the training loop, ``skillvc validate`` and the hooks all apply the same rules.
* ``check_document`` returns errors only; ``check_warnings`` returns the advice (the spec's
  size guidance) that never fails a check, so callers that block on problems stay correct.
* Every ``Problem.message`` is one sentence that starts with the path, so a list of problems
  prints as one line each.
* ``new_problems`` never blames an edit for a problem the document already had: problems are
  matched by rule and message with line numbers ignored (an edit above a broken marker moves
  it), and a size problem is new only when the edit makes an over-budget file larger.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import yaml

from skillvc.core.errors import SkillDocumentError
from skillvc.skill.skilldoc import SkillDocument

DEFAULT_MAX_BYTES = 16_000

AGENT_SKILL = "agent-skill"
CURSOR = "cursor"
COPILOT = "copilot"
MARKDOWN = "markdown"
FORMATS = (AGENT_SKILL, CURSOR, COPILOT, MARKDOWN)

# Rule ids: stable, shown in --json output and documented in docs/review-and-hooks.md.
RULE_YAML = "frontmatter-yaml"
RULE_MARKERS = "protected-markers"
RULE_SIZE = "size-budget"
RULE_ENCODING = "encoding"
RULE_SKILL_FRONTMATTER = "skill-frontmatter"
RULE_SKILL_NAME = "skill-name"
RULE_SKILL_NAME_DIR = "skill-name-directory"
RULE_SKILL_DESCRIPTION = "skill-description"
RULE_SKILL_LICENSE = "skill-license"
RULE_SKILL_COMPATIBILITY = "skill-compatibility"
RULE_SKILL_METADATA = "skill-metadata"
RULE_SKILL_ALLOWED_TOOLS = "skill-allowed-tools"
RULE_SKILL_SIZE_GUIDANCE = "skill-size-guidance"  # a warning, never an error
RULE_REFERENCE_SIZE_GUIDANCE = "reference-size-guidance"  # a warning, never an error
RULE_CURSOR_DESCRIPTION = "cursor-description"
RULE_CURSOR_GLOBS = "cursor-globs"
RULE_CURSOR_ALWAYS_APPLY = "cursor-always-apply"
RULE_COPILOT_APPLY_TO = "copilot-apply-to"
RULE_PROTECTED = "protected-region"

SKILL_NAME_MAX = 64
SKILL_DESCRIPTION_MAX = 1024
SKILL_COMPATIBILITY_MAX = 500
# The spec's guidance for the body (https://agentskills.io/specification, "Progressive
# disclosure"): under 500 lines and about 5,000 tokens. Tokens are estimated as characters / 4.
SKILL_BODY_LINES_GUIDANCE = 500
SKILL_BODY_TOKENS_GUIDANCE = 5_000
CHARS_PER_TOKEN = 4
_SKILL_NAME_CHARS = re.compile(r"[a-z0-9-]+")
_LINE_PREFIX = re.compile(r"\bline \d+: ")
# Cursor writes `globs: *.ts, src/**` unquoted, which YAML reads as an alias; Cursor accepts it.
_BARE_GLOBS = re.compile(r"^(globs:[ \t]*)(\*[^\n]*?)[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Problem:
    """One broken rule in one file; ``message`` is a sentence starting with the path."""

    path: str
    rule: str
    message: str

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "rule": self.rule, "message": self.message}


def detect_format(path: str) -> str:
    """The format whose rules apply to ``path`` (one of ``FORMATS``)."""
    name = PurePosixPath(path.replace("\\", "/")).name
    if name == "SKILL.md":
        return AGENT_SKILL
    if name.endswith(".mdc"):
        return CURSOR
    if name.endswith(".instructions.md"):
        return COPILOT
    return MARKDOWN


def is_skill_file(path: str) -> bool:
    """True for paths whose name alone marks them as skill documents (not generic Markdown)."""
    return detect_format(path) != MARKDOWN


def check_document(
    path: str, doc: SkillDocument, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[Problem]:
    """Every problem of ``doc``: common checks first, then the rules of its format."""
    problems = list(_common(path, doc, max_bytes))
    fmt = detect_format(path)
    if fmt == AGENT_SKILL:
        problems.extend(_agent_skill(path, doc))
    elif fmt == CURSOR:
        problems.extend(_cursor(path, doc))
    elif fmt == COPILOT:
        problems.extend(_copilot(path, doc))
    return problems


def check_warnings(path: str, doc: SkillDocument) -> list[Problem]:
    """Advice that never fails a check: a SKILL.md body above the spec's size guidance."""
    if detect_format(path) != AGENT_SKILL:
        return []
    size = _guidance_size(doc.text[doc.frontmatter_end :])
    if size is None:
        return []
    return [
        Problem(
            path,
            RULE_SKILL_SIZE_GUIDANCE,
            f"{path}: the body is {size}; the Agent Skills "
            f"spec recommends under {SKILL_BODY_LINES_GUIDANCE} lines and "
            f"{SKILL_BODY_TOKENS_GUIDANCE:,} tokens (move detail to files it references).",
        )
    ]


def check_reference(path: str, data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Problem]:
    """Problems of a skill package's reference file (see the module docstring): bytes that
    are not UTF-8, malformed protected-region markers, the size budget."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [
            Problem(
                path,
                RULE_ENCODING,
                f"{path}: the file is not UTF-8 text (bad byte 0x{data[exc.start]:02x} at "
                f"offset {exc.start}); save it as UTF-8, or leave it out of the skill package "
                "with [skill] exclude.",
            )
        ]
    doc = SkillDocument.parse(data, frontmatter=False)
    return [*_marker_problems(path, doc), *_size_problems(path, doc, max_bytes)]


def reference_warnings(path: str, doc: SkillDocument) -> list[Problem]:
    """Advice that never fails a check: a reference file above the body's size guidance."""
    size = _guidance_size(doc.text)
    if size is None:
        return []
    return [
        Problem(
            path,
            RULE_REFERENCE_SIZE_GUIDANCE,
            f"{path}: the reference file is {size}; an agent reads it whole, so keep it "
            f"under the {SKILL_BODY_LINES_GUIDANCE} lines and {SKILL_BODY_TOKENS_GUIDANCE:,} "
            "tokens the Agent Skills spec recommends for SKILL.md's body (split it by topic "
            "and link each part where it is needed).",
        )
    ]


def _guidance_size(text: str) -> str | None:
    """``text``'s size in the spec's terms ("612 lines and about 5,120 tokens"), or None when
    it is within the guidance."""
    lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    tokens = len(text) // CHARS_PER_TOKEN
    if lines <= SKILL_BODY_LINES_GUIDANCE and tokens <= SKILL_BODY_TOKENS_GUIDANCE:
        return None
    return f"{lines:,} line{'s' if lines != 1 else ''} and about {tokens:,} tokens"


def check_bytes(path: str, data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> list[Problem]:
    """``check_document`` for raw file bytes; bytes that are not UTF-8 are one problem."""
    try:
        doc = SkillDocument.parse(data)
    except SkillDocumentError as exc:
        return [Problem(path, RULE_ENCODING, f"{path}: {_sentence(exc.message)}")]
    return check_document(path, doc, max_bytes=max_bytes)


def new_problems(
    path: str, before: SkillDocument, after: SkillDocument, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[Problem]:
    """Problems ``after`` has that ``before`` did not: the ones an edit introduces.

    The training loop refuses a candidate for which this is not empty.
    """
    old = check_document(path, before, max_bytes=max_bytes)
    old_keys = {_identity(p) for p in old if p.rule != RULE_SIZE}
    grew = len(after.render()) > len(before.render())
    fresh = []
    for problem in check_document(path, after, max_bytes=max_bytes):
        if problem.rule == RULE_SIZE:
            if grew or not any(p.rule == RULE_SIZE for p in old):
                fresh.append(problem)
        elif _identity(problem) not in old_keys:
            fresh.append(problem)
    return fresh


def new_reference_problems(
    path: str, before: bytes, after: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[Problem]:
    """``new_problems`` for a package's reference file, by its own rules (``check_reference``:
    markers and size, never frontmatter): the problems ``after`` has that ``before`` (b"" for a
    new file) did not; the size budget only when the file grew past it. Training and
    ``skillvc apply`` hold a reference file's change to this."""
    old = check_reference(path, before, max_bytes=max_bytes)
    seen = {(p.rule, p.message) for p in old}
    grew = len(after) > len(before)
    return [
        p
        for p in check_reference(path, after, max_bytes=max_bytes)
        if (p.rule == RULE_SIZE and (grew or not any(o.rule == RULE_SIZE for o in old)))
        or (p.rule != RULE_SIZE and (p.rule, p.message) not in seen)
    ]


def split_size(problems: list[Problem], *, grew: bool) -> tuple[list[Problem], list[Problem]]:
    """(errors, warnings) of one file's problems: the size budget fails a file only when the
    change being checked makes it larger (``grew``); otherwise it is advice."""
    errors = [p for p in problems if p.rule != RULE_SIZE or grew]
    return errors, [p for p in problems if p.rule == RULE_SIZE and not grew]


def protected_problems(
    path: str, before: bytes, after: bytes, *, frontmatter: bool = True
) -> list[Problem]:
    """A problem per protected region of ``path`` that differs between the two versions
    (``frontmatter=False`` for a package's reference file); none when either is not UTF-8
    (that is reported as an encoding problem)."""
    try:
        old = SkillDocument.parse(before, frontmatter=frontmatter)
        new = SkillDocument.parse(after, frontmatter=frontmatter)
    except SkillDocumentError:
        return []
    return [
        Problem(
            path,
            RULE_PROTECTED,
            f"{path}: protected region {name!r} differs from HEAD; protected regions are "
            "written by skillvc's slow update, not by hand.",
        )
        for name in protected_changes(old, new)
    ]


def protected_changes(before: SkillDocument, after: SkillDocument) -> list[str]:
    """Names of protected regions whose content changed, appeared or vanished, in order.

    A region also counts as changed when its marker style changes or it becomes (un)closed.
    """
    old, new = _regions_by_name(before), _regions_by_name(after)
    names = list(old) + [n for n in new if n not in old]
    return [n for n in names if old.get(n) != new.get(n)]


# -- common checks ----------------------------------------------------------------------------


def _common(path: str, doc: SkillDocument, max_bytes: int) -> Iterator[Problem]:
    error = _frontmatter_error(path, doc)
    if error:
        yield Problem(path, RULE_YAML, f"{path}: {_sentence(error)}")
    elif doc.frontmatter_end == 0 and doc.text.lstrip("\ufeff").split("\n", 1)[0].rstrip() == "---":
        # An opening '---' with no closing line: the metadata would be read as the body.
        yield Problem(
            path,
            RULE_YAML,
            f"{path}: the frontmatter opened by '---' on line 1 is never closed by a '---' line.",
        )
    yield from _marker_problems(path, doc)
    yield from _size_problems(path, doc, max_bytes)


def _marker_problems(path: str, doc: SkillDocument) -> Iterator[Problem]:
    for marker_problem in doc.problems:
        yield Problem(path, RULE_MARKERS, f"{path}: {_sentence(marker_problem)}")


def _size_problems(path: str, doc: SkillDocument, max_bytes: int) -> Iterator[Problem]:
    size = len(doc.render())
    if size > max_bytes:
        yield Problem(
            path,
            RULE_SIZE,
            f"{path}: the file is {size:,} bytes, over the size budget of {max_bytes:,} bytes.",
        )


def _frontmatter_error(path: str, doc: SkillDocument) -> str | None:
    if doc.frontmatter_error is None:
        return None
    if detect_format(path) == CURSOR and _cursor_frontmatter(doc) is not None:
        return None
    return _yaml_error_sentence(doc) or doc.frontmatter_error


def _yaml_error_sentence(doc: SkillDocument) -> str | None:
    """PyYAML's error as one short clause with the file's line number, when it has one."""
    lines = doc.text[: doc.frontmatter_end].split("\n")
    # Drop the opening '---' and the closing delimiter (followed by "" after the last "\n").
    yaml_text = "\n".join(lines[1:-2])
    try:
        yaml.safe_load(yaml_text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "unreadable YAML"
        # +2: the YAML starts on the file's second line, and marks count from 0.
        where = f" on line {mark.line + 2}" if mark is not None else ""
        return f"frontmatter is not valid YAML ({what}{where})"
    except (yaml.YAMLError, RecursionError):
        # RecursionError: "[[[[..." nested thousands deep; SkillDocument.parse already
        # caught it, so fall back to its message rather than crash the check.
        return None
    return None


# -- Agent Skills / Claude Code SKILL.md --------------------------------------------------------


def _agent_skill(path: str, doc: SkillDocument) -> Iterator[Problem]:
    if doc.frontmatter_error:
        return  # already reported; the fields cannot be read
    if doc.frontmatter_end == 0:
        yield Problem(
            path,
            RULE_SKILL_FRONTMATTER,
            f"{path}: a SKILL.md must start with YAML frontmatter holding name and description.",
        )
        return
    fm = doc.frontmatter or {}
    yield from _skill_name(path, fm)
    yield from _skill_description(path, fm)
    yield from _skill_optional(path, fm)


def _skill_name(path: str, fm: dict[str, Any]) -> Iterator[Problem]:
    name = fm.get("name")
    if name is None:
        yield Problem(path, RULE_SKILL_NAME, f"{path}: frontmatter name is missing.")
        return
    if not isinstance(name, str):
        yield _not_a_string(path, RULE_SKILL_NAME, "name", name)
        return
    if not (0 < len(name) <= SKILL_NAME_MAX and _SKILL_NAME_CHARS.fullmatch(name)):
        yield Problem(
            path,
            RULE_SKILL_NAME,
            f"{path}: frontmatter name {name!r} must be 1-{SKILL_NAME_MAX} characters "
            "of a-z, 0-9 and '-'.",
        )
        return
    if name.startswith("-") or name.endswith("-") or "--" in name:
        yield Problem(
            path,
            RULE_SKILL_NAME,
            f"{path}: frontmatter name {name!r} must not start or end with '-' or contain '--'.",
        )
        return
    directory = PurePosixPath(path.replace("\\", "/")).parent.name
    if directory and directory != name:
        yield Problem(
            path,
            RULE_SKILL_NAME_DIR,
            f"{path}: frontmatter name {name!r} must equal its directory name {directory!r}.",
        )


def _skill_description(path: str, fm: dict[str, Any]) -> Iterator[Problem]:
    description = fm.get("description")
    if description is None:
        yield Problem(path, RULE_SKILL_DESCRIPTION, f"{path}: frontmatter description is missing.")
    elif not isinstance(description, str):
        yield _not_a_string(path, RULE_SKILL_DESCRIPTION, "description", description)
    elif not description.strip():
        yield Problem(path, RULE_SKILL_DESCRIPTION, f"{path}: frontmatter description is empty.")
    elif len(description) > SKILL_DESCRIPTION_MAX:
        yield Problem(
            path,
            RULE_SKILL_DESCRIPTION,
            f"{path}: frontmatter description is {len(description):,} characters, "
            f"over the limit of {SKILL_DESCRIPTION_MAX:,}.",
        )


def _not_a_string(path: str, rule: str, field: str, value: Any) -> Problem:
    return Problem(
        path, rule, f"{path}: frontmatter {field} must be a string, not {_yaml_type(value)}."
    )


def _skill_optional(path: str, fm: dict[str, Any]) -> Iterator[Problem]:
    """The spec's optional fields, type-checked only when present."""
    license_ = fm.get("license")
    if license_ is not None and not isinstance(license_, str):
        yield _not_a_string(path, RULE_SKILL_LICENSE, "license", license_)
    compatibility = fm.get("compatibility")
    if compatibility is not None:
        if not isinstance(compatibility, str):
            yield _not_a_string(path, RULE_SKILL_COMPATIBILITY, "compatibility", compatibility)
        elif not compatibility.strip():
            yield Problem(
                path, RULE_SKILL_COMPATIBILITY, f"{path}: frontmatter compatibility is empty."
            )
        elif len(compatibility) > SKILL_COMPATIBILITY_MAX:
            yield Problem(
                path,
                RULE_SKILL_COMPATIBILITY,
                f"{path}: frontmatter compatibility is {len(compatibility):,} characters, "
                f"over the limit of {SKILL_COMPATIBILITY_MAX}.",
            )
    if "metadata" in fm:
        yield from _skill_metadata(path, fm["metadata"])
    tools = fm.get("allowed-tools")
    if tools is not None and not (
        isinstance(tools, str)
        or (isinstance(tools, list) and all(isinstance(t, str) for t in tools))
    ):
        yield Problem(
            path,
            RULE_SKILL_ALLOWED_TOOLS,
            f"{path}: frontmatter allowed-tools must be a space-delimited string such as "
            f'"Bash(git:*) Read", not {_yaml_type(tools)}.',
        )


def _skill_metadata(path: str, metadata: Any) -> Iterator[Problem]:
    if not isinstance(metadata, dict):
        yield Problem(
            path,
            RULE_SKILL_METADATA,
            f"{path}: frontmatter metadata must be a mapping of strings to strings, "
            f"not {_yaml_type(metadata)}.",
        )
        return
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            bad, what = (key, "key") if not isinstance(key, str) else (value, "value")
            yield Problem(
                path,
                RULE_SKILL_METADATA,
                f"{path}: frontmatter metadata {what} under {str(key)!r} must be a string, "
                f"not {_yaml_type(bad)} (quote it).",
            )
            return  # one line per file is enough to find the others


# -- Cursor rules (.mdc) ------------------------------------------------------------------------


def _cursor_frontmatter(doc: SkillDocument) -> dict[str, Any] | None:
    """The frontmatter as Cursor reads it: strict YAML, or YAML with bare ``globs:`` quoted."""
    if doc.frontmatter_error is None:
        return doc.frontmatter
    head = doc.text[: doc.frontmatter_end]
    quoted = _BARE_GLOBS.sub(lambda m: m.group(1) + _yaml_quote(m.group(2)), head)
    if quoted == head:
        return None
    lenient = SkillDocument.parse(quoted)
    return lenient.frontmatter if lenient.frontmatter_error is None else None


def _cursor(path: str, doc: SkillDocument) -> Iterator[Problem]:
    fm = _cursor_frontmatter(doc)
    if not fm:
        return  # no frontmatter (a manual rule) or unreadable YAML, reported already
    description = fm.get("description")
    if description is not None and not isinstance(description, str):
        yield _not_a_string(path, RULE_CURSOR_DESCRIPTION, "description", description)
    globs = fm.get("globs")
    if globs is not None and not _is_globs(globs):
        yield Problem(
            path,
            RULE_CURSOR_GLOBS,
            f"{path}: frontmatter globs must be a string or a list of strings, "
            f"not {_yaml_type(globs)}.",
        )
    always = fm.get("alwaysApply")
    if always is not None and not isinstance(always, bool):
        yield Problem(
            path,
            RULE_CURSOR_ALWAYS_APPLY,
            f"{path}: frontmatter alwaysApply must be true or false, not {always!r}.",
        )


def _is_globs(value: Any) -> bool:
    if isinstance(value, str):
        return True
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


# -- GitHub Copilot (*.instructions.md) --------------------------------------------------------


def _copilot(path: str, doc: SkillDocument) -> Iterator[Problem]:
    fm = doc.frontmatter
    if not fm or "applyTo" not in fm:
        return
    apply_to = fm["applyTo"]
    if not isinstance(apply_to, str) or not apply_to.strip():
        shown = "empty" if apply_to in (None, "") else _yaml_type(apply_to)
        yield Problem(
            path,
            RULE_COPILOT_APPLY_TO,
            f'{path}: frontmatter applyTo must be a glob string such as "**/*.py", not {shown}.',
        )


# -- helpers ------------------------------------------------------------------------------------


def _regions_by_name(doc: SkillDocument) -> dict[str, tuple[tuple[str, str, bool], ...]]:
    found: dict[str, tuple[tuple[str, str, bool], ...]] = {}
    for region in doc.regions:
        found[region.name] = found.get(region.name, ()) + (
            (region.style, region.content, region.closed),
        )
    return found


def _identity(problem: Problem) -> tuple[str, str]:
    return problem.rule, _LINE_PREFIX.sub("", problem.message)


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text.endswith((".", "!", "?")) else text + "."


def _yaml_type(value: Any) -> str:
    names = {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "a list",
        dict: "a mapping",
        type(None): "empty",
    }
    return names.get(type(value), f"a {type(value).__name__}")


def _yaml_quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"

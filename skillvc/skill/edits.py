"""Bounded edits to a skill document, applied deterministically.

Invariants:

* An edit is never silently applied somewhere else. A target or anchor must occur exactly once
  in the editable text (outside the frontmatter and protected regions); otherwise the edit is
  reported as ``Unmatched`` with a reason and the document is left as it was for that edit.
* An applied edit never creates or destroys a protected-region marker or the frontmatter:
  every result is re-parsed and compared with the document it came from.
* Edits apply one after another, in order, each against the result of the previous ones.
  The same document and edits always give the same bytes.
* Results are built with ``SkillDocument.with_text``, so BOM and CRLF style survive edits.
* ``Edit.id`` depends on what the edit does (op, target, content, anchor), not on why.
* ``unified_diff`` works on the documents' normalised text ("\\n" newlines, no BOM), which is
  also what ``edits_from_diff`` expects, so the two round-trip.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from skillvc.core.errors import PatchError
from skillvc.core.hashing import content_id
from skillvc.core.records import fields_of
from skillvc.skill.skilldoc import SkillDocument

Op = Literal["add", "replace", "delete"]
Reason = Literal["missing", "ambiguous", "frontmatter", "protected", "no-op", "format", "secret"]
OPS: tuple[str, ...] = ("add", "replace", "delete")

# Keys optimizer models tend to use instead of ours.
_ALIASES = {
    "old": "target",
    "new": "content",
    "type": "op",
    "action": "op",
    "after": "anchor",
    "reason": "rationale",
}
_FIELDS = ("op", "target", "content", "anchor", "rationale", "file")
SKILL_FILE = "SKILL.md"  # the file an edit names when it names none
# How far (in lines) a diff's hunk may have moved from the line its header states. git apply
# searches the whole file; a bound keeps a hunk whose numbers are far off from landing elsewhere.
MAX_HUNK_OFFSET = 10


@dataclass(frozen=True)
class Edit:
    """One bounded change: add ``content``, replace ``target`` with it, or delete ``target``."""

    op: Op
    target: str = ""
    content: str = ""
    anchor: str | None = None
    rationale: str = ""
    # A skill package's file, relative to its directory (skillvc.packages); SKILL.md by default,
    # and then left out of ``id`` and ``to_dict`` so single-file edits stay exactly as they were.
    file: str = SKILL_FILE

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"Unknown edit op {self.op!r}; use one of add, replace, delete.")
        if self.op in ("replace", "delete") and not self.target:
            raise ValueError(f"A {self.op} edit needs a non-empty target.")
        if self.op in ("add", "replace") and not self.content:
            raise ValueError(f"An {self.op} edit needs non-empty content.")

    @property
    def id(self) -> str:
        what = fields_of(self, "op target content anchor")
        if self.file != SKILL_FILE:
            what["file"] = self.file
        return content_id(what)

    def to_dict(self) -> dict[str, Any]:
        out = fields_of(self, "id op target content anchor rationale")
        if self.file != SKILL_FILE:
            out["file"] = self.file
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Edit:
        """Build an edit from JSON-like data, accepting common alias keys; ignores "id"."""
        if not isinstance(d, Mapping):
            raise ValueError(f"An edit must be an object, not {type(d).__name__}.")
        values: dict[str, Any] = {}
        for key, value in d.items():
            field = _ALIASES.get(key, key)
            # The canonical key wins over an alias when a model sends both.
            if field in _FIELDS and (field not in values or key == field):
                values[field] = value
        for field in _FIELDS:
            value = values.get(field)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"Edit field {field!r} must be a string.")
        op = (values.get("op") or "").strip().lower()
        if not op:
            raise ValueError("An edit needs an op: add, replace or delete.")
        anchor = values.get("anchor") or None
        return cls(
            op=cast(Op, op),
            target=values.get("target") or "",
            content=values.get("content") or "",
            anchor=anchor if anchor and anchor.strip() else None,
            rationale=values.get("rationale") or "",
            file=_file(values.get("file")),
        )


def _file(raw: str | None) -> str:
    """An edit's ``file`` normalised (``./references/a.md`` is ``references/a.md``)."""
    if raw is None or not raw.strip():
        return SKILL_FILE
    return posixpath.normpath(raw.strip().replace("\\", "/"))


@dataclass(frozen=True)
class Unmatched:
    """An edit that was not applied, and why (one sentence in ``detail``)."""

    edit: Edit
    reason: Reason
    detail: str


@dataclass(frozen=True)
class ApplyResult:
    document: SkillDocument
    applied: tuple[Edit, ...]
    unmatched: tuple[Unmatched, ...]

    @property
    def changed(self) -> bool:
        """True when at least one edit was applied (each applied edit changes the text)."""
        return bool(self.applied)


# -- applying ---------------------------------------------------------------------------------


def apply_edits(doc: SkillDocument, edits: Sequence[Edit], file: str = SKILL_FILE) -> ApplyResult:
    """Apply ``edits`` in order; edits that cannot be placed exactly once are reported, and so
    are edits naming another file than ``file`` (the document's)."""
    applied: list[Edit] = []
    unmatched: list[Unmatched] = []
    for edit in edits:
        if edit.file != file:
            detail = f"The edit names {edit.file}, not {file}."
            unmatched.append(Unmatched(edit, "missing", detail))
            continue
        outcome = _apply_one(doc, edit)
        if isinstance(outcome, Unmatched):
            unmatched.append(outcome)
        else:
            doc = outcome
            applied.append(edit)
    return ApplyResult(document=doc, applied=tuple(applied), unmatched=tuple(unmatched))


class _NoMatch(Exception):
    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def _apply_one(doc: SkillDocument, edit: Edit) -> SkillDocument | Unmatched:
    try:
        new_text = _add(doc, edit) if edit.op == "add" else _replace_or_delete(doc, edit)
    except _NoMatch as exc:
        return Unmatched(edit, exc.reason, exc.detail)
    if new_text == doc.text:
        return Unmatched(edit, "no-op", "Applying the edit would not change the document.")
    result = doc.with_text(new_text)
    if _structure(result) != _structure(doc):
        return Unmatched(
            edit,
            "protected",
            "Applying the edit would create or remove a protected-region marker "
            "or a frontmatter delimiter.",
        )
    if edit.op == "add" and _already_there(doc, edit.content):
        return Unmatched(edit, "no-op", "The skill already contains every line of this content.")
    return result


def _already_there(doc: SkillDocument, content: str) -> bool:
    """An add whose every non-blank line is already a line of the skill would only duplicate."""
    wanted = [line.strip() for line in _norm(doc, content).splitlines() if line.strip()]
    present = {line.strip() for line in doc.text.splitlines()}
    return bool(wanted) and all(line in present for line in wanted)


def _norm(doc: SkillDocument, text: str) -> str:
    """``text`` in the newline convention of ``doc.text``.

    That is "\n", except in a file with mixed line endings, whose text keeps its "\r\n"
    byte for byte (see skilldoc): there an edit's "\r\n" is kept too, so it can match those
    lines and a diff of such a file turns back into edits that reproduce it.
    """
    return text if "\r\n" in doc.text else text.replace("\r\n", "\n")


def _structure(doc: SkillDocument) -> tuple[object, ...]:
    """What no step edit may change: the frontmatter text and every protected region."""
    regions = tuple((r.name, r.style, r.content, r.closed) for r in doc.regions)
    return (doc.text[: doc.frontmatter_end], regions, len(doc.problems))


def _find_all(text: str, needle: str) -> list[tuple[int, int]]:
    """Every occurrence, overlapping ones included (overlaps still make a target ambiguous)."""
    found: list[tuple[int, int]] = []
    i = text.find(needle)
    while i != -1:
        found.append((i, i + len(needle)))
        i = text.find(needle, i + 1)
    return found


def _editable(doc: SkillDocument, span: tuple[int, int]) -> bool:
    return _inside(doc.editable_spans(), span)


def _inside(spans: list[tuple[int, int]], span: tuple[int, int]) -> bool:
    return any(s <= span[0] and span[1] <= e for s, e in spans)


def _pick(doc: SkillDocument, occurrences: list[tuple[int, int]], what: str) -> tuple[int, int]:
    """The single editable occurrence, or raise _NoMatch with the reason."""
    spans = doc.editable_spans()
    editable = [o for o in occurrences if _inside(spans, o)]
    if len(editable) == 1:
        return editable[0]
    if editable:
        raise _NoMatch(
            "ambiguous", f"The {what} was found {len(editable)} times in the editable body."
        )
    if any(start < doc.frontmatter_end for start, _ in occurrences):
        raise _NoMatch("frontmatter", f"The {what} occurs only in the frontmatter.")
    if occurrences:
        raise _NoMatch("protected", f"The {what} occurs only in or across a protected region.")
    raise _NoMatch("missing", f"The {what} was not found in the document.")


def _replace_or_delete(doc: SkillDocument, edit: Edit) -> str:
    text = doc.text
    target, content = _norm(doc, edit.target), _norm(doc, edit.content)
    if edit.op == "replace" and content == target:
        raise _NoMatch("no-op", "The replacement content equals the target.")
    try:
        start, end = _pick(doc, _find_all(text, target), "target")
    except _NoMatch as exc:
        if exc.reason != "missing":
            raise
        start, end, target = _stripped_fallback(doc, target)
        # Drop the same surrounding whitespace from the content, so the text around the
        # target keeps its shape (models often pad targets with newlines).
        lead, trail = _padding(_norm(doc, edit.target))
        if (
            content.startswith(lead)
            and content.endswith(trail)
            and len(content) >= len(lead + trail)
        ):
            content = content[len(lead) : len(content) - len(trail)]
    if edit.op == "replace":
        return text[:start] + content + text[end:]
    # A whole-line target takes its line break with it, so no empty line is left behind.
    whole_line = (start == 0 or text[start - 1] == "\n") and not target.endswith("\n")
    if whole_line and text[end : end + 1] == "\n" and _editable(doc, (start, end + 1)):
        end += 1
    before, after = text[:start], text[end:]
    run_before = len(before) - len(before.rstrip("\n"))
    run_after = len(after) - len(after.lstrip("\n"))
    if run_before and run_after and run_before + run_after >= 3:
        # The deletion joined two blank stretches: keep a single blank line, not a hole.
        return before.rstrip("\n") + "\n\n" + after.lstrip("\n")
    return before + after


def _padding(target: str) -> tuple[str, str]:
    stripped = target.strip()
    if not stripped:
        return "", ""
    lead = target[: target.index(stripped)]
    return lead, target[len(lead) + len(stripped) :]


def _stripped_fallback(doc: SkillDocument, target: str) -> tuple[int, int, str]:
    stripped = target.strip()
    if stripped and stripped != target:
        editable = [o for o in _find_all(doc.text, stripped) if _editable(doc, o)]
        if len(editable) == 1:
            return editable[0][0], editable[0][1], stripped
        if editable:
            raise _NoMatch(
                "missing",
                "The target was not found; without its surrounding whitespace it occurs "
                f"{len(editable)} times in the editable body.",
            )
    raise _NoMatch("missing", "The target was not found in the document.")


def _add(doc: SkillDocument, edit: Edit) -> str:
    text = doc.text
    content = _norm(doc, edit.content)
    if not content.endswith("\n"):
        content += "\n"
    if edit.anchor is not None and edit.anchor.strip():
        pos, prefix = _after_anchor(doc, _norm(doc, edit.anchor).strip())
        return text[:pos] + prefix + content + text[pos:]
    pos, suffix = len(text), ""
    last = doc.regions[-1] if doc.regions else None
    if last is not None and not text[last.end :].strip():
        # The document ends with a protected region (e.g. slow updates): new text goes
        # before it, separated by a blank line.
        pos, suffix = last.start, "\n"
    before = text[:pos]
    if not before or before.endswith("\n\n"):
        sep = ""
    elif before.endswith("\n"):
        sep = "\n"
    else:
        sep = "\n\n"
    return before + sep + content + suffix + text[pos:]


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line, end excluding the "\\n"."""
    spans, start = [], 0
    while start < len(text):
        nl = text.find("\n", start)
        end = len(text) if nl == -1 else nl
        spans.append((start, end))
        start = end + 1
    return spans


def _after_anchor(doc: SkillDocument, anchor: str) -> tuple[int, str]:
    """Insertion offset right after the anchor's line, and a line break to add first if any."""
    text = doc.text
    occurrences = [(s, e) for s, e in _lines(text) if text[s:e].strip() == anchor]
    if not occurrences:
        occurrences = _find_all(text, anchor)
    _, end = _pick(doc, occurrences, "anchor")
    nl = text.find("\n", end)
    if nl == -1:
        return len(text), "\n"
    pos = nl + 1
    if any(r.start < pos < r.end for r in doc.regions):
        raise _NoMatch("protected", "The anchor's line ends inside a protected region.")
    return pos, ""


# -- diffs ------------------------------------------------------------------------------------


def _split(text: str) -> list[str]:
    """Lines with their "\\n"; unlike str.splitlines, only "\\n" ends a line."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def unified_diff(before: SkillDocument, after: SkillDocument, path: str = "SKILL.md") -> str:
    """A git-style unified diff of the two documents' text; "" when the text is equal."""
    a, b = _split(before.text), _split(after.text)
    if a == b:
        return ""
    out: list[str] = []
    for line in difflib.unified_diff(a, b, f"a/{path}", f"b/{path}"):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def parse_diff(diff_text: str) -> PatchSet:
    """The files and hunks of a unified diff; PatchError when it is not one."""
    try:
        patch = PatchSet(diff_text)
    except UnidiffParseError as exc:
        short = _short_hunk(diff_text)
        if short is not None:
            raise PatchError(
                f"The diff cannot be parsed: {short}.",
                hint="Fix the counts in the @@ line (or make the diff again with 'git diff').",
            ) from exc
        # unidiff quotes the offending line, newline and all: one printable line, kept short.
        detail = " ".join("".join(c if c.isprintable() else " " for c in str(exc)).split())
        detail = detail if len(detail) <= 100 else detail[:100] + "..."
        raise PatchError(f"The diff cannot be parsed ({detail}).") from exc
    if not len(patch):
        raise PatchError("The input is not a unified diff (it has no '--- a/FILE', '+++ b/FILE').")
    return patch


_HUNK_HEADER = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def _short_hunk(diff_text: str) -> str | None:
    """``hunk 2 (@@ -13,2 +13,4 @@) promises 2 old and 4 new lines but has 2 and 3``: the
    first hunk whose body is shorter than its header says (None: every count holds)."""
    lines = diff_text.splitlines()
    number = 0
    for i, line in enumerate(lines):
        m = _HUNK_HEADER.match(line)
        if m is None:
            continue
        number += 1
        want_old = int(m.group(1)) if m.group(1) is not None else 1
        want_new = int(m.group(2)) if m.group(2) is not None else 1
        got_old = got_new = 0
        for body in lines[i + 1 :]:
            if got_old >= want_old and got_new >= want_new:
                break
            kind = body[:1]
            if kind == "-" and not body.startswith("--- "):
                got_old += 1
            elif kind == "+" and not body.startswith("+++ "):
                got_new += 1
            elif kind == " " or body == "":
                got_old, got_new = got_old + 1, got_new + 1
            elif kind != "\\":
                break
        if got_old < want_old or got_new < want_new:
            header = line.split("@@")[1].strip()
            return (
                f"hunk {number} (@@ {header} @@) promises {want_old} old and {want_new} new "
                f"lines but has {got_old} old and {got_new} new"
            )
    return None


def edits_from_diff(diff: str | PatchSet, doc: SkillDocument, path: str = "SKILL.md") -> list[Edit]:
    """Turn a unified diff of one file (``path``, named in errors) into edits, one per hunk.

    A hunk must match at the line its header states, or at most ``MAX_HUNK_OFFSET`` lines away
    (the nearest place wins; on a tie, the earlier one); otherwise PatchError names the hunk
    and the line it expected. Each hunk becomes the smallest replace edit whose target occurs
    exactly once in the document, at that place; context lines are trimmed or widened to get
    there. Applying the edits in order to ``doc`` gives the diff's result. Several sections
    for the same file apply one after another, as ``git apply`` does.
    """
    patch = diff if isinstance(diff, PatchSet) else parse_diff(diff)
    files = {f.path for f in patch}
    if len(files) != 1:
        raise PatchError(f"The diff must change exactly one file; it changes {len(files)}.")
    if not any(len(f) for f in patch):
        raise PatchError("The diff has no hunks to apply.")
    return edits_from_sections(list(patch), doc, path)


def edits_from_sections(sections: Sequence[Any], doc: SkillDocument, path: str) -> list[Edit]:
    """``edits_from_diff`` for the sections (unidiff ``PatchedFile``) of one file, already
    picked out of a diff: a skill package's diff names several files, each done on its own."""
    edits: list[Edit] = []
    working = doc
    for patched_file in sections:
        delta = 0  # line numbers of a section count in the text the earlier sections produced
        for hunk in patched_file:
            old, new = _hunk_blocks(hunk, keep_crlf="\r\n" in working.text)
            lines = _split(working.text)
            # Unified diffs name the first old line, or for an empty old block the line it
            # follows.
            given = hunk.source_start + delta - (1 if old else 0)
            index = _locate(lines, old, given)
            if index is None:
                raise _mismatch(lines, old, given, _header(hunk), path)
            edit = _edit_for_hunk(working, old, new, index)
            edits.append(edit)
            # Later hunks are located in the text the earlier ones produce.
            working = apply_edits(working, [edit]).document
            delta += len(new) - len(old)
    return edits


def _header(hunk: Any) -> str:
    return (
        f"@@ -{hunk.source_start},{hunk.source_length} +{hunk.target_start},{hunk.target_length} @@"
    )


def _locate(lines: list[str], old: list[str], given: int) -> int | None:
    """Where the old block starts: at ``given`` or the nearest place within the offset bound."""
    if not old:
        # A pure insertion has no text to check its place by: it goes exactly where it says.
        return given if 0 <= given <= len(lines) else None
    for offset in sorted(range(-MAX_HUNK_OFFSET, MAX_HUNK_OFFSET + 1), key=lambda d: (abs(d), d)):
        i = given + offset
        if i >= 0 and lines[i : i + len(old)] == old:
            return i
    return None


def _mismatch(lines: list[str], old: list[str], given: int, header: str, path: str) -> PatchError:
    """The error for a hunk that matches nowhere near its place, naming the line it expected."""
    where = f"The patch does not apply to {path}: hunk {header}"
    if not old:
        return PatchError(
            f"{where} inserts after line {given}, but the file has {len(lines)} lines."
        )
    at, want, have = given, old[0], None
    for i, want in enumerate(old):
        at = given + i
        have = lines[at] if 0 <= at < len(lines) else None
        if have != want:
            break
    found = "the file has no such line" if have is None else f"it reads {_show(have)}"
    return PatchError(
        f"{where} expects line {at + 1} to read {_show(want)}, but {found}, and the hunk "
        f"matches nowhere within {MAX_HUNK_OFFSET} lines of there."
    )


def _show(line: str, limit: int = 60) -> str:
    text = line.rstrip("\r\n")
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _hunk_blocks(hunk: Any, keep_crlf: bool = False) -> tuple[list[str], list[str]]:
    old: list[str] = []
    new: list[str] = []
    last = ""
    for line in hunk:
        value = line.value if keep_crlf else line.value.replace("\r\n", "\n")
        if line.line_type == " ":
            old.append(value)
            new.append(value)
        elif line.line_type == "-":
            old.append(value)
        elif line.line_type == "+":
            new.append(value)
        elif line.line_type == "\\":
            # "\ No newline at end of file" applies to the line just before it.
            if last in (" ", "-") and old:
                old[-1] = old[-1].removesuffix("\n")
            if last in (" ", "+") and new:
                new[-1] = new[-1].removesuffix("\n")
        last = line.line_type
    return old, new


def _edit_for_hunk(doc: SkillDocument, old: list[str], new: list[str], index: int) -> Edit:
    """The edit that turns ``old`` (at line ``index`` of ``doc``) into ``new``."""
    lines = _split(doc.text)
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    core_new = "".join(new[prefix : len(new) - suffix])
    added = _pure_addition(doc, lines, old, new, index, prefix, suffix, core_new)
    if added is not None:
        return added
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    core_at, core_end = index + prefix, index + len(old) - suffix
    text = doc.text
    spans = doc.editable_spans()

    def editable(lo: int, hi: int) -> bool:
        return any(s <= lo and hi <= e for s, e in spans)

    # When the change itself touches protected text no context can make it editable; the
    # first unique form is then returned for apply_edits to refuse with the right reason.
    core_ok = editable(starts[core_at], starts[core_end])
    if not core_ok and core_at == core_end == len(lines) and not doc.regions:
        # Appending to a frontmatter-only document: there is no editable line to anchor on,
        # so this is a plain add at the end. (After a final protected region an add would
        # land before the region, i.e. somewhere else, so that case is refused below.)
        return Edit("add", content=core_new)
    fallback: Edit | None = None
    for widen in range(len(lines) + 1):
        for n_before in range(widen + 1):
            lo_line, hi_line = core_at - n_before, core_end + widen - n_before
            if lo_line < 0 or hi_line > len(lines):
                continue
            lo, hi = starts[lo_line], starts[hi_line]
            target = text[lo:hi]
            content = text[lo : starts[core_at]] + core_new + text[starts[core_end] : hi]
            if not target or (not content and target != text):
                continue
            if text.find(target) != lo or text.find(target, lo + 1) != -1:
                continue  # not unique, or not at the hunk's place
            edit = _plain_edit(target, content)
            if editable(lo, hi) or not core_ok:
                return edit
            # Unique, but its context reaches protected text: keep looking for a form
            # whose context stays editable, and fall back to this one.
            fallback = fallback or edit
    if fallback is not None:
        return fallback
    return _plain_edit("".join(old), "".join(new)) if old else Edit("add", content="".join(new))


def _pure_addition(
    doc: SkillDocument,
    lines: list[str],
    old: list[str],
    new: list[str],
    index: int,
    prefix: int,
    suffix: int,
    core_new: str,
) -> Edit | None:
    """A hunk that only adds lines, as an ``add`` after the line before them (its anchor),
    when that line is unique and the add gives exactly the hunk's result; else None."""
    at = index + prefix
    if prefix + suffix != len(old) or not core_new or at == 0:
        return None
    anchor = lines[at - 1].strip()
    if not anchor:
        return None
    edit = Edit("add", content=core_new, anchor=anchor)
    wanted = "".join(lines[:at]) + core_new + "".join(lines[at:])
    result = apply_edits(doc, [edit])
    return edit if result.applied and result.document.text == wanted else None


def _plain_edit(target: str, content: str) -> Edit:
    return (
        Edit("replace", target=target, content=content)
        if content
        else Edit("delete", target=target)
    )

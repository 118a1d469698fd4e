"""Parse and render a Markdown skill document (``SKILL.md``) exactly.

Invariants:

* ``SkillDocument.parse(data).render() == data`` for every UTF-8 input, whatever its line
  endings, BOM, final newline, frontmatter or markers. ``render`` rebuilds the bytes from the
  parts (BOM flag, newline style, text); it never returns a stored copy of the input.
* ``text`` is what every other module works on: BOM removed, and "\\r\\n" turned into "\\n"
  only when the file's newlines are uniformly CRLF. Files with mixed endings keep their text
  byte for byte (newline "\\n"), so nothing is ever normalised that render could not undo.
* Parsing never fails on odd text: broken YAML lands in ``frontmatter_error`` and broken
  markers in ``problems``. Only bytes that are not UTF-8 raise ``SkillDocumentError``.
* Protected regions (``<!-- skillvc:protected NAME -->`` ... ``<!-- /skillvc:protected NAME
  -->`` and SkillOpt's ``<!-- SLOW_UPDATE_START -->`` ... ``<!-- SLOW_UPDATE_END -->``) and
  the frontmatter are never part of ``editable_spans``; markers count as protected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from skillvc.core.errors import SkillDocumentError
from skillvc.core.hashing import sha256_hex

BOM = "\ufeff"
SKILLVC = "skillvc"
SKILLOPT = "skillopt"
SLOW_UPDATE = "slow-update"

NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
# One regex for all four marker kinds, so markers are found in document order in one pass.
MARKER_RE = re.compile(
    r"<!--\s*(?:"
    r"(?P<close>/)?skillvc:protected\s+(?P<name>[A-Za-z0-9_.-]+)"
    r"|SLOW_UPDATE_(?P<opt>START|END)"
    r")\s*-->"
)

_FRONTMATTER_OPEN = "---"
_FRONTMATTER_CLOSE = ("---", "...")


@dataclass(frozen=True)
class Region:
    """A protected region; step edits may never touch it (markers included)."""

    name: str
    start: int  # first char of the start marker
    content_start: int  # just after the start marker
    content_end: int  # first char of the end marker (== end when the region is unclosed)
    end: int  # just after the end marker
    style: str  # "skillvc" or "skillopt"
    content: str = ""  # text[content_start:content_end], for convenience

    @property
    def closed(self) -> bool:
        return self.end > self.content_end


def start_marker(name: str, style: str = SKILLVC) -> str:
    if style == SKILLOPT:
        return "<!-- SLOW_UPDATE_START -->"
    return f"<!-- skillvc:protected {name} -->"


def end_marker(name: str, style: str = SKILLVC) -> str:
    if style == SKILLOPT:
        return "<!-- SLOW_UPDATE_END -->"
    return f"<!-- /skillvc:protected {name} -->"


@dataclass(frozen=True)
class SkillDocument:
    """A skill file split into the parts skillvc reasons about; see the module invariants."""

    text: str
    bom: bool
    newline: str
    frontmatter_end: int
    frontmatter: dict[str, Any] | None
    frontmatter_error: str | None
    regions: tuple[Region, ...]
    problems: tuple[str, ...]
    # False for a package's reference files: frontmatter is SKILL.md's alone (skillvc.packages)
    allow_frontmatter: bool = True

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def parse(cls, data: bytes | str, *, frontmatter: bool = True) -> SkillDocument:
        """Parse file bytes (or already decoded text); raise only for non-UTF-8 input.
        ``frontmatter=False``: a leading ``---`` block is body text (a package's references)."""
        if isinstance(data, bytes):
            try:
                raw = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise SkillDocumentError(
                    f"The skill document is not valid UTF-8 (bad byte at offset {exc.start})."
                ) from exc
        else:
            raw = data
            try:
                raw.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise SkillDocumentError(
                    f"The skill document text cannot be encoded as UTF-8 (offset {exc.start})."
                ) from exc
        bom = raw.startswith(BOM)
        if bom:
            raw = raw[1:]
        newline = "\r\n" if _uniformly_crlf(raw) else "\n"
        text = raw.replace("\r\n", "\n") if newline == "\r\n" else raw
        return cls._build(text, bom, newline, frontmatter)

    @classmethod
    def _build(
        cls, text: str, bom: bool, newline: str, allow_frontmatter: bool = True
    ) -> SkillDocument:
        fm_end = _frontmatter_end(text) if allow_frontmatter else 0
        frontmatter, fm_error = _load_frontmatter(text[:fm_end]) if fm_end else (None, None)
        regions, problems = _scan_regions(text, fm_end)
        return cls(
            text=text,
            bom=bom,
            newline=newline,
            frontmatter_end=fm_end,
            frontmatter=frontmatter,
            frontmatter_error=fm_error,
            regions=regions,
            problems=problems,
            allow_frontmatter=allow_frontmatter,
        )

    def with_text(self, text: str) -> SkillDocument:
        """Re-parse new "\\n"-text, keeping this document's BOM and newline style."""
        return self._build(text, self.bom, self.newline, self.allow_frontmatter)

    # -- output -------------------------------------------------------------------------------

    def render(self) -> bytes:
        """The file bytes: the exact inverse of ``parse`` for an unedited document."""
        # Safe because parse only converts when every "\n" was preceded by "\r": the CRLF
        # pairs are exactly the join points, so putting them back restores every byte.
        text = self.text.replace("\n", "\r\n") if self.newline == "\r\n" else self.text
        return ((BOM if self.bom else "") + text).encode("utf-8")

    def sha(self) -> str:
        """SHA-256 hex of the rendered bytes (what git and the event log see)."""
        return sha256_hex(self.render())

    # -- structure ----------------------------------------------------------------------------

    @property
    def body(self) -> str:
        return self.text[self.frontmatter_end :]

    def editable_spans(self) -> list[tuple[int, int]]:
        """Half-open spans of ``text`` outside the frontmatter and protected regions."""
        spans: list[tuple[int, int]] = []
        pos = self.frontmatter_end
        for region in self.regions:
            if region.start > pos:
                spans.append((pos, region.start))
            pos = max(pos, region.end)
        if pos < len(self.text):
            spans.append((pos, len(self.text)))
        return spans

    def region(self, name: str) -> Region | None:
        """The first protected region called ``name``, or None."""
        return next((r for r in self.regions if r.name == name), None)

    def with_region(self, name: str, content: str) -> SkillDocument:
        """Set the content of protected region ``name``, appending the region if it is new.

        Used by epoch-end slow updates. An existing region keeps its marker style (SkillOpt
        markers stay SkillOpt markers); a new one uses skillvc markers after a blank line.
        """
        if not NAME_RE.fullmatch(name):
            raise SkillDocumentError(
                f"Region name {name!r} is invalid; use letters, digits, '.', '_' or '-'."
            )
        body = content.replace("\r\n", "\n").strip("\n")
        if MARKER_RE.search(body):
            raise SkillDocumentError(
                f"The new content of region {name!r} contains a protected-region marker."
            )
        inner = f"\n{body}\n" if body else "\n"
        existing = self.region(name)
        if existing is not None:
            # An unclosed region gets its end marker back, so the content is bounded again.
            tail = "" if existing.closed else end_marker(name, existing.style) + "\n"
            text = self.text[: existing.content_start] + inner + tail
            text += self.text[existing.content_end :]
        else:
            text = self.text
            if text and not text.endswith("\n"):
                text += "\n"
            if text and not text.endswith("\n\n"):
                text += "\n"
            text += start_marker(name) + inner + end_marker(name) + "\n"
        return self.with_text(text)


# -- helpers ----------------------------------------------------------------------------------


def _uniformly_crlf(raw: str) -> bool:
    return "\r\n" in raw and raw.count("\n") == raw.count("\r\n")


def _line_at(text: str, start: int) -> tuple[str, int]:
    """The line starting at ``start`` without its "\\n" (and "\\r"), and the next line's start."""
    nl = text.find("\n", start)
    end = len(text) if nl == -1 else nl + 1
    line = text[start:end].rstrip("\n")
    # A "\r" left over from a mixed-ending file still ends the line as far as markers go.
    return line.removesuffix("\r"), end


def _frontmatter_end(text: str) -> int:
    """Offset where the body starts: after the closing delimiter line, or 0."""
    first, pos = _line_at(text, 0)
    if first != _FRONTMATTER_OPEN or pos == len(text):
        return 0
    while pos < len(text):
        line, nxt = _line_at(text, pos)
        if line in _FRONTMATTER_CLOSE:
            return nxt
        pos = nxt
    return 0


def _load_frontmatter(block: str) -> tuple[dict[str, Any] | None, str | None]:
    # Drop the two delimiter lines; what is between them is the YAML.
    first_nl = block.find("\n")
    closing_start = block.rstrip("\n").rfind("\n") + 1
    yaml_text = block[first_nl + 1 : closing_start]
    try:
        value = yaml.safe_load(yaml_text)
    except yaml.YAMLError as exc:
        return None, f"invalid YAML frontmatter: {' '.join(str(exc).split())}"
    except Exception as exc:  # noqa: BLE001 - parsing must never fail on odd text
        return None, f"unreadable YAML frontmatter: {type(exc).__name__}: {exc}"
    if value is None:
        return {}, None
    if not isinstance(value, dict):
        return None, f"frontmatter is a YAML {type(value).__name__}, not a mapping"
    return value, None


def _line_no(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _scan_regions(text: str, fm_end: int) -> tuple[tuple[Region, ...], tuple[str, ...]]:
    """Find protected regions after the frontmatter. Regions do not nest."""
    regions: list[Region] = []
    problems: list[str] = []
    # (name, style, start, content_start) of the region being read, if any
    open_: tuple[str, str, int, int] | None = None
    for m in MARKER_RE.finditer(text, fm_end):
        if m.group("opt"):
            name, style, is_end = SLOW_UPDATE, SKILLOPT, m.group("opt") == "END"
        else:
            name, style, is_end = m.group("name"), SKILLVC, bool(m.group("close"))
        line = _line_no(text, m.start())
        if open_ is None and not is_end:
            open_ = (name, style, m.start(), m.end())
        elif open_ is None:
            problems.append(f"line {line}: end marker for {name!r} has no start marker")
        elif is_end and (name, style) == open_[:2]:
            o_name, o_style, o_start, o_cstart = open_
            regions.append(
                Region(
                    o_name,
                    o_start,
                    o_cstart,
                    m.start(),
                    m.end(),
                    o_style,
                    text[o_cstart : m.start()],
                )
            )
            open_ = None
        else:
            problems.append(
                f"line {line}: marker for {name!r} inside region {open_[0]!r} is ignored"
            )
    if open_ is not None:
        o_name, o_style, o_start, o_cstart = open_
        end = len(text)
        regions.append(Region(o_name, o_start, o_cstart, end, end, o_style, text[o_cstart:]))
        problems.append(
            f"line {_line_no(text, o_start)}: region {o_name!r} is never closed; "
            "it protects everything to the end of the document"
        )
    seen: set[str] = set()
    for region in regions:
        if region.name in seen:
            problems.append(f"region {region.name!r} appears more than once")
        seen.add(region.name)
    return tuple(regions), tuple(problems)

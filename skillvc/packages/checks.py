"""What ``skillvc validate`` and the hooks check of a skill package beyond SKILL.md's own rules.

SKILL.md keeps the format rules of ``skillvc.skill.formats`` (Agent Skills frontmatter, markers, the
size budget, the body's size guidance). The other files and the package as a whole add:

Errors (``package_problems``; they fail validate and the pre-commit hook):
- a reference file that is not UTF-8, or whose protected-region markers are malformed
  (``formats.check_reference``), and a relative link that does not resolve inside the
  package (``links.broken_links``). These are exactly what ``check_package_files``
  refuses before a model call, so validate never passes a package that eval or train refuse.

Warnings (``package_warnings``; advice, never a failure):
- ``package-orphan``: a file no chain of relative links from SKILL.md reaches. No agent is
  pointed to it and the chat target never receives it. Files that are conventionally for
  people, not agents, are exempt (``CONVENTIONAL``: README, LICENSE/LICENCE, COPYING,
  NOTICE, CHANGELOG, CONTRIBUTING, any extension or case, at any depth): the spec itself
  lets ``license`` name a bundled license file, and a README in the skill's folder is what a
  person browsing the repository reads.
- ``package-nested-link``: a file reached only through another file's link. The spec asks
  to keep file references one level deep from SKILL.md ("File references"), and the chat
  target is sent only the files SKILL.md itself links.
- ``reference-size-guidance``: a reference file over the spec's body guidance
  (``formats.reference_warnings``).
- ``package-size-guidance``: the package as a whole is larger than what the optimizer is
  shown. The spec gives no figure for a whole package (resources load "as needed"), so the
  bound is skillvc's own: the files besides SKILL.md share ``[skill] optimizer_chars`` in the
  optimizer's prompt (``prompt.optimizer_files``), and a file that gets only part of its
  text there cannot be edited by training where it is cut.
- ``package-chat-cut``: with the chat harness, a linked file the rendering leaves out
  (``render.render_chat`` records it in ``cut``) because it would take the reference text
  past ``[skill] reference_bytes`` or the prompt past ``[skill] max_tokens`` x 4 bytes.

``check_package`` puts it together for validate and the hooks: every file (SKILL.md by its
format rules), the size budget per file (``[skill] max_bytes``: an error only for a file the
checked change makes larger, as for a single-file skill; with no earlier version, as in the
working tree, a warning), protected regions against the earlier version, links, warnings.

Invariants: pure (a package's bytes and the limits in, problems out; no git, no disk), so the
working tree and the staged index are checked by the same code; every message is one sentence
starting with the path of the file it is about; output order is deterministic (files by
path; warnings by kind, then path).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from skillvc.core.errors import SkillDocumentError
from skillvc.packages.links import (
    RULE_LINK,
    broken_link_targets,
    broken_links,
    linked_files,
    reachable_files,
)
from skillvc.packages.model import SKILL_FILE, SkillPackage
from skillvc.packages.prompt import optimizer_files
from skillvc.packages.render import HEADER, INSTALLING_HARNESSES, render_chat
from skillvc.skill.formats import (
    RULE_MARKERS,
    RULE_SIZE,
    Problem,
    check_bytes,
    check_reference,
    check_warnings,
    protected_problems,
    reference_warnings,
    split_size,
)
from skillvc.skill.preflight import BYTES_PER_TOKEN
from skillvc.skill.skilldoc import SkillDocument

if TYPE_CHECKING:
    from skillvc.core.config import Config

RULE_ORPHAN = "package-orphan"
RULE_NESTED = "package-nested-link"
RULE_PACKAGE_SIZE_GUIDANCE = "package-size-guidance"
RULE_CHAT_CUT = "package-chat-cut"
# File names (before the first dot, any case) that are for people, not instructions.
CONVENTIONAL = frozenset(
    {"readme", "license", "licence", "copying", "notice", "changelog", "contributing"}
)


@dataclass(frozen=True)
class PackageLimits:
    """The settings of one skill that decide a package's problems and warnings."""

    max_bytes: int = 16_000
    harness: str = "chat"
    reference_bytes: int = 16_000
    max_tokens: int = 5_000
    optimizer_chars: int = 24_000

    @classmethod
    def of(cls, config: Config, max_bytes: int | None = None) -> PackageLimits:
        """One skill's limits; ``max_bytes`` overrides its size budget (``--max-bytes``)."""
        skill = config.skill
        return cls(
            max_bytes=skill.max_bytes if max_bytes is None else max_bytes,
            harness=config.target.harness,
            reference_bytes=skill.reference_bytes,
            max_tokens=skill.max_tokens,
            optimizer_chars=skill.optimizer_chars,
        )


@dataclass
class Findings:
    """The files checked (repo paths), the errors and the warnings of one package."""

    files: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def check_package(
    package: SkillPackage,
    limits: PackageLimits,
    *,
    before: Mapping[str, bytes | None] | None = None,
    protected: bool = False,
) -> Findings:
    """Everything validate reports of ``package`` (see the module docstring).

    ``before``: for a change (a staged commit), the files it changes, each with its earlier
    bytes (None: a new file); only those can grow past the size budget or, with
    ``protected``, touch a protected region. None (the working tree): nothing is compared."""
    out = Findings()
    for name in package.names:
        path, data = package.repo_path(name), package.files[name]
        out.files.append(path)
        changed = before is not None and name in before
        old = before.get(name) if before is not None else None
        grew = changed and (old is None or len(data) > len(old))
        if name == SKILL_FILE:
            found = check_bytes(path, data, max_bytes=limits.max_bytes)
            errors, advice = split_size(found, grew=grew)
            with contextlib.suppress(SkillDocumentError):  # not UTF-8: check_bytes reported it
                advice += check_warnings(path, SkillDocument.parse(data))
        else:
            found = reference_problems(package, name, max_bytes=limits.max_bytes)
            errors, advice = split_size(found, grew=grew)
        out.problems += errors
        out.warnings += advice
        if protected and old is not None:
            out.problems += protected_problems(path, old, data, frontmatter=name == SKILL_FILE)
    out.problems += broken_links(package)
    out.warnings += package_warnings(package, limits)
    return out


def is_conventional(name: str) -> bool:
    """True for a README, LICENSE, ... file: for people, never expected to be linked."""
    return name.rsplit("/", 1)[-1].split(".", 1)[0].lower() in CONVENTIONAL


def reference_problems(package: SkillPackage, name: str, *, max_bytes: int) -> list[Problem]:
    """``formats.check_reference`` of package file ``name`` (not SKILL.md), by repo path."""
    return check_reference(package.repo_path(name), package.files[name], max_bytes=max_bytes)


def package_problems(package: SkillPackage) -> list[Problem]:
    """What no package may have (see the module docstring): every reference file's encoding
    and marker problems, by path, then every broken relative link. The size budget is not
    here: it blocks growth only, which needs an earlier version to compare with."""
    problems: list[Problem] = []
    for name in package.names:
        if name == SKILL_FILE:
            continue
        found = reference_problems(package, name, max_bytes=len(package.files[name]))
        problems.extend(p for p in found if p.rule != RULE_SIZE)
    return problems + broken_links(package)


def package_warnings(package: SkillPackage, limits: PackageLimits) -> list[Problem]:
    """Orphans, then each file's size guidance, then what the optimizer and the chat target
    do not get whole (see the module docstring)."""
    texts = package.texts()
    reachable = reachable_files(package)
    warnings = [
        _orphan(package.repo_path(name))
        for name in package.names
        if name not in reachable and not is_conventional(name)
    ]
    warnings.extend(_nested(package, reachable, limits.harness))
    for name in package.names:
        if name != SKILL_FILE and name in texts and not is_conventional(name):
            doc = SkillDocument.parse(texts[name], frontmatter=False)
            warnings.extend(reference_warnings(package.repo_path(name), doc))
    if len(texts) == len(package.files) and SKILL_FILE in texts:  # else: errors already
        warnings.extend(_optimizer_view(package, texts, limits.optimizer_chars))
        if limits.harness not in INSTALLING_HARNESSES:
            warnings.extend(_chat_cut(package, texts, limits))
    return warnings


def _orphan(path: str) -> Problem:
    return Problem(
        path,
        RULE_ORPHAN,
        f"{path}: no chain of links from SKILL.md leads to this file, so no agent is pointed "
        "to it and the chat target never sees it (link it from SKILL.md or a file SKILL.md "
        "links to, or leave it out with [skill] exclude).",
    )


def _nested(package: SkillPackage, reachable: set[str], harness: str) -> list[Problem]:
    """A warning per file only other files (not SKILL.md) link to."""
    direct = {SKILL_FILE, *linked_files(package)}
    chat = harness not in INSTALLING_HARNESSES
    warnings = []
    for name in sorted(reachable - direct):
        if is_conventional(name):
            continue
        via = next(f for f in sorted(reachable) if name in linked_files(package, f))
        path = package.repo_path(name)
        sent = ", and the chat target is sent only the files SKILL.md links" if chat else ""
        warnings.append(
            Problem(
                path,
                RULE_NESTED,
                f"{path}: only {package.repo_path(via)} links to this file, not SKILL.md; the "
                f"Agent Skills spec advises keeping file references one level deep from "
                f"SKILL.md{sent} (link it from SKILL.md).",
            )
        )
    return warnings


def _optimizer_view(package: SkillPackage, texts: dict[str, str], budget: int) -> list[Problem]:
    """A warning per file the optimizer's prompt shows only in part."""
    entries = optimizer_files(package, budget)
    total = sum(len(texts[e["path"]]) for e in entries)
    return [
        Problem(
            package.repo_path(entry["path"]),
            RULE_PACKAGE_SIZE_GUIDANCE,
            f"{package.repo_path(entry['path'])}: the optimizer is shown only the start and "
            f"end of this file ({len(texts[entry['path']]):,} characters): the package's files "
            f"besides SKILL.md hold {total:,} characters and share [skill] optimizer_chars = "
            f"{budget:,}, so training cannot edit the part it does not see (trim or split "
            "them, or raise optimizer_chars).",
        )
        for entry in entries
        if entry["text"] != texts[entry["path"]]
    ]


def _chat_cut(package: SkillPackage, texts: dict[str, str], limits: PackageLimits) -> list[Problem]:
    """A warning per linked file the chat rendering leaves out, naming the limit it passes."""
    rendering = render_chat(package, limits.reference_bytes, limits.max_tokens)
    if not rendering.cut:
        return []
    skill = len(texts[SKILL_FILE].encode("utf-8"))
    cap = limits.max_tokens * BYTES_PER_TOKEN  # in bytes, as the message says
    # Walk the links as render_chat does to know the reference text sent before each cut file.
    used, warnings = 0, []
    for name in linked_files(package):
        size = len(f"\n\n{HEADER.format(path=name)}\n\n{texts[name]}".encode())
        if name in rendering.included:
            used += size
            continue
        path = package.repo_path(name)
        if used + size > limits.reference_bytes:
            why = (
                f"would take the reference text sent after SKILL.md to {used + size:,} bytes, "
                f"past [skill] reference_bytes = {limits.reference_bytes:,} (shorten it or the "
                "files linked before it, or raise reference_bytes)"
            )
        else:
            why = (
                f"would take the prompt to {skill + used + size:,} bytes, past the cap of "
                f"[skill] max_tokens = {limits.max_tokens:,} tokens ({cap:,} bytes; shorten "
                "SKILL.md or this file, or raise max_tokens)"
            )
        warnings.append(
            Problem(
                path,
                RULE_CHAT_CUT,
                f"{path}: the chat target is not sent this file, which SKILL.md links: it {why}.",
            )
        )
    return warnings


def check_package_files(
    package: SkillPackage, where: str = "", links: Collection[str] = ()
) -> None:
    """Refuse (SkillDocumentError, exit 5) a skill package that must not reach a model: a file
    that is not UTF-8 text (its bundle could not hold it), unbalanced protected-region markers
    in a reference file, or a relative link that does not resolve inside the package. SKILL.md
    itself is ``check_skill``'s. The conditions are ``package_problems``,
    the errors ``skillvc validate`` reports for a package, so the two never disagree.
    ``links``: the package's symbolic links (package-relative), which a package never follows,
    so a link to one is broken, and the sentence says why."""
    at = f" {where}" if where else ""
    for name in package.names:
        data = package.files[name]
        path = package.repo_path(name)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SkillDocumentError(
                f"The skill package file {path}{at} is not UTF-8 text (bad byte "
                f"0x{data[exc.start]:02x} at offset {exc.start}).",
                hint="Save it as UTF-8, or leave it out of the package with [skill] exclude.",
            ) from None
    problems = package_problems(package)  # every file decodes: markers and links remain
    markers = [p for p in problems if p.rule == RULE_MARKERS]
    if markers:
        raise SkillDocumentError(
            f"{markers[0].message[:-1]}{at}.",
            hint="Run 'skillvc validate' to list every problem, fix them and commit.",
        )
    broken = [p for p in problems if p.rule == RULE_LINK]
    if broken:
        more = len(broken) - 1
        others = f" (and {more} more broken link{'s' if more != 1 else ''})" if more else ""
        problem = broken[0]
        # Where the first broken link points: a symbolic link of the package gets its own why.
        targets = {p.message: t for t, p in broken_link_targets(package)} if links else {}
        target = targets.get(problem.message)
        if target is not None and target in links:
            raise SkillDocumentError(
                f"{problem.message.rsplit(' names ', 1)[0]} names a symbolic link{at}, and a "
                f"skill package never follows one{others}.",
                hint="Put the file itself in the package instead of the link, then commit.",
            )
        raise SkillDocumentError(
            f"{problem.message[:-1]}{at}{others}.",
            hint="Fix the link or add the file it names, then run skillvc validate.",
        )

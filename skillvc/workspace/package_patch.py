"""A human patch of a skill package: a diff touching several of its files is one edit set.

The rules of ``skillvc.workspace.patches`` hold file by file (hunks match at their stated line,
give or take ``MAX_HUNK_OFFSET``; the frontmatter and protected regions are refused; format rules
hold), and the package adds its own, the ones training keeps:

* Every path in the diff is a file of the package (inside its directory, matched by its
  ``include``/``exclude`` globs). A file may be changed, or created (``--- /dev/null``) when,
  after the patch, a chain of relative links from SKILL.md leads to it
  (``links.reachable_files``); it is never deleted or renamed, and a binary patch is refused.
* No relative link the patch writes may name a file the package does not have, and each file
  keeps its format rules (SKILL.md its skill format's, a reference file ``check_reference``'s:
  never frontmatter).
* Each hunk becomes an edit naming its file (``Edit.file``; SKILL.md's edits name none); a new
  file is one ``add`` edit with its text. The edits are recorded as ``edit.proposed`` events
  (source "human") and the result is one commit (``SkillRepo.commit_files``) touching only the
  files the patch changed, on top of HEAD's package.

Either all of it is written or nothing is: every check runs before the event log is opened.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from skillvc.core.errors import DirtySkillFile, PatchError
from skillvc.packages.edits import PackageApplyResult, apply_package_edits
from skillvc.packages.links import broken_links, reachable_files
from skillvc.packages.model import (
    SKILL_FILE,
    SkillPackage,
    is_package_file,
    load_package,
)
from skillvc.skill.edits import Edit, edits_from_sections, parse_diff
from skillvc.skill.formats import new_problems, new_reference_problems
from skillvc.workspace.patches import (
    DEV_NULL,
    AppliedPatch,
    PatchCheck,
    diff_paths,
    read_patch,
    record_and_commit,
    repo_relpath,
    shown,
)
from skillvc.workspace.workspace import Workspace


@dataclasses.dataclass
class _FileChange:
    """The sections of the diff that patch one package file (``name``, package-relative)."""

    name: str
    path: str  # from the repository root
    created: bool
    sections: list[Any] = dataclasses.field(default_factory=list)  # unidiff PatchedFile


def apply_package_patch(
    ws: Workspace, diff: bytes | str, message: str, *, check: PatchCheck | None = None
) -> AppliedPatch:
    """Apply a human-written diff of the configured skill package; see the module docstring."""
    patch = parse_diff(read_patch(diff))
    repo = ws.repo
    head = repo.head_sha()
    if head is None:  # nothing committed: there is no package to patch yet
        repo.ensure_clean(ws.skill_relpath)
    package = load_package(ws.config, repo, "HEAD")
    if package is None:
        raise ValueError("apply_package_patch needs the config of a skill package")
    changes = _changes(ws, patch, package)
    for change in changes:
        _ensure_untouched(ws, change)
    edits = [edit for change in changes for edit in _edits(package, change)]
    result = apply_package_edits(package, edits)
    _check(ws, package, result)
    files = {package.repo_path(n): result.package.files[n] for n in result.changed}
    return record_and_commit(ws, result.applied, files, message, head, package=True, check=check)


def _changes(ws: Workspace, patch: Sequence[Any], package: SkillPackage) -> list[_FileChange]:
    """The diff's sections grouped by the package file they patch, in the diff's order;
    PatchError for any path or kind of change the package rules refuse."""
    root, where = ws.root, _where(package)
    changes: dict[str, _FileChange] = {}
    for section in patch:
        source, target = diff_paths(section.source_file, section.target_file)
        source_rel, target_rel = repo_relpath(root, source), repo_relpath(root, target)
        for path in (source_rel, target_rel):
            if path != DEV_NULL and _name(package, path) is None:
                raise PatchError(
                    f"The diff patches {shown(path)}, which is outside the skill package {where}.",
                    hint=f"Give apply a diff of the package's files only, e.g. 'git diff -- "
                    f"{where}'.",
                )
        path = shown(target_rel if target_rel != DEV_NULL else source_rel)
        if section.is_binary_file:
            raise PatchError(f"The diff of {path} is a binary patch, not a text diff.")
        if target_rel == DEV_NULL:
            raise PatchError(
                f"The diff deletes {path}; apply changes and adds files of the skill package "
                f"{where}, never deletes one."
            )
        if source_rel not in (DEV_NULL, target_rel):
            raise PatchError(
                f"The diff renames {shown(source_rel)} to {path}; apply changes the files of the "
                f"skill package {where} in place."
            )
        name = _name(package, target_rel) or ""
        created = source_rel == DEV_NULL
        if created and name in package.files:
            raise PatchError(f"The diff creates {path}, which the skill package already has.")
        if not created and name not in package.files:
            raise PatchError(
                f"The diff patches {path}, which is not a file of the skill package {where}."
            )
        if created and not is_package_file(ws.config, name):
            raise PatchError(
                f"The diff creates {path}, which the skill package's include and exclude "
                "globs leave out.",
                hint="Name the file to match [skill] include in skillvc.toml (default: *.md "
                "and *.txt files).",
            )
        if not len(section):
            raise PatchError(f"The diff has no hunks for {path}; apply changes text only.")
        change = changes.setdefault(name, _FileChange(name, target_rel, created))
        if change.created != created or (created and change.sections):
            raise PatchError(f"The diff creates {path} and patches it again in one diff.")
        change.sections.append(section)
    return list(changes.values())


def _ensure_untouched(ws: Workspace, change: _FileChange) -> None:
    """The user's work is never overwritten: a changed file must be committed as it is, and a
    new one must not be in the working tree yet."""
    if not change.created:
        ws.repo.ensure_clean(change.path)
    elif (ws.root / change.path).exists() or (ws.root / change.path).is_symlink():
        raise DirtySkillFile(
            f"The diff creates {shown(change.path)}, but the working tree already has it.",
            hint="Move that file aside (or remove it), then apply the diff again.",
        )


def _edits(package: SkillPackage, change: _FileChange) -> list[Edit]:
    """The edits of one file's sections, each naming the file (SKILL.md's name none)."""
    if change.created:
        return [Edit("add", content=_new_text(change), file=change.name)]
    doc = package.document(change.name)
    edits = edits_from_sections(change.sections, doc, change.path)
    if change.name == SKILL_FILE:
        return edits
    return [dataclasses.replace(e, file=change.name) for e in edits]


def _new_text(change: _FileChange) -> str:
    """A new file's text: the added lines of its one section, as ``git apply`` writes them."""
    lines: list[str] = []
    for hunk in change.sections[0]:
        for line in hunk:
            if line.line_type == "+":
                lines.append(line.value)
            elif line.line_type == "\\" and lines:  # "\ No newline at end of file"
                lines[-1] = lines[-1].removesuffix("\n")
            elif line.line_type in (" ", "-"):
                raise PatchError(
                    f"The diff creates {shown(change.path)} but its hunk has old lines; a new "
                    "file's hunk only adds lines."
                )
    text = "".join(lines)
    if not text.strip():
        raise PatchError(
            f"The diff creates {shown(change.path)} with no text; apply adds only files with "
            "content."
        )
    return text


def _check(ws: Workspace, package: SkillPackage, result: PackageApplyResult) -> None:
    """Refuse a result that training would refuse: an edit that did not apply, a broken format
    rule, a broken link, or a new file no link from SKILL.md leads to."""
    if result.unmatched:
        miss = result.unmatched[0]
        path = package.repo_path(miss.edit.file)
        detail = miss.detail.removeprefix(f"{miss.edit.file}: ")  # the path is named already
        more = f" and {len(result.unmatched) - 1} more" if len(result.unmatched) > 1 else ""
        raise PatchError(
            f"The patch does not apply to {shown(path)}: {miss.reason} ({detail}){more}."
        )
    if not result.changed:
        raise PatchError(f"The patch changes nothing in the skill package {_where(package)}.")
    max_bytes = ws.config.skill.max_bytes
    for name in result.changed:
        path = package.repo_path(name)
        if name == SKILL_FILE:
            before, after = package.document(name), result.package.document(name)
            problems = new_problems(path, before, after, max_bytes=max_bytes)
        else:  # a reference file's own rules: markers and size, never frontmatter
            old, new = package.files.get(name, b""), result.package.files[name]
            problems = new_reference_problems(path, old, new, max_bytes=max_bytes)
        if problems:
            raise PatchError(
                f"The patched skill would break its format rules: {problems[0].message}"
            )
    old_links = {(p.path, p.message) for p in broken_links(package)}
    for problem in broken_links(result.package):
        if (problem.path, problem.message) not in old_links:
            raise PatchError(
                f"The patch breaks a link: {problem.message}",
                hint="Link only to files of the package; a new file comes with its own "
                "section (--- /dev/null) in the same diff.",
            )
    reachable = reachable_files(result.package)
    for name in result.created:
        if name not in reachable:
            raise PatchError(
                f"The diff creates {shown(package.repo_path(name))}, but no link from SKILL.md "
                "leads to it, so no agent would read it.",
                hint=f"Add a Markdown link to {name} in SKILL.md in the same diff.",
            )


def _name(package: SkillPackage, path: str) -> str | None:
    """``path`` (from the repository root) as a package-relative name, or None outside it."""
    if not package.root:
        return path
    prefix = f"{package.root}/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _where(package: SkillPackage) -> str:
    return f"{package.root}/" if package.root else "./"

"""Edits to a skill package: each edit names its file; applied file by file, never deleting one.

Invariants:
- Edits apply in order within each file (``skillvc.skill.edits.apply_edits`` on that file's
  document); edits to different files are independent, so the result is the same as applying
  the whole list in order. Unmatched edits keep their reason, and say which file.
- An ``add`` to a path that is not yet a package file creates it (content plus a final
  newline); the path must stay inside the package and out of ``.git``. A ``replace`` or
  ``delete`` on a missing file is unmatched (``missing``).
- Training never deletes a file: an edit that would leave a file empty is unmatched
  (``format``), and the file keeps its bytes.
- Reference files are parsed without frontmatter; every file keeps its BOM and newline style.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from skillvc.packages.links import resolve
from skillvc.packages.model import SKILL_FILE, SkillPackage
from skillvc.skill.edits import Edit, Unmatched, apply_edits
from skillvc.skill.skilldoc import SkillDocument


@dataclass(frozen=True)
class PackageApplyResult:
    package: SkillPackage
    applied: tuple[Edit, ...]
    unmatched: tuple[Unmatched, ...]
    changed: tuple[str, ...]  # files whose bytes changed (new ones included), sorted
    created: tuple[str, ...]  # files that did not exist before, sorted
    order: tuple[int, ...] = ()  # the position in the edit list of each applied edit

    @property
    def document(self) -> SkillDocument:
        """SKILL.md of the result."""
        return self.package.document(SKILL_FILE)

    def unmatched_by_file(self) -> dict[str, list[Unmatched]]:
        out: dict[str, list[Unmatched]] = {}
        for u in self.unmatched:
            out.setdefault(u.edit.file, []).append(u)
        return out


def apply_package_edits(package: SkillPackage, edits: Sequence[Edit]) -> PackageApplyResult:
    """Apply ``edits`` to the files they name; see the module invariants."""
    files = dict(package.files)
    applied: list[Edit] = []
    unmatched: list[Unmatched] = []
    created: list[str] = []
    for edit in edits:
        name = resolve(SKILL_FILE, edit.file)
        if name is None or name in (".", "") or ".git" in name.split("/"):
            detail = f"The edit names {edit.file!r}, which is outside the skill package."
            unmatched.append(Unmatched(edit, "missing", detail))
            continue
        if name not in files:
            if edit.op != "add":
                detail = f"{name} is not a file of the skill package."
                unmatched.append(Unmatched(edit, "missing", detail))
                continue
            content = edit.content if edit.content.endswith("\n") else edit.content + "\n"
            files[name] = content.encode("utf-8")
            created.append(name)
            applied.append(edit)
            continue
        doc = SkillDocument.parse(files[name], frontmatter=name == SKILL_FILE)
        result = apply_edits(doc, [edit], file=edit.file)
        if result.unmatched:
            unmatched.extend(
                Unmatched(u.edit, u.reason, f"{name}: {u.detail}") for u in result.unmatched
            )
            continue
        if not result.document.body.strip():
            detail = f"{name}: the edit would leave the file empty; training never deletes a file."
            unmatched.append(Unmatched(edit, "format", detail))
            continue
        files[name] = result.document.render()
        applied.append(edit)
    changed = sorted(n for n in files if package.files.get(n) != files[n])
    return PackageApplyResult(
        SkillPackage(package.root, files),
        tuple(applied),
        tuple(unmatched),
        tuple(changed),
        tuple(sorted(created)),
    )

"""Human patches as recorded edits: a unified diff becomes edits, events and one commit.

The same rules as training apply: every hunk must land exactly where it says (never somewhere
else), protected regions and the frontmatter are refused, and the result must keep the file's
format rules. Either every edit applies and one commit is made, or nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from skillvc.edits import Edit, apply_edits, edits_from_diff
from skillvc.errors import PatchError
from skillvc.formats import new_problems
from skillvc.skilldoc import SkillDocument
from skillvc.workspace import Workspace


@dataclass(frozen=True)
class AppliedPatch:
    sha: str
    edits: tuple[Edit, ...]
    event_ids: tuple[int, ...]


def apply_patch(ws: Workspace, diff_text: str, message: str) -> AppliedPatch:
    """Apply a human-written diff of the skill as edits; log them and commit the result."""
    repo, path = ws.repo, ws.skill_relpath
    repo.ensure_clean(path)
    head = repo.head_sha()
    doc = SkillDocument.parse(ws.require_skill().read_bytes())
    edits = edits_from_diff(diff_text, doc)
    result = apply_edits(doc, edits)
    if result.unmatched:
        miss = result.unmatched[0]
        raise PatchError(
            f"The patch does not apply to {path}: {miss.reason} ({miss.detail})"
            + (f" and {len(result.unmatched) - 1} more." if len(result.unmatched) > 1 else "")
        )
    if not result.changed:
        raise PatchError(f"The patch changes nothing in {path}.")
    problems = new_problems(path, doc, result.document, max_bytes=ws.config.skill.max_bytes)
    if problems:
        raise PatchError(f"The patched skill would break its format rules: {problems[0].message}")
    with ws.store(create=True) as store:
        events = [
            store.append(
                "edit.proposed", {"edit": e.to_dict(), "source": "human", "message": message}
            )
            for e in result.applied
        ]
        ids = tuple(e.id for e in events)
        trailers = {"Skillvc-Event": ", ".join(str(i) for i in ids)}
        sha = repo.commit_file(
            path, result.document.render(), message, trailers, expected_parent=head
        )
    return AppliedPatch(sha=sha, edits=result.applied, event_ids=ids)

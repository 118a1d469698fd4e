"""``skillvc apply``'s entry: a human patch goes to the single-file or the package rules.

Above both rule sets (``patches`` for a single-file skill, ``package_patch`` for a skill
package, which builds on ``patches``), so neither imports the other's caller.
"""

from __future__ import annotations

from skillvc.workspace.package_patch import apply_package_patch
from skillvc.workspace.patches import AppliedPatch, PatchCheck, apply_file_patch
from skillvc.workspace.workspace import Workspace


def apply_patch(
    ws: Workspace, diff: bytes | str, message: str, *, check: PatchCheck | None = None
) -> AppliedPatch:
    """Apply a human-written diff of the skill as edits; log them and commit the result.
    A skill package's diff may touch several of its files (``package_patch``)."""
    if ws.config.package_dir is not None:
        return apply_package_patch(ws, diff, message, check=check)
    return apply_file_patch(ws, diff, message, check=check)

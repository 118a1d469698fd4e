"""Human patches as recorded edits: a unified diff becomes edits, events and one commit.

The same rules as training apply, and the diff is taken at its word (a skill package's diff,
which may touch several of its files, follows ``skillvc.workspace.package_patch``):

* The paths in the diff (``--- a/X``, ``+++ b/X``; the ``a/`` and ``b/`` prefixes are stripped
  as git writes them) name the file patched. Each must stay inside the work tree (``paths``),
  and every file must be the configured skill: a diff of another file, a new, deleted or
  renamed file, or a binary patch is refused.
* Every hunk must match at the line its header states, or within ``MAX_HUNK_OFFSET`` lines
  (``edits.edits_from_diff``); it never lands somewhere else.
* Protected regions and the frontmatter are refused, and the result must keep the file's
  format rules.

Either every edit applies and one commit is made, or nothing is written: all checks run
before the event log is opened. A ``check`` (``skillvc apply``'s gate, ``skillvc.review.
apply_gate``) gets the parent and an unreferenced commit of the result before anything is
recorded, and may refuse it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unidiff import PatchSet

from skillvc.core.errors import PatchError
from skillvc.core.paths import inside_repo
from skillvc.skill.edits import Edit, apply_edits, edits_from_diff, parse_diff
from skillvc.skill.formats import new_problems
from skillvc.skill.skilldoc import SkillDocument
from skillvc.workspace.workspace import Workspace

DEV_NULL = "/dev/null"
# git's C-style quoting of unusual paths ("a/caf\303\251.md"): these escapes and \ooo octal.
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_OCTAL = re.compile(r"[0-3][0-7]{2}")


@dataclass(frozen=True)
class AppliedPatch:
    sha: str
    edits: tuple[Edit, ...]
    event_ids: tuple[int, ...]
    files: tuple[str, ...] = ()  # a skill package: the repository paths the commit changed


# Called with (parent, candidate): the commit the patch applies to and an unreferenced commit
# of the result. It raises to refuse the patch; nothing is recorded or committed then.
PatchCheck = Callable[[str, str], None]


def apply_file_patch(
    ws: Workspace, diff: bytes | str, message: str, *, check: PatchCheck | None = None
) -> AppliedPatch:
    """Apply a human-written diff of a single-file skill as edits; log them and commit the
    result (``skillvc.workspace.apply.apply_patch`` sends a skill package's diff elsewhere)."""
    patch = parse_diff(read_patch(diff))
    path = ws.skill_relpath
    check_files(ws.root, patch, path)
    repo = ws.repo
    repo.ensure_clean(path)
    head = repo.head_sha()
    doc = SkillDocument.parse(ws.read_skill())
    edits = edits_from_diff(patch, doc, path)
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
    files = {path: result.document.render()}
    return record_and_commit(ws, result.applied, files, message, head, check=check)


def record_and_commit(
    ws: Workspace,
    edits: Sequence[Edit],
    files: Mapping[str, bytes],
    message: str,
    head: str | None,
    *,
    package: bool = False,
    check: PatchCheck | None = None,
) -> AppliedPatch:
    """Log ``edits`` as human ``edit.proposed`` events, then commit ``files`` (repository
    paths) on ``head`` in one commit whose ``Skillvc-Event`` trailer names those events.
    ``package``: the result names the files (a skill package's patch may touch several).
    ``check``: called first with ``head`` and an unreferenced commit of the result; when it
    has ``evidence()`` (``skillvc apply``'s gate), that is logged as a ``gate`` event of kind
    "apply", named in the ``Skillvc-Gate`` and ``Skillvc-Significance`` trailers, and tied to
    the commit by ``commit.done``, as a training step's gate is."""
    gate = None
    if check is not None and head is not None:
        check(head, ws.repo.build_commit_files(files, message, head))
        evidence = getattr(check, "evidence", None)
        gate = evidence() if callable(evidence) else None
    with ws.store(create=True) as store:
        events = [
            store.append(
                "edit.proposed", {"edit": e.to_dict(), "source": "human", "message": message}
            )
            for e in edits
        ]
        ids = tuple(e.id for e in events)
        trailers = {"Skillvc-Event": ", ".join(str(i) for i in ids)}
        logged = None
        if gate is not None:
            edit_dicts = [e.to_dict() for e in edits]
            versions: dict[str, str] = {}
            if not package and head is not None:  # the two texts, for 'skillvc log -p'
                ((path, after),) = files.items()
                before = ws.repo.read_file(path, head).decode("utf-8")
                versions = {
                    "current": store.put_blob(before),
                    "candidate": store.put_blob(bytes(after).decode("utf-8")),
                }
            payload = {**gate, **versions, "edits": edit_dicts, "message": message}
            logged = store.append("gate", payload)
            trailers["Skillvc-Gate"] = f"{logged.id}; {gate_trailer(gate)}"
            p = "none" if gate["p_value"] is None else f"{gate['p_value']:.4g}"
            trailers["Skillvc-Significance"] = (
                f"p={p}; {gate['verdict']}; alpha={gate['alpha']:.3g}"
            )
        sha = ws.repo.commit_files(files, message, trailers, expected_parent=head)
        if logged is not None:
            done = {"gate_id": logged.id, "sha": sha, "ref": None}
            store.append("commit.done", done, key=f"gate:{logged.id}")
    shown_files = tuple(sorted(files)) if package else ()
    return AppliedPatch(sha=sha, edits=tuple(edits), event_ids=ids, files=shown_files)


def gate_trailer(gate: Mapping[str, Any]) -> str:
    """``val hard 0.833 -> 0.900, n=30, 3 better, 1 worse`` (the ``Skillvc-Gate`` trailer)."""
    before, after = gate["before"]["mean"], gate["after"]["mean"]
    flipped = gate.get("flipped") or {}
    return (
        f"val {gate['metric']} {before:.3f} -> {after:.3f}, n={gate['before']['n']}, "
        f"{len(flipped.get('gained', []))} better, {len(flipped.get('lost', []))} worse"
    )


def read_patch(data: bytes | str) -> str:
    """The patch as text; PatchError for empty, binary or non-UTF-8 input."""
    if isinstance(data, bytes):
        if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # what PowerShell's '>' writes
            raise PatchError(
                "The patch is UTF-16 text; skillvc reads diffs as UTF-8.",
                hint="Write the diff as UTF-8, e.g. git diff --output=fix.diff -- SKILL.md.",
            )
        if b"\0" in data:
            raise PatchError("The patch is binary data (it has NUL bytes), not a unified diff.")
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise PatchError(
                f"The patch is not UTF-8 text (bad byte at offset {exc.start})."
            ) from None
    if "\0" in data:
        raise PatchError("The patch is binary data (it has NUL bytes), not a unified diff.")
    if not data.strip():
        raise PatchError("The patch is empty.")
    return data


def check_files(root: Path, patch: PatchSet, skill: str) -> None:
    """Refuse a diff that names a path outside the work tree or a file other than ``skill``."""
    for patched in patch:
        source, target = diff_paths(patched.source_file, patched.target_file)
        source_rel = shown(repo_relpath(root, source))
        target_rel = shown(repo_relpath(root, target))
        if source_rel == DEV_NULL:
            raise PatchError(
                f"The diff creates {target_rel}; apply only changes the existing skill {skill}."
            )
        if target_rel == DEV_NULL:
            raise PatchError(
                f"The diff deletes {source_rel}; apply only changes the existing skill {skill}."
            )
        if source_rel != target_rel:
            raise PatchError(
                f"The diff renames {source_rel} to {target_rel}; apply only changes the skill "
                f"{skill} in place."
            )
        if target_rel != skill:
            raise PatchError(
                f"The diff patches {target_rel}, which is not the configured skill {skill}.",
                hint=f"Give apply a diff of the skill only, e.g. 'git diff -- {skill}'.",
            )
        if patched.is_binary_file:
            raise PatchError(f"The diff of {skill} is a binary patch, not a text diff.")


def repo_relpath(root: Path, name: str) -> str:
    """``name`` normalised, relative to the root; PathOutsideRepo when it leaves the tree."""
    if name == DEV_NULL:
        return name
    return inside_repo(root, name, "The diff").relative_to(root).as_posix()


def shown(path: str) -> str:
    """A path fit for an error line: quoted when it holds control characters (a terminal
    escape in a diff's file name must not reach the user's terminal)."""
    return path if path.isprintable() else repr(path)


def diff_paths(source: str, target: str) -> tuple[str, str]:
    """The file names of a diff's ``---`` and ``+++`` lines, unquoted, without git's a/ b/."""
    source, target = _unquote(source), _unquote(target)
    # git writes "a/" and "b/" (or /dev/null); a diff made without them names the file as is.
    if (source == DEV_NULL or source.startswith("a/")) and (
        target == DEV_NULL or target.startswith("b/")
    ):
        source = source if source == DEV_NULL else source[2:]
        target = target if target == DEV_NULL else target[2:]
    return source, target


def _unquote(name: str) -> str:
    """A path as git quotes it ("a/caf\\303\\251.md") back to the path itself."""
    if len(name) < 2 or not (name.startswith('"') and name.endswith('"')):
        return name
    inner, out, i = name[1:-1], bytearray(), 0
    while i < len(inner):
        if inner[i] == "\\" and i + 1 < len(inner):
            if inner[i + 1] in _ESCAPES:
                out.append(_ESCAPES[inner[i + 1]])
                i += 2
                continue
            if _OCTAL.fullmatch(inner[i + 1 : i + 4]):
                out.append(int(inner[i + 1 : i + 4], 8))
                i += 4
                continue
        out += inner[i].encode("utf-8")
        i += 1
    return out.decode("utf-8", errors="replace")

"""Git hooks: what they check (``validate``) and how they are installed (``install_hooks``).

The hook scripts ship inside the wheel (``hooks/pre-commit``, ``hooks/pre-push``, read with
``skillvc.resources``). Installing one writes the shipped text with the interpreter that runs
skillvc now filled in, so a commit finds the same skillvc even when no virtualenv is active.

Invariants:

* An installed hook carries the marker line ``# skillvc-hook: <name>``; only files with it are
  ever rewritten or removed, so reinstalling is idempotent and uninstalling never deletes
  someone else's hook.
* A hook that was there before is never overwritten: it is moved to ``<name>.legacy``, which
  skillvc's hook runs first (a failing legacy hook fails the commit or push). Uninstalling
  puts it back. If ``<name>.legacy`` is taken, install refuses unless ``force``, and then the
  old ``.legacy`` is kept as ``.legacy.N``; nothing is deleted.
* Hooks go only where git runs them (``git rev-parse --git-path hooks``). When
  ``core.hooksPath`` points elsewhere, install refuses and says what to do instead.
* ``validate(staged=True)`` reads what is about to be committed (the index, via
  ``git cat-file blob :path``; git sets ``GIT_INDEX_FILE`` for ``commit -a``), never the
  working tree, and compares protected regions with HEAD. skillvc's own commits (accepted
  edits, slow updates carrying ``Skillvc-*`` trailers) are made with plumbing
  (``commit-tree`` + ``update-ref``) that runs no hooks, so they are never blocked here.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from skillvc.config import load_config
from skillvc.errors import BadData, NotFound, SkillFileMissing, StateConflict
from skillvc.formats import (
    DEFAULT_MAX_BYTES,
    RULE_PROTECTED,
    Problem,
    check_bytes,
    is_skill_file,
    protected_changes,
)
from skillvc.repo import SkillRepo
from skillvc.resources import read_text
from skillvc.skilldoc import SkillDocument

HOOK_NAMES = ("pre-commit", "pre-push")
MARKER = "# skillvc-hook:"
PYTHON_PLACEHOLDER = "'@SKILLVC_PYTHON@'"
ALLOW_PROTECTED_ENV = "SKILLVC_ALLOW_PROTECTED"
_SKIP_DIRS = {".git", ".skillvc", "node_modules", ".venv", "venv", "__pycache__"}


class ValidationFailed(BadData):
    """Skill documents break format rules, or staged changes touch protected regions."""

    hint = "Fix the files listed above (when committing: stage them and commit again)."


class HooksPathConflict(StateConflict):
    """git runs hooks from core.hooksPath, not from the directory skillvc installs into."""


# -- validate: what the pre-commit hook checks --------------------------------------------------


@dataclass
class ValidationReport:
    """The files checked (repo-relative when inside a repository) and what is wrong."""

    files: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "files": self.files,
            "problems": [p.to_dict() for p in self.problems],
        }

    def raise_for_problems(self) -> None:
        """Raise ValidationFailed (exit 5) when there is any problem."""
        if self.ok:
            return
        n, files = len(self.problems), len({p.path for p in self.problems})
        message = (
            f"{n} problem{'s' if n != 1 else ''} in {files} skill file{'s' if files != 1 else ''}."
        )
        if any(p.rule == RULE_PROTECTED for p in self.problems):
            raise ValidationFailed(
                message,
                hint="Undo the hand edits inside the protected regions and stage again, or, "
                f"for a deliberate edit, commit with {ALLOW_PROTECTED_ENV}=1 (or run validate "
                "with --allow-protected).",
            )
        raise ValidationFailed(message)


def protected_allowed_by_env() -> bool:
    """True when ``SKILLVC_ALLOW_PROTECTED`` is set to anything but "" or "0"."""
    return os.environ.get(ALLOW_PROTECTED_ENV, "") not in ("", "0")


def validate(
    paths: Sequence[str] = (),
    *,
    staged: bool = False,
    allow_protected: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    cwd: str | os.PathLike[str] = ".",
) -> ValidationReport:
    """Check skill documents: ``paths`` (files or directories), the staged ones, or the
    configured skill when neither is given."""
    if staged:
        if paths:
            raise ValueError("validate takes paths or staged, not both")
        with SkillRepo(cwd) as repo:
            return _validate_staged(repo, allow_protected=allow_protected, max_bytes=max_bytes)
    if not paths:
        with SkillRepo(cwd) as repo:
            paths = []
            for config in load_config(repo.root).all_skills():  # every skill of a many config
                skill = config.skill_path  # never outside the work tree
                if not skill.is_file():
                    rel = skill.relative_to(repo.root).as_posix()
                    raise SkillFileMissing(f"The skill file {rel} does not exist.")
                paths.append(str(skill))
    return _validate_files(paths, cwd=Path(cwd), max_bytes=max_bytes)


def _validate_files(paths: Sequence[str], *, cwd: Path, max_bytes: int) -> ValidationReport:
    repo = SkillRepo.find(cwd)
    try:
        report = ValidationReport()
        for path in _expand(paths, cwd):
            shown = _display(path, cwd, repo.root if repo else None)
            report.files.append(shown)
            report.problems.extend(check_bytes(shown, path.read_bytes(), max_bytes=max_bytes))
        return report
    finally:
        if repo is not None:
            repo.close()


def _expand(paths: Sequence[str], cwd: Path) -> list[Path]:
    """Files as given, and the skill files (SKILL.md, *.mdc, *.instructions.md) under dirs."""
    found: list[Path] = []
    for raw in paths:
        path = cwd / raw
        if path.is_dir():
            found.extend(
                sorted(
                    p
                    for p in path.rglob("*")
                    if p.is_file()
                    and is_skill_file(p.name)
                    and not _SKIP_DIRS.intersection(p.relative_to(path).parts)
                )
            )
        elif path.is_file():
            found.append(path)
        else:
            raise NotFound(
                f"{raw} does not exist.", hint="Give the path of a skill file or a directory."
            )
    return found


def _display(path: Path, cwd: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return path.as_posix()


def _validate_staged(repo: SkillRepo, *, allow_protected: bool, max_bytes: int) -> ValidationReport:
    report = ValidationReport()
    configured = _configured_skills(repo)
    for path in staged_files(repo):
        if not (is_skill_file(path) or path in configured):
            continue
        data = _staged_blob(repo, path)
        report.files.append(path)
        report.problems.extend(check_bytes(path, data, max_bytes=max_bytes))
        if not allow_protected:
            report.problems.extend(_protected_problems(repo, path, data))
    return report


def staged_files(repo: SkillRepo) -> list[str]:
    """Repo-relative paths added or modified in the index (renames count as added)."""
    g = repo.git_repo.git
    if repo.head_sha() is None:  # the first commit: everything in the index is new
        out = g.ls_files("-z")
    else:
        out = g.diff("--cached", "--name-only", "-z", "--no-renames", "--diff-filter=AMT")
    return [p for p in out.split("\0") if p]


def _staged_blob(repo: SkillRepo, path: str) -> bytes:
    blob: bytes = repo.git_repo.git.cat_file(
        "blob", f":{path}", stdout_as_string=False, strip_newline_in_stdout=False
    )
    return blob


def _configured_skills(repo: SkillRepo) -> set[str]:
    """The skill paths of skillvc.toml (every skill's), or none in a repository without one."""
    try:
        return {Path(c.skill.path).as_posix() for c in load_config(repo.root).all_skills()}
    except NotFound:
        return set()


def _protected_problems(repo: SkillRepo, path: str, staged: bytes) -> list[Problem]:
    try:
        before = SkillDocument.parse(repo.read_file(path, "HEAD"))
        after = SkillDocument.parse(staged)
    except NotFound:
        return []  # a new file: nothing was protected yet
    except BadData:
        return []  # not UTF-8; check_bytes reports it
    return [
        Problem(
            path,
            RULE_PROTECTED,
            f"{path}: protected region {name!r} differs from HEAD; protected regions are "
            "written by skillvc's slow update, not by hand.",
        )
        for name in protected_changes(before, after)
    ]


# -- install / uninstall ------------------------------------------------------------------------


@dataclass(frozen=True)
class HookChange:
    """What install or uninstall did to one hook, as a sentence for people."""

    hook: str
    action: str  # installed | updated | unchanged | removed | restored | absent | foreign
    message: str


def render_hook(name: str, python: str = sys.executable) -> str:
    """The shipped hook ``name`` with ``python`` as the interpreter that runs skillvc."""
    if name not in HOOK_NAMES:
        raise ValueError(f"unknown hook {name!r}")
    template = read_text("hooks", name)
    if template.count(PYTHON_PLACEHOLDER) != 1:
        raise ValueError(f"the shipped {name} hook has no single {PYTHON_PLACEHOLDER} line")
    return template.replace(PYTHON_PLACEHOLDER, shlex.quote(python))


def is_skillvc_hook(path: Path) -> bool:
    """True when the file at ``path`` carries skillvc's marker in its first lines."""
    try:
        with path.open("rb") as f:
            head = f.read(1024)
    except OSError:
        return False
    return MARKER.encode() in head


def hooks_dir(repo: SkillRepo) -> Path:
    """The directory git runs hooks from; refuses when core.hooksPath points elsewhere."""
    g = repo.git_repo.git
    default = _abs(repo, g.rev_parse("--git-common-dir")) / "hooks"
    used = _abs(repo, g.rev_parse("--git-path", "hooks"))
    if used.resolve() != default.resolve():
        configured = g.config("--get", "core.hooksPath", with_exceptions=False) or str(used)
        line = f"{shlex.quote(sys.executable)} -m skillvc validate --staged || exit 1"
        raise HooksPathConflict(
            f"core.hooksPath is set to {configured}, so git does not run hooks from "
            f"{_rel(repo, default)}.",
            hint="Unset it with 'git config --unset core.hooksPath' and install again, or add "
            f"this line to {configured}/pre-commit yourself: {line}",
        )
    return default


def install_hooks(
    path: str | os.PathLike[str] = ".",
    *,
    pre_push: bool = False,
    force: bool = False,
    python: str = sys.executable,
) -> list[HookChange]:
    """Install the pre-commit hook (and the pre-push hook), keeping any hook already there."""
    names = HOOK_NAMES if pre_push else HOOK_NAMES[:1]
    with SkillRepo(path) as repo:
        directory = hooks_dir(repo)
        directory.mkdir(parents=True, exist_ok=True)
        return [_install_one(repo, directory, n, render_hook(n, python), force) for n in names]


def _install_one(repo: SkillRepo, directory: Path, name: str, text: str, force: bool) -> HookChange:
    hook, legacy = directory / name, directory / f"{name}.legacy"
    shown = _rel(repo, hook)
    if is_skillvc_hook(hook):
        if hook.read_text(encoding="utf-8", errors="replace") == text and not force:
            return HookChange(name, "unchanged", f"The {name} hook at {shown} is up to date.")
        _write_hook(hook, text)
        return HookChange(name, "updated", f"Updated the {name} hook at {shown}.")
    notes = []
    if os.path.lexists(hook):
        if os.path.lexists(legacy):
            if not force:
                raise StateConflict(
                    f"{_rel(repo, legacy)} already exists, so the {name} hook at {shown} "
                    "cannot be kept aside.",
                    hint=f"Merge the two hooks by hand, or pass --force to keep the old "
                    f"{legacy.name} as {legacy.name}.N (which then no longer runs).",
                )
            backup = _free_name(legacy)
            os.replace(legacy, backup)
            notes.append(f"The older {legacy.name} is kept as {backup.name} and no longer runs.")
        os.replace(hook, legacy)
        notes.insert(0, f"Your previous hook is kept as {_rel(repo, legacy)} and runs first.")
    _write_hook(hook, text)
    return HookChange(
        name, "installed", " ".join([f"Installed the {name} hook at {shown}.", *notes])
    )


def uninstall_hooks(path: str | os.PathLike[str] = ".") -> list[HookChange]:
    """Remove skillvc's hooks and put back the hooks they had kept aside."""
    with SkillRepo(path) as repo:
        g = repo.git_repo.git
        directory = _abs(repo, g.rev_parse("--git-common-dir")) / "hooks"
        return [_uninstall_one(repo, directory, name) for name in HOOK_NAMES]


def _uninstall_one(repo: SkillRepo, directory: Path, name: str) -> HookChange:
    hook, legacy = directory / name, directory / f"{name}.legacy"
    shown = _rel(repo, hook)
    if os.path.lexists(hook) and not is_skillvc_hook(hook):
        return HookChange(name, "foreign", f"The {name} hook at {shown} is not skillvc's; left it.")
    removed = os.path.lexists(hook)
    if removed:
        hook.unlink()
    if os.path.lexists(legacy):
        os.replace(legacy, hook)
        return HookChange(
            name, "restored", f"Removed the {name} hook; restored your previous hook at {shown}."
        )
    if removed:
        return HookChange(name, "removed", f"Removed the {name} hook at {shown}.")
    return HookChange(name, "absent", f"No skillvc {name} hook was installed.")


def _write_hook(hook: Path, text: str) -> None:
    tmp = hook.with_name(f".{hook.name}.skillvc-tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.chmod(tmp, 0o755)
    os.replace(tmp, hook)


def _free_name(path: Path) -> Path:
    n = 1
    while os.path.lexists(path.with_name(f"{path.name}.{n}")):
        n += 1
    return path.with_name(f"{path.name}.{n}")


def _abs(repo: SkillRepo, out: str) -> Path:
    # GitPython runs git in the working tree root, so relative answers are relative to it.
    p = Path(out.strip())
    return p if p.is_absolute() else repo.root / p


def _rel(repo: SkillRepo, path: Path) -> str:
    try:
        return path.resolve().relative_to(repo.root.resolve()).as_posix()
    except ValueError:
        return str(path)

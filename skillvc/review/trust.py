"""``skillvc check``'s trust boundary: the base revision decides the verdict, the head only
brings the skill text.

A pull request's content is untrusted; the base revision and the user's own config are trusted
(DESIGN.md section 8). Invariants:

* Everything that decides the verdict comes from ``skillvc.toml`` and the task files *as
  committed at BASE*: the skill path, the task set, the scorer and its options, the target and
  judge models, base URLs, key variable names, harness commands, prices and
  ``max_failure_rate``. Both sides are evaluated with that one configuration and task set.
* Code runs from the base only: the base's tree is exported to a temporary directory and the
  evaluation runs with that directory as its working directory, so a ``python`` scorer's module
  and a ``command`` scorer's script are the base's files. The head's ``skillvc.toml`` is parsed
  to report its changes and is never acted on: no scorer, backend or request comes from it.
* From the head, only the skill text and (to list changes) ``skillvc.toml`` and the task files
  are read: through git for ``--head REV``, and in the working tree only for paths that stay
  inside the repository and outside ``.git`` (symbolic links resolved).
* A skill package (the base's config and tree say whether the skill is one): each side is its
  own directory's files, read with the base's ``include``/``exclude`` and given to the target
  as the base's harness would (chat rendering under the base's ``reference_bytes`` and token
  cap, or the whole directory installed, the head's own scripts and assets included, in the
  agent's scratch directory only). Symbolic links in the head's package are never followed
  (``skillvc.packages.carried``); a head whose package has a broken relative link, a file that
  is not UTF-8 or a SKILL.md over the cap is refused before any model call (exit 5).
* Changes of ``skillvc.toml`` (its effective values, as dotted keys), of a task file's bytes and
  of the skill's path are reported, with the items added, removed and edited per split; any of
  them fails the check (``ConfigChanged``, exit 7) unless the caller allows them, and even then
  the verdict is the base's.
* The event log that answers repeated model calls is the checker's own: a ``.skillvc/``
  committed to the repository (at HEAD or in the change) is refused (exit 4).
* A head that fails (errors) on an item the base scored gets no verdict (exit 6): a failed
  item is left out of the pairing, so a skill could otherwise hide the items it breaks by
  making the target time out or its agent crash on them.
* A skill absent at BASE (or no ``skillvc.toml`` at BASE) has nothing to regress from and
  passes; a skill present at BASE and absent at HEAD fails (``SkillDeleted``), and one the head
  moved is compared at its new path, with the move reported.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import shlex
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.core.config import CONFIG_FILE, Config, TasksConfig, parse_config
from skillvc.core.errors import (
    BackendError,
    PathOutsideRepo,
    SkillDeleted,
    SkillDocumentError,
    SkillvcError,
    StateConflict,
)
from skillvc.core.paths import _forbidden, inside_repo, is_state_dir
from skillvc.core.progress import Progress
from skillvc.core.records import fields_of
from skillvc.inputs import reader as inputs
from skillvc.packages.carried import load_carried
from skillvc.packages.model import SKILL_FILE, SkillPackage, load_package, package_globs
from skillvc.packages.render import installs
from skillvc.packages.version import version_of
from skillvc.repo.skillrepo import SkillRepo
from skillvc.review.evaluation import (
    WORKTREE,
    Comparison,
    EvalResult,
    SkillVersion,
    check_split,
    compare_versions,
)
from skillvc.review.output import fmt_score, shown
from skillvc.skill.preflight import check_skill
from skillvc.tasks.taskset import SPLITS, TaskItem, TaskSet, load_taskset
from skillvc.workspace.workspace import Workspace

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

EPS = 1e-9
MAX_NAMED = 5
_MISSING = object()


@dataclass(frozen=True)
class SplitChanges:
    """Item ids of one split that the head added, removed or edited, in file order."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    edited: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.edited)

    def to_dict(self) -> dict[str, list[str]]:
        return {
            "added": list(self.added),
            "removed": list(self.removed),
            "edited": list(self.edited),
        }


@dataclass(frozen=True)
class Changes:
    """What the head changed of the things that decide a check's verdict."""

    config: tuple[str, ...] = ()  # dotted keys of skillvc.toml whose value differs
    config_error: str | None = None  # why the head's skillvc.toml could not be compared
    task_files: tuple[str, ...] = ()  # task files whose bytes differ
    items: Mapping[str, SplitChanges] = field(default_factory=dict)
    task_error: str | None = None  # why the head's task set could not be read
    skill_base: str = ""
    skill_head: str = ""  # where the head's skill text was read

    @property
    def changed(self) -> bool:
        return bool(
            self.config
            or self.config_error
            or self.task_files
            or self.task_error
            or self.skill_base != self.skill_head
            or any(self.items.values())
        )

    def summary(self) -> str:
        """The changes as one clause, e.g. "skillvc.toml (tasks.scorer) and task file x.jsonl"."""
        parts = []
        if self.config_error:
            parts.append(CONFIG_FILE)
        elif self.config:
            parts.append(f"{CONFIG_FILE} ({named(self.config)})")
        if self.task_files:
            noun = "task file" if len(self.task_files) == 1 else "task files"
            parts.append(f"{noun} {named(self.task_files)}")
        elif self.task_error or any(self.items.values()):
            parts.append("the task set")
        if self.skill_base != self.skill_head:
            parts.append(f"the skill's path ({self.skill_base} -> {shown(self.skill_head)})")
        if len(parts) <= 1:
            return "".join(parts)
        return ", ".join(parts[:-1]) + " and " + parts[-1]

    def to_dict(self) -> dict[str, Any]:
        return {
            "config_changes": list(self.config),
            "config_error": self.config_error,
            "task_files_changed": list(self.task_files),
            "task_changes": {
                name: self.items.get(name, SplitChanges()).to_dict() for name in SPLITS
            },
            "task_error": self.task_error,
            "skill": {"base": self.skill_base, "head": self.skill_head},
        }


@dataclass(frozen=True)
class CheckResult:
    """The outcome of ``skillvc check``: the comparison under the base's rules, and what the
    head changed of those rules."""

    base: str
    head: str | None
    split: str
    allow_drop: float
    changes_allowed: bool
    message: str  # the score verdict, one sentence
    comparison: Comparison | None = None  # None: nothing to compare (no skill at BASE)
    changes: Changes = field(default_factory=Changes)
    regression: bool = False
    alpha: float = 0.2  # the base's gate alpha, at which the change's significance is judged

    def significance(self) -> dict[str, Any] | None:
        """How sure the change is (the exact sign test on the items it flipped, one-sided in
        the direction it moved), and whether val could detect it at all."""
        from skillvc.training import significance as sig

        c = self.comparison
        if c is None:
            return None
        up, down = len(c.up), len(c.down)
        alpha = sig.shown_alpha(self.alpha)
        if c.a.skill == c.b.skill or not (up or down):
            # Nothing to test: "better with p = 1" would claim a direction no item took.
            same = c.a.skill == c.b.skill
            return {
                "direction": "unchanged",
                "p_value": None,
                "test": "sign",
                "alpha": alpha,
                "verdict": sig.UNTESTED,
                "smallest_detectable_gain": sig.smallest_detectable_gain(c.n, self.alpha),
                "warning": None,
                "reason": (
                    f"the skill at {self.head_label} is the same as at {self.base}"
                    if same
                    else f"no item's outcome differs between {self.base} and {self.head_label}"
                ),
            }
        better = up >= down
        p = sig.sign_test_p(up, down) if better else sig.sign_test_p(down, up)
        detectable = sig.smallest_detectable_gain(c.n, self.alpha)
        seen = abs(c.diff) if c.diff is not None else 0.0
        warning = None
        if detectable is None:
            warning = (
                f"{c.n} items are too few for any change to be significant at alpha "
                f"{self.alpha:.2g}: this check cannot tell a real change from noise."
            )
        elif seen < detectable - 1e-9 or not sig.significant(p, self.alpha):
            warning = (
                f"with {c.n} items the smallest gain the sign test can call significant at "
                f"alpha {self.alpha:.2g} is {detectable:.3f} ({sig.wins_needed(self.alpha)} "
                f"items flipping one way and none back); this change is within noise."
            )
        return {
            "direction": "better" if better else "worse",
            "p_value": p,
            "test": "sign",
            "alpha": alpha,
            "verdict": sig.verdict(p, self.alpha),
            "smallest_detectable_gain": detectable,
            "warning": warning,
            "reason": None,
        }

    @property
    def refused_changes(self) -> bool:
        """True when the head changed what decides the verdict and the caller did not allow it."""
        return self.changes.changed and not self.changes_allowed

    @property
    def verdict(self) -> str:
        if self.regression:
            return "regression"
        return "config_changed" if self.refused_changes else "pass"

    @property
    def head_label(self) -> str:
        return self.head if self.head is not None else "the working tree"

    def to_dict(self) -> dict[str, Any]:
        return {
            **fields_of(self, "verdict allow_drop base head split message"),
            "comparison": None if self.comparison is None else self.comparison.to_dict(),
            "changes_allowed": self.changes_allowed,
            "significance": self.significance(),
            **self.changes.to_dict(),
        }


# -- the check --------------------------------------------------------------------------------


def check_skills(
    root: Path, base: str, head: str | None, split: str, *, skill: str | None = None, **options: Any
) -> list[tuple[str | None, CheckResult]]:
    """``check_change`` for each skill the BASE's config lists (``skill``: that one only), as
    (skill name, result); one (None, result) for a single-skill config. BASE's config decides
    which skills there are: a skill the head adds has nothing to regress from."""
    from skillvc.skill.skills import select_skill

    with SkillRepo(root) as repo:
        repo.resolve(base)
        raw = _read_at(repo, CONFIG_FILE, base)
    if raw is None:
        return [(None, check_change(root, base, head, split, **options))]
    config = parse_config(_decode(raw, f"{CONFIG_FILE} at {base}"), root)
    if not config.many:
        if skill is not None:
            select_skill(config, skill)  # an unknown name is an error, not a silent pass
        return [(None, check_change(root, base, head, split, **options))]
    names = [select_skill(config, skill).skill_name] if skill else config.skill_names
    return [(n, check_change(root, base, head, split, skill=n, **options)) for n in names]


def base_warning(root: Path, base: str, head: str | None) -> str | None:
    """How BASE relates to the head: StateConflict when they share no history (an unrelated
    branch: the check would compare two histories, not a change, and could pass silently);
    a warning when BASE is not an ancestor but related (the target branch moved on since the
    change branched: the check compares with BASE as it is now); None when BASE is an
    ancestor, as a pull request's base commit is."""
    with SkillRepo(root) as repo:
        base_sha = repo.resolve(base)
        head_sha = repo.resolve(head) if head is not None else repo.head_sha()
        if head_sha is None or repo.is_ancestor(base_sha, head_sha):
            return None
        label = head or "HEAD"
        if not repo.has_common_history(base_sha, head_sha):
            raise StateConflict(
                f"BASE {base} shares no history with {label}: the check compares a change "
                "with the commit it is based on.",
                hint="Pass the branch or commit the change was made from as --base.",
            )
        return (
            f"BASE {base} is not an ancestor of {label} (it moved on since the change "
            f"branched): the change is compared with {base} as it is now; for the change "
            f"alone pass --base $(git merge-base {base} {label})."
        )


def check_change(
    root: Path,
    base: str,
    head: str | None,
    split: str,
    *,
    allow_drop: float = 0.0,
    allow_config_change: bool = False,
    workers: int | None = None,
    progress: Progress | None = None,
    skill: str | None = None,
) -> CheckResult:
    """Evaluate the head's skill against the base's under the base's config and task set
    (``skill``: that ``[skills.<name>]`` table of the base's config, many skills)."""
    check_split(split)
    with SkillRepo(root) as repo:
        base_sha = repo.resolve(base)
        if head is not None:
            repo.resolve(head)
        result = CheckResult(base, head, split, allow_drop, allow_config_change, message="")
        base_toml = _read_at(repo, CONFIG_FILE, base)
        if base_toml is None:
            message = f"OK: {CONFIG_FILE} does not exist at {base}; nothing to compare."
            return _replace(result, message=message)
        base_text = _decode(base_toml, f"{CONFIG_FILE} at {base}")
        config = parse_config(base_text, root)
        if skill is not None:
            config = config.for_skill(skill)
        if config.routing is not None and not task_files(config.tasks):
            # A library trained for routing only: its bodies have no task set to score them
            # (the routing check, skillvc.review.routingcheck, measures the descriptions).
            name = f"skill {config.skill_name}" if config.skill_name else "the skill"
            message = f"OK: {name} has no task set at {base}; its body is not scored."
            return _replace(result, message=message)
        skill_rel = _skill_file_at(
            repo, posixpath.normpath(Path(config.skill.path).as_posix()), base
        )
        if not repo.has_file(skill_rel, base):
            # A pull request that adds the skill has nothing to regress from.
            return _replace(
                result, message=f"OK: {skill_rel} does not exist at {base}; nothing to compare."
            )
        refuse_tracked_log(repo, head)
        head_files = HeadFiles(repo, root, head)
        head_config, config_keys, config_error = config_changes(config, base_text, head_files)
        head_sha = WORKTREE if head is None else repo.resolve(head)
        with tempfile.TemporaryDirectory(prefix="skillvc-base-") as tmp:
            tree = Path(tmp)
            repo.export_tree(base_sha, tree)
            # An agent preset's setup files (and relative executable) come from the base's
            # tree too: a PR's settings.json could otherwise add hooks that run its code.
            base_config = dataclasses.replace(config, root=tree)
            ws = Workspace(root=root, config=base_config, _repo=repo)
            # Whether the skill is a package is the base's to say (its config and tree).
            if base_config.package_dir is None:
                skill_head, base_version, head_version = _file_versions(
                    repo, base, base_sha, head_sha, skill_rel, head_files, head_config, config
                )
            else:
                skill_rel, skill_head, base_version, head_version = _package_versions(
                    repo, base, base_sha, head_sha, head_files, head_config, base_config
                )
            if skill_head is None or head_version is None:
                raise SkillDeleted(
                    f"The change deletes the skill {skill_rel}: it exists at {base} but not "
                    f"in {result.head_label}."
                )
            base_set = load_taskset(config.tasks, tree)
            files, items, task_error = task_changes(
                repo, base, config.tasks, base_set, head_files, head_config
            )
            changes = Changes(
                config=config_keys,
                config_error=config_error,
                task_files=files,
                items=items,
                task_error=task_error,
                skill_base=skill_rel,
                skill_head=skill_head,
            )
            comparison = compare_in_tree(
                ws, base_version, head_version, split, tree, workers=workers, progress=progress
            )
    require_head_answers(comparison)
    require_pairs(comparison)
    regression = is_regression(comparison, allow_drop)
    return _replace(
        result,
        comparison=comparison,
        changes=changes,
        regression=regression,
        message=verdict(comparison, base, allow_drop, regression),
        alpha=gate_alpha(config),
    )


def gate_alpha(config: Any) -> float:
    """The alpha the base's training gate judges gains at (``significance.gate_alpha``: ``[train]
    gate_confidence``, unset: by ``attribution`` and the target, or the review alpha where that
    gate tests nothing)."""
    from skillvc.training.significance import gate_alpha as alpha

    return alpha(config)


def _replace(result: CheckResult, **values: Any) -> CheckResult:
    return dataclasses.replace(result, **values)


def refuse_tracked_log(repo: SkillRepo, head: str | None) -> None:
    """Refuse an event log that came with the change: the check answers model calls it made
    before from the log, so a committed ``.skillvc/events.db`` could hold made-up answers."""
    revs = [None, "HEAD", head] if repo.head_sha() else [None, head]
    # Every spelling a case-insensitive file system opens as .skillvc/ (a Windows or macOS
    # runner checks .SKILLVC/events.db out where the log is read).
    found = sorted(
        name
        for rev in dict.fromkeys(revs)
        for name in repo.top_level_names(rev)
        if is_state_dir(name)
    )
    if found:
        name = found[0]
        raise StateConflict(
            f"{shown(name)}/ is committed to the repository, so the check cannot trust the model "
            "answers cached in it.",
            hint=f"Untrack it ('git rm -r --cached {shlex.quote(name)}'), commit, and run the "
            "check again.",
        )


@contextmanager
def working_directory(path: Path) -> Iterator[None]:
    """Run with ``path`` as the working directory: a ``python`` scorer imports its module from
    there and a ``command`` scorer resolves relative paths there, so in the base's exported
    tree both find the base's files, never the head's."""
    previous = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(previous)


# -- reading the head -------------------------------------------------------------------------


class HeadFiles:
    """Files of the head: at ``rev`` through git, or (``rev`` None) in the working tree, where
    a path that leaves the repository or enters ``.git`` reads as absent."""

    def __init__(self, repo: SkillRepo, root: Path, rev: str | None) -> None:
        self.repo = repo
        self.root = root.resolve()
        self.rev = rev
        self._dirty: set[str] | None = None

    def _committed(self, rel: str) -> bool:
        """True when the working-tree file ``rel`` is HEAD's, unchanged: then its blob is read,
        as git stores it. A checkout wrote the working-tree bytes through the checked-out
        ``.gitattributes`` (``working-tree-encoding``, filters), which a pull request
        controls; the blob is what the change actually holds."""
        if self.repo.head_sha() is None:
            return False
        if self._dirty is None:
            self._dirty = set(self.repo.dirty_paths(""))
        prefix = rel.rstrip("/") + "/"
        if rel in self._dirty or any(p.startswith(prefix) for p in self._dirty):
            return False
        return not rel or self.repo.tracks(rel, "HEAD")

    @property
    def where(self) -> str:
        return "in the working tree" if self.rev is None else f"at {self.rev}"

    def package(self, directory: str, config: Config) -> SkillPackage:
        """The head's skill package in ``directory`` under ``config``'s (the base's) include
        and exclude globs: through git, or in the working tree when the directory stays
        inside the repository (symbolic links in it are never followed)."""
        include, exclude = package_globs(config)
        if self.rev is not None:
            return SkillPackage.from_rev(self.repo, directory, self.rev, include, exclude)
        # The working tree's path is checked first, committed or not: a symlink out of the
        # repository or into .git/ or .skillvc/ is refused under the name the tree gives it.
        path = inside_repo(self.root, directory, "The working tree") if directory else self.root
        if self._committed(directory):
            return SkillPackage.from_rev(self.repo, directory, "HEAD", include, exclude)
        return SkillPackage.from_dir(path, directory, include, exclude)

    def read(self, relpath: str) -> bytes | None:
        rel = safe_relpath(relpath)
        if rel is None:
            return None
        if self.rev is not None:
            return _read_at(self.repo, rel, self.rev)
        # A symlink out of the repository or into .git/ or .skillvc/ is refused, as in eval,
        # before a clean file is read from its committed blob (so the error names the
        # working-tree path, not the revision git would follow the link in).
        path = inside_repo(self.root, rel, "The working tree")
        if self._committed(rel):
            return _read_at(self.repo, rel, "HEAD")
        if not path.is_file():
            return None
        try:
            return inputs.read_bytes(path, rel, max_bytes=inputs.TASKS_MAX_BYTES)
        except SkillvcError:
            return None


def safe_relpath(relpath: str) -> str | None:
    """``relpath`` normalised, or None when it is absolute, leaves the root or names ``.git``."""
    norm = posixpath.normpath(Path(relpath).as_posix())
    parts = norm.split("/")
    if posixpath.isabs(norm) or norm in ("", ".") or ".." in parts:
        return None
    if _forbidden(parts):  # .git/ (in every spelling a filesystem reads as .git) or .skillvc/
        return None
    return norm


def _read_at(repo: SkillRepo, relpath: str, rev: str) -> bytes | None:
    """The bytes of ``relpath`` at ``rev``, or None when it is not a file there."""
    try:
        if not repo.has_file(relpath, rev):
            return None
        # Followed as a checkout would: a symlinked skill is its target's text, so a change
        # of the target is a change of the skill (reading the link would hide it).
        return repo.read_file_following(relpath, rev)
    except PathOutsideRepo:
        raise
    except SkillvcError:
        return None


def _file_versions(
    repo: SkillRepo,
    base: str,
    base_sha: str,
    head_sha: str,
    skill_rel: str,
    head_files: HeadFiles,
    head_config: Config | None,
    config: Config,
) -> tuple[str | None, SkillVersion, SkillVersion | None]:
    """A single-file skill at the base and the head: (where the head's skill is, the base's
    version, the head's), both preflighted; None for the head when the change deletes it."""
    head_skill = _head_skill(head_files, skill_rel, head_config)
    base_raw = repo.read_file_following(skill_rel, base)
    at_base = f"at {base}"
    check_skill(skill_rel, base_raw, max_tokens=config.skill.max_tokens, where=at_base)
    base_version = SkillVersion(base, base_sha, _skill_text(base_raw, skill_rel, at_base))
    if head_skill is None:
        return None, base_version, None
    head_raw = head_files.read(head_skill)
    assert head_raw is not None
    where = head_files.where
    # Both versions pass the preflight (broken documents, the base config's token cap)
    # before any model call.
    check_skill(head_skill, head_raw, max_tokens=config.skill.max_tokens, where=where)
    text = _skill_text(head_raw, head_skill, where)
    return head_skill, base_version, SkillVersion(head_files.rev, head_sha, text)


def _package_versions(
    repo: SkillRepo,
    base: str,
    base_sha: str,
    head_sha: str,
    head_files: HeadFiles,
    head_config: Config | None,
    config: Config,
) -> tuple[str, str | None, SkillVersion, SkillVersion | None]:
    """A skill package at the base and the head, read with the base's ``include`` and
    ``exclude`` and rendered or installed as the base's target would: (the base's package
    directory, the head's, the base's version, the head's); None for the head when the change
    deletes it. Both are preflighted: SKILL.md against the base's token cap, every file UTF-8,
    every relative link inside the package (a head that fails is refused before any call)."""
    root = config.package_dir
    assert root is not None
    skill_file = config.skill_relpath
    at_base = f"at {base}"
    base_raw = repo.read_file_following(skill_file, base)
    check_skill(skill_file, base_raw, max_tokens=config.skill.max_tokens, where=at_base)
    base_package = load_package(config, repo, base)
    assert base_package is not None
    read = installs(config)
    base_carried = load_carried(config, base_package, repo, base, read=read)
    base_version = SkillVersion.of_package(
        base, base_sha, version_of(config, base_package, base_carried, at_base)
    )
    head_root = _head_package_dir(head_files, root, head_config)
    if head_root is None:
        return root, None, base_version, None
    where = head_files.where
    head_skill = f"{head_root}/{SKILL_FILE}" if head_root else SKILL_FILE
    head_raw = head_files.read(head_skill)
    assert head_raw is not None
    check_skill(head_skill, head_raw, max_tokens=config.skill.max_tokens, where=where)
    head_package = head_files.package(head_root, config)
    head_carried = load_carried(config, head_package, repo, head_files.rev, read=read)
    head_version = SkillVersion.of_package(
        head_files.rev, head_sha, version_of(config, head_package, head_carried, where)
    )
    return root, head_root, base_version, head_version


def _head_package_dir(files: HeadFiles, root: str, head_config: Config | None) -> str | None:
    """Where the head's package is: the base's directory when it still holds SKILL.md, else
    the directory the head's config names (a move), else None."""
    if files.read(f"{root}/{SKILL_FILE}" if root else SKILL_FILE) is not None:
        return root
    if head_config is None:
        return None
    moved = safe_relpath(head_config.skill.path)
    if moved is not None and posixpath.basename(moved) == SKILL_FILE:
        moved = posixpath.dirname(moved)
    if moved and moved != root and files.read(f"{moved}/{SKILL_FILE}") is not None:
        return moved
    return None


def _head_skill(files: HeadFiles, skill_rel: str, head_config: Config | None) -> str | None:
    """Where the head's skill is: at the base's path, else at the head config's (a move)."""
    if files.read(skill_rel) is not None:
        return skill_rel
    if head_config is not None:
        moved = safe_relpath(head_config.skill.path)
        if moved is not None and files.read(moved) is None:  # a package directory: SKILL.md
            moved = posixpath.join(moved, "SKILL.md")
        if moved is not None and moved != skill_rel and files.read(moved) is not None:
            return moved
    return None


def _skill_file_at(repo: SkillRepo, skill_rel: str, rev: str) -> str:
    """``[skill] path`` as the file whose presence at the base says there is a skill to
    compare: a skill package's directory stands for its SKILL.md (the package as a whole is
    read and compared by ``_package_versions``)."""
    inner = posixpath.join(skill_rel, "SKILL.md")
    return inner if _read_at(repo, inner, rev) is not None else skill_rel


def _decode(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        from skillvc.core.errors import ConfigError

        raise ConfigError(f"{what} is not UTF-8 text (bad byte at offset {exc.start}).") from None


def _skill_text(raw: bytes, relpath: str, where: str) -> str:
    try:
        # Decoded exactly as training does, so evaluations share its cached target calls.
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillDocumentError(
            f"The skill file {relpath} {where} is not UTF-8 text (bad byte at offset {exc.start})."
        ) from None


# -- what changed -----------------------------------------------------------------------------


def config_changes(
    base: Config, base_text: str, head_files: HeadFiles
) -> tuple[Config | None, tuple[str, ...], str | None]:
    """The head's config (None when it cannot be parsed), the dotted keys whose effective value
    differs from the base's, and why the head's file could not be compared (or None)."""
    raw = head_files.read(CONFIG_FILE)
    if raw is None:
        return None, (), f"{CONFIG_FILE} is deleted"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, (), f"{CONFIG_FILE} is not UTF-8 text"
    try:
        head: Config | None = parse_config(text, base.root)
        if head is not None and base.skill_name is not None:
            head = head.for_skill(base.skill_name)  # only this skill's effective settings
    except Exception:  # untrusted input: whatever is wrong with it is a change, never a crash
        head = None
    if head is not None:
        return head, _differing(_flatten(base.to_dict()), _flatten(head.to_dict())), None
    try:
        head_data = tomllib.loads(text)
    except Exception:
        return None, (), f"{CONFIG_FILE} is not valid TOML"
    return None, _differing(_flatten(tomllib.loads(base_text)), _flatten(head_data)), None


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):  # an empty table adds no key, as if it were absent
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(k for k in a.keys() | b.keys() if a.get(k, _MISSING) != b.get(k, _MISSING)))


def task_files(tasks: TasksConfig) -> list[str]:
    """The task files a [tasks] table names, as written (relative to the repository root)."""
    if tasks.skillopt_dir:
        base = Path(tasks.skillopt_dir).as_posix()
        named = [f"{base}/{name}/items.json" for name in SPLITS]
    else:
        named = []
    named += [p for p in (tasks.path, tasks.train, tasks.val, tasks.test) if p]
    return named


def task_changes(
    repo: SkillRepo,
    base: str,
    base_tasks: TasksConfig,
    base_set: TaskSet,
    head_files: HeadFiles,
    head_config: Config | None,
) -> tuple[tuple[str, ...], dict[str, SplitChanges], str | None]:
    """Task files whose bytes differ at the head, the items it added, removed and edited per
    split, and why its task set could not be read (or None).

    The head's set is what the head's own [tasks] names (the base's when its config cannot be
    parsed), read from copies of its files only, so no path outside the repository is read.
    """
    head_tasks = head_config.tasks if head_config is not None else base_tasks
    changed: set[str] = set()
    for name in {*task_files(base_tasks), *task_files(head_tasks)}:
        rel = safe_relpath(name)
        if rel is None or _read_at(repo, rel, base) != head_files.read(rel):
            changed.add(name if rel is None else rel)
    head_set, error = _head_taskset(head_tasks, head_files)
    items = {} if head_set is None else item_changes(base_set, head_set)
    return tuple(sorted(changed)), items, error


def _head_taskset(tasks: TasksConfig, files: HeadFiles) -> tuple[TaskSet | None, str | None]:
    with tempfile.TemporaryDirectory(prefix="skillvc-head-tasks-") as tmp:
        for name in task_files(tasks):
            rel = safe_relpath(name)
            if rel is None:
                return None, f"[tasks] names {name}, a path outside the repository"
            raw = files.read(rel)
            if raw is not None:
                target = Path(tmp, rel)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(raw)
        try:
            return load_taskset(tasks, Path(tmp)), None
        except SkillvcError as exc:
            return None, shown(exc.message.rstrip("."))
        except Exception as exc:  # untrusted input: reported, never a crash
            return None, f"it cannot be read ({type(exc).__name__})"


def _content(item: TaskItem) -> tuple[Any, ...]:
    return (item.input, item.targets, item.choices, dict(item.metadata), item.scorer)


def item_changes(base: TaskSet, head: TaskSet) -> dict[str, SplitChanges]:
    """Per split, the ids the head added, removed and edited (same id, other content)."""
    changes = {}
    for name in SPLITS:
        a = {item.id: _content(item) for item in base.split(name)}
        b = {item.id: _content(item) for item in head.split(name)}
        changes[name] = SplitChanges(
            added=tuple(i for i in b if i not in a),
            removed=tuple(i for i in a if i not in b),
            edited=tuple(i for i in a if i in b and a[i] != b[i]),
        )
    return changes


def named(names: tuple[str, ...], limit: int = MAX_NAMED) -> str:
    """``names`` joined with commas, the ones past ``limit`` counted ("and 3 more"), each
    ``shown`` safely."""
    shown_ = ", ".join(shown(n) for n in names[:limit])
    return shown_ + (f" and {len(names) - limit} more" if len(names) > limit else "")


# -- the verdict ------------------------------------------------------------------------------


def is_regression(comparison: Comparison, allow_drop: float) -> bool:
    assert comparison.diff is not None
    return comparison.diff < -allow_drop - EPS


def verdict(comparison: Comparison, base: str, allow_drop: float, regression: bool) -> str:
    """One sentence: the head score, how far it is from the base score, and the outcome."""
    head, base_score = fmt_score(comparison.b_mean), fmt_score(comparison.a_mean)
    diff = comparison.diff or 0.0
    split = comparison.b.split
    if regression:
        return f"The skill scores {head} on {split}, {-diff:.3f} below {base_score} at {base}" + (
            f" (allowed drop {allow_drop:g})." if allow_drop else "."
        )
    if diff < -EPS:
        return (
            f"OK: the skill scores {head} on {split}, {-diff:.3f} below {base_score} at {base}, "
            f"within the allowed drop of {allow_drop:g}."
        )
    relation = "the same as" if diff <= EPS else f"{diff:.3f} above"
    return f"OK: the skill scores {head} on {split}, {relation} {base_score} at {base}."


def compare_in_tree(
    ws: Workspace,
    base_version: SkillVersion,
    head_version: SkillVersion,
    split: str,
    tree: Path,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Comparison:
    """Compare the two versions on ``split`` with ``tree`` (the base's files exported) as the
    working directory and task root; refused when either side has too few answers to judge."""
    with working_directory(tree):
        comparison = compare_versions(
            ws,
            base_version,
            head_version,
            split,
            tasks_root=tree,
            workers=workers,
            progress=progress,
        )
    for side in (comparison.a, comparison.b):
        require_evidence(side, ws.config.train.max_failure_rate)
    return comparison


def require_evidence(result: EvalResult, max_failure_rate: float) -> None:
    """Refuse to judge a version when too many of its target calls failed."""
    total = len(result.items)
    if total and result.errors / total > max_failure_rate:
        last = shown(next((i.error for i in result.items if i.error), ""))
        raise BackendError(
            f"{result.errors} of {total} target calls failed evaluating {result.label} on "
            f"{result.split}, so the check cannot decide (first error: {last})."
        )


def require_head_answers(comparison: Comparison) -> None:
    """Refuse to judge when the head errored on items the base scored.

    An errored item is left out of the paired comparison, so a skill that makes the target fail
    (time out on a long answer, crash its agent) on exactly the items it breaks would hide
    them; ``max_failure_rate`` bounds errors on both sides, not this.
    """
    scored = {item.id for item in comparison.a.items if item.ok}
    failed = tuple(item.id for item in comparison.b.items if not item.ok and item.id in scored)
    if failed:
        head, base = comparison.b, comparison.a
        raise BackendError(
            f"{len(failed)} {head.split} item{'s' if len(failed) != 1 else ''} that "
            f"{base.label} scored failed at {head.label} ({named(failed)}), so the check "
            "cannot decide: a failed item is left out of the comparison.",
            hint="Run the check again; if the same items fail again, the change makes the "
            "target fail on them ('skillvc eval' lists the errors).",
        )


def require_pairs(comparison: Comparison) -> None:
    if comparison.n == 0 or comparison.diff is None:
        raise BackendError(
            f"No {comparison.b.split} item was scored at both versions, so the check cannot decide."
        )

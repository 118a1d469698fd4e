"""Git access for skillvc: read skill files at revisions and commit edits to them.

Invariants this module keeps:

* A skillvc commit changes exactly one path. Its tree is the parent's tree with only that
  path's blob replaced, built in a temporary index file inside ``.git``; the user's real
  index and working tree are never used to build it.
* ``commit_file`` refuses to run when the skill file has any uncommitted change (staged,
  unstaged, untracked or ignored-but-present), so it never overwrites the user's work. After
  the commit it rewrites only that file (atomically: temp file + ``os.replace``) and only
  that path's index entry; every other staged or unstaged change is left as it was.
* Branches move only by compare-and-swap (``git update-ref <ref> <new> <old>``). If anything
  fails after the move, the ref is swapped back and the file restored, so a failure never
  leaves a moved ref or a half-written file behind.
* Candidate commits (for example rejected edits) live under ``refs/skillvc/`` and tags under
  ``refs/tags/skillvc/``; neither ever moves a branch or touches the working tree.
* Every commit may carry trailers (``Key: value`` lines in the last paragraph). The event log
  stamps ``Skillvc-Event: <intent id>`` so that ``find_trailer`` can tell, after a crash,
  whether an intent already produced its commit.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import git

from skillvc.core.errors import (
    ConfigError,
    DirtySkillFile,
    NotAGitRepo,
    PathOutsideRepo,
    SkillFileMissing,
    SkillvcError,
    StateConflict,
    UnknownRevision,
)

SKILLVC_REF_PREFIX = "refs/skillvc/"
KEEP_PREFIX = "refs/skillvc/keep/"  # new commits, held against gc until a ref points at them
_GC_RETRIES = 5  # rebuilds of a commit whose fresh objects a concurrent gc deleted
_GC_WAIT = 120.0  # seconds a new commit waits for a gc that may have read the refs before it
_LOCK_RETRIES = 5  # tries of a ref move while another git process holds its lock (~1 s)


class _ObjectsVanished(Exception):
    """An object written a moment ago is gone (a concurrent 'git gc --prune=now')."""


def _gc_loop() -> SkillvcError:
    return SkillvcError(
        f"git kept deleting the objects of a new commit ({_GC_RETRIES} tries): "
        "is 'git gc --prune=now' running in a loop?",
        hint="Stop it, then run the command again; nothing was changed.",
    )


def _vanished(exc: git.GitCommandError) -> bool:
    text = str(exc.stderr)
    # gc also removes the empty objects/xx folder git is about to write a new object into, and
    # while it repacks, a referenced object moving from a loose file into a new pack can be
    # briefly missed ("failed to unpack tree object": the gc stress test met it once, under load).
    return any(
        s in text
        for s in (
            "invalid object",
            "missing object",
            "is not a valid",
            "bad object",
            "unable to create temporary file",
            "unable to write file",
            "failed to unpack tree object",
        )
    )


TAG_PREFIX = "skillvc/"
DEFAULT_BRANCH = "main"

_TRAILER_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*$")
_BLAME_HEADER = re.compile(r"^([0-9a-f]{40}|[0-9a-f]{64}) \d+ \d+(?: \d+)?$")
# One commit record in `git log -z` output: fields separated by NUL, records by NUL too.
_LOG_FORMAT = "%H%x00%P%x00%aI%x00%s%x00%(trailers:only,unfold)%x00%B"
_LOG_FIELDS = 6


@dataclass(frozen=True)
class CommitInfo:
    """What skillvc needs to know about one commit."""

    sha: str
    parents: tuple[str, ...]
    subject: str
    message: str
    trailers: dict[str, str]
    authored_at: str  # strict ISO 8601, as `git log --format=%aI` prints it


class SkillRepo:
    """A git repository with a working tree, holding one or more skill documents."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        try:
            self.git_repo = git.Repo(path, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise NotAGitRepo(f"{Path(path).resolve()} is not inside a git repository.") from None
        if self.git_repo.working_tree_dir is None:
            self.git_repo.close()
            raise NotAGitRepo(f"{path} is a bare git repository with no working tree.")
        self.root = Path(self.git_repo.working_tree_dir)
        self._git = self.git_repo.git
        self._signing: bool | None = None  # commit.gpgsign, read on the first commit
        self._pins: dict[str, list[str]] = {}  # commit sha -> its refs/skillvc/keep/ refs
        # commit sha -> (the gc running when it was pinned, the commit's new objects), kept
        # until that gc has ended: see _outlive_gc
        self._exposed: dict[str, tuple[str, dict[str, tuple[str, bytes]]]] = {}

    # -- opening ----------------------------------------------------------------------------

    @classmethod
    def init(cls, path: str | os.PathLike[str]) -> SkillRepo:
        """Open the repository containing ``path``, creating one on branch main if there is none."""
        found = cls.find(path)
        if found is not None:
            return found
        Path(path).mkdir(parents=True, exist_ok=True)
        created = git.Repo.init(path)
        # Set the branch by hand rather than `init -b` so older gits behave the same.
        created.git.symbolic_ref("HEAD", f"refs/heads/{DEFAULT_BRANCH}")
        created.close()
        return cls(path)

    @staticmethod
    def find(path: str | os.PathLike[str]) -> SkillRepo | None:
        """The repository containing ``path``, or None when there is none."""
        try:
            return SkillRepo(path)
        except NotAGitRepo:
            return None

    def close(self) -> None:
        """Stop the helper processes GitPython may keep running."""
        self.git_repo.close()

    def __enter__(self) -> SkillRepo:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SkillRepo({str(self.root)!r})"

    # -- revisions --------------------------------------------------------------------------

    def head_sha(self) -> str | None:
        """The commit HEAD points at, or None on an unborn branch."""
        try:
            return str(self._git.rev_parse("--verify", "-q", "HEAD^{commit}"))
        except git.GitCommandError:
            return None

    def current_branch(self) -> str | None:
        """The short branch name HEAD points at (even if unborn), or None when detached."""
        try:
            return self._git.symbolic_ref("-q", "--short", "HEAD") or None
        except git.GitCommandError:
            return None

    def has_file(self, relpath: str, rev: str = "HEAD") -> bool:
        """Whether ``relpath`` exists at ``rev`` (which must name a commit)."""
        self.resolve(rev)
        status, _, _ = self._git.cat_file(
            "-e",
            f"{rev}:{self._relpath(relpath)}",
            with_exceptions=False,
            with_extended_output=True,
        )
        return status == 0

    def restore_file(self, relpath: str, content: bytes) -> None:
        """Make the working-tree file and its index entry hold ``content`` (the committed
        version), touching nothing else: how a crash between moving the branch and writing
        the file is finished on resume."""
        path = self._relpath(relpath)
        target = self.root / path
        if not target.exists() or target.read_bytes() != content:
            write_atomic(target, content)
        # -f: the path is committed, so an ignore rule must not make `git add` fail (it
        # refuses new ignored paths) and undo a commit that is otherwise complete.
        self._git.add("-f", "--", _literal(path))

    def remove_stale_temp_files(self, relpath: str) -> list[Path]:
        """Delete temp files a killed write of ``relpath`` left beside it; returns them. For a
        directory (a skill package): those of every file under it.

        Only call this while holding the writer lock: then no write is in progress.
        """
        target = self.root / self._relpath(relpath) if relpath else self.root
        if target.is_dir():
            stale = sorted(target.rglob(".*.skillvc-*.tmp"))
        else:
            stale = sorted(target.parent.glob(f".{target.name}.skillvc-*.tmp"))
        for path in stale:
            path.unlink(missing_ok=True)
        # A commit pinned against gc by a write that was killed: nothing is writing now.
        for pin in self.refs(KEEP_PREFIX):
            with contextlib.suppress(git.GitCommandError):
                self._git.update_ref("-d", pin)
        return stale

    def switch_branch(self, name: str) -> None:
        """Check out branch ``name``, creating it at HEAD when it does not exist yet.

        git itself refuses when the switch would overwrite uncommitted changes, and that
        refusal is reported as a StateConflict; nothing is forced.
        """
        status, _, _ = self._git.check_ref_format(
            "--branch", name, with_exceptions=False, with_extended_output=True
        )
        if status != 0:
            raise ConfigError(
                f"'{name}' is not a valid git branch name.",
                hint="Use letters, digits, '-', '_' and '/', e.g. train/support-skill.",
            )
        try:
            if self._git.rev_parse("--verify", "-q", f"refs/heads/{name}", with_exceptions=False):
                self._git.switch(name)
            else:
                self._git.switch("-c", name)
        except git.GitCommandError as exc:
            raise StateConflict(
                f"Could not switch to branch {name}: {_git_reason(exc)}",
                hint="Commit or stash your changes, then run the command again.",
            ) from None

    def is_ancestor(self, ancestor: str, rev: str) -> bool:
        """Whether commit ``ancestor`` is ``rev`` or in its history."""
        try:
            self._git.merge_base("--is-ancestor", ancestor, rev)
            return True
        except git.GitCommandError:
            return False

    def has_common_history(self, a: str, b: str) -> bool:
        """Whether commits ``a`` and ``b`` have a merge base (unrelated histories do not)."""
        try:
            self._git.merge_base(a, b)
            return True
        except git.GitCommandError:
            return False

    def resolve(self, rev: str) -> str:
        """The full sha of the commit ``rev`` names."""
        # A leading dash would be read as an option, so it can never be a revision here.
        if not rev or rev.startswith("-") or "\0" in rev:  # NUL: no process argument holds it
            raise UnknownRevision(f"'{rev}' is not a git revision.")
        # Asked again: while a concurrent gc repacks, git can briefly miss an object moving
        # from a loose file into a new pack. One immediate retry, then more only while a gc
        # holds its lock, so an unknown revision costs two rev-parses, not a wait.
        for attempt in range(8):
            try:
                return str(self._git.rev_parse("--verify", "-q", f"{rev}^{{commit}}"))
            except git.GitCommandError:
                if attempt == 7 or (attempt > 0 and self._gc_owner() is None):
                    break
                time.sleep(0.05 * attempt)
        raise UnknownRevision(f"'{rev}' does not name a commit in {self.root}.")

    def _gc_owner(self) -> str | None:
        """The running gc's ``gc.pid`` line ("<pid> <host>"), or None when no gc runs. A
        ``gc.pid`` left by a gc that died on this host counts as none, and, as git counts it,
        one older than 12 hours."""
        path = Path(self.git_repo.common_dir) / "gc.pid"
        try:
            line = path.read_text().strip()
            if time.time() - path.stat().st_mtime > 12 * 3600:
                return None
        except (OSError, UnicodeDecodeError):
            return None
        pid, _, host = line.partition(" ")
        # (signal 0 probes a process on POSIX; on Windows os.kill would end it)
        if pid.isdigit() and host == socket.gethostname() and os.name == "posix":
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                return None
            except PermissionError:
                pass  # alive, another user's
        return line or None

    def has_commit(self, sha: str) -> bool:
        """True when ``sha`` (a full or abbreviated commit id from the log) is a commit here."""
        try:
            self.resolve(sha)
        except UnknownRevision:
            return False
        return True

    def same_between(self, a: str, b: str, relpath: str) -> bool:
        """True when the file or folder ``relpath`` is identical in commits ``a`` and ``b``."""
        path = self._relpath(relpath)
        try:
            self._git.diff("--quiet", self.resolve(a), self.resolve(b), "--", path)
            return True
        except git.GitCommandError:
            return False

    # -- reading ----------------------------------------------------------------------------

    def read_file(self, relpath: str, rev: str = "HEAD") -> bytes:
        """The exact bytes of ``relpath`` as committed in ``rev``."""
        path = self._relpath(relpath)
        sha = self.resolve(rev)
        try:
            blob: bytes = self._git.cat_file(
                "blob", f"{sha}:{path}", stdout_as_string=False, strip_newline_in_stdout=False
            )
            return blob
        except git.GitCommandError:
            raise SkillFileMissing(f"{path} does not exist in revision {rev}.") from None

    def read_file_following(self, relpath: str, rev: str = "HEAD") -> bytes:
        """The bytes of ``relpath`` in ``rev`` as a checkout of ``rev`` would show them: a
        symbolic link inside ``rev``'s tree is followed (a skill symlinked into
        ``.claude/skills/`` is its target's text, not the link's), one that leaves the tree or
        loops is PathOutsideRepo, a dangling one SkillFileMissing."""
        path = self._relpath(relpath)
        sha = self.resolve(rev)
        missing = SkillFileMissing(f"{path} does not exist in revision {rev}.")
        if "\n" in path:  # the batch protocol reads one name per line
            raise missing
        proc = subprocess.run(
            [self._git.GIT_PYTHON_GIT_EXECUTABLE or "git", "cat-file", "--batch"]
            + ["--follow-symlinks"],
            cwd=self.root,
            input=f"{sha}:{path}\n".encode(),
            capture_output=True,
            check=False,
        )
        header, _, body = proc.stdout.partition(b"\n")
        fields = header.decode("utf-8", "replace").split(" ")
        if proc.returncode == 0 and len(fields) == 3 and fields[1] == "blob":
            return body[: int(fields[2])]
        if fields[0] in ("symlink", "loop"):
            raise PathOutsideRepo(
                f"{path} in revision {rev} is a symbolic link that leads out of the repository "
                "or loops."
            )
        raise missing

    def export_tree(self, rev: str, dest: Path) -> None:
        """Write every file of ``rev`` under ``dest`` (an empty directory outside the repo).

        Built from a temporary index, so the real index, HEAD and working tree are untouched;
        ``git checkout-index`` keeps symbolic links and executable bits as committed. Only
        ``rev``'s own ``.gitattributes`` apply: with the work tree set to ``dest``, git cannot
        fall back to the working tree's, which a pull request writes (a ``working-tree-encoding``
        there would rewrite the base's task files as they are exported).
        """
        sha = self.resolve(rev)
        try:
            with self._temp_index() as env:
                self._git.read_tree(sha, env=env)
                out = dest.resolve()
                env = {**env, "GIT_WORK_TREE": str(out)}
                self._git.checkout_index("-a", "-f", f"--prefix={out}/", env=env)
        except git.GitCommandError as exc:  # e.g. a required LFS filter that is not installed
            raise SkillvcError(
                f"Could not write out the files of {rev}: {_git_reason(exc)}"
            ) from None

    def tracks(self, relpath: str, rev: str | None = None) -> bool:
        """Whether any file at or under ``relpath`` is in the index (``rev`` None) or in ``rev``."""
        path = _literal(self._relpath(relpath))
        if rev is None:
            out = self._git.ls_files("-z", "--", path)
        else:
            out = self._git.ls_tree("-r", "-z", "--name-only", self.resolve(rev), "--", path)
        return bool(out)

    def _under(self, directory: str) -> tuple[list[str], int]:
        """(the pathspec arguments limiting a git listing to ``directory``, the length of the
        prefix to cut from each path it lists); "" is the whole repository."""
        if not directory:
            return [], 0
        return ["--", _literal(self._relpath(directory)) + "/"], len(directory) + 1

    def index_files(self, directory: str) -> list[str]:
        """The files under ``directory`` ("" = the root) in the index (what a commit would
        record; ``GIT_INDEX_FILE`` honoured), relative to it, sorted."""
        scope, cut = self._under(directory)
        out = self._git.ls_files("-z", *scope)
        return sorted(name[cut:] for name in out.split("\0") if name)

    def list_entries(self, directory: str, rev: str = "HEAD") -> list[tuple[str, str, str]]:
        """Every file entry under ``directory`` ("" = the root) in ``rev`` as (path relative to
        it, git mode, object id), sorted by path. The mode tells a regular file (100644), an
        executable one (100755), a symbolic link (120000) and a submodule (160000) apart."""
        scope, cut = self._under(directory)
        entries = []
        for record in self._git.ls_tree("-r", "-z", self.resolve(rev), *scope).split("\0"):
            if not record:
                continue
            meta, _, name = record.partition("\t")
            mode, _, rest = meta.partition(" ")
            entries.append((name[cut:], mode, rest.rpartition(" ")[2]))
        return sorted(entries)

    def read_blobs(self, shas: list[str]) -> dict[str, bytes]:
        """The bytes of each blob in ``shas`` (object ids), read in one ``git cat-file``."""
        wanted = list(dict.fromkeys(shas))
        if not wanted:
            return {}
        out, pos, blobs = self._cat_file("--batch", wanted, check=True), 0, {}
        for sha in wanted:
            end = out.index(b"\n", pos)
            fields = out[pos:end].decode("ascii", "replace").split(" ")
            if len(fields) != 3 or fields[1] != "blob":
                raise SkillvcError(f"Object {sha} is not a blob in {self.root}.")
            size = int(fields[2])
            blobs[sha] = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1  # the body is followed by a newline
        return blobs

    def visible_files(self, directory: str) -> list[str]:
        """The paths under ``directory`` ("" = the root) that git sees in the working tree:
        tracked, or untracked and not ignored, relative to it, sorted. A tracked path deleted
        from the disk is still listed: callers look at the file itself."""
        scope, cut = self._under(directory)
        out = self._git.ls_files("-z", "--cached", "--others", "--exclude-standard", *scope)
        return sorted({name[cut:] for name in out.split("\0") if name})

    def top_level_names(self, rev: str | None = None) -> set[str]:
        """The names at the root of the index (``rev`` None) or of ``rev``'s tree."""
        if rev is None:
            out = self._git.ls_files("-z")
            return {name.split("/", 1)[0] for name in out.split("\0") if name}
        out = self._git.ls_tree("-z", "--name-only", self.resolve(rev))
        return {name for name in out.split("\0") if name}

    def is_dirty(self, relpath: str) -> bool:
        """True when ``relpath`` has staged, unstaged, untracked or ignored content not in HEAD."""
        path = self._relpath(relpath)
        # --ignored: an ignored file at that path is still user content commit_file would clobber.
        out = self._git.status(
            "--porcelain=v1", "-z", "--untracked-files=all", "--ignored", "--", _literal(path)
        )
        return bool(out.strip("\0"))

    def dirty_paths(self, directory: str) -> list[str]:
        """Paths under ``directory`` ("" = the root) that ``is_dirty`` would report, sorted."""
        scope, _ = self._under(directory)
        out = self._git.status("--porcelain=v1", "-z", "--untracked-files=all", "--ignored", *scope)
        records = [r for r in out.split("\0") if r]
        paths, skip = [], False
        for record in records:
            if skip:  # the original path of a rename or copy
                skip = False
                continue
            skip = "R" in record[:2] or "C" in record[:2]
            paths.append(record[3:])
        return sorted(set(paths))

    def ensure_clean(self, relpath: str) -> None:
        """Raise DirtySkillFile when ``relpath`` has uncommitted changes."""
        if self.is_dirty(relpath):
            path = self._relpath(relpath)
            head = self.head_sha()
            if head is None or not self.has_file(path, head):
                raise DirtySkillFile(
                    f"{path} is not committed yet.",
                    hint=f"Commit it first: git add {path} && git commit -m 'Add the skill'.",
                )
            raise DirtySkillFile(f"{path} has uncommitted changes.")

    def ensure_identity(self) -> None:
        """Raise SkillvcError when git has no author or committer identity to commit with."""
        for var in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"):
            try:
                self._git.var(var)
            except git.GitCommandError:
                raise SkillvcError(
                    "git has no author identity to commit with.",
                    hint="Set one with: git config user.name 'Your Name' / "
                    "git config user.email you@example.com",
                ) from None

    # -- writing ----------------------------------------------------------------------------

    def build_commit(
        self,
        relpath: str,
        content: bytes,
        message: str,
        parent: str | None,
        trailers: Mapping[str, str] = {},  # noqa: B006 - read only, never mutated
    ) -> str:
        """Create (but do not reference) a commit: ``parent``'s tree with ``relpath`` = content.

        Moves no ref and touches neither the working tree nor the real index.
        """
        return self.build_commit_files({relpath: content}, message, parent, trailers)

    def build_commit_files(
        self,
        files: Mapping[str, bytes],
        message: str,
        parent: str | None,
        trailers: Mapping[str, str] = {},  # noqa: B006 - read only, never mutated
    ) -> str:
        """``build_commit`` for several files (a skill package's): ``parent``'s tree with each
        path holding its content, in one commit."""
        sha = self._build_pinned(files, message, parent, trailers)
        self._unpin(sha)
        return sha

    def _build_pinned(
        self,
        files: Mapping[str, bytes],
        message: str,
        parent: str | None,
        trailers: Mapping[str, str],
    ) -> str:
        """``build_commit_files``, the commit kept under a refs/skillvc/keep/ ref (so a
        concurrent gc cannot delete it) until ``_unpin``."""
        paths = {self._relpath(relpath): content for relpath, content in files.items()}
        parent_sha = self._resolve_through_gc(parent) if parent is not None else None
        full_message = _with_trailers(message, trailers)
        # A concurrent 'git gc --prune=now' deletes objects nothing references yet (our blobs
        # and tree before the commit exists): rebuild when git reports one missing.
        for attempt in range(_GC_RETRIES):
            try:
                return self._build(paths, full_message, parent_sha)
            except _ObjectsVanished:
                if attempt == _GC_RETRIES - 1:
                    raise _gc_loop() from None
        raise AssertionError("unreachable")

    def _build_and_move(
        self,
        files: Mapping[str, bytes],
        message: str,
        parent: str | None,
        trailers: Mapping[str, str],
        move: Callable[[str], None],
    ) -> str:
        """``_build_pinned``, then ``move(sha)`` (a ref onto the new commit). A concurrent
        'git prune' that read the refs before the pin existed can still delete the commit
        after the pin's check; the ref move then finds it gone, and the commit is built again
        (``move`` changes nothing when it fails)."""
        for attempt in range(_GC_RETRIES):
            sha = self._build_pinned(files, message, parent, trailers)
            try:
                move(sha)
                self._outlive_gc(sha)
                return sha
            except _ObjectsVanished:
                if attempt == _GC_RETRIES - 1:
                    raise _gc_loop() from None
            finally:
                self._unpin(sha)
        raise AssertionError("unreachable")

    def _outlive_gc(self, sha: str) -> None:
        """Wait for the gc that ran when ``sha`` was pinned, then write back any of the
        commit's objects it deleted. Its prune may have read the refs before the pin existed
        and so delete them even after the ref move (git calls '--prune=now' unsafe beside a
        writer): the same bytes make the same object ids, so the moved ref is whole again."""
        owner, objects = self._exposed.pop(sha, (None, {}))
        if owner is None:
            return
        deadline = time.monotonic() + _GC_WAIT
        while self._gc_owner() == owner and time.monotonic() < deadline:
            time.sleep(0.05)
        for oid in self._missing_objects(list(objects)):
            kind, data = objects[oid]
            written = self._git_stdin("hash-object", "-t", kind, "-w", "--stdin", data=data)
            if written != oid:  # cannot happen: an object id is the hash of its bytes
                raise SkillvcError(f"git wrote {kind} {oid} back as {written}.")

    def _resolve_through_gc(self, rev: str) -> str:
        """``resolve``, asked again while a concurrent gc repacks: git can briefly miss an
        object that moves from a loose file into a new pack."""
        for attempt in range(12):  # up to 3.3 s: only revisions that must exist come here
            try:
                return self.resolve(rev)
            except UnknownRevision:
                if attempt == 11:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")

    def _build(self, paths: Mapping[str, bytes], full_message: str, parent_sha: str | None) -> str:
        try:
            blobs = {
                path: self._git_stdin("hash-object", "-w", "--stdin", data=content)
                for path, content in paths.items()
            }
        except git.GitCommandError as exc:
            if _vanished(exc):  # gc removed the objects/xx folder being written into
                raise _ObjectsVanished() from None
            raise
        path = next(iter(blobs), "")
        with self._temp_index() as env:
            try:
                if parent_sha is None:
                    self._git.read_tree("--empty", env=env)
                else:
                    self._git.read_tree(parent_sha, env=env)
                for path, blob in blobs.items():
                    mode = self._tree_mode(path, env)
                    self._git.update_index("--add", "--cacheinfo", f"{mode},{blob},{path}", env=env)
                tree = self._git.write_tree(env=env)
            except git.GitCommandError as exc:
                if _vanished(exc):
                    raise _ObjectsVanished() from None
                raise SkillvcError(
                    f"Cannot place {path} in the tree of {parent_sha or 'an empty commit'}: "
                    f"{_git_reason(exc)}"
                ) from None
        parent_args = ["-p", parent_sha] if parent_sha else []
        try:
            sha = self._git_stdin(
                "commit-tree", tree, *parent_args, *self._sign_args(), data=full_message.encode()
            )
        except git.GitCommandError as exc:
            if _vanished(exc):
                raise _ObjectsVanished() from None
            self.ensure_identity()  # the usual cause; raises a clear error with a hint
            if self._sign_args():
                raise SkillvcError(
                    f"git could not sign a commit: {_git_reason(exc)}",
                    hint="Check your signing key ('git config user.signingkey', gpg.format), "
                    "or turn signing off for this repository (git config commit.gpgsign false).",
                ) from None
            raise
        # Pinned from here on, so gc keeps it and all it holds; a gc before the pin may have
        # taken the commit (update-ref then refuses it) or a blob: check, then rebuild if so.
        pin = f"{KEEP_PREFIX}{uuid.uuid4().hex}"
        try:
            self._git.update_ref("--no-deref", pin, sha)
        except git.GitCommandError as exc:
            if "nonexistent" in str(exc.stderr) or _vanished(exc):
                raise _ObjectsVanished() from None
            raise
        self._pins.setdefault(sha, []).append(pin)
        owner = self._gc_owner()  # read after the pin: a gc that began before it is a threat
        objects = self._new_objects(sha, parent_sha)
        if objects is None:
            self._unpin(sha)
            raise _ObjectsVanished()
        if owner is not None:
            self._exposed[sha] = (owner, objects)
        return sha

    def _new_objects(self, sha: str, parent: str | None) -> dict[str, tuple[str, bytes]] | None:
        """Object id -> (type, bytes) for every object ``sha`` has that ``parent`` has not
        (the commit, its new trees and blobs); None when any of them is missing."""
        try:
            listed = self._git.rev_list("--objects", sha, *(["--not", parent] if parent else []))
        except git.GitCommandError:
            return None  # a commit, tree or blob it names is gone
        oids = [line.split(" ", 1)[0] for line in listed.splitlines() if line]
        out = self._cat_file("--batch", oids, check=False)
        objects: dict[str, tuple[str, bytes]] = {}
        at = 0
        while at < len(out):
            end = out.index(b"\n", at)
            header = out[at:end].decode().split()
            if header[-1] == "missing":
                return None
            oid, kind, size = header[0], header[1], int(header[2])
            objects[oid] = (kind, out[end + 1 : end + 1 + size])
            at = end + 2 + size  # the content is followed by a newline
        return objects if len(objects) == len(oids) else None

    def _unpin(self, sha: str) -> None:
        self._exposed.pop(sha, None)
        for pin in self._pins.pop(sha, []):
            with contextlib.suppress(git.GitCommandError):
                self._git.update_ref("-d", pin)

    def _missing_objects(self, shas: list[str]) -> list[str]:
        out = self._cat_file("--batch-check", shas, check=False)
        return [line.split()[0] for line in out.decode().splitlines() if "missing" in line]

    def _cat_file(self, mode: str, shas: list[str], *, check: bool) -> bytes:
        """What ``git cat-file <mode>`` prints for ``shas`` (one per line on its stdin)."""
        proc = subprocess.run(
            [self._git.GIT_PYTHON_GIT_EXECUTABLE or "git", "cat-file", mode],
            cwd=self.root,
            input="".join(f"{sha}\n" for sha in shas).encode(),
            capture_output=True,
            check=check,
        )
        return proc.stdout

    def signing(self) -> bool:
        """Whether commits in this repository must be signed (``commit.gpgsign``)."""
        try:
            return str(self._git.config("--type=bool", "--get", "commit.gpgsign")).strip() == "true"
        except git.GitCommandError:
            return False  # unset (or not a boolean, which git itself would refuse to commit)

    def _sign_args(self) -> list[str]:
        # commit-tree is plumbing: it signs only when asked, whatever commit.gpgsign says.
        if self._signing is None:
            self._signing = self.signing()
        return ["-S"] if self._signing else []

    def ensure_can_sign(self) -> None:
        """With ``commit.gpgsign`` set, sign a throwaway commit now (git signs with gpg, ssh or
        x509 per ``gpg.format``), so a missing key stops training before any model call
        instead of after it; the probe commit is never referenced."""
        if not self._sign_args():
            return
        head = self.head_sha()
        tree = self._git.write_tree() if head is None else f"{head}^{{tree}}"
        try:
            self._git_stdin("commit-tree", tree, "-S", data=b"skillvc: signing probe\n")
        except git.GitCommandError as exc:
            raise SkillvcError(
                "commit.gpgsign is set, but git cannot sign a commit "
                f"({_git_reason(exc).rstrip('.')}): training would write commits it cannot sign.",
                hint="Fix signing ('git commit --allow-empty -S -m test' must work), or turn it "
                "off for this repository: git config commit.gpgsign false.",
            ) from None

    def commit_files(
        self,
        files: Mapping[str, bytes],
        message: str,
        trailers: Mapping[str, str] = {},  # noqa: B006 - read only, never mutated
        expected_parent: str | None = None,
    ) -> str:
        """``commit_file`` for several files of one skill package, as one commit: the branch
        moves once, then every file is written; on failure the ref and every file written so
        far are put back (new files removed)."""
        paths = {self._relpath(relpath): content for relpath, content in files.items()}
        for path in paths:
            self.ensure_clean(path)
        head = self.head_sha()
        if expected_parent is not None:
            expected = self.resolve(expected_parent)
            if expected != head:
                raise StateConflict(
                    f"HEAD is at {_short(head)}, not at the expected parent {_short(expected)}."
                )
        return self._build_and_move(
            paths,
            message,
            head,
            trailers,
            lambda sha: self._move_and_write(paths, sha, head, message),
        )

    def _move_and_write(
        self, paths: Mapping[str, bytes], new: str, head: str | None, message: str
    ) -> None:
        # An all-zero old value makes update-ref insist the branch does not exist yet.
        old = head if head is not None else "0" * len(new)
        reflog = f"skillvc: {message.splitlines()[0] if message.strip() else ', '.join(paths)}"
        # HEAD, not the branch name: git follows the symref, or moves HEAD when detached.
        self._move_ref("HEAD", new, old, reflog, head, ", ".join(paths))
        before = {
            path: (self.root / path).read_bytes() if (self.root / path).exists() else None
            for path in paths
        }
        try:
            for path, content in paths.items():
                (self.root / path).parent.mkdir(parents=True, exist_ok=True)
                self.restore_file(path, content)
        except BaseException:
            first = True
            for path, old_bytes in before.items():
                # The ref is put back once; each file gets its old bytes (or goes, if new).
                if first:
                    self._undo_commit(new, old, self.root / path, old_bytes)
                    first = False
                else:
                    self._undo_file(self.root / path, old_bytes)
            with contextlib.suppress(git.GitCommandError):
                self._git.reset("-q", "--", *(_literal(p) for p in paths))
            raise

    def commit_file(
        self,
        relpath: str,
        content: bytes,
        message: str,
        trailers: Mapping[str, str] = {},  # noqa: B006 - read only, never mutated
        expected_parent: str | None = None,
    ) -> str:
        """Commit ``content`` as ``relpath`` on the current branch (or detached HEAD).

        Raises DirtySkillFile when the file has local changes and StateConflict when HEAD is
        not (or no longer) ``expected_parent``. Returns the new commit's sha.
        """
        return self.commit_files({relpath: content}, message, trailers, expected_parent)

    def store_candidate(
        self,
        ref: str,
        relpath: str,
        content: bytes,
        message: str,
        parent: str,
        trailers: Mapping[str, str] = {},  # noqa: B006 - read only, never mutated
    ) -> str:
        """Keep a commit under ``ref`` (which must be in refs/skillvc/) without moving a branch."""
        return self.store_candidate_files(ref, {relpath: content}, message, parent, trailers)

    def store_candidate_files(
        self,
        ref: str,
        files: Mapping[str, bytes],
        message: str,
        parent: str,
        trailers: Mapping[str, str] = {},  # noqa: B006 - read only, never mutated
    ) -> str:
        """``store_candidate`` for several files of one skill package, as one commit."""
        if not ref.startswith(SKILLVC_REF_PREFIX) or ref == SKILLVC_REF_PREFIX:
            raise ValueError(f"candidate ref {ref!r} must be under {SKILLVC_REF_PREFIX}")
        try:
            self._git.check_ref_format(ref)
        except git.GitCommandError:
            raise ValueError(f"{ref!r} is not a valid git ref name") from None
        return self._build_and_move(
            files,
            message,
            parent,
            trailers,
            lambda sha: self._move_ref(ref, sha, None, "skillvc: store candidate", None, ref),
        )

    def move_branch(self, name: str, new: str, old: str | None) -> None:
        """Point the branch ``name`` at ``new``, only if it is still at ``old`` (None: it must
        not exist yet). Never the checked-out branch: its files would not follow."""
        if name == self.current_branch():
            raise StateConflict(
                f"Branch '{name}' is checked out; skillvc moves only other branches.",
                hint="Switch to another branch, or name another one.",
            )
        ref = f"refs/heads/{name}"
        try:
            self._git.check_ref_format(ref)
        except git.GitCommandError:
            raise ValueError(f"{name!r} is not a valid branch name") from None
        zero = "0" * len(new)
        self._move_ref(ref, new, old or zero, f"skillvc: {name}", None, ref)

    def _move_ref(
        self, ref: str, new: str, old: str | None, reflog: str, head: str | None, what: str
    ) -> None:
        """``git update-ref ref new [old]``; a ref lock another git process holds for a moment
        (gc packing refs, a fetch) is waited out, and a failure says what it was: a moved
        HEAD only when HEAD really moved."""
        args = ["-m", reflog, ref, new, *([old] if old is not None else [])]
        for attempt in range(_LOCK_RETRIES):
            try:
                self._git.update_ref(*args)
                return
            except git.GitCommandError as exc:
                reason = _git_reason(exc)
                if ref == "HEAD" and self.head_sha() != head:
                    raise StateConflict(
                        f"HEAD moved away from {_short(head)} while committing {what}; "
                        "nothing was changed."
                    ) from None
                # A pinned commit that a concurrent gc is moving into a new pack can be
                # briefly invisible to update-ref ("nonexistent object"): asked again too.
                transient = "lock" in reason or "nonexistent object" in reason
                last = attempt == _LOCK_RETRIES - 1
                if last and "nonexistent object" in reason and self._missing_objects([new]):
                    raise _ObjectsVanished() from None  # pruned after all: the caller rebuilds
                if not transient or last:
                    raise StateConflict(
                        f"git could not move {ref} while committing {what}: {reason}",
                        hint="Another git process holds the ref's lock file: wait for it, or "
                        "remove the stale .lock file git names; then run the command again.",
                    ) from None
                time.sleep(0.1 * (attempt + 1))

    def tag(self, name: str, sha: str, message: str | None = None, force: bool = True) -> None:
        """Tag ``sha`` as ``skillvc/<name>``; annotated when ``message`` is given."""
        full = name if name.startswith(TAG_PREFIX) else TAG_PREFIX + name
        commit = self.resolve(sha)
        args = ["-f"] if force else []
        if message is not None:
            from skillvc.secrets import scrub

            args += ["-a", "-m", scrub(message)]
        try:
            self._git.tag(*args, "--", full, commit)
        except git.GitCommandError as exc:
            if not force and f"refs/tags/{full}" in self.refs(f"refs/tags/{full}"):
                raise StateConflict(f"Tag {full} already exists.") from None
            raise SkillvcError(f"Cannot create tag {full}: {_git_reason(exc)}") from None

    # -- history ----------------------------------------------------------------------------

    def refs(self, prefix: str) -> dict[str, str]:
        """Ref name -> commit sha for every ref whose name starts with ``prefix``.

        Annotated tags are peeled to the commit they point at.
        """
        # for-each-ref matches whole path components, so ask for the enclosing directory and
        # filter here; that makes partial prefixes such as "refs/skillvc/rej" work too.
        pattern = prefix[: prefix.rfind("/") + 1] if "/" in prefix else ""
        args = ["--format=%(refname)%00%(objectname)%00%(*objectname)"]
        out = self._git.for_each_ref(*args, *([pattern] if pattern else []))
        result: dict[str, str] = {}
        for line in out.splitlines():
            refname, obj, peeled = line.split("\0")
            if refname.startswith(prefix):
                result[refname] = peeled or obj
        return result

    def commit_info(self, rev: str) -> CommitInfo:
        """Sha, parents, message, trailers and author date of one commit."""
        sha = self.resolve(rev)
        return self._log(["-1", "--no-walk", sha])[0]

    def find_trailer(
        self, key: str, value: str, rev: str = "HEAD", max_count: int = 200
    ) -> str | None:
        """Newest commit on ``rev``'s first-parent line whose trailer ``key`` equals ``value``.

        Used to reconcile after a crash: if the commit an intent asked for exists, it is not
        made again. An unborn HEAD has no commits, so the answer is None.
        """
        if rev == "HEAD" and self.head_sha() is None:
            return None
        start = self.resolve(rev)
        out = self._git.log(
            "-z",
            "--first-parent",
            f"--max-count={max_count}",
            "--format=%H%x00%(trailers:only,unfold)",
            start,
        )
        parts = _split_records(out, 2)
        for i in range(0, len(parts), 2):
            for k, v in _parse_trailers(parts[i + 1]):
                # git treats trailer keys case-insensitively.
                if k.lower() == key.lower() and v == value:
                    return parts[i]
        return None

    def log_file(
        self, relpath: str, rev: str = "HEAD", max_count: int | None = None
    ) -> list[CommitInfo]:
        """Commits reachable from ``rev`` that touch ``relpath``, newest first."""
        path = self._relpath(relpath)
        if rev == "HEAD" and self.head_sha() is None:
            return []
        args = [self.resolve(rev)]
        if max_count is not None:
            args.insert(0, f"--max-count={max_count}")
        return self._log([*args, "--", _literal(path)])

    def changed_files(self, rev: str) -> list[tuple[str, str]]:
        """(status letter, path) of every file commit ``rev`` changes against its first parent
        (against nothing for a root commit), sorted by path."""
        out = self._git.diff_tree(
            "-r", "-z", "--root", "--no-commit-id", "--name-status", self.resolve(rev)
        )
        parts = [p for p in out.split("\x00") if p]
        # No rename detection (diff-tree's default): every record is a status and one path.
        return sorted(zip(parts[0::2], parts[1::2], strict=True), key=lambda sp: sp[1])

    def diff(self, a: str, b: str, relpath: str) -> str:
        """Unified diff of ``relpath`` between revisions ``a`` and ``b`` ("" when equal)."""
        path = self._relpath(relpath)
        sha_a, sha_b = self.resolve(a), self.resolve(b)
        return str(
            self._git.diff(
                "--no-color",
                "--no-ext-diff",
                sha_a,
                sha_b,
                "--",
                _literal(path),
                strip_newline_in_stdout=False,
            )
        )

    def blame(self, relpath: str, rev: str = "HEAD") -> list[tuple[str, str]]:
        """(commit sha, line text without newline) for every line of ``relpath`` at ``rev``."""
        path = self._relpath(relpath)
        sha = self.resolve(rev)
        self.read_file(path, sha)  # raises SkillFileMissing with a clear message
        raw: bytes = self._git.blame(
            "--porcelain", sha, "--", path, stdout_as_string=False, strip_newline_in_stdout=False
        )
        lines: list[tuple[str, str]] = []
        current = ""
        for line in raw.decode("utf-8", errors="replace").split("\n"):
            if line.startswith("\t"):
                lines.append((current, line[1:]))
            elif _BLAME_HEADER.match(line):
                current = line.split(" ", 1)[0]
        return lines

    # -- helpers ----------------------------------------------------------------------------

    def _relpath(self, relpath: str | os.PathLike[str]) -> str:
        """``relpath`` as a normalised posix path relative to the root; never escapes it."""
        raw = Path(relpath)
        if raw.is_absolute():
            try:
                raw = raw.resolve().relative_to(self.root.resolve())
            except ValueError:
                raise PathOutsideRepo(
                    f"{relpath} is outside the repository at {self.root}."
                ) from None
        norm = posixpath.normpath(raw.as_posix())
        parts = norm.split("/")
        # ".GIT" is the git directory too on case-insensitive file systems (macOS, Windows).
        if norm in ("", ".") or ".." in parts or ".git" in (p.lower() for p in parts):
            raise PathOutsideRepo(f"{relpath} is not a file path inside the repository.")
        return norm

    def _git_stdin(self, command: str, *args: str, data: bytes) -> str:
        """Run ``git <command> <args>`` with ``data`` on stdin (GitPython wants a real file)."""
        with tempfile.TemporaryFile() as stdin:
            stdin.write(data)
            stdin.seek(0)
            run = getattr(self._git, command.replace("-", "_"))
            return str(run(*args, istream=stdin))

    @contextmanager
    def _temp_index(self) -> Iterator[dict[str, str]]:
        """An environment pointing GIT_INDEX_FILE at a fresh index inside .git, removed after."""
        # Inside .git so it is on the same filesystem and never shows up as an untracked file.
        with tempfile.TemporaryDirectory(prefix="skillvc-index-", dir=self.git_repo.git_dir) as d:
            yield {"GIT_INDEX_FILE": os.path.join(d, "index")}

    def _tree_mode(self, path: str, env: Mapping[str, str]) -> str:
        """100755 if ``path`` is already executable in the temp index, else 100644.

        Keeping the executable bit matches what `git add` records from the working tree
        file, whose mode commit_file preserves, so HEAD and index agree afterwards.
        """
        out = self._git.ls_files("-s", "-z", "--", _literal(path), env=env)
        if out.startswith(("120000 ", "160000 ")):
            # Committing a regular file there would silently replace the user's link (or
            # submodule) with a copy; the file it points to is the one to train.
            kind = "a symbolic link" if out.startswith("120000 ") else "a submodule"
            raise SkillvcError(
                f"{path} is {kind} in git, not a regular file.",
                hint="Point [skill] path in skillvc.toml at the file itself.",
            )
        return "100755" if out.startswith("100755 ") else "100644"

    def _log(self, args: list[str]) -> list[CommitInfo]:
        out = self._git.log("-z", f"--format={_LOG_FORMAT}", *args)
        parts = _split_records(out, _LOG_FIELDS)
        infos = []
        for i in range(0, len(parts), _LOG_FIELDS):
            sha, parents, date, subject, trailer_text, body = parts[i : i + _LOG_FIELDS]
            infos.append(
                CommitInfo(
                    sha=sha,
                    parents=tuple(parents.split()),
                    subject=subject,
                    message=body.rstrip("\n"),
                    trailers=dict(_parse_trailers(trailer_text)),
                    authored_at=date,
                )
            )
        return infos

    def _undo_commit(self, new: str, old: str, target: Path, old_bytes: bytes | None) -> None:
        """Put the ref and the working-tree file back after commit_file failed midway."""
        try:
            if set(old) == {"0"}:
                self._git.update_ref("-d", "HEAD", new)
            else:
                self._git.update_ref("-m", "skillvc: undo failed commit", "HEAD", old, new)
        except git.GitCommandError:
            pass  # someone else moved it since; theirs wins and there is nothing to restore
        self._undo_file(target, old_bytes)

    @staticmethod
    def _undo_file(target: Path, old_bytes: bytes | None) -> None:
        try:
            if old_bytes is None:
                target.unlink(missing_ok=True)
            elif not target.exists() or target.read_bytes() != old_bytes:
                write_atomic(target, old_bytes)
        except OSError:
            pass  # the original error is the one worth reporting


# -- module helpers ---------------------------------------------------------------------------


def ensure_gitignore(root: Path, entry: str) -> bool:
    """Append ``entry`` to ``root/.gitignore`` unless a line already says it; True if added."""
    path = Path(root) / ".gitignore"
    # errors="replace": a .gitignore in another encoding is only searched here, never rewritten.
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    # "/.skillvc/", "/.skillvc", ".skillvc/" and ".skillvc" all ignore the root .skillvc/.
    if entry.strip().strip("/") in (line.strip().strip("/") for line in text.splitlines()):
        return False
    separator = "\n" if text and not text.endswith("\n") else ""
    with path.open("a", encoding="utf-8") as f:
        f.write(f"{separator}{entry.strip()}\n")
    return True


def _git_reason(exc: git.GitCommandError) -> str:
    """git's own error line from ``exc``, without GitPython's "stderr: '...'" wrapping."""
    text = str(exc.stderr).strip()
    if text.startswith("stderr:"):
        text = text[len("stderr:") :].strip().strip("'")
    lines = [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("hint:")
    ]
    reason = lines[0] if lines else f"git exited with status {exc.status}"
    for prefix in ("fatal: ", "error: "):
        reason = reason.removeprefix(prefix)
    return reason.rstrip(".") + "."


def _literal(path: str) -> str:
    """A pathspec that matches ``path`` exactly, even if it contains glob characters."""
    return f":(literal){path}"


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "an unborn branch"


def _with_trailers(message: str, trailers: Mapping[str, str]) -> str:
    """``message`` plus a trailer block, always ending in one newline; both pass the
    redaction pipeline first (a commit message is pushed and shown in pull requests)."""
    from skillvc.secrets import scrub

    body = scrub(message).rstrip("\n") + "\n"
    if not trailers:
        return body
    lines = []
    for key, value in trailers.items():
        # A bad key or a multi-line value would silently turn the block into plain text.
        if not _TRAILER_KEY.match(key):
            raise ValueError(f"invalid trailer key {key!r}")
        if "\n" in str(value) or "\r" in str(value):
            raise ValueError(f"trailer {key!r} must be a single line")
        lines.append(f"{key}: {scrub(str(value))}")
    return body + "\n" + "\n".join(lines) + "\n"


def _parse_trailers(text: str) -> list[tuple[str, str]]:
    """``Key: value`` lines as printed by ``%(trailers:only,unfold)``."""
    pairs = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            pairs.append((key.strip(), value.strip()))
    return pairs


def _split_records(out: str, fields: int) -> list[str]:
    """Fields of `git log -z` output whose records each have ``fields`` NUL-separated fields."""
    if not out:
        return []
    parts = out.split("\0")
    # tformat ends every record with NUL, which leaves one empty string at the end.
    if len(parts) % fields == 1 and parts[-1] == "":
        parts.pop()
    if len(parts) % fields:
        raise SkillvcError("git log printed output skillvc cannot parse.")
    return parts


def write_atomic(target: Path, content: bytes) -> None:
    """Replace ``target`` with ``content`` in one step, keeping its permission bits."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.skillvc-{uuid.uuid4().hex[:8]}.tmp")
    # 0o666 lets the umask decide for a new file, as any editor would.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# In-progress git operations, by the file git keeps in the git dir while each one runs, with
# what the user can do about it. Training commits on top of HEAD, so it must not start in the
# middle of one: its commits would land inside someone else's merge, rebase or pick.
_IN_PROGRESS = (
    ("rebase-merge", "a rebase", "git rebase --continue", "git rebase --abort"),
    ("rebase-apply/applying", "a 'git am'", "git am --continue", "git am --abort"),
    ("rebase-apply", "a rebase", "git rebase --continue", "git rebase --abort"),
    ("MERGE_HEAD", "a merge", "git commit", "git merge --abort"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue", "git cherry-pick --abort"),
    ("REVERT_HEAD", "a revert", "git revert --continue", "git revert --abort"),
)


def ensure_ready_to_train(repo: SkillRepo, *, branch: str | None = None) -> None:
    """Refuse (StateConflict, exit 4) a repository where training must not start: a git
    operation in progress, a held index lock, or a detached HEAD (allowed when ``branch``
    is set: training then creates or checks out that branch first)."""
    git_dir = Path(repo.git_repo.git_dir)
    for marker, what, finish, abort in _IN_PROGRESS:
        if (git_dir / marker).exists():
            raise StateConflict(
                f"{what[0].upper()}{what[1:]} is in progress in {repo.root}.",
                hint=f"Finish it ('{finish}') or abandon it ('{abort}'), then train again.",
            )
    if (git_dir / "BISECT_LOG").exists():
        raise StateConflict(
            f"A git bisect is in progress in {repo.root}.",
            hint="End it with 'git bisect reset', then train again.",
        )
    # Every lock file a commit of training needs: the index (the skill's entry is updated),
    # HEAD and the branch it moves (also the one --branch creates), packed-refs. Reported
    # now, before any model call, not as a failed commit after the spending.
    common = Path(repo.git_repo.common_dir)
    branches = {repo.current_branch(), branch} - {None}
    locks = [git_dir / "index.lock", git_dir / "HEAD.lock", common / "packed-refs.lock"]
    locks += [common / "refs" / "heads" / f"{name}.lock" for name in sorted(branches, key=str)]
    for lock in locks:
        if lock.exists():
            raise StateConflict(
                f"{lock} exists: another git process may be running in this repository.",
                hint="Wait for it to finish; if no git process is running, the lock is stale: "
                f"remove it (rm {lock}) and train again.",
            )
    if branch is None and repo.current_branch() is None and repo.head_sha() is not None:
        raise StateConflict(
            f"HEAD is detached (at {_short(repo.head_sha())}), so accepted edits would be "
            "committed on no branch.",
            hint="Check out a branch ('git switch <branch>'), or train on a new branch from "
            "here with 'skillvc train --branch NAME' (or [train] branch in skillvc.toml).",
        )

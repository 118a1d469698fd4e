"""The one user-facing error family.

Every error a user can cause or fix is a ``SkillvcError`` subclass with a one-line docstring.
The CLI prints ``message`` as one sentence, then ``hint`` (what to do next), and exits with
``exit_code``. Exit codes are stable and documented in docs/exit-codes.md:

    1  generic error            4  state conflict (dirty file, locked, budget)
    2  usage error (click)      5  bad data (database, config, task set, skill document)
    3  something not found      6  model backend failure
    7  check found a regression 70 unexpected internal error

Messages never contain secrets: backends redact keys before raising (see ``redact``), and
the CLI scrubs every message again before printing it (``skillvc.secrets``).
"""

from __future__ import annotations

import errno
import os
import re

from skillvc.secrets import scrub


class SkillvcError(Exception):
    """Base of every error skillvc reports to a user."""

    exit_code = 1
    hint = ""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return self.message


# -- 3: not found -----------------------------------------------------------------------------


class NotFound(SkillvcError):
    """Something the command needs does not exist."""

    exit_code = 3


class NotAGitRepo(NotFound):
    """The directory is not inside a git repository."""

    hint = "Run it inside a skills repository, or run 'skillvc init' to create one."


class NotInitialised(NotFound):
    """The repository has no skillvc.toml or no .skillvc/ directory."""

    hint = "Run 'skillvc init' in the repository first."


class SkillFileMissing(NotFound):
    """The configured skill file does not exist."""

    hint = "Create the file or point [skill] path in skillvc.toml at an existing one."


class UnknownEventId(NotFound):
    """No event, run or commit has the id the user gave."""

    hint = "List ids with 'skillvc log' or 'skillvc runs'."


class NotAPackageFile(NotFound):
    """A path given on the command line names no file of the configured skill package."""


class UnknownRevision(NotFound):
    """A git revision does not name a commit."""

    hint = "Use a branch, tag or commit sha that 'git rev-parse' understands."


# -- 4: state conflict ------------------------------------------------------------------------


class StateConflict(SkillvcError):
    """The repository or the log is in a state the command must not overwrite."""

    exit_code = 4


class DirtySkillFile(StateConflict):
    """The skill file has uncommitted changes."""

    hint = "Commit or stash your changes to the skill file first."


class Locked(StateConflict):
    """Another skillvc process is writing to this repository's event log."""

    hint = "Wait for it to finish, or stop it; readers such as 'skillvc log' still work."


class LogRepoMismatch(StateConflict):
    """The event log names a commit this repository does not have (a copied or carried log)."""

    hint = (
        "Fetch skillvc's refs from the repository the run was made in: git fetch origin "
        "'refs/skillvc/*:refs/skillvc/*' 'refs/tags/skillvc/*:refs/tags/skillvc/*'; or start "
        "over with 'skillvc train --new' (the old log is kept)."
    )


class BudgetExceeded(StateConflict):
    """The run stopped at a step boundary because it reached its budget."""

    hint = "Resume it with a higher --budget-usd."


class RunFailed(StateConflict):
    """The run stopped because too many model calls failed; it can be resumed."""

    hint = "Fix the cause, then run 'skillvc train' again to resume."


class LogNotWritable(StateConflict):
    """The event log (or its directory) cannot be written: read-only or not ours."""

    hint = (
        "Make .skillvc/ and the files in it writable by you (e.g. chmod -R u+w .skillvc), or "
        "run skillvc as their owner; the log itself is not damaged."
    )


class DiskFull(StateConflict):
    """A write failed because the disk (or the user's quota) is full."""

    hint = (
        "Free some disk space, then run the command again; the failed write was undone, so "
        "nothing is half-written."
    )


class PermissionDenied(StateConflict):
    """The operating system refused skillvc access to a file it needs."""

    hint = "Give your user access to it (see 'ls -l'), or run skillvc as the repository's owner."


# -- 5: bad data ------------------------------------------------------------------------------


class BadData(SkillvcError):
    """A file skillvc reads is not in the form it needs."""

    exit_code = 5


class NotADatabase(BadData):
    """The event log file is not a SQLite database."""

    hint = "Move the file aside; 'skillvc init' creates a fresh .skillvc/events.db."


class LogDamaged(BadData):
    """The event log fails SQLite's integrity check, or an event in it cannot be read."""

    hint = (
        "Run 'skillvc fsck' to see what is damaged; 'skillvc fsck --repair' copies every "
        "readable event into a new log and keeps the damaged one aside."
    )


class NotASkillvcLog(BadData):
    """.skillvc/events.db is another application's SQLite database, not skillvc's log."""

    hint = "Move the file aside (it is not skillvc's); 'skillvc init' then creates a fresh log."


class SchemaTooNew(BadData):
    """The event log was written by a newer skillvc."""

    hint = "Upgrade skillvc (pip install -U skillvc) to read it."


class ConfigError(BadData):
    """skillvc.toml or a command-line override is invalid."""

    hint = "Fix skillvc.toml; its comments and the manual's tables (docs/) list every key."


class UnknownConfigName(ConfigError):
    """skillvc.toml names a section or key that skillvc does not know."""

    def __init__(
        self, base: str, hint: str, *, section: str, key: str | None = None, line: int | None = None
    ) -> None:
        super().__init__(base + (f" on line {line}" if line else "") + ".", hint)
        self.base, self.section, self.key = base, section, key

    def at(self, line: int | None) -> UnknownConfigName:
        """The same error naming the line of skillvc.toml that holds the name."""
        return UnknownConfigName(
            self.base, self.hint, section=self.section, key=self.key, line=line
        )


class SkillDocumentError(BadData):
    """A skill document cannot be read or would be broken by an edit."""

    hint = "Fix the skill file by hand, then commit it."


class PatchError(BadData):
    """A unified diff cannot be parsed or does not apply to the skill."""

    hint = "Produce the diff with 'git diff' against the current skill file."


class PathOutsideRepo(BadData):
    """A configured or patched path leaves the work tree or points into .git/ or .skillvc/."""

    hint = "Use a path relative to the repository root, inside it (not under .git/ or .skillvc/)."


class TaskSetError(BadData):
    """A task file is unreadable or an item is malformed."""

    hint = "Fix the named file and line, then run the command again."


class ScorerError(BadData):
    """A scorer is unknown, misconfigured or raised while scoring."""

    hint = "Check [tasks] scorer in skillvc.toml; docs/tasks.md lists the scorers."


class ToolsError(BadData):
    """A [tools] source or a [tasks] environment cannot start (before any model call)."""

    hint = "Fix the named tool source in [tools] of skillvc.toml; docs/tools.md shows the forms."


class SkillOptError(BadData):
    """A SkillOpt config or run directory cannot be read, translated or imported."""

    hint = "docs/skillopt.md says what skillvc reads of SkillOpt's configs and run directories."


# -- 6: model backends ------------------------------------------------------------------------


class BackendError(SkillvcError):
    """A model backend failed in a way retrying did not fix."""

    exit_code = 6
    hint = "Run 'skillvc doctor' to check models, credentials and reachability."


class AuthenticationFailed(BackendError):
    """A model backend refused the credentials."""

    hint = "Check the API key environment variable named in 'skillvc doctor'."


class OptimizerOutputError(BackendError):
    """The optimizer's answer could not be parsed into edits, even after one repair."""


# -- 7: regression ----------------------------------------------------------------------------


class RegressionFound(SkillvcError):
    """'skillvc check' found that the change scores worse than its base."""

    exit_code = 7
    hint = "Look at the flipped items, or pass --allow-drop to tolerate a small drop."


class ApplyRegression(RegressionFound):
    """'skillvc apply' found that the patched skill scores worse on val than HEAD."""

    hint = "Pass --force to commit it anyway, or --no-gate to commit without scoring it."


class ConfigChanged(RegressionFound):
    """'skillvc check' found that the change edits skillvc.toml, a task file or the skill's path."""

    hint = (
        "The check judged the change by the base's settings and tasks; a maintainer who accepts "
        "the new ones reruns it with --allow-config-change."
    )


class SkillDeleted(RegressionFound):
    """'skillvc check' found that the change deletes the skill it is configured to check."""

    hint = (
        "Restore the file, or move it with 'git mv' and point [skill] path in skillvc.toml at "
        "its new place."
    )


MESSAGE_MAX_CHARS = 1000  # an error line quotes at most this much (a 5 MB value: never whole)
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")


def one_line(text: str, limit: int = MESSAGE_MAX_CHARS) -> str:
    """``text`` as one printable line of at most about ``limit`` characters: a newline or other
    control character (from a file name, a table name, a config value) is escaped, so it can
    never split the ``Error:`` line or fake a second one; an overlong middle is cut."""
    text = _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 4
    return f"{text[:head]}… [{len(text) - head - tail:,} characters left out] …{text[-tail:]}"


class Lines(str):
    """Text skillvc writes across several lines on purpose (a snippet to paste into a config
    file). The error printer keeps the breaks between ``lines`` and still escapes control
    characters inside each one, so a value interpolated into a line cannot add a line."""

    lines: tuple[str, ...]

    def __new__(cls, *lines: str) -> Lines:
        self = super().__new__(cls, "\n".join(lines))
        self.lines = lines
        return self


def error_lines(text: str) -> tuple[str, ...]:
    """The lines an error message or hint prints as: a ``Lines``'s own lines, else one line
    (every newline in it escaped by ``one_line``, wherever it came from)."""
    return text.lines if isinstance(text, Lines) else (text,)


INTERNAL_ERROR_EXIT_CODE = 70
RAISE_ENV = "SKILLVC_RAISE_ERRORS"


def should_reraise() -> bool:
    """True when the user asked for full tracebacks (SKILLVC_RAISE_ERRORS=1)."""
    return os.environ.get(RAISE_ENV, "") not in ("", "0")


def redact(text: str, secrets: list[str] | tuple[str, ...] = ()) -> str:
    """Remove known secret values and anything shaped like a credential from ``text``.

    Kept for its callers; ``skillvc.secrets.scrub`` decides what a secret is (the values of
    key variables in every encoding, ``secrets`` too, and key shapes).
    """
    return scrub(text, secrets)


_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_DAMAGED = re.compile(r"malformed|not a database|database corrupt", re.I)
_READ_ONLY_ERRNOS = {errno.EROFS}


def storage_error(exc: BaseException, path: object = None) -> SkillvcError | None:
    """The user-facing error for an OS or SQLite failure to write, or None if it is not one.

    A full disk and a read-only file system or log are conditions of the machine, not bugs:
    they get one sentence and a hint instead of a crash. SQLite undoes the failed statement
    (or transaction) itself, so nothing in the log is half-written.
    """
    import sqlite3

    where = f" {path}" if path is not None else ""
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        name = f" {exc.filename}" if exc.filename else where
        if not name:
            return DiskFull(f"The disk is full: a write failed ({exc.strerror}).")
        return DiskFull(f"The disk is full: writing{name} failed ({exc.strerror}).")
    if isinstance(exc, OSError) and exc.errno in _READ_ONLY_ERRNOS:
        name = f" {exc.filename}" if exc.filename else where
        return LogNotWritable(f"Cannot write{name}: the file system is read-only.")
    if isinstance(exc, PermissionError):
        name = f" {exc.filename}" if exc.filename else where
        return PermissionDenied(f"Permission denied:{name or ' a file skillvc needs'}.")
    if isinstance(exc, sqlite3.DatabaseError) and _DAMAGED.search(str(exc)):
        # Raised wherever a read reaches a damaged page or a hand-edited payload: the log's
        # state, not a bug, and never a reason to write more into it.
        return LogDamaged(f"The event log{where} is damaged ({exc}).")
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc)
        if "database or disk is full" in text:
            return DiskFull(f"The disk is full: the event log{where} could not be written.")
        if "readonly" in text or "read-only" in text:
            return LogNotWritable(f"The event log{where} is read-only ({text}).")
    return None


class SkillNotNamed(SkillvcError):
    """skillvc.toml lists several skills and the command needs one (--skill NAME)."""

    exit_code = 2


class UnknownSkill(NotFound):
    """--skill names no skill of skillvc.toml."""

    hint = "Name a [skills.<name>] table, a skill's frontmatter name or its path."


class ExecutorFailed(BackendError):
    """The executor lost a task's worker or node more often than its retries allow."""

    hint = "Check the Ray cluster ('ray status'), or set [train] executor = \"threads\"."

"""Agent processes and scratch folders alive in this process, ended together when a signal stops it.

Every agent CLI runs in its own process group (``command.start_process``) and its own scratch
folder (``skillvc-agent-*``, ``skillvc-task-*``). Both are registered here while they live.
``stop_on_signals`` (used by the CLI around each command) makes SIGINT, SIGTERM and SIGHUP
behave alike: the first one marks the process as stopping, kills every registered process
group and raises ``Interrupted`` in the main thread; the worker threads then see their agent
die, raise ``Interrupted`` too (never a task failure that a log could record), and remove
their scratch folders on the way out. A second signal while that cleanup runs removes what
is left at once and exits (``os._exit``): a user who asks twice is not kept waiting.

Invariants: after ``stopping()`` is set no new agent process starts (``check_stopping``); a
process registered after the kill sweep kills itself (``register_process`` checks the flag
after registering, the handler sets it before sweeping, so no process slips between them);
no lock is taken here, because the handler runs on the main thread, which may be inside
``register_*`` when the signal arrives (list/set operations are atomic under the GIL).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)

_groups: set[int] = set()
_dirs: set[str] = set()
_stopping: list[int] = []  # the signal that stopped this process, once one did


class Interrupted(KeyboardInterrupt):
    """A signal (SIGINT, SIGTERM, SIGHUP) stopped skillvc; ``signum`` says which."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


def stopping() -> int | None:
    """The signal that is stopping this process, or None."""
    return _stopping[0] if _stopping else None


def check_stopping() -> None:
    """Raise ``Interrupted`` if a signal is stopping this process: start nothing new."""
    signum = stopping()
    if signum is not None:
        raise Interrupted(signum)


def register_process(pid: int) -> None:
    """Track the process group led by ``pid``; killed at once if a signal already came."""
    _groups.add(pid)
    if stopping() is not None:
        kill_group(pid)


def unregister_process(pid: int) -> None:
    _groups.discard(pid)


@contextmanager
def tracked_dir(path: Path) -> Iterator[Path]:
    """Track a scratch folder while the block runs, and remove it afterwards, whatever happened."""
    _dirs.add(str(path))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        _dirs.discard(str(path))


def track_path(path: str) -> None:
    """Track a path some agent CLI writes outside its scratch folder, to remove on a signal."""
    _dirs.add(path)


def remove_path(path: str) -> None:
    _remove(path)
    _dirs.discard(path)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):  # never made, or gone already
            os.unlink(path)


def kill_group(pid: int) -> None:
    try:
        if os.name == "posix":
            # Also after the leader was reaped: its id stays taken while any member of the
            # group lives, and an empty group just gives ProcessLookupError.
            os.killpg(pid, signal.SIGKILL)
        else:  # pragma: no cover - non-POSIX
            os.kill(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError, OSError):
        pass  # nothing left in the group


def kill_all() -> None:
    for pid in list(_groups):
        kill_group(pid)


def remove_dirs() -> None:
    for path in list(_dirs):
        _remove(path)
        _dirs.discard(path)


def _handle(signum: int, frame: FrameType | None) -> None:
    if _stopping:  # the second signal: clean up what is left and go now
        kill_all()
        remove_dirs()
        os._exit(128 + signum)
    _stopping.append(signum)
    kill_all()
    raise Interrupted(signum)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise ``Interrupted`` while the block runs (main thread only;
    elsewhere, and for a signal the caller ignores, e.g. SIGHUP under ``nohup``, nothing
    changes). The previous handlers are restored afterwards, and the stopping flag cleared."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in SIGNALS:
        old = signal.getsignal(signum)
        if old is signal.SIG_IGN:
            continue  # nohup, or a parent that asked us to ignore it
        previous[signum] = old
        signal.signal(signum, _handle)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        if _stopping:
            kill_all()
            remove_dirs()
        _stopping.clear()

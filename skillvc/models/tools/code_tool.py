"""The ``python`` tool (``[tools] code = true``): run a snippet in the rollout's scratch directory.

Each call is a fresh ``sys.executable`` process reading the code from its stdin, with the
scratch directory as its working directory (and first on ``sys.path``), so files persist
between calls of one rollout and variables do not. The process gets an environment built
from an allow-list (``PATH``, the locale, ``TZ``, the temp directory, a ``HOME`` that is the
scratch directory, fixed ``PYTHONHASHSEED``), never a copy of ``os.environ``: API keys and
tokens of the user who runs skillvc are not in it.

Invariants: a call ends within its time limit (the process and every process it started are
killed as a group when it overstays); at most half of ``max_output_chars`` characters of
each of stdout and stderr are ever read back into memory (they go to temporary files outside the
scratch directory, and the rest is counted, not read).

This is NOT a security sandbox. The code runs as the user, with the user's file system,
network and installed packages; it can read any file the user can (a credentials file
included), write outside the scratch directory and use all the memory and disk it likes.
Run untrusted models' code in a container or VM.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from skillvc.models.tools.spec import ToolSpec

NAME = "python"
# Copied from the caller's environment when set; nothing else is (see the module docstring).
_ALLOWED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TEMP", "TMP")
_WINDOWS = ("SYSTEMROOT", "WINDIR", "PATHEXT", "COMSPEC")  # Python will not start without them

SPEC = ToolSpec(
    NAME,
    "Run Python code in the working directory and return its exit code, stdout and stderr. "
    "Each call is a new process: files written persist between calls, variables do not. "
    "Print what you want to see.",
    {
        "type": "object",
        "properties": {"code": {"type": "string", "description": "a Python program"}},
        "required": ["code"],
        "additionalProperties": False,
    },
)


def code_environment(workdir: Path) -> dict[str, str]:
    """The environment the code runs in: an allow-list, without the user's credentials."""
    names = _ALLOWED + (_WINDOWS if os.name == "nt" else ())
    env = {k: os.environ[k] for k in names if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env.update(
        HOME=str(workdir),
        USERPROFILE=str(workdir),
        PYTHONHASHSEED="0",
        PYTHONIOENCODING="utf-8",
        PYTHONUNBUFFERED="1",  # what was printed before a kill is kept
        PYTHONDONTWRITEBYTECODE="1",  # no __pycache__ in the scratch directory
    )
    return env


def _read_capped(stream: IO[bytes], limit: int) -> tuple[str, int]:
    """The first ``limit`` characters of a file, and how many bytes past them were not read."""
    size = os.fstat(stream.fileno()).st_size
    stream.seek(0)
    head = stream.read(limit * 4).decode("utf-8", errors="replace")  # 4: UTF-8's widest
    if len(head) <= limit and size <= limit * 4:
        return head, 0
    kept = head[:limit]
    return kept, size - len(kept.encode("utf-8", errors="replace"))


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if os.name == "nt":
        proc.kill()
        return
    # The group: code that started its own processes leaves none behind.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class CodeSource:
    """The one ``python`` tool (see the module docstring)."""

    def __init__(self, max_output_chars: int = 8000) -> None:
        self.max_output_chars = max_output_chars
        # Each stream gets half, less room for the labels and markers, so that the whole
        # result fits the toolbox's cut and each stream's own marker (exact bytes) survives.
        self._stream_chars = max(100, (max_output_chars - 120) // 2)

    def specs(self) -> Sequence[ToolSpec]:
        return (SPEC,)

    def fingerprint(self) -> Mapping[str, Any]:
        # Another interpreter may answer the same code differently.
        return {"source": "code", "python": platform.python_version()}

    def call(
        self, name: str, arguments: Mapping[str, Any], *, workdir: Path, timeout_s: float
    ) -> str:
        code = str(arguments["code"])
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                [sys.executable, "-"],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                cwd=workdir,
                env=code_environment(workdir),
                start_new_session=os.name != "nt",
            )
            try:
                proc.communicate(code.encode("utf-8", errors="replace"), timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill(proc)
                proc.wait()
                raise TimeoutError(
                    f"the code ran past the {timeout_s:g} s limit and was stopped"
                ) from None
            finally:
                if proc.poll() is None:  # an exception other than the timeout
                    _kill(proc)
                    proc.wait()
            _kill(proc)  # background processes the code left behind
            parts = [f"exit code: {proc.returncode}"]
            for label, stream in (("stdout", out), ("stderr", err)):
                text, cut = _read_capped(stream, self._stream_chars)
                if text or cut:
                    note = f"\n[{cut} more bytes of {label} cut]" if cut else ""
                    parts.append(f"{label}:\n{text}{note}")
        return "\n".join(parts)

    def close(self) -> None:
        pass

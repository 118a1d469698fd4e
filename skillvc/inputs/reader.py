"""The one way skillvc reads a file a user or a pull request gave it.

Invariants kept here:
- Only a regular file is read (after following links: ``inside_repo`` has already refused a
  link that leaves the work tree). A named pipe, a device, a socket or a directory is refused
  by name before anything blocks on it: opening uses ``O_NONBLOCK`` and the kind is checked on
  the open descriptor, so a file swapped for a pipe between the look and the open is refused
  too, never waited on.
- At most ``max_bytes`` are read; a larger file is refused, never read whole into memory.
- Text is strict UTF-8: a UTF-8 byte-order mark is dropped (editors on Windows write one), a
  UTF-16/32 one is named, any other bad byte is refused with its offset.
- JSON refuses what Python's json module accepts but JSON does not: ``NaN``/``Infinity``
  constants, and ``\\ud800``-style escapes of lone surrogates (they cannot be written back as
  UTF-8, so they would crash later, far from the file that held them).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillvc.core.errors import BadData, PermissionDenied, SkillvcError

MiB = 1024 * 1024
# Caps by kind of file: far above any real one, low enough that a mistake (a dataset dump
# named as the config, /dev/zero behind a link) is refused instead of filling memory.
CONFIG_MAX_BYTES = 1 * MiB
SKILL_MAX_BYTES = 16 * MiB
TASKS_MAX_BYTES = 512 * MiB

ErrorFactory = Callable[[str], SkillvcError]

_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def file_kind(mode: int) -> str | None:
    """What a non-regular file is, in words ("a named pipe"), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _not_regular(what: str, kind: str) -> str:
    return f"{what} is {kind}, not a regular file"


def check_regular(path: Path, what: str, error: ErrorFactory = BadData) -> bool:
    """True when ``path`` is a regular file (links followed), False when it does not exist;
    raises ``error`` naming what it is otherwise (a pipe, a device, a directory, a socket)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return False
    except NotADirectoryError:
        return False
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: a symlink loop
            raise error(f"{what} is a symbolic link that loops.") from None
        raise error(f"{what} cannot be read ({exc.strerror}).") from None
    kind = file_kind(info.st_mode)
    if kind is not None:
        raise error(_not_regular(what, kind) + ".")
    return True


def read_bytes(
    path: Path,
    what: str,
    *,
    max_bytes: int,
    error: ErrorFactory = BadData,
    missing: ErrorFactory | None = None,
) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them.

    ``what`` names the file in messages ("Task file evals/val.jsonl"); ``error`` builds the
    error for a file that is not a regular file, too large or unreadable; ``missing`` the one
    for a file that does not exist (``error`` when not given).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        raise (missing or error)(f"{what} does not exist.") from None
    except PermissionError:
        raise PermissionDenied(f"Permission denied: {path}.") from None
    except OSError as exc:
        # A socket cannot be opened at all (ENXIO); name it rather than quote the errno.
        check_regular(path, what, error)
        raise error(f"{what} cannot be read ({exc.strerror}).") from None
    try:
        info = os.fstat(fd)
        kind = file_kind(info.st_mode)
        if kind is not None:
            raise error(_not_regular(what, kind) + ".")
        if info.st_size > max_bytes:
            raise error(f"{what} is {_size(info.st_size)}, over the {_size(max_bytes)} limit.")
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, MiB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except IsADirectoryError:
        raise error(_not_regular(what, "a directory") + ".") from None
    except OSError as exc:
        raise error(f"{what} cannot be read ({exc.strerror}).") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew while being read
        raise error(f"{what} is over the {_size(max_bytes)} limit.")
    return data


def decode_text(data: bytes, what: str, error: ErrorFactory = BadData) -> str:
    """``data`` as strict UTF-8 text without a leading UTF-8 byte-order mark."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise error(
                f"{what} is {name} text (it starts with a {name} byte-order mark); skillvc "
                "reads UTF-8 only: save it as UTF-8."
            )
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"{what} is not UTF-8 text (bad byte 0x{data[exc.start]:02x} at offset {exc.start})."
        ) from None


def read_text(
    path: Path,
    what: str,
    *,
    max_bytes: int,
    error: ErrorFactory = BadData,
    missing: ErrorFactory | None = None,
) -> str:
    """``read_bytes`` then ``decode_text``."""
    data = read_bytes(path, what, max_bytes=max_bytes, error=error, missing=missing)
    return decode_text(data, what, error)


def _size(n: int) -> str:
    if n >= MiB:
        return f"{n / MiB:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} bytes"


# -- JSON --------------------------------------------------------------------------------------


class StrictJSONError(ValueError):
    """A JSON text json.loads accepts that is not JSON skillvc can keep (NaN, a lone surrogate)."""


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not a JSON value")


def loads(text: str) -> Any:
    """``json.loads`` that refuses ``NaN``/``Infinity`` and lone surrogate escapes.

    Raises ``json.JSONDecodeError`` for a syntax error (as json does), ``StrictJSONError``
    for the two refusals, ``ValueError``/``RecursionError`` for json's own limits.
    """
    value = json.loads(text, parse_constant=_no_constant)
    if "\\u" in text or "\\U" in text:  # surrogates only come from escapes
        bad = lone_surrogate(value)
        if bad is not None:
            raise StrictJSONError(
                f"it holds the escape \\u{ord(bad):04x}, a lone surrogate that is not a character"
            )
    return value


def lone_surrogate(value: Any) -> str | None:
    """The first lone surrogate code point in any string of ``value`` (walked without
    recursion: ``value`` may be nested as deeply as json allows), or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                return item[exc.start]
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None

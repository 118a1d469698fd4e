"""Paging and colour like git: ``--color=auto|always|never``, ``NO_COLOR``, ``$PAGER``.

A command decorated with ``screen_options`` takes ``--color`` and ``--no-pager``. Its output
goes through a pager only when stdout is a terminal: ``SKILLVC_PAGER``, else ``PAGER``, else
``less -FRX`` (quits when the text fits one screen, keeps colours, leaves the text on screen
when it quits), as git does; an empty pager or ``cat`` means none. Colour is on for a terminal
(and so for the pager) unless ``--color=never``, ``NO_COLOR`` (any non-empty value) or
``TERM=dumb``; ``--color=always`` keeps it in a pipe too and wins over ``NO_COLOR``.

What goes to the pager passes the same secret scrubbing as everything else printed
(``secrets.scrub_values``), and is fitted to the terminal's width before it is handed over.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from skillvc.terminal.fit import fit_text, fitted_output, terminal_width

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_PAGER = "less -FRX"


def color_wanted(choice: str) -> bool | None:
    """``--color``'s choice as click's ``ctx.color``: True/False, or None to ask the stream."""
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return None


def pager_command() -> str | None:
    """The pager to run, or None for none."""
    for name in ("SKILLVC_PAGER", "PAGER"):
        value = os.environ.get(name)
        if value is not None:
            value = value.strip()
            return None if value in ("", "cat") else value
    return DEFAULT_PAGER if shutil.which("less") else None


def screen_options(fn: F) -> F:
    """``--color`` and ``--no-pager`` for a command whose text output may be long (log, show)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, color: str, no_pager: bool, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        ctx.color = color_wanted(color)
        machine = kwargs.get("as_json") or kwargs.get("table_format")  # never paged
        pager = None if no_pager or machine else pager_command()
        width = terminal_width()
        if machine:
            return fn(*args, **kwargs)
        if pager is None or width is None:
            with fitted_output():
                return fn(*args, **kwargs)
        if ctx.color is None:
            ctx.color = True  # the pager shows colour (less -R) where the terminal would
        saved, sys.stdout = sys.stdout, _Paged(width)
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            text, sys.stdout = sys.stdout.getvalue(), saved
            sys.stdout.write(text)  # what was printed before the error is not lost
            raise
        text, sys.stdout = sys.stdout.getvalue(), saved
        if text:
            _page(text, pager, width)
        return result

    options = [
        click.option(
            "--color",
            type=click.Choice(["auto", "always", "never"]),
            default="auto",
            show_default=True,
            help="Colour diffs and decisions: on a terminal (auto), always or never. "
            "NO_COLOR turns auto off.",
        ),
        click.option(
            "--no-pager",
            is_flag=True,
            help="Do not page the output through $PAGER (less -FRX) on a terminal.",
        ),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


class _Paged(io.StringIO):
    """What a paged command prints, kept for the pager; it knows the terminal's width."""

    def __init__(self, columns: int) -> None:
        super().__init__()
        self.columns = columns


def _page(text: str, pager: str, width: int) -> None:
    from skillvc.secrets import scrub_values

    text = fit_text(scrub_values(text), width)
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")  # as git: a short text is printed, not paged
    env.setdefault("LV", "-c")
    sys.stdout.flush()  # the pager writes to the same terminal
    try:
        # Through the shell, as git runs $PAGER: it may hold options and quotes.
        proc = subprocess.Popen(pager, shell=True, stdin=subprocess.PIPE, env=env)  # noqa: S602
    except OSError:
        sys.stdout.write(text)
        return
    assert proc.stdin is not None
    data = text.encode(sys.stdout.encoding or "utf-8", "replace")
    # The reader may quit the pager before the end: not an error.
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(data)
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    try:
        proc.wait()
    except KeyboardInterrupt:
        proc.wait()

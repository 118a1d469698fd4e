"""Progress of long commands (train, eval, check) on stderr: stages, items, calls, rate, cost.

A command makes one ``Progress`` and hands it to the library; the library opens a ``stage``
for each long stretch of work (an evaluation, a step's rollouts, a gate...) with the number
of items it expects, and calls ``advance`` as items finish, from any thread.

Invariants:
- Nothing is ever written to stdout: the stream is stderr (or a sink for tests), so
  ``--json`` and piped output stay clean. ``Progress.off()`` (``-q``) writes nothing at all.
- On a terminal one live line is redrawn in place (at most ~10 times a second); elsewhere
  (CI logs, pipes) plain lines are written at most once every ``interval`` seconds, plus one
  line when each stage ends, so a log stays short.
- Stages run one after another, never nested; ``advance`` outside a stage is ignored.
- Calls "made earlier" (answered by a call made before the stage: ahead of time by this run
  or by an earlier command, so free now) and the cost so far come from the model client's running
  totals (``watch``), so they agree with what the command reports at the end.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, TextIO


class Usage(Protocol):
    """What the progress line needs from a model client's totals (``calls.RoleStats``)."""

    replies: int
    fresh: int
    errors: int
    cost_usd: float
    unpriced: int


LIVE_REFRESH = 0.1  # seconds between redraws of the live line
PLAIN_INTERVAL = 2.0  # seconds between plain lines


@dataclass
class _Stage:
    name: str
    total: int
    started: float
    unit: str = "items"
    done: int = 0
    replies_before: int = 0
    fresh_before: int = 0
    errors_before: int = 0


class Progress:
    """Progress lines for one command. ``write`` receives whole lines (no newline)."""

    def __init__(
        self,
        write: Callable[[str], None] | None,
        *,
        stream: TextIO | None = None,
        interval: float = PLAIN_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._write = write
        self._stream = stream  # set only for a live terminal line
        self._interval = LIVE_REFRESH if stream is not None else interval
        self._clock = clock
        self._usage: Callable[[], Usage] | None = None
        self._stage: _Stage | None = None
        self._last = float("-inf")
        self._drawn = False  # a live line is on screen and must be cleared before a message
        self._lock = threading.Lock()

    @classmethod
    def to_stderr(cls, quiet: bool = False) -> Progress:
        """The progress of a CLI command: a live line on a terminal, plain lines otherwise."""
        if quiet:
            return cls.off()
        stream = sys.stderr
        isatty = getattr(stream, "isatty", None)
        live = bool(isatty and isatty())
        return cls(
            lambda line: print(line, file=sys.stderr, flush=True), stream=stream if live else None
        )

    @classmethod
    def off(cls) -> Progress:
        return cls(None)

    @classmethod
    def lines(cls, write: Callable[[str], None] | None) -> Progress:
        """Plain lines into ``write`` (e.g. ``list.append``); None: off."""
        return cls(write)

    @property
    def enabled(self) -> bool:
        return self._write is not None

    def watch(self, usage: Callable[[], Usage]) -> None:
        """Take calls and cost from ``usage`` (e.g. ``ModelClient.totals``)."""
        self._usage = usage

    def note(self, line: str) -> None:
        """A message line, such as the summary of a training step."""
        if self._write is None:
            return
        with self._lock:
            self._clear()
            self._write(line)

    @contextmanager
    def stage(self, name: str, total: int, unit: str = "items") -> Iterator[None]:
        """A stretch of ``total`` units of work; its closing line is written however it ends."""
        if self._write is None:
            yield
            return
        usage = self._usage() if self._usage else None
        with self._lock:
            self._stage = _Stage(
                name,
                max(0, total),
                self._clock(),
                unit,
                replies_before=usage.replies if usage else 0,
                fresh_before=usage.fresh if usage else 0,
                errors_before=usage.errors if usage else 0,
            )
            self._last = self._clock()  # the first plain line comes after one interval
        try:
            yield
        finally:
            with self._lock:
                stage, self._stage = self._stage, None
                if stage is not None and (stage.total or stage.done):
                    self._clear()
                    # Whole, however wide: the terminal's writer wraps it (cli: fitted_output).
                    self._write(self._line(stage, final=True))

    def advance(self, n: int = 1) -> None:
        """``n`` more items of the current stage are done (thread-safe; no stage: ignored)."""
        if self._write is None or n <= 0:
            return
        with self._lock:
            stage = self._stage
            if stage is None:
                return
            stage.done += n
            now = self._clock()
            if now - self._last < self._interval:
                return
            self._last = now
            if self._stream is not None:
                # One column spare: a line as wide as the terminal wraps on some of them.
                width = shutil.get_terminal_size((100, 20)).columns - 1
                line = self._line(stage, final=False, width=width)
                self._stream.write("\r" + line + "\x1b[K")
                self._stream.flush()
                self._drawn = True
            else:
                self._write(self._line(stage, final=False))

    # Rendering ----------------------------------------------------------------------------

    def _clear(self) -> None:
        if self._drawn and self._stream is not None:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
        self._drawn = False

    def _line(self, stage: _Stage, *, final: bool, width: int | None = None) -> str:
        """The line of ``stage``; with ``width`` (a live terminal line) the parts that do not
        fit are left out by priority: the bar, the rate, the calls' detail, the calls, then
        the stage's name is shortened. Its count, the ETA and the cost always stay."""
        elapsed = max(self._clock() - stage.started, 1e-9)
        rate = stage.done / elapsed
        name = stage.name
        count = f"{stage.done}/{stage.total} {stage.unit}"
        bar = ""
        if self._stream is not None and not final:
            count, bar = f"{stage.done}/{stage.total}", _bar(stage.done, stage.total)
        usage = self._usage() if self._usage else None
        calls = detail = ""
        if usage is not None:
            made = usage.replies - stage.replies_before
            logged = made - (usage.fresh - stage.fresh_before)
            failed = usage.errors - stage.errors_before
            # "made earlier": answered by a call made before this stage, by this run ahead of
            # time (speculation, prefetching) or by an earlier command; it costs nothing now.
            detail = f" ({logged} made earlier" + (f", {failed} failed)" if failed else ")")
            calls = f"{made} calls"
        speed = f"{rate:.1f}/s"
        if final:
            when = f"done in {elapsed:.1f}s"
        elif rate > 0 and stage.total > stage.done:
            when = f"ETA {_duration((stage.total - stage.done) / rate)}"
        else:
            when = ""
        cost = ""
        if usage is not None:
            unknown = f" + {usage.unpriced} unpriced calls" if usage.unpriced else ""
            cost = f"${usage.cost_usd:.4f}{unknown} so far"

        def render(name: str, bar: str, calls: str, detail: str, speed: str) -> str:
            head = f"{name} {bar} {count}" if bar else f"{name}: {count}"
            parts = [head, calls + detail if calls else "", speed, when, cost]
            return ", ".join(p for p in parts if p)

        line = render(name, bar, calls, detail, speed)
        if width is None:
            return line
        for fewer in (
            (name, "", calls, detail, speed),
            (name, "", calls, detail, ""),
            (name, "", calls, "", ""),
            (name, "", "", "", ""),
        ):
            if len(line) <= width:
                return line
            line = render(*fewer)
        if len(line) > width:  # the name gives way last, down to its first character
            room = max(1, len(name) - (len(line) - width) - 1)
            line = render(name[:room] + "…", "", "", "", "")
        return line


def _bar(done: int, total: int, width: int = 20) -> str:
    filled = min(width, width * done // total) if total else 0
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"

"""Tools of a stdio MCP server (``[tools] mcp = [["python", "tools/server.py"]]``).

Talks to the server through the official ``mcp`` SDK (``pip install 'skillvc[mcp]'``), imported
only when a configuration names a server, so skillvc runs without it. One server per argv,
started once per toolbox: a background thread runs its own asyncio event loop, which holds
``stdio_client`` and ``ClientSession`` open for the toolbox's life; rollout threads submit
calls to that loop (``asyncio.run_coroutine_threadsafe``) and wait at most the call timeout,
so any number of them may call at once.

The server runs with the repository root as its working directory (relative paths in its
argv resolve there; ``python`` as the program means the interpreter running skillvc) and an
explicit environment without the user's credentials: ``PATH``, the locale and fixed
``PYTHONHASHSEED``, over the SDK's own short list (``HOME``, ``LOGNAME``, ``SHELL``, ``TERM``,
``USER``).
A server does not see the rollout's scratch directory. Its stderr goes to a temporary file,
whose tail is quoted when it fails.

Invariants: a server that cannot start, exits, or does not finish the MCP handshake within
``startup_timeout_s`` is a ``ToolsError`` naming its argv and its stderr tail, before any
model call. A server that dies later turns the call in flight into an error and is restarted
once (the call is not retried: it may have acted); when the restarted server dies too, every
later call is an error outcome naming the exit, and nothing hangs. ``isError`` results raise
``McpToolError`` carrying the server's own text.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillvc.core.errors import ToolsError
from skillvc.core.hashing import sha256_hex
from skillvc.models.tools.spec import ToolSpec

STARTUP_TIMEOUT_S = 30.0
_PING_S = 3.0  # how long a live server has to answer the ping after a failed call
_CLOSE_S = 10.0
_STDERR_TAIL = 800
_ALLOWED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TEMP", "TMP")
_WINDOWS = ("SYSTEMROOT", "WINDIR", "PATHEXT", "COMSPEC")


def _reason(exc: BaseException) -> str:
    """An exception's message on one line; the first leaf of an exception group (anyio's
    task groups wrap the one error that matters)."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return " ".join(str(exc).split()) or type(exc).__name__


class McpToolError(Exception):
    """A tool result the server marked ``isError``; the message is the server's text."""


def server_environment() -> dict[str, str]:
    """The variables a server gets besides the SDK's defaults: no credentials."""
    names = _ALLOWED + (_WINDOWS if os.name == "nt" else ())
    env = {k: os.environ[k] for k in names if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env.update(PYTHONHASHSEED="0", PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1")
    return env


def _text_of(result: Mapping[str, Any]) -> str:
    """A ``CallToolResult`` (as camelCase JSON) as one text: text blocks joined, others named."""
    parts = []
    for block in result.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "resource":
            resource = block.get("resource") or {}
            parts.append(str(resource.get("text") or f"[resource {resource.get('uri', '')}]"))
        elif kind in ("image", "audio"):
            size = len(str(block.get("data", ""))) * 3 // 4
            parts.append(f"[{kind}: {block.get('mimeType', '?')}, {size} bytes]")
        else:
            parts.append(f"[{kind} content]")
    if not parts and result.get("structuredContent") is not None:
        from skillvc.core.hashing import canonical_json

        return canonical_json(result["structuredContent"])
    return "\n".join(parts)


class McpServerSource:
    """The tools of one stdio MCP server, started when constructed (see the module docstring)."""

    def __init__(
        self, argv: Sequence[str], root: Path, *, startup_timeout_s: float = STARTUP_TIMEOUT_S
    ) -> None:
        if not argv or not all(isinstance(a, str) and a for a in argv):
            raise ToolsError(f"[tools] mcp names {list(argv)!r}, which is not a command line.")
        try:
            import mcp  # noqa: F401  (the optional extra: checked before anything starts)
        except ImportError:
            raise ToolsError(
                f"[tools] mcp names the server {list(argv)!r}, but the mcp package is not "
                "installed.",
                hint="pip install 'skillvc[mcp]'",
            ) from None
        self.argv = list(argv)
        self.root = root
        self.startup_timeout_s = startup_timeout_s
        self._stderr = tempfile.NamedTemporaryFile(  # noqa: SIM115 (lives as long as the source)
            "w+", prefix="skillvc-mcp-", suffix=".log", delete=False
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"skillvc-mcp-{Path(argv[-1]).name}", daemon=True
        )
        self._thread.start()
        self._lock = threading.Lock()
        self._restarts_left = 1
        self._dead: str | None = None  # why calls fail without trying, once restarts are spent
        self._generation = 0  # which start of the server is running (restarts count up)
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[Any] | None = None
        self._server_info: dict[str, Any] = {}
        try:
            self._specs = self._start()
        except BaseException:
            self.close()
            raise

    # -- the server's life, on the loop thread -------------------------------------------

    def _params(self) -> Any:
        from mcp import StdioServerParameters

        program = self.argv[0]
        if program in ("python", "python3"):
            program = sys.executable  # the interpreter that has skillvc (and mcp) installed
        elif ("/" in program or os.sep in program) and not os.path.isabs(program):
            program = str(self.root / program)  # "./server.sh": the root's, not skillvc's cwd
        return StdioServerParameters(
            command=program, args=self.argv[1:], env=server_environment(), cwd=str(self.root)
        )

    async def _serve(self, ready: concurrent.futures.Future[list[dict[str, Any]]]) -> None:
        from mcp import ClientSession, stdio_client

        self._task = asyncio.current_task()
        self._stop = asyncio.Event()
        try:
            async with (
                stdio_client(self._params(), errlog=self._stderr) as (read, write),
                ClientSession(read, write) as session,
            ):
                init = await session.initialize()
                listed = await session.list_tools()
                info = init.model_dump(mode="json", by_alias=True).get("serverInfo") or {}
                self._server_info = {k: info.get(k) for k in ("name", "version")}
                self._session = session
                ready.set_result(
                    [
                        t.model_dump(mode="json", by_alias=True, exclude_none=True)
                        for t in listed.tools
                    ]
                )
                # Held open until close: a server that dies meanwhile fails the calls.
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None

    async def _wind_down(self) -> None:
        task, stop = self._task, self._stop
        if task is None or task.done():
            return
        if self._session is not None and stop is not None:
            stop.set()  # leave the contexts: the SDK closes stdin, then terminates the server
        else:
            task.cancel()  # still starting
        # Cancelled, failed or too slow (wait_for cancels it then): either way it is done.
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, _CLOSE_S)

    def _shutdown(self) -> None:
        """Stop the current server, if any, and wait until its process is gone."""
        # Not self._task: the loop thread sets it, and _wind_down runs after _serve began.
        if self._generation == 0 or self._loop.is_closed():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._wind_down(), self._loop).result(
                timeout=_CLOSE_S + 2.0
            )

    def _launch(self) -> list[dict[str, Any]]:
        """Start the server and wait for its tool list; ToolsError when it does not come."""
        ready: concurrent.futures.Future[list[dict[str, Any]]] = concurrent.futures.Future()
        self._generation += 1
        asyncio.run_coroutine_threadsafe(self._serve(ready), self._loop)
        try:
            return ready.result(timeout=self.startup_timeout_s)
        except concurrent.futures.TimeoutError:
            self._shutdown()
            raise ToolsError(
                f"The MCP server {self.argv!r} did not finish starting within "
                f"{self.startup_timeout_s:g} s.{self._stderr_note()}"
            ) from None
        except BaseException as exc:
            self._shutdown()
            raise ToolsError(
                f"The MCP server {self.argv!r} did not start: {_reason(exc)}.{self._stderr_note()}"
            ) from None

    def _start(self) -> tuple[ToolSpec, ...]:
        listed = self._launch()
        return tuple(
            ToolSpec(
                str(t["name"]),
                str(t.get("description") or ""),
                t.get("inputSchema") or {"type": "object", "properties": {}},
            )
            for t in listed
        )

    def _stderr_note(self) -> str:
        try:
            with open(self._stderr.name, encoding="utf-8", errors="replace") as f:
                text = f.read().strip()
        except OSError:
            return ""
        if not text:
            return " It wrote nothing to stderr."
        tail = text[-_STDERR_TAIL:]
        return f" Its stderr ends: {tail}"

    # -- the source --------------------------------------------------------------------

    def specs(self) -> Sequence[ToolSpec]:
        return self._specs

    def fingerprint(self) -> Mapping[str, Any]:
        # The server's files in the repository, hashed: a changed server misses the cache.
        files = {}
        for arg in self.argv[1:]:
            path = self.root / arg
            try:
                if not Path(arg).is_absolute() and path.is_file():
                    files[arg] = sha256_hex(path.read_bytes())
            except (OSError, ValueError):
                continue
        return {"source": "mcp", "argv": self.argv, "files": files, "server": self._server_info}

    async def _call(self, name: str, arguments: dict[str, Any], timeout_s: float) -> Any:
        session = self._session
        if session is None:
            raise ConnectionError("the server is not running")
        result = await asyncio.wait_for(session.call_tool(name, arguments), timeout_s)
        return result.model_dump(mode="json", by_alias=True)

    async def _alive(self) -> bool:
        session = self._session
        if session is None:
            return False
        try:
            await asyncio.wait_for(session.send_ping(), _PING_S)
        except Exception:
            return False
        return True

    def call(
        self, name: str, arguments: Mapping[str, Any], *, workdir: Path, timeout_s: float
    ) -> Any:
        if self._dead is not None:
            raise ConnectionError(self._dead)
        generation = self._generation
        future = asyncio.run_coroutine_threadsafe(
            self._call(name, dict(arguments), timeout_s), self._loop
        )
        try:
            result = future.result(timeout=timeout_s + 1.0)  # + 1: the loop's own limit first
        except (asyncio.TimeoutError, concurrent.futures.TimeoutError):
            future.cancel()
            raise TimeoutError(f"the MCP server gave no answer within {timeout_s:g} s") from None
        except Exception as exc:
            reason = _reason(exc)
            if self._gone(generation):
                raise ConnectionError(f"the MCP server exited during the call ({reason})") from None
            raise RuntimeError(f"the MCP server refused the call: {reason}") from None
        if result.get("isError"):
            raise McpToolError(_text_of(result) or "the tool failed")
        return _text_of(result)

    def _gone(self, generation: int) -> bool:
        """After a call failed other than by its timeout: whether the server that took it is
        gone; a dead server is restarted, once in the source's life."""
        with self._lock:
            if generation != self._generation or self._dead is not None:
                return True  # another caller already found it dead
            alive = asyncio.run_coroutine_threadsafe(self._alive(), self._loop)
            try:
                if alive.result(timeout=_PING_S + 1.0):
                    return False
            except Exception:
                pass
            self._shutdown()
            if self._restarts_left <= 0:
                self._dead = (
                    f"the MCP server {self.argv!r} exited again after its one restart."
                    f"{self._stderr_note()}"
                )
                return True
            self._restarts_left -= 1
            try:
                listed = self._launch()
            except ToolsError as exc:
                self._dead = f"the MCP server exited and did not restart: {exc.message}"
                return True
            if [t["name"] for t in listed] != [s.name for s in self._specs]:
                self._shutdown()
                self._dead = f"the MCP server {self.argv!r} restarted with other tools"
            return True

    def close(self) -> None:
        self._shutdown()
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=_CLOSE_S)
        if not self._thread.is_alive():
            self._loop.close()
        self._stderr.close()
        with contextlib.suppress(OSError):
            os.unlink(self._stderr.name)

"""Headless Chromium driven over the DevTools protocol, through ``--remote-debugging-pipe``.

No websocket and no Playwright: Chromium reads protocol messages (JSON, each ended by a NUL
byte) on its file descriptor 3 and writes its answers on 4. One browser, one page (a flattened
target session); ``evaluate`` runs JavaScript in the page, ``key`` presses a key as a person
would (keydown with its text, keyup), ``viewport`` emulates a phone or a desktop width.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

# key -> (code, virtual key code, text)
KEYS = {
    "Enter": ("Enter", 13, "\r"),
    "Escape": ("Escape", 27, ""),
    "ArrowLeft": ("ArrowLeft", 37, ""),
    "ArrowRight": ("ArrowRight", 39, ""),
}


def _high(fd: int) -> int:
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class Browser:
    def __init__(self, chromium: str, profile: Path) -> None:
        to_child, self._out = os.pipe()  # we write, Chromium reads on its fd 3
        self._in, from_child = os.pipe()  # Chromium writes on its fd 4, we read
        # Above 3 and 4, so that moving them there in the child never closes one of them.
        to_child, from_child = _high(to_child), _high(from_child)
        args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "about:blank",
        ]
        # A Python trampoline puts the pipe ends on 3 and 4 (dash takes one-digit fds only).
        move = (
            "import os, sys; a, b = int(sys.argv[1]), int(sys.argv[2]); os.dup2(a, 3); "
            "os.dup2(b, 4); os.close(a); os.close(b); os.execv(sys.argv[3], sys.argv[3:])"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", move, str(to_child), str(from_child), chromium, *args],
            pass_fds=(to_child, from_child),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self._buffer = b""
        self._id = 0
        self.session: str | None = None
        target = self.send("Target.createTarget", {"url": "about:blank"}, browser=True)
        attached = self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}, browser=True
        )
        self.session = attached["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._in], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed its pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def send(
        self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False
    ) -> dict[str, Any]:
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if self.session and not browser:
            message["sessionId"] = self.session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read(30)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return dict(answer.get("result") or {})

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, expression: str, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"never true: {expression}")
            time.sleep(0.05)

    def goto(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete'")

    def key(self, key: str, *, ctrl: bool = False) -> None:
        code, vk, text = KEYS[key] if key in KEYS else (f"Key{key.upper()}", ord(key.upper()), key)
        base = {
            "key": key,
            "code": code,
            "windowsVirtualKeyCode": vk,
            "modifiers": 2 if ctrl else 0,
        }
        down = base | ({"text": text} if text and not ctrl else {})
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", **down})
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **base})

    def type(self, text: str) -> None:
        self.send("Input.insertText", {"text": text})

    def viewport(self, width: int, height: int = 844) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
        )

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close", browser=True)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._out)
        os.close(self._in)

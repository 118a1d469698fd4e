"""The ``claude-code`` and ``codex`` harnesses: a real agent CLI per task, hermetically.

For each call: a fresh scratch directory (``skillvc.models.agents.hermetic``) that is the agent's
HOME, config directory and working directory; the skill (``request.system``) installed where
the CLI looks for project skills; the setup ``files`` copied into its config directory; the
task text on stdin; an explicit environment. The structured output is parsed into a
``Trajectory``; the answer is its final result, tokens and cost are the agent's own report.

Invariants:
- nothing of the user's HOME reaches the agent, and nothing the agent writes outlives the task;
- a non-zero exit, a timeout, an ``is_error`` result or a failed turn raises ``AgentFailed``
  whose message quotes the agent's reason and the tail of its stdout and stderr, scrubbed of
  secrets: a broken agent is an error, never a wrong answer;
- ``cache_params`` covers what changes answers besides the request: the CLI's version, the
  environment's names and value hashes (never values), the setup files' hashes;
- a skill package is installed whole beside SKILL.md (its text files and its carried scripts
  and assets, with their executable bits: ``install_skill``), and ``meta["files_used"]`` names
  the package files a tool call of the agent named (read or ran);
- no secret that reached the agent through ``[target.env]`` is kept in the answer, the
  trajectory or a message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillvc.core.config import ModelConfig
from skillvc.core.errors import ConfigError, redact
from skillvc.core.hashing import sha256_hex
from skillvc.models.agents import hermetic
from skillvc.models.agents.presets import (
    PRESETS,
    Note,
    Preset,
    activated,
    files_used,
    loaded_skills,
    notes,
)
from skillvc.models.backends import children
from skillvc.models.backends.base import CallRequest, CallResult
from skillvc.models.backends.command import (
    AgentFailed,
    AgentRefused,
    communicate,
    install_skill,
    is_safe_name,
    skill_name,
    start_process,
)
from skillvc.packages.packagefile import PackageFile

TAIL = 2000  # characters of stdout and of stderr kept with an error
QUOTE = 300  # characters of each tail quoted in the one-line message
VERSION_TIMEOUT_S = 30.0
SYSTEM_TMP = "/tmp"  # where a CLI that ignores TMPDIR writes (a test points it elsewhere)
KEY_VARIABLES = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "ANTHROPIC_API_KEY", "CODEX_API_KEY")


def _one_line(text: str, limit: int) -> str:
    text = " | ".join(ln.strip() for ln in text.strip().splitlines() if ln.strip())
    return text if len(text) <= limit else "..." + text[-limit:]


def _stray_path(name: str) -> str:
    """A ``stray_temp`` name in the system temp folder the CLI uses whatever TMPDIR says."""
    uid = str(os.getuid()) if hasattr(os, "getuid") else "0"
    return os.path.join(SYSTEM_TMP, name.replace("{uid}", uid))


def library_name(entry: PackageFile) -> str:
    """The folder (the listed name) of one skill of a routed library, ``<name>/SKILL.md``;
    ``AgentFailed`` for any other path (nothing is installed outside its own folder)."""
    parts = entry.path.split("/")
    if len(parts) != 2 or parts[1] != "SKILL.md" or not is_safe_name(parts[0]):
        raise AgentFailed(f"The library entry {entry.path!r} is not <name>/SKILL.md.")
    return parts[0]


class _Watch:
    """Reads an agent's stdout as it arrives: keeps its last Note, and stops the agent once
    its API requests were refused twice for a reason retrying cannot fix (Claude Code would
    otherwise retry a bad key for about 3 minutes)."""

    REFUSALS = 2  # one refusal may be a hiccup of the service; two are the key

    def __init__(self, preset: Preset) -> None:
        self.preset = preset
        self.last: Note | None = None
        self.refusals = 0
        self.refused: Note | None = None

    def __call__(self, line: str) -> bool:
        for note in notes(self.preset, line):
            self.last = note
            if note.kind == "retry" and note.permanent:
                self.refusals += 1
                if self.refusals >= self.REFUSALS:
                    self.refused = note
                    return True
        return False


def _hash_path(path: Path) -> str:
    if path.is_dir():
        parts = sorted(
            (str(p.relative_to(path)), sha256_hex(p.read_bytes()))
            for p in path.rglob("*")
            if p.is_file()
        )
        return sha256_hex(repr(parts))[:16]
    return sha256_hex(path.read_bytes())[:16]


class AgentBackend:
    """One preset, configured by a ``[target]`` section with ``harness = <preset name>``."""

    def __init__(self, config: ModelConfig, root: Path | None = None) -> None:
        self.preset: Preset = PRESETS[config.harness]
        self.config = config
        self.model = config.model
        base = root if root is not None else Path.cwd()
        self.executable = self._find_executable(config.executable, base)
        self.env, secrets = hermetic.resolve_env(config.env)
        self.secrets = [*secrets, *(os.environ.get(k, "") for k in KEY_VARIABLES)]
        self.files: list[Path] = []
        for name in config.files:
            path = Path(name) if Path(name).is_absolute() else base / name
            if not path.exists():
                raise ConfigError(
                    f"[target] files lists {name}, which does not exist.",
                    hint="Paths are relative to the repository root.",
                )
            self.files.append(path)
        self.file_hashes = {p.name: _hash_path(p) for p in self.files}
        self._version: str | None = None
        self._lock = threading.Lock()
        self._strays_lock = threading.Lock()  # not _lock: version() runs a task holding it
        self._running = 0  # tasks in flight, and the stray temp paths they may leave (_strays)
        self._ours: list[str] = []
        # For messages: "Agent 'claude' (Claude Code) exited with code 1: ..."
        self.label = f"'{Path(self.executable).name}' ({self.preset.title})"

    def _find_executable(self, given: str | None, base: Path) -> str:
        name = given or self.preset.program
        is_path = os.sep in name or bool(os.altsep and os.altsep in name)
        if is_path:
            path = Path(name) if Path(name).is_absolute() else base / name
            found = str(path) if os.access(path, os.X_OK) and path.is_file() else None
        else:
            found = shutil.which(name)
        if found is None and is_path and path.is_file():
            raise ConfigError(
                f"{self.preset.title}'s executable '{name}' is not executable.",
                hint=f"Make it executable with 'chmod +x {path}', or point executable at "
                "the real CLI.",
            )
        if found is None and is_path and path.is_dir():
            raise ConfigError(
                f"{self.preset.title}'s executable '{name}' is a directory.",
                hint=f'Set executable = "{path}/{self.preset.program}" (the program itself) '
                "in [target].",
            )
        if found is None:
            raise ConfigError(
                f"{self.preset.title}'s executable '{name}' was not found"
                f"{'' if is_path else ' on PATH'}.",
                hint=f'Install it, or set executable = "/path/to/{self.preset.program}" '
                "in [target].",
            )
        return found

    # -- what keys the cache ------------------------------------------------------------------

    def version(self) -> str:
        """``<executable> --version`` (first line), run once, hermetically like a task."""
        with self._lock:
            if self._version is None:
                code, out, err = self._run([self.executable, "--version"], "", VERSION_TIMEOUT_S)
                if code != 0:
                    raise self._failure(f"'--version' exited with code {code}", out, err)
                self._version = (out.strip().splitlines() or ["unknown"])[0][:200]
            return self._version

    def cache_params(self) -> dict[str, Any]:
        return {
            "version": self.version(),
            "env": {k: sha256_hex(v)[:16] for k, v in sorted(self.env.items())},
            "files": dict(self.file_hashes),
        }

    # -- one task -----------------------------------------------------------------------------

    def complete(self, request: CallRequest) -> CallResult:
        version = self.version()
        name = skill_name(request.system)
        argv = [self.executable, *self.preset.argv, *self.config.args]
        start = time.perf_counter()
        code, stdout, stderr = self._run(
            argv,
            request.user,
            self.config.task_timeout_s,
            request.system,
            request.files,
            request.library,
        )
        duration = time.perf_counter() - start
        trajectory = self.preset.parse(stdout)
        if code != 0:
            raise self._failure(
                f"exited with code {code}", stdout, stderr, trajectory.error, returncode=code
            )
        if trajectory.error is not None:
            # Claude Code's result names the HTTP status of a refused key: it stops the run.
            refused = trajectory.info.get("api_error_status") in (401, 403)
            raise self._failure(
                "reported an error", stdout, stderr, trajectory.error, refused=refused
            )
        if "result" not in trajectory.info:
            raise self._failure("ended without a final result", stdout, stderr)
        answer = redact(trajectory.answer, self.secrets).strip()
        loaded = activated(trajectory, name) if request.system.strip() else None
        meta: dict[str, Any] = {
            "agent": self.preset.name,
            "version": version,
            "exit_code": code,
            "duration_s": duration,
            "skill_name": name,
            "activated": loaded,
            # Stored as a blob by the client; scrubbed here, where the secrets are known.
            "trajectory": redact(trajectory.to_json(), self.secrets),
            "stderr_tail": redact(stderr[-TAIL:], self.secrets),
        }
        if request.library:  # routing: which of the library's skills it loaded, in order
            order = loaded_skills(trajectory, [library_name(f) for f in request.library])
            meta["loaded"] = order
            meta["picked"] = order[0] if order else None
        if request.files:  # a skill package: which of its files the agent read or ran
            paths = [f.path for f in request.files]
            meta["files_used"] = files_used(trajectory, name, paths)
        return CallResult(
            text=answer,
            prompt_tokens=trajectory.prompt_tokens,
            completion_tokens=trajectory.completion_tokens,
            latency_ms=duration * 1000.0,
            meta=meta,
            cost_usd=trajectory.cost_usd,
        )

    def _run(
        self,
        argv: list[str],
        stdin: str,
        timeout: float,
        skill: str = "",
        files: Sequence[PackageFile] = (),
        library: Sequence[PackageFile] = (),
    ) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of ``argv`` run in a fresh scratch world, removed after.

        Raises AgentFailed when the program cannot start or times out (then it is killed)."""
        watch = _Watch(self.preset)
        with hermetic.scratch() as s, self._strays():
            if skill.strip():
                rel = self.preset.install_path.replace("{name}", skill_name(skill))
                install_skill(s.work / rel, skill, files)  # a package: its files beside it
            for entry in library:  # every skill of a library, each in its own folder
                rel = self.preset.install_path.replace("{name}", library_name(entry))
                install_skill(s.work / rel, entry.text or "")
            # The config dir exists even when no file is copied in: Codex refuses a CODEX_HOME
            # that does not exist ("Error finding codex home").
            (s.home / self.preset.config_dir).mkdir(parents=True, exist_ok=True)
            hermetic.copy_in(self.files, s.home / self.preset.config_dir)
            env = hermetic.agent_env(s, self.preset.config_env, self.preset.config_dir, self.env)
            try:
                proc = start_process(argv, cwd=s.work, stdin=True, env=env)
            except (OSError, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise AgentFailed(f"Agent {self.label} could not be started ({reason}).") from None
            try:
                stdout, stderr = communicate(proc, stdin, timeout, watch)
            except subprocess.TimeoutExpired as exc:
                out = exc.output if isinstance(exc.output, str) else ""
                err = exc.stderr if isinstance(exc.stderr, str) else ""
                last = watch.last
                # Why it was slow: the CLI's own last word, e.g. a retry notice with its reason.
                why = (
                    f"still retrying: {last.text}"
                    if last is not None and last.kind == "retry"
                    else None
                )
                raise self._failure(
                    f"timed out after {timeout:g} s and was killed",
                    out,
                    err,
                    why,
                    timed_out=True,
                ) from None
        if watch.refused is not None:
            raise self._failure(
                "was stopped: its API requests were refused, and retrying cannot fix that",
                stdout,
                stderr,
                watch.refused.text,
                returncode=proc.returncode,
                refused=True,
            )
        return proc.returncode, stdout, stderr

    @contextmanager
    def _strays(self) -> Iterator[None]:
        """Remove what the CLI wrote in the system temp folder ignoring TMPDIR (``stray_temp``,
        e.g. Codex's ``codex-daemon-<uid>``) when the last of this backend's tasks ends. Only
        paths that did not exist when the first task started: one the user's own CLI made is
        left alone. A signal that stops skillvc removes them too (``children``)."""
        paths = [_stray_path(name) for name in self.preset.stray_temp]
        with self._strays_lock:
            if self._running == 0:
                self._ours = [p for p in paths if not os.path.lexists(p)]
                for p in self._ours:
                    children.track_path(p)
            self._running += 1
        try:
            yield
        finally:
            with self._strays_lock:
                self._running -= 1
                if self._running == 0:
                    for p in self._ours:
                        children.remove_path(p)
                    self._ours = []

    def _failure(
        self,
        what: str,
        stdout: str,
        stderr: str,
        reason: str | None = None,
        *,
        returncode: int | None = None,
        timed_out: bool = False,
        refused: bool = False,
    ) -> AgentFailed:
        """``Agent '<program>' (<title>) <what>: <reason>. [stdout: ...; stderr: ...]``

        The stdout quoted is what the agent said (its messages, errors and retry notices, read
        from its structured output by the preset), not the tail of the JSON lines."""
        out = redact(stdout[-TAIL:], self.secrets)
        err = redact(stderr[-TAIL:], self.secrets)
        said = notes(self.preset, stdout)
        # Claude Code prints "API Error: 400 ..." on stdout with an empty stderr: the reason is
        # the parsed error if there is one, else the agent's last error or retry notice, else
        # the last line of stderr, else the last thing it said.
        if reason is None:
            errors = [n.text for n in said if n.kind != "message"]
            lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
            texts = [n.text for n in said]
            found = errors or lines or texts
            reason = found[-1] if found else None
        detail = f": {_one_line(redact(reason, self.secrets), 200).rstrip('.')}" if reason else ""
        quoted = _one_line(redact(" | ".join(n.text for n in said[-3:]), self.secrets), QUOTE)
        if not quoted:
            quoted = "(no message)" if stdout.strip() else "(empty)"
        tails = f" [stdout: {quoted}; stderr: {_one_line(err, QUOTE) or '(empty)'}]"
        kind = AgentRefused if refused else AgentFailed
        return kind(
            f"Agent {self.label} {what}{detail}.{tails}",
            returncode=returncode,
            stderr_tail=f"--- stdout ---\n{out}\n--- stderr ---\n{err}",
            timed_out=timed_out,
        )

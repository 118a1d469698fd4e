"""The ``command`` harness: run an external agent CLI once per task, with the skill installed.

For each call:

1. make a fresh scratch directory (the agent's working directory, removed afterwards);
2. write the skill (``request.system``) to ``skill_install_path`` inside it, with ``{name}``
   replaced by the skill's frontmatter ``name`` (else ``skill``), and a skill package's other
   files (``request.files``: its text files, and the carried scripts and assets byte for byte
   with their executable bits) beside it, at their package paths; an empty skill installs
   nothing, which is the "no skill" baseline;
3. run ``command`` (an argv list, never a shell) with the placeholders ``{skill_path}``,
   ``{skill_dir}``, ``{workdir}`` and, when ``input_mode = "arg"``, ``{input}`` replaced; the
   task text (``request.user``) goes on stdin when ``input_mode = "stdin"``;
4. the answer is stdout, stripped. ``meta`` holds ``exit_code``, ``stderr_tail`` (last 2000
   characters) and ``duration_s``; token counts are 0 (the agent does its own accounting).
   Both stdout and stderr are scrubbed of secrets (``skillvc.secrets.scrub``): an agent that
   prints its environment must not put a key into the log or an error message.

The agent gets an explicit environment, never skillvc's own: ``PATH``, ``LANG``, ``LC_*`` and
``TERM`` are passed on, ``HOME`` and ``TMPDIR`` point at the scratch directory, and nothing else
(no API key) unless ``[target] env`` in skillvc.toml names it; a value there may read a
variable as ``"${NAME}"``, so no key is written into the config. The cache key holds each
``env`` name with a hash of its value, never the value.

Invariants: no shell ever sees the task text (it arrives byte for byte, ``$(...)`` and ``;``
included); placeholders are replaced in one pass, so task text containing ``{workdir}`` is not
expanded again; the skill is never written outside the scratch directory. A non-zero exit or a
timeout raises ``AgentFailed`` (a ``BackendError``, not ``TransientError``): a crashed or hung
agent is an error, never a wrong answer, and retrying a hang would cost another full timeout.
On timeout, and after a normal exit, the whole process group is killed, so the agent's
children do not linger.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from skillvc.core.config import ENV_REFERENCE, ModelConfig
from skillvc.core.errors import (
    AuthenticationFailed,
    BackendError,
    ConfigError,
    SkillDocumentError,
    redact,
)
from skillvc.core.hashing import sha256_hex
from skillvc.models.backends import children
from skillvc.models.backends.base import CallRequest, CallResult
from skillvc.packages.packagefile import PackageFile
from skillvc.secrets import register_names, scrub
from skillvc.skill.skilldoc import SkillDocument

STDERR_TAIL = 2000
_PLACEHOLDER = re.compile(r"\{(input|skill_dir|workdir|skill_path)\}")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Passed on from skillvc's environment (plus LC_*): what any program needs to run and print.
ENV_ALLOWLIST = ("PATH", "LANG", "TERM")


def resolve_env(
    table: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``[target] env`` with every ``${NAME}`` replaced by that variable's value.

    A referenced variable that is unset is a ``ConfigError``: an agent started without the
    key it was promised fails later with a far less clear message. The referenced variables'
    values are secrets from now on (``skillvc.secrets``).
    """
    env = os.environ if environ is None else environ
    resolved = {}
    for name, value in table.items():
        refs = ENV_REFERENCE.findall(value)
        register_names(refs)
        for ref in refs:
            if ref not in env:
                raise ConfigError(
                    f'env {name} = "{value}" in skillvc.toml reads ${{{ref}}}, which is not set.',
                    hint=f"Export {ref} before running skillvc, or change [target] env.",
                )
        resolved[name] = ENV_REFERENCE.sub(lambda m: env[m.group(1)], value)
    return resolved


def agent_env(config: ModelConfig, workdir: Path) -> dict[str, str]:
    """The whole environment of one agent run (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOWLIST or k.startswith("LC_")}
    env["HOME"] = env["TMPDIR"] = str(workdir)
    env.update(resolve_env(config.env))
    return env


def env_fingerprint(config: ModelConfig) -> dict[str, str]:
    """``env`` names with a hash of each resolved value, for the cache key: a changed value
    misses the cache, and the key never holds the value itself."""
    return {name: sha256_hex(value)[:16] for name, value in resolve_env(config.env).items()}


class AgentFailed(BackendError):
    """The agent command crashed, exited non-zero or timed out."""

    hint = "Run the agent command by hand on one task to see its output."

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None = None,
        stderr_tail: str = "",
        timed_out: bool = False,
    ) -> None:
        super().__init__(message)
        # Not ``exit_code``: on a SkillvcError that name is skillvc's own CLI exit status.
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        self.timed_out = timed_out


class AgentRefused(AgentFailed, AuthenticationFailed):
    """The agent's API requests were refused for a reason retrying cannot fix (a bad key)."""

    hint = (
        "Check the key the agent gets through [target] env in skillvc.toml, and run "
        "'skillvc doctor', which sends the agent one tiny prompt."
    )


def is_safe_name(name: str) -> bool:
    """Whether ``name`` can be a skill's folder: one path component of letters, digits, ``.``,
    ``_`` and ``-``, never ``..``."""
    return bool(_SAFE_NAME.match(name)) and ".." not in name


def skill_name(skill_text: str) -> str:
    """The frontmatter ``name`` if it is a safe single path component, else ``skill``."""
    try:
        front = SkillDocument.parse(skill_text).frontmatter or {}
    except SkillDocumentError:  # an unreadable skill still gets installed, under the default
        front = {}
    name = front.get("name")
    if isinstance(name, str) and is_safe_name(name):
        return name
    return "skill"


def install_skill(skill_path: Path, skill: str, files: Sequence[PackageFile] = ()) -> None:
    """Write the skill to ``skill_path`` and a package's other files beside it: text files as
    given, carried files byte for byte with their executable bit (``0o755``, else ``0o644``).

    A package path that is absolute, climbs out of the skill's directory or holds a backslash
    or NUL is refused before anything of the package is written: the package may come from a
    pull request (``skillvc check``), and nothing of it is written outside the scratch
    directory. Only regular files and directories are created, so no path written through
    can lead elsewhere."""
    base = skill_path.parent
    targets = []
    for file in files:
        rel = file.path
        parts = PurePosixPath(rel).parts
        if (
            not parts
            or PurePosixPath(rel).is_absolute()
            or ".." in parts
            or "\\" in rel
            or "\0" in rel
        ):
            raise AgentFailed(f"The skill package file {rel!r} would be installed outside it.")
        targets.append((base.joinpath(*parts), file))
    skill_path.parent.mkdir(parents=True, exist_ok=True)
    skill_path.write_text(skill, encoding="utf-8", newline="")
    for dest, file in targets:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(file.content)
        if file.data is not None:  # carried: a script keeps its executable bit
            dest.chmod(0o755 if file.executable else 0o644)


class CommandBackend:
    def __init__(self, config: ModelConfig) -> None:
        if not config.command or not all(isinstance(a, str) for a in config.command):
            raise ConfigError(
                f'harness = "command" for {config.model} needs command = [argv, ...].',
                hint='For example: command = ["claude", "-p", "--output-format", "text"].',
            )
        if config.input_mode not in ("stdin", "arg"):
            raise ConfigError(f"input_mode '{config.input_mode}' is not one of stdin, arg.")
        uses_input = any("{input}" in a for a in config.command)
        if (config.input_mode == "arg") != uses_input:
            raise ConfigError(
                'The {input} placeholder belongs in command exactly when input_mode = "arg".'
            )
        install = PurePosixPath(config.skill_install_path)
        if install.is_absolute() or ".." in install.parts or not install.name:
            raise ConfigError(
                f"skill_install_path '{config.skill_install_path}' must be a relative path "
                "inside the task's working directory."
            )
        resolve_env(config.env)  # an unset ${NAME} fails now, before any task runs
        self.config = config
        self.model = config.model

    @classmethod
    def from_config(cls, config: ModelConfig) -> CommandBackend:
        return cls(config)

    @property
    def program(self) -> str:
        return Path(self.config.command[0]).name

    def complete(self, request: CallRequest) -> CallResult:
        with children.tracked_dir(Path(tempfile.mkdtemp(prefix="skillvc-task-"))) as workdir:
            rel = self.config.skill_install_path.replace("{name}", skill_name(request.system))
            skill_path = workdir / rel
            if request.system.strip():
                install_skill(skill_path, request.system, request.files)
            values = {
                "input": request.user,
                "skill_dir": str(skill_path.parent),
                "workdir": str(workdir),
                "skill_path": str(skill_path),
            }
            argv = [_PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in self.config.command]
            stdin = request.user if self.config.input_mode == "stdin" else None
            return self._run(argv, workdir, stdin)

    def _run(self, argv: list[str], cwd: Path, stdin: str | None) -> CallResult:
        timeout = self.config.task_timeout_s
        start = time.perf_counter()
        try:
            proc = start_process(
                argv, cwd=cwd, stdin=stdin is not None, env=agent_env(self.config, cwd)
            )
        except (OSError, ValueError) as exc:
            # ValueError: an argument holds a NUL byte or an unencodable character (task text
            # in input_mode = "arg"); that item cannot be run, which is an error, not a crash.
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise AgentFailed(
                f"Agent command '{self.program}' could not be started ({reason})."
            ) from None
        try:
            stdout, stderr = communicate(proc, stdin, timeout)
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr if isinstance(exc.stderr, str) else ""
            tail = redact(stderr[-STDERR_TAIL:])
            raise AgentFailed(
                f"Agent command '{self.program}' timed out after {timeout:g} s and was killed.",
                stderr_tail=tail,
                timed_out=True,
            ) from None
        duration = time.perf_counter() - start
        tail = redact(stderr[-STDERR_TAIL:])
        if proc.returncode != 0:
            last = next((ln.strip() for ln in reversed(tail.splitlines()) if ln.strip()), "")
            detail = f": {last[:200].rstrip('.')}" if last else ""
            raise AgentFailed(
                f"Agent command '{self.program}' exited with code {proc.returncode}{detail}.",
                returncode=proc.returncode,
                stderr_tail=tail,
            )
        return CallResult(
            text=scrub(stdout).strip(),
            latency_ms=duration * 1000.0,
            meta={"exit_code": proc.returncode, "stderr_tail": tail, "duration_s": duration},
        )


def start_process(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    stdin: bool = False,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[str]:
    """Start ``argv`` (no shell) with text pipes, in its own process group on POSIX, tracked
    (``children``) so that a signal stopping skillvc ends it; nothing starts once one has."""
    children.check_stopping()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        # Its own process group, so a timeout can kill the program and all its children.
        start_new_session=os.name == "posix",
    )
    children.register_process(proc.pid)
    return proc


def communicate(
    proc: subprocess.Popen[str],
    stdin: str | None,
    timeout: float,
    on_line: Callable[[str], bool] | None = None,
) -> tuple[str, str]:
    """``proc.communicate`` that never leaves processes behind.

    ``on_line`` sees each stdout line as it arrives (an agent's stream of events); when it
    returns True the agent is stopped there (its group killed) and what it printed so far is
    returned. With ``on_line``, a timeout's ``TimeoutExpired`` also carries the stdout read so
    far (``output``): an agent's partial stream says why it was slow.

    On timeout the whole process group is killed and ``subprocess.TimeoutExpired`` is raised
    with the stderr read so far; if anything else interrupts the wait (Ctrl-C), the group is
    killed too. After a normal exit, children the program left running in its group (a
    daemon, a language server) are killed as well: they would outlive the task and its
    scratch directory. If a signal is stopping skillvc (``children``), the agent was killed
    for that, not by its own fault: ``children.Interrupted`` is raised, never a result.
    """
    try:
        if on_line is not None:
            return _communicate_lines(proc, stdin, timeout, on_line)
        return _communicate(proc, stdin, timeout)
    finally:
        children.unregister_process(proc.pid)
        children.check_stopping()


def _communicate(proc: subprocess.Popen[str], stdin: str | None, timeout: float) -> tuple[str, str]:
    try:
        stdout, stderr = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill_group(proc)
        try:
            _, stderr = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a child escaped the group and holds the pipes
            stderr = ""
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
            proc.wait()  # the program itself was killed: reap it, leave no zombie
        raise subprocess.TimeoutExpired(exc.cmd, exc.timeout, stderr=stderr or "") from None
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    _kill_group(proc)
    return stdout or "", stderr or ""


def _communicate_lines(
    proc: subprocess.Popen[str], stdin: str | None, timeout: float, on_line: Callable[[str], bool]
) -> tuple[str, str]:
    out: list[str] = []
    err: list[str] = []

    def pump_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            if on_line(line):
                _kill_group(proc)

    def pump_err() -> None:
        assert proc.stderr is not None
        for chunk in iter(lambda: proc.stderr.read(65536) if proc.stderr else "", ""):
            err.append(chunk)

    def feed() -> None:
        try:
            if proc.stdin is not None:
                proc.stdin.write(stdin or "")
                proc.stdin.close()
        except (OSError, ValueError):
            pass  # the agent exited (or was stopped) before reading all of it

    threads = [threading.Thread(target=f, daemon=True) for f in (pump_out, pump_err, feed)]
    for t in threads:
        t.start()

    def drain() -> None:
        # The group is dead, so the pipes close; a child that escaped the group may hold
        # them open, and then what was read so far is all there is.
        for t in threads[:2]:
            t.join(5)

    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        _kill_group(proc)
        proc.wait()
        drain()
        raise subprocess.TimeoutExpired(
            exc.cmd, exc.timeout, output="".join(out), stderr="".join(err)
        ) from None
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    _kill_group(proc)
    drain()
    return "".join(out), "".join(err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    if os.name == "posix":
        children.kill_group(proc.pid)
    else:  # pragma: no cover - non-POSIX
        proc.kill()

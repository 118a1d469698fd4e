"""A fresh, private world for each agent run: scratch HOME, working directory, explicit env.

Layout of one task's scratch directory (created in the system temp directory, removed when the
task ends, whatever happened)::

    <scratch>/home    HOME; also the CLI's config dir parent (CLAUDE_CONFIG_DIR=home/.claude,
                      CODEX_HOME=home/.codex) and XDG_*; setup files are copied in there
    <scratch>/work    the working directory (the "project"); the skill is installed here
    <scratch>/tmp     TMPDIR

The environment is built, never inherited: only ``ALLOWED`` variables (and ``LC_*``) pass
through from skillvc's own environment, then the scratch locations, then the user's
``[target.env]`` table. So the user's ``~/.claude/CLAUDE.md``, personal skills, settings and
credentials never reach a run, and its transcripts and session files die with the scratch.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from skillvc.core.config import ENV_REFERENCE
from skillvc.core.errors import ConfigError
from skillvc.models.backends import children, command

# What a CLI needs to start and behave like it does in a terminal; nothing personal.
ALLOWED = ("PATH", "LANG", "LANGUAGE", "TERM", "TZ")
# Set by skillvc for every run; the [target.env] table may not move them out of the scratch.
RESERVED = (
    "HOME",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
)


@dataclass(frozen=True)
class Scratch:
    root: Path
    home: Path
    work: Path
    tmp: Path


@contextmanager
def scratch() -> Iterator[Scratch]:
    """A new scratch directory (see the module docstring), removed on exit."""
    # Tracked while it lives, so a signal that stops skillvc removes it too (``children``).
    with children.tracked_dir(Path(tempfile.mkdtemp(prefix="skillvc-agent-"))) as root:
        s = Scratch(root, root / "home", root / "work", root / "tmp")
        for d in (s.home, s.work, s.tmp):
            d.mkdir()
        yield s


def resolve_env(table: Mapping[str, str], role: str = "target") -> tuple[dict[str, str], list[str]]:
    """The ``[role.env]`` values with every ``${NAME}`` replaced from skillvc's environment.

    Returns (values, secrets): the values that came from a reference are treated as secrets
    (they are how a key gets in without being written into the config) and are scrubbed from
    any output skillvc keeps. An unset reference is a ConfigError, before any agent runs; the
    substitution is the command harness's (``skillvc.models.backends.command.resolve_env``).
    """
    for key in table:
        if key in RESERVED:
            raise ConfigError(
                f"[{role}.env] must not set {key}: each task gets its own scratch {key}.",
                hint="Copy configuration files in with files = [...] instead.",
            )
    values = command.resolve_env(table)
    secrets = [os.environ[name] for raw in table.values() for name in ENV_REFERENCE.findall(raw)]
    return values, secrets


def agent_env(
    s: Scratch, config_env: str, config_dir: str, extra: Mapping[str, str]
) -> dict[str, str]:
    """The complete environment of one run (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if k in ALLOWED or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    env.update(
        HOME=str(s.home),
        TMPDIR=str(s.tmp),
        XDG_CONFIG_HOME=str(s.home / ".config"),
        XDG_CACHE_HOME=str(s.home / ".cache"),
        XDG_DATA_HOME=str(s.home / ".local" / "share"),
        XDG_STATE_HOME=str(s.home / ".local" / "state"),
    )
    env[config_env] = str(s.home / config_dir)
    env.update(extra)
    return env


def copy_in(files: list[Path], dest: Path) -> None:
    """Copy setup files (or directories) into ``dest`` under their own names."""
    if not files:
        return  # the CLI creates its config dir itself; one directory less to make and remove
    dest.mkdir(parents=True, exist_ok=True)
    for src in files:
        if src.is_dir():
            shutil.copytree(src, dest / src.name, dirs_exist_ok=True)
        else:
            shutil.copyfile(src, dest / src.name)

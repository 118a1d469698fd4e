"""Interactive environments: ``[tasks] environment = "envs/world.py:World"``.

The class is the user's own code (trusted like their ``python`` scorers), or a class skillvc
ships (``skillvc.tasks.skillopt.alfworld:ALFWorld``: a module name instead of a path; an
optional classmethod ``check()`` raises when what it needs is missing): ``World()`` takes no
arguments, ``reset(item) -> str`` starts an episode for one task item (a dict: ``id``,
``input``, ``targets``, ``metadata``) and returns the first observation, ``step(action) ->
(observation, reward, done)`` takes the target's reply. A fresh instance runs each rollout, so
rollouts in parallel threads share nothing.

Invariant: a class that cannot be loaded (missing file, syntax error, no such class, no
``reset``/``step``) is a ``ToolsError`` before any model call; an environment that raises or
answers in the wrong shape during a rollout ends that rollout with a one-line failure.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillvc.core.errors import ToolsError
from skillvc.core.paths import inside_repo
from skillvc.models.tools.python_tools import module_file

WHERE = "[tasks] environment in skillvc.toml"


class EnvironmentFailed(Exception):
    """The environment raised or answered in the wrong shape during a rollout."""


class Environment:
    """A loaded environment class and the file it came from."""

    def __init__(self, spec: str, root: Path) -> None:
        path_text, sep, name = spec.rpartition(":")
        if not sep or not path_text or not name.isidentifier():
            raise ToolsError(
                f"{WHERE} is {spec!r}, not 'path/to/file.py:ClassName'.",
                hint="Name a Python file in the repository and a class in it, "
                'e.g. environment = "envs/world.py:World".',
            )
        installed = module_file(path_text)  # a module name: imported as itself, by name
        path = installed or inside_repo(root, path_text, WHERE)
        if not path.is_file():
            raise ToolsError(f"{WHERE} names {path_text}, which does not exist.")
        self.spec = spec
        self.digest = hashlib.sha256(path.read_bytes()).hexdigest()
        module_name = f"skillvc_env_{self.digest[:16]}"
        try:
            module = importlib.import_module(path_text) if installed else None
            module = module or sys.modules.get(module_name)
            if module is None:
                loader = importlib.util.spec_from_file_location(module_name, path)
                assert loader is not None and loader.loader is not None
                module = importlib.util.module_from_spec(loader)
                loader.loader.exec_module(module)
                sys.modules[module_name] = module
        except Exception as exc:
            raise ToolsError(
                f"{path_text} (from {WHERE}) failed to import: {type(exc).__name__}: {exc}."
            ) from None
        cls = getattr(module, name, None)
        if not isinstance(cls, type):
            raise ToolsError(f"{path_text} has no class {name!r} (from {WHERE}).")
        missing = [m for m in ("reset", "step") if not callable(getattr(cls, m, None))]
        if missing:
            raise ToolsError(
                f"{spec} has no {' or '.join(missing)} method: an environment needs "
                "reset(item) -> str and step(action) -> (observation, reward, done)."
            )
        check = getattr(cls, "check", None)
        if callable(check):
            # What the class needs beyond its code (packages, data): one error before any call.
            try:
                check()
            except Exception as exc:
                raise ToolsError(
                    f"{spec} (from {WHERE}) cannot run: {exc}",
                    hint=getattr(exc, "hint", None),
                ) from None
        self.cls = cls

    def fingerprint(self) -> dict[str, str]:
        return {"environment": self.spec, "sha256": self.digest}

    def start(self, item: Mapping[str, Any]) -> tuple[Episode, str]:
        """A new episode for ``item`` and its first observation."""
        try:
            world = self.cls()
            first = world.reset(dict(item))
        except Exception as exc:
            raise EnvironmentFailed(f"reset raised {type(exc).__name__}: {exc}") from None
        if not isinstance(first, str):
            raise EnvironmentFailed(f"reset returned {type(first).__name__}, not a string")
        return Episode(world), first


class Episode:
    """One episode: ``step`` checks the environment's answer's shape."""

    def __init__(self, world: Any) -> None:
        self.world = world

    def step(self, action: str) -> tuple[str, float, bool]:
        try:
            answer = self.world.step(action)
        except Exception as exc:
            raise EnvironmentFailed(f"step raised {type(exc).__name__}: {exc}") from None
        if not (isinstance(answer, tuple) and len(answer) == 3):
            raise EnvironmentFailed("step did not return (observation, reward, done)")
        observation, reward, done = answer
        if not isinstance(reward, (int, float)) or isinstance(reward, bool):
            raise EnvironmentFailed(f"step returned a reward of type {type(reward).__name__}")
        return str(observation), float(reward), bool(done)

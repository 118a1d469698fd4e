"""Which backend runs a role: the provider's own, an agent CLI's, or the tool loop's.

This module sits above ``backends``, ``agents`` and ``tools`` and chooses between them, so each
of those imports only what is below it (``backends`` never imports an agent or the loop).
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from skillvc.core.config import ModelConfig
from skillvc.models.backends import SDK_BACKENDS, Backend, CallRequest, CallResult
from skillvc.models.backends import provider_backend as _provider

AGENT_PRESETS = ("claude-code", "codex")


def get_backend(config: ModelConfig, root: Path | None = None) -> Backend:
    """The backend for a [target]/[optimizer] section (``harness = "command"`` wins).

    ``root`` (the repository) anchors an agent preset's relative ``files`` and ``executable``.
    """
    if config.harness in AGENT_PRESETS:
        from skillvc.models.agents.backend import AgentBackend

        return AgentBackend(config, root)
    if acts(config):
        return _tool_loop(_provider(config), config, root)
    return _provider(config)


def acts(config: ModelConfig) -> bool:
    """A chat target with ``[tools]`` or an environment: it runs the tool loop."""
    return config.harness == "chat" and (config.tools is not None or bool(config.environment))


def _tool_loop(inner: Backend, config: ModelConfig, root: Path | None) -> Backend:
    from skillvc.models.tools.backend import ToolLoopBackend

    return ToolLoopBackend(inner, config, root)


class LazyBackend:
    """A backend built on its first call. Backends of the SDKs import them (about a second
    each), which a command answered entirely from the event log must not pay."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.model = config.model
        self._backend: Backend | None = None
        self._lock = threading.Lock()

    @property
    def backend(self) -> Backend:
        with self._lock:
            if self._backend is None:
                self._backend = get_backend(self.config)
            return self._backend

    def complete(self, request: CallRequest) -> CallResult:
        return self.backend.complete(request)

    def warm(self) -> None:
        """Build the backend (importing its SDK) and its client before the first call."""
        warm = getattr(self.backend, "warm", None)
        if warm is not None:
            warm()


def lazy_backend(config: ModelConfig, root: Path | None = None) -> Backend:
    """``get_backend``, deferred to the first call for the SDK backends (see ``LazyBackend``);
    every other backend (the simulator, a command harness, an agent preset) is built and
    checked at once."""
    if config.harness == "chat" and config.model.split(":", 1)[0] in SDK_BACKENDS:
        if acts(config):  # the tools start now (their errors come first); the SDK on first use
            inner = dataclasses.replace(config, tools=None, environment=None)
            return _tool_loop(LazyBackend(inner), config, root)
        return LazyBackend(config)
    return get_backend(config, root)

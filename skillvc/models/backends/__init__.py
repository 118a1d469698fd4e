"""Model backends and their registry.

Model strings name a backend and a model: ``sim:<world>``, ``openai:<model>``,
``anthropic:<model>``. The built-ins register here the same way a plugin would; ``command`` is
the target harness that runs an external agent CLI per task.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from pathlib import Path

from skillvc.core.config import ModelConfig
from skillvc.core.errors import ConfigError
from skillvc.models.backends.base import Backend, CallRequest, CallResult, TransientError

Factory = Callable[[ModelConfig], Backend]
_REGISTRY: dict[str, Factory] = {}


def register(prefix: str, factory: Factory) -> None:
    _REGISTRY[prefix] = factory


def _lazy(module: str, cls: str) -> Factory:
    """A factory that imports its backend module on first use: the SDKs take a second to import,
    which the simulator, the demo and read-only commands should not pay."""

    def factory(config: ModelConfig) -> Backend:
        backend_class = getattr(importlib.import_module(f"skillvc.models.backends.{module}"), cls)
        return backend_class.from_config(config)

    return factory


def _load_builtins() -> None:
    if _REGISTRY:
        return
    register("sim", _lazy("sim", "SimBackend"))
    register("openai", _lazy("openai_backend", "OpenAIBackend"))
    register("anthropic", _lazy("anthropic_backend", "AnthropicBackend"))
    register("command", _lazy("command", "CommandBackend"))


def get_backend(config: ModelConfig, root: Path | None = None) -> Backend:
    """The backend for a [target]/[optimizer] section (``harness = "command"`` wins).

    ``root`` (the repository) anchors an agent preset's relative ``files`` and ``executable``.
    """
    _load_builtins()
    if config.harness in ("claude-code", "codex"):
        from skillvc.models.agents.backend import AgentBackend

        return AgentBackend(config, root)
    prefix = "command" if config.harness == "command" else config.model.split(":", 1)[0]
    factory = _REGISTRY.get(prefix)
    if factory is None:
        raise ConfigError(
            f"Unknown model backend '{prefix}' in '{config.model}'.",
            hint=f"Use one of: {', '.join(sorted(p for p in _REGISTRY if p != 'command'))}.",
        )
    return factory(config)


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


SDK_BACKENDS = ("openai", "anthropic")  # the prefixes whose modules import an SDK


def lazy_backend(config: ModelConfig, root: Path | None = None) -> Backend:
    """``get_backend``, deferred to the first call for the SDK backends (see ``LazyBackend``);
    every other backend (the simulator, a command harness, an agent preset) is built and
    checked at once."""
    if config.harness == "chat" and config.model.split(":", 1)[0] in SDK_BACKENDS:
        return LazyBackend(config)
    return get_backend(config, root)


__all__ = [
    "Backend",
    "CallRequest",
    "CallResult",
    "LazyBackend",
    "TransientError",
    "get_backend",
    "lazy_backend",
    "register",
]

"""Model backends and their registry.

Model strings name a backend and a model: ``sim:<world>``, ``openai:<model>``,
``anthropic:<model>``. The built-ins register here the same way a plugin would; ``command`` is
the target harness that runs an external agent CLI per task.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path

from skillvc.backends.base import Backend, CallRequest, CallResult, TransientError
from skillvc.config import ModelConfig
from skillvc.errors import ConfigError

Factory = Callable[[ModelConfig], Backend]
_REGISTRY: dict[str, Factory] = {}


def register(prefix: str, factory: Factory) -> None:
    _REGISTRY[prefix] = factory


def _lazy(module: str, cls: str) -> Factory:
    """A factory that imports its backend module on first use: the SDKs take a second to import,
    which the simulator, the demo and read-only commands should not pay."""

    def factory(config: ModelConfig) -> Backend:
        backend_class = getattr(importlib.import_module(f"skillvc.backends.{module}"), cls)
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
        from skillvc.agents.backend import AgentBackend

        return AgentBackend(config, root)
    prefix = "command" if config.harness == "command" else config.model.split(":", 1)[0]
    factory = _REGISTRY.get(prefix)
    if factory is None:
        raise ConfigError(
            f"Unknown model backend '{prefix}' in '{config.model}'.",
            hint=f"Use one of: {', '.join(sorted(p for p in _REGISTRY if p != 'command'))}.",
        )
    return factory(config)


__all__ = ["Backend", "CallRequest", "CallResult", "TransientError", "get_backend", "register"]

"""Model backends and their registry.

Model strings name a backend and a model: ``sim:<world>``, ``openai:<model>``,
``anthropic:<model>``. The built-ins register here the same way a plugin would; ``command`` is
the target harness that runs an external agent CLI per task.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from skillvc.core.config import ModelConfig
from skillvc.core.errors import ConfigError
from skillvc.core.suggest import did_you_mean
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


def provider_backend(config: ModelConfig) -> Backend:
    """The registered backend for a model string's prefix (``harness = "command"`` wins); the
    choice of harness (an agent CLI, the tool loop) is ``skillvc.models.harness``'s."""
    _load_builtins()
    prefix = "command" if config.harness == "command" else config.model.split(":", 1)[0]
    factory = _REGISTRY.get(prefix)
    if factory is None:
        known = sorted(p for p in _REGISTRY if p != "command")
        raise ConfigError(
            f"Unknown model backend '{prefix}' in '{config.model}'.",
            hint=did_you_mean(prefix, known, listed="Use one of", then="Write it before the ':'."),
        )
    return factory(config)


def backend_names() -> list[str]:
    """The registered model-string prefixes (``command`` is a harness, not one of them)."""
    _load_builtins()
    return sorted(p for p in _REGISTRY if p != "command")


SDK_BACKENDS = ("openai", "anthropic")  # the prefixes whose modules import an SDK


__all__ = [
    "Backend",
    "CallRequest",
    "CallResult",
    "SDK_BACKENDS",
    "TransientError",
    "backend_names",
    "provider_backend",
    "register",
]

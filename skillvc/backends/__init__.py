"""Model backends and their registry.

Model strings name a backend and a model: ``sim:<world>``, ``openai:<model>``,
``anthropic:<model>``. The built-ins register here the same way a plugin would; ``command`` is
the target harness that runs an external agent CLI per task.
"""

from __future__ import annotations

from collections.abc import Callable

from skillvc.backends.base import Backend, CallRequest, CallResult, TransientError
from skillvc.config import ModelConfig
from skillvc.errors import ConfigError

Factory = Callable[[ModelConfig], Backend]
_REGISTRY: dict[str, Factory] = {}


def register(prefix: str, factory: Factory) -> None:
    _REGISTRY[prefix] = factory


def _load_builtins() -> None:
    if _REGISTRY:
        return
    from skillvc.backends import sim

    register("sim", sim.SimBackend.from_config)
    try:
        from skillvc.backends import anthropic_backend, command, openai_backend
    except ImportError:  # backends still being written land without breaking the simulator
        return
    register("openai", openai_backend.OpenAIBackend.from_config)
    register("anthropic", anthropic_backend.AnthropicBackend.from_config)
    register("command", command.CommandBackend.from_config)


def get_backend(config: ModelConfig) -> Backend:
    """The backend for a [target]/[optimizer] section (``harness = "command"`` wins)."""
    _load_builtins()
    prefix = "command" if config.harness == "command" else config.model.split(":", 1)[0]
    factory = _REGISTRY.get(prefix)
    if factory is None:
        raise ConfigError(
            f"Unknown model backend '{prefix}' in '{config.model}'.",
            hint=f"Use one of: {', '.join(sorted(p for p in _REGISTRY if p != 'command'))}.",
        )
    return factory(config)


__all__ = ["Backend", "CallRequest", "CallResult", "TransientError", "get_backend", "register"]

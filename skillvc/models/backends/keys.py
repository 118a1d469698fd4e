"""Which key variable a chat model needs, read without building its backend (no SDK import).

The same rules as ``openai_backend`` and ``anthropic_backend`` (``api_key_env``, else the
provider's variable; none for a loopback OpenAI-compatible server, which gets a placeholder),
so ``train`` can refuse a missing key before it creates a run.
"""

from __future__ import annotations

import os

from skillvc.core.config import CONFIG_FILE, ModelConfig
from skillvc.core.errors import AuthenticationFailed
from skillvc.models.backends.local import is_loopback


def key_variable(config: ModelConfig) -> str | None:
    """The variable holding the key of a chat model (None: it needs none)."""
    if config.harness != "chat":
        return None
    prefix = config.model.split(":", 1)[0]
    if prefix == "openai":
        if config.azure:
            return config.api_key_env or "AZURE_OPENAI_API_KEY"
        variable = config.api_key_env or "OPENAI_API_KEY"
        url = config.base_url or os.environ.get("OPENAI_BASE_URL")
        if not os.environ.get(variable) and is_loopback(url):
            return None  # a server on this machine: the backend sends a placeholder
        return variable
    if prefix == "anthropic":
        return config.api_key_env or "ANTHROPIC_API_KEY"
    return None


def missing_key(config: ModelConfig, role: str) -> AuthenticationFailed | None:
    """The error a first call would raise for an unset key, or None when it is set."""
    variable = key_variable(config)
    if variable is None or os.environ.get(variable):
        return None
    return AuthenticationFailed(
        f"{variable} is not set ([{role}] model {config.model} needs it); no run was started.",
        hint=f"Export it (export {variable}=...), or name another variable with api_key_env in "
        f"[{role}] of {CONFIG_FILE}; 'skillvc doctor' checks every setting.",
    )

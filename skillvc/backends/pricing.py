"""Dollar prices per million tokens, turned into the cost of each call.

Defaults cover common models (USD per 1M tokens: input, output); ``[prices]`` in skillvc.toml
overrides or adds entries, e.g. ``[prices."openai:my-model"] input = 0.5  output = 1.5``.
A model without a price has cost ``None``: reports show its tokens and say the price is unknown,
never a made-up zero. ``sim:`` models are free by definition.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from skillvc.errors import ConfigError

DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "openai:gpt-4o": (2.50, 10.00),
    "openai:gpt-4o-mini": (0.15, 0.60),
    "openai:gpt-4.1": (2.00, 8.00),
    "openai:gpt-4.1-mini": (0.40, 1.60),
    "openai:gpt-4.1-nano": (0.10, 0.40),
    "openai:o3": (2.00, 8.00),
    "openai:o4-mini": (1.10, 4.40),
    "openai:gpt-5": (1.25, 10.00),
    "openai:gpt-5-mini": (0.25, 2.00),
    "openai:gpt-5-nano": (0.05, 0.40),
    "anthropic:claude-opus-4-1": (15.00, 75.00),
    "anthropic:claude-sonnet-4-5": (3.00, 15.00),
    "anthropic:claude-sonnet-4": (3.00, 15.00),
    "anthropic:claude-haiku-4-5": (1.00, 5.00),
    "anthropic:claude-3-5-haiku": (0.80, 4.00),
    "anthropic:claude-3-5-haiku-latest": (0.80, 4.00),
}


# A dated snapshot suffix: OpenAI's "-2024-07-18", Anthropic's "-20250929".
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")


def price_for(
    model: str, overrides: Mapping[str, Mapping[str, float]] | None = None
) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens for ``model``, or None when unknown."""
    if overrides and model in overrides:
        return _override(model, overrides[model])
    if model.startswith("sim:"):
        return (0.0, 0.0)
    if model in DEFAULT_PRICES:
        return DEFAULT_PRICES[model]
    # Dated snapshots ("gpt-4o-mini-2024-07-18") price like their base model. Only dates:
    # "o3-pro" or "gpt-5-pro" cost many times their prefix, and a made-up price would let a
    # budget overrun silently, so any other suffix is unknown.
    return DEFAULT_PRICES.get(_SNAPSHOT.sub("", model))


def _override(model: str, entry: object) -> tuple[float, float]:
    """A ``[prices."<model>"]`` entry, checked: a bad one fails with a sentence, not a crash."""

    def number(side: str) -> float:
        raw = entry.get(side, 0.0) if isinstance(entry, Mapping) else None
        value = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else -1.0
        if math.isfinite(value) and value >= 0:
            return value
        raise ConfigError(
            f'[prices."{model}"] needs input and output as non-negative numbers '
            "(USD per 1M tokens).",
            hint=f'Write e.g. [prices."{model}"] input = 0.5 and output = 1.5 in skillvc.toml.',
        )

    return number("input"), number("output")


def cost_usd(
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    overrides: Mapping[str, Mapping[str, float]] | None = None,
) -> float | None:
    price = price_for(model, overrides)
    if price is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000

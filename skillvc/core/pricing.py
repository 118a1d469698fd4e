"""Dollar prices per million tokens, turned into the cost of each call.

Defaults cover common models (USD per 1M tokens: input, output); ``[prices]`` in skillvc.toml
overrides or adds entries, e.g. ``[prices."openai:my-model"] input = 0.5  output = 1.5``.
A model without a price has cost ``None``: reports show its tokens and say the price is unknown,
never a made-up zero. ``sim:`` models are free by definition.

Prompt caching: ``prompt_tokens`` counts every input token, including those the provider read
from its prompt cache (``cached_tokens``) and those it wrote to it (``cache_write_tokens``,
Anthropic only). Those are priced at ``cached_input`` and ``cache_write`` per 1M tokens: a
``[prices]`` entry may give both; the built-in table has the documented rates (Anthropic: reads
0.1x input, 5-minute writes 1.25x input; OpenAI: the cached input price of its pricing page).
A model without a known cached rate prices cached and written tokens like other input, so a
missing rate can overstate a cost but never understate it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from skillvc.core.errors import ConfigError

BATCH_DISCOUNT = 0.5  # OpenAI Batch and Anthropic Message Batches: half the list price

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


# (cached input, cache write) USD per 1M tokens, from the providers' pricing pages. OpenAI does
# not charge cache writes (they are ordinary input), Anthropic charges 1.25x for 5-minute ones.
DEFAULT_CACHE_PRICES: dict[str, tuple[float, float]] = {
    "openai:gpt-4o": (1.25, 2.50),
    "openai:gpt-4o-mini": (0.075, 0.15),
    "openai:gpt-4.1": (0.50, 2.00),
    "openai:gpt-4.1-mini": (0.10, 0.40),
    "openai:gpt-4.1-nano": (0.025, 0.10),
    "openai:o3": (0.50, 2.00),
    "openai:o4-mini": (0.275, 1.10),
    "openai:gpt-5": (0.125, 1.25),
    "openai:gpt-5-mini": (0.025, 0.25),
    "openai:gpt-5-nano": (0.005, 0.05),
    "anthropic:claude-opus-4-1": (1.50, 18.75),
    "anthropic:claude-sonnet-4-5": (0.30, 3.75),
    "anthropic:claude-sonnet-4": (0.30, 3.75),
    "anthropic:claude-haiku-4-5": (0.10, 1.25),
    "anthropic:claude-3-5-haiku": (0.08, 1.00),
    "anthropic:claude-3-5-haiku-latest": (0.08, 1.00),
}

# A dated snapshot suffix: OpenAI's "-2024-07-18", Anthropic's "-20250929".
_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8})$")


def price_for(
    model: str, overrides: Mapping[str, Mapping[str, float]] | None = None
) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens for ``model``, or None when unknown."""
    if overrides and model in overrides:
        return _override(model, overrides[model])[:2]
    if model.startswith("sim:"):
        return (0.0, 0.0)
    if model in DEFAULT_PRICES:
        return DEFAULT_PRICES[model]
    # Dated snapshots ("gpt-4o-mini-2024-07-18") price like their base model. Only dates:
    # "o3-pro" or "gpt-5-pro" cost many times their prefix, and a made-up price would let a
    # budget overrun silently, so any other suffix is unknown.
    return DEFAULT_PRICES.get(_SNAPSHOT.sub("", model))


def cache_prices_for(
    model: str, overrides: Mapping[str, Mapping[str, float]] | None = None
) -> tuple[float, float] | None:
    """(cached input, cache write) USD per 1M tokens for ``model``, or None when its price is
    unknown; a model with a price but no cached rate pays its input price for both."""
    if overrides and model in overrides:
        return _override(model, overrides[model])[2:]
    price = price_for(model, overrides)
    if price is None:
        return None
    rates = DEFAULT_CACHE_PRICES.get(model) or DEFAULT_CACHE_PRICES.get(_SNAPSHOT.sub("", model))
    return rates if rates is not None else (price[0], price[0])


def _override(model: str, entry: object) -> tuple[float, float, float, float]:
    """A ``[prices."<model>"]`` entry, checked: a bad one fails with a sentence, not a crash."""

    def number(side: str, default: float = 0.0) -> float:
        raw = entry.get(side, default) if isinstance(entry, Mapping) else None
        value = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else -1.0
        if math.isfinite(value) and value >= 0:
            return value
        raise ConfigError(
            f'[prices."{model}"] needs input and output (and cached_input, cache_write if '
            "given) as non-negative numbers (USD per 1M tokens).",
            hint=f'Write e.g. [prices."{model}"] input = 0.5 and output = 1.5 in skillvc.toml.',
        )

    price_in = number("input")
    return (
        price_in,
        number("output"),
        number("cached_input", price_in),
        number("cache_write", price_in),
    )


def cost_usd(
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    overrides: Mapping[str, Mapping[str, float]] | None = None,
    *,
    cached_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> float | None:
    """USD for one call; ``prompt_tokens`` includes the cached and written ones."""
    price = price_for(model, overrides)
    if price is None:
        return None
    if not cached_tokens and not cache_write_tokens:
        return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000
    cached, write = cache_prices_for(model, overrides) or (price[0], price[0])
    uncached = max(prompt_tokens - cached_tokens - cache_write_tokens, 0)
    return (
        uncached * price[0]
        + cached_tokens * cached
        + cache_write_tokens * write
        + completion_tokens * price[1]
    ) / 1_000_000

"""What a run's model calls used: calls, tokens and cost (``run_usage``, the one definition).

A run's usage is the model calls the run itself made (its ``model.call`` events, over every
process that worked on it); answers reused from the log cost nothing and are not counted again.
Costs are summed exactly (``Fraction``), so the figure does not depend on the order of rows.
Training's summary, ``skillvc runs`` and ``skillvc report`` all read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from skillvc.core.store import EventStore


@dataclass(frozen=True)
class RunUsage:
    """Model calls a run made, their tokens and the cost of those with a known price."""

    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0  # priced calls only; see unpriced_calls
    unpriced_calls: int = 0
    input_tokens: int = 0  # every input token, cached ones included
    cached_tokens: int = 0  # input tokens read from a provider's prompt cache

    @property
    def cache_hit_ratio(self) -> float | None:
        """Cached input tokens / input tokens, or None when the run sent no input tokens."""
        return self.cached_tokens / self.input_tokens if self.input_tokens else None

    @property
    def known_cost(self) -> float | None:
        """The cost, or None when some call has no price (a partial sum would mislead)."""
        return None if self.unpriced_calls else self.cost_usd


def sum_usage(rows: Iterable[dict[str, Any]]) -> RunUsage:
    calls = tokens = unpriced = prompt = cached = 0
    cost = Fraction(0)
    for r in rows:
        calls += 1
        prompt += r["prompt_tokens"] or 0
        cached += r["cached_tokens"] or 0
        tokens += (r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0)
        if r["cost_usd"] is None:
            unpriced += 1
        else:
            cost += Fraction(r["cost_usd"])
    return RunUsage(calls, tokens, float(cost), unpriced, prompt, cached)


_USAGE_SQL = (
    "SELECT run_id, json_extract(payload, '$.prompt_tokens') AS prompt_tokens, "
    "json_extract(payload, '$.completion_tokens') AS completion_tokens, "
    "json_extract(payload, '$.cached_tokens') AS cached_tokens, "
    "json_extract(payload, '$.cost_usd') AS cost_usd FROM events WHERE type = 'model.call'"
)


def run_usage(store: EventStore, run_id: str) -> RunUsage:
    """The one definition of a run's calls, tokens and cost (see the module docstring)."""
    return sum_usage(store.query(_USAGE_SQL + " AND run_id = ? ORDER BY id", [run_id]))


def usage_by_run(store: EventStore) -> dict[str, RunUsage]:
    rows: dict[str, list[dict[str, Any]]] = {}
    for r in store.query(_USAGE_SQL + " AND run_id IS NOT NULL ORDER BY id"):
        rows.setdefault(r["run_id"], []).append(r)
    return {run: sum_usage(rs) for run, rs in rows.items()}

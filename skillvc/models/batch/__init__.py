"""Provider batch APIs (``mode = "batch"``): a wave's fresh calls as one batch, at half price.

Invariants:
- One wave (the fresh target calls of one ``Evaluator.run``) is one batch, identified by the
  hash of its calls' cache keys. A ``batch.submitting`` intent is logged before the create call
  and a ``batch.submitted`` event (with the provider's batch id) right after it, before any
  waiting: a resumed run finds the id and polls that batch instead of submitting it again. A
  crash between the create call and its event is reconciled by listing the provider's batches
  for the wave's tag (OpenAI: batch metadata; Anthropic, which has no metadata: a batch created
  after the intent with the same number of requests). A wave whose calls all belong to an
  earlier batch (a process killed while recording that batch's results) reads that batch.
- Results come back keyed by ``custom_id`` (the call's cache key) and are returned in item
  order; an item the batch failed (or left out) is a model error of that item, never a score.
- Answers are priced at ``BATCH_DISCOUNT`` of the price table (both providers charge half).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from skillvc.core.config import ModelConfig
from skillvc.core.errors import ConfigError
from skillvc.core.hashing import content_id
from skillvc.core.pricing import BATCH_DISCOUNT
from skillvc.core.store import EventStore
from skillvc.models.backends.base import CallRequest
from skillvc.models.batch.base import PROVIDERS, Provider, Status
from skillvc.models.executors import Call, CallFailure


def provider_for(config: ModelConfig) -> Provider:
    prefix = config.model.split(":", 1)[0]
    if config.harness == "command" or prefix not in PROVIDERS or config.azure:
        raise ConfigError(
            f"mode = \"batch\" needs an openai: or anthropic: model, not '{config.model}'.",
            hint='Set mode = "sync" for this model.',
        )
    if prefix == "openai":
        from skillvc.models.backends.openai_backend import OpenAIBackend
        from skillvc.models.batch.openai_batch import OpenAIBatches

        return OpenAIBatches(OpenAIBackend(config))
    from skillvc.models.backends.anthropic_backend import AnthropicBackend
    from skillvc.models.batch.anthropic_batch import AnthropicBatches

    return AnthropicBatches(AnthropicBackend(config))


class BatchExecutor:
    """An executor whose ``map`` sends ``run_call``'s calls out as one provider batch."""

    name = "batch"

    def __init__(
        self,
        store: EventStore,
        provider: Provider,
        *,
        run_id: str | None = None,
        poll_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.provider = provider
        self.run_id = run_id
        self.poll_s = poll_s
        self.sleep = sleep
        self.created = 0  # batches this process created (resubmissions show up here)

    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        calls: list[Call] = list(items)
        if not calls:
            return []
        requests = [c.request for c in calls]
        batch_id = self.submit(requests)
        while not self.provider.status(batch_id).ended:
            self.sleep(self.poll_s)
        got = self.provider.results(batch_id)
        self.store.append(
            "batch.ended",
            {"batch_id": batch_id, "provider": self.provider.name, "n": len(requests)},
            run_id=self.run_id,
            key=batch_id,
        )
        missing = CallFailure(
            f"batch {batch_id} returned no result for this request", "BatchError", False, False
        )
        return [got.get(r.key, missing) for r in requests]

    def submit(self, requests: Sequence[CallRequest]) -> str:
        """The batch id of this wave: logged, found again, or newly created."""
        keys = [r.key for r in requests]
        wave = content_id({"batch": keys}, length=32)
        submitted = self.store.find("batch.submitted", wave)
        if submitted is not None:
            return str(submitted.payload["batch_id"])
        # A process killed while recording an ended batch's results leaves a smaller wave to
        # do: the batch that holds all of its calls answers it, without paying for them again.
        for event in self.store.events(types=["batch.submitted"], newest_first=True):
            if set(keys) <= set(event.payload.get("keys", ())):
                return str(event.payload["batch_id"])
        intent = self.store.find("batch.submitting", wave)
        batch_id = None
        if intent is not None:  # a crash between create and its event: is the batch there?
            since = float(intent.payload.get("at", 0.0))
            batch_id = self.provider.find(wave, len(requests), since)
        else:
            self.store.append(
                "batch.submitting",
                {"provider": self.provider.name, "n": len(requests), "at": time.time()},
                run_id=self.run_id,
                key=wave,
            )
        if batch_id is None:
            batch_id = self.provider.create(requests, wave)
            self.created += 1
        self.store.append(
            "batch.submitted",
            {"batch_id": batch_id, "provider": self.provider.name, "n": len(keys), "keys": keys},
            run_id=self.run_id,
            key=wave,
        )
        return batch_id


def batch_executor(store: EventStore, config: ModelConfig, run_id: str | None) -> BatchExecutor:
    return BatchExecutor(store, provider_for(config), run_id=run_id, poll_s=config.batch_poll_s)


__all__ = ["BATCH_DISCOUNT", "BatchExecutor", "Provider", "Status", "batch_executor"]

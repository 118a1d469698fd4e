"""Anthropic Message Batches: ``messages.batches.create``, ``retrieve`` until ended, results.

Each request is ``{"custom_id", "params"}`` with the params the sync backend would send; each
result line carries the same ``custom_id`` and a ``result`` of type ``succeeded`` (with the
message), ``errored``, ``canceled`` or ``expired``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import anthropic

from skillvc.models.backends.anthropic_backend import AnthropicBackend, cache_usage
from skillvc.models.backends.base import CallRequest, CallResult
from skillvc.models.batch.base import SdkBatches, Status
from skillvc.models.executors import CallFailure


def _seconds(value: Any) -> float:
    return value.timestamp() if isinstance(value, datetime) else float(value or 0)


class AnthropicBatches(SdkBatches[AnthropicBackend]):
    name = "anthropic"
    sdk = anthropic
    sdk_error = anthropic.AnthropicError

    def params(self, request: CallRequest) -> dict[str, Any]:
        args = self.backend._arguments(request)
        extra = args.pop("extra_body", {})  # a batch request's params are the raw body
        return {**args, **extra}

    def create(self, requests: Sequence[CallRequest], wave: str) -> str:
        client = self.backend._get_client()
        body: Any = [{"custom_id": r.key, "params": self.params(r)} for r in requests]
        with self._sdk():
            batch = client.messages.batches.create(requests=body)
        return str(batch.id)

    def status(self, batch_id: str) -> Status:
        with self._sdk():
            batch = self.backend._get_client().messages.batches.retrieve(batch_id)
        c = batch.request_counts
        total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
        return Status(batch.processing_status == "ended", _seconds(batch.created_at), total)

    def find(self, wave: str, n: int, since: float) -> str | None:
        # Message batches carry no metadata: a batch created after our intent with as many
        # requests as our wave is the one the crashed process created.
        with self._sdk():
            for batch in self.backend._get_client().messages.batches.list(limit=100):
                created = _seconds(batch.created_at)
                if created < since - 60:
                    break
                c = batch.request_counts
                total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
                if created >= since - 1 and total == n:
                    return str(batch.id)
        return None

    def results(self, batch_id: str) -> dict[str, CallResult | CallFailure]:
        out: dict[str, CallResult | CallFailure] = {}
        model = self.backend.model
        with self._sdk():
            for entry in self.backend._get_client().messages.batches.results(batch_id):
                result = entry.result
                if result.type == "succeeded":
                    message = result.message
                    text = "".join(
                        getattr(b, "text", "") for b in message.content if b.type == "text"
                    )
                    prompt_tokens, cached, written = cache_usage(message.usage)
                    out[entry.custom_id] = CallResult(
                        text=text,
                        prompt_tokens=prompt_tokens,
                        completion_tokens=message.usage.output_tokens or 0,
                        meta={"finish_reason": message.stop_reason, "batch": True},
                        cached_tokens=cached,
                        cache_write_tokens=written,
                    )
                else:
                    error = getattr(result, "error", None)
                    inner = getattr(error, "error", None)
                    detail = getattr(inner, "message", None) or result.type
                    out[entry.custom_id] = CallFailure(
                        f"{model} batch request {result.type}: {detail}",
                        "BatchError",
                        result.type == "expired",
                        getattr(inner, "type", None) == "authentication_error",
                    )
        return out

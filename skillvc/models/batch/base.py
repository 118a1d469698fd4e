"""What every provider's batch API offers the batch executor (``Provider``, ``Status``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from skillvc.models.backends.base import CallRequest, CallResult
from skillvc.models.executors import CallFailure

TAG = "skillvc_wave"  # the metadata key that names a batch's wave (OpenAI)
PROVIDERS = ("openai", "anthropic")


@dataclass(frozen=True)
class Status:
    ended: bool
    created_at: float  # unix seconds
    total: int


class Provider(Protocol):
    """One provider's batch API, through its SDK."""

    name: str

    def create(self, requests: Sequence[CallRequest], wave: str) -> str: ...

    def status(self, batch_id: str) -> Status: ...

    def find(self, wave: str, n: int, since: float) -> str | None: ...

    def results(self, batch_id: str) -> dict[str, CallResult | CallFailure]: ...

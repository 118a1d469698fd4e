"""What every provider's batch API offers the batch executor (``Provider``, ``Status``)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import Generic, Protocol, TypeVar

from skillvc.models.backends.base import CallRequest, CallResult
from skillvc.models.backends.retry import SdkBackend, backend_sdk_errors
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


B = TypeVar("B", bound=SdkBackend)


class SdkBatches(Generic[B]):
    """A provider's batch API reached through its SDK, with its backend's key and errors."""

    name: str
    sdk: ModuleType  # the provider's SDK module
    sdk_error: type[Exception]  # the base class of its errors

    def __init__(self, backend: B) -> None:
        self.backend = backend

    def _sdk(self) -> AbstractContextManager[None]:
        return backend_sdk_errors(self.sdk, self.sdk_error, self.backend)

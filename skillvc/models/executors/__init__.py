"""Where fresh model calls run: this process's threads (the default) or a Ray cluster.

Invariants:
- An executor runs only the pure part of a rollout, ``run_call``: one request through its
  backend, with the backend's retries. The event log, the cache and git stay in the driver,
  which answers recorded calls itself and sends out only the rest.
- ``map`` returns results in item order, whatever order they finish in, so the driver records
  them (and everything derived from them) exactly as the thread executor would.
- A lost worker or node is an infrastructure failure: the task is retried; when the retries run
  out the run stops with ``ExecutorFailed``. It is never turned into a model error or a score,
  so a resumed run makes the call again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from skillvc.core.config import ModelConfig, TrainConfig
from skillvc.core.errors import AuthenticationFailed, BackendError, ConfigError
from skillvc.core.hashing import canonical_json
from skillvc.models.backends.base import Backend, CallRequest, CallResult, TransientError
from skillvc.models.backends.retry import RetryPolicy, call_with_retries
from skillvc.models.harness import get_backend

T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("threads", "ray")


class Executor(Protocol):
    """Runs ``fn`` over ``items`` and returns the results in item order. For a remote executor
    ``fn`` must be a module-level function and items and results picklable."""

    name: str

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]: ...


@dataclass(frozen=True)
class CallFailure:
    """A model call that failed after the backend's retries (a model error, not an
    infrastructure one): what the driver needs to log it as it would a local failure."""

    error: str
    kind: str
    transient: bool
    refused: bool


@dataclass(frozen=True)
class Call:
    """One fresh call to make: the role's model section (to build the backend wherever the
    call runs) and the request."""

    config: ModelConfig
    request: CallRequest


_BACKENDS: dict[str, Backend] = {}


def run_call(call: Call) -> CallResult | CallFailure:
    """The pure part of a rollout: one request through its backend, with its retries.

    Runs in a thread of the driver or a Ray worker alike; the backend is built once per process
    and model section."""
    ident = canonical_json(dataclasses.asdict(call.config))
    backend = _BACKENDS.get(ident)
    if backend is None:
        backend = _BACKENDS.setdefault(ident, get_backend(call.config))
    policy = RetryPolicy(max_retries=call.config.max_retries)
    try:
        return call_with_retries(lambda: backend.complete(call.request), policy)
    except (BackendError, OSError) as exc:
        return CallFailure(
            str(exc),
            type(exc).__name__,
            isinstance(exc, TransientError),
            isinstance(exc, AuthenticationFailed),
        )


class ThreadExecutor:
    """Today's behaviour: a thread pool in this process."""

    name = "threads"

    def __init__(self, workers: int) -> None:
        self.workers = workers

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            return list(pool.map(fn, items))


def make_executor(train: TrainConfig) -> Executor | None:
    """The executor of ``[train] executor``; None for threads, whose calls keep running in the
    caller's own pool exactly as before."""
    if train.executor == "threads":
        return None
    if train.executor == "ray":
        from skillvc.models.executors.ray_cluster import RayExecutor

        return RayExecutor.from_config(train)
    raise ConfigError(f"[train] executor '{train.executor}' is not one of {', '.join(EXECUTORS)}.")


__all__ = [
    "EXECUTORS",
    "Call",
    "CallFailure",
    "Executor",
    "ThreadExecutor",
    "make_executor",
    "run_call",
]

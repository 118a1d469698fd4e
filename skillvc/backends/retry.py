"""Retries with exponential backoff and full jitter, honouring the server's Retry-After.

Only ``TransientError`` is retried. After the last attempt the error propagates, and the
caller records it as an error event: an infrastructure failure is never a score of 0.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from skillvc.backends.base import TransientError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_delay_s)
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return rng.uniform(0, ceiling)


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, TransientError, float], None] | None = None,
) -> T:
    rng = random.Random()
    attempt = 0
    while True:
        try:
            return fn()
        except TransientError as exc:
            attempt += 1
            if attempt > policy.max_retries:
                raise
            wait = policy.delay(attempt, exc.retry_after, rng)
            if on_retry is not None:
                on_retry(attempt, exc, wait)
            sleep(wait)


class RateLimiter:
    """A simple sliding-window limit on requests (and optionally tokens) per minute."""

    def __init__(self, requests_per_minute: float | None, tokens_per_minute: float | None = None):
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self._lock = threading.Lock()
        self._events: list[tuple[float, int]] = []

    def acquire(
        self,
        tokens: int = 0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not self.rpm and not self.tpm:
            return
        while True:
            with self._lock:
                now = clock()
                self._events = [(t, n) for t, n in self._events if now - t < 60.0]
                used_requests = len(self._events)
                used_tokens = sum(n for _, n in self._events)
                ok = (not self.rpm or used_requests < self.rpm) and (
                    not self.tpm or used_tokens + tokens <= self.tpm or not self._events
                )
                if ok:
                    self._events.append((now, tokens))
                    return
                wait = 60.0 - (now - self._events[0][0]) + 0.01
            sleep(max(wait, 0.01))

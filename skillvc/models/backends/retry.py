"""Retries with exponential backoff and full jitter, honouring the server's Retry-After.

Only ``TransientError`` is retried. After the last attempt the error propagates, and the
caller records it as an error event: an infrastructure failure is never a score of 0.
Backends classify HTTP failures with ``error_for_status`` so every SDK maps statuses alike:
401/403 stop the run, 408/409/429/5xx are transient, any other status is a plain failure.
"""

from __future__ import annotations

import contextlib
import datetime
import email.utils
import json
import math
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from types import ModuleType
from typing import Protocol, TypeVar

from skillvc.core.config import ModelConfig
from skillvc.core.errors import AuthenticationFailed, BackendError, redact
from skillvc.models.backends.base import TransientError

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
        # The exponent is capped: 2 ** 1100 overflows a float, and 2 ** 62 s is past any cap.
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** min(attempt - 1, 62))
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


# Statuses worth retrying: request timeout, conflict (e.g. a concurrent update), too many
# requests, and every server-side failure (500-599, incl. Anthropic's 529 "overloaded").
RETRYABLE_STATUSES = frozenset({408, 409, 429})


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUSES or 500 <= status <= 599


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: Callable[[], float] = time.time
) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` is either delta-seconds or an HTTP date (RFC 9110 10.2.3); a date in the past
    means "now" (0). Anything unparsable, negative or non-finite gives None (use backoff).
    """
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000" parses as naive; an HTTP date is always GMT
            when = when.replace(tzinfo=datetime.timezone.utc)
        return max(0.0, when.timestamp() - now())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


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


def server_detail(body: object) -> str:
    """The human explanation in an error body (OpenAI and Anthropic shapes), or ''."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if isinstance(message, str):
            return message
    return ""


def error_for_status(
    model: str,
    status: int,
    body: object,
    headers: Mapping[str, str] | None,
    secrets: Sequence[str] = (),
    key_env: str | None = None,
) -> BackendError:
    """The exception for an HTTP error answer: transient, authentication, or plain failure.

    One sentence naming the model and the status, plus the server's own explanation (shortened),
    with every secret removed: servers do echo keys back in 401 bodies. A refused key names the
    environment variable it came from (``key_env``), because that is what the user must fix.
    """
    detail = server_detail(body)
    try:
        phrase = f" {HTTPStatus(status).phrase}"
    except ValueError:
        phrase = ""  # e.g. Anthropic's 529 "overloaded" is not a registered status
    detail = " ".join(detail.split())[:300].rstrip(".")
    if status in (401, 403) and key_env:
        message = f"{model} refused the key in {key_env} (HTTP {status}{phrase}" + (
            f": {detail})." if detail else ")."
        )
        hint = (
            f"Export a valid key in {key_env} (or name another variable with api_key_env in "
            "skillvc.toml), then run 'skillvc doctor' to test it."
        )
        return AuthenticationFailed(redact(message, list(secrets)), hint=hint)
    message = f"{model} answered HTTP {status}{phrase}" + (f": {detail}." if detail else ".")
    message = redact(message, list(secrets))
    if status in (401, 403):
        return AuthenticationFailed(message)
    if is_retryable_status(status):
        return TransientError(message, retry_after=parse_retry_after(headers))
    return BackendError(message)


def require_key(key_env: str, hint: str) -> str:
    """The API key in ``key_env``, or ``AuthenticationFailed`` naming the variable.

    A key with surrounding whitespace (a pasted newline) is refused here, as ``skillvc doctor``
    does: the HTTP client would reject the header and the SDK report a "connection error",
    which is retried as an outage and never names the variable to fix.
    """
    key = os.environ.get(key_env, "")
    if not key:
        raise AuthenticationFailed(f"{key_env} is not set.", hint=hint)
    if key != key.strip():
        raise AuthenticationFailed(
            f"{key_env} has leading or trailing whitespace (a pasted newline?).",
            hint=f'Export it again without spaces or newlines, e.g. export {key_env}="$(tr -d '
            "'[:space:]' < keyfile)\".",
        )
    return key


@contextlib.contextmanager
def translated_sdk_errors(
    sdk: ModuleType,
    base_error: type[Exception],
    *,
    model: str,
    timeout_s: float,
    key: str | None,
    key_env: str | None,
) -> Iterator[None]:
    """Turn the exceptions of the openai/anthropic SDKs (same Stainless-generated hierarchy)
    into ours: retryable failures become TransientError, the rest BackendError or
    AuthenticationFailed; every message is scrubbed of ``key``."""
    try:
        yield
    except sdk.APIStatusError as exc:
        raise error_for_status(
            model, exc.status_code, exc.body, exc.response.headers, [key or ""], key_env=key_env
        ) from None
    except sdk.APITimeoutError:
        raise TransientError(f"{model} did not answer within {timeout_s:g} s.") from None
    except sdk.APIConnectionError:
        raise TransientError(f"{model} could not be reached (connection error).") from None
    except (json.JSONDecodeError, sdk.APIResponseValidationError):
        raise TransientError(f"{model} answered with a body that is not valid JSON.") from None
    except base_error as exc:
        raise BackendError(redact(f"{model} call failed: {exc}", [key or ""])) from None


class SdkBackend(Protocol):
    """What ``backend_sdk_errors`` reads of an OpenAI or Anthropic backend."""

    model: str
    config: ModelConfig
    key_env: str
    _key: str


def backend_sdk_errors(
    sdk: ModuleType, base_error: type[Exception], backend: SdkBackend
) -> contextlib.AbstractContextManager[None]:
    """``translated_sdk_errors`` for a call of ``backend``: its model, configured timeout, key."""
    return translated_sdk_errors(
        sdk,
        base_error,
        model=backend.model,
        timeout_s=backend.config.timeout_s,
        key=backend._key,
        key_env=backend.key_env,
    )

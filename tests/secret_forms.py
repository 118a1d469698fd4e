"""The forms in which a secret must never be found: what the secret tests search for."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from urllib.parse import quote, quote_plus


def leaked_forms(secret: str) -> set[str]:
    """Every form of ``secret`` that must not appear: clear, URL-encoded, hex, and base64.

    Base64 of a secret inside longer text depends on its offset modulo 3; for each offset the
    characters that depend on the secret's bytes alone are what would give it away."""
    raw = secret.encode()
    forms = {secret, quote(secret, safe=""), quote_plus(secret), raw.hex(), raw.hex().upper()}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        core = encoded[-(-8 * offset // 6) : 8 * (offset + len(raw)) // 6]
        forms |= {core, core.replace("+", "-").replace("/", "_")}
    for text in (raw, b"user:" + raw, b":" + raw, raw + b":"):
        forms |= {base64.b64encode(text).decode(), base64.urlsafe_b64encode(text).decode()}
    return forms


def assert_nowhere(secrets: Iterable[str], places: dict[str, str | bytes]) -> None:
    for secret in secrets:
        for form in leaked_forms(secret):
            for where, content in places.items():
                needle: str | bytes = form.encode() if isinstance(content, bytes) else form
                assert needle not in content, f"{secret!r} as {form!r} in {where}"

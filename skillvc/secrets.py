"""Secret scrubbing: the one place that decides what a secret is and removes it from text.

Invariant: no secret is stored in the event log or printed, in clear or in any encoding we know
of. Two levels, because they differ in what they may get wrong:

- ``scrub_values`` removes the *values* of the secrets this process knows: every environment
  variable named like a credential (``OPENAI_API_KEY``, anything ending in ``_KEY``, ``_TOKEN``,
  ``_SECRET``, ``_PASSWORD``), the variables ``api_key_env`` names, the password of any URL
  with credentials in the environment or the config, and the values ``[target] env`` reads
  from ``${VAR}``. Each value is removed in clear, base64 (standard and URL-safe, at all three
  alignments, so also inside ``Authorization: Basic base64(user:KEY)``), percent-encoded and
  hex form. It cannot hit ordinary text, so the event store applies it to every blob and
  payload, and the CLI to everything it prints.
- ``scrub`` adds the *shapes*: ``sk-...``/``sk-ant-...``/``sk-proj-...`` keys, AWS access key
  ids, GitHub and Slack tokens, private-key blocks, ``Authorization``/``api-key``/``x-api-key``
  header values, bare ``Bearer`` tokens and ``user:password@`` in URLs. Shapes can match text
  that is no secret, so they are applied where outside text enters (agent stdout and stderr,
  model answers and error bodies) and to error messages, never to the user's own skill file
  on its way into the log (a skill that documents ``sk-...`` keys must round-trip unchanged).

Values shorter than ``MIN_SECRET_LENGTH`` are placeholders ("local", "ollama", "none"), not
keys: blanking them would garble every word that contains them ("localhost"). A 64-hex SHA-256
is a content id, never a secret shape. ``scrub(scrub(x)) == scrub(x)``: the replacement holds
nothing that matches again, so text scrubbed before it was cached replays unchanged.
"""

from __future__ import annotations

import base64
import functools
import io
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO
from urllib.parse import quote, quote_plus, unquote

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 12
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY")
SECRET_NAME_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")  # _API_KEY ends in _KEY

_lock = threading.Lock()
_names: set[str] = set()  # variables named by the config (api_key_env, ${VAR} references)
_values: set[str] = set()  # secrets that live in no variable we scan (a base_url's password)


def is_secret_name(name: str) -> bool:
    """True for an environment variable whose value is treated as a secret."""
    upper = name.upper()
    return upper in KEY_VARIABLES or upper.endswith(SECRET_NAME_SUFFIXES) or name in _names


def register_names(names: Iterable[str | None]) -> None:
    """Treat the values of these variables as secrets from now on (e.g. ``api_key_env``)."""
    with _lock:
        _names.update(n for n in names if n)


def register_values(values: Iterable[str | None]) -> None:
    """Treat these values as secrets from now on (e.g. a password inside a configured URL)."""
    with _lock:
        _values.update(v for v in values if v)


# "scheme://user:password@" (the scheme is required: "a:b@c" in prose is no URL).
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s:@?#]*):(?P<password>[^/\s?#]*)@"
)


def url_passwords(text: str) -> list[str]:
    """The passwords of URLs with credentials in ``text``, raw and percent-decoded (an HTTP
    client sends the decoded form in its ``Authorization: Basic`` header)."""
    found = []
    for m in _URL_CREDENTIALS.finditer(text):
        password = m.group("password")
        if password and password != REDACTED:
            found += [password, unquote(password)]
    return found


def secret_values(
    environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()
) -> frozenset[str]:
    """Every secret value known now: from the environment, registered ones and ``extra``."""
    env = os.environ if environ is None else environ
    found: list[str] = list(extra)
    for name, value in env.items():
        if is_secret_name(name):
            found.append(value)
        elif "://" in value and "@" in value:  # e.g. OPENAI_BASE_URL=https://u:KEY@gateway
            found += url_passwords(value)
    with _lock:
        found += _values
    values = {v for v in found if v} | {v.strip() for v in found if v}
    return frozenset(v for v in values if len(v) >= MIN_SECRET_LENGTH)


def encodings(secret: str) -> set[str]:
    """The forms of ``secret`` removed as they are: clear, percent-encoded and hex."""
    raw = secret.encode("utf-8")
    forms = {secret, quote(secret, safe=""), quote_plus(secret), raw.hex(), raw.hex().upper()}
    forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(secret, safe="")))
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


def base64_cores(secret: str) -> set[str]:
    """What gives ``secret`` away in base64, standard or URL-safe, wherever it sits.

    Base64 works on 3-byte groups, so a secret inside longer text (``user:KEY`` in a Basic
    header) is encoded differently at each of its 3 possible offsets. At offset ``a`` the
    characters from ``ceil(8a/6)`` up to ``floor(8(a+n)/6)`` depend on the secret's bytes only;
    that core is what we look for (and the up to 3 mixed characters on each side with it).
    """
    raw = secret.encode("utf-8")
    cores = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        core = encoded[(8 * offset + 5) // 6 : (8 * (offset + len(raw))) // 6]
        cores |= {core, core.translate(str.maketrans("+/", "-_"))}
    return {c for c in cores if len(c) >= MIN_SECRET_LENGTH}


def _alternation(forms: set[str]) -> str:
    # Longest first: a form that contains another must be removed whole.
    return "|".join(re.escape(f) for f in sorted(forms, key=lambda f: (-len(f), f)))


@functools.lru_cache(maxsize=64)
def _values_pattern(values: frozenset[str]) -> re.Pattern[str] | None:
    plain: set[str] = set()
    cores: set[str] = set()
    for value in values:
        plain |= encodings(value)
        cores |= base64_cores(value)
    if not plain and not cores:
        return None
    parts = [_alternation(plain)] if plain else []
    if cores:
        b64 = "[A-Za-z0-9+/_-]"
        parts.insert(0, f"{b64}{{0,3}}(?:{_alternation(cores)}){b64}{{0,3}}={{0,2}}")
    return re.compile("|".join(f"(?:{p})" for p in parts))


_BASIC = re.compile(r"\b(Basic\s+)([A-Za-z0-9+/_-]{8,}={0,2})")


def _basic_credentials(m: re.Match[str]) -> str:
    """``Basic <base64 of user:password>`` only: "Basic understanding" is prose."""
    token = m.group(2).translate(str.maketrans("-_", "+/"))
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4))
    except ValueError:  # binascii.Error: not base64 at all
        return m.group(0)
    text = decoded.decode("ascii", "replace")
    if ":" in text and text.isprintable():
        return m.group(1) + REDACTED
    return m.group(0)


_LEFT = r"(?<![A-Za-z0-9_-])"  # a shape starts at a word boundary ("task-..." is no "sk-")
_SHAPES: list[tuple[re.Pattern[str], Any]] = [
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.S,
        ),
        REDACTED,
    ),
    (_URL_CREDENTIALS, lambda m: f"{m.group('scheme')}{m.group('user')}:{REDACTED}@"),
    # Header or key=value forms, quoted or not (JSON, curl -H, Python reprs); the scheme word
    # of an Authorization value is kept so the message still says what kind it was.
    (
        re.compile(
            r"((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:(?:Basic|Bearer|Token|Digest)\s+)?)"
            r"[^\s\"',}]{6,}",
            re.I,
        ),
        lambda m: m.group(1) + REDACTED,
    ),
    (
        re.compile(
            r"(\b(?:x-api-key|api[-_]?key|access[-_]token)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}&]{6,}",
            re.I,
        ),
        lambda m: m.group(1) + REDACTED,
    ),
    (re.compile(r"\b([Bb]earer\s+)[A-Za-z0-9._~+/-]{8,}=*"), lambda m: m.group(1) + REDACTED),
    (_BASIC, _basic_credentials),
    (re.compile(_LEFT + r"sk-(?:ant-|proj-)?[A-Za-z0-9_-]{12,}"), REDACTED),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(_LEFT + r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), REDACTED),
    (re.compile(_LEFT + r"xox[abposr]-[A-Za-z0-9-]{10,}"), REDACTED),
]


def scrub_values(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` without the known secret values (in every encoding); see the module doc."""
    pattern = _values_pattern(secret_values(extra=extra))
    return text if pattern is None else pattern.sub(REDACTED, text)


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` without known secret values and without anything shaped like a credential."""
    # Shapes first: "Basic <base64 of user:KEY>" then goes whole, not around the key's core.
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return scrub_values(text, extra)


def scrub_json(value: Any, extra: Iterable[str] = ()) -> Any:
    """``value`` (JSON-like) with ``scrub_values`` applied to every string in it."""
    pattern = _values_pattern(secret_values(extra=extra))
    if pattern is None:
        return value

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return pattern.sub(REDACTED, v)
        if isinstance(v, Mapping):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value)


def restore(stored: Any, current: Any, extra: Iterable[str] = ()) -> Any:
    """``stored`` (a scrubbed snapshot) with each value that scrubbing changed taken back from
    ``current`` when ``current`` scrubs to exactly it: a resumed run gets the real base URL of
    ``https://u:KEY@gateway``, which its log only holds as ``https://u:[redacted]@gateway``."""
    if stored == current:
        return current
    if isinstance(stored, str) and isinstance(current, str):
        scrubbed = (scrub_values(current, extra), scrub(current, extra))
        return current if REDACTED in stored and stored in scrubbed else stored
    if isinstance(stored, Mapping) and isinstance(current, Mapping):
        return {k: restore(v, current[k], extra) if k in current else v for k, v in stored.items()}
    if isinstance(stored, list) and isinstance(current, list) and len(stored) == len(current):
        return [restore(s, c, extra) for s, c in zip(stored, current, strict=True)]
    return stored


class _ScrubbingWriter(io.TextIOBase):
    """A text stream that passes everything written through ``scrub_values``.

    It has no ``buffer``: click then writes text to it instead of going around it to bytes.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._stream, "errors", None)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._stream.write(scrub_values(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()


@contextmanager
def scrubbed_output() -> Iterator[None]:
    """Within the block, everything written to stdout and stderr loses known secret values."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _ScrubbingWriter(sys.stdout), _ScrubbingWriter(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved

"""Secret scrubbing: the one place that decides what a secret is and removes it from text.

Invariant: no secret is stored in the event log or printed, in clear or in any encoding we know
of. Two levels, because they differ in what they may get wrong:

- ``scrub_values`` removes the *values* of the secrets this process knows: every environment
  variable named like a credential (``OPENAI_API_KEY``, anything ending in ``_KEY``, ``_TOKEN``,
  ``_SECRET``, ``_PASSWORD``, ``_SK``, ``_PAT``, or holding ``PASS``, ``PWD``, ``AUTH``,
  ``CREDENTIAL``, ``WEBHOOK``, ``_KEY_``, ``SECRET``, ``TOKEN``), the value of *any* variable
  that looks like a credential (long, random, no path), the variables ``api_key_env`` names,
  the password of any URL
  with credentials in the environment or the config, and the values ``[target] env`` reads
  from ``${VAR}``. Each value is removed in clear, base64 (standard and URL-safe, at all three
  alignments, so also inside ``Authorization: Basic base64(user:KEY)``), percent-encoded and
  hex form, JSON/``\\u``-escaped and wrapped over lines. It cannot hit ordinary text, so
  the event store applies it to every blob and payload, and the CLI to everything it prints.
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

The shapes come from ``skillvc.secrets.scan`` (detect-secrets' detectors plus our own, over
whole texts and over their decoded base64/hex/percent/escaped/wrapped runs); see
docs/secrets.md for what is caught and what is not.
"""

from __future__ import annotations

import base64
import functools
import io
import os
import re
import sys
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TextIO

from skillvc.secrets import scan
from skillvc.secrets.scan import REDACTED, Finding

__all__ = [
    "KEY_VARIABLES",
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "Finding",
    "base64_cores",
    "encodings",
    "findings",
    "is_secret_name",
    "looks_secret",
    "redact_counted",
    "redact_json_counted",
    "register_names",
    "register_values",
    "restore",
    "scrub",
    "scrub_json",
    "scrub_stored_text",
    "scrub_values",
    "scrub_values_counted",
    "scrubbed_output",
    "secret_values",
    "url_passwords",
]
MIN_SECRET_LENGTH = 12
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY")
SECRET_NAME_SUFFIXES = ("_KEY", "_TOKEN", "_SECRET", "_PASSWORD")  # _API_KEY ends in _KEY

_lock = threading.Lock()
_names: set[str] = set()  # variables named by the config (api_key_env, ${VAR} references)
_values: frozenset[str] = frozenset()  # secrets in no variable we scan (a URL's password)
_version = 0  # of _names: a cached scan of the environment is stale once it changes


# Broader names users give credentials (STRIPE_SK, GH_PAT, MY_PASSWD, SLACK_WEBHOOK_URL,
# OPENAI_API_KEY_OLD, DB_CREDENTIALS); their values are checked by _looks_like_value too.
_BROAD_NAME = re.compile(
    r"(?:_SK|_PAT|_KEY)$|_KEY_|PASS|PWD|AUTH|CREDENTIAL|WEBHOOK|SECRET|TOKEN|PRIVATE|APIKEY"
)
# Variables whose names match and which hold no secret (a socket, a directory).
_NOT_SECRET = {"PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY", "PASSWORD_STORE_DIR"}


def is_secret_name(name: str) -> bool:
    """True for an environment variable whose value is treated as a secret."""
    upper = name.upper()
    if upper in _NOT_SECRET:
        return name in _names
    return (
        upper in KEY_VARIABLES
        or upper.endswith(SECRET_NAME_SUFFIXES)
        or bool(_BROAD_NAME.search(upper))
        or name in _names
    )


_TOKEN_CHARS = re.compile(r"[A-Za-z0-9+/_=.~-]{16,}")


def _looks_like_secret_value(value: str) -> bool:
    """A value of a variable not named like a secret that still is one: long, random, one
    token, not a path, number or id (a git sha in GITHUB_SHA is printed everywhere)."""
    value = value.strip()
    if not _TOKEN_CHARS.fullmatch(value) or value.startswith(("/", "~", ".")):
        return False
    pathish = scan.is_ordinary_id(value) or value.isdigit() or "/" in value
    # "a/b" is a path more often than a key; a base64 key with "/" still needs entropy
    if pathish and not (len(value) >= 30 and scan.entropy(value) >= 4.5):
        return False
    if len(value) < 20:
        return False
    if scan.HEX_RE.fullmatch(value):  # a hex key (a 64-hex hash or 40-hex sha is no key)
        return len(value) >= 32 and not scan.is_ordinary_id(value)
    parts = [p for p in re.split(r"[-_.]", value) if p]
    if all(p.isdigit() or (p.isalpha() and p[1:].islower()) for p in parts):
        return False  # "My-Project_Name-2024": words and numbers
    # Three classes (a model name like "claude-3-5-sonnet-20241022" has two) and random.
    classes = sum(
        (
            any(c.islower() for c in value),
            any(c.isupper() for c in value),
            any(c.isdigit() for c in value),
        )
    )
    return classes == 3 and scan.entropy(value) >= 4.0


def _plausible_named_value(value: str) -> bool:
    """A value under a secret-looking name that is a value, not a path or a flag."""
    v = value.strip()
    return not (v.startswith(("/", "~/")) or v.isdigit() or v.lower() in ("true", "false"))


def register_names(names: Iterable[str | None]) -> None:
    """Treat the values of these variables as secrets from now on (e.g. ``api_key_env``)."""
    global _version
    new = {n for n in names if n} - _names
    if new:
        with _lock:
            _names.update(new)
            _version += 1


def register_values(values: Iterable[str | None]) -> None:
    """Treat these values as secrets from now on (e.g. a password inside a configured URL)."""
    global _values
    with _lock:
        _values = _values | {v for v in values if v}


# "scheme://user:password@" (the scheme is required: "a:b@c" in prose is no URL).
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)"
    r"(?P<user>[^/\s:@?#\"'<>]*):(?P<password>[^/\s?#\"'<>]*)@"
)


def url_passwords(text: str) -> list[str]:
    """The passwords of URLs with credentials in ``text``, raw and percent-decoded (an HTTP
    client sends the decoded form in its ``Authorization: Basic`` header)."""
    from urllib.parse import unquote  # here: 4 ms of every command's start-up otherwise

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
    if environ is None:
        return _matcher(_environ_items(), _version, _values, tuple(extra)).values
    return _keep(_scan(environ) | _values | set(extra))


def _keep(found: set[str] | frozenset[str]) -> frozenset[str]:
    values = {v for v in found if v} | {v.strip() for v in found if v}
    return frozenset(v for v in values if len(v) >= MIN_SECRET_LENGTH)


def _scan(environ: Mapping[str, str]) -> set[str]:
    found: set[str] = set()
    for name, value in environ.items():
        named = is_secret_name(name) and _plausible_named_value(value)
        if named or _looks_like_secret_value(value):
            found.add(value)
        if "://" in value and "@" in value:  # e.g. OPENAI_BASE_URL=https://u:KEY@gateway
            found.update(url_passwords(value))
    return found


def _environ_items() -> tuple[tuple[Any, Any], ...]:
    """os.environ as a cheap cache key: everything written to the log is scrubbed, so this runs
    for every event; CPython's undecoded ``_data`` copies in a microsecond."""
    data = getattr(os.environ, "_data", None)
    return tuple(data.items()) if isinstance(data, dict) else tuple(os.environ.items())


def encodings(secret: str) -> set[str]:
    """The forms of ``secret`` removed as they are: clear, percent-encoded, hex and
    JSON/``\\u``-escaped."""
    import json
    from urllib.parse import quote, quote_plus

    raw = secret.encode("utf-8")
    forms = {secret, quote(secret, safe=""), quote_plus(secret), raw.hex(), raw.hex().upper()}
    forms |= {json.dumps(secret)[1:-1], json.dumps(secret)[1:-1].replace("/", "\\/")}
    forms |= {json.dumps(secret, ensure_ascii=False)[1:-1], secret.replace("/", "\\/")}
    forms |= {"".join(f"\\u{ord(c):04x}" for c in secret)}
    forms |= {"".join(f"\\u{ord(c):04X}" for c in secret)}
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


class _Matcher:
    """The secrets known for one state of the environment, and how to find them in text."""

    def __init__(self, values: frozenset[str]) -> None:
        self.values = values
        plain: set[str] = set()
        cores: set[str] = set()
        for value in values:
            plain |= encodings(value)
            cores |= base64_cores(value)
        # Substring tests first: far faster than the regex, and almost every text has none.
        self.needles = tuple(plain | cores)
        parts = [_alternation(plain)] if plain else []
        if cores:
            b64 = "[A-Za-z0-9+/_-]"
            parts.insert(0, f"{b64}{{0,3}}(?:{_alternation(cores)}){b64}{{0,3}}={{0,2}}")
        self.pattern = re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None

    def sub(self, text: str) -> str:
        return self.subn(text)[0]

    def subn(self, text: str) -> tuple[str, int]:
        found = self.spans(text)
        if not found:
            return text, 0
        return scan.replace(text, found, lambda kind: REDACTED), len(scan.merge(found))

    def spans(self, text: str) -> list[Finding]:
        """Where the known values are in ``text`` (any encoding, also wrapped over lines)."""
        if self.pattern is None:
            return []
        found = []
        if "\n" in text:  # a value wrapped over lines (base64 in a PEM-like block)
            found += [
                Finding("env_value", start, end)
                for start, end, joined in scan.wrapped_runs(text)
                if any(needle in joined for needle in self.needles)
            ]
        present = [needle for needle in self.needles if needle in text]
        if not present:
            return found
        # The regex starts with a character class, so run over a whole transcript it costs a
        # step at every character; run it only around the needles found (a match reaches at
        # most 3 base64 characters and 2 "=" past its needle).
        windows = []
        for needle in present:
            pos = text.find(needle)
            while pos >= 0:
                windows.append((max(0, pos - 8), pos + len(needle) + 8))
                pos = text.find(needle, pos + 1)
        windows.sort()
        merged = [list(windows[0])]
        for start, end in windows[1:]:
            if start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        for start, end in merged:
            for m in self.pattern.finditer(text, start, min(end, len(text))):
                found.append(Finding("env_value", m.start(), m.end()))
        return found


@functools.lru_cache(maxsize=64)
def _matcher(
    items: tuple[tuple[Any, Any], ...],
    version: int,
    registered: frozenset[str],
    extra: tuple[str, ...],
) -> _Matcher:
    """The matcher for the environment ``items`` came from (``version``: of the registered
    names), the registered values and ``extra``."""
    return _Matcher(_keep(_scan(os.environ) | registered | set(extra)))


def _current(extra: Iterable[str] = ()) -> _Matcher:
    return _matcher(_environ_items(), _version, _values, tuple(extra))


def _without_password(m: re.Match[str]) -> str:
    return f"{m.group('scheme')}{m.group('user')}:{REDACTED}@"


def scrub_values(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` without the known secret values (in every encoding); see the module doc."""
    return _current(extra).sub(text)


def scrub_values_counted(
    text: str, marker: str = REDACTED, extra: Iterable[str] = ()
) -> tuple[str, int]:
    """``scrub_values`` with ``marker`` as the placeholder, and how many values it removed."""
    text, n = _current(extra).subn(text)
    return (text.replace(REDACTED, marker) if n and marker != REDACTED else text), n


def scrub(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` without known secret values and without anything shaped like a credential."""
    return redact_counted(text, extra)[0]


def redact_counted(text: str, extra: Iterable[str] = ()) -> tuple[str, Counter[str]]:
    """``scrub``, with how many values of each kind it removed (``env_value``: a known value)."""
    # Values and shapes are found on the same text and their spans joined: a shape may end
    # inside a value ("KEY=abc&def" stops at "&") and a value's base64 core sits inside a
    # "Basic <base64>" shape; either way the union goes, whole.
    values = _current(extra).spans(text)
    shapes = scan.findings(text)
    if not values and not shapes:
        return text, Counter()
    found = scan.merge(shapes + values)
    counts = Counter(f.kind for f in found)
    return scan.replace(text, found, lambda kind: REDACTED), counts


def findings(text: str, extra: Iterable[str] = ()) -> list[Finding]:
    """What ``scrub`` would remove from ``text``, as spans with kinds (never printed)."""
    return scan.merge(scan.findings(text) + _current(extra).spans(text))


def scrub_json(value: Any, extra: Iterable[str] = (), *, urls: bool = False) -> Any:
    """``value`` (JSON-like) with ``scrub_values`` applied to every string in it, and with
    ``urls`` also the credentials of every ``scheme://user:password@`` URL."""
    matcher = _current(extra)

    def clean(text: str) -> str:
        if urls and "://" in text:
            text = _URL_CREDENTIALS.sub(_without_password, text)
        return matcher.sub(text)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return clean(v)
        if isinstance(v, Mapping):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value)


def redact_json_counted(value: Any, extra: Iterable[str] = ()) -> tuple[Any, int]:
    """``value`` (JSON-like) with ``scrub`` applied to every string, and how many values it
    removed: what a report or ``--json`` prints."""
    total = 0

    def walk(v: Any) -> Any:
        nonlocal total
        if isinstance(v, str):
            clean, counts = redact_counted(v, extra)
            total += sum(counts.values())
            return clean
        if isinstance(v, Mapping):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        return v

    return walk(value), total


def looks_secret(value: str) -> bool:
    """True for a value that holds a credential shape or a known secret, or is itself one long
    random token (a key pasted where a setting belongs): it is never echoed."""
    return bool(findings(value)) or _looks_like_secret_value(value)


def scrub_stored_text(text: str) -> str:
    """What the event store removes from a payload: secret values and URL credentials (a
    ``base_url`` password shorter than a key is still a password)."""
    if "://" in text:
        text = _URL_CREDENTIALS.sub(_without_password, text)
    return scrub_values(text)


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


class ScrubbingWriter(io.TextIOBase):
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
    sys.stdout, sys.stderr = ScrubbingWriter(sys.stdout), ScrubbingWriter(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved

"""Privacy for harvested sessions: secrets out and home paths generalised, before anything is
stored or sent.

Invariants:
- ``Redactor.redact`` is applied to every text taken from a transcript before it reaches the
  event log, a model call, the task file or the terminal; its output never contains a match of
  any pattern below, nor the value (raw, base64 or URL-encoded) of a secret-looking variable of
  the environment it was built from.
- Redaction is counted per kind (``api_key``, ``aws_key``, ``bearer``, ``assignment``,
  ``private_key``, ``env_value``, ``home_path``), so each item says what was removed, never what.
- It only removes: a placeholder ``[REDACTED:<kind>]`` replaces the secret, ``~`` the home
  directory. Redacting twice changes nothing more.

The patterns here are the harvest's own (placeholders that say which kind was removed); every
text also goes through the shared pipeline's shapes (``skillvc.secrets.scan``: detect-secrets'
detectors, encoded forms, URL credentials, command lines) *before* the harvest's own
``key: value`` pass, which would otherwise take the word "Basic" of ``Authorization: Basic
<b64>`` for the value and leave the credential. The harvest also runs the shared scrubber
(``skillvc.secrets``) through ``Redactor(extra=...)``.
"""

from __future__ import annotations

import base64
import os
import re
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from skillvc.secrets import scan, scrub_values_counted

# (kind, pattern). Order matters: longer, more specific shapes first (sk-ant- before sk-).
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
            re.S,
        ),
    ),
    ("api_key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{16,}")),
    ("api_key", re.compile(r"\bsk-proj-[A-Za-z0-9_\-]{16,}")),
    ("api_key", re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}")),
    ("aws_key", re.compile(r"\b(AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b")),
    ("api_key", re.compile(r"\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}\b")),
    ("api_key", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")),
    ("api_key", re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}")),
    ("api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}")),
    ("api_key", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),
    ("bearer", re.compile(r"\b(Bearer|Token)\s+[A-Za-z0-9._~+/\-]{12,}=*", re.I)),
)
# key = value / key: value / "key": "value" pairs whose key names a secret; the value goes.
_ASSIGNMENT = re.compile(
    r"""(?P<key>\b[\w.\-]*(password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|"""
    r"""private[_-]?key|client[_-]?secret|auth)[\w.\-]*["']?\s*[:=]\s*)"""
    r"""(?P<q>["']?)(?P<value>[^\s"',;]{4,})(?P=q)""",
    re.I,
)
_SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|PRIVATE|AUTH)$", re.I
)
_HOME = re.compile(r"(?<![\w.~])(/home|/Users)/[^/\s\"'`:]+(?=/|\b)")
# Claude Code names a project's transcript folder after its path with '/' (and '.') as '-':
# ~/.claude/projects/-home-alice-src-app holds the user name too.
_DASHED_HOME = re.compile(r"(?<=projects/)-(?:home|Users)-[^-/\s\"'`]+")
_MIN_SECRET = 8  # shorter variable values ("1", "yes") would blank out ordinary words


def secret_env_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the environment variables whose names look secret (…KEY, …TOKEN, …)."""
    env = os.environ if environ is None else environ
    return sorted(
        {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET},
        key=lambda v: (-len(v), v),
    )


def _encodings(value: str) -> set[str]:
    raw = value.encode()
    forms = {value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value)}
    forms.add(base64.b64encode(raw).decode().rstrip("="))
    forms.add(base64.urlsafe_b64encode(raw).decode().rstrip("="))
    return {f for f in forms if len(f) >= _MIN_SECRET}


def _harvest_kind(kind: str) -> str:
    return "assignment" if kind == "keyword" else kind


# A harvest placeholder the shared scrubber redacted again ("[REDACTED:[redacted]]" never
# happens, but "[REDACTED:x][redacted]" could): keep the first.
_ASSIGNMENT_VALUE_LEFT = re.compile(r"(\[REDACTED:[a-z_]+\])\[redacted\]")


@dataclass
class Redactor:
    """Scrubs one text at a time and counts what it removed."""

    env_values: list[str] = field(default_factory=secret_env_values)
    home: str = field(default_factory=lambda: os.path.expanduser("~"))
    extra: Iterable[Callable[[str], tuple[str, int]]] = ()  # e.g. the shared scrubber

    def __post_init__(self) -> None:
        forms = set()
        for value in self.env_values:
            forms |= _encodings(value)
        self._env_forms = sorted(forms, key=lambda v: (-len(v), v))

    def redact(self, text: str) -> tuple[str, Counter[str]]:
        counts: Counter[str] = Counter()
        for form in self._env_forms:  # exact values first: they may not match any shape
            if form in text:
                counts["env_value"] += text.count(form)
                text = text.replace(form, "[REDACTED:env_value]")
        # The values every other write is cleaned of (the broad names, any credential-looking
        # variable, registered ones; in every encoding, also wrapped), before the shapes.
        text, n = scrub_values_counted(text, "[REDACTED:env_value]")
        counts["env_value"] += n
        # Keys split by a line break or an invisible character go whole, before the patterns
        # below could take a key's head and leave its tail.
        split = scan.split_findings(text)
        if split:
            text = scan.replace(text, split, lambda kind: f"[REDACTED:{_harvest_kind(kind)}]")
            for f in split:
                counts[_harvest_kind(f.kind)] += 1
        for kind, pattern in PATTERNS:
            text, n = pattern.subn(f"[REDACTED:{kind}]", text)
            counts[kind] += n
        # The shared pipeline's shapes next (its keyword finds are the harvest's assignments).
        text, found = scan.redact(text, lambda kind: f"[REDACTED:{_harvest_kind(kind)}]")
        for kind, n in found.items():
            counts[_harvest_kind(kind)] += n

        def assignment(m: re.Match[str]) -> str:
            if m.group("value").startswith("[REDACTED"):
                return m.group(0)
            if m.string[m.end() : m.end() + 12].lstrip().startswith("[REDACTED"):
                return m.group(0)  # "Authorization: Basic [REDACTED:...]": a scheme word
            counts["assignment"] += 1
            return f"{m.group('key')}{m.group('q')}[REDACTED:assignment]{m.group('q')}"

        text = _ASSIGNMENT.sub(assignment, text)
        for scrub in self.extra:
            text, n = scrub(text)
            counts["extra"] += n
        text, n = _ASSIGNMENT_VALUE_LEFT.subn(r"\1", text)  # "[REDACTED:x]" once, not nested
        text, n = self._home_paths(text)
        counts["home_path"] += n
        return text, +counts  # unary plus drops the zero counts

    def _home_paths(self, text: str) -> tuple[str, int]:
        n = 0
        home = self.home.rstrip("/")
        if home and home != "/":
            dashed = re.sub(r"[^A-Za-z0-9]", "-", home)
            for form in (home, dashed):
                if form in text:
                    n += text.count(form)
                    text = text.replace(form, "~")
        text, m = _HOME.subn("~", text)
        text, k = _DASHED_HOME.subn("~", text)
        return text, n + m + k

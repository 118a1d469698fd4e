"""The GitHub workflow template, with SKILLVC_SPEC pinned to this skillvc's own source when known.

Invariants: the rendered workflow differs from ``templates/github/skillvc-check.yml`` at most in
the value of ``SKILLVC_SPEC``; that value is only ever a source that cannot move under the user
(a git URL over https at a 40-hex commit, or an https archive URL with its sha256), read from the
installed distribution's ``direct_url.json`` (PEP 610). Anything else (an install by name, a
local path, an editable checkout, a URL with credentials in it) leaves the placeholder, which
the workflow's install step refuses, so no unpinned or secret-bearing source is ever printed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

from skillvc.core.resources import read_text

TEMPLATE = "github/skillvc-check.yml"
PLACEHOLDER = "skillvc @ git+https://github.com/OWNER/skillvc@COMMIT_SHA"
# Characters of a URL that need no quoting in YAML or a shell; anything else is not pinned.
_URL = re.compile(r"https://[A-Za-z0-9._~:/?=&%+,;@!-]+")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Workflow:
    """The workflow's text and the pinned source filled into it (None: the placeholder)."""

    text: str
    spec: str | None


def pinned_source(direct_url: dict[str, Any]) -> str | None:
    """The pip requirement that reinstalls exactly this distribution, or None if none is safe."""
    url = direct_url.get("url")
    if not isinstance(url, str) or not _URL.fullmatch(url) or "@" in urlsplit(url).netloc:
        return None  # not https, odd characters, or credentials that must never be printed
    vcs = direct_url.get("vcs_info")
    if isinstance(vcs, dict):
        commit = vcs.get("commit_id")
        if vcs.get("vcs") != "git" or not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
            return None
        if direct_url.get("subdirectory") or "@" in urlsplit(url).path:
            return None
        return f"skillvc @ git+{url}@{commit}"
    archive = direct_url.get("archive_info")
    if isinstance(archive, dict) and "#" not in url:
        hashes = archive.get("hashes")
        sha = hashes.get("sha256") if isinstance(hashes, dict) else None
        legacy = archive.get("hash")
        if sha is None and isinstance(legacy, str) and legacy.startswith("sha256="):
            sha = legacy.removeprefix("sha256=")
        if isinstance(sha, str) and _SHA256.fullmatch(sha):
            return f"skillvc @ {url}#sha256={sha}"
    return None


def installed_source() -> str | None:
    """The pinned source of the installed skillvc, from its ``direct_url.json``, if any."""
    try:
        text = metadata.distribution("skillvc").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None  # installed from an index: the name there is not this project's
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return pinned_source(data) if isinstance(data, dict) else None


def render_workflow(source: str | None = None) -> Workflow:
    """The workflow template, with ``source`` (default: this skillvc's own) as SKILLVC_SPEC."""
    text = read_text("templates", TEMPLATE)
    spec = source if source is not None else installed_source()
    if spec is None:
        return Workflow(text, None)
    quoted = json.dumps(PLACEHOLDER)  # a JSON string is a YAML double-quoted scalar
    assert text.count(quoted) == 1, "the template holds SKILLVC_SPEC's placeholder once"
    return Workflow(text.replace(quoted, json.dumps(spec)), spec)

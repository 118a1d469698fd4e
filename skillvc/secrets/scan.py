"""Credential shapes in text: detect-secrets' detectors plus the forms users paste that no
scanner looks for.

``findings(text)`` returns the spans of everything shaped like a credential, each with a kind
(``aws_access_key``, ``url_password``, ``keyword``, ...); ``redact(text)`` replaces them with
``[redacted]`` and counts them per kind. Nothing here knows the values of the environment:
``skillvc.secrets`` adds those.

Why detect-secrets (Yelp, 1.5): its regex detectors are maintained against the documented key
formats of the big vendors (AWS, Azure, Stripe, Slack, Twilio, SendGrid, Mailchimp, npm, PyPI,
JWT, Discord, Telegram, GitLab, ...), it is pure Python with one dependency, and its patterns
are plain compiled ``re`` objects we can run over a whole transcript at once. Its own scanning
API goes line by line through plugin objects and filters, which is about 50x too slow for a
night's harvest, so we take the patterns (``denylist``) and its entropy function and run them
ourselves. Its public-IP detector is left out (an address is no credential).

What we add (no scanner does it): base64/hex/percent/``\\u``-escaped and line-wrapped text is
decoded and scanned again, so a key inside ``Authorization: Basic <b64>`` or a JSON-escaped
string is found; credentials in URLs, ``.netrc``/``.pgpass`` lines, ``curl -u``,
``mysql -p``, ``sshpass -p``, "my password is ..." (best effort), keyword assignments with
broad names (``*_SK``, ``*_PAT``, ``*PASS*``, ``*AUTH*``, ``*WEBHOOK*``, ...), and the key
formats of model providers and code hosts that detect-secrets lacks.

False positives cost the user text, so shapes stay shapes: a 64-hex content hash, a git sha, a
UUID and ordinary prose match nothing here (entropy rules skip pure hex of those lengths).
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

REDACTED = "[redacted]"


@dataclass(frozen=True)
class Finding:
    """A credential-shaped span of a text (never the value itself in a message)."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class _Detector:
    kind: str
    # Lowercase words one of which every match contains: the pattern runs only on the lines
    # around where they occur (or, with ``gate``, on the whole text once one occurs). () = the
    # pattern runs over the whole text: it must start with a literal, which ``re`` finds at
    # memory speed (a pattern that starts with a class, a lookbehind or IGNORECASE costs a step
    # at every character: ten to a hundred times slower).
    needles: tuple[str, ...]
    pattern: re.Pattern[str]
    group: int | str = 0  # the part of the match that is the secret
    accept: Callable[[str], bool] | None = None  # a last check on the secret
    # A cheap regex (literal prefix) whose matches mark the lines ``pattern`` runs on, like
    # ``needles``.
    trigger: re.Pattern[str] | None = None
    folded_trigger: re.Pattern[str] | None = None  # the same, run over the lower-cased text
    left_boundary: bool = False  # the match may not follow a letter, digit, "_" or "-"
    offset: int = 0  # the match starts this many characters after the secret (a lead letter)
    gate: bool = False  # a needle anywhere lets the pattern run on the whole text (multi-line)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


# Lookaround delimiters some detect-secrets patterns include in their match; we strip them so
# the surrounding quote or space survives.
_EDGE = " \t\r\n\"'=:,;`"

# detect-secrets classes whose pattern's first group is the secret (the rest is context).
_GROUP_ONE = {"AWSKeyDetector", "BasicAuthDetector", "NpmDetector", "SoftlayerDetector"}
_TRIGGERS = {
    "ArtifactoryDetector": re.compile(r"AKC|AP[0-9A-F]"),
    "TelegramBotTokenDetector": re.compile(r":[0-9A-Za-z_-]{35}"),
    "DiscordBotTokenDetector": re.compile(r"\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}"),
    "MailchimpDetector": re.compile(r"-us[0-9]"),
}
_NEEDLES = {
    "AWSKeyDetector": ("aws",),  # (its key-id pattern starts with a literal: no needle)
    "AzureStorageKeyDetector": ("accountkey=",),
    "BasicAuthDetector": ("://",),
    "CloudantDetector": (),
    "GitHubTokenDetector": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "GitLabTokenDetector": (
        "glpat-",
        "gldt-",
        "glft-",
        "glsoat-",
        "glrt-",
        "gr1348941",
        "glcbt-",
        "glimt-",
        "glptt-",
        "glagent-",
        "gloas-",
    ),
    "IbmCloudIamDetector": (),
    "IbmCosHmacDetector": ("secret",),
    "JwtTokenDetector": ("eyj",),
    "NpmDetector": ("_authtoken",),
    "OpenAIDetector": ("t3blbkfj",),
    "PypiTokenDetector": ("pypi-",),
    "SendGridDetector": ("sg.",),
    "SlackDetector": ("xox", "hooks.slack"),
    "SoftlayerDetector": ("softlayer",),
    "SquareOAuthDetector": ("sq0csp-",),
    "StripeDetector": ("_live_",),
}
# Needle families with a common start, as one regex over the lower-cased text: ``re`` searches
# for the shared literal start at memory speed (eight ``str.find`` calls would cost eight
# passes). Every match of the detector's pattern holds one of them.
_FOLDED_TRIGGERS = {
    "CloudantDetector": re.compile(r"cl(?:ou|_|-|api|key|pw|pass)"),
    "IbmCloudIamDetector": re.compile(r"cloud[_-]?iam"),
    "SoftlayerDetector": re.compile(r"sl(?:_|-|api|key|pass|pw)"),
}
_SKIP = {"IPPublicDetector", "PrivateKeyDetector"}  # no secret / our whole-block pattern


@functools.lru_cache(maxsize=1)
def _scanner_detectors() -> tuple[_Detector, ...]:
    """detect-secrets' regex detectors, as patterns we run over whole texts."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector

    out = []
    mapping: dict[str, Any] = dict(get_mapping_from_secret_type_to_class())
    for secret_type, cls in sorted(mapping.items()):
        if not issubclass(cls, RegexBasedDetector) or cls.__name__ in _SKIP:
            continue
        patterns: Iterable[re.Pattern[str]] = cls.denylist  # a class attribute (a property
        for pattern in patterns:  # in the base class, which mypy sees)
            group = 1 if cls.__name__ in _GROUP_ONE and pattern.groups else 0
            fast = _literal_start(pattern)  # then its own search is the cheapest prefilter
            needles = () if fast else _NEEDLES.get(cls.__name__, ())
            trigger = None if fast else _TRIGGERS.get(cls.__name__)
            folded = None if fast else _FOLDED_TRIGGERS.get(cls.__name__)
            out.append(
                _Detector(
                    _slug(secret_type),
                    needles,
                    pattern,
                    group,
                    trigger=trigger,
                    folded_trigger=folded,
                )
            )
    return tuple(out)


def _literal_start(pattern: re.Pattern[str]) -> bool:
    """True when ``pattern`` starts with a case-sensitive literal (``re`` then searches for it at
    memory speed). Asked of ``re``'s own parser; False if that internal module changed."""
    if pattern.flags & re.IGNORECASE:
        return False
    try:
        parser: Any = getattr(re, "_parser", None) or importlib.import_module("sre_parse")
        constants: Any = getattr(re, "_constants", None) or importlib.import_module("sre_constants")
        op, av = parser.parse(pattern.pattern, pattern.flags)[0]
        while op is constants.SUBPATTERN:
            op, av = av[-1][0]
        return bool(op is constants.LITERAL)
    except Exception:  # noqa: BLE001 - an internal API: the slow path is still correct
        return False


def entropy(text: str) -> float:
    """Shannon entropy per character (detect-secrets' measure)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in map(text.count, set(text)))


_HEX = HEX_RE = re.compile(r"[0-9a-fA-F]+")
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def is_ordinary_id(value: str) -> bool:
    """A content hash, git sha or UUID: ids skillvc and git print all the time, no secrets."""
    return bool(_UUID.fullmatch(value)) or (
        bool(_HEX.fullmatch(value)) and (len(value) in (40, 64) or len(value) <= 12)
    )


_PLACEHOLDER = re.compile(
    r"(?:\[redacted\]|\[REDACTED[^\]]*\]|\$\{?[A-Za-z_][\w]*\}?|<[^>]*>|\*+|x{4,}|\.\.\.|"
    r"none|null|nil|true|false|undefined|required|optional|string|str|your[\w-]*|example|"
    r"os\.environ.*|env\(.*)",
    re.I,
)


def _credential_like(value: str) -> bool:
    """An unquoted value after a secret name: not a placeholder, number or plain word."""
    value = value.strip("\"'`.,;)")
    if len(value) < 6 or _PLACEHOLDER.fullmatch(value) or value.isdigit():
        return False
    if REDACTED in value or "[REDACTED" in value or is_ordinary_id(value):
        return False
    return not (value.isalpha() and value.islower())  # "password: required", "token: none"


def _quoted_credential(value: str) -> bool:
    return len(value) >= 4 and not _PLACEHOLDER.fullmatch(value) and REDACTED not in value


def _high_entropy_b64(value: str) -> bool:
    # (cheapest tests first: a quoted UUID or request id is on every line of a transcript)
    if REDACTED in value or value.isdigit():  # a number: detect-secrets discounts these too
        return False
    if _HEX.fullmatch(value):
        return len(value) >= 20 and not is_ordinary_id(value) and entropy(value) >= 3.0
    if len(set(value)) < 23:  # fewer than 2**4.5 symbols: entropy < 4.5 (a UUID has 17)
        return False
    return any(c.isdigit() for c in value) and entropy(value) >= 4.5


def _aws_secret(value: str) -> bool:
    return (
        any(c.isupper() for c in value)
        and any(c.islower() for c in value)
        and any(c.isdigit() or c in "+/" for c in value)
    )


def _has_classes(value: str, n: int) -> bool:
    """``value`` mixes at least ``n`` of lower case, upper case and digits."""
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
    ) >= n


def _basic(value: str) -> bool:
    decoded = _b64decode(value)
    return decoded is not None and ":" in decoded


def _phrase(value: str) -> bool:
    value = value.rstrip(".,;!?)")
    return len(value) >= 4 and not (value.isalpha() and value.islower()) and _credential_like(value)


# Names whose value is a credential: detect-secrets' keyword list plus the broad env names.
_SECRET_WORDS = (
    r"api[_-]?key|app[_-]?key|auth[_-]?key|service[_-]?key|account[_-]?key|db[_-]?key|database[_-]?key|"
    r"priv[_-]?key|private[_-]?key|client[_-]?key|secret[_-]?key|access[_-]?key|"
    r"password|passwd|passphrase|pass|pwd|secret|token|credentials?|webhook|auth|"
    r"[a-z0-9]_sk|[a-z0-9]_pat|_key_|api_?key_?\w*|client[_-]?secret"
)
# Names that contain a secret word and are none ("author", "max_tokens", "bypass").
_NOT_SECRET_NAMES = (
    "author",
    "tokens",
    "tokeniz",
    "bypass",
    "compass",
    "passthrough",
    "passed",
    "passes",
    "passing",
    "keyboard",
    "monkey",
    "_key_id",
    "key_id",
    "keyid",
    "_count",
    "count_",
)
_KEY_NAME = rf"(?:[A-Za-z0-9_.-]*?(?:{_SECRET_WORDS})[A-Za-z0-9_.-]*|[A-Za-z0-9_.-]*_KEY)"

_OWN: tuple[_Detector, ...] = (
    _Detector(
        "private_key",
        (),
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
    ),
    _Detector(
        "private_key",
        (),
        re.compile(r"PuTTY-User-Key-File-\d:.*?(?:Private-MAC: \S+|\Z)", re.S),
    ),
    _Detector(
        "url_password",
        (),
        re.compile(r"://[^/\s:@?#\"'<>]*:(?P<password>[^/\s?#\"'<>@]+)@"),
        "password",
        lambda v: v != REDACTED,
    ),
    _Detector(
        "authorization",
        ("authorization", "x-auth-token", "api-key"),
        re.compile(
            r"(?:proxy-)?(?:authorization|x-auth-token|x-api-key|api-key)[\"']?\s*[:=]\s*[\"']?"
            r"(?:(?:Basic|Bearer|Token|Digest|Bot|token|SSWS|Splunk|GenieKey|Key|ApiKey)\s+)?(?P<v>[^\s\"',}]{6,})",
            re.I,
        ),
        "v",
        lambda v: REDACTED not in v,
    ),
    _Detector(
        "bearer",
        ("bearer",),
        re.compile(r"[Bb]earer\s+(?P<v>[A-Za-z0-9._~+/-]{12,}=*)"),
        "v",
        _credential_like,
    ),
    _Detector(
        "basic_auth",
        (),
        re.compile(r"Basic\s+(?P<v>[A-Za-z0-9+/_-]{8,}={0,2})"),
        "v",
        _basic,
    ),
    _Detector(
        "provider_key",
        (),
        # (literal first, the word boundary checked after: a pattern that starts with a
        # lookbehind costs a step at every character of the text)
        re.compile(r"sk-(?:ant-(?:api\d\d-|admin\d\d-)?|proj-|svcacct-|or-v1-)?[A-Za-z0-9_-]{12,}"),
        left_boundary=True,
    ),
    _Detector(
        "provider_key",
        (),
        re.compile(r"k_(?:live|test)_[0-9A-Za-z]{16,}"),
        left_boundary=True,
        offset=1,
    ),
    _Detector(
        "aws_access_key",
        (),
        re.compile(r"A(?:KIA|SIA|GPA|IDA|ROA|NPA|NVA|IPA|BIA|CCA)[0-9A-Z]{16}\b"),
        left_boundary=True,
    ),
    _Detector(
        "aws_secret_key",
        ("secret", "aws"),
        re.compile(
            r"(?i:secret|aws)[^\n]{0,60}?(?<![A-Za-z0-9/+])(?P<v>[A-Za-z0-9/+]{40})"
            r"(?![A-Za-z0-9/+=])"
        ),
        "v",
        _aws_secret,
    ),
    _Detector(
        "code_host_token",
        (),
        re.compile(r"gh[pousr]_[A-Za-z0-9]{20,}"),
        left_boundary=True,
    ),
    _Detector(
        "code_host_token",
        (),
        re.compile(r"github_pat_[A-Za-z0-9_]{22,}"),
        left_boundary=True,
    ),
    _Detector(
        "code_host_token",
        (),
        re.compile(r"gl(?:pat|dt|ft|soat|rt|ptt)-[A-Za-z0-9_-]{20,}"),
        left_boundary=True,
    ),
    _Detector(
        "slack_token",
        (),
        re.compile(r"x(?:ox[abposre]-[A-Za-z0-9-]{10,}|app-\d-[A-Za-z0-9-]{10,})"),
        left_boundary=True,
    ),
    _Detector(
        "webhook_url",
        (),
        re.compile(
            r"https://(?:hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}|"
            r"(?:canary\.|ptb\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{20,}|"
            r"[\w.-]*webhook\.office\.com/[^\s\"'<>]{20,}|"
            r"[\w.-]+/[\w./-]*webhooks?/[A-Za-z0-9_/-]*[A-Za-z0-9_-]{24,})"
        ),
    ),
    *(
        _Detector("cloud_key", (), re.compile(pattern), left_boundary=True)
        for pattern in (
            r"AIza[0-9A-Za-z_-]{35}",
            r"ya29\.[0-9A-Za-z_-]{20,}",
            r"hf_[A-Za-z0-9]{30,}",
            r"npm_[A-Za-z0-9]{36}",
            r"pypi-[A-Za-z0-9_-]{50,}",
            r"do[pors]_v1_[a-f0-9]{64}",
            r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}",
            r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
            r"dapi[a-f0-9]{32}",
            r"lin_api_[A-Za-z0-9]{40}",
        )
    ),
    # Vendor key formats with a literal start, from each vendor's documentation (one pattern a
    # literal, or a family sharing one: ``re`` searches for it at memory speed).
    *(
        _Detector("vendor_key", (), re.compile(pattern), left_boundary=True)
        for pattern in (
            r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}",  # age (bech32, upper case)
            r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}",  # Postman
            r"NR(?:AK|JS|II|AA)-[A-Za-z0-9]{20,}",  # New Relic
            r"HRKU-[A-Za-z0-9_-]{40,}",  # Heroku
            r"AT(?:ATT|CTT|BB)[A-Za-z0-9_=.-]{24,}",  # Atlassian API tokens, Bitbucket
            r"GOCSPX-[A-Za-z0-9_-]{24,}",  # Google OAuth client secret
            r"LTAI[A-Za-z0-9]{12,24}\b",  # Alibaba Cloud access key id
            r"hv[sb]\.[A-Za-z0-9_-]{24,}",  # HashiCorp Vault service/batch tokens
            r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,}",  # Doppler
            r"gl(?:sa|c)_[A-Za-z0-9+/_]{32,}={0,2}",  # Grafana service account, Cloud
            r"sntry[su]_[A-Za-z0-9_=+/-]{40,}",  # Sentry org/user auth tokens
            r"whsec_[A-Za-z0-9+/]{24,}",  # Stripe webhook signing secret
            r"pul-[a-f0-9]{40}",  # Pulumi
            r"sbp_[a-f0-9]{40}",  # Supabase
            r"rubygems_[a-f0-9]{48}",  # RubyGems
            r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,}",  # PlanetScale
            r"r8_[A-Za-z0-9]{37}",  # Replicate
            r"gsk_[A-Za-z0-9]{48,}",  # Groq
            r"pplx-[A-Za-z0-9]{40,}",  # Perplexity
            r"xai-[A-Za-z0-9]{60,}",  # xAI
            r"ntn_[A-Za-z0-9]{40,}",  # Notion
            r"secret_[A-Za-z0-9]{43}\b",  # Notion (older integration tokens)
            r"fo1_[A-Za-z0-9_-]{40,}",  # Fly.io
            r"FlyV1 fm\d_[A-Za-z0-9+/=_,-]{40,}",  # Fly.io macaroons
            r"sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}",  # Mapbox secret token
            r"key-[0-9a-f]{32}\b",  # Mailgun
            r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}",  # Dynatrace
            r"EAA[A-Za-z0-9_-]{60,}",  # Meta (Facebook) access token, Square access token
            r"AAAAAAAAAAAAAAAAAAAAA[A-Za-z0-9%]{30,}",  # X (Twitter) app bearer token
            r"1//0[A-Za-z0-9_-]{40,}",  # Google OAuth refresh token
            r"sq0atp-[0-9A-Za-z_-]{22,}",  # Square access token
            r"api_org_[A-Za-z0-9]{30,}",  # Hugging Face organisation token
            r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}",  # Airtable personal access token
            r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",  # Cloudflare origin CA key
            r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",  # LangSmith
            r"pcsk_[A-Za-z0-9_]{40,}",  # Pinecone
            r"tvly-[A-Za-z0-9-]{24,}",  # Tavily
            r"fc-[a-f0-9]{32}\b",  # Firecrawl
            r"sk_[a-f0-9]{48}\b",  # ElevenLabs
            r"jina_[A-Za-z0-9_-]{40,}",  # Jina AI
            r"fw_[A-Za-z0-9]{20,}",  # Fireworks AI
            r"csk-[a-z0-9]{40,}",  # Cerebras
            r"ops_eyJ[A-Za-z0-9+/=_-]{100,}",  # 1Password service account
            r"AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{100,}",  # Firebase Cloud Messaging
            r"CFPAT-[A-Za-z0-9_-]{43}",  # Contentful
            r"sq[upa]_[a-f0-9]{40}",  # SonarQube
            r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}",  # Brevo (Sendinblue)
            r"hooks\.zapier\.com/hooks/catch/\d+/[A-Za-z0-9]+",  # Zapier webhook
            r"pat\.[A-Za-z0-9_-]{22}\.[a-f0-9]{24}\.[A-Za-z0-9]{20}",  # Harness
            r"cmVmdGtuOjAxOj[A-Za-z0-9]{40,}",  # JFrog reference token
        )
    ),
    _Detector(
        "vendor_key",
        ("q~",),  # Azure AD (Entra) client secret: three characters, a digit, "Q~"
        re.compile(r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}"),
    ),
    _Detector(
        "vendor_key",
        (".atlasv1.",),  # Terraform Cloud / Enterprise
        re.compile(r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}"),
    ),
    _Detector(
        "url_key",  # a key as a URL's user (a Sentry DSN): random, long, not a name
        (),
        re.compile(r"://(?P<v>[A-Za-z0-9_-]{20,})(?::[A-Za-z0-9_-]*)?@"),
        "v",
        lambda v: _has_classes(v, 2) and not is_ordinary_id(v) and entropy(v) >= 3.0,
    ),
    _Detector(
        "sas_signature",  # an Azure shared access signature (or any "sig=" of a signed URL)
        (),
        re.compile(r"sig=(?P<v>[A-Za-z0-9%+/_-]{20,}(?:={0,2}|(?:%3[Dd]){0,2}))"),
        "v",
        lambda v: REDACTED not in v,
    ),
    _Detector(
        "netrc",
        ("passw",),
        re.compile(r"(?:login|user)[ \t]+\S+[ \t]+password[ \t]+(?P<v>[^\s\"'`\\]+)"),
        "v",
        lambda v: REDACTED not in v,
    ),
    _Detector(
        "pgpass",
        (":5432:", ":3306:", ":6432:", ":*:", "pgpass"),
        re.compile(
            r"(?m)^[A-Za-z0-9._*-]*[A-Za-z*][A-Za-z0-9._*-]*:(?:\d{1,5}|\*):[^:\s]+:[^:\s]+:"
            r"(?P<v>[^\s]{4,})$"
        ),
        "v",
        lambda v: REDACTED not in v and not _PLACEHOLDER.fullmatch(v),
        gate=True,
    ),
    _Detector(
        "pgpass",  # any port, an IP or "*" host, also a line inside a JSON string ("\\n")
        (),
        re.compile(
            r"(?:^|(?<=\\n)|(?<=[\s\"'`]))(?:[A-Za-z0-9._-]+|\*|\[[0-9A-Fa-f:]+\]):"
            r"(?:\d{1,5}|\*):[^:\s\"']+:[^:\s\"']+:(?P<v>(?:[^\s\"'\\:]|\\:){4,})"
            r"(?=$|\\n|[\s\"'`])",
            re.M,
        ),
        "v",
        lambda v: _credential_like(v) and not v.isalpha(),
        trigger=re.compile(r":(?:\d{1,5}|\*):[^:\s\"']+:[^:\s\"']+:"),
    ),
    _Detector(
        "jwt",  # the whole token: header.payload.signature (detect-secrets' stops at payload)
        (),
        re.compile(
            r"eyJ[A-Za-z0-9_-]{8,}={0,2}\.eyJ[A-Za-z0-9_-]{4,}={0,2}\.[A-Za-z0-9_-]{8,}={0,2}"
        ),
        left_boundary=True,
    ),
    _Detector(
        "url_signature",  # signed URLs: AWS presigned (SigV4, SigV2), GCS, CloudFront, any sig=
        ("x-amz-", "x-goog-", "signature", "sig=", "googleaccessid", "security-token"),
        re.compile(
            r"(?:[?&;]|&amp;|\b)(?P<name>x-amz-(?:signature|credential|security-token)|"
            r"x-goog-(?:signature|credential)|googleaccessid|signature|sig|x-signature|"
            r"security-token)=(?P<v>[^&\s\"'<>#;]{8,})",
            re.I,
        ),
        "v",
        lambda v: REDACTED not in v,
    ),
    _Detector(
        "private_key_id",  # a service-account JSON names its key: an id worth nothing alone,
        ("private_key_id",),  # but it identifies the key to revoke, so it is not printed
        re.compile(r"private_key_id[\"']?\s*[:=]\s*[\"']?(?P<v>[A-Za-z0-9_-]{16,})"),
        "v",
    ),
    _Detector(
        "hex_token",  # 32-64 hex after a word that names a credential ("my token is <hex>")
        ("token", "secret", "signature", "key", "passw", "auth"),
        re.compile(
            r"(?i:token|secret|signature|key|passw|auth)(?P<name>[A-Za-z0-9_.-]*)"
            r"(?P<between>[^\n]{0,40}?)(?<![0-9A-Za-z])(?P<v>[0-9a-fA-F]{32,64})(?![0-9A-Za-z])"
        ),
        "v",
    ),
    _Detector(
        "command_password",
        ("curl", "mysql", "sshpass", "-pass", "docker"),
        re.compile(
            r"(?:\bcurl\b[^\n]*?\s(?:-u|--user)\s*[\"']?[^:\s\"']*:(?P<c>[^\s\"']+)|"
            r"\bmysql(?:dump|admin|sh)?\b[^\n]*?\s-p(?P<m>[^\s\"']+)|"
            r"\bsshpass\s+-p\s*[\"']?(?P<s>[^\s\"']+)|"
            r"\bdocker\s+login\b[^\n]*?\s-p\s*[\"']?(?P<d>[^\s\"']+)|"
            r"--(?:password|passwd|pass|http-password|ftp-password)[= ][\"']?(?P<p>[^\s\"']+))"
        ),
        0,
    ),
    _Detector(
        "phrase",
        ("passw", "passphrase"),
        re.compile(
            r"(?i)\b(?P<w>password|passwd|passphrase)\s+(?:is|was)\s+"
            r"(?:now\s+|still\s+)?[\"'“`]?(?P<v>[^\s\"'”`]{4,})",
        ),
        "v",
        _phrase,
    ),
    _Detector(
        "high_entropy_string",
        (),
        re.compile(r"(?P<q>[\"'])(?P<v>[A-Za-z0-9+/_=-]{20,})(?P=q)"),
        "v",
        _high_entropy_b64,
    ),
)


# ``name: value`` / ``name = "value"`` / ``"name": "value"`` / ``name := value``: matched from
# the start of a name that holds a secret word (found with str.find, far cheaper than a regex
# that tries every position).
_ASSIGNMENT = re.compile(
    r"(?P<name>[A-Za-z0-9_.-]+)[\"'\]]{0,2}[ \t]*(?::=|=>|=|:)[ \t]*"
    r"(?:(?P<q>[\"'`])(?P<qv>[^\"'`\n]{1,200})(?P=q)|(?P<v>[^\s\"'`,;&]{1,200}))"
)
_KEY_WORDS = (
    "pass",
    "pwd",
    "secret",
    "token",
    "key",
    "auth",
    "credential",
    "webhook",
    "_sk",
    "_pat",
)
_NAME_WORD = re.compile(rf"(?i:{_SECRET_WORDS})")
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _keywords(text: str, lower: str) -> Iterator[Finding]:
    starts: set[int] = set()
    for word in _KEY_WORDS:
        pos = lower.find(word)
        while pos >= 0:
            start = pos
            while start > 0 and text[start - 1] in _NAME_CHARS and pos - start < 80:
                start -= 1
            if start not in starts:
                starts.add(start)
                m = _ASSIGNMENT.match(text, start)
                if m is not None:
                    span = _keyword_span(m)
                    if span is not None:
                        yield Finding("keyword", *span)
            pos = lower.find(word, pos + len(word))


_STRONG_NAME = re.compile(
    r"api[_-]?key|app[_-]?key|auth[_-]?token|access[_-]?token|api[_-]?token|secret|passw|"
    r"token$"
)


def _keyword_span(m: re.Match[str]) -> tuple[int, int] | None:
    name = m.group("name").lower()
    if not _NAME_WORD.search(name) or any(w in name for w in _NOT_SECRET_NAMES):
        return None
    if m.group("qv") is not None:
        ok = _quoted_credential(m.group("qv"))
        return m.span("qv") if ok else None
    value = m.group("v")
    if _credential_like(value):
        return m.span("v")
    # A UUID or 40-hex value is an id almost everywhere, but under an API key's or a token's
    # name it is the key (Heroku, Datadog and Twilio keys have exactly those shapes).
    if is_ordinary_id(value) and len(value) >= 32 and _STRONG_NAME.search(name):
        return m.span("v")
    return None


def _detectors() -> tuple[_Detector, ...]:
    return _OWN + _scanner_detectors()


# Around a hex value, words that make it a content id, not a credential ("cache_key=<sha256>",
# "the commit hash after the token ..."); "sha" too, except after "signature" (an HMAC
# signature is a hex SHA: "X-Hub-Signature-256: sha256=<hex>").
_HEX_ID_WORDS = (
    "hash",
    "digest",
    "checksum",
    "commit",
    "cache",
    "etag",
    "blob",
    "content",
    "md5",
    "integrity",
    "fingerprint",
    "uuid",
    "request",
    "_id",
    "-id",
    " id",
    "tokens",
    "keyboard",
    "monkey",
)


def _hex_token(m: re.Match[str]) -> bool:
    value = m.group("v")
    start = m.start()  # the name the word is part of ("cache_key"), then what follows it
    while start > 0 and m.string[start - 1] in _NAME_CHARS and m.start() - start < 40:
        start -= 1
    context = m.string[start : m.start("v")].lower()
    if any(w in context for w in _HEX_ID_WORDS):
        return False
    if "sha" in context and "signature" not in context:
        return False
    # random hex mixes letters and digits ("deadbeef..." repeated is a placeholder)
    return _has_classes(value.lower(), 2) and entropy(value) >= 3.0


def _span(d: _Detector, m: re.Match[str]) -> tuple[int, int] | None:
    if d.kind == "command_password":
        for g in ("c", "m", "s", "d", "p"):
            if m.group(g) is not None:
                value = m.group(g)
                ok = REDACTED not in value and not _PLACEHOLDER.fullmatch(value)
                return (m.start(g), m.end(g)) if ok else None
        return None
    if d.kind == "hex_token" and not _hex_token(m):
        return None
    value = m.group(d.group)
    if value is not None and "[redacted" in value.lower():
        return None
    if d.offset or d.left_boundary:
        start = m.start() - d.offset
        if start < 0 or (d.offset and m.string[start] not in "sr"):
            return None
        if start > 0 and (m.string[start - 1].isalnum() or m.string[start - 1] in "_-"):
            return None
        return start, m.end()
    if value is None or (d.accept is not None and not d.accept(value)):
        return None
    start, end = m.span(d.group)
    if d.group == 0:  # strip the delimiters a pattern matched around the secret
        while start < end and m.string[start] in _EDGE:
            start += 1
        while end > start and m.string[end - 1] in _EDGE:
            end -= 1
    if "[redacted" in m.string[start:end].lower():
        return None  # already a placeholder (ours or the harvest's "[REDACTED:kind]")
    # (a named group is the secret itself: a URL's password may be short)
    return (start, end) if end - start >= 4 or d.group != 0 else None


def _lower(text: str) -> str:
    """``text`` lower-cased with every index kept (``str.lower`` turns a few letters, such as
    "İ", into two characters; needles are ASCII, so those may stay as they are)."""
    lower = text.lower()
    if len(lower) == len(text):
        return lower
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _windows(text: str, starts: Iterable[int]) -> list[tuple[int, int]]:
    """The lines holding ``starts`` and the line after each (a match may run on past a line
    break through a ``\\s``), merged; sorted."""
    spans: list[tuple[int, int, int]] = []
    for pos in sorted(starts):
        if spans and pos < spans[-1][2]:
            continue  # on a line a window has already
        start = text.rfind("\n", 0, pos) + 1
        line_end = text.find("\n", pos)
        if line_end < 0:
            line_end = end = len(text)
        else:
            after = text.find("\n", line_end + 1)
            end = len(text) if after < 0 else after + 1
        spans.append((start, end, line_end))
    merged: list[tuple[int, int]] = []
    for start, end, _ in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


class _Needles:
    """Where each needle occurs in one text (once per line), looked up once however many
    detectors ask."""

    def __init__(self, lower: str) -> None:
        self.lower = lower
        self.found: dict[str, list[int]] = {}
        self.triggered: dict[re.Pattern[str], list[int]] = {}

    def present(self, needle: str) -> bool:
        hits = self.found.get(needle)
        return bool(hits) if hits is not None else needle in self.lower

    def matched(self, trigger: re.Pattern[str]) -> list[int]:
        """Where ``trigger`` matches the lower-cased text."""
        hits = self.triggered.get(trigger)
        if hits is None:
            hits = self.triggered[trigger] = [m.start() for m in trigger.finditer(self.lower)]
        return hits

    def where(self, needle: str) -> list[int]:
        hits = self.found.get(needle)
        if hits is None:
            lower, hits = self.lower, []
            pos = lower.find(needle)
            while pos >= 0:
                hits.append(pos)
                nl = lower.find("\n", pos)  # one hit a line is enough for a window
                pos = -1 if nl < 0 else lower.find(needle, nl + 1)
            self.found[needle] = hits
        return hits


def _direct(text: str) -> Iterator[Finding]:
    lower = _lower(text)
    needles = _Needles(lower)
    for d in _detectors():
        if d.gate:
            if not any(needles.present(n) for n in d.needles):
                continue
            spans = [(0, len(text))]
        elif d.needles or d.trigger is not None or d.folded_trigger is not None:
            starts = [p for n in d.needles for p in needles.where(n)]
            if d.trigger is not None:
                starts += [m.start() for m in d.trigger.finditer(text)]
            if d.folded_trigger is not None:
                starts += needles.matched(d.folded_trigger)
            if not starts:
                continue
            spans = _windows(text, starts)
        else:
            spans = [(0, len(text))]
        for start, end in spans:
            for m in d.pattern.finditer(text, start, end):
                span = _span(d, m)
                if span is not None:
                    yield Finding(d.kind, *span)
    yield from _keywords(text, lower)


# -- encoded forms: decoded and scanned again ---------------------------------------------------

# Long runs of base64/hex characters: the tokens an encoded secret hides in.
_TOKEN = re.compile(r"[A-Za-z0-9+/_=-]{16,}")
_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_=-")
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")
_ESC = re.compile(r"\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|/)")
_PCT_STOP = frozenset(" \t\r\n\"'<>")
_ESC_STOP = frozenset(" \t\r\n\"'<>,;")
_LINE_BREAK = re.compile(r"(?:\r?\n|\\n)[ \t]*")


def _runs(text: str, hits: re.Pattern[str], stop: frozenset[str]) -> Iterator[tuple[int, int]]:
    """The tokens (bounded by ``stop`` characters) that hold a match of ``hits``."""
    end = -1
    for m in hits.finditer(text):
        if m.start() < end:
            continue
        start = m.start()
        while start > 0 and text[start - 1] not in stop:
            start -= 1
        end = m.end()
        while end < len(text) and text[end] not in stop:
            end += 1
        yield start, end


def wrapped_runs(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, joined) for each block of base64-ish lines (at least 8 characters each,
    then one more line): a key wrapped at 64 or 76 columns, raw or in a JSON string."""
    pos = 0
    n = len(text)
    while True:
        nl = text.find("\n", pos)
        if nl < 0:
            return
        brk = nl - 1 if nl > 0 and text[nl - 1] == "\\" else nl  # a JSON "\\n"
        # (most lines end, or the next starts, with no base64 character: cheap tests first)
        if brk == 0 or text[brk - 1] not in _B64_CHARS or text[nl + 1 : nl + 2] not in _NEXT:
            pos = nl + 1
            continue
        start = brk
        while start > 0 and text[start - 1] in _B64_CHARS:
            start -= 1
        if text[start:brk].endswith("\r"):
            start = brk
        if brk - start < 8:
            pos = nl + 1
            continue
        m = WRAPPED.match(text, start)
        if m is None or m.end() <= nl:
            pos = nl + 1
            continue
        lines = _LINE_BREAK.split(m.group(0))
        after = text[m.end() : m.end() + 1]
        # Wrapping makes lines of one width (the last no longer) and ends where the block
        # does; a hash followed by a path on the next line is no wrapped key.
        if (
            len(lines[0]) >= (16 if len(lines) > 2 else 32)  # "a_name=512\nThe" is prose
            and all(len(line) == len(lines[0]) for line in lines[:-1])
            and len(lines[-1]) <= len(lines[0])
            and after in ("", " ", "\t", "\r", "\n", '"', "'", "\\", ",", "`", "<")
            and not is_ordinary_id(lines[0])
        ):
            yield m.start(), m.end(), "".join(lines)
        pos = max(m.end(), nl + 1)
        if pos >= n:
            return


_NEXT = _B64_CHARS | {" ", "\t"}
WRAPPED = re.compile(r"(?:[A-Za-z0-9+/=_-]{8,}(?:\r?\n|\\n)[ \t]*)+[A-Za-z0-9+/=_-]{2,}")


def _printable(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return (
        text if text.isprintable() or all(c.isprintable() or c in "\r\n\t" for c in text) else None
    )


def _b64decode(token: str) -> str | None:
    token = token.rstrip("=")
    if "-" in token or "_" in token:
        token = token.replace("-", "+").replace("_", "/")
    if len(token) % 4 == 1:
        return None
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    return _printable(raw)


def _hexdecode(token: str) -> str | None:
    try:
        return _printable(bytes.fromhex(token))
    except ValueError:
        return None


def _unescape(token: str) -> str:
    def one(m: re.Match[str]) -> str:
        s = m.group(0)
        return "/" if s == "\\/" else chr(int(s[2:], 16))

    return re.sub(r"\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}|\\/", one, token)


def _decoded_views(text: str) -> Iterator[tuple[str, int, int, str]]:
    """(kind suffix, start, end, decoded text) for each encoded run of ``text``."""
    if "%" in text:
        for start, end in _runs(text, _PCT, _PCT_STOP):
            token = text[start:end]
            yield "percent", start, end, unquote(token.replace("+", " "))
    if "\\" in text:
        for start, end in _runs(text, _ESC, _ESC_STOP):
            yield "escaped", start, end, _unescape(text[start:end])
    if "\n" in text:
        for start, end, joined in wrapped_runs(text):
            yield "wrapped", start, end, joined
            decoded = _b64decode(joined)
            if decoded:
                yield "wrapped", start, end, decoded
    for m in _TOKEN.finditer(text):
        token = m.group(0)
        if is_ordinary_id(token):
            continue
        if _HEX.fullmatch(token):
            decoded = _hexdecode(token) if len(token) % 2 == 0 else None
            if decoded:
                yield "hex", m.start(), m.end(), decoded
            continue
        decoded = _b64decode(token)
        if decoded and len(decoded) >= 8:
            yield "base64", m.start(), m.end(), decoded


# -- normalised views: invisible characters taken out, keys wrapped over a line break joined ----

# Characters that show as nothing: a key pasted with one inside still works after a copy that
# drops it, and a scanner that reads the raw text sees two short halves.
INVISIBLE = re.compile("[\u00ad\u200b\u200c\u200d\u2060\ufeff]")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_=-")


def _mapped(view: str, origin: list[int], found: Iterable[Finding]) -> Iterator[Finding]:
    """``found`` (spans of ``view``) as spans of the text ``view`` was made from: ``origin[i]``
    is where ``view[i]`` came from."""
    for f in found:
        yield Finding(f.kind, origin[f.start], origin[f.end - 1] + 1)


def _without_invisible(text: str) -> Iterator[Finding]:
    """Findings in ``text`` with its invisible characters taken out, as spans of ``text``."""
    origin = [i for i, c in enumerate(text) if not INVISIBLE.match(c)]
    view = "".join(text[i] for i in origin)
    yield from _mapped(view, origin, findings(view))


def _joins(text: str) -> Iterator[tuple[int, int, int, int]]:
    """(left start, break start, right start, right end) for each line break that splits a
    token: a run of key characters ends the line and another starts the next (after any
    indentation), together 20+ characters and no plain lower-case word. Prose ("the\nquick")
    and a name that starts the next line ("abc\nname: v") are no split token."""
    for needle in ("\n", "\\n"):
        pos = text.find(needle)
        while pos >= 0:
            brk_start = pos - 1 if needle == "\n" and pos > 0 and text[pos - 1] == "\r" else pos
            if needle == "\\n" and text.endswith("\\r", 0, pos):
                brk_start = pos - 2
            right = pos + len(needle)
            while right < len(text) and text[right] in " \t":
                right += 1
            pos = text.find(needle, pos + 1)
            if brk_start == 0 or text[brk_start - 1] not in _TOKEN_CHARS:
                continue
            if right >= len(text) or text[right] not in _TOKEN_CHARS:
                continue
            left = brk_start
            while left > 0 and text[left - 1] in _TOKEN_CHARS and brk_start - left < 200:
                left -= 1
            end = right
            while end < len(text) and text[end] in _TOKEN_CHARS and end - right < 200:
                end += 1
            if text[end : end + 1] in ("=", ":", "(", "[") or text[brk_start - 1] == "=":
                continue  # the next line starts with a name or a call; base64 padding ends
            head, tail = text[left:brk_start], text[right:end]
            if len(head) + len(tail) < 20 or len(head) < 4 or len(tail) < 4:
                continue
            if tail[0] == "/" or head[-1] == "/" or is_ordinary_id(head):
                continue  # a path starts the next line; a hash ends this one
            joined = head + tail
            if joined.isalpha() and (joined.islower() or joined[1:].islower()):
                continue
            if _whole_token(tail, found=True) or _whole_token(head, found=False):
                continue  # one token a line (a dump of values, each line its own)
            yield left, brk_start, right, end


def _whole_token(token: str, *, found: bool) -> bool:
    """A token that stands on its own: base64/hex of readable text, or (``found``) a finding
    (a key's head alone is often one already: "sk-ant-api03-" and its first characters)."""
    if found and next(_direct(token), None) is not None:
        return True
    decoded = _hexdecode(token) if _HEX.fullmatch(token) else _b64decode(token)
    return decoded is not None and len(decoded) >= 6


def _across_breaks(text: str) -> Iterator[Finding]:
    """Findings in the lines around each split token with the break taken out, as spans of
    ``text`` (only those that cross a break: the rest are found in ``text`` itself)."""
    for left, brk_start, right, end in _joins(text):
        line_start = max(text.rfind("\n", 0, left) + 1, left - 120)
        line_end = text.find("\n", end)
        line_end = min(len(text) if line_end < 0 else line_end, end + 120)
        origin = [*range(line_start, brk_start), *range(right, line_end)]
        view = text[line_start:brk_start] + text[right:line_end]
        cut = brk_start - line_start  # the view's index where the break was
        if "-----" in view:
            continue  # PEM armour: the whole block is found in ``text`` itself
        crossing = [f for f in _direct(view) if f.start < cut < f.end]
        yield from _mapped(view, origin, crossing)


def split_findings(text: str) -> list[Finding]:
    """The findings of ``findings`` that only the normalised views see: keys split by a line
    break or an invisible character (a scrubber with its own patterns runs these first, so
    that its patterns do not take a key's head and leave its tail)."""
    found: list[Finding] = []
    if INVISIBLE.search(text):
        found += [f for f in _without_invisible(text) if INVISIBLE.search(text, f.start, f.end)]
    if "\n" in text or "\\n" in text:
        found += _across_breaks(text)
    return merge(found)


def findings(text: str, *, decode: bool = True) -> list[Finding]:
    """Every credential-shaped span of ``text``, sorted; encoded runs that hide one are found
    whole (``kind`` then ends in ``_base64``, ``_hex``, ``_percent``, ``_escaped``,
    ``_wrapped``), and so are keys split by an invisible character or a line break."""
    if decode and INVISIBLE.search(text):
        return sorted(_without_invisible(text), key=lambda f: (f.start, -f.end))
    found = list(_direct(text))
    if decode and ("\n" in text or "\\n" in text):
        found += _across_breaks(text)
    if decode:
        for suffix, start, end, decoded in _decoded_views(text):
            if any(f.start < end and start < f.end for f in found):
                continue  # found in clear already ("postgres://u:p%40ss@db" keeps its URL)
            inner = next(iter(_direct(decoded)), None)
            if inner is not None:
                found.append(Finding(f"{inner.kind}_{suffix}", start, end))
    return sorted(_whole_tokens(text, found), key=lambda f: (f.start, -f.end))


_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _whole_tokens(text: str, found: list[Finding]) -> Iterator[Finding]:
    """``found`` with each span that stops inside a token run on to the token's end: a
    pattern with a fixed length (a Discord token's last part) must not leave a tail behind."""
    n = len(text)
    for f in found:
        end = f.end
        if 0 < end < n and text[end] in _WORD_CHARS and text[end - 1] in _WORD_CHARS:
            while end < n and text[end] in _WORD_CHARS:
                end += 1
            f = Finding(f.kind, f.start, end)
        yield f


def merge(found: list[Finding]) -> list[Finding]:
    """Overlapping findings as one (the first's kind)."""
    out: list[Finding] = []
    for f in sorted(found, key=lambda f: (f.start, -f.end)):
        if out and f.start < out[-1].end:
            last = out[-1]
            out[-1] = Finding(last.kind, last.start, max(last.end, f.end))
        else:
            out.append(f)
    return out


def replace(text: str, found: list[Finding], marker: Callable[[str], str]) -> str:
    parts = []
    pos = 0
    for f in merge(found):
        parts.append(text[pos : f.start])
        parts.append(marker(f.kind))
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts)


def redact(
    text: str, marker: Callable[[str], str] = lambda kind: REDACTED
) -> tuple[str, Counter[str]]:
    """``text`` with every finding replaced by ``marker(kind)``, and the count per kind."""
    found = merge(findings(text))
    if not found:
        return text, Counter()
    return replace(text, found, marker), Counter(f.kind for f in found)

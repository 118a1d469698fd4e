"""The false-positive corpus beside the leak matrix: text that looks a little like a credential
and is none. ``test_secret_matrix`` checks the pipeline leaves every entry exactly as it is.

Each entry is (name, text). Values are drawn from a seeded generator in the shape each id
really has (a git sha, a sha256 sum, a UUID, a base64 image), next to the words that the
issue-43 detectors look at (token, key, signature, sig=, a line break, a ``host:port:...``).
"""

from __future__ import annotations

import base64
import hashlib
import random
import textwrap
import uuid

_rng = random.Random(43)


def _hex(n: int) -> str:
    return "".join(_rng.choice("0123456789abcdef") for _ in range(n))


sha1 = _hex(40)
sha1_b = _hex(40)
sha256 = hashlib.sha256(b"skillvc").hexdigest()
sha256_b = _hex(64)
run_uuid = str(uuid.UUID(int=_rng.getrandbits(128), version=4))
png = base64.b64encode(bytes([0x89, 0x50, 0x4E, 0x47]) + _rng.randbytes(300)).decode()

CLEAN: list[tuple[str, str]] = [
    ("commit shas", f"commit {sha1}\nMerge: {sha1[:7]} {sha1_b[:7]}\nparent {sha1_b}\n"),
    ("git log --oneline", f"{sha1[:7]} Fix the refund rule\n{sha1_b[:12]} Add a test\n"),
    ("sha256 sums", f"{sha256}  dist/skillvc-1.0.tar.gz\n{sha256_b}  dist/skillvc-1.0.whl\n"),
    ("sha256 in docs", f"The file's sha256 is {sha256}; check it with `sha256sum -c`."),
    (
        "pip hashes",
        f"skillvc==1.0 \\\n    --hash=sha256:{sha256} \\\n    --hash=sha256:{sha256_b}\n",
    ),
    ("docker digest", f"image: python@sha256:{sha256_b}\n"),
    ("uuids", f"run {run_uuid} item {uuid.UUID(int=7)} request-id: {run_uuid}\n"),
    ("cache key", f"cache_key={sha256} content_hash={sha256_b} blob {sha1}"),
    ("a key's commit", f"the key commit was {sha1}; the token count hash {sha256_b}"),
    # (a quoted 32-hex value is removed as high-entropy hex: a documented limit)
    ("etag", f"ETag: {_hex(32)}\nContent-MD5 digest {_hex(32)}"),
    (
        "urls without signatures",
        "https://acme.s3.amazonaws.com/report.pdf and "
        "https://storage.googleapis.com/acme/report.pdf?alt=media&generation=1 and "
        "https://example.com/search?q=signature+design&page=2&sort=key",
    ),
    ("an unsigned presigned-looking url", "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=3600"),
    ("base64 image", f'<img src="data:image/png;base64,{png}">'),
    ("wrapped base64 image", "data:image/png;base64,\n" + "\n".join(textwrap.wrap(png, 76))),
    (
        "prose wrapped over lines",
        "The signature of the function changed: it takes a token\ncount and a key\n"
        "function now. Tokens are counted per\nmessage, and the secret to a good skill is\n"
        "brevity.\n",
    ),
    (
        "code wrapped over lines",
        "result = compute_the_refund_amount_for_order(\n    order_identifier_value, policy)\n"
        "def api_key_name(cache_key: str) -> str:\n    return cache_key.upper()\n",
    ),
    (
        "a column of model names",
        "claude-3-5-sonnet-20241022\ngpt-4o-mini-2024-07-18\nllama-3.1-8b-instruct\n",
    ),
    (
        "compiler and linter lines",
        "src/app/main.py:42:5: E501 line too long\nmain.c:12:3: error: expected ';'\n",
    ),
    ("timestamps and addresses", "12:30:45 fe80::1:2:3:4 00:1a:2b:3c:4d:5e 127.0.0.1:8080\n"),
    ("host:port lines", "db.example.com:5432\nlocalhost:8000:app\n"),
    ("a placeholder pgpass line", "db.example.com:5432:app:bob:<password>\n"),
    (
        "zero-width space in prose",
        "Refunds\u200b within 30 days; soft\u00adhyphen; \ufeffBOM start",
    ),
    (
        "skillvc's own lines",
        f"2026-11-25T20:00:00Z edit.applied run=run-20261125-200000 skill=acme@{sha1[:12]}\n"
        f"  val 0.625 -> 0.750 (p=0.031)  key {sha256[:16]}\n",
    ),
    ("signature in prose", "Sign with your signature=true option; sig=short is fine.\n"),
]

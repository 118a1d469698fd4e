"""detect-secrets alone vs skillvc's redaction pipeline on the leak matrix's secret forms,
and the pipeline's throughput on transcript-sized text (issue 20 target: >= 5 MB/s).

Counts: a form is caught when no form of its secret (clear, base64 at every alignment, URL
encoded, hex, ``\\u``-escaped, also with line breaks taken out) is left in the text.
detect-secrets runs through its own API (``scan_line`` per line, every plugin, default
filters) and "catches" a form when it reports a secret on some line; skillvc's pipeline
(``skillvc.secrets.scrub``) when nothing of the secret is left. skillvc must catch a superset.

Throughput: a synthetic Claude Code-like JSONL transcript (prose, code, paths, tool output,
request ids, sha256 hashes) of ``--mb`` megabytes with a few secrets sprinkled in, scrubbed
``--repeat`` times (best time reported); detect-secrets' line API on the same text for scale.

    python bench/bench_secrets.py [--mb 5] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import secret_matrix as M  # noqa: E402

os.environ.update(M.ENV)  # the pipeline knows these values, as in a real session

from skillvc.secrets import scrub  # noqa: E402


def detect_secrets_values(text: str) -> list[str]:
    """The secret values detect-secrets reports for ``text``, line by line (its own API)."""
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    with default_settings():
        return [str(found.secret_value) for line in text.splitlines() for found in scan_line(line)]


def detect_secrets_catches(text: str, secret: str) -> bool:
    """detect-secrets reported the secret (or a value holding one of its forms, or a part of
    it of at least half its length)."""
    forms = M.forms_of(secret)
    return any(
        any(f in value for f in forms) or (len(value) * 2 >= len(secret) and value in secret)
        for value in detect_secrets_values(text)
    )


def transcript(mb: float, seed: int = 1) -> str:
    rng = random.Random(seed)
    words = [
        "the",
        "agent",
        "read",
        "the",
        "file",
        "and",
        "ran",
        "the",
        "tests",
        "then",
        "fixed",
        "parse_config",
        "in",
        "src/app/main.py",
        "because",
        "the",
        "refund",
        "policy",
        "says",
        "orders",
        "over",
        "30",
        "days",
        "need",
        "a",
        "manager;",
        "see",
        "the",
        "README",
    ]
    lines: list[str] = []
    size = 0
    while size < mb * 1e6:
        kind = rng.random()
        if kind < 0.5:
            content = " ".join(rng.choice(words) for _ in range(rng.randint(10, 80)))
        elif kind < 0.7:
            content = "\n".join(
                f"    def f{i}(x: int) -> int:\n        return x * {i}  # step {i}"
                for i in range(8)
            )
        elif kind < 0.85:
            content = "\n".join(
                f"/home/u/src/app/mod{i}.py:{rng.randint(1, 400)}: ok {rng.getrandbits(256):064x}"
                for i in range(6)
            )
        else:
            content = f"commit {rng.getrandbits(160):040x}\nAuthor: A <a@example.com>\n\n  fix"
        record = {
            "type": "assistant",
            "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
            "requestId": f"req_{rng.getrandbits(96):024x}",
            "message": {"role": "assistant", "content": [{"type": "text", "text": content}]},
        }
        if rng.random() < 0.002:
            record["message"]["content"][0]["text"] += "\n" + rng.choice(M.FORMS)[1]
        line = json.dumps(record)
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    ds_caught = sk_caught = 0
    only_ds = []
    print("form: caught by (detect-secrets alone / skillvc); '-' where it leaks")
    for name, text, secret in M.FORMS:
        ds = detect_secrets_catches(text, secret)
        sk = not M.found_in(scrub(text), secret)
        ds_caught += ds
        sk_caught += sk
        if ds and not sk:
            only_ds.append(name)
        print(f"  {name}: {'detect-secrets' if ds else '-'} / {'skillvc' if sk else '-'}")
    print(f"forms: {len(M.FORMS)}")
    print(f"detect-secrets 1.5 alone catches: {ds_caught}")
    print(f"skillvc pipeline catches:         {sk_caught}")
    print(
        f"caught by detect-secrets, missed by skillvc: {only_ds or 'none'} (superset: "
        f"{'yes' if not only_ds else 'NO'})"
    )

    text = transcript(args.mb)
    size = len(text.encode())
    scrub(text[:10_000])  # patterns compiled, detect-secrets imported: not part of the rate
    times = [_timed(lambda: scrub(text)) for _ in range(args.repeat)]
    wall, cpu = min(t[0] for t in times), min(t[1] for t in times)
    print(
        f"pipeline throughput on a {size / 1e6:.1f} MB transcript: {size / 1e6 / wall:.1f} MB/s "
        f"wall ({wall:.2f} s), {size / 1e6 / cpu:.1f} MB/s of CPU time ({cpu:.2f} s)"
    )
    sample = text[:500_000]
    ds_wall, ds_cpu = _timed(lambda: detect_secrets_values(sample))
    print(
        f"detect-secrets' line API on 0.5 MB of it: {0.5 / ds_wall:.2f} MB/s wall, "
        f"{0.5 / ds_cpu:.2f} MB/s of CPU time"
    )


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds: on a shared machine the CPU time is the steadier figure."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


if __name__ == "__main__":
    main()

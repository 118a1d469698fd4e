"""Train a library's routing against a real model as the selector (issue 41).

Not part of CI (it needs a model server). It writes a bundled example library
(``skillvc.routing.example``, chosen with ``--library``; each has six skills with vague,
overlapping seed descriptions and a trigger set of 58 train, 21 val and 21 test prompts, each
wanting one skill or none) into a fresh git repository, points the selector and the optimizer
at an OpenAI-compatible server, measures the library's routing on val and test, trains the
descriptions (``skillvc train --routing``) and measures again. It prints per-skill F1 before
and after, the library score on val and test, the accepted and rejected edits, and the calls.
It starts no server: give it one that is running.

The libraries: ``documents`` (the default): pdf / docx / xlsx / pptx / csv / markdown, where
every prompt names its format, so a selector routes much of it from the skill names alone;
``support``: billing / refunds / returns / shipping / account / fraud, customer messages that
do not name their queue, routed by a house policy written only in the labels (a parcel that
arrived damaged goes to returns, a charge the customer never made to fraud, ...), so what the
descriptions say decides.

    python bench/bench_routing.py --base-url http://127.0.0.1:8080/v1 --model qwen2.5-7b-instruct
    # a different (larger) optimizer, plain-text picks (a server without tool calls):
    python bench/bench_routing.py --base-url URL --model SMALL --optimizer-model LARGE --no-tools
    # the harder library, where the skill names do not give the answer away:
    python bench/bench_routing.py --base-url URL --model SMALL --library support
    # offline, with the simulator (no server):
    python bench/bench_routing.py --sim [--library support]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from skillvc.routing.evaluate import evaluate_routing
from skillvc.routing.example import LIBRARIES, write_example
from skillvc.routing.train import train_routing
from skillvc.workspace.workspace import open_workspace


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def make_repo(repo: Path, args: argparse.Namespace) -> None:
    git(repo, "init", "-q", "-b", "main")
    if args.sim:
        write_example(repo, library=args.library)
    else:
        write_example(
            repo,
            library=args.library,
            selector=f"openai:{args.model}",
            optimizer=f"openai:{args.optimizer_model or args.model}",
        )
        config = (repo / "skillvc.toml").read_text()
        for role, temp in (("target", 0.0), ("optimizer", args.optimizer_temperature)):
            model = args.model if role == "target" else args.optimizer_model or args.model
            config = config.replace(
                f'[{role}]\nmodel = "openai:{model}"\n',
                f'[{role}]\nmodel = "openai:{model}"\nbase_url = "{args.base_url}"\n'
                f"temperature = {temp}\ntimeout_s = {args.timeout}\n",
            )
        config = config.replace("workers = 4", f"workers = {args.workers}")
        config = config.replace("epochs = 2", f"epochs = {args.epochs}")
        if not args.tools:
            config = config.replace("[routing]\n", "[routing]\ntools = false\n")
        (repo / "skillvc.toml").write_text(config)
    (repo / ".gitignore").write_text(".skillvc/\n")
    for name, email in (("user.name", "bench"), ("user.email", "bench@example.invalid")):
        git(repo, "config", name, email)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the example library")


def measure(repo: Path, rev: str, split: str) -> tuple[dict[str, Any], int]:
    ws = open_workspace(repo, any_skill=True)
    score, facts = evaluate_routing(ws, rev, split)
    return score.to_dict(), int(facts["fresh_calls"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible server, e.g. .../v1")
    parser.add_argument("--model", default="local", help="the selector model as served")
    parser.add_argument("--optimizer-model", help="default: --model")
    parser.add_argument("--optimizer-temperature", type=float, default=0.0)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--no-tools", dest="tools", action="store_false")
    parser.add_argument("--sim", action="store_true", help="sim:routing, no server")
    parser.add_argument(
        "--library", choices=sorted(LIBRARIES), default="documents", help="the bundled example"
    )
    parser.add_argument("--keep", action="store_true", help="print and keep the repository")
    args = parser.parse_args()
    if not args.sim and not args.base_url:
        parser.error("give --base-url of a running OpenAI-compatible server (or --sim)")
    tmp = tempfile.mkdtemp(prefix="bench-routing-")
    repo = Path(tmp)
    make_repo(repo, args)
    start = time.perf_counter()
    # Progress on stderr as it happens (a slow server's run can be read before it ends).
    print(f"repository: {repo}", file=sys.stderr, flush=True)
    val_before, c1 = measure(repo, "HEAD", "val")
    say("val before", val_before)
    test_before, c2 = measure(repo, "HEAD", "test")
    say("test before", test_before)

    def progress(line: str) -> None:
        if "items" not in line:  # the gates' and steps' lines, not each item's tick
            print(f"  {line}", file=sys.stderr, flush=True)

    summary = train_routing(open_workspace(repo, any_skill=True), progress=progress)
    val_after, c3 = measure(repo, "HEAD", "val")
    test_after, c4 = measure(repo, "HEAD", "test")
    wall = time.perf_counter() - start
    selector = "sim:routing" if args.sim else args.model
    print(
        f"library {args.library}; selector {selector}, "
        f"optimizer {args.optimizer_model or selector}, "
        f"picks by {'tool call' if args.tools else 'text'}"
    )
    print(
        f"{'skill':<10} {'F1 val before':>14} {'after':>7} {'F1 test before':>15} {'after':>7}"
        f" {'recall test':>16}"
    )
    for name in val_before["skills"]:
        vb, va = val_before["skills"][name], val_after["skills"][name]
        tb, ta = test_before["skills"][name], test_after["skills"][name]
        print(
            f"{name:<10} {fmt(vb['f1']):>14} {fmt(va['f1']):>7} {fmt(tb['f1']):>15} "
            f"{fmt(ta['f1']):>7} {fmt(tb['recall']) + ' -> ' + fmt(ta['recall']):>16}"
        )
    print(
        f"library score: val {fmt(val_before['library'])} -> {fmt(val_after['library'])}, "
        f"test {fmt(test_before['library'])} -> {fmt(test_after['library'])} "
        f"(test interval {test_after['library_interval']})"
    )
    print(
        f"steps {summary.steps}: {summary.accepted} description edits accepted, "
        f"{summary.rejected} rejected"
    )
    print(
        f"calls: training {summary.calls} ({json.dumps(summary.calls_by_role)}; "
        f"{summary.fresh_calls} made), measurements {c1 + c2 + c3 + c4} made; "
        f"tokens {summary.tokens:,}; wall {wall:.0f}s"
    )
    if args.keep:
        print(f"repository: {repo}")
    return 0


def say(label: str, score: dict[str, Any]) -> None:
    """One measurement on stderr: the library score and each skill's F1."""
    f1 = ", ".join(f"{n} {fmt(s['f1'])}" for n, s in score["skills"].items())
    print(f"{label}: library {fmt(score['library'])}; F1 {f1}", file=sys.stderr, flush=True)


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    sys.exit(main())

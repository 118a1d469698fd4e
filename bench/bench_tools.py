"""Train a tool-using skill against a real local model: the tools demo, for real.

Not part of CI (it needs a model server and takes tens of minutes on a CPU). It makes the
``skillvc demo --tools`` repository (a stock-check skill whose answers only the
``stock_level`` tool in ``tools/inventory.py`` knows), points its target and optimizer at the
server, trims the task set to the sizes asked for, trains, and prints seed vs trained val and
test, turns and tool calls per rollout (and the share of rollouts that called a tool), accepted
steps, calls, tokens and wall time. The server must do tool calls: llama.cpp with ``--jinja``
(``use_jinja``); a small model that writes its call as text is read leniently by the loop.

    # a server already running:
    python bench/bench_tools.py --base-url http://127.0.0.1:8080/v1
    # or started and stopped by the bench:
    python bench/bench_tools.py --gguf model.gguf \\
        --llama-server "python bench/xllamacpp_server.py --jinja"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_real_model import model_name, start_server, stop_server  # noqa: E402

from skillvc.core.store import open_store  # noqa: E402
from skillvc.training.demo import create_demo_repo  # noqa: E402
from skillvc.training.loop import train  # noqa: E402
from skillvc.workspace.workspace import open_workspace  # noqa: E402


def configure(repo: Path, base_url: str, model: str, args: argparse.Namespace) -> None:
    """The demo's config with the local model as target and optimizer, the sets trimmed."""
    for split, n in (("train", args.train), ("val", args.val), ("test", args.test)):
        path = repo / "evals" / f"{split}.jsonl"
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:n]))
    model_keys = (
        f'model = "openai:{model}"\nbase_url = "{base_url}"\ntemperature = {{t}}\n'
        f"timeout_s = {args.timeout}\n"
    )
    config = (repo / "skillvc.toml").read_text()
    config = config.replace(
        'model = "sim:inventory"\ntemperature = 0.0\n',
        model_keys.format(t=0.0) + "max_tokens = 256\n",
    )
    config = config.replace(
        'model = "sim:inventory"\ntemperature = 0.7\n', model_keys.format(t=0.7)
    )
    config = config.replace("epochs = 2", f"epochs = {args.epochs}")
    config = config.replace("batch_size = 20", f"batch_size = {args.train}")
    config = config.replace("minibatch_size = 5", f"minibatch_size = {args.minibatch}")
    config = config.replace("workers = 8", f"workers = {args.slots}")
    (repo / "skillvc.toml").write_text(config)
    git = open_workspace(repo).repo.git_repo.git
    git.add("-A")
    git.commit("-q", "-m", "bench: the local model, a smaller set")


def rollout_figures(repo: Path) -> dict[str, Any]:
    """Turns, tool calls and failures per target rollout, from the log."""
    turns, calls, acted, failures = [], [], 0, 0
    with open_store(repo / ".skillvc/events.db") as store:
        for row in store.query("SELECT payload FROM events WHERE type = 'model.call'"):
            p = json.loads(row["payload"])
            meta = p.get("meta") or {}
            if p.get("role") != "target" or "turns" not in meta:
                continue
            turns.append(meta["turns"])
            calls.append(meta["tool_calls"])
            acted += meta["tool_calls"] > 0
            failures += bool(meta.get("failure"))
    n = len(turns) or 1
    return {
        "rollouts": len(turns),
        "turns_per_rollout": round(sum(turns) / n, 2),
        "tool_calls_per_rollout": round(sum(calls) / n, 2),
        "share_with_a_tool_call": round(acted / n, 2),
        "loop_failures": failures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="an OpenAI-compatible server's /v1 URL")
    parser.add_argument("--model", help="the served model's name [asked of the server]")
    parser.add_argument("--gguf", help="start a server for this model file")
    parser.add_argument("--llama-server", help="the server command (llama-server or xllamacpp)")
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--train", type=int, default=10)
    parser.add_argument("--val", type=int, default=10)
    parser.add_argument("--test", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--minibatch", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=1800.0, help="per model call, seconds")
    parser.add_argument("--out", default=None, help="where the repository is made [a temp dir]")
    args = parser.parse_args(argv)
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-tools-"))
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("OPENAI_API_KEY", "local")  # a local server takes any key
    server = None
    if args.base_url is None:
        if not (args.gguf and args.llama_server):
            parser.error("give --base-url, or --gguf and --llama-server")
        args.out = str(out)
        server, args.base_url = start_server(args)
    try:
        model = args.model or model_name(args.base_url)
        repo = out / "stock-check"
        create_demo_repo(repo, tools=True)
        configure(repo, args.base_url, model, args)
        started = time.monotonic()
        summary = train(open_workspace(repo))
        wall = time.monotonic() - started
    finally:
        if server is not None:
            stop_server(server)
    figures = {
        "model": model,
        "sizes": {"train": args.train, "val": args.val, "test": args.test},
        "val": [summary.baseline_val, summary.best_val],
        "test": [summary.baseline_test, summary.test],
        "accepted": summary.accepted,
        "rejected": summary.rejected,
        "calls": summary.calls,
        "tokens": summary.tokens,
        "wall_s": round(wall, 1),
        **rollout_figures(repo),
    }
    print(json.dumps(figures, indent=2))
    print(f"trained skill: {repo / 'skills/stock-check/SKILL.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Cold-start figures of ``skillvc eval`` answered entirely from the event log.

A skills repo whose target is ``openai:...`` is evaluated once through a loopback
OpenAI-compatible server on 127.0.0.1 (tests/loopback.py), so every answer is in the log. Then:

1. wall time of ``skillvc eval -q`` in a fresh interpreter (subprocess), median of N runs
   (target < 0.8 s), next to ``python -c "import openai"`` for what an eager import costs;
2. ``python -X importtime``: whether openai/anthropic were imported (they must not be) and the
   slowest top-level imports.

    python bench/bench_startup.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from loopback import LoopbackServer  # noqa: E402 - tests/ is put on the path just above

from skillvc.models import simworld  # noqa: E402
from skillvc.review.evaluation import evaluate  # noqa: E402
from skillvc.training.demo import create_demo_repo  # noqa: E402
from skillvc.workspace.workspace import open_workspace  # noqa: E402

TARGET = "openai:bench-sim"


def make_repo(root: Path, server: LoopbackServer) -> None:
    """The demo repo with an OpenAI-compatible target, its val split answered once."""
    create_demo_repo(root)
    toml = root / "skillvc.toml"
    toml.write_text(toml.read_text().replace('model = "sim:support"', f'model = "{TARGET}"'))
    subprocess.run(["git", "commit", "-qam", "OpenAI target"], cwd=root, check=True)

    def responder(body: dict) -> str:
        messages = body["messages"]
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        user = "\n\n".join(m["content"] for m in messages if m["role"] == "user")
        return simworld.answer(system, user)

    server.responder = responder
    os.environ["OPENAI_BASE_URL"] = server.url + "/v1"
    os.environ["OPENAI_API_KEY"] = "sk-bench-placeholder"
    result = evaluate(open_workspace(root), None, "val")
    print(f"setup: {result.n} val items answered through the loopback ({result.fresh_calls} calls)")


def timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    server = LoopbackServer().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "repo"
            make_repo(root, server)
            asked = len(server.requests)
            # No key and no server in the measured runs: nothing may need them.
            env = {
                k: v
                for k, v in os.environ.items()
                if k not in ("OPENAI_BASE_URL", "OPENAI_API_KEY")
            }
            cmd = [sys.executable, "-m", "skillvc", "eval", "-q"]
            timed(cmd, root, env)  # warm the OS file cache: "cold" means a fresh interpreter
            walls = [timed(cmd, root, env) for _ in range(args.runs)]
            sdk = [timed([sys.executable, "-c", "import openai"], root, env) for _ in range(3)]
            bare = [timed([sys.executable, "-c", "pass"], root, env) for _ in range(3)]
            trace = subprocess.run(
                [sys.executable, "-X", "importtime", *cmd[1:]],
                cwd=root,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            ).stderr
            assert len(server.requests) == asked, "a measured run called the model"
    finally:
        server.stop()

    median = statistics.median(walls)
    print(f"== skillvc eval answered from the log, fresh interpreter, {args.runs} runs ==")
    print(f"  median wall time          {median:6.3f} s   (target < 0.8 s)")
    print(f"  min / max                 {min(walls):6.3f} / {max(walls):.3f} s")
    print(f"  python -c pass            {statistics.median(bare):6.3f} s")
    print(f"  python -c 'import openai' {statistics.median(sdk):6.3f} s   (what is not paid)")
    print("== python -X importtime ==")
    rows = []  # (cumulative microseconds, module, nesting depth)
    for line in trace.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, raw = line[len("import time:") :].split("|")
        name = raw[1:]  # one space after the bar; two more per nesting level
        rows.append((int(cumulative), name.strip(), (len(name) - len(name.lstrip())) // 2))
    names = {name for _, name, _ in rows}
    for sdk_name in ("openai", "anthropic"):
        print(f"  {sdk_name} imported: {'yes' if sdk_name in names else 'no'}")
    top = sorted(((c, n) for c, n, depth in rows if depth == 0), reverse=True)
    print("  slowest top-level imports (cumulative):")
    for cumulative, name in top[:8]:
        print(f"    {cumulative / 1e6:6.3f} s  {name}")
    print(f"  all imports: {sum(c for c, _ in top) / 1e6:.3f} s")


if __name__ == "__main__":
    main()

"""Per-rollout overhead skillvc adds around an agent CLI (issue 11 target: < 50 ms).

The agent is a tiny shell script that reads the task and prints a stream-json ``result`` line
(a Skill tool call included), so nearly all of its own time is process start-up. Three ways
of running it, each ``--n`` times, sequentially:

    bare     Popen + communicate of the same script (no scratch, no parsing): the floor
    backend  AgentBackend.complete: scratch HOME/work/tmp, skill installed, explicit env,
             stream-json parsed into a trajectory, activation, redaction, scratch removed
    client   ModelClient.call with a real SQLite event log: cache key (incl. the agent's
             version/env/file hashes), cache lookup, backend, model.call event + blobs

Overhead = median(backend or client) - median(bare).

    python bench/bench_agent_overhead.py [--n 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from skillvc.core.config import ModelConfig
from skillvc.core.store import open_store
from skillvc.models.agents.backend import AgentBackend
from skillvc.models.calls import ModelClient

TARGET_MS = 50.0
SKILL = "---\nname: returns\ndescription: Acme returns.\n---\n# Returns\n\n" + "Rule.\n" * 200
EVENTS = [
    {"type": "system", "subtype": "init", "session_id": "s", "model": "m", "tools": ["Skill"]},
    {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "tool_use", "id": "t1", "name": "Skill", "input": {"skill": "returns"}}
            ]
        },
    },
    {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    },
    {"type": "assistant", "message": {"content": [{"type": "text", "text": "<answer>x</answer>"}]}},
    {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "<answer>x</answer>",
        "total_cost_usd": 0.001,
        "usage": {"input_tokens": 10, "output_tokens": 5},
        "num_turns": 2,
    },
]
AGENT = (
    '#!/bin/sh\nif [ "$1" = "--version" ]; then echo "0.0.1 (bench)"; exit 0; fi\n'
    "cat >/dev/null\n" + "".join(f"echo '{json.dumps(e)}'\n" for e in EVENTS)
)


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "claude"
        exe.write_text(AGENT)
        exe.chmod(0o755)
        config = ModelConfig(
            model="command:claude-code", harness="claude-code", executable=str(exe)
        )
        backend = AgentBackend(config)
        store = open_store(Path(tmp) / "events.db")
        client = ModelClient(store, {"target": backend}, {"target": config})
        argv = [str(exe), "-p", "--output-format", "stream-json", "--verbose"]

        def bare() -> None:
            subprocess.run(argv, input="task", capture_output=True, text=True, check=True)

        counter = iter(range(10**9))

        def via_backend() -> None:
            request = client.request(
                "target",
                [{"role": "system", "content": SKILL}, {"role": "user", "content": "task"}],
            )
            backend.complete(request)

        def via_client() -> None:
            # A new task each time, so every call misses the cache and reaches the agent.
            task = f"task {next(counter)}"
            client.call(
                "target", [{"role": "system", "content": SKILL}, {"role": "user", "content": task}]
            )

        timed(bare, 10)  # warm up: page cache, first fork
        backend.version()
        results = {
            "bare": timed(bare, n),
            "backend": timed(via_backend, n),
            "client": timed(via_client, n),
        }
    floor = statistics.median(results["bare"])
    print(f"per rollout, median of {n} (p90), sequential:")
    for name, values in results.items():
        med = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        extra = "" if name == "bare" else f"   overhead {med - floor:6.2f} ms"
        print(f"  {name:8s} {med:7.2f} ms ({p90:7.2f}){extra}")
    worst = statistics.median(results["client"]) - floor
    verdict = "meets" if worst < TARGET_MS else "MISSES"
    print(
        f"overhead skillvc adds: {worst:.2f} ms per rollout; {verdict} the {TARGET_MS:g} ms target"
    )


if __name__ == "__main__":
    main()

"""Scaling out: command-harness rollouts on a local Ray cluster, and the batch path.

1. Ray: a command-harness rollout that burns ~1 s of CPU (a stand-in for an agent CLI run),
   80 rollouts per wave, on a local Ray cluster (127.0.0.1) with 1, 2 and 4 worker processes;
   prints the wall time per wave and the scaling efficiency (speed-up / workers). The speed-up
   cannot exceed the machine's cores: on a 2-core machine 4 workers share 2 cores.
2. Batch: the demo trained with [target] mode = "batch" against the loopback fake of the
   OpenAI Batch API (tests/batch_fake.py), SIGKILLed while its first batch is pending and
   resumed; prints model calls, batches, resubmissions (must be 0) and the cost next to the
   same run's cost at the synchronous price.

    python bench/bench_scaling.py [--rollouts 80] [--burn-s 1.0] [--workers 1,2,4]
                                  [--skip-ray] [--skip-batch]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BURN = (
    "import sys, time\n"
    "task = sys.stdin.read()\n"
    "end = time.process_time() + float(sys.argv[1])\n"
    "n = 0\n"
    "while time.process_time() < end:\n"
    "    n += 1\n"
    "print('answer to ' + task[:20])\n"
)


def ray_waves(rollouts: int, burn_s: float, workers: list[int]) -> None:
    import ray

    from skillvc.core.config import ModelConfig
    from skillvc.models.backends.base import CallRequest
    from skillvc.models.calls import model_params
    from skillvc.models.executors import Call, run_call
    from skillvc.models.executors.ray_cluster import RayExecutor

    config = ModelConfig(
        model="command:burn",
        harness="command",
        command=[sys.executable, "-c", BURN, str(burn_s)],
        max_retries=0,
    )
    skill = "---\nname: burn\ndescription: Burns CPU.\n---\n# Burn\n"
    calls = [
        Call(
            config,
            CallRequest(
                role="target",
                model=config.model,
                messages=(
                    {"role": "system", "content": skill},
                    {"role": "user", "content": f"t{i}"},
                ),
                params=model_params(config),
            ),
        )
        for i in range(rollouts)
    ]
    print(f"== Ray: {rollouts} command-harness rollouts of ~{burn_s:g} s CPU per wave ==")
    print(f"  machine cores: {os.cpu_count()}")
    base = None
    for n in workers:
        ray.init(
            address="local",
            num_cpus=n,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
            configure_logging=False,
        )
        try:
            executor = RayExecutor()
            executor.map(run_call, calls[:n])  # warm the workers up (process start, imports)
            start = time.perf_counter()
            results = executor.map(run_call, calls)
            wall = time.perf_counter() - start
        finally:
            ray.shutdown()
        failed = sum(1 for r in results if not hasattr(r, "text"))
        base = base or wall * n  # the 1-worker time (first entry is 1 worker)
        speedup = base / wall
        print(
            f"  {n} worker(s): {wall:7.1f} s per wave   speed-up {speedup:4.2f}x   "
            f"efficiency {speedup / n:5.0%}   failed {failed}"
        )


def batch_kill_resume() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from batch_fake import BatchFake

    from skillvc.core.store import open_store
    from skillvc.training.demo import create_demo_repo
    from skillvc.training.loop import train
    from skillvc.workspace.workspace import open_workspace

    fake = BatchFake().start()
    os.environ["OPENAI_API_KEY"] = "sk-loopback-bench"
    section = f'model = "openai:gpt-4o-mini"\nbase_url = "{fake.url}/v1"\n'
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sync_repo, repo = Path(tmp) / "sync", Path(tmp) / "batch"
            for path, mode in ((sync_repo, "sync"), (repo, "batch")):
                create_demo_repo(path)
                toml = path / "skillvc.toml"
                toml.write_text(
                    toml.read_text().replace(
                        '[target]\nmodel = "sim:support"\n',
                        f'[target]\n{section}mode = "{mode}"\nbatch_poll_s = 0.05\n',
                    )
                )
            sync = train(open_workspace(sync_repo))

            fake.hold = True
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            proc = subprocess.Popen(
                [sys.executable, "-m", "skillvc", "train", "-q"],
                cwd=repo,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            while fake.creates["openai"] == 0:
                time.sleep(0.05)
            time.sleep(0.5)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            fake.hold = False
            start = time.perf_counter()
            summary = train(open_workspace(repo))
            wall = time.perf_counter() - start
            with open_store(repo / ".skillvc/events.db") as store:
                ids = [e.payload["batch_id"] for e in store.events(types=["batch.submitted"])]
                calls = store.query(
                    "SELECT COUNT(*) AS n FROM events WHERE type = 'model.call' "
                    "AND json_extract(payload, '$.role') = 'target'"
                )[0]["n"]
            skill = "skills/acme-returns/SKILL.md"
            same = (repo / skill).read_bytes() == (sync_repo / skill).read_bytes()
    finally:
        fake.stop()
    print("== Batch: the demo through the OpenAI Batch fake, killed while a batch is pending ==")
    print(f"  target calls              {calls:>8}")
    print(f"  batches (waves)           {len(ids):>8}")
    print(f"  batch creates             {fake.creates['openai']:>8}")
    print(f"  resubmissions after kill  {fake.creates['openai'] - len(set(ids)):>8}")
    print(f"  cost, batch mode          {summary.cost_usd:>10.6f} USD")
    print(f"  cost, sync mode           {sync.cost_usd:>10.6f} USD")
    print(f"  resumed run wall time     {wall:>8.1f} s (poll every 0.05 s; real batches: hours)")
    print(f"  same skill as sync mode   {str(same):>8}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=80)
    parser.add_argument("--burn-s", type=float, default=1.0)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--skip-ray", action="store_true")
    parser.add_argument("--skip-batch", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    if not args.skip_batch:
        batch_kill_resume()
    if not args.skip_ray:
        ray_waves(args.rollouts, args.burn_s, [int(n) for n in args.workers.split(",")])


if __name__ == "__main__":
    main()

"""Train skills for a real local model: the same model as target and optimizer, three task sets.

Not part of CI (it needs a model server and takes tens of minutes on a laptop CPU). Three task
sets where a skill matters, generated here with a fixed seed (24 train, 20 val, 20 test items):

- ``arithmetic``: two-step word problems (multiply, then add or subtract); numeric scorer.
- ``units``: a lab thermometer in Fahrenheit, reported in the lab's house format (Celsius,
  rounded to a whole number), which no item states; numeric scorer.
- ``routing``: support tickets routed by a written house policy with exceptions (a chargeback
  or a lawyer goes to escalate, a login blocked by an unpaid invoice to billing, ...); exact.

Each starts from a weak seed skill (the answer format only). For each set a git repository is
made under ``--out``, ``skillvc train`` runs against the server, and the bench prints val and
test before -> after, accepted edits, calls, tokens and wall time, and writes the trained skill
(``<out>/<task>/skills/<task>/SKILL.md``, committed; also copied to ``<out>/<task>.trained.md``).

    # a server already running (llama.cpp's llama-server, Ollama, vLLM, ...):
    python bench/bench_real_model.py --base-url http://127.0.0.1:8080/v1 --model qwen
    # or started and stopped by the bench:
    python bench/bench_real_model.py --gguf qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
        --llama-server /path/to/llama-server
    # (--llama-server may be a command line, e.g. "python bench/xllamacpp_server.py")
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TASKS = ("arithmetic", "units", "routing")
SPLITS = (("train", 24), ("val", 20), ("test", 20))
# The weak seed: no working, the answer only. The answer's format (what the scorer reads) is
# a protected region, as a user would keep an output contract: a small optimizer that
# rewrites the first line can then not drop the tags with it (in the first measurements its
# replacements of one line holding both did, and every answer then scored 0).
ANSWER = (
    "Reply with only the final answer.\n"
    "<!-- skillvc:protected answer-format -->\n"
    "Put the final answer inside <answer></answer> tags.\n"
    "<!-- /skillvc:protected answer-format -->"
)


@dataclass(frozen=True)
class TaskSet:
    name: str
    seed_skill: str
    scorer: str
    max_tokens: int  # the target's answer cap (room for its working)
    make: Callable[[random.Random, int], dict[str, Any]]


# -- generated task sets -------------------------------------------------------------------------

NAMES = ("Mia", "Omar", "Lena", "Ravi", "Sofia", "Jon", "Aiko", "Ben", "Chloe", "Dev")


def arithmetic_item(rng: random.Random, i: int) -> dict[str, Any]:
    name = rng.choice(NAMES)
    a, b = rng.randint(3, 9), rng.randint(12, 29)
    kind = i % 4
    if kind == 0:
        c = rng.randint(5, a * b - 5)
        text = (
            f"{name} has {a} boxes with {b} pencils in each box and gives away {c} pencils. "
            "How many pencils are left?"
        )
        answer = a * b - c
    elif kind == 1:
        c = rng.randint(7, 60)
        text = (
            f"{name} reads {b} pages a day for {a} days and then {c} more pages on the last "
            "evening. How many pages were read in total?"
        )
        answer = a * b + c
    elif kind == 2:
        bill = (a * b // 50 + 1) * 50
        text = (
            f"{name} buys {a} tickets at {b} dollars each and pays with {bill} dollars. How "
            "many dollars of change are returned?"
        )
        answer = bill - a * b
    else:
        c = rng.randint(2, 6)
        text = (
            f"A shelf holds {a} rows of {b} books. {name} adds {c} more rows of {b} books. "
            "How many books are on the shelf now?"
        )
        answer = (a + c) * b
    return {"id": f"arith-{i:03d}", "input": text, "target": str(answer)}


def units_item(rng: random.Random, i: int) -> dict[str, Any]:
    f = rng.randint(-4, 212)
    while (f - 32) % 9 == 0 and i % 3:  # mostly readings whose conversion needs rounding
        f = rng.randint(-4, 212)
    room = rng.choice(("cold room", "incubator", "bench", "freezer", "oven", "greenhouse"))
    text = (
        f"The {room} thermometer shows {f} degrees Fahrenheit. Report this reading in the lab's "
        "house format."
    )
    return {"id": f"units-{i:03d}", "input": text, "target": str(round((f - 32) * 5 / 9))}


# (ticket text, the policy's team); the exceptions are what a skill must teach.
TICKETS = (
    ("I was charged twice for my subscription this month, please refund one.", "billing"),
    ("My invoice shows the wrong VAT number.", "billing"),
    ("The app crashes every time I open the settings page.", "technical"),
    ("I get error 502 when I upload a file.", "technical"),
    ("My package has not arrived and tracking has not moved for a week.", "shipping"),
    ("The parcel was delivered to the wrong address.", "shipping"),
    ("I forgot my password and the reset email never comes.", "account"),
    ("Please change the email address on my profile.", "account"),
    # exceptions of the policy
    ("My bank opened a chargeback for last month's payment, what happens now?", "escalate"),
    ("My lawyer asked me to request all data you hold on me.", "escalate"),
    ("I cannot log in: it says my account is suspended because an invoice is unpaid.", "billing"),
    ("The app crashed and deleted all my saved projects.", "escalate"),
    ("The parcel arrived opened and the laptop inside is missing.", "escalate"),
    ("I want a refund because the delivery came three weeks late.", "shipping"),
)
TEAMS = "billing, technical, shipping, account or escalate"


def routing_item(rng: random.Random, i: int) -> dict[str, Any]:
    text, team = TICKETS[i % len(TICKETS)]
    customer = rng.choice(NAMES)
    order = rng.randint(10000, 99999)
    return {
        "id": f"ticket-{i:03d}",
        "input": f"Ticket from {customer} (order {order}): {text}\nWhich team handles it?",
        "target": team,
    }


TASK_SETS = {
    "arithmetic": TaskSet("arithmetic", ANSWER, "numeric", 200, arithmetic_item),
    "units": TaskSet("units", ANSWER, "numeric", 200, units_item),
    "routing": TaskSet(
        "routing",
        f"Route the support ticket to one team: {TEAMS}.\n{ANSWER}",
        "exact",
        192,
        routing_item,
    ),
}


def write_tasks(task: TaskSet, root: Path, seed: int, sizes: tuple[int, ...]) -> None:
    """The task files: ``sizes`` items of train, val and test (the first of each split of
    the full 24/20/20 set, so smaller sets are subsets of the full one)."""
    rng = random.Random(f"{seed}:{task.name}")
    total = sum(n for _, n in SPLITS)
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(items) < total:  # one input in two splits would be refused as an overlap
        item = task.make(rng, len(items))
        if item["input"] not in seen:
            seen.add(item["input"])
            items.append(item)
    rng.shuffle(items)
    (root / "evals").mkdir(parents=True, exist_ok=True)
    start = 0
    for (split, full), n in zip(SPLITS, sizes, strict=True):
        rows = items[start : start + min(n, full)]
        start += full
        text = "".join(json.dumps(r) + "\n" for r in rows)
        (root / "evals" / f"{split}.jsonl").write_text(text, encoding="utf-8")


# -- one training run ---------------------------------------------------------------------------


def make_repo(task: TaskSet, root: Path, base_url: str, model: str, args: Any) -> None:
    if root.exists():
        shutil.rmtree(root)
    (root / "skills" / task.name).mkdir(parents=True)
    (root / "skills" / task.name / "SKILL.md").write_text(task.seed_skill + "\n", "utf-8")
    sizes = tuple(int(n) for n in args.sizes.split(","))
    write_tasks(task, root, args.seed, sizes)
    server = f'model = "openai:{model}"\nbase_url = "{base_url}"'
    (root / "skillvc.toml").write_text(
        f'[skill]\npath = "skills/{task.name}/SKILL.md"\n\n'
        '[tasks]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\n'
        f'test = "evals/test.jsonl"\nscorer = "{task.scorer}"\n\n'
        f"[target]\n{server}\ntemperature = 0.0\nmax_tokens = {task.max_tokens}\n\n"
        f"[optimizer]\n{server}\ntemperature = {args.optimizer_temperature}\n\n"
        f"[train]\nepochs = {args.epochs}\nbatch_size = {args.batch_size}\n"
        f"minibatch_size = {args.minibatch_size}\nlearning_rate = {args.lr}\n"
        f"min_learning_rate = 1\nworkers = 4\nseed = {args.seed}\n"
        "slow_update = false\nmeta_skill = false\n",
        encoding="utf-8",
    )
    (root / ".gitignore").write_text(".skillvc/\n", encoding="utf-8")
    git = ["git", "-C", str(root)]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    subprocess.run([*git[:3], *ident, "commit", "-qm", "seed skill"], check=True)


def train_one(task: TaskSet, root: Path, args: Any) -> dict[str, Any]:
    from skillvc.core.errors import SkillvcError
    from skillvc.training.loop import train
    from skillvc.workspace.workspace import open_workspace

    started = time.monotonic()
    error = None
    summary = None
    try:
        summary = train(open_workspace(root), new=True, progress=_progress(task.name))
    except SkillvcError as exc:
        error = exc.message
    wall = time.monotonic() - started
    skill = (root / "skills" / task.name / "SKILL.md").read_text(encoding="utf-8")
    out: dict[str, Any] = {"task": task.name, "wall_s": round(wall, 1), "skill": skill}
    if summary is not None:
        out |= {
            "val": [summary.baseline_val, summary.best_val],
            "test": [summary.baseline_test, summary.test],
            "accepted": summary.accepted,
            "rejected": summary.rejected,
            "steps": summary.steps,
            "calls": summary.fresh_calls,
            "tokens": summary.tokens,
            "reflections": summary.reflections,
            "reflections_usable": summary.reflections_usable,
            "optimizer_unusable": summary.optimizer_unusable,
        }
    if error:
        out["error"] = error
    return out


def _progress(name: str) -> Callable[[str], None]:
    def note(line: str) -> None:
        print(f"[{name} {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    return note


# -- the server ---------------------------------------------------------------------------------


def start_server(args: Any) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [
        *shlex.split(args.llama_server),
        *("-m", args.gguf, "-c", str(args.ctx), "-np", str(args.slots)),
        *("-t", str(args.threads), "--host", "127.0.0.1", "--port", str(port)),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    log = open(Path(args.out) / "server.log", "ab")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}; see {log.name}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as r:  # noqa: S310
                if r.status == 200:
                    return proc, f"{url}/v1"
        except OSError:
            pass
        time.sleep(2)
    stop_server(proc)
    raise SystemExit("the server did not become healthy within 10 minutes")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def model_name(base_url: str) -> str:
    with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=30) as r:  # noqa: S310
        return str(json.load(r)["data"][0]["id"])


# -- main ---------------------------------------------------------------------------------------


def fmt(pair: list[float | None] | None) -> str:
    if not pair:
        return "n/a"
    return " -> ".join("n/a" if v is None else f"{v:.2f}" for v in pair)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="a running OpenAI-compatible server, e.g. .../v1")
    parser.add_argument("--model", help="the model name to send [the server's first model]")
    parser.add_argument("--gguf", help="a .gguf model for --llama-server to serve")
    parser.add_argument("--llama-server", help="llama-server's path (or a command line)")
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--epochs", type=int, default=2)
    # The gate filters what the optimizer proposes: sampled proposals differ from minibatch to
    # minibatch (at 0 the 1.5B model proposed the same edit for every minibatch).
    parser.add_argument("--optimizer-temperature", type=float, default=0.7)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--minibatch-size", type=int, default=4)
    parser.add_argument("--lr", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--sizes", default="24,20,20", help="train,val,test items (at most 24,20,20) [24,20,20]"
    )
    parser.add_argument("--out", default="bench-real-model")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)
    os.environ.setdefault("OPENAI_API_KEY", "local")  # local servers accept any key
    os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    proc = None
    if args.base_url is None:
        if not (args.gguf and args.llama_server):
            parser.error("give --base-url, or --gguf and --llama-server")
        proc, args.base_url = start_server(args)
    try:
        model = args.model or model_name(args.base_url)
        results = []
        for name in args.tasks.split(","):
            task = TASK_SETS[name]
            root = out / name
            make_repo(task, root, args.base_url, model, args)
            result = train_one(task, root, args)
            results.append(result)
            (out / f"{name}.trained.md").write_text(result["skill"], encoding="utf-8")
            (out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
            print(
                f"{name:<10} val {fmt(result.get('val'))} | test {fmt(result.get('test'))} | "
                f"accepted {result.get('accepted', 0)} | calls {result.get('calls', 0)} | "
                f"tokens {result.get('tokens', 0):,} | {result['wall_s']:.0f} s"
                + (f" | ERROR {result['error']}" if "error" in result else ""),
                flush=True,
            )
        for r in results:
            print(f"\n== {r['task']}: trained skill ==\n{r['skill']}")
    finally:
        if proc is not None:
            stop_server(proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())

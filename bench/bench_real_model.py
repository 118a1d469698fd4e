"""Train skills for a real local model: the same model as target and optimizer, five task sets.

Not part of CI (it needs a model server and takes tens of minutes on a laptop CPU). Five task
sets where a skill matters, generated here with a fixed seed (24 train, 20 val, 20 test items):

- ``arithmetic``: two-step word problems (multiply, then add or subtract); numeric scorer.
- ``units``: a lab thermometer in Fahrenheit, reported in the lab's house format (Celsius,
  rounded to a whole number), which no item states; numeric scorer.
- ``routing``: support tickets routed by a written house policy with exceptions (a chargeback
  or a lawyer goes to escalate, a login blocked by an unpaid invoice to billing, ...); exact.
- ``names`` and ``orders``: house conventions the model does not follow by default, learnable
  only from the expected answers (the seed does not state them); exact scorer. ``names``: the
  person a message names, written "SURNAME, Given" ("KOWALSKI, Anna" for Anna Kowalski);
  ``orders``: the order a message is about, written "ORD-" and six digits ("ORD-004211").

Each starts from a weak seed skill (the answer format only). For each set and run a git
repository is made under ``--out`` (``<out>/<task>/skillvc-<run>``), ``skillvc train`` runs
against the server, and the bench prints val and test before -> after, accepted edits, calls,
tokens and wall time, and writes the trained skill (committed in that repository; also copied
to ``<out>/<task>.trained.md``).

``--side-by-side`` also runs SkillOpt 0.2.0 (a measuring aid, never a dependency of skillvc;
see ``skillopt_runner.py``) on the same server, split and schedule (epochs, batch, minibatch,
learning rate; no slow update or meta skill; the target at temperature 0, the optimizer at
``--optimizer-temperature``; as many workers as the server has slots), in
``<out>/<task>/skillopt-<run>``. Both sides' calls go through one counting proxy each, so calls
and tokens are the server's own counts for both. SkillOpt's val and test are scored again with
the set's skillvc scorer (SkillOpt's exact match would fail "88 C" for 88 where skillvc's
numeric scorer passes it); its own figures are kept beside them. Every finished run appends one
JSON line to ``<out>/results.jsonl`` at once; ``--skip-done`` skips the runs already there.

    python bench/bench_real_model.py --base-url http://127.0.0.1:8080/v1 --side-by-side \\
        --skillopt-python /path/to/venv-with-skillopt-0.2.0/bin/python \\
        --skillopt-src /path/to/SkillOpt-checkout --sets names,orders --runs 2

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

sys.path.insert(0, str(Path(__file__).resolve().parent))

TASKS = ("arithmetic", "units", "routing", "names", "orders")
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


# House conventions (issue 46): every expected answer follows one the model does not use by
# default, and the seed skill does not state it; the optimizer sees it only in the expected
# answers of the failures. Two people in each message, so an answer is a choice too.
GIVEN = ("Anna", "Omar", "Lena", "Ravi", "Sofia", "Jonas", "Aiko", "Bruno", "Chloe", "Dev")
SURNAMES = (
    "Kowalski", "Haddad", "Berger", "Iyer", "Romano", "Lindqvist", "Tanaka", "Costa",
    "Dubois", "Mehta", "Novak", "Okafor",
)  # fmt: skip
ACTS = (
    ("The refund for order {order} was approved by {a} and sent to the customer by {b}.",
     "Who approved the refund?"),
    ("{a} signed the delivery note for order {order}; {b} unloaded the truck.",
     "Who signed the delivery note?"),
    ("The complaint about order {order} was answered by {b} after {a} had escalated it.",
     "Who escalated the complaint?"),
    ("{b} packed order {order} and {a} checked it before it left the warehouse.",
     "Who checked the order?"),
)  # fmt: skip


def names_item(rng: random.Random, i: int) -> dict[str, Any]:
    (g1, g2), (s1, s2) = rng.sample(GIVEN, 2), rng.sample(SURNAMES, 2)
    text, question = ACTS[i % len(ACTS)]
    line = text.format(order=rng.randint(10000, 99999), a=f"{g1} {s1}", b=f"{g2} {s2}")
    return {"id": f"names-{i:03d}", "input": f"{line}\n{question}", "target": f"{s1.upper()}, {g1}"}


GOODS = ("mugs", "lamps", "chairs", "cables", "books", "plates", "jackets", "kettles")
REASONS = (
    "the lids were cracked", "they arrived late", "the colour was wrong",
    "two were missing", "the box was wet", "the customer changed their mind",
)  # fmt: skip


def orders_item(rng: random.Random, i: int) -> dict[str, Any]:
    order = rng.choice((rng.randint(10, 99), rng.randint(100, 999), rng.randint(1000, 99999)))
    other = rng.randint(100, 99999)
    text = (
        f"{rng.choice(NAMES)} returned {rng.randint(2, 9)} {rng.choice(GOODS)} from order "
        f"{order} because {rng.choice(REASONS)}; the replacement ships with order {other}. "
        "Which order is the return for?"
    )
    return {"id": f"orders-{i:03d}", "input": text, "target": f"ORD-{order:06d}"}


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
    "names": TaskSet(
        "names",
        f"Answer with the name of the person the question asks about.\n{ANSWER}",
        "exact",
        192,
        names_item,
    ),
    "orders": TaskSet(
        "orders",
        f"Answer with the order the question asks about.\n{ANSWER}",
        "exact",
        192,
        orders_item,
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


def make_repo(
    task: TaskSet, root: Path, base_url: str, model: str, args: Any, seed: int | None = None
) -> None:
    """The task's git repository: seed skill, tasks (split by ``args.seed``) and a config whose
    [train] seed is ``seed`` (a run's own; ``args.seed`` by default)."""
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
        f"[target]\n{server}\ntemperature = 0.0\nmax_tokens = {task.max_tokens}\n"
        f"timeout_s = {args.timeout_s}\n\n"
        f"[optimizer]\n{server}\ntemperature = {args.optimizer_temperature}\n"
        f"timeout_s = {args.timeout_s}\n\n"
        f"[train]\nepochs = {args.epochs}\nbatch_size = {args.batch_size}\n"
        f"minibatch_size = {args.minibatch_size}\nlearning_rate = {args.lr}\n"
        f"min_learning_rate = 1\nworkers = 4\nseed = {args.seed if seed is None else seed}\n"
        "slow_update = false\nmeta_skill = false\n"
        + ("label_examples = true\n" if getattr(args, "label_examples", False) else ""),
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


# -- SkillOpt beside it (--side-by-side) ------------------------------------------------------


def skillopt_one(
    task: TaskSet, root: Path, proxy_url: str, args: Any, seed: int, slots: int
) -> dict[str, Any]:
    """SkillOpt 0.2.0's own trainer and SearchQA environment (one target call per item, the
    answer inside <answer></answer>) on the task's split and seed skill, with the bench's
    schedule, its models served through ``proxy_url`` (``target`` and ``optimizer``)."""
    from skillopt_runner import run_skillopt, skillopt_config, write_split

    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    write_tasks(task, root, args.seed, tuple(int(n) for n in args.sizes.split(",")))
    seed_skill = root / "SKILL.md"
    seed_skill.write_text(task.seed_skill + "\n", encoding="utf-8")
    write_split(root / "evals", root / "split")
    n_train = len((root / "evals" / "train.jsonl").read_text().splitlines())
    config = root / "skillopt.yaml"
    config.write_text(
        skillopt_config(
            {
                "train": {"num_epochs": args.epochs},
                "gradient": {"minibatch_size": args.minibatch_size, "analyst_workers": slots},
                "optimizer": {
                    "learning_rate": args.lr,
                    "min_learning_rate": 1,
                    "use_slow_update": False,
                    "use_meta_skill": False,
                },
                "env": {
                    "max_completion_tokens": task.max_tokens,
                    "workers": slots,
                    "exec_timeout": args.timeout_s,
                },
            },
            url=proxy_url, train=n_train, batch=args.batch_size, seed=seed, skill=seed_skill,
            split=root / "split", out=root / "out",
        ),
        encoding="utf-8",
    )  # fmt: skip
    os.environ["SKILLOPT_CLIENT_TIMEOUT"] = str(args.timeout_s)
    out: dict[str, Any] = {}
    started = time.monotonic()
    try:
        run_skillopt(
            args.skillopt_python,
            Path(args.skillopt_src),
            config,
            cwd=root,
            timeout=6 * 3600,
            log=root / "skillopt.log",
        )
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        out["error"] = str(exc)[-1500:]
    out["wall_s"] = round(time.monotonic() - started, 1)
    summary_path = root / "out" / "summary.json"
    if not summary_path.exists():
        return out
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    best = root / "out" / "best_skill.md"
    out["skill"] = best.read_text(encoding="utf-8") if best.exists() else task.seed_skill
    own = {
        k: summary.get(k)
        for k in (
            "baseline_selection_hard", "best_selection_hard", "baseline_test_hard", "test_hard",
            "total_accepts", "total_rejects", "total_skips", "total_steps",
        )
    }  # fmt: skip
    scored = skillopt_rescored(task, root / "out", task.seed_skill + "\n", out["skill"])
    out |= {
        "val": [scored.get("val_before"), scored.get("val_after")],
        "test": [scored.get("test_before"), scored.get("test_after")],
        "accepted": own["total_accepts"],
        "rejected": own["total_rejects"],
        "steps": own["total_steps"],
        "skillopt_own": own,  # its exact match (SQuAD-normalised), as it gated with
    }
    return out


def skillopt_rescored(task: TaskSet, out_root: Path, seed_skill: str, best: str) -> dict[str, Any]:
    """SkillOpt's val and test answers (its rollouts' ``results.jsonl``) scored by the set's
    skillvc scorer: the seed's val and test, the best skill's val (the selection eval whose
    candidate was the best skill) and test."""
    val_after = None
    if best.strip() == seed_skill.strip():
        val_after = out_root / "selection_eval_baseline"
    else:
        for step in sorted((out_root / "steps").glob("step_*")):
            candidate = step / "candidate_skill.md"
            if (
                candidate.exists()
                and candidate.read_text(encoding="utf-8").strip() == best.strip()
                and (step / "selection_eval" / "results.jsonl").exists()
            ):
                val_after = step / "selection_eval"
        if val_after is None and (out_root / "final_selection_eval").exists():
            val_after = out_root / "final_selection_eval"
    dirs = {
        "val_before": out_root / "selection_eval_baseline",
        "val_after": val_after,
        "test_before": out_root / "test_eval_baseline",
        "test_after": out_root / "test_eval",
    }
    return {k: _scored(task, d / "results.jsonl") for k, d in dirs.items() if d is not None}


def _scored(task: TaskSet, results: Path) -> float | None:
    from skillvc.tasks.scorers import get_scorer
    from skillvc.tasks.taskset import TaskItem

    if not results.exists():
        return None
    scorer = get_scorer(task.scorer)
    rows = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    hard = [
        scorer.score(
            TaskItem(str(r["id"]), "", tuple(r.get("gold_answers") or r.get("gold_answer") or ())),
            r.get("response") or "",
        ).hard
        for r in rows
    ]
    return sum(hard) / len(hard) if hard else None


def server_slots(base_url: str) -> int:
    """A llama.cpp server's slots (``GET /props``), 1 for a server that does not say."""
    try:
        with urllib.request.urlopen(
            f"{base_url.rstrip('/').removesuffix('/v1')}/props", timeout=30
        ) as r:  # noqa: S310
            return max(1, int(json.load(r).get("total_slots") or 1))
    except (OSError, ValueError):
        return 1


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
    from skillopt_runner import add_skillopt_arguments

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="a running OpenAI-compatible server, e.g. .../v1")
    parser.add_argument("--model", help="the model name to send [the server's first model]")
    parser.add_argument("--gguf", help="a .gguf model for --llama-server to serve")
    parser.add_argument("--llama-server", help="llama-server's path (or a command line)")
    parser.add_argument("--ctx", type=int, default=4096)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tasks", "--sets", dest="tasks", default=",".join(TASKS))
    parser.add_argument("--epochs", type=int, default=2)
    # The gate filters what the optimizer proposes: sampled proposals differ from minibatch to
    # minibatch (at 0 the 1.5B model proposed the same edit for every minibatch).
    parser.add_argument("--optimizer-temperature", type=float, default=0.7)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--minibatch-size", type=int, default=4)
    parser.add_argument("--lr", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1, help="the split's seed and run 1's")
    parser.add_argument(
        "--sizes", default="24,20,20", help="train,val,test items (at most 24,20,20) [24,20,20]"
    )
    parser.add_argument("--out", default="bench-real-model")
    parser.add_argument(
        "--runs", type=int, default=1, help="runs per set and side (run k trains with seed+k-1)"
    )
    parser.add_argument(
        "--side-by-side", action="store_true", help="also run SkillOpt 0.2.0 (see the docstring)"
    )
    parser.add_argument(
        "--sides", default="", help="skillvc, skillopt or both [both with --side-by-side]"
    )
    add_skillopt_arguments(parser)
    # A CPU shared with other work answers a reflection in more than skillvc's local default
    # (900 s); both sides wait this long for one call and resend none.
    parser.add_argument("--timeout-s", type=int, default=7200, help="a call's timeout [7200]")
    parser.add_argument(
        "--report",
        nargs="+",
        metavar="RESULTS_JSONL",
        help="print the table of finished runs in these results.jsonl files, and stop",
    )
    parser.add_argument(
        "--label-examples",
        action="store_true",
        help="skillvc with [train] label_examples = true (off by default; a variant)",
    )
    parser.add_argument(
        "--skip-done", action="store_true", help="skip runs already in <out>/results.jsonl"
    )
    args = parser.parse_args()
    if args.report:
        print(
            report(
                [json.loads(x) for f in args.report for x in Path(f).read_text().split("\n") if x]
            )
        )
        return 0
    sides = [x for x in args.sides.split(",") if x] or (
        ["skillvc", "skillopt"] if args.side_by_side else ["skillvc"]
    )
    if "skillopt" in sides and not (Path(args.skillopt_src) / "skillopt" / "prompts").is_dir():
        parser.error("SkillOpt needs --skillopt-src: a checkout of microsoft/SkillOpt")
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
    log = out / "results.jsonl"
    done = _done(log) if args.skip_done else set()
    try:
        model = args.model or model_name(args.base_url)
        slots = server_slots(args.base_url)
        results = []
        for run in range(1, args.runs + 1):
            for name in args.tasks.split(","):
                task = TASK_SETS[name]
                for side in sides:
                    if (name, side, run) in done:
                        continue
                    result = run_one(task, side, run, out, model, slots, args)
                    results.append(result)
                    with log.open("a", encoding="utf-8") as f:  # at once: partial runs survive
                        f.write(json.dumps(result) + "\n")
                    if result.get("skill"):
                        (out / f"{name}.{side}-{run}.trained.md").write_text(
                            result["skill"], encoding="utf-8"
                        )
                    print(row(result), flush=True)
        if len(sides) > 1:
            print("\n== side by side (this invocation) ==")
            for r in sorted(results, key=lambda r: (r["task"], r["side"], r["run"])):
                print(row(r))
        for r in results:
            print(f"\n== {r['task']} ({r['side']}, run {r['run']}): trained skill ==")
            print(r.get("skill", "(none)"))
    finally:
        if proc is not None:
            stop_server(proc)
    return 0


OPTIMIZER_CAP = 1024  # skillvc's own cap on a local optimizer's answer (docs/local-model.md)


def run_one(
    task: TaskSet, side: str, run: int, out: Path, model: str, slots: int, args: Any
) -> dict[str, Any]:
    """One run of one side on one set, its calls counted by a proxy of its own."""
    from skillopt_runner import CountingProxy

    seed = args.seed + run - 1
    root = out / task.name / f"{side}-{run}"
    roles = {"target": 0.0, "optimizer": args.optimizer_temperature}
    # SkillOpt asks for up to 16,384 tokens an optimizer answer; skillvc caps its own at a
    # quarter of a local server's context, at most 1,024. The same cap on both sides: a 1.5B
    # optimizer looping in a JSON string held a slot for an hour (0.3 tokens/s on a shared CPU).
    caps = {"optimizer": OPTIMIZER_CAP}
    proxy = CountingProxy(
        args.base_url, model, *((roles, caps) if side == "skillopt" else ({}, {}))
    ).start()
    started = time.monotonic()
    try:
        if side == "skillopt":
            result = skillopt_one(task, root, proxy.url, args, seed, slots)
        else:
            make_repo(task, root, proxy.url, model, args, seed)
            result = train_one(task, root, args)
    finally:
        proxy.stop()
    counted = proxy.figures()
    if side == "skillvc":  # skillvc's own counts, beside the proxy's
        result["skillvc_own"] = {"calls": result.get("calls"), "tokens": result.get("tokens")}
    return {
        **result,
        "task": task.name,
        "side": side,
        "run": run,
        "seed": seed,
        "sizes": args.sizes,
        "dir": str(root),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "skillvc_commit": skillvc_commit(),
        **({"variant": "label_examples"} if side == "skillvc" and args.label_examples else {}),
        "wall_s": result.get("wall_s", round(time.monotonic() - started, 1)),
        **counted,
    }


def skillvc_commit() -> str:
    """The commit of the skillvc this bench imports, "+dirty" when its package or templates
    differ from it (other work in the same tree would then be in the figures)."""
    import skillvc

    top = Path(skillvc.__file__).resolve().parent.parent
    git = ["git", "-C", str(top)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "skillvc", "templates"],
        capture_output=True,
        text=True,
    )
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _done(log: Path) -> set[tuple[str, str, int]]:
    if not log.exists():
        return set()
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
    return {(r["task"], r["side"], r["run"]) for r in rows if "error" not in r}


def report(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of finished runs, set by set, and each side's mean test gain (items)."""

    def items(pair: list[float | None] | None, size: int) -> str:
        if not pair:
            return "n/a"
        return " -> ".join("n/a" if v is None else f"{round(v * size)}/{size}" for v in pair)

    lines = [
        "| set | side | run | val | test | steps kept | calls | tokens | wall |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    gains: dict[tuple[str, str], list[int]] = {}
    for r in sorted(rows, key=lambda r: (TASKS.index(r["task"]), r["side"], r["run"])):
        _, n_val, n_test = (int(x) for x in r.get("sizes", "24,20,20").split(","))
        err = " (error)" if "error" in r else ""
        lines.append(
            f"| {r['task']} | {r['side']} | {r['run']}{err} | {items(r.get('val'), n_val)} | "
            f"{items(r.get('test'), n_test)} | {r.get('accepted', 0)} of {r.get('steps', 0)} | "
            f"{r.get('calls', 0)} | {r.get('tokens', 0):,} | {r['wall_s'] / 60:.0f} min |"
        )
        before, after = (r.get("test") or [None, None])[:2]
        if before is not None and after is not None:
            gain = round(after * n_test) - round(before * n_test)
            gains.setdefault((r["task"], r["side"]), []).append(gain)
    lines.append("")
    for (task, side), g in sorted(gains.items()):
        lines.append(
            f"- {task}, {side}: mean test gain {sum(g) / len(g):+.1f} items ({len(g)} runs)"
        )
    return "\n".join(lines)


def row(r: dict[str, Any]) -> str:
    return (
        f"{r['task']:<10} {r['side']:<8} run {r['run']} | val {fmt(r.get('val'))} | "
        f"test {fmt(r.get('test'))} | accepted {r.get('accepted', 0)} of "
        f"{r.get('steps', 0)} steps | calls {r.get('calls', 0)} | "
        f"tokens {r.get('tokens', 0):,} | {r['wall_s'] / 60:.1f} min"
        + (f" | ERROR {r['error'][-300:]}" if "error" in r else "")
    )


if __name__ == "__main__":
    sys.exit(main())

"""Judge calibration and rubric training on the simulator (issue 25).

    python bench/bench_judge.py [--sets N] [--labels L]

1. Coverage: for simulated judges with a known error rate (``sim:judge-10/20/30``: they flip
   that share of their verdicts), calibrate on N label sets of L items each and count how often
   the reported 95% Wilson interval of the accuracy contains the true agreement (1 - error).
2. Rubric training: for N label sets without acceptable answers (so ``sim:judge-5`` grades by
   what its rubric states), run ``judge improve`` (the ordinary Trainer on the derived task set)
   and print the agreement on the held-back labels before and after, and its mean gain.

Offline and deterministic: every model is the simulator, each set lives in a fresh temp repo.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from skillvc.judge.calibrate import calibrate
from skillvc.judge.improve import improve
from skillvc.models import simworld
from skillvc.training.demo import create_demo_repo
from skillvc.workspace.workspace import open_workspace

RUBRIC = "judges/RUBRIC.md"
SEED_RUBRIC = "# Rubric\n\nThe answer is correct when it follows the Acme returns policy.\n"


def repo_with(root: Path, judge: str, labels: list[dict[str, object]]) -> Path:
    create_demo_repo(root)
    config = root / "skillvc.toml"
    text = config.read_text("utf-8")
    text = text.replace(
        'scorer = "exact"', f'scorer = "judge"\nscorer_options = {{ rubric_file = "{RUBRIC}" }}'
    )
    text = text.replace('[optimizer]\nmodel = "sim:support"', f'[optimizer]\nmodel = "{judge}"')
    config.write_text(text + '\n[judge]\nlabels = "evals/labels.jsonl"\n', "utf-8")
    (root / "judges").mkdir()
    (root / RUBRIC).write_text(SEED_RUBRIC, "utf-8")
    rows = "".join(json.dumps(r) + "\n" for r in labels)
    (root / "evals" / "labels.jsonl").write_text(rows, "utf-8")
    subprocess.run(["git", "add", "."], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "judge"], cwd=root, check=True)
    return root


def coverage(sets: int, n: int, tmp: Path) -> None:
    print(f"1. coverage of the 95% Wilson interval ({sets} label sets of {n} items each)")
    print("judge          true acc  mean reported  interval covers truth")
    for pct in (10, 20, 30):
        covered, accs = 0, []
        for s in range(sets):
            root = repo_with(
                tmp / f"cov-{pct}-{s}", f"sim:judge-{pct}", simworld.generate_labels(n, 100 + s)
            )
            result = calibrate(open_workspace(root), record=False)
            low, high = result.to_dict()["accuracy_interval"]
            truth = 1 - pct / 100
            covered += int(low <= truth <= high)
            accs.append(result.agreement.accuracy)
        print(
            f"sim:judge-{pct:<5} {1 - pct / 100:8.2f}  {statistics.mean(accs):13.3f}  "
            f"{covered}/{sets}"
        )


def training(sets: int, n: int, tmp: Path) -> None:
    print(f"\n2. judge improve on {sets} label sets of {n} items (no acceptable answers given)")
    print("set  held back  accuracy before -> after   kappa before -> after   accepted  seconds")
    gains = []
    for s in range(sets):
        labels = simworld.generate_labels(n, 200 + s, with_targets=False)
        root = repo_with(tmp / f"imp-{s}", "sim:judge-5", labels)
        started = time.perf_counter()
        result = improve(open_workspace(root))
        took = time.perf_counter() - started
        b, a = result.before.to_dict(), result.after.to_dict()
        gains.append(a["accuracy"] - b["accuracy"])
        print(
            f"{s:>3}  {b['n']:>9}  {b['accuracy']:.3f} -> {a['accuracy']:.3f}"
            f"{'':14}{b['kappa']:+.3f} -> {a['kappa']:+.3f}{'':11}{result.summary.accepted:>3}"
            f"  {took:7.1f}"
        )
    print(
        f"mean accuracy gain on held-back labels: {statistics.mean(gains):+.3f} "
        f"(min {min(gains):+.3f}, max {max(gains):+.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sets", type=int, default=5)
    parser.add_argument("--labels", type=int, default=120)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-judge-") as tmp:
        coverage(args.sets, args.labels, Path(tmp))
        training(args.sets, args.labels, Path(tmp))


if __name__ == "__main__":
    main()

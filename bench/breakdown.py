"""Where a run's requests went, read from its event log (issue 44).

Every fresh model call is a ``model.call`` event (keyed by its cache key); a target call is
tied to the stage that used it by the ``rollout`` event that names its key (``call``), in the
run's sequence. Calls no sequenced event used are speculation a gate made useless.

Stages of a target call:

- ``baseline``: the seed skill's val before the first step;
- ``train``: a step's rollouts; ``slow update``: the epoch end's rollouts on the slow items;
- a gate's val calls, by the version of the skill they ran: ``gate: candidate`` (the bundle, or
  the only candidate), ``gate: current skill`` (its rounds as the current skill), ``credit
  tests`` (attribution's versions without an edit), ``pruned candidate`` (the bundle less the
  edits dropped: the "with" side of the tests after a drop, and its own gate; on a stochastic
  target ``its pass as the current skill`` is the check for harm, whose draws the accepted
  skill keeps), each under the step's gate or the slow update's;
- ``val of the accepted skill`` (after a gate, before the next step); ``test``.

Optimizer calls go by their prompt's kind (``reflect``, ``slow_update``, ``meta``, ...).

For attribution, also per test: its outcome, the calls it made, and whether it changed the
decision (a test that keeps its edit leaves the bundle as it was).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

# The rounds of val draws (``Gating``, default gate_rounds = 3): 0 a gate's first pass, 1-4 its
# more rounds, 11 on the current skill's, 18 on attribution's tests (a block for every step).
ACCEPTED_ROUND = 11
ATTRIBUTION_ROUNDS = 18


def _blob(db: sqlite3.Connection, key: str | None) -> str:
    if not key:
        return ""
    row = db.execute("SELECT content FROM blobs WHERE hash = ?", [key]).fetchone()
    if row is None:
        return ""
    content = row[0]
    return content.decode("utf-8", "replace") if isinstance(content, bytes) else str(content)


def breakdown(db_path: Path) -> dict[str, Any]:
    """The newest run's requests by stage, its attribution tests, and its gates."""
    from skillvc.models.prompts import prompt_kind

    db = sqlite3.connect(str(db_path))
    try:
        (run_id,) = db.execute(
            "SELECT run_id FROM events WHERE type = 'run.started' ORDER BY id DESC LIMIT 1"
        ).fetchone()
        calls: dict[str, dict[str, Any]] = {}
        for key, payload in db.execute(
            "SELECT key, payload FROM events WHERE type = 'model.call' AND run_id = ?", [run_id]
        ):
            calls[key] = json.loads(payload)
        events = [
            (t, json.loads(p))
            for t, p in db.execute(
                "SELECT type, payload FROM events WHERE run_id = ? AND seq IS NOT NULL "
                "ORDER BY seq",
                [run_id],
            )
        ]
        used: dict[str, str] = {}  # call key -> stage
        stages: Counter[str] = Counter()
        tests: list[dict[str, Any]] = []
        gates: list[dict[str, Any]] = []
        phase = "baseline"
        pending: list[dict[str, Any]] = []  # val rollouts of the gate to come
        current = ""
        for kind, p in events:
            if kind == "step.started":
                phase = "step"
            elif kind == "rollout":
                key = p.get("call")
                split = str(p.get("split", ""))
                current = current or p["skill"]
                if split == "test":
                    stage = "test"
                elif split == "train":
                    stage = "train" if phase in ("step", "baseline") else "slow update"
                elif phase == "baseline":
                    stage = "baseline"
                elif phase == "accepted":
                    stage = "val of the accepted skill"
                else:
                    pending.append(p)
                    continue
                if key and key not in used:
                    used[key] = stage
            elif kind == "gate":
                gates.append(_gate(p, pending, used, current, calls, tests))
                pending = []
                if p["decision"] != "rejected":
                    current = p["candidate"]
                    phase = "accepted"
                else:
                    phase = "after gate"
            elif kind in ("slow_update", "meta_update"):
                phase = "epoch end"
        for key, stage in used.items():
            if key in calls:
                stages[stage] += 1
        for key, payload in calls.items():
            if payload.get("role") == "optimizer":
                prompt = _blob(db, payload.get("prompt"))
                stages[f"optimizer: {prompt_kind(prompt) or 'other'}"] += 1
            elif key not in used:
                stages["speculation wasted"] += 1
        tokens = sum(
            int(c.get("prompt_tokens") or 0) + int(c.get("completion_tokens") or 0)
            for c in calls.values()
        )
    finally:
        db.close()
    return {
        "requests": len(calls),
        "tokens": tokens,
        "stages": dict(sorted(stages.items(), key=lambda kv: -kv[1])),
        "tests": tests,
        "gates": gates,
    }


def _gate(
    p: dict[str, Any],
    val: list[dict[str, Any]],
    used: dict[str, str],
    current: str,
    calls: dict[str, dict[str, Any]],
    tests: list[dict[str, Any]],
) -> dict[str, Any]:
    """Tie a gate's val rollouts to the version they ran; record its attribution tests."""
    where = "step gate" if p.get("kind") == "step" else "slow-update gate"
    credit = p.get("attribution")
    candidate = p.get("candidate")
    bundle = None  # the first version other than the current skill: the bundle
    fresh: Counter[str] = Counter()
    for r in val:
        skill = r["skill"]
        split = str(r.get("split", "val"))
        round_ = int(split.partition(":")[2] or 0)
        if round_ >= ATTRIBUTION_ROUNDS:  # attribution's block of rounds (a stochastic target)
            stage = "credit tests"
        elif skill == current:
            stage = "current skill, more rounds"
        elif credit is None:
            stage = "candidate" + (", more rounds" if round_ else "")
        else:
            bundle = bundle or skill
            if skill == bundle:
                stage = "candidate" + (", more rounds" if round_ else "")
            elif skill == candidate:
                stage = "pruned candidate" + (
                    ", its pass as the current skill"
                    if round_ == ACCEPTED_ROUND
                    else ", more rounds"
                    if round_
                    else ""
                )
            else:
                stage = "credit tests"
        key = r.get("call")
        if key and key not in used:
            used[key] = f"{where}: {stage}"
            if key in calls:
                fresh[stage] += 1
    summary = {
        "kind": p.get("kind"),
        "decision": p["decision"],
        "edits": len(p.get("edits") or []),
        "bundle": len(credit["bundle"]) if credit else len(p.get("edits") or []),
        "calls": dict(fresh),
        "changed_nothing": bool(p.get("changed_nothing")),
    }
    if credit:
        kept = set(credit.get("kept") or [])
        for t in credit.get("tests") or []:
            tests.append(
                {
                    "outcome": t["outcome"],
                    "n_evaluated": t["n_evaluated"],
                    "rounds": t.get("rounds", 1),
                    # A test that keeps its edit (and was not the last one standing, refused
                    # with the candidate) leaves the bundle's decision as it was.
                    "changed_decision": t["outcome"] != "kept" or t["edit"] not in kept,
                    "bundle": len(credit["bundle"]),
                    "decision": p["decision"],
                }
            )
    return summary


def show(b: dict[str, Any], indent: str = "  ") -> None:
    """Print a breakdown (``breakdown``'s dict, or several summed by ``add``)."""
    total = b["requests"] or 1
    print(f"{indent}requests by stage ({b['requests']} in all, {b['tokens']:,} tokens):")
    for stage, n in b["stages"].items():
        print(f"{indent}  {stage:<44} {n:>7}  {100 * n / total:5.1f} %")
    tests = b["tests"]
    if tests:
        changed = sum(1 for t in tests if t["changed_decision"])
        outcomes = ", ".join(f"{k} {v}" for k, v in Counter(t["outcome"] for t in tests).items())
        same = sum(t["n_evaluated"] for t in tests if not t["changed_decision"])
        print(
            f"{indent}credit tests: {len(tests)} ({outcomes}); {len(tests) - changed} ended "
            f"without changing the bundle's decision, with {same:,} of the "
            f"{sum(t['n_evaluated'] for t in tests):,} items the tests ran (a side)"
        )
    gates = b["gates"]
    if gates:
        sizes = Counter(g["bundle"] for g in gates if g["kind"] == "step")
        accepted = Counter(
            g["bundle"] for g in gates if g["kind"] == "step" and g["decision"] != "rejected"
        )
        print(
            f"{indent}step gates by bundle size (accepted/all): "
            + ", ".join(f"{k} edits {accepted[k]}/{v}" for k, v in sorted(sizes.items()))
        )


def add(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs' breakdowns summed."""
    stages: Counter[str] = Counter()
    for b in parts:
        stages.update(b["stages"])
    return {
        "requests": sum(b["requests"] for b in parts),
        "tokens": sum(b["tokens"] for b in parts),
        "stages": dict(sorted(stages.items(), key=lambda kv: -kv[1])),
        "tests": [t for b in parts for t in b["tests"]],
        "gates": [g for b in parts for g in b["gates"]],
    }

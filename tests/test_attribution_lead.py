"""Issue 44: on a deterministic target, an edit's test runs the items the candidate gets wrong
first, then the ones its bundle gained, then the rest. Curtailment makes the decision the one a
full pass reaches in any order, so the order changes only how many items a test runs: an edit
that earns its place is known once the items it can lose and enough of those it can win have
run. (An edit that is dropped can cost more: the items the candidate gets wrong, which used to
come last, are no longer left out when a test stops for futility.)"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from skillvc.core.config import ModelConfig
from skillvc.core.store import open_store
from skillvc.models import simworld
from skillvc.models.backends.sim import SimBackend
from skillvc.models.calls import ModelClient
from skillvc.tasks.scorers import get_scorer
from skillvc.tasks.taskset import TaskItem
from skillvc.training import attribution
from skillvc.training.evaluate import Evaluator

LATE = simworld.rule("late deliveries earn").text
WRONG = simworld.rule("wrong item was sent").text
BASE = f"# Acme returns\n\n## Policies\n- {LATE}\n- {WRONG}\n"
BILLING = simworld.rule("billing errors go to").text
DAMAGED = simworld.rule("damaged on arrival").text
HARMFUL = simworld.rule("after 14 days").text  # deny all returns
NEUTRAL = simworld.rule("thank the customer").text


def _items() -> list[TaskItem]:
    """Tickets of five issues: the seed skill gets the late and wrong-item ones right, the
    damaged and billing rules win theirs, and nothing here wins the missing-parts ones."""
    ticket = "Issue: {issue}. Days since delivery: {days}. Tier: standard."
    issues = {"late": 6, "wrong-item": 6, "damaged": 6, "billing-error": 6, "missing-parts": 4}
    return [
        TaskItem(
            id=f"{issue}-{days}",
            input=ticket.format(issue=issue, days=days),
            targets=(simworld.true_action(simworld.Case(issue, days, "standard")),),
        )
        for issue, n in issues.items()
        for days in range(2, 2 + 3 * n, 3)
    ]


@contextmanager
def _evaluator(path: Path) -> Iterator[Evaluator]:
    """The deterministic simulator (temperature 0) on an event log of its own."""
    config = ModelConfig(model="sim:support", temperature=0.0)
    with open_store(path) as store, ThreadPoolExecutor(2) as pool:
        client = ModelClient(store, {"target": SimBackend("sim:support")}, {"target": config})
        yield Evaluator(client, get_scorer("exact", {}), pool)


def _skill(*rules: str) -> str:
    return BASE + "".join(f"- {r}\n" for r in rules)


def _test(
    path: Path, with_edit: str, without: str, lead: list[str]
) -> tuple[attribution.EditTest, int]:
    """The edit's test, and the target calls it made (the candidate's full pass included)."""
    items = _items()
    with _evaluator(path) as evaluator:
        test = attribution.compare(
            evaluator,
            with_edit,
            without,
            items,
            metric="hard",
            alphas=[0.2],
            chunk=8,
            early_stop=True,
            edit={"id": "e"},
            lead=lead,
        )
        return test, len(evaluator.memo)


@pytest.mark.parametrize(
    ("edit", "others", "kept"),
    [(BILLING, [DAMAGED], True), (NEUTRAL, [DAMAGED, BILLING], False), (HARMFUL, [BILLING], False)],
)
def test_the_lead_changes_how_many_items_a_test_runs_never_its_decision(
    tmp_path: Path, edit: str, others: list[str], kept: bool
) -> None:
    with_edit, without = _skill(*others, edit), _skill(*others)
    base = {r.item_id: r.hard for r in _answers(tmp_path / "base.db", BASE)}
    bundle = {r.item_id: r.hard for r in _answers(tmp_path / "bundle.db", with_edit)}
    gained = [i for i in bundle if bundle[i] == 1 and base[i] == 0]  # what the bundle's gate saw
    assert gained
    plain, plain_calls = _test(tmp_path / "plain.db", with_edit, without, [])
    led, led_calls = _test(tmp_path / "led.db", with_edit, without, gained)
    # Kept or dropped: the same. (What a test stopped early calls a dropped edit, a neutral
    # passenger or a harmful one, is read off the items it ran, as before.)
    assert (plain.outcome == attribution.KEPT) == (led.outcome == attribution.KEPT) == kept
    if kept:
        assert led_calls < plain_calls
        # The billing rule's test is known once the items the candidate gets wrong (the only
        # ones that can count against the rule: all of them run first) and enough of the items
        # the bundle gained have run, two chunks of 8; with the candidate's right answers
        # first, the items it gets wrong came last, and every item had to run.
        assert (plain.n_evaluated, plain.early_stopped) == (len(_items()), False)
        assert led.early_stopped and led.n_evaluated == 16
        assert led.down == plain.down  # every item that could count against it ran


def _answers(path: Path, skill: str) -> list:
    with _evaluator(path) as evaluator:
        return evaluator.run(skill, _items(), "val")

"""Issue 46: skillvc's own proposal, worked examples of the expected answers' form.

The unit tests read ``form_edit`` on the failures the real 1.5B model gave on the two convention
sets (names as "OKAFOR, Jonas", orders as "ORD-000022") and on sets it must leave alone. The
loop tests run the dates world of ``tests/test_repeats.py`` over the real OpenAI SDK
(``tests/loopback.py``), with a target that follows worked examples and one that ignores them.
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from loopback import LoopbackServer, chat_messages, is_optimizer_prompt, loopback  # noqa: F401
from test_repeats import STUBBORN, dates_repo, run_events, target_answer

from skillvc.training.forms import HEAD, LABEL_HEAD, form_edit, label_edit


def _case(message: str, expected: str, answer: str) -> dict[str, Any]:
    return {"input": message, "expected": expected, "output": f"<answer>{answer}</answer>"}


NAMES = [
    _case("Jonas Okafor approved the refund. Who approved it?", "OKAFOR, Jonas", "Jonas Okafor"),
    _case("Bruno Berger signed the note. Who signed it?", "BERGER, Bruno", "Bruno Berger"),
    _case("Ravi Mehta packed the box. Who packed it?", "MEHTA, Ravi", "Ravi Mehta"),
]
ORDERS = [
    _case("Returned from order 22; replacement 96771.", "ORD-000022", "22"),
    _case("Returned from order 96910; replacement 79800.", "ORD-096910", "96910"),
    _case("Returned from order 604; replacement 3973.", "ORD-000604", "604"),
]


def test_names_get_worked_examples_and_the_measured_rewrite() -> None:
    found = form_edit(NAMES)

    assert found is not None and found.edit.op == "add"
    lines = found.edit.content.splitlines()
    assert lines[0] == HEAD
    # The case's message, the expected answer in the output's own tags, what the target said.
    assert lines[1] == (
        'Message: "Jonas Okafor approved the refund. Who approved it?" '
        'Answer: <answer>OKAFOR, Jonas</answer> (not "Jonas Okafor")'
    )
    assert lines[2].startswith('Message: "Bruno Berger') and len(lines) == 4  # two examples
    assert found.rule == (
        "has the parts of the plain answer in reverse order, the first in capitals, "
        'its parts joined by ", "'
    )
    assert lines[3] == f"Every expected answer {found.rule}."
    assert (found.form_failures, found.failures) == (3, 3)
    assert "derived by skillvc" in found.edit.rationale


def test_orders_get_the_house_prefix_and_the_padding_width() -> None:
    found = form_edit(ORDERS)

    assert found is not None
    assert (
        found.rule == 'starts with "ORD-", and has its number padded with leading zeros to 6 digits'
    )
    assert '<answer>ORD-000022</answer> (not "22")' in found.edit.content


@pytest.mark.parametrize(
    ("cases", "rule"),
    [
        # Parts of the answer that every expected answer shares are not the house's text:
        # every date is in 2024, which the outputs hold too.
        (
            [
                _case("x", f"2024-{m:02d}-{d:02d}", f"{m:02d}/{d:02d}/2024")
                for m, d in [(1, 5), (3, 12), (7, 30)]
            ],
            'has the parts of the plain answer in the order 3, 1, 2, its parts joined by "-"',
        ),
        ([_case("x", f"{n} km", str(n)) for n in (3, 12, 40)], 'ends with " km"'),
        ([_case("x", s.upper(), s) for s in ("red car", "blue bike")], "is written in capitals"),
        # The same content in a form no rule here measures (a surname and an initial): the
        # worked examples alone.
        ([_case("x", "Okafor J.", "Jonas Okafor"), _case("x", "Berger B.", "Bruno Berger")], ""),
        # A month name is no part of a date's digits, but most parts are shared.
        (
            [_case("x", f"2024-01-{d:02d}", f"January {d}, 2024") for d in (5, 12, 30)],
            "",
        ),
    ],
)
def test_the_rule_states_only_what_the_pairs_share(cases: list[dict[str, Any]], rule: str) -> None:
    found = form_edit(cases)
    assert found is not None and found.rule == rule
    assert found.edit.content.count("Message:") == 2
    assert ("Every expected answer" in found.edit.content) == bool(rule)


@pytest.mark.parametrize(
    "pairs",
    [
        # Numbers compared by value: thousands separators, decimals, a currency.
        [("$1,234.50", "1234.50 USD"), ("$87", "87.00 USD"), ("$12,000", "12000.00 USD")],
        # A 12-hour time against its 24-hour form.
        [("3:30 PM", "15:30"), ("11:45 pm", "23:45"), ("12:10 AM", "00:10")],
        # A percentage against a fraction.
        [("25%", "0.25"), ("50 %", "0.5"), ("12.5%", "0.125")],
        # The answer in a sentence: the letters every expected answer shares are the house's.
        [
            ("The order is 788.", "ORD-000788"),
            ("Order 49", "ORD-000049"),
            ("It is 143", "ORD-000143"),
        ],
        # A word shortened, or given by its initials.
        [("apples", "apple"), ("oranges", "orange"), ("pears", "pear")],
        [("NYC", "New York City"), ("LA", "Los Angeles"), ("UK", "United Kingdom")],
        [("New York City", "NYC"), ("Los Angeles", "LA"), ("United Kingdom", "UK")],
        # Letters and digits run together.
        [("ab12", "AB-12"), ("cd7", "CD-7"), ("x9", "X-9")],
    ],
)
def test_the_same_content_in_another_form_gets_worked_examples(
    pairs: list[tuple[str, str]],
) -> None:
    found = form_edit([_case(f"q{i}", e, o) for i, (o, e) in enumerate(pairs)])
    assert found is not None and found.form_failures == len(pairs)


def test_the_same_number_with_other_content_is_no_form() -> None:
    # Another sign, or another number beside the house's text, is other content.
    signs = [_case(f"q{k}", f"-{k}", str(k)) for k in (6, 12, 20)]
    other = [_case(f"q{k}", f"ORD-{k:06d}", f"The order is {k + 1}.") for k in (22, 604, 49)]
    assert form_edit(signs) is None
    cities = [
        _case(f"q{k}", e, o) for k, (o, e) in enumerate([("Paris", "Rome"), ("Lyon", "Oslo")])
    ]
    assert form_edit(cities) is None, "another word, however short, is another answer"
    assert form_edit(other) is None


def test_the_targets_own_names_for_the_house_labels_are_a_form() -> None:
    said = {"APPROVED": "Yes", "DENIED": "No"}
    batch = ["APPROVED", "APPROVED", "APPROVED", "DENIED", "DENIED", "DENIED"]
    cases = [_case(f"Claim {k}: approve it?", e, said[e]) for k, e in enumerate(batch[1:5])]

    found = form_edit(cases, expected=batch)

    assert found is not None and found.form_failures == 4
    assert found.rule == 'uses the house\'s labels, such as "APPROVED" and "DENIED"'
    # The two worked examples show two of the target's answers, not the first two cases.
    assert '<answer>APPROVED</answer> (not "Yes")' in found.edit.content
    assert '<answer>DENIED</answer> (not "No")' in found.edit.content
    # Without the batch's labels there is no telling a name from a wrong answer.
    assert form_edit(cases) is None


def test_a_wrong_label_or_a_name_for_two_labels_is_no_form() -> None:
    batch = ["billing", "account", "shipping", "billing", "account", "shipping"]
    # A wrong queue of the batch's own labels is a wrong answer.
    wrong = [_case("q", e, o) for e, o in [("account", "billing"), ("shipping", "billing")]]
    assert form_edit(wrong, expected=batch) is None
    # "other" stands for two labels: the target's answers, not the house's names.
    vague = [_case("q", e, "other") for e in ("account", "shipping", "billing")]
    assert form_edit(vague, expected=batch) is None
    # One name for one label is one case of a pattern, not yet a vocabulary.
    one = [_case("q", "account", "profile"), _case("q", "account", "profile")]
    assert form_edit(one, expected=batch) is None


def test_no_edit_where_the_answers_differ_in_content() -> None:
    wrong = [_case("Lena met Omar. Who did Lena meet?", "Omar", "Lena")] * 3
    wrong_number = [_case("Order 22; replacement 96771.", "ORD-000022", "96771")] * 3
    assert form_edit(wrong_number) is None, "another number shares no part"
    assert form_edit(wrong) is None, "worked examples would teach train answers, not a form"
    # Two form failures of five are not most of the step's failures.
    assert form_edit([*NAMES[:2], *wrong]) is None
    assert form_edit(NAMES[:1]) is None, "one case is no pattern"
    # Three of five are.
    mixed = form_edit([*NAMES, *wrong[:2]])
    assert mixed is not None and (mixed.form_failures, mixed.failures) == (3, 5)


def test_a_long_message_is_left_out_of_its_example() -> None:
    long = [dict(c, input="word " * 200 + c["input"]) for c in NAMES]
    found = form_edit(long)
    assert found is not None
    assert found.edit.content.splitlines()[1] == (
        'Answer: <answer>OKAFOR, Jonas</answer> (not "Jonas Okafor")'
    )


def _dates_world(follows_examples: bool) -> Callable[[dict[str, Any]], str]:
    """An optimizer that proposes only its own (wrong) convention, and a target that writes
    the house date form when its skill names it, or, if ``follows_examples``, when the skill
    shows a worked example of it."""

    def respond(body: dict[str, Any]) -> str:
        messages = chat_messages(body)
        if is_optimizer_prompt(messages):
            return json.dumps({"analysis": "rule ignored", "edits": [STUBBORN]})
        skill, task = messages[0]["content"], messages[-1]["content"]
        if follows_examples and re.search(r"<answer>\d{4}-\d\d-\d\d</answer>", skill):
            skill += " YYYY-MM-DD"
        return target_answer(skill, task)

    return respond


def test_the_derived_edit_is_gated_and_committed_with_its_evidence(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loopback.responder = _dates_world(follows_examples=True)
    repo = dates_repo(tmp_path, loopback, monkeypatch, forms=True)

    events = run_events(repo)

    ours = [p for kind, _, p in events if kind == "edit.proposed" and p["source"] == "skillvc"]
    assert len(ours) == 1 and ours[0]["kind"] == "form"
    assert (ours[0]["form_failures"], ours[0]["failures"]) == (6, 6)
    gates = [p for kind, _, p in events if kind == "gate" and p["kind"] == "step"]
    assert gates[0]["decision"] == "accepted" and gates[0]["after"]["mean"] == 1.0
    assert [e["id"] for e in gates[0]["edits"]] == [ours[0]["edit"]["id"]]
    skill = (repo / "skills/dates/SKILL.md").read_text(encoding="utf-8")
    assert HEAD in skill and "<answer>2024-" in skill
    message = git(repo, "log", "-1", "--format=%B")
    assert "derived by skillvc" in message


def test_a_derived_edit_the_target_ignores_is_gated_once(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The target needs the literal "YYYY-MM-DD": the worked examples change no answer, and
    the next steps' failures state the same rule, so the same edit is held back."""
    loopback.responder = _dates_world(follows_examples=False)
    repo = dates_repo(tmp_path, loopback, monkeypatch, forms=True)

    events = run_events(repo)

    ours = {
        p["edit"]["id"]
        for kind, _, p in events
        if kind == "edit.proposed" and p["source"] == "skillvc"
    }
    assert len(ours) == 1, "one rule, one edit, while the skill is current"
    gated = [
        e["id"] for kind, _, p in events if kind == "gate" for e in p["edits"] if e["id"] in ours
    ]
    assert len(gated) == 1, "never evaluated again on the same skill"
    held = [p for kind, _, p in events if kind == "edits.selected" and p.get("refuted")]
    assert any(ours & set(p["refuted"]) for p in held)


def test_off_when_the_config_says_so(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loopback.responder = _dates_world(follows_examples=True)
    repo = dates_repo(tmp_path, loopback, monkeypatch, forms=False)

    events = run_events(repo)

    assert not [p for kind, _, p in events if kind == "edit.proposed" and p["source"] == "skillvc"]
    assert not [p for kind, _, p in events if kind == "gate" and p["decision"] == "accepted"]


def test_a_skill_with_examples_gets_new_ones_under_the_same_heading() -> None:
    first = form_edit(NAMES[:2])
    assert first is not None and first.edit.anchor is None
    skill = f"Answer with the name.\n{first.edit.content}\n"

    more = form_edit(NAMES, skill)

    assert more is not None and more.edit.anchor == HEAD
    # Only the example the skill lacks; the rule is there already.
    assert more.edit.content.splitlines() == [_example_line(NAMES[2])]
    assert form_edit(NAMES[:2], skill) is None, "nothing new to add"


def _example_line(case: dict[str, Any]) -> str:
    answer = case["output"].removeprefix("<answer>").removesuffix("</answer>")
    return (
        f'Message: "{case["input"]}" Answer: <answer>{case["expected"]}</answer> (not "{answer}")'
    )


def test_a_run_recorded_without_form_examples_resumes_without_them(tmp_path: Path) -> None:
    """Recorded only when on: a run from before the edit existed (or with it off) must replay
    as it ran, and a resume that would turn it on is a change the user is told of."""
    from skillvc.core.config import parse_config_dict
    from skillvc.core.events import Event
    from skillvc.training.resume import _recorded_config, config_changes, started_config

    on = parse_config_dict(
        {"skill": {"path": "SKILL.md"}, "target": {"model": "sim:support"}}, tmp_path
    )
    assert on.to_dict()["train"]["form_examples"] is True
    off = dataclasses.replace(on, train=dataclasses.replace(on.train, form_examples=False))
    assert "form_examples" not in off.to_dict()["train"]

    old = Event(1, "run.started", {"config": off.to_dict()}, run_id="run-old")
    assert started_config(old, on)["train"]["form_examples"] is False
    changes = config_changes(_recorded_config(old, on), on.to_dict())
    assert any("form_examples" in c for c in changes), changes
    new = Event(2, "run.started", {"config": on.to_dict()}, run_id="run-new")
    assert not config_changes(_recorded_config(new, on), on.to_dict())


TICKETS = [
    _case("The parcel arrived opened and the laptop is missing.", "escalate", "shipping"),
    _case("My bank opened a chargeback for last month.", "escalate", "billing"),
    _case("I want a refund because the delivery came late.", "shipping", "billing"),
]
QUEUES = ["escalate", "shipping", "billing", "technical", "account", "escalate"] * 2


def test_a_label_task_gets_worked_examples_of_different_labels() -> None:
    """Routing tickets by a policy with exceptions: on the real 1.5B target two worked
    examples took val from 7/20 to 14/20."""
    found = label_edit(TICKETS, QUEUES)

    assert found is not None and found.edit.op == "add" and found.edit.anchor is None
    lines = found.edit.content.splitlines()
    assert lines[0] == LABEL_HEAD and len(lines) == 3
    # One example per expected label first: escalate, then shipping (not the second escalate).
    assert lines[1] == (
        'Message: "The parcel arrived opened and the laptop is missing." '
        'Answer: <answer>escalate</answer> (not "shipping")'
    )
    assert (
        lines[2].startswith('Message: "I want a refund') and "<answer>shipping</answer>" in lines[2]
    )
    assert (found.form_failures, found.failures) == (3, 3)
    skill = f"Route the ticket.\n{found.edit.content}\n"
    more = label_edit(TICKETS, QUEUES, skill)
    assert more is not None and more.edit.anchor == LABEL_HEAD
    assert more.edit.content.splitlines() == [_example_line(TICKETS[1])]


def test_no_label_edit_where_the_answers_are_not_a_few_labels() -> None:
    numbers = [_case(f"{n} boxes of 12 pencils?", str(n * 12), str(n * 11)) for n in range(3, 9)]
    assert label_edit(numbers, [c["expected"] for c in numbers]) is None, "every answer differs"
    assert label_edit(TICKETS, QUEUES[:3]) is None, "too few answers to call them labels"
    long = ["a queue with a name far longer than any label a task would use"] * 6
    assert label_edit(TICKETS, long) is None
    assert label_edit(TICKETS[:1], QUEUES) is None, "one failure is no pattern"


def test_label_examples_are_off_unless_the_config_turns_them_on(tmp_path: Path) -> None:
    from skillvc.core.config import parse_config_dict

    off = parse_config_dict(
        {"skill": {"path": "SKILL.md"}, "target": {"model": "sim:support"}}, tmp_path
    )
    assert off.train.label_examples is False and "label_examples" not in off.to_dict()["train"]
    on = parse_config_dict(
        {
            "skill": {"path": "SKILL.md"},
            "target": {"model": "sim:support"},
            "train": {"label_examples": True},
        },
        tmp_path,
    )
    assert on.to_dict()["train"]["label_examples"] is True


def test_the_loop_offers_label_examples_on_a_label_task_when_turned_on(
    demo_seed: Path, tmp_path: Path
) -> None:
    """The demo's tickets are answered with one of a few actions: a label task. The simulated
    target knows a rule only by its key phrase, so it ignores worked examples: the edit is
    gated once and held while the skill is current."""
    from conftest import copy_repo, seed_env

    from skillvc.core.store import open_store
    from skillvc.training.loop import train
    from skillvc.workspace.workspace import open_workspace

    repo = copy_repo(demo_seed, tmp_path / "repo")
    with seed_env(repo):
        train(open_workspace(repo), overrides={"train": {"epochs": 1, "label_examples": True}})
    with open_store(repo / ".skillvc/events.db") as store:
        events = [(e.type, e.payload) for e in store.events()]
    ours = [p for kind, p in events if kind == "edit.proposed" and p["source"] == "skillvc"]
    assert ours and {p["kind"] for p in ours} == {"label"}
    assert ours[0]["edit"]["content"].startswith(LABEL_HEAD + "\nMessage: ")
    gated = [e["id"] for kind, p in events if kind == "gate" for e in p["edits"]]
    ids = {p["edit"]["id"] for p in ours}
    assert ids & set(gated), "offered to the gate"
    started = next(p for kind, p in events if kind == "run.started")
    assert started["config"]["train"]["label_examples"] is True

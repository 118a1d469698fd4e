"""Issue 46: no refuted edit evaluated twice, evidence the edits must follow from, several
proposals per step.

The loopback tests replay what the real 1.5B model did on the held-out "Task B": every expected
answer follows one house convention (dates as YYYY-MM-DD) that the target does not use unless
the skill says so; a deterministic optimizer (temperature 0) proposes its *own* default
convention as a replace, which changes no answer, and proposes it again word for word (or
reworded in case and punctuation) at every later step. They drive the real OpenAI SDK over
HTTP (``tests/loopback.py``).
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import git
from loopback import (  # noqa: F401
    Behaviour,
    LoopbackServer,
    chat_messages,
    is_optimizer_prompt,
    loopback,
)

from skillvc.core.errors import SkillvcError
from skillvc.core.store import open_store
from skillvc.models import prompts
from skillvc.models.prompts import prompt_kind, section
from skillvc.skill.edits import Edit
from skillvc.training.evidence import shape_evidence
from skillvc.training.optimize import Answer, Proposal, _combined, aggregate
from skillvc.training.repeats import edit_key
from skillvc.workspace.workspace import open_workspace

SKILL = "# Dates\n\nRead the message and answer with the date it names.\nAnswer with the date.\n"
MONTHS = ["January", "February", "March", "April", "May", "June", "July"]
STUBBORN = {
    "op": "replace",
    "target": "Answer with the date.",
    "content": "Answer with the date as MM/DD/YYYY.",
    "rationale": "rule ignored 6/6",
}
# The same edit reworded in case and punctuation only: a new id, the same normalised text.
REWORDED = {**STUBBORN, "content": "answer with the date as mm/dd/yyyy"}
RIGHT = {
    "op": "replace",
    "target": "Answer with the date.",
    "content": "Answer with the date as YYYY-MM-DD.",
    "rationale": "answer format 6/6: every expected answer is YYYY-MM-DD",
}


def _item(i: int) -> dict[str, Any]:
    month, day = i % 7 + 1, i % 27 + 1
    return {
        "id": f"d{i}",
        "input": f"The parcel left on {MONTHS[month - 1]} {day}, 2024.",
        "target": f"2024-{month:02d}-{day:02d}",
    }


def target_answer(skill: str, task: str) -> str:
    """The target: its own convention (MM/DD/YYYY) unless the skill names the house one."""
    m = re.search(r"on (\w+) (\d+), (\d{4})", task)
    assert m is not None
    month, day, year = MONTHS.index(m[1]) + 1, int(m[2]), m[3]
    if "YYYY-MM-DD" in skill:
        return f"<answer>{year}-{month:02d}-{day:02d}</answer>"
    return f"<answer>{month:02d}/{day:02d}/{year}</answer>"


class Optimizer:
    """A deterministic optimizer that repeats itself: every reflection gets ``STUBBORN`` first
    (``REWORDED`` from the third call on). With ``second`` it answers a prompt it has seen
    before (a second sample of it) with that edit instead."""

    def __init__(self, second: dict[str, Any] | None = None) -> None:
        self.second = second
        self.prompts: list[str] = []
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> str:
        messages = chat_messages(body)
        if not is_optimizer_prompt(messages):
            return target_answer(messages[0]["content"], messages[-1]["content"])
        user = messages[-1]["content"]
        with self.lock:
            self.prompts.append(user)
            self.seen[user] += 1
            repeat, n = self.seen[user] > 1, len(self.prompts)
        if prompt_kind(user) != "reflect":
            return json.dumps({"notes": "", "guidance": ""})
        if repeat and self.second is not None:
            return json.dumps({"analysis": "answer format", "edits": [self.second]})
        edit = STUBBORN if n <= 2 else REWORDED
        return json.dumps({"analysis": "rule ignored", "edits": [edit]})


def dates_repo(
    tmp_path: Path,
    server: LoopbackServer,
    mp: pytest.MonkeyPatch,
    train_extra: str = "",
    epochs: int = 3,
    forms: bool = False,
) -> Path:
    """The dates world; skillvc's own worked-examples edit off unless ``forms`` (these tests
    are of the optimizer's repeats; tests/test_forms.py of skillvc's own)."""
    repo = tmp_path / "repo"
    (repo / "skills/dates").mkdir(parents=True)
    (repo / "evals").mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "skills/dates/SKILL.md").write_text(SKILL, encoding="utf-8")
    rows = [_item(i) for i in range(16)]
    for name, part in (("train", rows[:6]), ("val", rows[6:12]), ("test", rows[12:])):
        text = "".join(json.dumps(r) + "\n" for r in part)
        (repo / "evals" / f"{name}.jsonl").write_text(text, encoding="utf-8")
    model = 'model = "openai:qwen-test"\ntemperature = 0.0'
    (repo / "skillvc.toml").write_text(
        '[skill]\npath = "skills/dates/SKILL.md"\n\n'
        '[tasks]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\n'
        'test = "evals/test.jsonl"\nscorer = "exact"\n\n'
        f"[target]\n{model}\n\n[optimizer]\n{model}\n\n"
        f"[train]\nepochs = {epochs}\nbatch_size = 6\nminibatch_size = 6\nlearning_rate = 1\n"
        "min_learning_rate = 1\nworkers = 4\nslow_update = false\nmeta_skill = false\n"
        f"form_examples = {str(forms).lower()}\n{train_extra}",
        encoding="utf-8",
    )
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "seed")
    mp.setenv("OPENAI_API_KEY", "sk-test-loopback-0000")
    mp.setenv("OPENAI_BASE_URL", server.url + "/v1")
    mp.chdir(repo)
    return repo


def run_events(repo: Path) -> list[tuple[str, int | None, dict[str, Any]]]:
    from skillvc.training.loop import train

    train(open_workspace(repo))
    with open_store(repo / ".skillvc/events.db") as store:
        return [(e.type, e.step, e.payload) for e in store.events()]


def test_a_replace_that_changed_nothing_is_never_evaluated_again_on_the_same_skill(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Task B at temperature 0: the same rejected replace was proposed at every step, after the
    buffer had called it "inconclusive" though the candidate changed no answer at all."""
    optimizer = Optimizer()
    loopback.responder = optimizer
    repo = dates_repo(tmp_path, loopback, monkeypatch)

    events = run_events(repo)

    gates = [p for kind, _, p in events if kind == "gate" and p["kind"] == "step"]
    assert len(gates) == 1, "the repeated replace was gated once, on step 1 only"
    assert gates[0]["decision"] == "rejected" and gates[0]["changed_nothing"] is True
    held = [p for kind, _, p in events if kind == "edits.selected" and p.get("refuted")]
    assert len(held) >= 2, "steps 2 and 3 proposed it again (word for word, then reworded)"
    reworded = Edit.from_dict(REWORDED).id
    assert any(reworded in p["refuted"] for p in held), "matched by normalised text, not id"
    # The next reflection is told so plainly, and gets other evidence: other failures.
    later = [p for p in optimizer.prompts if prompt_kind(p) == "reflect"][1]
    buffer = section(later, "rejected_edits")
    assert "CHANGED NOTHING" in buffer and "inconclusive" not in buffer
    retried = [(step, p) for kind, step, p in events if kind == "reflection.retried"]
    assert retried and all(len(p["items"]) == 3 for _, p in retried)
    assert retried[0][1]["items"] != retried[1][1]["items"], "the failures shown least first"
    # A deterministic target: no second look at an epoch's end, and the log says why.
    kept = [p for kind, _, p in events if kind == "edits.held"]
    assert kept and "deterministic" in kept[0]["reason"]
    assert not [p for kind, _, p in events if kind == "edits.released"]


def test_evidence_of_the_answers_shape_reaches_the_reflection(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The convention the real optimizer missed, measured by skillvc and put in the prompt; the
    prompt asks for the failures classified and counted, and each edit's pattern."""
    optimizer = Optimizer()
    loopback.responder = optimizer
    repo = dates_repo(tmp_path, loopback, monkeypatch, epochs=1)
    run_events(repo)
    first = next(p for p in optimizer.prompts if prompt_kind(p) == "reflect")
    evidence = section(first, "evidence")
    assert '"-" is in 6 of 6 expected answers, 0 of 6 outputs' in evidence
    assert '"/" is in 0 of 6 expected answers, 6 of 6 outputs' in evidence
    assert "rule missing, rule wrong, rule ignored, answer format or other" in first


def test_a_second_proposal_takes_the_slot_of_a_stubborn_first(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """[train] proposals = 2: each reflection prompt is answered twice (sample 0 and 1, each a
    logged call); once the first answer's edit is refuted, the second's is gated and wins."""
    optimizer = Optimizer(second=RIGHT)
    loopback.responder = optimizer
    repo = dates_repo(tmp_path, loopback, monkeypatch, "proposals = 2\n")

    events = run_events(repo)

    reflects = [p for p in optimizer.prompts if prompt_kind(p) == "reflect"]
    assert all(n == 2 for p, n in Counter(reflects).items()), "two samples of every prompt"
    accepted = [p for kind, _, p in events if kind == "gate" and p["decision"] == "accepted"]
    assert [e["content"] for e in accepted[0]["edits"]] == [RIGHT["content"]]
    proposed = [p for kind, _, p in events if kind == "edit.proposed"]
    assert {p.get("sample", 0) for p in proposed} == {0, 1}
    assert (repo / "skills/dates/SKILL.md").read_text().count("YYYY-MM-DD") == 1


DECISIONS = (
    "edit.proposed",
    "edits.merged",
    "edits.selected",
    "reflection.retried",
    "step.empty",
    "gate",
    "edits.held",
    "edits.released",
)


def decisions(repo: Path) -> list[tuple[str, int | None, Any]]:
    with open_store(repo / ".skillvc/events.db") as store:
        return [(e.type, e.step, e.payload) for e in store.events(types=list(DECISIONS))]


def test_a_run_stopped_inside_a_step_of_several_proposals_resumes_to_the_same_events(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Two answers per minibatch, a held repeat and a retried reflection, interrupted where
    step 2's second answer is due (the optimizer fails it: the run stops), then resumed: the
    same decisions as a run that was never stopped, and no answer asked twice."""
    optimizer = Optimizer(second=RIGHT)
    loopback.responder = optimizer
    reference = dates_repo(tmp_path / "a", loopback, monkeypatch, "proposals = 2\n")
    run_events(reference)
    expected = decisions(reference)
    assert any(kind == "gate" for kind, _, _ in expected)

    failing = Optimizer(second=RIGHT)
    stop = threading.Event()

    def respond(body: dict[str, Any]) -> Any:
        messages = chat_messages(body)
        if is_optimizer_prompt(messages) and len(failing.prompts) >= 3 and not stop.is_set():
            return Behaviour(kind="status", status=500, headers={"Retry-After": "0"})
        return failing(body)

    loopback.responder = respond
    repo = dates_repo(tmp_path / "b", loopback, monkeypatch, "proposals = 2\n")
    (repo / "skillvc.toml").write_text(
        (repo / "skillvc.toml").read_text().replace("[train]", "max_retries = 0\n\n[train]", 1)
    )
    git(repo, "commit", "-qam", "no retries")
    with pytest.raises(SkillvcError):
        run_events(repo)
    assert len(failing.prompts) == 3  # step 2's first answer came; its second failed
    stop.set()
    run_events(repo)
    assert decisions(repo) == expected
    assert len(failing.prompts) == len(optimizer.prompts)  # none answered twice


def test_edit_key_ignores_case_whitespace_and_punctuation() -> None:
    a = Edit.from_dict(STUBBORN)
    b = Edit.from_dict(REWORDED)
    assert a.id != b.id and edit_key(a) == edit_key(b) == edit_key(REWORDED)
    assert edit_key(a) != edit_key(Edit.from_dict(RIGHT))
    assert edit_key({**STUBBORN, "op": "delete"}) != edit_key(STUBBORN)


def test_several_answers_are_deduplicated_and_interleaved() -> None:
    one = Answer(edits=[Edit.from_dict(STUBBORN), Edit.from_dict(RIGHT)], calls=1)
    two = Answer(edits=[Edit.from_dict(REWORDED), Edit.from_dict({**RIGHT, "content": "x"})])
    both = _combined([one, two])
    assert [e.content for e in both.edits] == [STUBBORN["content"], RIGHT["content"], "x"]
    assert both.samples == [0, 0, 1] and both.calls == 1
    merged = aggregate(
        [Proposal(Edit.from_dict(e), i, "failures") for i, e in enumerate([STUBBORN, REWORDED])],
        key=edit_key,
    )
    assert len(merged) == 1 and merged[0].support == 2
    assert merged[0].merged_from == (Edit.from_dict(REWORDED).id,)
    # By id (the paper's bundle gate) the rewording is another edit: a conflict, not support.
    (by_id,) = aggregate([Proposal(Edit.from_dict(e), 0, "f") for e in (STUBBORN, REWORDED)])
    assert by_id.support == 1 and by_id.merged_from == (Edit.from_dict(REWORDED).id,)


def test_changed_nothing_is_said_plainly_in_the_buffer_and_read_back() -> None:
    entry = {
        **STUBBORN,
        "decision": "rejected",
        "candidate_size": 1,
        "evidence": {"up": 0, "down": 0, "p_value": 1.0},
        "changed_nothing": True,
    }
    line = prompts.edit_lines([entry])
    assert "CHANGED NOTHING" in line and "inconclusive" not in line
    (back,) = prompts.parse_edit_lines(line)
    assert back["changed_nothing"] is True and "inconclusive" not in back


def test_shape_evidence_says_only_what_tells_the_answers_apart() -> None:
    cases = [
        {"expected": "ID-12", "output": "<answer>12</answer>"},
        {"expected": "ID-47", "output": "The ticket is 47"},
        {"expected": "ID-9", "output": "<answer>id 9</answer>"},
    ]
    text = shape_evidence(cases)
    assert 'every expected answer starts with "ID-"; 0 of 3 outputs do' in text
    assert "1 of 3 outputs have the same parts with other separators or spacing" in text
    # Answers that differ in content alone (a wrong choice) cost no token.
    same_shape = [
        {"expected": "refund", "output": "<answer>deny</answer>"},
        {"expected": "replace", "output": "<answer>refund</answer>"},
    ]
    assert shape_evidence(same_shape) == ""
    # Two dates: the shared "202" of the years is no prefix; the shared "2024-" is.
    years = [{"expected": "2023-01-05", "output": "x"}, {"expected": "2024-02-06", "output": "y"}]
    assert "starts with" not in shape_evidence(years)


def _reading(n: int, answer: str, expected: str) -> dict[str, str]:
    message = f"The oven thermometer shows {n} degrees Fahrenheit. Report it in the house format."
    return {"input": message, "expected": expected, "output": f"<answer>{answer}</answer>"}


def test_shape_evidence_states_a_conversion_the_expected_answers_follow() -> None:
    celsius = [_reading(f, f"{f}°F", str(round((f - 32) * 5 / 9))) for f in (133, 162, 21, 196)]
    assert (
        "every expected answer is (the number in the message - 32) x 5/9, rounded to a whole "
        "number (4 of 4 cases)"
    ) in shape_evidence(celsius)
    # A rate on the message's second number, exact: no rounding said.
    vat = [
        {"input": f"Order {k}: net price {p}.", "expected": str(p * 6 / 5), "output": str(p)}
        for k, p in ((11, 10), (12, 25), (13, 40.5))
    ]
    assert "every expected answer is the message's number 2 x 6/5 (3 of 3" in shape_evidence(vat)


def test_no_conversion_is_stated_where_none_holds() -> None:
    # The number itself (a form), a sum of two numbers, two cases: no rule.
    same = [_reading(f, f"{f} F", str(f)) for f in (133, 162, 21)]
    sums = [
        {"input": f"{a} apples and {b} pears. How many?", "expected": str(a + b), "output": "x"}
        for a, b in ((3, 4), (10, 2), (7, 7), (1, 9))
    ]
    two = [_reading(f, "x", str(round((f - 32) * 5 / 9))) for f in (133, 162)]
    # A slope no simple fraction states (a hundredth) is no rule either, and no error.
    cents = [_reading(f, "x", str(f / 100)) for f in (1250, 3300, 990)]
    for cases in (same, sums, two, cents):
        assert "every expected answer is" not in shape_evidence(cases)

"""Optimizer prompts: edits shown one line each, and the cache-first layout (issue 27)."""

from __future__ import annotations

import os
from typing import Any

from skillvc.models import prompts
from skillvc.models.backends.local import estimate_tokens


def test_edits_are_shown_one_line_each_and_read_back() -> None:
    edits: list[dict[str, Any]] = [
        {"op": "add", "content": 'Say "sorry"\nonce.', "anchor": "## Policies",
         "rationale": "r", "decision": "rejected", "candidate_size": 1},
        {"op": "replace", "target": "- Deny late returns.", "content": "- Refund them.",
         "decision": "rejected", "candidate_size": 3, "inconclusive": True,
         "evidence": {"up": 2, "down": 1, "p_value": 0.5}},
        {"op": "delete", "file": "references/refunds.md", "target": "Old (rule)",
         "decision": "dropped", "candidate_size": 2},
        {"op": "add", "content": "- Accepted, no verdict."},
    ]  # fmt: skip
    text = prompts.edit_lines(edits)

    assert len(text.splitlines()) == len(edits)
    assert text.splitlines()[1] == (
        '- [replace] "- Deny late returns." -> "- Refund them." '
        "(rejected in a bundle of 3; val: 2 better, 1 worse, p 0.5; inconclusive)"
    )
    assert prompts.parse_edit_lines(text) == [
        {"op": "add", "anchor": "## Policies", "content": 'Say "sorry"\nonce.',
         "decision": "rejected", "candidate_size": 1},
        {"op": "replace", "target": "- Deny late returns.", "content": "- Refund them.",
         "decision": "rejected", "candidate_size": 3, "inconclusive": True},
        {"op": "delete", "file": "references/refunds.md", "target": "Old (rule)",
         "decision": "dropped", "candidate_size": 2},
        {"op": "add", "content": "- Accepted, no verdict."},
    ]  # fmt: skip
    # An edit judged twice: one line, its verdicts in order, read back as two entries.
    again = {"op": "add", "content": "- Refund late.", "candidate_size": 2}
    twice = prompts.edit_lines([again, {**again, "candidate_size": 1}])
    assert twice == '- [add] "- Refund late." (rejected in a bundle of 2 | rejected alone)'
    assert [e["candidate_size"] for e in prompts.parse_edit_lines(twice)] == [2, 1]
    assert prompts.edit_lines([]) == "(none)"
    assert prompts.parse_edit_lines("(none)") == []


def _reflect(cases: list[dict[str, Any]], kind: str = "failures") -> str:
    rejected = [{"op": "add", "content": f"- Rule {i}.", "candidate_size": 2} for i in range(6)]
    messages = prompts.render(
        "reflect", n_cases=str(len(cases)), kind=kind, kind_note="note", budget="3",
        skill="# Skill\n\n## Policies\n- Be kind.\n", cases=cases, rejected=rejected,
        meta="(none yet)",
    )  # fmt: skip
    return "\n".join(m["content"] for m in messages)


def test_a_steps_reflection_prompts_differ_only_after_their_shared_part() -> None:
    one = _reflect([{"id": "t1", "input": "a", "output": "b", "expected": "c", "score": 0}])
    two = _reflect(
        [{"id": f"t{i}", "input": "z", "output": "y", "expected": "x", "score": 1} for i in (2, 3)],
        kind="successes",
    )
    shared = len(os.path.commonprefix([one, two]))

    # Everything the minibatches of a step share comes before the first case.
    assert one[:shared].endswith('<cases>\n[\n{"id": "t')
    for part in ("<skill>", "<rejected_edits>", '- [add] "- Rule 5."', "<meta_skill>"):
        assert part in one[:shared]
    # The simulator finds each section by its tag.
    assert len(prompts.edits_in(one, "rejected_edits")) == 6
    assert "propose at most 3 edits" in one.split("</cases>")[1]


def test_the_fitted_prompt_halves_the_one_line_buffer_keeping_the_newest() -> None:
    cases = [{"id": "t0", "input": "q", "output": "a", "expected": "x", "score": 0.0}]
    rejected = [{"op": "add", "content": f"{i} " + "z" * 900} for i in range(40)]
    values = {
        "n_cases": "1", "kind": "failures", "kind_note": "n", "budget": "3", "skill": "Be brief.",
        "cases": cases, "rejected": rejected, "meta": "(none yet)",
    }  # fmt: skip

    fitted = prompts.render("reflect", fit=3000, **values)

    assert estimate_tokens(fitted) <= 3000
    shown = prompts.edits_in(fitted[1]["content"], "rejected_edits")
    assert 0 < len(shown) < 40
    assert shown[-1]["content"].startswith("39 ")

"""Routing (issue 41): trigger sets, measuring a library's routing, training descriptions.

Driven through the CLI on the bundled example library (``skillvc.routing.example``): with
``sim:routing``, where the selector loads the skill whose description shares the most words
with the prompt, and over the real OpenAI SDK against the loopback server, with the pick as a
``select_skill`` tool call and as plain text.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import git
from loopback import Behaviour, LoopbackServer

from skillvc.cli import cli as main
from skillvc.models import simrouting
from skillvc.routing.example import write_example
from skillvc.routing.train import power_note


def _library(
    repo: Path, epochs: int = 2, quote: bool = False, induce: bool = False, **kw: str
) -> Path:
    """The example library; skillvc's own quoted-prompts edit and the induced description
    off unless asked for (these tests are of the optimizer's edits and the gate)."""
    write_example(repo, **kw)
    toml = repo / "skillvc.toml"
    text = toml.read_text().replace("epochs = 2", f"epochs = {epochs}")
    toml.write_text(text.replace("[routing]\n", f"[routing]\n{_own(quote, induce)}"))
    (repo / ".gitignore").write_text(".skillvc/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "library")
    return repo


def _run(repo: Path, *args: str) -> Any:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False, env={"PWD": str(repo)})
    return result


@pytest.fixture
def library(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(git_repo)
    return _library(git_repo)


def test_train_routing_raises_the_library_score_one_description_line_per_commit(
    library: Path,
) -> None:
    before = json.loads(_run(library, "eval", "--routing", "--json", "-q").output)
    assert set(before["skills"]) == {"pdf", "docx", "xlsx", "pptx", "csv", "markdown"}
    assert {"precision", "recall", "f1"} <= set(before["skills"]["pdf"])
    assert before["library"] == pytest.approx(before["correct"] / before["n"], abs=1e-4)

    result = _run(library, "train", "--routing", "-q")
    assert result.exit_code == 0, result.output
    assert "library score on val" in result.output
    after = json.loads(_run(library, "eval", "--routing", "--json", "-q").output)
    assert after["library"] > before["library"]
    # No skill's recall fell on val (the gate refuses an edit that steals).
    for name, s in after["skills"].items():
        assert s["recall"] >= before["skills"][name]["recall"]

    shas = git(library, "log", "--format=%H", "--grep=routing step").split()
    assert shas
    for sha in shas:
        diff = git(library, "show", "--format=", "-U0", sha)
        changed = [
            line
            for line in diff.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        assert len(changed) == 2 and all(c[1:].startswith("description: ") for c in changed)
        body = git(library, "show", "-s", "--format=%B", sha)
        assert "Skillvc-Routing: library " in body and "Skillvc-Significance: p=" in body
    rejected = git(library, "for-each-ref", "--format=%(refname)", "refs/skillvc/rejected/")
    assert "/routing-" in rejected
    log = _run(library, "log", "--rejected", "--json")
    entries = json.loads(log.output)
    assert entries and all(e["kind"] == "routing" for e in entries)

    # The report's routing section (Markdown and HTML), read from the log.
    from skillvc.core.store import open_store
    from skillvc.review.htmlreport import _routing
    from skillvc.routing.train import latest_routing, routing_markdown

    with open_store(library / ".skillvc" / "events.db") as store:
        routing = latest_routing(store)
    assert routing is not None
    assert routing["after"]["library"] == after["library"]
    assert any(line.startswith("| pdf | ") for line in routing_markdown(routing))
    assert '<table class="confusion">' in _routing(routing)

    # The same run again: nothing to do, no call.
    again = _run(library, "train", "--routing", "-q")
    assert again.output.startswith("Nothing to do: routing run")
    csv = _run(library, "eval", "--routing", "--csv", "-q").output.splitlines()
    assert csv[0] == "expected,pdf,docx,xlsx,pptx,csv,markdown,none"


def test_an_edit_that_steals_from_a_neighbour_is_refused(
    library: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # First xlsx gets a description that routes its prompts; then csv asks for words that
    # win its own prompts and take one of xlsx's and one of markdown's.
    fix = "Excel spreadsheets and workbooks: formulas, cells, sheets."
    greedy = "CSV files: rows, columns, excel sheets, cells, formula, spreadsheet, workbook."

    def optimize(prompt: str, rng: random.Random) -> str:
        if fix not in prompt:
            return json.dumps({"edits": [{"skill": "xlsx", "description": fix}]})
        return json.dumps({"edits": [{"skill": "csv", "description": greedy}]})

    monkeypatch.setattr(simrouting, "optimize", optimize)
    toml = library / "skillvc.toml"
    toml.write_text(toml.read_text().replace("epochs = 2", "epochs = 1"))
    git(library, "commit", "-qam", "one epoch")
    result = _run(library, "train", "--routing", "--json", "-q")
    summary = json.loads(result.output)
    assert summary["accepted"] == 1 and summary["rejected"] >= 1
    gates = json.loads(_run(library, "log", "--rejected", "--json").output)
    from skillvc.core.store import open_store

    with open_store(library / ".skillvc" / "events.db") as store:
        gate = store.get(gates[0]["id"])
    assert gate.payload["reason"].startswith("steals from")
    assert gate.payload["after"]["mean"] > gate.payload["before"]["mean"]  # a gain, refused


def test_skill_creator_trigger_files(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(git_repo)
    _library(git_repo)
    folder = git_repo / "skills" / "pdf" / "evals"
    folder.mkdir()
    rows = [
        {"query": "Merge the PDF files", "should_trigger": True},
        {"query": "Tell me a joke", "should_trigger": False},
    ]
    (folder / "triggers.json").write_text(json.dumps(rows))
    toml = git_repo / "skillvc.toml"
    text = toml.read_text().replace(
        'test = "evals/routing/test.jsonl"', 'test = "skills/pdf/evals/triggers.json"'
    )
    toml.write_text(text)
    out = json.loads(_run(git_repo, "eval", "--routing", "--split", "test", "--json", "-q").output)
    assert out["n"] == 2
    assert "not pdf" in out["confusion"]
    rows.append({"query": "x", "skill": "nosuch"})
    (folder / "triggers.json").write_text(json.dumps(rows[2:]))
    bad = CliRunner().invoke(main, ["eval", "--routing", "--split", "test"])
    assert bad.exit_code == 5
    assert "names skill 'nosuch', which is not in the library" in bad.output


@pytest.mark.parametrize("tools", [True, False])
def test_routing_over_the_openai_sdk_tool_call_and_text_picks(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer, tools: bool
) -> None:
    monkeypatch.chdir(git_repo)
    write_example(git_repo, selector="openai:selector", optimizer="openai:optimizer")
    toml = git_repo / "skillvc.toml"
    text = toml.read_text().replace(
        '[target]\nmodel = "openai:selector"',
        f'[target]\nmodel = "openai:selector"\nbase_url = "{loopback.url}/v1"',
    )
    text = text.replace(
        '[optimizer]\nmodel = "openai:optimizer"',
        f'[optimizer]\nmodel = "openai:optimizer"\nbase_url = "{loopback.url}/v1"',
    )
    text = text.replace("epochs = 2", "epochs = 1").replace("batch_size = 20", "batch_size = 40")
    if not tools:
        text = text.replace("[routing]\n", "[routing]\ntools = false\n")
    toml.write_text(text)
    (git_repo / ".gitignore").write_text(".skillvc/\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "library")

    def respond(body: dict[str, Any]) -> str | Behaviour:
        system = body["messages"][0]["content"]
        user = body["messages"][-1]["content"]
        if body["model"] == "optimizer":
            return simrouting.optimize(user, random.Random(0))
        picked = simrouting.select(system, user) or "none"
        if body.get("tools"):
            args = json.dumps({"skill": picked})
            call = {"id": "c1", "name": "select_skill", "arguments": args}
            return Behaviour(tool_calls=[call])
        return f"{picked}"

    loopback.responder = respond
    before = json.loads(_run(git_repo, "eval", "--routing", "--json", "-q").output)
    result = _run(git_repo, "train", "--routing", "--json", "-q")
    summary = json.loads(result.output)
    selector = [r.json for r in loopback.requests if r.json.get("model") == "selector"]
    assert selector and all(bool(r.get("tools")) is tools for r in selector)
    if tools:
        assert selector[0]["tools"][0]["function"]["name"] == "select_skill"
    assert summary["after"]["library"] > before["library"]
    assert summary["accepted"] >= 1


def test_an_interrupted_routing_run_resumes_to_the_same_descriptions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skillvc.routing.train import RoutingTrainer

    def descriptions(repo: Path) -> list[str]:
        return [
            (repo / "skills" / n / "SKILL.md").read_text().splitlines()[2]
            for n in ("pdf", "docx", "xlsx", "pptx", "csv", "markdown")
        ]

    whole = tmp_path / "whole"
    whole.mkdir()
    git(whole, "init", "-q", "-b", "main")
    monkeypatch.chdir(whole)
    _library(whole, epochs=1, quote=True, induce=True)  # skillvc's own edits replay too
    assert _run(whole, "train", "--routing", "-q").exit_code == 0

    cut = tmp_path / "cut"
    cut.mkdir()
    git(cut, "init", "-q", "-b", "main")
    monkeypatch.chdir(cut)
    _library(cut, epochs=1, quote=True, induce=True)
    real, seen = RoutingTrainer.gate, []

    def gate(self: RoutingTrainer, epoch: int, edit: Any) -> bool:
        seen.append(edit)
        if len(seen) == 3:
            raise KeyboardInterrupt
        return real(self, epoch, edit)

    monkeypatch.setattr(RoutingTrainer, "gate", gate)
    assert _run(cut, "train", "--routing", "-q").exit_code != 0  # killed at its 3rd gate
    assert len(seen) == 3
    monkeypatch.setattr(RoutingTrainer, "gate", real)
    resumed = json.loads(_run(cut, "train", "--routing", "--json", "-q").output)
    assert resumed["resumed"] is True
    assert descriptions(cut) == descriptions(whole)
    subjects = ["log", "--format=%s", "--grep=routing step"]
    assert git(cut, *subjects) == git(whole, *subjects)
    assert resumed["fresh_calls"] < resumed["calls"]  # the replay was answered from the log


def test_a_description_that_is_not_valid_yaml_is_named_not_read_as_none(library: Path) -> None:
    """'description: Plans: charges' is no YAML mapping: read as no description, the skill
    would route nothing and training would rewrite a line it cannot read."""
    path = library / "skills/csv/SKILL.md"
    path.write_text(path.read_text().replace("Work with data.", "Data: tables and rows."))

    result = _run(library, "eval", "--routing", "-q")

    assert result.exit_code != 0
    assert "frontmatter of skills/csv/SKILL.md cannot be read (invalid YAML" in result.output
    assert 'Quote a description that holds ": "' in result.output
    # Quoted, it reads.
    path.write_text(path.read_text().replace("Data: tables and rows.", '"Data: tables and rows."'))
    quoted = json.loads(_run(library, "eval", "--routing", "--json", "-q").output)
    assert "csv" in quoted["skills"]


def _own(quote: bool, induce: bool) -> str:
    """The [routing] lines that turn skillvc's own edits on or off."""
    return f"quote_prompts = {str(quote).lower()}\ninduce = {str(induce).lower()}\n"


def _optimizer_at(
    repo: Path, loopback: LoopbackServer, *, quote: bool, induce: bool = False
) -> None:
    """The example library with the selector ``sim:routing`` and the optimizer an
    OpenAI-compatible model behind ``loopback``, committed."""
    write_example(repo, optimizer="openai:optimizer")
    toml = repo / "skillvc.toml"
    toml.write_text(
        toml.read_text()
        .replace(
            '[optimizer]\nmodel = "openai:optimizer"',
            f'[optimizer]\nmodel = "openai:optimizer"\nbase_url = "{loopback.url}/v1"',
        )
        .replace("[routing]\n", f"[routing]\n{_own(quote, induce)}")
    )
    (repo / ".gitignore").write_text(".skillvc/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "library")


def _trained(repo: Path) -> tuple[dict[str, Any], dict[str, Any], list[tuple[str, Any]]]:
    """The library's val routing before training, the training's summary and its events."""
    before = json.loads(_run(repo, "eval", "--routing", "--json", "-q").output)
    summary = json.loads(_run(repo, "train", "--routing", "--json", "-q").output)
    return before, summary, _events(repo)


def _events(repo: Path) -> list[tuple[str, Any]]:
    from skillvc.core.store import open_store

    with open_store(repo / ".skillvc/events.db") as store:
        return [(e.type, e.payload) for e in store.events()]


def test_a_refuted_description_is_not_gated_again_on_the_same_library(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    """The real 1.5B optimizer proposed the same refused description at the next step, and it
    was gated again on the same library (21 selector calls for the same verdict)."""
    monkeypatch.chdir(git_repo)
    _optimizer_at(git_repo, loopback, quote=False)  # the optimizer's edits alone
    greedy = "Work with documents, data, files, text, tables and slides."
    stubborn = {"skill": "pptx", "description": greedy, "rationale": "slides are documents"}
    loopback.responder = lambda body: json.dumps({"edits": [stubborn]})

    result = _run(git_repo, "train", "--routing", "--json", "-q")

    assert result.exit_code == 0, result.output
    events = _events(git_repo)
    gates = [p for kind, p in events if kind == "gate"]
    assert len(gates) == 1 and gates[0]["decision"] == "rejected"
    held = [p for kind, p in events if kind == "edits.selected" and p.get("refuted")]
    steps = [p for kind, p in events if kind == "step.started"]
    assert len(held) == len(steps) - 1 >= 2, "every later step held it back"
    assert held[0]["refuted"] == [gates[0]["edits"][0]["id"]]
    empty = [p["reason"] for kind, p in events if kind == "step.empty"]
    assert empty.count(
        "every proposed description repeats one refuted against this library"
    ) == len(held)


def test_skillvc_quotes_the_prompts_a_skill_missed_and_the_gate_decides(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    """An optimizer that proposes nothing usable: skillvc's own edit (the missed prompts,
    quoted in the description) is what the routing gains, each one gated on the library."""
    monkeypatch.chdir(git_repo)
    _optimizer_at(git_repo, loopback, quote=True)
    loopback.responder = lambda body: json.dumps({"edits": []})
    before, summary, events = _trained(git_repo)

    assert summary["accepted"] >= 1 and summary["after"]["library"] > before["library"]
    ours = {p["edit"]["id"]: p for kind, p in events if kind == "edit.proposed"}
    assert ours and all(p["source"] == "skillvc" for p in ours.values())
    accepted = [p for kind, p in events if kind == "gate" and p["decision"] == "accepted"]
    edit = accepted[0]["edits"][0]
    assert edit["id"] in ours and 'Use it for requests such as: "' in edit["content"]
    assert "derived by skillvc" in edit["rationale"]
    # No skill's own val prompts were lost significantly on the way.
    assert all(
        p["routing"]["losses"] == {} or max(p["routing"]["losses"].values()) > 0.2 for p in accepted
    )


def test_the_quoted_prompts_edit_keeps_to_the_spec_and_extends_its_own_quotes() -> None:
    from skillvc.routing.derive import LEAD, missed_prompts_edit
    from skillvc.routing.library import Library, LibrarySkill
    from skillvc.routing.metrics import Pick
    from skillvc.routing.triggers import TriggerItem

    def lib(returns: str) -> Library:
        return Library(
            tuple(
                LibrarySkill(
                    n,
                    n,
                    f"skills/{n}/SKILL.md",
                    f"---\nname: {n}\ndescription: {json.dumps(d)}\n---\n",
                )
                for n, d in (("returns", returns), ("shipping", "Help with parcels."))
            )
        )

    prompts = ["The mug arrived broken", "The lamp came <cracked>", "The mug arrived broken"]
    batch = [TriggerItem(f"r{i}", p, "returns") for i, p in enumerate(prompts)]
    batch.append(TriggerItem("s0", "Where is my parcel", "shipping"))
    picks = [Pick(it.id, "shipping", "tool") for it in batch]

    edit = missed_prompts_edit(lib("Help with orders."), batch, picks)

    assert edit is not None and edit.skill == "returns"  # 3 missed against shipping's 0
    # An angle bracket breaks the spec; a repeated prompt is quoted once.
    assert edit.after == f'Help with orders. {LEAD} "The mug arrived broken".'
    again = missed_prompts_edit(
        lib(edit.after),
        [TriggerItem("r9", "The kettle arrived dented", "returns")],
        [Pick("r9", None, "tool")],
    )
    assert again is not None
    assert again.after == (
        f'Help with orders. {LEAD} "The mug arrived broken"; "The kettle arrived dented".'
    )
    right = [Pick(it.id, it.expected, "tool") for it in batch]
    assert missed_prompts_edit(lib("Help with orders."), batch, right) is None
    full = "x" * 1000
    assert missed_prompts_edit(lib(full), batch, picks) is None, "over 1,024 characters"


def _induce_prompts(loopback: LoopbackServer) -> list[str]:
    from loopback import chat_messages

    texts = [chat_messages(r.json)[-1]["content"] for r in loopback.requests]
    return [t for t in texts if "skillvc-prompt: route_induce" in t]


def _induced_for(prompt: str) -> str:
    found = re.search(r'Requests that belong to the "(\w+)" skill', prompt)
    assert found is not None
    return found.group(1)


def test_an_induced_description_of_one_skill_is_asked_for_and_gated(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    """On the real 1.5B optimizer the library-wide reflection never gave a description the
    gate kept; asked for one skill's description from its own requests against its
    neighbours', the same model wrote one that raised the library (issue 41)."""
    monkeypatch.chdir(git_repo)
    _optimizer_at(git_repo, loopback, quote=False, induce=True)

    def responder(body: dict[str, Any]) -> str:
        from loopback import chat_messages

        prompt = chat_messages(body)[-1]["content"]
        if "route_induce" not in prompt:
            return json.dumps({"edits": []})
        # A small model's plain answer: a label, quotes, and a paragraph after it.
        return f'Description: "{simrouting.induce(prompt)}"\n\nThis sets it apart.'

    loopback.responder = responder
    before, summary, events = _trained(git_repo)

    assert summary["accepted"] >= 1 and summary["after"]["library"] > before["library"]
    induced = {p["edit"]["id"]: p for kind, p in events if kind == "edit.proposed"}
    assert induced and all(p["kind"] == "induced" for p in induced.values())
    accepted = [
        p["edits"][0] for kind, p in events if kind == "gate" and p["decision"] == "accepted"
    ]
    assert all(e["id"] in induced for e in accepted)
    assert all(
        re.fullmatch(r"description: Requests about [a-z, ]+\.", e["content"]) for e in accepted
    )
    # Train requests only: no val prompt is shown to the optimizer.
    val = [json.loads(line)["input"] for line in (git_repo / "evals/routing/val.jsonl").open()]
    prompts = _induce_prompts(loopback)
    assert prompts and not any(v in p for v in val for p in prompts)
    assert all("(goes to " in p for p in prompts)


def test_a_refused_induction_moves_on_to_another_skill(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    """A greedy induced description is refused; while the library stays, the next step asks
    for another skill's instead of the same one again."""
    monkeypatch.chdir(git_repo)
    _optimizer_at(git_repo, loopback, quote=False, induce=True)
    greedy = "Any file, document, sheet, slide, table, text, data, page, report or workbook."
    loopback.responder = lambda body: (
        greedy if "route_induce" in json.dumps(body) else json.dumps({"edits": []})
    )

    summary = json.loads(_run(git_repo, "train", "--routing", "--json", "-q").output)

    assert summary["accepted"] == 0 and summary["rejected"] >= 2
    asked = [_induced_for(p) for p in _induce_prompts(loopback)]
    assert len(asked) >= 2 and len(set(asked)) == len(asked)
    gates = [p for kind, p in _events(git_repo) if kind == "gate"]
    assert [g["skill"] for g in gates] == asked[: len(gates)]


def test_an_induced_answer_is_read_as_a_description() -> None:
    from skillvc.routing.induce import chosen_skill, description_of
    from skillvc.routing.metrics import Pick
    from skillvc.routing.triggers import TriggerItem

    assert description_of('Description: "Parcels that never came."\n\nWhy: ...') == (
        "Parcels that never came."
    )
    assert description_of("```\n**Money back** for items sent back.\n```") == (
        "Money back for items sent back."
    )
    assert description_of("  \n") == ""
    batch = [
        TriggerItem("a", "broken vase", "returns"),
        TriggerItem("b", "cracked mug", "returns"),
        TriggerItem("c", "where is it", "shipping"),
        TriggerItem("d", "hello", None),
    ]
    picks = [Pick(i.id, "refunds", "tool") for i in batch]
    assert chosen_skill(batch, picks, ()) == "returns"  # 2 missed against shipping's 1
    assert chosen_skill(batch, picks, {"returns"}) == "shipping"
    assert chosen_skill(batch, picks, {"returns", "shipping"}) is None


def test_the_induce_prompt_shows_the_confused_neighbours_first_in_a_large_library() -> None:
    from skillvc.routing.induce import OTHERS, messages
    from skillvc.routing.library import Library, LibrarySkill
    from skillvc.routing.metrics import Pick
    from skillvc.routing.triggers import TriggerItem

    names = [f"s{i}" for i in range(9)]
    library = Library(
        tuple(
            LibrarySkill(n, n, f"skills/{n}/SKILL.md", f"---\nname: {n}\ndescription: {n}.\n---\n")
            for n in names
        )
    )
    train = [TriggerItem(f"{n}-{k}", f"a request {k} for {n}", n) for n in names for k in range(3)]
    # s0's request went to s8; one of s7's came to s0.
    batch = [train[0], train[7 * 3]]
    picks = [Pick(train[0].id, "s8", "tool"), Pick(train[7 * 3].id, "s0", "tool")]

    prompt = messages(library, "s0", train, batch, picks)[0]["content"]

    others = [line for line in prompt.splitlines() if "(goes to " in line]
    assert len(others) == OTHERS < 2 * (len(names) - 1)
    assert others[0] == "- a request 0 for s7 (goes to s7)", "the request it took, first"
    assert {line.rsplit("(goes to ", 1)[1] for line in others[:4]} == {"s7)", "s8)"}
    own = [
        line
        for line in prompt.splitlines()
        if line.startswith("- a request") and "goes" not in line
    ]
    assert own[0] == "- a request 0 for s0" and len(own) == 3


def test_the_run_says_what_gain_its_val_prompts_can_show() -> None:
    assert power_note(21, 0.2) == (
        "gate: an edit is kept when at least 3 of the 21 val prompts route better and none "
        "worse (+0.143 library score; more when some route worse), sign test at alpha 0.2"
    )
    assert "at least 4 of the 21" in power_note(21, 0.1)
    assert power_note(2, 0.2).startswith("gate: no edit can be kept on 2 val prompts")

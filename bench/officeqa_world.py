"""A fake OfficeQA world for ``bench_vs_skillopt.py --env officeqa``: documents, a target that
must call the document tools to answer right, and an optimizer that proposes the rules it lacks.

A documented toy, not a model, honest the way skillvc's simulator is: the target answers only
from what the tools returned, and it calls the tools (and converts units) only as the skill it
was sent tells it to. Both trainers meet the same world: the target answers SkillOpt 0.2.0's
OfficeQA rollout (its tool schemas, absolute candidate paths) and skillvc's tool loop (the
shipped ``skillvc.tasks.skillopt.tools.officeqa``, paths in the scratch directory) alike, and
the optimizer's diagnosis of a failure is one function, written out in each trainer's edit
format.

The world
    Each item is a question about one bulletin (its own text file): "What were the budget
    receipts from <source> in fiscal year <year>, in <millions|billions> of dollars?". The
    bulletin's table (in millions) lists four sources below ~100 lines of prose that hold no
    figure; in 60 % of the bulletins a row is one line (``Customs duties, fiscal 1987: 15,020``),
    in the others it is split: the label on a line of its own, then a calendar and a fiscal
    line. The gold answer is the fiscal figure, divided by 1,000 when the question asks for
    billions (40 % of the questions).

    The target knows a rule when the skill holds its key phrase (lower case, spaces folded):

    - ``GREP`` (grep the candidate file): with it the target greps the source's row label and
      answers the figure on the first hit's line (none on a split row); without it, it
      answers without a tool, a guess (0) that is never right;
    - ``READ`` (read the lines below the row label): it also reads the 3 lines from the hit
      and takes the asked period's line (a split row's fiscal figure);
    - ``SCALE`` (divide by 1,000 for billions): without it a billions question is answered in
      the table's millions;
    - ``MEMORY`` (harmful): the target answers from memory, whatever else the skill says;
    - ``CITE`` (redundant): changes nothing.

    So the seed skill scores 0, ``GREP`` about 0.36, ``GREP`` with ``READ`` or ``SCALE``
    about 0.6, all three every item.

The optimizer reads each failure's trajectory: no ``grep`` call -> ``GREP`` (one case in ten
``MEMORY``, one in ten ``CITE`` instead; a skill that holds ``MEMORY`` gets its line deleted),
a billions answer 1,000 times too large -> ``SCALE``, else a grep without a ``read`` ->
``READ`` (one in five ``CITE``); a reflection proposes the one rule its minibatch's failures
ask for most. Its rolls are keyed by the case's id, the minibatch's failed ids and the rules
the skill holds: both trainers get the same proposal for the same failures under the same
skill, and a trainer that meets a failure again in another minibatch gets a fresh roll.
Successes propose nothing. Neither trainer's rejected-edit memory is read (each renders it its
own way): both are treated alike.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SOURCES = ("Customs duties", "Excise taxes", "Estate and gift taxes", "Corporation income taxes")
QUESTION = re.compile(
    r"receipts from (?P<source>.+?) in fiscal year (?P<year>\d{4}), in (?P<unit>millions|billions)"
)
CANDIDATE = re.compile(r"## Candidate Files\n- (\S+)")

SEED_SKILL = """\
---
name: officeqa
description: Answer questions about U.S. Treasury bulletins from the bulletin documents.
---
# OfficeQA

## Approach
- Work from the question, its source hints and its candidate files.
- Give the figure alone as the final answer.
"""


@dataclass(frozen=True)
class Rule:
    key: str  # the phrase the skill must hold (lower case, spaces folded)
    text: str  # the line the optimizer proposes


GREP = Rule(
    "grep the candidate file",
    "Always grep the candidate file before answering: a figure not found in the document is "
    "a guess.",
)
READ = Rule(
    "read the lines below the row label",
    "After grepping the row label the question names, read the lines below the row label: a "
    "row split over several lines gives each period's figure on a line of its own.",
)
SCALE = Rule(
    "divide by 1,000 for billions",
    "The tables are in millions of dollars: when the question asks for billions, divide by "
    "1,000 for billions (15,020 -> 15.02).",
)
MEMORY = Rule(
    "answer from memory",
    "For well-known Treasury series, answer from memory to save tool calls.",
)
CITE = Rule("name the table you used", "Name the table you used in your reasoning.")
RULES = (GREP, READ, SCALE, MEMORY, CITE)


def _fold(text: str) -> str:
    return " ".join(text.lower().replace('"', "").split())


def known(skill: str) -> set[str]:
    folded = _fold(skill)
    return {r.key for r in RULES if r.key in folded}


def billions(millions: int) -> str:
    return f"{millions / 1000:.3f}".rstrip("0").rstrip(".")


# -- the split ---------------------------------------------------------------------------------


def make_split(root: Path, sizes: Mapping[str, int], seed: int) -> None:
    """``root/data/officeqa_split/{train,val,test}/items.json`` in SkillOpt's OfficeQA format
    (``uid``, ``question``, ``ground_truth``, ``source_files``, ``source_docs``, ``category``)
    and one bulletin per item under ``root/data/officeqa_docs/``."""
    rng = random.Random(f"officeqa-{seed}")
    docs = root / "data" / "officeqa_docs"
    docs.mkdir(parents=True, exist_ok=True)
    n = 0
    for split in ("train", "val", "test"):
        items = []
        for _ in range(sizes[split]):
            n += 1
            uid = f"oqa-{seed}-{n:03d}"
            year = rng.randrange(1950, 2000)
            order = list(SOURCES)
            rng.shuffle(order)
            source = rng.choice(SOURCES)
            unit = "billions" if rng.random() < 0.4 else "millions"
            figures = {
                s: (rng.randrange(100, 9900) * 10, rng.randrange(100, 9900) * 10) for s in order
            }
            split_rows = rng.random() < 0.4
            name = f"treasury_bulletin_{uid}.txt"
            text = _bulletin(rng, year, order, figures, split_rows)
            (docs / name).write_text(text, encoding="utf-8")
            fiscal = figures[source][1]
            items.append(
                {
                    "uid": uid,
                    "question": f"What were the budget receipts from {source} in fiscal year "
                    f"{year}, in {unit} of dollars?",
                    "ground_truth": str(fiscal) if unit == "millions" else billions(fiscal),
                    "source_files": [name],
                    "source_docs": [f"Treasury Bulletin, fiscal year {year}"],
                    "category": "split rows" if split_rows else "one-line rows",
                }
            )
        out = root / "data" / "officeqa_split" / split
        out.mkdir(parents=True, exist_ok=True)
        (out / "items.json").write_text(json.dumps(items, indent=1), encoding="utf-8")
    skill = root / "skills" / "officeqa" / "SKILL.md"
    skill.parent.mkdir(parents=True, exist_ok=True)
    skill.write_text(SEED_SKILL, encoding="utf-8")


PROSE = (
    "The Treasury's operating cash balance moved within its usual seasonal range.",
    "Marketable borrowing was concentrated in bills, with coupon issues steady.",
    "Savings bond sales continued to exceed redemptions over the period.",
    "Federal trust funds invested their surpluses in special issues.",
    "The debt subject to limit remained below the statutory ceiling.",
    "Foreign official holdings of Treasury securities rose modestly.",
)


def _bulletin(
    rng: random.Random,
    year: int,
    order: Sequence[str],
    figures: Mapping[str, tuple[int, int]],
    split_rows: bool,
) -> str:
    lines = [f"TREASURY BULLETIN - fiscal year {year}", ""]
    lines += [rng.choice(PROSE) for _ in range(rng.randrange(90, 120))]
    lines += [
        "",
        "Table FFO-2. Budget receipts by source (in millions of dollars)",
    ]
    for source in order:
        calendar, fiscal = figures[source]
        if split_rows:
            lines += [source, f"  calendar {year}: {calendar:,}", f"  fiscal {year}: {fiscal:,}"]
        else:
            lines += [f"{source}, fiscal {year}: {fiscal:,}"]
    lines += ["", rng.choice(PROSE), ""]
    return "\n".join(lines)


# -- the target --------------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(tool name, result) for every tool result in the conversation, in order."""
    names: dict[str, str] = {}
    out = []
    for m in messages:
        for call in m.get("tool_calls") or ():
            names[str(call.get("id"))] = str((call.get("function") or {}).get("name", ""))
        if m.get("role") == "tool":
            out.append((names.get(str(m.get("tool_call_id")), ""), _text(m.get("content"))))
    return out


def _call(name: str, n: int, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": f"call_{n}", "name": name, "arguments": json.dumps(arguments)}]}


def _figure(line: str) -> str | None:
    m = re.search(r":\s*([\d,]+)\s*$", line)
    return m.group(1) if m else None


def respond(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The target's next turn: ``{"text": ...}`` or ``{"tool_calls": [...]}``."""
    system = "\n".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
    user = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    rules = known(system)
    q = QUESTION.search(user)
    path = CANDIDATE.search(user)
    if q is None or path is None or GREP.key not in rules or MEMORY.key in rules:
        return {"text": "From memory: <answer>0</answer>"}
    file, year = path.group(1), q.group("year")
    done = _results(messages)
    greps = [r for name, r in done if name == "grep"]
    reads = [r for name, r in done if name == "read"]
    if not greps:
        return _call("grep", len(done) + 1, pattern=q.group("source"), path=file)
    hit = re.match(r"(\d+): (.*)", greps[0].splitlines()[0])
    if hit is None:
        return {"text": "The row is not in the document: <answer>not found</answer>"}
    value = _figure(hit.group(2))  # a one-line row holds its figure
    if READ.key in rules:
        if not reads:
            return _call("read", len(done) + 1, path=file, start=int(hit.group(1)), limit=3)
        if value is None:  # a split row: its fiscal line is below the label
            lines = reads[0].splitlines()
            value = next((_figure(ln) for ln in lines[1:] if f"fiscal {year}:" in ln), None)
    if value is None:
        return {"text": "<answer>not found</answer>"}
    if q.group("unit") == "billions" and SCALE.key in rules:
        value = billions(int(value.replace(",", "")))
    return {"text": f"Table FFO-2 gives it. <answer>{value}</answer>"}


# -- the optimizer -----------------------------------------------------------------------------


def _called(trajectory: str, tool: str) -> bool:
    """A call of ``tool`` in skillvc's rendering (``-> grep: ...``) or SkillOpt's
    (``[action] grep(pattern=...)``)."""
    return bool(re.search(rf"(-> {tool}:|\[action\] {tool}\()", trajectory))


def _number(text: str) -> float | None:
    m = re.search(r"<answer>\s*([\d,.]+)\s*</answer>", text) or re.fullmatch(
        r"\s*([\d,.]+)\s*", text
    )
    try:
        return float(m.group(1).replace(",", "")) if m else None
    except ValueError:
        return None


def diagnose(
    skill: str, case_id: str, trajectory: str, predicted: str, expected: str, salt: str = ""
) -> Rule | None:
    """What a failed case asks of the skill (``Rule(MEMORY.key, "")`` is "delete MEMORY")."""
    rules = known(skill)
    salt = f"{case_id}|{sorted(rules)}|{salt}"
    roll = random.Random(int(hashlib.sha256(salt.encode()).hexdigest()[:12], 16)).random()
    if not _called(trajectory, "grep"):
        if MEMORY.key in rules:
            return Rule(MEMORY.key, "")
        return GREP if roll < 0.8 else MEMORY if roll < 0.9 else CITE
    got, want = _number(predicted), _number(expected)
    if got is not None and want and abs(got - want * 1000) < 1e-6:
        return SCALE
    if not _called(trajectory, "read"):
        return READ if roll < 0.8 else CITE
    return None


def propose(skill: str, failures: Sequence[Mapping[str, str]], budget: int) -> list[Rule]:
    """The rule the minibatch's failures ask for most (the first case's on a tie), new rules
    only: one edit per reflection, as a cautious optimizer proposes; a step's candidate is
    what its minibatches' proposals merge into."""
    rules = known(skill)
    batch = ",".join(sorted(f["id"] for f in failures))
    found = [
        diagnose(skill, f["id"], f["trajectory"], f["predicted"], f["expected"], batch)
        for f in failures
    ]
    wanted = [r for r in found if r is not None and (not r.text or r.key not in rules)]
    support = {r.key: sum(1 for w in wanted if w.key == r.key) for r in wanted}
    out: list[Rule] = []
    for rule in sorted(wanted, key=lambda r: -support[r.key]):
        if rule not in out:
            out.append(rule)
    return out[: min(budget, 1)]


def skill_line(skill: str, key: str) -> str | None:
    return next((ln for ln in skill.splitlines() if key in _fold(ln)), None)


def skillvc_optimizer(prompt: str) -> str:
    """skillvc's optimizer prompts (reflection, slow update, meta skill) answered."""
    from skillvc.models.prompts import load_section, prompt_kind, section

    kind = prompt_kind(prompt)
    if kind == "reflect":
        skill = section(prompt, "skill")
        m = re.search(r"propose at most (\d+) edits", prompt)
        failures = [
            {
                "id": str(c.get("id", "")),
                "trajectory": str(c.get("trajectory") or ""),
                "predicted": str(c.get("output") or ""),
                "expected": str(c.get("expected") or ""),
            }
            for c in load_section(prompt, "cases")
            if isinstance(c, dict) and c.get("score", 0) < 1
        ]
        edits = []
        for rule in propose(skill, failures, int(m.group(1)) if m else 4):
            line = skill_line(skill, rule.key) if not rule.text else None
            if line is not None:
                edits.append({"op": "delete", "target": line, "rationale": "It skips the tools."})
            elif rule.text:
                edits.append({"op": "add", "content": f"- {rule.text}", "rationale": "failures"})
        return json.dumps({"edits": edits})
    if kind == "slow_update":
        return json.dumps({"guidance": GUIDANCE})
    if kind == "meta_update":
        return json.dumps({"notes": "Prefer rules about how to use the document tools."})
    if kind == "repair":
        return section(prompt, "previous_answer")
    return json.dumps({"edits": []})


GUIDANCE = "Ground every figure in the bulletin's table before answering."


def skillopt_analyst(user: str, *, failures: bool) -> dict[str, Any]:
    """SkillOpt's OfficeQA analyst prompt (a minibatch of trajectories) answered, in its ops."""
    m = re.search(r"## Current Skill\n(.*?)\n\n## \w+ Budget\n", user, re.S)
    skill = m.group(1) if m else ""
    b = re.search(r"at most L=(\d+)", user)
    cases = []
    for block in user.split("### Trajectory ")[1:]:
        ident = re.search(r"\(id=([^)]*)\)", block)
        why = re.search(r"Failure reason: predicted '(.*?)' but expected '(.*?)'\n", block)
        cases.append(
            {
                "id": ident.group(1) if ident else "",
                "trajectory": block,
                "predicted": why.group(1) if why else "",
                "expected": why.group(2) if why else "",
            }
        )
    edits = []
    if failures:
        for rule in propose(skill, cases, int(b.group(1)) if b else 4):
            line = skill_line(skill, rule.key) if not rule.text else None
            if line is not None:
                edits.append({"op": "delete", "target": line})
            elif rule.text:
                edits.append({"op": "append", "content": f"- {rule.text}"})
    return {
        "batch_size": len(cases),
        "failure_summary": [],
        "patch": {"reasoning": "the fake OfficeQA optimizer", "edits": edits},
    }

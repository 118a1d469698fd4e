"""The bundled ``support`` routing library (issue 41): customer-support queues where a house
policy, not the skill names, decides which skill a message wants.

Written with ``write_example(library="support")`` and measured through the CLI with
``sim:routing``, where which skill loads depends on the descriptions' words.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import git

from skillvc.cli import cli as main
from skillvc.routing.example import LIBRARIES, trigger_items, write_example

NAMES = ["billing", "refunds", "returns", "shipping", "account", "fraud"]

# Descriptions that state the house policy (skillvc.routing.example_support's docstring).
POLICY = {
    "billing": "Plans and memberships - what they cost, invoices, declined payments, charged "
    "twice, the fee for a cancelled plan or trial.",
    "refunds": "Money for an item sent back, or for a cancelled order.",
    "returns": "Items that arrived broken, cracked or wrong - send back, post back or swap.",
    "shipping": "Parcels on the way - delivery, tracking, courier, a parcel lost or marked "
    "delivered.",
    "account": "Signing in - a sign in code, password, email, profile and personal data.",
    "fraud": "Something the customer never did - a payment, order or change they do not "
    "recognise, someone else.",
}


@pytest.fixture
def library(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(git_repo)
    write_example(git_repo, library="support")
    (git_repo / ".gitignore").write_text(".skillvc/\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "library")
    return git_repo


def _eval(split: str = "val") -> dict[str, Any]:
    result = CliRunner().invoke(
        main, ["eval", "--routing", "--split", split, "--json", "-q"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


def test_the_trigger_set_has_the_documents_shape_and_no_prompt_names_its_skill(
    library: Path,
) -> None:
    assert list(LIBRARIES) == ["documents", "support"]
    assert list(LIBRARIES["support"][0]) == NAMES
    splits = {s: trigger_items("support") for s in ("first", "again")}
    assert splits["first"] == splits["again"]  # deterministic
    written = {
        split: [json.loads(line) for line in (library / f"evals/routing/{split}.jsonl").open()]
        for split in ("train", "val", "test")
    }
    assert written == splits["first"]
    for split, per_skill, none in (("train", 9, 4), ("val", 3, 3), ("test", 3, 3)):
        counts = Counter(item["skill"] for item in written[split])
        expected: dict[str | None, int] = {**dict.fromkeys(NAMES, per_skill), None: none}
        assert counts == expected, split
    items = [item for split in written.values() for item in split]
    assert len({item["id"] for item in items}) == len(items) == 100
    assert len({item["input"] for item in items}) == 100
    for item in items:
        assert set(item) == {"id", "input", "skill"}
        if item["skill"] is not None:
            # Not the name, nor a word it starts: bill-ed, refu-nd, retu-rn, ship-ped, ...
            stem = item["skill"][:4]
            assert not re.search(rf"\b{stem}", item["input"], re.I), item
    # The seed descriptions say nothing that tells the queues apart.
    for name in NAMES:
        text = (library / "skills" / name / "SKILL.md").read_text()
        assert re.search(r"^description: Help customers with [a-z ]+\.$", text, re.M), text


def test_the_seed_routes_poorly_and_descriptions_that_state_the_policy_route_it(
    library: Path,
) -> None:
    seed = _eval()
    assert list(seed["skills"]) == NAMES
    assert seed["n"] == 21 and seed["errors"] == 0
    assert seed["library"] == pytest.approx(seed["correct"] / 21, abs=1e-4)
    assert seed["library"] < 0.5

    for name, description in POLICY.items():
        path = library / "skills" / name / "SKILL.md"
        text = path.read_text()
        path.write_text(
            re.sub(r"^description: .*$", f"description: {description}", text, flags=re.M)
        )
    git(library, "commit", "-qam", "the house policy in the descriptions")
    for split in ("val", "test"):
        after = _eval(split)
        assert after["library"] >= 0.75, (split, after["library"])

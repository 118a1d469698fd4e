"""Skill packages in the training loop (issue 14 item 2): edits name their file, a candidate is
one commit of package files, the optimizer sees the package, and a resume restores every file.

The end-to-end runs use the real OpenAI SDK against the loopback server with a scripted world:
a "code" question is answered right only when the fact line sits in the reference file the
skill sends the target to (``references/codes.md``), and the scripted optimizer proposes those
fact lines for the failures it is shown, naming the file.
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import git
from loopback import (  # noqa: F401 - the fixture
    LoopbackServer,
    chat_messages,
    is_optimizer_prompt,
    loopback,
)

from skillvc.cli import cli
from skillvc.core.store import open_store
from skillvc.models import prompts
from skillvc.models.prompts import prompt_kind, section
from skillvc.packages import SkillPackage
from skillvc.packages.prompt import clip, optimizer_files, readable
from skillvc.skill.edits import Edit
from skillvc.training.optimize import Proposal, aggregate, apply_selected_package

SKILL = (
    b"---\nname: codes\ndescription: Answer code questions.\n---\n# Codes\n\n"
    b"Look codes up in [the code table](references/codes.md).\n"
)
TABLE = b"# Code table\n\n- K0 means zero.\n"
NOTES = b"Unlinked notes: K1 means one.\n"
FACTS = {f"K{i}": word for i, word in enumerate(["zero", "one", "two", "three", "four", "five"])}
KEY = "sk-test-loopback-0000"


def package(**files: bytes) -> SkillPackage:
    """The test package; keyword arguments replace files (``references__codes_md`` names
    ``references/codes.md``)."""
    base = {"SKILL.md": SKILL, "references/codes.md": TABLE, "notes.md": NOTES}
    named = {k.replace("__", "/").replace("_md", ".md"): v for k, v in files.items()}
    return SkillPackage("skills/codes", {**base, **named})


# -- the candidate of a step ---------------------------------------------------------------------


def test_edits_apply_to_the_file_they_name_and_report_what_changed() -> None:
    pkg = package()
    edits = [
        Edit(
            "add", content="- K2 means two.", anchor="- K0 means zero.", file="references/codes.md"
        ),
        Edit("replace", target="Look codes up", content="Always look codes up"),
    ]
    result = apply_selected_package(pkg, edits, max_bytes=10_000)
    assert result.applied == tuple(edits) and not result.unmatched
    assert result.changed == ("SKILL.md", "references/codes.md") and result.created == ()
    assert result.package.files["references/codes.md"] == TABLE.replace(
        b"zero.\n", b"zero.\n- K2 means two.\n"
    )
    assert result.document.body.startswith("# Codes\n\nAlways look codes up")
    assert result.package.files["notes.md"] == NOTES


def test_a_path_from_the_repository_root_names_the_package_file() -> None:
    edit = Edit("add", content="- K3 means three.", file="skills/codes/references/codes.md")
    result = apply_selected_package(package(), [edit], max_bytes=10_000)
    assert result.changed == ("references/codes.md",) and result.created == ()


@pytest.mark.parametrize("link_first", [True, False])
def test_a_new_file_is_created_when_skill_md_links_it_in_the_same_edit_set(
    link_first: bool,
) -> None:
    create = Edit("add", content="# Colours\n\n- K4 means four.", file="references/colours.md")
    link = Edit("add", content="Colour codes: [colours](references/colours.md).")
    edits = [link, create] if link_first else [create, link]
    result = apply_selected_package(package(), edits, max_bytes=10_000)
    assert not result.unmatched
    assert result.created == ("references/colours.md",)
    assert result.package.files["references/colours.md"] == b"# Colours\n\n- K4 means four.\n"


def test_a_new_file_no_link_reaches_is_refused_and_the_rest_still_applies() -> None:
    create = Edit("add", content="- K4 means four.", file="references/colours.md")
    other = Edit("add", content="- K5 means five.", file="references/codes.md")
    result = apply_selected_package(package(), [create, other], max_bytes=10_000)
    assert result.applied == (other,)
    (refused,) = result.unmatched
    assert refused.edit == create and refused.reason == "format"
    assert refused.detail == (
        "references/colours.md: no link from SKILL.md leads to this new file, so no agent would "
        "read it; add a Markdown link to references/colours.md in SKILL.md in the same answer."
    )
    assert "references/colours.md" not in result.package.files


def test_a_file_linked_only_from_an_unlinked_file_is_still_an_orphan() -> None:
    create = Edit("add", content="- K4 means four.", file="more.md")
    link = Edit("add", content="See [more](more.md).", file="notes.md")
    result = apply_selected_package(package(), [create, link], max_bytes=10_000)
    # The new file is refused (nothing from SKILL.md reaches notes.md), and then the link to
    # it names a file that does not exist, so it is refused on the next pass.
    assert [(u.edit, u.reason) for u in result.unmatched] == [(create, "format"), (link, "format")]
    assert result.applied == () and result.package == package()


def test_a_link_to_a_file_that_does_not_exist_is_refused() -> None:
    link = Edit("add", content="See [the missing table](references/missing.md).")
    result = apply_selected_package(package(), [link], max_bytes=10_000)
    (refused,) = result.unmatched
    assert refused.reason == "format" and refused.detail.startswith(
        "SKILL.md: the edit leaves a relative link that names no file of the package"
    )
    assert result.changed == ()


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (Edit("add", content="x", file="../outside.md"), "missing"),
        (
            Edit("replace", target="nothing like this", content="x", file="references/codes.md"),
            "missing",
        ),
        (Edit("delete", target="- K0 means zero.", file="references/nope.md"), "missing"),
        (
            Edit(
                "replace",
                target="K0 means zero.",
                content="K0 means zero. ",
                file="references/codes.md",
            ),
            "no-op",
        ),
        (Edit("add", content="- " + "long " * 100, file="references/codes.md"), "format"),
        (
            Edit("delete", target="# Code table\n\n- K0 means zero.", file="references/codes.md"),
            "format",
        ),
    ],
)
def test_reference_edits_follow_the_rules_of_skill_edits(edit: Edit, reason: str) -> None:
    result = apply_selected_package(package(), [edit], max_bytes=200)
    (refused,) = result.unmatched
    assert refused.reason == reason, refused.detail
    assert result.package == package()


def test_a_protected_region_of_a_reference_file_is_never_edited() -> None:
    guarded = (
        b"# Code table\n<!-- skillvc:protected legal -->\n- K0 means zero.\n"
        b"<!-- /skillvc:protected -->\n"
    )
    pkg = package(references__codes_md=guarded)
    edit = Edit(
        "replace", target="K0 means zero.", content="K0 means nil.", file="references/codes.md"
    )
    (refused,) = apply_selected_package(pkg, [edit], max_bytes=10_000).unmatched
    assert refused.reason == "protected"


def test_the_same_target_in_two_files_is_no_conflict() -> None:
    a = Edit("delete", target="K0 means zero.", file="references/codes.md")
    b = Edit("delete", target="K0 means zero.", file="notes.md")
    c = Edit("replace", target="K0 means zero.", content="K0 means nil.", file="notes.md")
    merged = aggregate([Proposal(e, 0, "failures") for e in (a, b, b, c)])
    assert [(m.edit, m.support, m.merged_from) for m in merged] == [(a, 1, ()), (b, 2, (c.id,))]


# -- what the optimizer sees ---------------------------------------------------------------------


def test_clip_keeps_head_and_tail_within_the_limit() -> None:
    text = "".join(f"line {i}\n" for i in range(1000))
    short = clip(text, 300)
    assert len(short) <= 300 and short.startswith("line 0\n") and short.endswith("line 999\n")
    assert re.search(r"\[\.\.\. \d+ characters cut \.\.\.\]", short)
    assert clip("small", 300) == "small"


def test_the_optimizer_sees_every_file_with_size_and_whether_a_link_reaches_it() -> None:
    big = b"# Code table\n" + b"".join(b"- filler line %d\n" % i for i in range(400))
    pkg = package(references__codes_md=big)
    files = optimizer_files(pkg, 2_000)
    assert [(f["path"], f["bytes"], f["linked"]) for f in files] == [
        ("references/codes.md", len(big), True),
        ("notes.md", len(NOTES), False),
    ]
    assert sum(len(f["text"]) for f in files) <= 2_000
    assert files[0]["text"].startswith("# Code table\n") and files[0]["text"].endswith(
        "- filler line 399\n"
    )
    assert files[1]["text"] == NOTES.decode()
    shown = readable(pkg, 2_000)
    assert shown.startswith(SKILL.decode()) and "\n\n## Package file: notes.md\n\n" in shown


def test_a_single_file_reflection_prompt_is_rendered_as_it_always_was() -> None:
    (_, user) = prompts.render(
        "reflect",
        n_cases="1",
        kind="failures",
        kind_note="n",
        budget="2",
        skill="S",
        cases=[],
        rejected=[],
        meta="m",
    )
    text = user["content"]
    # Nothing of a package between the skill and what follows it (the prompt is laid out
    # cache-first since issue 27: the cases come last).
    assert "</skill>\n\n<rejected_edits>" in text and "package" not in text
    assert '"file"' not in text
    assert (
        '{"analysis": "...", "edits": [{"op": "add|replace|delete", "target": "...", '
        '"content": "...", "anchor": "...", "rationale": "the pattern it fixes"}]}\n\n<cases>'
    ) in text


# -- training a package end to end ---------------------------------------------------------------


def items(codes: list[str]) -> str:
    return "".join(
        json.dumps({"id": c, "input": f"What does code {c} mean?", "target": FACTS[c]}) + "\n"
        for c in codes
    )


def make_package_repo(
    tmp_path: Path, server: LoopbackServer, mp: pytest.MonkeyPatch, *, skill_keys: str = ""
) -> Path:
    repo = tmp_path / "repo"
    folder = repo / "skills" / "codes"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_bytes(SKILL)
    (folder / "references" / "codes.md").write_bytes(TABLE)
    (folder / "notes.md").write_bytes(NOTES)
    (folder / "fill.sh").write_text("echo carried along\n")
    evals = repo / "evals"
    evals.mkdir()
    (evals / "train.jsonl").write_text(items(["K0", "K2", "K3", "K4", "K5"]))
    (evals / "val.jsonl").write_text(
        "".join(
            json.dumps({"id": f"v{c}", "input": f"Please explain code {c}.", "target": w}) + "\n"
            for c, w in FACTS.items()
        )
    )
    (repo / "skillvc.toml").write_text(
        f'[skill]\npath = "skills/codes"\n{skill_keys}\n'
        '[tasks]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\nscorer = "exact"\n\n'
        '[target]\nmodel = "openai:gpt-4o-mini"\n\n[optimizer]\nmodel = "openai:gpt-4o-mini"\n\n'
        "[train]\nepochs = 2\nbatch_size = 5\nminibatch_size = 5\nworkers = 2\nseed = 1\n"
        "learning_rate = 2\nmin_learning_rate = 2\nslow_update = false\nmeta_skill = false\n"
        # These tests are about packages, not the gate: the paper's bundle gate keeps their
        # small val split's one-item gains (attribution asks for significance).
        "attribution = false\n",
        encoding="utf-8",
    )
    (repo / ".gitignore").write_text(".skillvc/\n")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "a package skill")
    mp.setenv("OPENAI_API_KEY", KEY)
    mp.setenv("OPENAI_BASE_URL", server.url + "/v1")
    mp.chdir(repo)
    return repo


def code_world(propose: Callable[[list[dict[str, Any]], str], list[dict[str, Any]]]):
    """The loopback responder: the target knows a code when its fact line is in the section of
    ``references/codes.md`` (or of a file SKILL.md links under "Colour codes"), the optimizer
    answers with ``propose(failed cases, prompt)``."""
    seen: list[str] = []

    def respond(body: dict[str, Any]) -> str:
        messages = chat_messages(body)
        if is_optimizer_prompt(messages):
            prompt = messages[-1]["content"]
            seen.append(prompt)
            if prompt_kind(prompt) != "reflect":
                return "{}"
            cases = json.loads(section(prompt, "cases"))
            return json.dumps({"edits": propose([c for c in cases if c["score"] < 1], prompt)})
        system, user = messages[0]["content"], messages[-1]["content"]
        code = re.search(r"code (K\d)", user).group(1)  # type: ignore[union-attr]
        sections = re.split(r"\n\n## Reference file: ", system)
        known = " ".join(s for s in sections[1:])
        return FACTS[code] if f"{code} means {FACTS[code]}." in known else "unknown"

    respond.seen = seen  # type: ignore[attr-defined]
    return respond


def facts_for(cases: list[dict[str, Any]], file: str) -> list[dict[str, Any]]:
    out = []
    for case in cases:
        code = re.search(r"code (K\d)", case["input"]).group(1)  # type: ignore[union-attr]
        content = f"- {code} means {FACTS[code]}."
        if all(e["content"] != content for e in out):
            out.append({"file": file, "op": "add", "content": content, "rationale": case["id"]})
    return out


def train_json(repo: Path) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["train", "--json", "-q"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_training_accepts_an_edit_to_a_reference_file_and_commits_only_that_file(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    world = code_world(lambda failed, _: facts_for(failed, "references/codes.md")[:2])
    loopback.responder = world
    repo = make_package_repo(tmp_path, loopback, monkeypatch)
    seed = git(repo, "rev-parse", "HEAD")
    summary = train_json(repo)
    assert summary["accepted"] >= 1 and summary["best_val"] > summary["baseline_val"]

    for sha in git(repo, "rev-list", f"{seed}..main").split():
        assert git(repo, "show", "--format=", "--name-only", sha).split() == [
            "skills/codes/references/codes.md"
        ]
    message = git(repo, "log", "-1", "--format=%B", "main")
    assert message.startswith("skillvc: add in references/codes.md ")
    assert "- add in references/codes.md: " in message
    table = (repo / "skills/codes/references/codes.md").read_text()
    assert "K0 means zero." in table and re.search(r"- K\d means \w+\.\n", table)
    assert git(repo, "status", "--porcelain") == ""

    # The optimizer saw the package; the target got the linked table and never the notes.
    reflect = next(p for p in world.seen if prompt_kind(p) == "reflect")
    listed = json.loads(section(reflect, "package_files"))
    assert [(f["path"], f["linked"]) for f in listed] == [
        ("references/codes.md", True),
        ("notes.md", False),
    ]
    assert '"file": "SKILL.md or a path from package_files"' in reflect
    targets = [chat_messages(r.json) for r in loopback.requests if "messages" in (r.json or {})]
    systems = [m[0]["content"] for m in targets if not is_optimizer_prompt(m)]
    assert systems and all("## Reference file: references/codes.md" in s for s in systems)
    assert not any("Unlinked notes" in s for s in systems)

    with open_store(repo / ".skillvc/events.db") as store:
        gates = [e.payload for e in store.events(types=["gate"])]
        accepted = [g for g in gates if g["decision"] == "accepted"]
        assert accepted and all(
            g["files"] == ["skills/codes/references/codes.md"] for g in accepted
        )
        assert all(e["file"] == "references/codes.md" for g in gates for e in g["edits"])
        # The SQL views people query say the same (migration 3).
        views = store.query(
            "SELECT g.files, a.file FROM gates g JOIN accepted_edits a "
            "ON a.gate_event_id = g.event_id"
        )
        assert views and all(
            (json.loads(v["files"]), v["file"])
            == (["skills/codes/references/codes.md"], "references/codes.md")
            for v in views
        )
        proposed = store.query("SELECT DISTINCT file FROM proposed_edits")
        assert proposed == [{"file": "references/codes.md"}]
        rejected_refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/skillvc/rejected")
    for ref in rejected_refs.split():
        changed = git(repo, "show", "--format=", "--name-only", ref).split()
        assert changed and all(p.startswith("skills/codes/") for p in changed)


def test_training_creates_a_reference_file_together_with_its_link(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def propose(failed: list[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
        if "references/more.md" in section(prompt, "skill"):
            return facts_for(failed, "references/more.md")[:2]
        lines = "\n".join(e["content"] for e in facts_for(failed, "x")[:3])
        return [
            {"file": "references/more.md", "op": "add", "content": f"# More codes\n\n{lines}"},
            {"op": "add", "content": "More codes: [more](references/more.md)."},
        ]

    loopback.responder = code_world(propose)
    repo = make_package_repo(tmp_path, loopback, monkeypatch)
    seed = git(repo, "rev-parse", "HEAD")
    assert train_json(repo)["accepted"] >= 1
    first = git(repo, "rev-list", "--reverse", f"{seed}..main").split()[0]
    assert sorted(git(repo, "show", "--format=", "--name-only", first).split()) == [
        "skills/codes/SKILL.md",
        "skills/codes/references/more.md",
    ]
    assert "[more](references/more.md)" in (repo / "skills/codes/SKILL.md").read_text()
    assert CliRunner().invoke(cli, ["validate"]).exit_code == 0


def test_an_unlinked_new_file_never_becomes_a_candidate(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loopback.responder = code_world(
        lambda failed, _: [
            {"file": "references/more.md", "op": "add", "content": "- K2 means two."}
        ]
    )
    repo = make_package_repo(tmp_path, loopback, monkeypatch)
    seed = git(repo, "rev-parse", "HEAD")
    summary = train_json(repo)
    assert summary["accepted"] == summary["rejected"] == 0
    assert git(repo, "rev-parse", "HEAD") == seed
    with open_store(repo / ".skillvc/events.db") as store:
        empty = [e.payload["reason"] for e in store.events(types=["step.empty"])]
        unmatched = [e.payload for e in store.events(types=["edit.unmatched"])]
    assert empty == ["no edit could be applied"] * 2
    assert (
        unmatched[0]["reason"] == "format" and unmatched[0]["edit"]["file"] == "references/more.md"
    )


def test_training_refuses_an_uncommitted_package_file(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    repo = make_package_repo(tmp_path, loopback, monkeypatch)
    (repo / "skills/codes/references/draft.md").write_text("work in progress\n")
    (repo / "skills/codes/fill.sh").write_text("echo changed\n")  # not a package file: fine
    result = CliRunner().invoke(cli, ["train"])
    assert result.exit_code == 4, result.output
    assert result.output == (
        "Error: skills/codes/references/draft.md is in the skill package's directory and not "
        "committed.\nHint: Commit it, move it away, or leave it out of the package with "
        "[skill] exclude in skillvc.toml.\n"
    )
    git(repo, "add", "skills/codes/references/draft.md")
    git(repo, "commit", "-qm", "draft")
    (repo / "skills/codes/references/codes.md").write_text("# Edited by hand\n")
    result = CliRunner().invoke(cli, ["train"])
    assert result.exit_code == 4, result.output
    assert result.output.startswith(
        "Error: skills/codes/references/codes.md (a file of the skill package) has uncommitted "
        "changes.\n"
    )
    assert loopback.requests == []


KILL_ON_WRITE = """
import os, sys
from skillvc.repo import skillrepo as repo_module
from skillvc.cli import main

original = repo_module.SkillRepo.restore_file

def restore_file(self, relpath, content):
    if str(relpath).endswith("references/codes.md") and os.environ.get("KILL_ON_WRITE"):
        os._exit(9)  # SIGKILL-like: the branch moved, the file was never written
    return original(self, relpath, content)

repo_module.SkillRepo.restore_file = restore_file
sys.argv = ["skillvc", "train", "-q"]
main()
"""


def test_a_kill_between_the_branch_move_and_the_file_writes_resumes_to_the_same_result(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    loopback.responder = code_world(lambda failed, _: facts_for(failed, "references/codes.md")[:2])
    reference = make_package_repo(tmp_path / "a", loopback, monkeypatch)
    train_json(reference)
    expected = git(reference, "log", "--format=%T %s", "main")
    repo = make_package_repo(tmp_path / "b", loopback, monkeypatch)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    killed = subprocess.run(
        [sys.executable, "-c", KILL_ON_WRITE], cwd=repo, env={**env, "KILL_ON_WRITE": "1"}
    )
    assert killed.returncode == 9
    assert git(repo, "status", "--porcelain")  # HEAD has the commit, the file the old text
    resumed = subprocess.run([sys.executable, "-c", KILL_ON_WRITE], cwd=repo, env=env)
    assert resumed.returncode == 0
    assert git(repo, "log", "--format=%T %s", "main") == expected
    assert git(repo, "status", "--porcelain") == ""
    with open_store(repo / ".skillvc/events.db") as store:
        calls = store.query(
            "SELECT COUNT(*) AS n, COUNT(DISTINCT key) AS k FROM events WHERE type = 'model.call'"
        )[0]
    assert calls["n"] == calls["k"]  # no call recorded twice


def test_linked_files_over_the_budget_are_not_sent_and_the_run_says_so(
    loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    world = code_world(lambda failed, _: facts_for(failed, "references/codes.md")[:2])
    loopback.responder = world
    repo = make_package_repo(tmp_path, loopback, monkeypatch, skill_keys="reference_bytes = 10")
    result = CliRunner().invoke(cli, ["train", "--json"])
    assert result.exit_code == 0, result.output
    assert (
        "not sent to the chat target (over [skill] reference_bytes or the token cap): "
        "references/codes.md" in result.stderr
    )
    summary = json.loads(result.stdout)
    assert summary["accepted"] == 0  # facts in a file the target never gets cannot help
    with open_store(repo / ".skillvc/events.db") as store:
        (rendered,) = [e.payload for e in store.events(types=["package.rendered"])]
        gates = [e.payload for e in store.events(types=["gate"])]
    assert rendered == {"included": [], "cut": ["references/codes.md"]}
    assert gates and all(g["rendered"]["cut"] == ["references/codes.md"] for g in gates)
    systems = [
        m[0]["content"]
        for m in (chat_messages(r.json) for r in loopback.requests)
        if not is_optimizer_prompt(m)
    ]
    assert systems and all(s == SKILL.decode() for s in systems)


def test_a_reference_file_opening_with_a_rule_line_is_not_held_to_frontmatter_rules() -> None:
    create = Edit("add", content="---\n- K2 means two.", file="references/more.md")
    link = Edit("add", content="More: [more](references/more.md).")
    result = apply_selected_package(package(), [create, link], max_bytes=10_000)
    assert result.applied == (create, link) and not result.unmatched
    assert result.package.files["references/more.md"] == b"---\n- K2 means two.\n"

"""Training a skill package (issue 14): what the optimizer is shown, and (with the
package-aware simulator, ``sim:support-package``) accepted edits to reference files, new
reference files linked from SKILL.md, commits that touch only package files, and resume."""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import copy_repo, git, make_demo_seed, make_package_repo, once_per_session
from helpers import event_count, kill_at_fractions, train_env, train_to_the_end
from hypothesis import given, settings
from hypothesis import strategies as st

from skillvc.cli import cli
from skillvc.core.resources import read_bytes
from skillvc.core.store import open_store
from skillvc.models import prompts, simpackage, simworld
from skillvc.models.backends.base import CallRequest
from skillvc.models.backends.sim import SimBackend
from skillvc.models.prompts import section
from skillvc.packages import SkillPackage, broken_links, render_chat
from skillvc.packages.links import linked_files, orphan_files, reachable_files
from skillvc.packages.packagefile import PackageFile
from skillvc.packages.prompt import optimizer_files
from skillvc.repo.skillrepo import SkillRepo
from skillvc.skill.edits import Edit
from skillvc.training.demo import PACKAGE_INTRO
from skillvc.training.loop import train
from skillvc.training.optimize import apply_selected_package
from skillvc.workspace.workspace import open_workspace

FORMS = "# Forms and special cases\n\n- Billing errors go to the billing team: escalate them.\n"


def optimizer_prompts(repo: Path, kind: str) -> list[str]:
    """The user message of every recorded optimizer call of ``kind`` (reflect, ...), in order."""
    with open_store(repo / ".skillvc" / "events.db") as store:
        rows = store.query(
            "SELECT prompt_blob FROM model_calls WHERE role = 'optimizer' ORDER BY event_id"
        )
        prompts = [json.loads(store.get_blob(r["prompt_blob"]))[1]["content"] for r in rows]
    return [p for p in prompts if f"<!-- skillvc-prompt: {kind} -->" in p]


@pytest.fixture
def forms_repo(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """skills/acme-returns/: the demo's SKILL.md linking references/forms.md; sim:support."""
    monkeypatch.chdir(git_repo)  # restored after the test
    return make_package_repo(git_repo, FORMS)


def test_the_reflection_prompt_shows_skill_md_as_skill_and_the_rest_as_package_files(
    forms_repo: Path,
) -> None:
    # Regression: the loop put the package's bundle (canonical JSON of every file) under
    # <skill>, so the optimizer saw SKILL.md JSON-escaped and the references twice.
    seed = (forms_repo / "skills" / "acme-returns" / "SKILL.md").read_text()
    result = CliRunner().invoke(cli, ["train", "-q"])
    assert result.exit_code == 0, result.output
    first = optimizer_prompts(forms_repo, "reflect")[0]
    assert section(first, "skill") == seed
    listing = json.loads(section(first, "package_files"))
    assert [(f["path"], f["linked"], f["text"]) for f in listing] == [
        ("references/forms.md", True, FORMS)
    ]


# -- the package-aware world (sim:support-package) ------------------------------------------

PACKAGE = "skills/acme-support"
DAMAGED = simworld.rule("damaged on arrival").text
POINTER = "- Damage: read [references/damage.md](references/damage.md).\n"


def _package(skill_extra: str = "", **files: str) -> SkillPackage:
    skill = "---\nname: acme\ndescription: Acme tickets.\n---\n# Acme\n\n## Policies\n"
    texts = {"SKILL.md": skill + skill_extra}
    texts.update({f"references/{name}.md": text for name, text in files.items()})
    return SkillPackage(PACKAGE, {k: v.encode() for k, v in texts.items()})


def _damage_tickets(n: int = 20) -> list[str]:
    cases = [simworld.Case("damaged", d, "standard") for d in range(1, n + 1)]
    return [simworld.describe(c, random.Random(i)) for i, c in enumerate(cases)]


def _answers(system: str, files: tuple[PackageFile, ...] = ()) -> list[str]:
    backend = SimBackend("sim:support-package")
    out = []
    for task in _damage_tickets():
        messages = ({"role": "system", "content": system}, {"role": "user", "content": task})
        reply = backend.complete(CallRequest("target", backend.model, messages, files=files))
        out.append(simworld.final_answer(reply.text))
    return out


def test_a_topic_rule_counts_only_in_the_file_the_topic_points_to() -> None:
    rule_line = f"- {DAMAGED}\n"
    placements = {
        "in the pointed file": _package(POINTER, damage=f"# Damage\n{rule_line}"),
        "in SKILL.md": _package(POINTER + rule_line, damage="# Damage\n"),
        "in another topic's file": _package(
            POINTER + "- Returns: read [references/returns.md](references/returns.md).\n",
            damage="# Damage\n",
            returns=f"# Returns\n{rule_line}",
        ),
        "in SKILL.md, the topic pointing nowhere": _package(rule_line),
        "in an unlinked file": _package("", damage=f"# Damage\n{rule_line}"),
    }
    right = {}
    for where, package in placements.items():
        system = render_chat(package, budget=16000).system  # what the chat target is sent
        right[where] = _answers(system).count("replace")
    assert right["in the pointed file"] >= 17
    assert right["in SKILL.md, the topic pointing nowhere"] >= 17
    assert right["in SKILL.md"] <= 2  # the pointer sends the agent elsewhere
    assert right["in another topic's file"] <= 2
    assert right["in an unlinked file"] <= 2  # never sent: the rule is nowhere


def test_a_general_rule_counts_in_skill_md_only() -> None:
    late = simworld.Case("damaged", 60, "standard")  # "after 30 days" decides: deny
    rule = simworld.rule("after 30 days")
    in_skill = _package(POINTER + f"- {rule.text}\n", damage="# Damage\n")
    in_file = _package(POINTER, damage=f"# Damage\n- {rule.text}\n")
    read = simpackage.split_prompt
    assert rule in simpackage.effective_rules(*read(render_chat(in_skill, 16000).system), late)
    assert rule not in simpackage.effective_rules(*read(render_chat(in_file, 16000).system), late)


def test_installed_files_count_like_the_chat_prompts_sections() -> None:
    package = _package(POINTER, damage=f"# Damage\n- {DAMAGED}\n")
    chat = _answers(render_chat(package, budget=16000).system)
    files = (PackageFile("references/damage.md", text=package.texts()["references/damage.md"]),)
    installed = _answers(package.texts()["SKILL.md"], files)
    assert chat.count("replace") >= 17 and installed.count("replace") >= 17
    assert _answers(package.texts()["SKILL.md"]).count("replace") <= 2  # no files: no rule


def _reflect_prompt(package: SkillPackage, cases: list[dict], meta: str = "") -> list[dict]:
    """A reflection prompt as ``skillvc.training.optimize.reflect`` renders it for a package."""
    listing = json.dumps(optimizer_files(package, 24000), indent=1, ensure_ascii=False)
    return prompts.render(
        "reflect",
        n_cases=str(len(cases)),
        kind="failures",
        kind_note="these answers scored below full marks",
        budget="4",
        skill=package.texts()["SKILL.md"],
        cases=cases,
        rejected=[],
        meta=meta or "(none yet)",
        package_rule=prompts.rule("package_rule"),
        package_files=f"\n<package_files>\n{listing}\n</package_files>\n",
        answer_format=prompts.PACKAGE_ANSWER_FORMAT,
    )


def _propose(messages: list[dict], key: str = "") -> list[Edit]:
    backend = SimBackend("sim:support-package")
    request = CallRequest("optimizer", backend.model, tuple(messages), params={"k": key})
    return [Edit.from_dict(e) for e in json.loads(backend.complete(request).text)["edits"]]


def _seed_package() -> SkillPackage:
    files = {
        name: read_bytes("templates", f"demo-package/{name}")
        for name in ("SKILL.md", "references/damage.md", "references/returns.md")
    }
    return SkillPackage(PACKAGE, files)


def _failures(seed: int, n: int = 8) -> list[dict]:
    items = simworld.generate_items(n, seed)
    return [
        {"id": it["id"], "input": it["input"], "output": "", "expected": it["target"], "score": 0}
        for it in items
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sets(st.sampled_from(simworld.ALL_RULES), max_size=6),
    st.sampled_from(["", "billing", "shipping"]),
)
def test_every_edit_the_simulated_optimizer_proposes_applies(
    seed: int, rules: set, unlinked: str
) -> None:
    # A package with some rules already in some files (right, wrong, harmful), maybe a topic's
    # file that SKILL.md does not link yet, then one answer.
    package = _seed_package()
    if unlinked:
        package = package.with_file(f"references/{unlinked}.md", b"# Notes\n\n## Rules\n")
    rng = random.Random(seed)
    for rule in sorted(rules, key=lambda r: r.key):
        name = rng.choice(package.names)
        package = package.with_file(name, package.files[name] + f"- {rule.text}\n".encode())
    edits = _propose(_reflect_prompt(package, _failures(seed)), key=str(seed))
    result = apply_selected_package(package, edits, max_bytes=100_000)
    assert result.unmatched == ()
    assert len(result.applied) == len(edits)
    for i, edit in enumerate(edits):  # a new file comes with the SKILL.md line that links it
        if edit.file not in package.files:
            assert edits[i + 1].file == "SKILL.md" and f"]({edit.file})" in edits[i + 1].content
    assert not broken_links(result.package)
    assert not orphan_files(result.package) or orphan_files(result.package) == [
        f"references/{unlinked}.md"
    ]


def test_the_optimizer_creates_and_links_a_file_for_a_topic_without_one() -> None:
    billing = [c for c in _failures(1, 60) if "Issue: billing-error" in c["input"]][:3]
    edits = []
    for key in range(12):  # the optimizer sometimes errs: some answers create the file
        edits = _propose(_reflect_prompt(_seed_package(), billing), key=str(key))
        if any(e.file == "references/billing.md" for e in edits):
            break
    create, link = edits[0], edits[1]
    assert create.file == "references/billing.md" and create.op == "add"
    assert simworld.rule("billing errors go to").text in create.content
    assert link.file == "SKILL.md" and link.anchor == "## Topics"
    assert "[references/billing.md](references/billing.md)" in link.content
    result = apply_selected_package(_seed_package(), [create, link], max_bytes=100_000)
    assert result.created == ("references/billing.md",) and result.unmatched == ()
    # Either one alone is refused by the loop: a file nobody links, a link to no file.
    for alone in ([create], [link]):
        refused = apply_selected_package(_seed_package(), alone, max_bytes=100_000)
        assert refused.applied == () and [u.reason for u in refused.unmatched] == ["format"]


def test_meta_notes_avoid_an_edit_in_one_file_only() -> None:
    cases = [simworld.Case("missing-parts", days, "standard") for days in range(2, 12)]
    failures = [
        {"id": f"t{i}", "input": simworld.describe(c, random.Random(i)), "expected": "ship-part"}
        | {"output": "", "score": 0}
        for i, c in enumerate(cases)
    ]
    rule = simworld.rule("missing parts").text

    def files(meta: str = "") -> set[str]:
        edits = _propose(_reflect_prompt(_seed_package(), failures, meta))
        return {e.file for e in edits if rule in e.content}

    assert "references/damage.md" in files()
    # (The notes are part of the prompt, so the answers' random errors differ from run to run.)
    avoid_skill = files(f"AVOID in SKILL.md: {rule}")
    assert "references/damage.md" in avoid_skill and "SKILL.md" not in avoid_skill
    avoid_damage = files(f"AVOID in references/damage.md: {rule}")
    assert avoid_damage and "references/damage.md" not in avoid_damage


# -- training the package demo ---------------------------------------------------------------


@pytest.fixture(scope="module")
def package_seed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package demo's seed repo (``skillvc demo --package``), made once per session
    (shared by the xdist workers that run this module's tests)."""
    return once_per_session(tmp_path_factory, "package-seed", _package_seed)


def _package_seed(folder: Path) -> Path:
    make_demo_seed(folder / "repo", package=True)
    return folder / "repo"


@pytest.fixture(scope="module")
def trained(package_seed: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A copy of the seed after one uninterrupted ``train`` (read-only for the tests), made
    once per session like ``package_seed``."""

    def make(folder: Path) -> tuple[Path, Any]:
        repo = copy_repo(package_seed, folder / "repo")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
            mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
            mp.setenv("HOME", str(repo.parent))
            summary = train(open_workspace(repo))
        return repo, summary

    return once_per_session(tmp_path_factory, "package-trained", make)


def _changed(repo: Path, rev: str) -> list[str]:
    return git(repo, "show", "--name-only", "--format=", rev).split()


def _gates(repo: Path) -> list[dict]:
    with open_store(repo / ".skillvc" / "events.db") as store:
        rows = store.query("SELECT payload FROM events WHERE type = 'gate' ORDER BY id")
    return [json.loads(r["payload"]) for r in rows]


def test_training_accepts_reference_file_edits_in_commits_of_package_files_only(
    package_seed: Path, trained: tuple[Path, Any]
) -> None:
    repo, summary = trained
    seed = git(package_seed, "rev-parse", "HEAD")
    commits = git(repo, "rev-list", f"{seed}..main").split()
    assert summary.status == "finished" and summary.test > summary.baseline_test
    assert len(commits) == summary.accepted + summary.slow_updates_accepted >= 2
    touched = [_changed(repo, sha) for sha in commits]
    assert all(files and all(f.startswith(f"{PACKAGE}/") for f in files) for files in touched)
    assert any(f.startswith(f"{PACKAGE}/references/") for files in touched for f in files)
    # The gate accepted steps whose edits name reference files, and each commit holds them.
    accepted = [g for g in _gates(repo) if g["kind"] == "step" and g["decision"] == "accepted"]
    reference_steps = [g for g in accepted if any("file" in e for e in g["edits"])]
    assert reference_steps
    for gate in reference_steps:
        assert {f"{PACKAGE}/{e['file']}" for e in gate["edits"] if "file" in e} <= set(
            gate["files"]
        )
    assert git(repo, "status", "--porcelain") == ""


def test_every_selected_edit_of_the_simulator_applies(trained: tuple[Path, Any]) -> None:
    repo, _ = trained
    with open_store(repo / ".skillvc" / "events.db") as store:
        rows = store.query("SELECT payload FROM events WHERE type = 'edit.unmatched'")
    # Only the link rule may refuse one (a new file whose link the learning rate clipped).
    reasons = [json.loads(r["payload"])["reason"] for r in rows]
    assert set(reasons) <= {"format"}


def test_a_reference_file_created_by_training_is_linked_from_skill_md(
    package_seed: Path, trained: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _ = trained
    seed = git(package_seed, "rev-parse", "HEAD")
    created = git(
        repo, "log", "--diff-filter=A", "--name-only", "--format=", f"{seed}..main"
    ).split()
    assert created and all(f.startswith(f"{PACKAGE}/references/") for f in created)
    head = SkillPackage.from_rev(SkillRepo(repo), PACKAGE, "HEAD")
    for path in created:
        name = path[len(PACKAGE) + 1 :]
        assert name in linked_files(head)  # SKILL.md links it directly
        # ... already in the commit that created it.
        (sha,) = git(
            repo, "log", "--diff-filter=A", "--format=%H", f"{seed}..main", "--", path
        ).split()
        assert name in reachable_files(SkillPackage.from_rev(SkillRepo(repo), PACKAGE, sha))
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["validate"])
    assert result.exit_code == 0, result.output


def test_rejected_candidates_touch_only_package_files(trained: tuple[Path, Any]) -> None:
    repo, summary = trained
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/skillvc/rejected/").split()
    assert len(refs) == summary.rejected + summary.slow_updates_rejected >= 2
    for ref in refs:
        files = _changed(repo, ref)
        assert files and all(f.startswith(f"{PACKAGE}/") for f in files), (ref, files)
    assert any("/references/" in f for ref in refs for f in _changed(repo, ref))


def test_log_p_shows_a_package_candidate_as_diffs_of_its_files(
    trained: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression: the gate's blobs of a package are bundles, and `log -p` (and the report)
    # diffed their JSON as if it were SKILL.md; the edits did not say which file they edit.
    repo, _ = trained
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(cli, ["log", "--rejected", "-p"])
    assert result.exit_code == 0, result.output
    assert '{"files"' not in result.output and "skillvc-package/1" not in result.output
    assert f"    --- a/{PACKAGE}/references/" in result.output
    assert re.search(r"    (add|replace|delete) in references/\S+\.md", result.output)
    report = CliRunner().invoke(cli, ["report"])
    assert report.exit_code == 0 and '{"files"' not in report.output
    assert f"+++ b/{PACKAGE}/references/" in report.output


def test_demo_package_runs_and_says_what_it_shows(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--package", "--dir", str(tmp_path / "d"), "-q"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert PACKAGE_INTRO + "\n" in out
    assert "== The package files each accepted commit changes ==" in out
    listing = out.split("== The package files each accepted commit changes ==")[1]
    assert f"    M  {PACKAGE}/references/" in listing
    changed = re.search(r"Reference files changed by accepted commits: (.+)", out)
    assert changed and "references/" in changed.group(1)
    assert re.search(r"Created by training: references/\S+\.md, linked from SKILL\.md", out)
    assert "NOT linked" not in out
    assert "skillvc validate" in out  # suggested next
    # The one-file demo is as it was.
    plain = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "p"), "-q"])
    assert plain.exit_code == 0
    assert "This demo trains a skill package" not in plain.output
    assert "== The package files" not in plain.output and "validate" not in plain.output


def _history(repo: Path) -> dict:
    """What must be identical between an interrupted and an uninterrupted run."""
    rejected = {
        ref: git(repo, "log", "-1", "--format=%T%x00%B", ref)
        for ref in git(repo, "for-each-ref", "--format=%(refname)", "refs/skillvc/").split()
    }
    with open_store(repo / ".skillvc" / "events.db") as store:
        gates = store.query(
            "SELECT run_id, step, kind, decision, edits, val_before, val_after FROM gates "
            "ORDER BY run_id, event_id"
        )
        calls = store.query(
            "SELECT COUNT(*) AS n, COUNT(DISTINCT key) AS k FROM events WHERE type = 'model.call'"
        )[0]
        seqs = store.query(
            "SELECT run_id, seq, type FROM events WHERE seq IS NOT NULL ORDER BY run_id, seq"
        )
    folder = repo / PACKAGE
    return {
        "files": {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.md")},
        "accepted": git(repo, "log", "--format=%T%x00%B%x01", "main"),
        "rejected": rejected,
        "gates": gates,
        "calls": calls,
        "seqs": seqs,
    }


def test_a_package_run_killed_and_resumed_ends_like_an_uninterrupted_one(
    package_seed: Path, trained: tuple[Path, Any], tmp_path: Path
) -> None:
    env = train_env(SKILLVC_SIM_LATENCY_MS="15")
    reference, _ = trained  # the uninterrupted run the module's other tests read
    expected = _history(reference)
    total = event_count(reference / ".skillvc" / "events.db")

    repo = copy_repo(package_seed, tmp_path / "killed")
    journal = tmp_path / "journal.txt"
    env["SKILLVC_SIM_JOURNAL"] = str(journal)
    kills = kill_at_fractions(repo, env, total, (0.2, 0.5, 0.8))
    assert kills >= 2
    train_to_the_end(repo, env)

    got = _history(repo)
    assert any(name.startswith("references/") for name in got["files"])
    for key in ("files", "accepted", "rejected", "gates", "seqs", "calls"):
        assert got[key] == expected[key], key
    assert got["calls"]["n"] == got["calls"]["k"]  # every call recorded once
    made = journal.read_text().split()
    # Only calls in flight at a kill (answered, not yet recorded) may be made again: up to 8
    # workers of the loop and 8 sending calls ahead of it.
    assert len(made) - len(set(made)) <= kills * 16
    assert len(set(made)) == expected["calls"]["n"]
    assert git(repo, "status", "--porcelain") == ""

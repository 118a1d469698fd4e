"""Skill packages for agent harnesses, ``eval`` and ``check`` (issue 14, item 4).

A harness that installs the skill (``command``, ``claude-code``, ``codex``) gets the whole
skill directory: SKILL.md, its text files and its carried files (scripts, assets) byte for
byte with their executable bits, from the version evaluated; symbolic links are left out and
named. The agents here are fakes that follow the documented formats and, like an agent
following a skill, read the files SKILL.md links to and run the scripts it names
(``tests/fixtures/agents/skill_files.py``).
"""

# The imported ``scratch_tmp`` fixture is named by test parameters, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from test_agents import fake_cli, scratch_tmp  # noqa: F401 - scratch_tmp is a fixture

from skillvc.cli import cli
from skillvc.core.config import ModelConfig, load_config
from skillvc.core.hashing import content_id
from skillvc.core.store import open_store
from skillvc.models.agents.backend import AgentBackend
from skillvc.models.backends.base import CallRequest
from skillvc.models.backends.command import AgentFailed, CommandBackend
from skillvc.models.prompts import section
from skillvc.packages.model import load_package
from skillvc.packages.packagefile import PackageFile
from skillvc.packages.version import package_version
from skillvc.repo.skillrepo import SkillRepo
from skillvc.review.evaluation import EvalResult, evaluate
from skillvc.tasks.taskset import TaskItem
from skillvc.training.evaluate import rollout_request
from skillvc.training.loop import train
from skillvc.workspace.workspace import open_workspace
from tests.conftest import copy_repo, git

AGENTS = Path(__file__).parent / "fixtures" / "agents"
PACKAGE = "skills/acme-returns"
SKILL_MD = (
    "---\nname: acme-returns\ndescription: Decide the action for an Acme store customer-support "
    "ticket about a return, refund or delivery problem.\n---\n# Acme returns support\n\n"
    "Decide the one action support should take and answer inside <answer></answer>.\n\n"
    "For special cases read [the forms](references/forms.md).\n"
    "Run `scripts/policy.sh` for the shipping policy.\n"
)
BILLING = "Billing errors go to the billing team: escalate them."
MISSING = "Missing parts: ship the missing part instead of refunding."
DAMAGED = "Damaged on arrival: offer a replacement, not a refund."
FORMS = f"# Forms\n\n- {BILLING}\n"
POLICY = f'#!/bin/sh\necho "{MISSING}"\n'
LOGO = bytes(range(256))  # a binary asset: not UTF-8, never a package file
INSTALLED_ERROR = "The skill package file {!r} would be installed outside it."
LINK_HINT = "Hint: Fix the link or add the file it names, then run skillvc validate."
SYMLINK_HINT = "Hint: Put the file itself in the package instead of the link, then commit."
CONFIG_HINT = (
    "Hint: The check judged the change by the base's settings and tasks; a maintainer who "
    "accepts the new ones reruns it with --allow-config-change."
)
# Prints every entry of the installed skill directory: sha256, permission bits, link or not.
MANIFEST = (
    "import hashlib, json, os, sys\n"
    "top = sys.argv[1]\nsys.stdin.read()\nout = {}\n"
    "for here, dirs, names in os.walk(top):\n"
    "    for n in dirs + names:\n"
    "        p = os.path.join(here, n)\n"
    "        rel = os.path.relpath(p, top).replace(os.sep, '/')\n"
    "        if os.path.islink(p):\n            out[rel] = 'link'\n"
    "        elif os.path.isfile(p):\n"
    "            data = open(p, 'rb').read()\n"
    "            out[rel] = [hashlib.sha256(data).hexdigest(), oct(os.stat(p).st_mode & 0o777)]\n"
    "print(json.dumps(out, sort_keys=True))\n"
)


def _target(harness: str, bin_dir: Path) -> str:
    if harness == "chat":
        return 'model = "sim:support"'
    if harness == "command":
        argv = [sys.executable, str(AGENTS / "package_agent.py"), "{skill_dir}"]
        return f'model = "command:package-agent"\nharness = "command"\ncommand = {json.dumps(argv)}'
    exe = fake_cli(bin_dir, harness)
    return (
        f'model = "command:{harness}"\nharness = "{harness}"\nexecutable = {json.dumps(str(exe))}'
    )


def make_repo(seed: Path, tmp_path: Path, harness: str, skill_keys: str = "") -> Path:
    """The demo repo with its skill turned into a package (a linked reference, an executable
    script, a binary asset), an agent or chat target and a smaller task set, committed."""
    root = copy_repo(seed, tmp_path / "repo")
    for split, n in (("train", 20), ("val", 12), ("test", 6)):
        path = root / "evals" / f"{split}.jsonl"
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:n]))
    folder = root / PACKAGE
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "references").mkdir()
    (folder / "references" / "forms.md").write_text(FORMS)
    (folder / "scripts").mkdir()
    (folder / "scripts" / "policy.sh").write_text(POLICY)
    (folder / "scripts" / "policy.sh").chmod(0o755)
    (folder / "assets").mkdir()
    (folder / "assets" / "logo.bin").write_bytes(LOGO)
    toml = root / "skillvc.toml"
    text = toml.read_text().replace(
        f'path = "{PACKAGE}/SKILL.md"', f'path = "{PACKAGE}"{skill_keys}'
    )
    text = text.replace('model = "sim:support"\ntemperature = 0.0', _target(harness, tmp_path))
    text = text.replace("epochs = 3", "epochs = 1").replace("batch_size = 20", "batch_size = 5")
    toml.write_text(text.replace("workers = 8", "workers = 2"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"package skill, {harness} target")
    return root


def run_cli(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(repo)
    return CliRunner().invoke(cli, list(args))


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def outputs(repo: Path, result: EvalResult) -> dict[str, str]:
    """Each item's full answer, from the log."""
    with open_store(repo / ".skillvc" / "events.db") as store:
        return {i.id: store.get_blob(i.output) for i in result.items if i.output}


def follows(repo: Path, result: EvalResult, rule: str) -> bool:
    """Whether some answer applied ``rule`` (the simulated agent names the rule it used)."""
    return any(f"Following the rule: {rule}" in text for text in outputs(repo, result).values())


def target_calls(repo: Path) -> list[dict[str, Any]]:
    db_path = repo / ".skillvc" / "events.db"
    if not db_path.exists():
        return []
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT payload FROM events WHERE type = 'model.call' ORDER BY id")
        payloads = [json.loads(row[0]) for row in rows]
    return [p for p in payloads if p["role"] == "target"]


def blob(repo: Path, key: str) -> str:
    with open_store(repo / ".skillvc" / "events.db") as store:
        return store.get_blob(key)


def manifest_request(root: Path, rev: str | None) -> tuple[CallRequest, dict[str, Any]]:
    """The request the installing target gets for the package at ``rev``, and the manifest a
    command agent prints of what was installed."""
    config = load_config(root)
    with SkillRepo(root) as repo:
        version = package_version(config, repo, rev)
    assert version is not None
    item = TaskItem(id="1", input="hello", targets=("x",))
    messages, files = rollout_request(version.bundle, item, version.view)
    request = CallRequest(
        role="target",
        model="command:manifest",
        messages=tuple(messages),
        files=files,
    )
    backend = CommandBackend(
        ModelConfig(
            model="command:manifest",
            harness="command",
            command=[sys.executable, "-c", MANIFEST, "{skill_dir}"],
        )
    )
    return request, json.loads(backend.complete(request).text)


def sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


# -- installing the whole directory ------------------------------------------------------------


def repo_with_links(seed: Path, tmp_path: Path, outside: str, name: str) -> Path:
    """A command-target package repo whose package holds two committed symbolic links:
    ``scripts/latest`` to a script beside it and ``references/<name>`` to the repository's
    ``outside`` file."""
    root = make_repo(seed, tmp_path, "command")
    folder = root / PACKAGE
    os.symlink(f"../../../{outside}", folder / "references" / name)
    os.symlink("policy.sh", folder / "scripts" / "latest")
    commit(root, "links")
    return root


def test_carried_files_are_installed_byte_for_byte_with_their_executable_bits(
    demo_seed: Path, tmp_path: Path, scratch_tmp: Path
) -> None:
    # Symbolic links, inside the package and out of it: never followed nor installed.
    root = repo_with_links(demo_seed, tmp_path, "skillvc.toml", "config.md")
    folder = root / PACKAGE
    (folder / "scripts" / "policy.sh").write_text('#!/bin/sh\necho "uncommitted"\n')

    _, installed = manifest_request(root, "HEAD")
    assert installed == {
        "SKILL.md": [sha(SKILL_MD), "0o644"],
        "assets/logo.bin": [sha(LOGO), "0o644"],
        "references/forms.md": [sha(FORMS), "0o644"],
        "scripts/policy.sh": [sha(POLICY), "0o755"],
    }
    # The working tree is another version: its own script, the same links left out.
    _, worktree = manifest_request(root, None)
    assert worktree["scripts/policy.sh"] == [sha('#!/bin/sh\necho "uncommitted"\n'), "0o755"]
    assert "scripts/latest" not in worktree and "references/config.md" not in worktree
    config = load_config(root)
    with SkillRepo(root) as repo:
        for rev in ("HEAD", None):
            version = package_version(config, repo, rev)
            assert version is not None
            assert version.carried.skipped == ("references/config.md", "scripts/latest")
            assert version.package.names == ["SKILL.md", "references/forms.md"]
    assert list(scratch_tmp.iterdir()) == [], "no scratch directory is left behind"


@pytest.mark.parametrize("harness", ["command", "claude-code", "codex"])
def test_each_agent_reads_the_reference_and_runs_the_script(
    demo_seed: Path, tmp_path: Path, harness: str, scratch_tmp: Path, isolated_env: Path
) -> None:
    root = make_repo(demo_seed, tmp_path, harness)
    home_before = sorted(isolated_env.rglob("*"))
    result = evaluate(open_workspace(root), "HEAD", "val")

    assert follows(root, result, BILLING), "the agent read references/forms.md"
    assert follows(root, result, MISSING), "the agent ran scripts/policy.sh"
    assert result.package == {
        "included": [],
        "cut": [],
        "carried": ["assets/logo.bin", "scripts/policy.sh"],
        "skipped": [],
    }
    calls = target_calls(root)
    assert len(calls) == 12
    if harness == "command":
        assert all("read references/forms.md" in c["meta"]["stderr_tail"] for c in calls)
        assert all("ran scripts/policy.sh -> 0" in c["meta"]["stderr_tail"] for c in calls)
    else:
        assert result.activation == {"loaded": 12, "of": 12, "rate": 1.0}
        used = ["references/forms.md", "scripts/policy.sh"]
        assert all(c["meta"]["files_used"] == used for c in calls)

    # The executable bit is part of the version: without it the script cannot run.
    (root / PACKAGE / "scripts" / "policy.sh").chmod(0o644)
    commit(root, "policy.sh loses its executable bit")
    plain = evaluate(open_workspace(root), "HEAD", "val")
    assert plain.fresh_calls == 12, "a changed mode is a new call"
    assert follows(root, plain, BILLING) and not follows(root, plain, MISSING)
    if harness == "command":
        tails = [c["meta"]["stderr_tail"] for c in target_calls(root)[12:]]
        assert len(tails) == 12 and all("ran scripts/policy.sh -> 126" in t for t in tails)

    # Nothing was written outside the scratch directories.
    assert list(scratch_tmp.iterdir()) == []
    assert sorted(isolated_env.rglob("*")) == home_before
    assert git(root, "status", "--porcelain", "--ignored", "--", PACKAGE) == ""


@pytest.mark.parametrize(
    "path", ["../escape.sh", "../../../escape.sh", "/tmp/skillvc-escape.sh", "scripts\\..\\x"]
)
@pytest.mark.parametrize("harness", ["command", "claude-code"])
def test_a_crafted_package_path_is_refused_and_nothing_is_written(
    tmp_path: Path, path: str, harness: str, scratch_tmp: Path
) -> None:
    escape = PackageFile(path, data=b"#!/bin/sh\necho escaped\n", executable=True)
    messages = ({"role": "system", "content": SKILL_MD}, {"role": "user", "content": "hi"})
    request = CallRequest("target", "command:x", messages, files=(escape,))
    backend: CommandBackend | AgentBackend
    if harness == "command":
        argv = [sys.executable, str(AGENTS / "package_agent.py"), "{skill_dir}"]
        backend = CommandBackend(ModelConfig(model="command:x", harness="command", command=argv))
    else:
        exe = fake_cli(tmp_path / "bin", harness)
        backend = AgentBackend(ModelConfig(model="command:x", harness=harness, executable=str(exe)))
    with pytest.raises(AgentFailed) as info:
        backend.complete(request)
    assert info.value.message == INSTALLED_ERROR.format(path)
    assert not Path("/tmp/skillvc-escape.sh").exists()
    assert list(scratch_tmp.iterdir()) == [], "the scratch directory is removed"
    assert not any(p.name in ("escape.sh", "x") for p in tmp_path.rglob("*"))


# -- the cache ---------------------------------------------------------------------------------


def test_a_changed_reference_script_or_asset_misses_the_cache_an_unchanged_one_hits(
    demo_seed: Path, tmp_path: Path
) -> None:
    root = make_repo(demo_seed, tmp_path, "command")
    first = evaluate(open_workspace(root), "HEAD", "val")
    again = evaluate(open_workspace(root), "HEAD", "val")
    assert (first.fresh_calls, again.fresh_calls, again.recorded) == (12, 0, False)
    # The event log keys carried files by hash and never holds their bytes.
    files = json.loads(blob(root, target_calls(root)[0]["files"]))
    assert files == {
        "assets/logo.bin": {"bytes": 256, "executable": False, "sha256": sha(LOGO)},
        "references/forms.md": FORMS,
        "scripts/policy.sh": {"bytes": len(POLICY), "executable": True, "sha256": sha(POLICY)},
    }

    folder = root / PACKAGE
    changes = [
        ("references/forms.md", FORMS + "\nAsk for the order number.\n"),
        ("scripts/policy.sh", POLICY + 'echo "Be brief."\n'),
        ("assets/logo.bin", LOGO[::-1]),
    ]
    for name, content in changes:
        target = folder / name
        if isinstance(content, str):
            target.write_text(content)
        else:
            target.write_bytes(content)
        commit(root, f"change {name}")
        changed = evaluate(open_workspace(root), "HEAD", "val")
        assert changed.fresh_calls == 12, name
        assert evaluate(open_workspace(root), "HEAD", "val").fresh_calls == 0, name
    # A commit that touches nothing of the package is the same version: answered from the log.
    (root / "NOTES.md").write_text("Unrelated.\n")
    commit(root, "unrelated")
    assert evaluate(open_workspace(root), "HEAD", "val").fresh_calls == 0


def test_text_only_keys_are_as_before_and_a_carried_file_counts_by_hash() -> None:
    messages = ({"role": "system", "content": "S"}, {"role": "user", "content": "U"})
    base = {"model": "m", "params": {}, "messages": [dict(m) for m in messages], "sample": 0}
    plain = CallRequest("target", "m", messages)
    assert plain.key == content_id(base, length=32)
    text = CallRequest("target", "m", messages, files=(PackageFile("r.md", text="R"),))
    assert text.key == content_id({**base, "files": [["r.md", "R"]]}, length=32)

    def carried(data: bytes, executable: bool) -> str:
        files = (PackageFile("s.sh", data=data, executable=executable),)
        return CallRequest("target", "m", messages, files=files).key

    assert carried(b"x", True) == content_id(
        {**base, "files": [["s.sh", {"executable": True, "sha256": sha(b"x")}]]}, length=32
    )
    assert len({carried(b"x", True), carried(b"x", False), carried(b"y", True)}) == 3


def test_training_and_eval_share_the_calls_of_a_package(demo_seed: Path, tmp_path: Path) -> None:
    root = make_repo(demo_seed, tmp_path, "command")
    base = git(root, "rev-parse", "HEAD")
    summary = train(open_workspace(root))
    assert summary.status == "finished"
    # Training edits text files only: the carried files are the base's, untouched.
    changed = git(root, "diff", "--name-only", base, "HEAD").split()
    assert all(not name.startswith((f"{PACKAGE}/scripts", f"{PACKAGE}/assets")) for name in changed)
    calls = target_calls(root)
    assert calls and all("scripts/policy.sh" in json.loads(blob(root, c["files"])) for c in calls)
    # The optimizer is told what the agent gets besides the text files: path and size only.
    with open_store(root / ".skillvc" / "events.db") as store:
        prompts = [
            json.loads(store.get_blob(r["prompt_blob"]))[-1]["content"]
            for r in store.query("SELECT prompt_blob FROM model_calls WHERE role = 'optimizer'")
        ]
    reflect = [p for p in prompts if "<!-- skillvc-prompt: reflect -->" in p]
    listed = json.loads(section(reflect[0], "package_files"))
    carried = [e for e in listed if e.get("carried")]
    assert carried == [
        {"path": "assets/logo.bin", "bytes": 256, "carried": True},
        {"path": "scripts/policy.sh", "bytes": len(POLICY.encode()), "carried": True},
    ]
    best = evaluate(open_workspace(root), None, "val")
    baseline = evaluate(open_workspace(root), base, "val")
    assert (best.fresh_calls, baseline.fresh_calls) == (0, 0), "answered from training's calls"
    assert follows(root, baseline, MISSING)


# -- eval --------------------------------------------------------------------------------------


def test_eval_says_which_linked_files_were_cut_for_the_budget_or_the_cap(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(demo_seed, tmp_path, "chat", "\nreference_bytes = 400")
    folder = root / PACKAGE
    big = "# Background\n\n" + "Acme was founded long ago. " * 40 + "\n"
    (folder / "references" / "big.md").write_text(big)
    (folder / "SKILL.md").write_text(SKILL_MD + "Background: [history](references/big.md).\n")
    commit(root, "a long reference")

    result = run_cli(root, monkeypatch, "eval", "HEAD", "-q", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"warning: {PACKAGE}/references/big.md is linked from SKILL.md but left out of what "
        "the target is sent at HEAD, to keep within [skill] reference_bytes (400 bytes) and "
        "max_tokens (5,000 tokens)."
    ]
    data = json.loads(result.stdout)
    assert data["package"] == {
        "included": ["references/forms.md"],
        "cut": ["references/big.md"],
        "carried": [],
        "skipped": [],
    }
    systems = [json.loads(blob(root, c["prompt"]))[0]["content"] for c in target_calls(root)]
    assert systems and all(BILLING in s and "Acme was founded" not in s for s in systems)

    # The token cap: SKILL.md fits, the linked files would not, whatever reference_bytes says.
    toml = root / "skillvc.toml"
    cap = -(-len(SKILL_MD.encode() + b"Background: [history](references/big.md).\n") // 4) + 10
    toml.write_text(
        toml.read_text().replace(
            "reference_bytes = 400", f"reference_bytes = 100000\nmax_tokens = {cap}"
        )
    )
    capped = run_cli(root, monkeypatch, "eval", "-q", "--json")
    assert capped.exit_code == 0, capped.output
    assert capped.stderr.splitlines() == [
        f"warning: {PACKAGE}/references/forms.md and {PACKAGE}/references/big.md are linked "
        "from SKILL.md but left out of what the target is sent in the working tree, to keep "
        f"within [skill] reference_bytes (100,000 bytes) and max_tokens ({cap:,} tokens)."
    ]
    assert json.loads(capped.stdout)["package"]["cut"] == [
        "references/forms.md",
        "references/big.md",
    ]


@pytest.mark.parametrize("harness", ["chat", "command"])
@pytest.mark.parametrize("defect", ["link", "utf-8"])
def test_eval_refuses_a_broken_package_before_any_call(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, harness: str, defect: str
) -> None:
    root = make_repo(demo_seed, tmp_path, harness)
    folder = root / PACKAGE
    if defect == "link":
        (folder / "SKILL.md").write_text(SKILL_MD + "See [the archive](references/archive.md).\n")
        expected = [
            f"Error: {PACKAGE}/SKILL.md: the link to 'references/archive.md' names no file of "
            "the package at HEAD.",
            LINK_HINT,
        ]
    else:
        (folder / "references" / "latin1.md").write_bytes(b"Caf\xe9 rules.\n")
        expected = [
            f"Error: The skill package file {PACKAGE}/references/latin1.md at HEAD is not UTF-8 "
            "text (bad byte 0xe9 at offset 3).",
            "Hint: Save it as UTF-8, or leave it out of the package with [skill] exclude.",
        ]
    commit(root, f"a package with a bad {defect}")

    result = run_cli(root, monkeypatch, "eval", "HEAD", "-q")
    assert result.exit_code == 5, result.output
    assert result.stderr.splitlines() == expected
    assert target_calls(root) == []


def test_symlinks_in_a_package_are_left_out_and_named(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = repo_with_links(demo_seed, tmp_path, "evals/val.jsonl", "answers.md")
    folder = root / PACKAGE

    result = run_cli(root, monkeypatch, "eval", "HEAD", "-q", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"warning: The symbolic links {PACKAGE}/references/answers.md and "
        f"{PACKAGE}/scripts/latest in the skill package at HEAD are left out: skillvc never "
        "follows a link in a skill package."
    ]
    package = json.loads(result.stdout)["package"]
    assert package["skipped"] == ["references/answers.md", "scripts/latest"]
    assert package["carried"] == ["assets/logo.bin", "scripts/policy.sh"]
    assert all("answers.md" not in json.loads(blob(root, c["files"])) for c in target_calls(root))
    with SkillRepo(root) as repo:
        for rev in ("HEAD", None):
            found = load_package(load_config(root), repo, rev)
            assert found is not None and "references/answers.md" not in found.files

    # A folder the working tree replaced with a link: the tracked files under it stay out.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "policy.sh").write_text('#!/bin/sh\necho "from outside"\n')
    (outside / "policy.sh").chmod(0o755)
    for entry in (folder / "scripts").iterdir():
        entry.unlink()
    (folder / "scripts").rmdir()
    os.symlink(outside, folder / "scripts")
    with SkillRepo(root) as repo:
        version = package_version(load_config(root), repo, None)
    assert version is not None
    assert [f.path for f in version.carried.files] == ["assets/logo.bin"]
    assert version.carried.skipped == ("references/answers.md", "scripts", "scripts/policy.sh")

    # Linking to it is a broken link: a link never brings a file in from outside.
    (folder / "SKILL.md").write_text(SKILL_MD + "Answers: [here](references/answers.md).\n")
    linked = run_cli(root, monkeypatch, "eval", "-q")
    assert linked.exit_code == 5
    assert linked.stderr.splitlines() == [
        f"Error: {PACKAGE}/SKILL.md: the link to 'references/answers.md' names a symbolic link "
        "in the working tree, and a skill package never follows one.",
        SYMLINK_HINT,
    ]


# -- check ---------------------------------------------------------------------------------------


def pull_request(repo: Path) -> None:
    git(repo, "checkout", "-q", "-b", "pr")


def test_check_sees_a_pr_that_changes_only_a_reference_file(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(demo_seed, tmp_path, "chat")
    forms = root / PACKAGE / "references" / "forms.md"
    forms.write_text(FORMS + f"- {MISSING}\n")
    commit(root, "forms: missing parts")
    pull_request(root)
    forms.write_text(FORMS)  # the PR drops the missing-parts rule from the reference
    commit(root, "PR: shorter forms")

    result = run_cli(root, monkeypatch, "check", "-q", "--base", "main", "pr", "--json")
    assert result.exit_code == 7, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "regression"
    assert data["config_changes"] == [] and data["skill"] == {"base": PACKAGE, "head": PACKAGE}
    assert data["comparison"]["diff"] < 0
    assert data["comparison"]["b"]["package"]["included"] == ["references/forms.md"]
    assert result.stderr.startswith("Error: The skill scores ")

    # A PR that strengthens the reference passes (its change reaches the target).
    forms.write_text(FORMS + f"- {MISSING}\n- {DAMAGED}\n")
    better = run_cli(root, monkeypatch, "check", "-q", "--base", "main", "--json")
    assert better.exit_code == 0, better.output
    assert json.loads(better.stdout)["comparison"]["diff"] > 0


def test_check_a_pr_that_adds_and_links_a_reference_file(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(demo_seed, tmp_path, "chat")
    pull_request(root)
    folder = root / PACKAGE
    (folder / "references" / "shipping.md").write_text(f"# Shipping\n\n- {MISSING}\n")
    (folder / "SKILL.md").write_text(SKILL_MD + "Shipping: [rules](references/shipping.md).\n")
    commit(root, "PR: shipping reference")

    result = run_cli(root, monkeypatch, "check", "-q", "--base", "main", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "pass"
    assert data["comparison"]["diff"] > 0
    assert data["comparison"]["a"]["package"]["included"] == ["references/forms.md"]
    assert data["comparison"]["b"]["package"]["included"] == [
        "references/forms.md",
        "references/shipping.md",
    ]


@pytest.mark.parametrize("head", ["pr", None])
@pytest.mark.parametrize("trick", ["climbing link", "symlinked reference"])
def test_check_refuses_a_pr_with_a_broken_link_or_a_path_trick(
    demo_seed: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    trick: str,
    head: str | None,
) -> None:
    root = make_repo(demo_seed, tmp_path, "chat")
    pull_request(root)
    folder = root / PACKAGE
    if trick == "climbing link":
        (folder / "SKILL.md").write_text(SKILL_MD + "Settings: [see](../../skillvc.toml).\n")
        problem, hint = "the link to '../../skillvc.toml' leaves the skill package{}.", LINK_HINT
    else:  # the reference becomes a link to the expected answers
        (folder / "references" / "forms.md").unlink()
        os.symlink("../../../evals/val.jsonl", folder / "references" / "forms.md")
        problem = (
            "the link to 'references/forms.md' names a symbolic link{}, and a skill package "
            "never follows one."
        )
        hint = SYMLINK_HINT
    commit(root, f"PR: {trick}")
    args = ["check", "-q", "--base", "main", *([head] if head else [])]

    result = run_cli(root, monkeypatch, *args)
    assert result.exit_code == 5, result.output
    where = "in the working tree" if head is None else f"at {head}"
    error = f"Error: {PACKAGE}/SKILL.md: {problem.format(' ' + where)}"
    assert result.stderr.splitlines() == [error, hint]
    assert target_calls(root) == [], "refused before any model call"


def test_check_treats_include_exclude_and_reference_bytes_as_config_changes(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_repo(demo_seed, tmp_path, "chat")
    pull_request(root)
    toml = root / "skillvc.toml"
    toml.write_text(
        toml.read_text().replace(
            f'path = "{PACKAGE}"',
            f'path = "{PACKAGE}"\ninclude = ["*.md", "*.sh"]\nexclude = ["forms.md"]\n'
            "reference_bytes = 10",
        )
    )
    commit(root, "PR: package settings")

    result = run_cli(root, monkeypatch, "check", "-q", "--base", "main", "--json")
    assert result.exit_code == 7, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "config_changed"
    assert data["config_changes"] == ["skill.exclude", "skill.include", "skill.reference_bytes"]
    assert result.stderr.splitlines() == [
        "Error: The change edits skillvc.toml (skill.exclude, skill.include, "
        "skill.reference_bytes), which the check takes from main only.",
        CONFIG_HINT,
    ]
    # The base's settings decide: the head is read and rendered as the base says.
    b = data["comparison"]["b"]
    assert b["package"]["included"] == ["references/forms.md"]
    assert data["comparison"]["diff"] == 0
    allowed = run_cli(
        root, monkeypatch, "check", "-q", "--base", "main", "--allow-config-change", "--json"
    )
    assert allowed.exit_code == 0, allowed.output


def test_check_installs_each_side_s_own_script_for_an_agent(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scratch_tmp: Path
) -> None:
    root = make_repo(demo_seed, tmp_path, "command")
    pull_request(root)
    (root / PACKAGE / "scripts" / "policy.sh").write_text('#!/bin/sh\necho "No policy."\n')
    os.symlink("policy.sh", root / PACKAGE / "scripts" / "latest")
    commit(root, "PR: a script without the policy")

    result = run_cli(root, monkeypatch, "check", "-q", "--base", "main", "pr", "--json")
    assert result.exit_code == 7, result.output
    data = json.loads(result.stdout)
    assert data["verdict"] == "regression" and data["config_changes"] == []
    assert data["comparison"]["b"]["package"]["carried"] == ["assets/logo.bin", "scripts/policy.sh"]
    scripts = {
        json.loads(blob(root, c["files"]))["scripts/policy.sh"]["sha256"]
        for c in target_calls(root)
    }
    assert scripts == {sha(POLICY), sha('#!/bin/sh\necho "No policy."\n')}
    assert data["comparison"]["b"]["package"]["skipped"] == ["scripts/latest"]
    assert list(scratch_tmp.iterdir()) == []
    warning, error, hint = result.stderr.splitlines()
    assert warning == (
        f"warning: The symbolic link {PACKAGE}/scripts/latest in the skill package at pr is "
        "left out: skillvc never follows a link in a skill package."
    )
    assert re.fullmatch(r"Error: The skill scores \S+ on val, \S+ below \S+ at main\.", error)
    assert hint == "Hint: Look at the flipped items, or pass --allow-drop to tolerate a small drop."

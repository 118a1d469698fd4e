"""Many skills in one repository: one skillvc.toml, --skill, per-skill runs, refs and tags."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import git

from skillvc.cli import cli
from skillvc.core.config import load_config, parse_config
from skillvc.core.resources import read_bytes
from skillvc.workspace.workspace import render_config

SKILLS = ("billing", "returns", "shipping", "warranty", "loyalty", "gifts", "tax")
TRAIN_KEYS = "[train]\nepochs = 1\nbatch_size = 8\nminibatch_size = 4\nworkers = 4\nseed = 7\n"


def _lines(source: str, n: int) -> bytes:
    rows = read_bytes("templates", f"demo/evals/{source}.jsonl").decode().splitlines()
    return ("\n".join(rows[:n]) + "\n").encode()


def _seed_skill(repo: Path, name: str) -> None:
    """skills/<name>/SKILL.md (the demo's seed body, under its own name) and its own tasks."""
    body = read_bytes("templates", "demo/SKILL.md").decode().replace("acme-returns", name, 1)
    folder = repo / "skills" / name
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(body, encoding="utf-8")
    for split, n in (("train", 16), ("val", 10), ("test", 6)):
        (folder / "evals" / f"{split}.jsonl").write_bytes(_lines(split, n))


@pytest.fixture
def many(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A committed repository with 7 skills (each with its own task files), initialised."""
    for name in SKILLS:
        _seed_skill(git_repo, name)
    monkeypatch.chdir(git_repo)
    result = CliRunner().invoke(
        cli, ["init", "--target", "sim:support", "--optimizer", "sim:support", "--seed", "7"]
    )
    assert result.exit_code == 0, result.output
    text = (git_repo / "skillvc.toml").read_text()
    (git_repo / "skillvc.toml").write_text(
        text.split("\n[train]\n")[0] + "\n" + TRAIN_KEYS + _tables(text)
    )
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "seven skills")
    return git_repo


def _tables(text: str) -> str:
    return text[text.index("\n[skills.") :]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_init_lists_every_skill_with_its_task_files(many: Path) -> None:
    config = load_config(many)
    assert config.skill_names == sorted(SKILLS)
    billing = config.for_skill("billing")
    assert billing.skill_relpath == "skills/billing/SKILL.md"
    assert billing.tasks.train == "skills/billing/evals/train.jsonl"
    assert billing.tasks.test == "skills/billing/evals/test.jsonl"
    assert billing.target.model == "sim:support"  # the shared default
    assert billing.train.epochs == 1
    assert '[skills.tax]\npath = "skills/tax/SKILL.md"\n' in (many / "skillvc.toml").read_text()


def test_init_prints_the_skills_and_acknowledges_or_adds_one(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("alpha", "beta"):
        _seed_skill(git_repo, name)
    monkeypatch.chdir(git_repo)
    code, out, _ = run("init")
    assert code == 0
    assert out.splitlines()[:3] == [
        "Wrote skillvc.toml listing 2 skills ([skills.<name>] tables); commit it. "
        "Name one with --skill NAME when training:",
        "Created .skillvc/ (the event log, local state).",
        "Added /.skillvc/ to .gitignore.",
    ]
    assert out.splitlines()[3] == (
        "  alpha: skills/alpha/SKILL.md (tasks skills/alpha/evals/train.jsonl, "
        "skills/alpha/evals/val.jsonl, skills/alpha/evals/test.jsonl)"
    )
    code, out, _ = run("init", "--skill", "alpha")
    assert (code, out.splitlines()[0]) == (
        0,
        "skillvc.toml already lists skill alpha (skills/alpha/SKILL.md).",
    )
    _seed_skill(git_repo, "gamma")
    code, out, _ = run("init", "--skill", "skills/gamma")
    assert (code, out.splitlines()[0]) == (
        0,
        "Added skill gamma (skills/gamma/SKILL.md) to skillvc.toml; it now lists alpha, beta "
        "and gamma.",
    )
    assert load_config(git_repo).for_skill("gamma").tasks.val == "skills/gamma/evals/val.jsonl"


def test_a_command_needing_a_skill_names_them_and_exits_2(many: Path) -> None:
    code, out, err = run("train")
    assert (code, out) == (2, "")
    assert err == (
        "Error: skillvc.toml lists 7 skills: billing, gifts, loyalty, returns, shipping and 2 "
        "more.\nHint: Name one with --skill NAME, e.g. --skill billing.\n"
    )
    for args in (["eval"], ["diff"], ["blame"]):
        assert run(*args)[0] == 2, args
    code, _, err = run("eval", "--skill", "nope")
    assert code == 3
    assert err.startswith(
        "Error: skillvc.toml has no skill 'nope' (it lists billing, gifts, loyalty, returns, "
        "shipping and 2 more).\n"
    )


def test_two_skills_train_one_after_the_other(many: Path) -> None:
    base = git(many, "rev-parse", "HEAD")
    # About many skills, not the gate: the bundle gate keeps this small world's gains.
    code, out, err = run("train", "--skill", "billing", "-q", "--no-attribution")
    assert code == 0, err
    billing_head = git(many, "rev-parse", "HEAD")
    touched = git(many, "diff", "--name-only", base, billing_head).split()
    assert touched == ["skills/billing/SKILL.md"]
    # A path names the skill as well as its table name.
    code, out, err = run("train", "--skill", "skills/returns/SKILL.md", "-q", "--no-attribution")
    assert code == 0, err
    touched = git(many, "diff", "--name-only", billing_head, "HEAD").split()
    assert set(touched) <= {"skills/returns/SKILL.md"}  # its own file or nothing (all rejected)

    runs = json.loads(run("runs", "--json")[1])
    assert len(runs) == 2
    by_skill = {
        name: json.loads(run("runs", "--json", "--skill", name)[1])
        for name in ("billing", "returns")
    }
    assert [len(v) for v in by_skill.values()] == [1, 1]
    billing_run, returns_run = by_skill["billing"][0]["run"], by_skill["returns"][0]["run"]
    assert billing_run != returns_run
    assert json.loads(run("runs", "--json", "--skill", "tax")[1]) == []

    # Tags and rejected refs carry the skill's name.
    tags = git(many, "tag", "--list", "skillvc/*").split()
    assert f"skillvc/billing/{billing_run}/epoch-1" in tags
    assert f"skillvc/returns/{returns_run}/epoch-1" in tags
    assert all(t.split("/")[1] in ("billing", "returns") for t in tags)
    refs = git(many, "for-each-ref", "--format=%(refname)", "refs/skillvc/rejected/").split()
    assert refs, "the sim run rejects some candidates"
    assert {r.split("/")[3] for r in refs} <= {"billing", "returns"}
    assert all(r.split("/")[4] in (billing_run, returns_run) for r in refs)

    # run.started records the skill's name.
    from skillvc.core.store import open_store

    with open_store(many / ".skillvc" / "events.db") as store:
        started = {e.run_id: e.payload for e in store.events(types=["run.started"])}
    assert started[billing_run]["skill_name"] == "billing"
    assert started[returns_run]["config"]["skill"]["path"] == "skills/returns/SKILL.md"

    # log filters by skill; every entry of the billing log is a billing run's.
    log_all = json.loads(run("log", "--json")[1])
    log_billing = json.loads(run("log", "--json", "--skill", "billing")[1])
    assert 0 < len(log_billing) < len(log_all)
    assert {e["run"] for e in log_billing} == {billing_run}
    newest = json.loads(run("log", "--json", "-p", "-n", "1")[1])[0]  # returns' last gate
    assert newest["run"] == returns_run
    assert "+++ b/skills/returns/SKILL.md" in newest["patch"]

    # report: one skill's run with --skill; every skill's latest run without.
    report = json.loads(run("report", "--json", "--skill", "returns")[1])
    assert report["run"] == returns_run
    every = json.loads(run("report", "--json")[1])
    assert [(r["skill"], r["run"]) for r in every] == [
        ("billing", billing_run),
        ("returns", returns_run),
    ]
    markdown = run("report")[1]
    assert markdown.startswith("# Skill billing\n\n")
    assert "\n# Skill returns\n\n" in markdown

    # blame: the billing skill's lines come from the billing run or a human.
    lines = json.loads(run("blame", "--skill", "billing", "--json")[1])
    assert {line["run"] for line in lines} <= {billing_run, None}
    assert any(line["run"] == billing_run for line in lines)

    # Training billing again is up to date (its own run, not returns' newer one).
    code, out, _ = run("train", "--skill", "billing", "--no-attribution")
    assert code == 0
    assert out.startswith(f"Nothing to do: run {billing_run} already finished")


def test_validate_covers_every_skill(many: Path) -> None:
    code, out, _ = run("validate")
    assert (code, out) == (0, "Checked 7 files: no problems.\n")
    broken = many / "skills" / "gifts" / "SKILL.md"
    broken.write_text("---\nname: [unclosed\n---\n# Gifts\n", encoding="utf-8")
    code, out, _ = run("validate")
    assert code == 5
    assert out.startswith("skills/gifts/SKILL.md: ")


def test_a_second_train_is_refused_while_one_runs(many: Path) -> None:
    from skillvc.core.store import open_store

    with open_store(many / ".skillvc" / "events.db") as store, store.writer_lock():
        code, out, err = run("train", "--skill", "tax")
    assert code == 4
    assert err == (
        f"Error: Another skillvc train is running in this repository (pid {os.getpid()}).\n"
        "Hint: Wait for it to finish, or stop it; readers such as 'skillvc log' still work.\n"
    )
    with open_store(many / ".skillvc" / "events.db") as store, store.writer_lock():
        code_one, _, err_one = run("train", "--skill", "gifts")
    assert (code_one, err_one) == (code, err)  # the same lock message, whichever skill


def test_check_gives_a_verdict_per_skill(many: Path) -> None:
    git(many, "checkout", "-q", "-b", "pr")
    for name in ("billing", "shipping"):
        path = many / "skills" / name / "SKILL.md"
        path.write_text(
            path.read_text().replace(
                "- After 14 days from delivery, deny all returns.\n",
                "- Damaged items are always replaced.\n",
            )
        )
    git(many, "commit", "-q", "-am", "edit two skills")
    code, out, err = run("check", "--base", "main", "HEAD", "-q")
    verdicts = [line for line in out.splitlines() if line.startswith("== ")]
    assert verdicts == [f"== skill {name} ==" for name in sorted(SKILLS)]
    data = json.loads(run("check", "--base", "main", "HEAD", "-q", "--json")[1])
    assert sorted(data["skills"]) == sorted(SKILLS)
    unchanged, edited = data["skills"]["tax"], data["skills"]["billing"]
    assert unchanged["comparison"]["a"]["skill"] == unchanged["comparison"]["b"]["skill"]
    assert unchanged["comparison"]["a"]["mean"] == unchanged["comparison"]["b"]["mean"]
    assert unchanged["verdict"] == "pass"
    assert edited["comparison"]["a"]["skill"] != edited["comparison"]["b"]["skill"]
    assert edited["skill"] == {"base": "skills/billing/SKILL.md", "head": "skills/billing/SKILL.md"}
    failing = sorted(n for n, r in data["skills"].items() if r["verdict"] != "pass")
    assert set(failing) <= {"billing", "shipping"}  # only the two edited skills can fail
    assert data["verdict"] in ("pass", "regression")
    assert code == (7 if data["verdict"] == "regression" else 0), err
    one = json.loads(run("check", "--base", "main", "HEAD", "-q", "--json", "--skill", "tax")[1])
    assert (one["verdict"], list(one["skills"])) == ("pass", ["tax"])


def test_todays_single_skill_configs_load_unchanged(tmp_path: Path) -> None:
    demo = read_bytes("templates", "demo/skillvc.toml").decode()
    config = parse_config(demo, tmp_path)
    assert not config.many and config.skill_name is None
    assert config.skill_names == ["acme-returns"]
    assert config.for_skill("acme-returns") is config
    assert config.skill_relpath == "skills/acme-returns/SKILL.md"
    assert config.to_dict()["skill"]["path"] == "skills/acme-returns/SKILL.md"
    rendered = render_config(skill_path="SKILL.md", target_model="sim:x", optimizer_model="sim:y")
    plain = parse_config(rendered, tmp_path)
    assert (plain.skill.path, plain.many, plain.skill_names) == ("SKILL.md", False, ["SKILL"])


def test_a_skill_overrides_the_shared_defaults(tmp_path: Path) -> None:
    text = (
        '[target]\nmodel = "sim:support"\n[train]\nepochs = 2\n'
        '[skills.a]\npath = "a/SKILL.md"\n[skills.a.train]\nepochs = 5\n'
        '[skills.b]\npath = "b/SKILL.md"\nmax_bytes = 900\n'
    )
    config = parse_config(text, tmp_path)
    a, b = config.for_skill("a"), config.for_skill("b")
    assert (a.train.epochs, b.train.epochs) == (5, 2)
    assert (a.skill.max_bytes, b.skill.max_bytes) == (16000, 900)
    from skillvc.core.errors import ConfigError

    with pytest.raises(ConfigError) as bad:
        parse_config(text.replace("epochs = 5", "epoch = 5"), tmp_path)
    assert bad.value.message.startswith("Unknown key 'epoch' in [skills.a.train] of skillvc.toml")
    with pytest.raises(ConfigError) as bad:
        parse_config('[skills."a b"]\npath = "a/SKILL.md"\n', tmp_path)
    assert bad.value.message == (
        "[skills.a b] in skillvc.toml: a skill name is letters, digits, '-' and '_' (it names "
        "git refs and tags)."
    )
    with pytest.raises(ConfigError) as bad:
        parse_config(
            text.replace("[skills.b]\n", '[skill]\npath = "x/SKILL.md"\n[skills.b]\n'), tmp_path
        )
    assert bad.value.message == "skillvc.toml has both [skill] path and [skills.<name>] tables."


def test_one_skill_commands_take_skill(many: Path) -> None:
    code, out, err = run("eval", "--skill", "warranty", "--json", "-q")
    assert code == 0, err
    assert json.loads(out)["n"] == 10  # warranty's own val file
    code, out, _ = run("doctor", "--json")
    names = [c["name"] for c in json.loads(out)["checks"]]
    assert [n for n in names if n.startswith("skill ")] == [f"skill {s}" for s in sorted(SKILLS)]
    code, out, _ = run("doctor", "--skill", "gifts", "--json")
    names = [c["name"] for c in json.loads(out)["checks"]]
    assert [n for n in names if n.startswith(("skill", "tasks"))] == ["skill gifts", "tasks gifts"]
    # apply: the patch's own path names the skill.
    path = many / "skills" / "loyalty" / "SKILL.md"
    path.write_text(path.read_text().replace("short and friendly", "short, friendly"))
    patch = git(many, "diff", "--", "skills/loyalty/SKILL.md") + "\n"
    git(many, "checkout", "--", ".")
    result = CliRunner().invoke(cli, ["apply", "-", "-m", "Tone"], input=patch)
    assert result.exit_code == 0, result.output
    assert git(many, "show", "--name-only", "--format=", "HEAD") == "skills/loyalty/SKILL.md"
    code, out, _ = run("diff", "--skill", "loyalty", "HEAD~1", "HEAD")
    assert code == 0 and "+Keep the reply short, friendly." in out


def test_resume_picks_the_unfinished_run_of_that_skill(many: Path) -> None:
    from skillvc.core.errors import BudgetExceeded
    from skillvc.training.loop import train
    from skillvc.workspace.workspace import open_workspace

    with open(many / "skillvc.toml", "a") as fh:
        fh.write('\n[prices."sim:support"]\ninput = 1.0\noutput = 1.0\n')
    git(many, "commit", "-qam", "price the simulator")
    with pytest.raises(BudgetExceeded):
        train(open_workspace(many, "billing"), budget_usd=0.01)
    # Another skill trains meanwhile: a run of its own, not billing's resumed under its name.
    # (Its run accepts nothing here; had it moved the branch, billing's resume would be refused
    # with "main moved since run ... stopped", as for any resume after the branch moved.)
    returns = train(open_workspace(many, "returns"), budget_usd=100.0)
    assert not returns.resumed
    billing = train(open_workspace(many, "billing"), budget_usd=100.0)
    assert billing.resumed and billing.run_id != returns.run_id
    assert [r["status"] for r in json.loads(run("runs", "--json")[1])] == ["finished", "finished"]


def test_the_pre_commit_hook_covers_every_skill(many: Path) -> None:
    import subprocess

    assert run("hooks", "install")[0] == 0
    tax = many / "skills" / "tax" / "SKILL.md"
    tax.write_text(tax.read_text().replace("short and friendly", "short, friendly"))
    broken = many / "skills" / "gifts" / "SKILL.md"
    broken.write_text("---\nname: [unclosed\n---\n# Gifts\n", encoding="utf-8")
    git(many, "add", "skills/gifts/SKILL.md")
    refused = subprocess.run(
        ["git", "commit", "-q", "-m", "break gifts"], cwd=many, capture_output=True, text=True
    )
    assert refused.returncode != 0
    assert "skills/gifts/SKILL.md: " in refused.stdout + refused.stderr
    git(many, "reset", "-q", "--", "skills/gifts/SKILL.md")
    git(many, "add", "skills/tax/SKILL.md")
    git(many, "commit", "-q", "-m", "tax tone")  # the hook passes an edit of another skill
    assert git(many, "show", "--name-only", "--format=", "HEAD") == "skills/tax/SKILL.md"


def test_check_takes_each_skills_settings_from_base(many: Path) -> None:
    git(many, "checkout", "-q", "-b", "pr")
    config = many / "skillvc.toml"
    config.write_text(config.read_text() + "\n[skills.tax.train]\nmax_failure_rate = 0.5\n")
    git(many, "commit", "-q", "-am", "loosen tax")
    code, out, err = run("check", "--base", "main", "HEAD", "-q", "--json")
    data = json.loads(out)
    verdicts = {name: r["verdict"] for name, r in data["skills"].items()}
    assert verdicts == {name: "config_changed" if name == "tax" else "pass" for name in SKILLS}
    assert data["skills"]["tax"]["config_changes"] == ["train.max_failure_rate"]
    assert (code, err) == (
        7,
        "Error: The change edits what the check takes from BASE only, for skill tax.\n"
        "Hint: " + err.split("Hint: ", 1)[1],
    )


def test_a_skill_is_named_by_its_frontmatter_or_directory_or_path(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("alpha", "beta"):
        _seed_skill(git_repo, name)
    beta = git_repo / "skills" / "beta" / "SKILL.md"
    beta.write_text(beta.read_text().replace("name: beta", "name: beta-helper", 1))
    monkeypatch.chdir(git_repo)
    assert run("init")[0] == 0
    config = load_config(git_repo)
    assert config.skill_names == ["alpha", "beta-helper"]
    from skillvc.skill.skills import select_skill

    for given in ("beta-helper", "beta", "skills/beta", "skills/beta/SKILL.md"):
        assert select_skill(config, given).skill_name == "beta-helper", given
    monkeypatch.chdir(git_repo / "skills")
    assert select_skill(config, "beta/SKILL.md").skill_name == "beta-helper"

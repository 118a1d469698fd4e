"""The Agent Skills rules as the spec states them, on a repository holding many skills.

The spec (https://agentskills.io/specification) fixes ``name`` and ``description`` and types the
optional ``license``, ``compatibility``, ``metadata`` and ``allowed-tools``; its size figures
(a body under 500 lines, about 5,000 tokens) are guidance, so they warn. skillvc's own size
budget blocks only growth. Hooks here are run by real git.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import git

from skillvc.cli import cli
from skillvc.integrations.hooks import install_hooks
from skillvc.skill.formats import check_bytes, check_warnings, new_problems
from skillvc.skill.skilldoc import SkillDocument

LONG_DESCRIPTION = "Use when the user asks about invoices." * 30  # 1,140 characters
BIG_LINES = "\n".join(f"- Step {i}: check the ledger entry and write it down." for i in range(600))
BIG_TOKENS = "Rules: " + "always quote the exact invoice number and its date " * 480


def skill(name: str, body: str = "# Rules\n\n- Be precise.\n", **fields: str) -> str:
    description = fields.pop("description", f"Handle {name} questions. Use when asked.")
    extra = "".join(f"{key}: {value}\n" for key, value in fields.items())
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n"


SKILLS = {
    "alpha": skill("alpha"),
    # every optional field of the spec, and fields Claude Code documents
    "beta": skill(
        "beta",
        license="Apache-2.0",
        compatibility="Requires git and network access",
        metadata="\n  author: acme\n  version: '1.0'",
        **{
            "allowed-tools": "Bash(git:*) Read",
            "model": "sonnet",
            "disable-model-invocation": "true",
            "argument-hint": "'[issue-number]'",
            "user-invocable": "false",
        },
    ),
    "big-lines": skill("big-lines", BIG_LINES),  # 600 lines, over 16,000 bytes
    "big-tokens": skill("big-tokens", BIG_TOKENS),  # one paragraph of ~6,000 tokens
    "long-desc": skill("long-desc", description=LONG_DESCRIPTION),
    "misnamed": skill("other-name"),
}
SPEC_ERRORS = [
    "skills/long-desc/SKILL.md: frontmatter description is 1,140 characters, over the limit "
    "of 1,024.",
    "skills/misnamed/SKILL.md: frontmatter name 'other-name' must equal its directory name "
    "'misnamed'.",
]


def size_warnings(root: Path) -> list[str]:
    lines = len(BIG_LINES.splitlines())
    big = (root / "skills/big-lines/SKILL.md").stat().st_size
    big_tokens = (root / "skills/big-tokens/SKILL.md").stat().st_size
    tokens = (len(BIG_TOKENS) + 1) // 4
    return [
        f"warning: skills/big-lines/SKILL.md: the file is {big:,} bytes, over the size budget "
        "of 16,000 bytes.",
        f"warning: skills/big-lines/SKILL.md: the body is {lines:,} lines and about "
        f"{(len(BIG_LINES) + 1) // 4:,} tokens; the Agent Skills spec recommends under 500 "
        "lines and 5,000 tokens (move detail to files it references).",
        f"warning: skills/big-tokens/SKILL.md: the file is {big_tokens:,} bytes, over the size "
        "budget of 16,000 bytes.",
        "warning: skills/big-tokens/SKILL.md: the body is 1 line and about "
        f"{tokens:,} tokens; the Agent Skills spec recommends under 500 lines and 5,000 tokens "
        "(move detail to files it references).",
    ]


@pytest.fixture
def many(git_repo: Path) -> Path:
    """Six committed skills under skills/<dir>/SKILL.md, no skillvc.toml."""
    for directory, text in SKILLS.items():
        path = git_repo / "skills" / directory / "SKILL.md"
        path.parent.mkdir(parents=True)
        path.write_text(text)
    git(git_repo, "add", ".")
    git(git_repo, "commit", "-q", "-m", "six skills")
    return git_repo


def run(cwd: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def commit(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "commit", "-q", "-m", "edit"],
        cwd=root,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_validate_fails_for_exactly_the_spec_violations(
    many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = sorted(f"skills/{d}/SKILL.md" for d in SKILLS)
    for args in (files, []):  # the files named, and every SKILL.md when no config names one
        result = run(many, monkeypatch, "validate", *args)
        assert result.exit_code == 5
        assert result.stdout.splitlines() == SPEC_ERRORS
        assert result.stderr.splitlines() == [
            *size_warnings(many),
            "Error: 2 problems in 2 skill files.",
            "Hint: Fix the files listed above (when committing: stage them and commit again).",
        ]


def test_oversized_skill_commits_when_it_does_not_grow(many: Path) -> None:
    install_hooks(many)
    big = many / "skills/big-lines/SKILL.md"
    big.write_text(big.read_text().replace("Step 7: check", "Step 7: tick"))  # shorter
    git(many, "add", str(big))
    result = commit(many)
    assert result.returncode == 0, result.stderr
    assert "over the size budget" in result.stderr  # said, as a warning

    big.write_text(big.read_text() + "- One more step.\n")  # grows past the budget
    git(many, "add", str(big))
    grown = commit(many)
    assert grown.returncode != 0
    assert "Error: 1 problem in 1 skill file." in grown.stderr
    git(many, "checkout", "HEAD", "--", str(big))

    alpha = many / "skills/alpha/SKILL.md"
    alpha.write_text("---\nname: alpha\ndescription: [unclosed\n---\nx\n")
    git(many, "add", str(alpha))
    broken = commit(many)
    assert broken.returncode != 0
    assert "skills/alpha/SKILL.md: frontmatter is not valid YAML" in broken.stderr
    assert git(many, "log", "--format=%s") == "edit\nsix skills"


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("license: 2", "frontmatter license must be a string, not a number."),
        (
            "compatibility: " + "x" * 501,
            "frontmatter compatibility is 501 characters, over the limit of 500.",
        ),
        ("compatibility: ''", "frontmatter compatibility is empty."),
        (
            "metadata: [a, b]",
            "frontmatter metadata must be a mapping of strings to strings, not a list.",
        ),
        (
            "metadata:\n  version: 1.0",
            "frontmatter metadata value under 'version' must be a string, not a number (quote it).",
        ),
        (
            "allowed-tools: {Bash: yes}",
            'frontmatter allowed-tools must be a space-delimited string such as "Bash(git:*) '
            'Read", not a mapping.',
        ),
        (
            "name: -alpha",
            "frontmatter name '-alpha' must not start or end with '-' or contain '--'.",
        ),
        (
            "name: al--pha",
            "frontmatter name 'al--pha' must not start or end with '-' or contain '--'.",
        ),
        (
            "name: " + "a" * 65,
            f"frontmatter name '{'a' * 65}' must be 1-64 characters of a-z, 0-9 and '-'.",
        ),
        ("description: '  '", "frontmatter description is empty."),
    ],
)
def test_each_field_rule(field: str, message: str) -> None:
    key = field.split(":")[0]
    lines = ["name: alpha", "description: Handle alpha questions."]
    lines = [line for line in lines if not line.startswith(key + ":")] + [field]
    text = "---\n" + "\n".join(lines) + "\n---\nbody\n"
    path = "skills/alpha/SKILL.md"
    assert [p.message for p in check_bytes(path, text.encode())] == [f"{path}: {message}"]


def test_documented_claude_code_fields_and_a_tool_list_pass() -> None:
    text = (
        "---\nname: alpha\ndescription: Handle alpha questions.\nallowed-tools:\n  - Read\n"
        "  - Grep\ncontext: fork\nagent: Explore\neffort: high\npaths: ['src/**']\n"
        "hooks: {}\nunknown-to-anyone: 3\n---\nbody\n"
    )
    assert check_bytes("skills/alpha/SKILL.md", text.encode()) == []


def test_guidance_warns_only_for_skill_md_and_training_refuses_growth_only() -> None:
    body = "line\n" * 501
    doc = SkillDocument.parse(skill("alpha", body))
    assert [p.rule for p in check_warnings("skills/alpha/SKILL.md", doc)] == ["skill-size-guidance"]
    assert check_warnings("notes/alpha.md", doc) == []
    assert check_warnings("skills/alpha/SKILL.md", SkillDocument.parse(skill("alpha"))) == []
    # the training loop's rule: an over-budget file may shrink or stay, not grow
    before = SkillDocument.parse(skill("alpha", "x" * 300))
    same = SkillDocument.parse(skill("alpha", "y" * 300))
    grown = SkillDocument.parse(skill("alpha", "x" * 301))
    path = "skills/alpha/SKILL.md"
    assert new_problems(path, before, same, max_bytes=100) == []
    assert [p.rule for p in new_problems(path, before, grown, max_bytes=100)] == ["size-budget"]


def test_doctor_passes_a_skill_over_the_budget(skill_repo: Path) -> None:
    from skillvc.core.config import load_config
    from skillvc.review.doctor import check_skill

    config = '[skill]\npath = "skills/support/SKILL.md"\nmax_bytes = 100\n'
    (skill_repo / "skillvc.toml").write_text(config)
    check = check_skill(load_config(skill_repo))
    assert (check.status, check.detail) == (
        "ok",
        "skills/support/SKILL.md passes its format rules.",
    )

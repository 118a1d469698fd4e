"""The GitHub workflow template (templates/github/skillvc-check.yml, `skillvc hooks workflow`).

Two real linters from the package index audit it offline: zizmor (security: template injection,
unpinned actions, persisted credentials, excessive permissions, dangerous triggers) and
check-jsonschema with GitHub's workflow schema. The structure the issue asks for is asserted
on the parsed YAML, and the check step's shell script is run by bash, as the runner runs it,
with the real skillvc against real repositories: a pass, a regression, and a fork without keys.
`skillvc hooks workflow` fills SKILLVC_SPEC from the installed skillvc's PEP 610 record when
that names a pinned source, and leaves the placeholder otherwise.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from conftest import git
from packaging.requirements import Requirement
from test_eval import HARMFUL_RULE, add_rules, demo, trained  # noqa: F401 - demo is a fixture

from skillvc.cli import cli
from skillvc.core.resources import read_text
from skillvc.integrations.workflow import PLACEHOLDER, installed_source, pinned_source

TEMPLATE = read_text("templates", "github/skillvc-check.yml")
WORKFLOW: dict[Any, Any] = yaml.safe_load(TEMPLATE)
SHA_PIN = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
FORK_VERDICT = "skipped: no model key available to fork PRs"
# Every proxy variable points at a closed loopback port: a linter that tried the network
# anyway would fail here instead of reaching it.
NO_NETWORK = {
    name: "http://127.0.0.1:9"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")
}


def tool(name: str) -> str:
    """A console script installed by the test extra next to this interpreter."""
    found = shutil.which(name, path=sysconfig.get_path("scripts")) or shutil.which(
        name, path=str(Path(sys.executable).parent)
    )
    assert found, f"{name} is missing: install the test extra (pip install -e '.[test]')"
    return found


def offline_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GH_", "GITHUB_", "ZIZMOR"))}
    env.update(NO_NETWORK, HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), NO_COLOR="1")
    return env


def installed_copy(tmp_path: Path) -> Path:
    """The template where the README tells the user to put it."""
    path = tmp_path / "repo" / ".github" / "workflows" / "skillvc-check.yml"
    path.parent.mkdir(parents=True)
    path.write_text(TEMPLATE)
    return path


def jobs() -> dict[str, Any]:
    return WORKFLOW["jobs"]


def step(job: str, name: str) -> dict[str, Any]:
    return next(s for s in jobs()[job]["steps"] if s.get("name") == name)


def uses_steps() -> list[dict[str, Any]]:
    return [s for job in jobs().values() for s in job.get("steps", []) if "uses" in s]


# -- the linters ---------------------------------------------------------------------------------


def test_zizmor_finds_nothing_of_medium_or_higher(tmp_path: Path) -> None:
    path = installed_copy(tmp_path)
    result = subprocess.run(
        [
            tool("zizmor"),
            "--offline",  # no online audits, no request of any kind
            "--no-config",  # the template is judged as shipped, not by a local zizmor.yml
            # pedantic reports code smells too; only the auditor persona goes further, with
            # secrets-outside-env (medium): it wants the keys in a deployment environment,
            # which would add a deployment to the pull request's timeline on every push.
            "--persona",
            "pedantic",
            "--min-severity",
            "medium",
            "--format",
            "json",
            "--cache-dir",
            str(tmp_path / "zizmor-cache"),
            str(path),
        ],
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == []
    assert "completed" in result.stderr  # it did audit the file, not skip it


def test_zizmor_fails_the_old_template_shape(tmp_path: Path) -> None:
    """The same invocation does catch what issue 9 found: unpinned actions, kept credentials,
    an attacker-controlled expression pasted into a script."""
    bad = TEMPLATE.replace(
        "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1", "actions/checkout@v4"
    )
    bad = re.sub(r"\n *persist-credentials: false[^\n]*", "", bad)
    bad = bad.replace('--base "origin/$BASE_REF"', '--base "origin/${{ github.head_ref }}"')
    assert bad.count("${{ github.head_ref }}") == 1 and "actions/checkout@v4" in bad
    assert "persist-credentials" not in bad
    path = installed_copy(tmp_path)
    path.write_text(bad)
    result = subprocess.run(
        [tool("zizmor"), "--offline", "--no-config", "--min-severity", "medium"]
        + ["--format", "json", "--cache-dir", str(tmp_path / "zizmor-cache"), str(path)],
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    found = {finding["ident"] for finding in json.loads(result.stdout)}
    assert {"artipacked", "template-injection", "unpinned-uses"} <= found


def test_template_matches_githubs_workflow_schema(tmp_path: Path) -> None:
    path = installed_copy(tmp_path)
    result = subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path)],
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


# -- structure -----------------------------------------------------------------------------------


def test_pull_request_is_the_only_trigger() -> None:
    on = WORKFLOW.get("on", WORKFLOW.get(True))  # YAML 1.1 reads a bare `on` as true
    assert set(on) == {"pull_request"}
    assert "pull_request_target" not in TEMPLATE and "workflow_run" not in TEMPLATE
    paths = on["pull_request"]["paths"]
    assert "skillvc.toml" in paths and "**/SKILL.md" in paths


def test_permissions_read_by_default_write_only_for_the_comment_job() -> None:
    assert WORKFLOW["permissions"] == {"contents": "read"}
    assert set(jobs()) == {"check", "comment"}
    assert "permissions" not in jobs()["check"]  # inherits contents: read
    assert jobs()["comment"]["permissions"] == {"pull-requests": "write"}
    # The job with the write token runs no code from the pull request: no checkout, no run.
    comment_steps = jobs()["comment"]["steps"]
    assert [s["uses"].split("@")[0] for s in comment_steps] == ["actions/github-script"]
    script = comment_steps[0]["with"]["script"]
    assert "updateComment" in script and "createComment" in script  # one comment, kept current
    assert jobs()["comment"]["needs"] == "check"
    # Forks get a read-only token: the comment job does not try there.
    condition = jobs()["comment"]["if"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition


def test_every_action_is_pinned_to_a_commit_with_its_version_in_a_comment() -> None:
    assert {s["uses"].split("@")[0] for s in uses_steps()} == {
        "actions/checkout",
        "actions/setup-python",
        "actions/github-script",
    }
    for s in uses_steps():
        assert SHA_PIN.match(s["uses"]), s["uses"]
    uses_lines = [line for line in TEMPLATE.splitlines() if line.strip().startswith("- uses:")]
    assert len(uses_lines) == len(uses_steps())
    for line in uses_lines:
        assert re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), line


def test_checkout_keeps_no_credentials_and_fetches_the_base() -> None:
    (checkout,) = [s for s in uses_steps() if s["uses"].startswith("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False
    assert checkout["with"]["fetch-depth"] == 0


def test_a_new_push_cancels_the_running_check() -> None:
    concurrency = WORKFLOW["concurrency"]
    assert concurrency["cancel-in-progress"] is True
    assert "${{ github.ref }}" in concurrency["group"]


def test_no_expression_is_pasted_into_a_script() -> None:
    """Expressions reach scripts through env: (zizmor's template-injection audit)."""
    scripts = [s["run"] for job in jobs().values() for s in job["steps"] if "run" in s]
    scripts += [s["with"]["script"] for s in uses_steps() if "script" in s.get("with", {})]
    assert len(scripts) == 5
    for script in scripts:
        assert "${{" not in script
    check = step("check", "skillvc check")
    assert check["env"]["BASE_REF"] == "${{ github.base_ref }}"
    assert 'skillvc check --base "origin/$BASE_REF"' in check["run"]
    assert "skillvc report --format" not in TEMPLATE  # needs the local event log; see README


def test_skillvc_comes_from_one_pinned_source_never_the_index_by_name() -> None:
    spec = WORKFLOW["env"]["SKILLVC_SPEC"]
    requirement = Requirement(spec)
    assert requirement.name == "skillvc"
    assert requirement.url is not None and requirement.url.startswith("git+https://")
    assert requirement.url.rsplit("@", 1)[1] == "COMMIT_SHA"  # the user sets a commit here
    assert "  # SET THIS: where skillvc comes from, pinned to one commit" in TEMPLATE
    installs = [
        s for job in jobs().values() for s in job["steps"] if "pip install" in s.get("run", "")
    ]
    assert [s["name"] for s in installs] == ["Install skillvc"]
    (pip_line,) = [line for line in installs[0]["run"].splitlines() if "pip install" in line]
    assert pip_line.strip().endswith('pip install --disable-pip-version-check "$SKILLVC_SPEC"')
    assert TEMPLATE.count("$SKILLVC_SPEC") == 2  # the placeholder guard, then the install
    assert not re.search(r"pip install\s+skillvc\b", TEMPLATE)


def test_the_install_step_refuses_the_placeholder_before_pip_runs(tmp_path: Path) -> None:
    install = step("check", "Install skillvc")
    result = run_step(install["run"], tmp_path, {"SKILLVC_SPEC": WORKFLOW["env"]["SKILLVC_SPEC"]})
    assert result.returncode == 1
    assert result.stdout == (
        "::error::Set SKILLVC_SPEC at the top of this workflow to a pinned skillvc source.\n"
    )


# -- the check step, run by bash with the real skillvc -------------------------------------------


def run_step(script: str, tmp_path: Path, env: dict[str, str], cwd: Path | None = None):
    """Run one `run:` script the way the runner does (bash -eo pipefail on a script file)."""
    path = tmp_path / "step.sh"
    path.write_text(script)
    base = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    scripts = sysconfig.get_path("scripts")
    base["PATH"] = f"{scripts}{os.pathsep}{base.get('PATH', '')}"
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
        cwd=cwd or tmp_path,
        env={**base, **NO_NETWORK, **env},
        capture_output=True,
        text=True,
    )


@pytest.fixture
def pushed(demo: Path, tmp_path: Path) -> Path:  # noqa: F811 - demo is the imported fixture
    """The demo with a trained skill on main, pushed to a bare origin (so origin/main exists)."""
    assert Path(tool("skillvc")).parent == Path(sysconfig.get_path("scripts"))
    trained(demo)
    remote = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(demo, "remote", "add", "origin", str(remote))
    git(demo, "push", "-q", "origin", "main")
    git(demo, "fetch", "-q", "origin")
    return demo


def run_check(repo: Path, tmp_path: Path, *, head_repo: str) -> tuple[dict[str, str], str, str]:
    """Run the check step; return its outputs, its step summary and its stdout."""
    outputs, summary = tmp_path / "outputs", tmp_path / "summary"
    check = step("check", "skillvc check")
    env = {
        "BASE_REF": "main",
        "HEAD_REPO": head_repo,
        "THIS_REPO": "acme/skills",
        # GitHub hands a missing secret over as an empty string.
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
        # Not loopback: there a missing key is replaced by a placeholder (issue 45), and this
        # test is about the missing key. Nothing is sent: the key is checked before any call.
        "OPENAI_BASE_URL": "https://api.example.invalid/v1",
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_STEP_SUMMARY": str(summary),
        "RUNNER_TEMP": str(tmp_path),
    }
    runner = {"GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "RUNNER_TEMP", "OPENAI_BASE_URL"}
    assert set(env) - runner == set(check["env"])
    result = run_step(check["run"], tmp_path, env, cwd=repo)
    assert result.returncode == 0, result.stdout + result.stderr  # the verdict comes later
    values = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    assert set(values) == {"status", "verdict", "report"}
    return values, summary.read_text(), result.stdout


def fail_step(status: str, tmp_path: Path) -> int:
    fail = step("check", "Fail on a regression")
    assert fail["if"] == "steps.check.outputs.status != '0'"
    return run_step(fail["run"], tmp_path, {"CHECK_STATUS": status}).returncode


def test_check_step_passes_an_unchanged_skill(pushed: Path, tmp_path: Path) -> None:
    outputs, summary, stdout = run_check(pushed, tmp_path, head_repo="acme/skills")
    assert (outputs["status"], outputs["verdict"]) == ("0", "passed")
    report = base64.b64decode(outputs["report"]).decode()
    assert report.splitlines()[-1].startswith("OK: the skill scores ")
    assert summary.startswith("### skillvc check passed\n\n```\n")
    assert report in summary and report in stdout


def test_check_step_reports_a_regression_and_the_job_fails(pushed: Path, tmp_path: Path) -> None:
    add_rules(pushed, HARMFUL_RULE)  # the pull request's edit, in the working tree
    outputs, summary, _ = run_check(pushed, tmp_path, head_repo="someone/fork")
    assert (outputs["status"], outputs["verdict"]) == ("7", "found a regression")
    assert "Error: The skill scores " in base64.b64decode(outputs["report"]).decode()
    assert summary.startswith("### skillvc check found a regression\n")
    assert fail_step(outputs["status"], tmp_path) == 7


def openai_target(repo: Path) -> None:
    """Make the base's config name a real model, which needs a key."""
    config = repo / "skillvc.toml"
    text = config.read_text()
    assert '[target]\nmodel = "sim:support"' in text
    config.write_text(
        text.replace('[target]\nmodel = "sim:support"', '[target]\nmodel = "openai:gpt-4o-mini"')
    )
    git(repo, "commit", "-q", "-am", "A real target model")
    git(repo, "push", "-q", "origin", "main")
    git(repo, "fetch", "-q", "origin")


def test_fork_without_a_key_is_skipped_with_a_clear_verdict(pushed: Path, tmp_path: Path) -> None:
    openai_target(pushed)
    outputs, summary, stdout = run_check(pushed, tmp_path, head_repo="someone/fork")
    assert (outputs["status"], outputs["verdict"]) == ("0", FORK_VERDICT)
    assert f"::notice title=skillvc check::{FORK_VERDICT}\n" in stdout
    assert summary.startswith(f"### skillvc check {FORK_VERDICT}\n")
    assert "OPENAI_API_KEY is not set." in base64.b64decode(outputs["report"]).decode()
    assert step("check", "Fail on a regression")["if"] == "steps.check.outputs.status != '0'"


def test_same_repo_pull_request_without_a_key_fails(pushed: Path, tmp_path: Path) -> None:
    """A missing secret in the repository itself is the owner's to fix: not hidden as a skip."""
    openai_target(pushed)
    outputs, summary, stdout = run_check(pushed, tmp_path, head_repo="acme/skills")
    assert (outputs["status"], outputs["verdict"]) == ("6", "failed (exit 6)")
    assert "::notice" not in stdout
    assert "Error: OPENAI_API_KEY is not set." in summary
    assert fail_step(outputs["status"], tmp_path) == 6


# -- `skillvc hooks workflow`: SKILLVC_SPEC from the installed skillvc's own source --------------

COMMIT = "0123456789abcdef0123456789abcdef01234567"
WHEEL = "https://example.invalid/dl/skillvc-0.1.0-py3-none-any.whl"
SHA256 = "ab" * 32
GIT_URL = "https://github.com/acme/skillvc"


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        # pip install "git+https://github.com/acme/skillvc@main": pip records the commit
        (
            {"url": GIT_URL, "vcs_info": {"vcs": "git", "commit_id": COMMIT}},
            f"skillvc @ git+{GIT_URL}@{COMMIT}",
        ),
        (
            {"url": WHEEL, "archive_info": {"hashes": {"sha256": SHA256}}},
            f"skillvc @ {WHEEL}#sha256={SHA256}",
        ),
        (
            {"url": WHEEL, "archive_info": {"hash": f"sha256={SHA256}"}},
            f"skillvc @ {WHEEL}#sha256={SHA256}",
        ),
        # nothing pins these, or they would not work on a runner, or would print a secret
        ({"url": WHEEL, "archive_info": {}}, None),
        ({"url": WHEEL, "archive_info": {"hashes": {"md5": "ab" * 16}}}, None),
        ({"url": "file:///home/me/skillvc", "dir_info": {"editable": True}}, None),
        ({"url": "file:///home/me/skillvc", "vcs_info": {"vcs": "git", "commit_id": COMMIT}}, None),
        (
            {
                "url": "http://github.com/acme/skillvc",
                "vcs_info": {"vcs": "git", "commit_id": COMMIT},
            },
            None,
        ),
        (
            {
                "url": "https://me:ghp_secret@github.com/acme/skillvc",
                "vcs_info": {"vcs": "git", "commit_id": COMMIT},
            },
            None,
        ),
        ({"url": GIT_URL, "vcs_info": {"vcs": "git", "commit_id": "main"}}, None),
        ({"url": GIT_URL, "vcs_info": {"vcs": "hg", "commit_id": COMMIT}}, None),
        (
            {"url": GIT_URL, "vcs_info": {"vcs": "git", "commit_id": COMMIT}, "subdirectory": "py"},
            None,
        ),
        (
            {"url": GIT_URL + '"; curl x|sh; "', "vcs_info": {"vcs": "git", "commit_id": COMMIT}},
            None,
        ),
        ({"url": 7}, None),
    ],
)
def test_pinned_source_from_pep_610_records(
    direct_url: dict[str, Any], expected: str | None
) -> None:
    assert pinned_source(direct_url) == expected


def test_workflow_command_asks_to_set_the_spec_when_the_source_is_not_pinned() -> None:
    # This checkout is installed from a local directory (file://), which a runner cannot reach.
    assert installed_source() is None
    result = CliRunner().invoke(cli, ["hooks", "workflow"])
    assert result.exit_code == 0
    assert result.stdout == TEMPLATE
    assert result.stderr == (
        "Set SKILLVC_SPEC at the top of the workflow to a pinned skillvc source (a git URL at a "
        "commit, or a wheel URL with #sha256=) before the first run.\n"
    )


def test_workflow_command_pins_the_git_commit_skillvc_was_installed_from(tmp_path: Path) -> None:
    """An installed distribution whose direct_url.json (written by pip for a git install) names
    an https repository at a commit: the printed workflow installs exactly that, and lints clean."""
    site = tmp_path / "site"
    dist_info = site / "skillvc-0.1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: skillvc\nVersion: 0.1.0\n")
    record = {
        "url": GIT_URL,
        "vcs_info": {"vcs": "git", "requested_revision": "main", "commit_id": COMMIT},
    }
    (dist_info / "direct_url.json").write_text(json.dumps(record))
    env = {**os.environ, "PYTHONPATH": str(site)}  # found before the checkout's own metadata
    result = subprocess.run(
        [sys.executable, "-m", "skillvc", "hooks", "workflow"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    spec = f"skillvc @ git+{GIT_URL}@{COMMIT}"
    assert result.stderr == f"SKILLVC_SPEC is the source this skillvc came from: {spec}\n"
    assert result.stdout == TEMPLATE.replace(f'"{PLACEHOLDER}"', f'"{spec}"')
    assert yaml.safe_load(result.stdout)["env"] == {"SKILLVC_SPEC": spec}
    # The filled-in spec passes the install step's guard (pip itself is not run here).
    guard = step("check", "Install skillvc")["run"].replace(
        "python -m pip install", ": pip install"
    )
    assert run_step(guard, tmp_path, {"SKILLVC_SPEC": spec}).returncode == 0
    path = installed_copy(tmp_path)
    path.write_text(result.stdout)
    lint = subprocess.run(
        [tool("zizmor"), "--offline", "--no-config", "--persona", "pedantic"]
        + ["--min-severity", "medium", "--format", "json", str(path)],
        env=offline_env(tmp_path),
        capture_output=True,
        text=True,
    )
    assert (lint.returncode, json.loads(lint.stdout)) == (0, [])


def test_the_check_output_cannot_issue_workflow_commands(pushed: Path, tmp_path: Path) -> None:
    """The printed output holds text the pull request controls; the runner must read none of
    its lines as a workflow command, so command processing stops around it (with a token the
    pull request cannot know) and resumes after."""
    _, _, stdout = run_check(pushed, tmp_path, head_repo="acme/skills")
    lines = stdout.splitlines()
    assert lines[0].startswith("::stop-commands::skillvc-")
    token = lines[0].removeprefix("::stop-commands::")
    assert len(token) == len("skillvc-") + 32
    assert lines[-1] == f"::{token}::"
    _, _, again = run_check(pushed, tmp_path, head_repo="acme/skills")
    assert again.splitlines()[0] != lines[0]

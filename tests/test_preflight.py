"""Nothing unchecked reaches a model: skills validate rejects, oversized skills, unusual
repository states, runs projected above the unbudgeted limit, evaluations where every item
errored (issue 9, "Unchecked skills are trained" and item 7).

Everything is real: git repos in tmp dirs, the SQLite event log, the CLI through click's
CliRunner, the OpenAI SDK against the loopback server on 127.0.0.1 (which counts requests).
"""

# The imported ``loopback`` fixture is named by test parameters, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

import json
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import git
from loopback import LoopbackServer, loopback, simulator_responder  # noqa: F401 - the fixture

from skillvc.cli import cli
from skillvc.core.config import parse_config
from skillvc.core.store import open_store
from skillvc.models.calls import RoleStats
from skillvc.training.projection import project

SKILL = "skills/acme-returns/SKILL.md"
KEY = "sk-test-preflight-0000"
LOOPBACK_MODEL = "openai:loopback-sim"
# A price that makes the demo's one-epoch run project above $20 (see the arithmetic below).
EXPENSIVE = f'\n[prices."{LOOPBACK_MODEL}"]\ninput = 1000.0\noutput = 1000.0\n'


# -- helpers ------------------------------------------------------------------------------------


def demo_copy(demo_seed: Path, dest: Path) -> Path:
    return Path(shutil.copytree(demo_seed, dest))


def over_http(
    repo: Path, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, extra: str = ""
) -> None:
    """Point both roles of the demo repo at the loopback server (playing the simulator)."""
    server.responder = simulator_responder()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    toml = (repo / "skillvc.toml").read_text()
    toml = toml.replace('model = "sim:support"', f'model = "{LOOPBACK_MODEL}"\nmax_retries = 0')
    toml = toml.replace("epochs = 3", "epochs = 1").replace("workers = 8", "workers = 4")
    (repo / "skillvc.toml").write_text(toml + extra)
    git(repo, "commit", "-qam", "Models over HTTP")


@pytest.fixture
def http_repo(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> Path:
    """A copy of the demo repo whose models are served over HTTP by the loopback server."""
    repo = demo_copy(demo_seed, tmp_path / "repo")
    over_http(repo, loopback, monkeypatch)
    return repo


def commit_skill(repo: Path, data: bytes) -> None:
    (repo / SKILL).write_bytes(data)
    git(repo, "commit", "-qam", "Change the skill")


def run(repo: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> Result:
    monkeypatch.chdir(repo)
    return CliRunner().invoke(cli, list(args))


def event_types(repo: Path) -> list[str]:
    db = repo / ".skillvc" / "events.db"
    if not db.exists():
        return []
    with open_store(db) as store:
        return [e.type for e in store.events()]


def blob_count(repo: Path) -> int:
    db = repo / ".skillvc" / "events.db"
    if not db.exists():
        return 0
    with open_store(db) as store:
        return int(store.query("SELECT COUNT(*) AS n FROM blobs")[0]["n"])


def git_try(cwd: Path, *args: str) -> None:
    """Run git where failing (a conflict) is the point: the repository is left mid-operation."""
    subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)


# -- skills that validate rejects ---------------------------------------------------------------

DEMO_SKILL = (Path(__file__).parent.parent / "templates" / "demo" / "SKILL.md").read_bytes()
BAD_SKILLS = {
    "broken frontmatter": (
        b"---\nname: acme-returns\ndescription: [unclosed\n---\n# Returns\n",
        "fails validation: frontmatter is not valid YAML (expected ',' or ']', but got "
        "'<stream end>' on line 3).",
    ),
    "unbalanced markers": (
        DEMO_SKILL + b"\n<!-- SLOW_UPDATE_START -->\nnever closed\n",
        "fails validation: line 19: region 'slow-update' is never closed; it protects "
        "everything to the end of the document.",
    ),
    "empty file": (b"", "is empty."),
    "not UTF-8": (
        DEMO_SKILL + b"\n\xff\xfe\n",
        "is not UTF-8 text (bad byte 0xff at offset 485).",
    ),
}
VALIDATE_HINT = (
    "Hint: Run 'skillvc validate skills/acme-returns/SKILL.md' to list every problem, fix them "
    "and commit.\n"
)


@pytest.mark.parametrize("case", list(BAD_SKILLS))
def test_train_and_eval_refuse_a_skill_validate_rejects_before_any_call(
    http_repo: Path, case: str, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    repo = http_repo
    data, problem = BAD_SKILLS[case]
    commit_skill(repo, data)
    hint = {
        "empty file": "Hint: Write the skill's instructions into it and commit it.\n",
        "not UTF-8": "Hint: Fix the skill file by hand, then commit it.\n",
    }.get(case, VALIDATE_HINT)

    trained = run(repo, monkeypatch, "train")
    assert trained.exit_code == 5
    assert trained.stderr == f"Error: The skill file {SKILL} {problem}\n{hint}"
    evaluated = run(repo, monkeypatch, "eval")
    assert evaluated.exit_code == 5
    assert (
        evaluated.stderr == f"Error: The skill file {SKILL} in the working tree {problem}\n{hint}"
    )
    at_rev = run(repo, monkeypatch, "eval", "HEAD")
    assert at_rev.exit_code == 5
    assert at_rev.stderr.startswith(f"Error: The skill file {SKILL} at HEAD {problem}\n")
    # check evaluates both versions: the broken head is refused before the base is scored.
    checked = run(repo, monkeypatch, "check", "--base", "HEAD~1")
    assert checked.exit_code == 5
    assert f"Error: The skill file {SKILL} in the working tree {problem}\n" in checked.stderr

    assert loopback.requests == []
    assert event_types(repo) == [] and blob_count(repo) == 0


def test_a_skill_validate_accepts_trains_and_evaluates(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preflight refuses only what validate refuses: the demo's seed skill passes both."""
    repo = demo_copy(demo_seed, tmp_path / "repo")
    assert run(repo, monkeypatch, "validate").exit_code == 0
    result = run(repo, monkeypatch, "eval", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n"] == 30


def test_a_format_convention_is_left_to_validate(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name that does not match the directory decides whether an agent finds the skill, not
    what a model reads: validate reports it, eval still scores the skill."""
    repo = demo_copy(demo_seed, tmp_path / "repo")
    commit_skill(repo, DEMO_SKILL.replace(b"name: acme-returns", b"name: acme-refunds"))
    validated = run(repo, monkeypatch, "validate")
    assert validated.exit_code == 5
    assert validated.stdout.startswith(
        f"{SKILL}: frontmatter name 'acme-refunds' must equal its directory name 'acme-returns'."
    )
    result = run(repo, monkeypatch, "eval", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n"] == 30


# -- the size cap on what is sent to a model ----------------------------------------------------


def test_a_5_4_mb_skill_is_refused_before_any_call(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    repo = demo_copy(demo_seed, tmp_path / "repo")
    over_http(repo, loopback, monkeypatch, EXPENSIVE)
    line = b"- When a customer asks about a return, check the order date and the receipt.\n"
    huge = DEMO_SKILL + line * (5_400_000 // len(line))
    assert len(huge) > 5_400_000
    commit_skill(repo, huge)
    tokens = -(-len(huge) // 4)
    sentence = (
        f"is about {tokens:,} tokens ({len(huge):,} bytes / 4), over the cap of 5,000 tokens "
        "on what is sent to a model.\n"
        "Hint: Shorten the skill, or raise [skill] max_tokens in skillvc.toml.\n"
    )

    trained = run(repo, monkeypatch, "train", "--budget-usd", "1000")
    assert trained.exit_code == 5
    assert trained.stderr == f"Error: The skill file {SKILL} {sentence}"
    evaluated = run(repo, monkeypatch, "eval")
    assert evaluated.exit_code == 5
    assert evaluated.stderr == f"Error: The skill file {SKILL} in the working tree {sentence}"

    assert loopback.requests == []
    # The log exists (train opens it to take the writer lock) and holds nothing.
    assert (repo / ".skillvc" / "events.db").exists()
    assert event_types(repo) == [] and blob_count(repo) == 0
    with open_store(repo / ".skillvc" / "events.db") as store:
        assert store.query("SELECT COUNT(*) AS n FROM events")[0]["n"] == 0


def test_max_tokens_raises_the_cap(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = demo_copy(demo_seed, tmp_path / "repo")
    padding = b"\n".join(b"- Note %d: answer with one action." % i for i in range(600)) + b"\n"
    commit_skill(repo, DEMO_SKILL + padding)
    size = len(DEMO_SKILL + padding)
    assert 20_000 < size < 32_000  # 5,000-8,000 tokens by the estimate
    refused = run(repo, monkeypatch, "eval")
    assert refused.exit_code == 5 and "over the cap of 5,000 tokens" in refused.stderr
    toml = (repo / "skillvc.toml").read_text()
    line = f'path = "{SKILL}"'
    (repo / "skillvc.toml").write_text(toml.replace(line, f"{line}\nmax_tokens = 8000"))
    evaluated = run(repo, monkeypatch, "eval", "--json")
    assert evaluated.exit_code == 0, evaluated.output
    assert json.loads(evaluated.stdout)["n"] == 30


def test_max_tokens_must_be_positive(tmp_path: Path) -> None:
    from skillvc.core.errors import ConfigError

    # Its wording follows the other numbers' range checks; it names the key.
    with pytest.raises(ConfigError, match=r"^\[skill\] max_tokens "):
        parse_config("[skill]\nmax_tokens = 0\n", tmp_path)


# -- unusual repository states ------------------------------------------------------------------


def _diverged(repo: Path) -> None:
    """Branches main and other that change notes.txt (not the skill) differently."""
    (repo / "notes.txt").write_text("base\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "notes")
    git(repo, "checkout", "-qb", "other")
    (repo / "notes.txt").write_text("other\n")
    git(repo, "commit", "-qam", "other notes")
    git(repo, "checkout", "-q", "main")
    for text in ("main\n", "main again\n"):
        (repo / "notes.txt").write_text(text)
        git(repo, "commit", "-qam", f"notes: {text.strip()}")


def _am(repo: Path) -> None:
    patch = git(repo, "format-patch", "-1", "other", "--stdout")
    (repo.parent / "other.patch").write_text(patch + "\n")
    git_try(repo, "am", str(repo.parent / "other.patch"))


STATES = {
    "merge": (
        lambda r: git_try(r, "merge", "other"),
        "A merge is in progress in {root}.",
        "Finish it ('git commit') or abandon it ('git merge --abort'), then train again.",
    ),
    "rebase": (
        lambda r: git_try(r, "rebase", "other"),
        "A rebase is in progress in {root}.",
        "Finish it ('git rebase --continue') or abandon it ('git rebase --abort'), then train "
        "again.",
    ),
    "rebase --apply": (
        lambda r: git_try(r, "rebase", "--apply", "other"),
        "A rebase is in progress in {root}.",
        "Finish it ('git rebase --continue') or abandon it ('git rebase --abort'), then train "
        "again.",
    ),
    "am": (
        _am,
        "A 'git am' is in progress in {root}.",
        "Finish it ('git am --continue') or abandon it ('git am --abort'), then train again.",
    ),
    "cherry-pick": (
        lambda r: git_try(r, "cherry-pick", "other"),
        "A cherry-pick is in progress in {root}.",
        "Finish it ('git cherry-pick --continue') or abandon it ('git cherry-pick --abort'), "
        "then train again.",
    ),
    "revert": (
        lambda r: git_try(r, "revert", "--no-edit", "HEAD~1"),
        "A revert is in progress in {root}.",
        "Finish it ('git revert --continue') or abandon it ('git revert --abort'), then train "
        "again.",
    ),
    "bisect": (
        lambda r: git_try(r, "bisect", "start"),
        "A git bisect is in progress in {root}.",
        "End it with 'git bisect reset', then train again.",
    ),
    "index.lock": (
        lambda r: (r / ".git" / "index.lock").write_bytes(b""),
        "{root}/.git/index.lock exists: another git process may be running in this repository.",
        "Wait for it to finish; if no git process is running, the lock is stale: remove it "
        "(rm {root}/.git/index.lock) and train again.",
    ),
    "detached HEAD": (
        lambda r: git(r, "checkout", "-q", "--detach", "HEAD"),
        "HEAD is detached (at {head}), so accepted edits would be committed on no branch.",
        "Check out a branch ('git switch <branch>'), or train on a new branch from here with "
        "'skillvc train --branch NAME' (or [train] branch in skillvc.toml).",
    ),
}


@pytest.mark.parametrize("state", list(STATES))
def test_train_refuses_unusual_repository_states_before_any_call(
    http_repo: Path, state: str, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    repo = http_repo
    _diverged(repo)
    make, message, hint = STATES[state]
    make(repo)
    head = git(repo, "rev-parse", "HEAD")[:12]
    root = str(repo)
    result = run(repo, monkeypatch, "train")
    assert result.exit_code == 4, result.output
    assert result.stderr == (
        f"Error: {message.format(root=root, head=head)}\n"
        f"Hint: {hint.format(root=root, head=head)}\n"
    )
    assert loopback.requests == []
    assert event_types(repo) == []


def test_a_detached_head_trains_when_a_branch_is_configured(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = demo_copy(demo_seed, tmp_path / "repo")
    with open(repo / "skillvc.toml", "a") as fh:
        fh.write('branch = "train/returns"\n')  # [train] is the file's last table
    git(repo, "commit", "-qam", "Train on a branch")
    git(repo, "checkout", "-q", "--detach", "HEAD")
    result = run(repo, monkeypatch, "train", "--epochs", "1", "-q")
    assert result.exit_code == 0, result.output
    assert git(repo, "branch", "--show-current") == "train/returns"


# -- the projection after the baseline ----------------------------------------------------------


def test_projection_arithmetic() -> None:
    """The planned calls of the demo's shape, counted by hand from the loop's structure."""
    config = parse_config(
        "[train]\nepochs = 1\nbatch_size = 20\nminibatch_size = 5\n", Path("/nonexistent")
    )
    stats = RoleStats(replies=30, tokens=30 * 150)
    p = project(
        config, {"target": stats}, n_train=60, n_val=30, n_test=30, n_slow=20, skill_tokens=100
    )
    # target: baseline 30 + (60 rollouts + 3 gates x 30 + slow update 2 x 20 + its gate 30)
    # + test 2 x 30 = 310; optimizer: 3 steps x (20/5 + 1) reflections + slow + meta = 17.
    assert p.calls == {"target": 310, "optimizer": 17}
    # 310 x 150 target tokens; 17 optimizer calls of 2 skills + 5 cases of (150 - 100) tokens
    # + 500 of template, and a 1,000-token answer.
    assert p.tokens == 310 * 150 + 17 * (2 * 100 + 5 * 50 + 500 + 1000) == 79_650
    assert p.unpriced == () and p.cost_usd == 0.0  # sim: is free


def test_projection_counts_slow_updates_from_the_epoch_they_start_at() -> None:
    text = "[train]\nepochs = 3\nbatch_size = 20\nminibatch_size = 5\n"
    stats = RoleStats(replies=30, tokens=30 * 150)
    sizes = {"n_train": 60, "n_val": 30, "n_test": 30, "n_slow": 20, "skill_tokens": 100}
    calls = {
        start: project(
            parse_config(text + f"slow_update_from_epoch = {start}\n", Path("/nonexistent")),
            {"target": stats},
            **sizes,
        ).calls
        for start in (1, 2, 4)
    }
    # Per epoch: 60 rollouts + 3 gates x 30 = 150 target and 3 x 5 + meta = 16 optimizer calls;
    # per slow update 2 x 20 rollouts + its gate 30 = 70 target calls and 1 optimizer call.
    base = {"target": 30 + 3 * 150 + 2 * 30, "optimizer": 3 * 16}
    for start, slow_updates in ((1, 3), (2, 2), (4, 0)):
        assert calls[start] == {
            "target": base["target"] + 70 * slow_updates,
            "optimizer": base["optimizer"] + slow_updates,
        }


def test_projection_prices_each_role_and_names_unpriced_models() -> None:
    config = parse_config(
        '[target]\nmodel = "openai:gpt-4o-mini"\n[optimizer]\nmodel = "anthropic:mystery"\n'
        "[train]\nepochs = 1\nbatch_size = 20\nminibatch_size = 5\n",
        Path("/nonexistent"),
    )
    # The baseline: 30 target calls at $0.01 each, and a judge (the optimizer's model, unpriced).
    target = RoleStats(replies=30, tokens=30 * 150, cost_exact=Fraction(30, 100))
    judge = RoleStats(replies=30, tokens=30 * 40, unpriced=30)
    p = project(
        config,
        {"target": target, "judge": judge},
        n_train=60,
        n_val=30,
        n_test=30,
        n_slow=20,
        skill_tokens=100,
    )
    assert p.calls == {"target": 310, "optimizer": 17, "judge": 310}
    assert p.cost_usd == pytest.approx(3.10)  # the target's 310 calls; the rest is unpriced
    assert p.unpriced == ("anthropic:mystery",)
    assert p.sentence() == (
        "637 calls, 92,050 tokens, $3.10 plus unpriced calls to anthropic:mystery"
    )


def test_an_unbudgeted_run_projected_above_20_usd_stops_before_the_first_step(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    repo = demo_copy(demo_seed, tmp_path / "repo")
    over_http(repo, loopback, monkeypatch, EXPENSIVE)

    stopped = run(repo, monkeypatch, "train")
    assert stopped.exit_code == 4, stopped.output
    with open_store(repo / ".skillvc" / "events.db") as store:
        run_id = store.events(types=["run.started"])[0].run_id
        projected = store.events(types=["run.projected"])[0].payload
        stop = store.events(types=["run.stopped"])[0].payload
    # The loopback answers 11 + 7 tokens a call, less than the skill (484 bytes: 121 tokens),
    # so an optimizer call is 2 x 121 + 500 of prompt and 1,000 of answer.
    tokens = 310 * 18 + 17 * (2 * 121 + 500 + 1000)
    assert len(DEMO_SKILL) == 484 and tokens == 35_194
    assert projected == {
        "calls": {"target": 310, "optimizer": 17},
        "tokens": 35_194,
        "cost_usd": 35.194,  # $1,000 per 1M tokens
        "unpriced": [],
    }
    sentence = (
        f"Run {run_id} is projected to cost about $35.19 (327 calls, 35,194 tokens), more than "
        "the $20 a run without a budget may spend, so it stopped before its first step."
    )
    assert stopped.stderr.endswith(
        f"projected for run {run_id}: about 327 calls, 35,194 tokens, $35.19 (an upper "
        "estimate)\n"
        f"Error: {sentence}\n"
        "Hint: To go on, resume it with a budget: 'skillvc train --budget-usd 43' (the run "
        "continues from here); or start a smaller run with 'skillvc train --new --epochs 1'.\n"
    )
    assert stop == {"reason": "projection", "message": sentence}
    types = event_types(repo)
    assert "step.started" not in types and types.count("rollout") == 30
    assert len(loopback.requests) == 30  # the baseline only
    assert git(repo, "log", "-1", "--format=%s") == "Models over HTTP"  # nothing committed
    runs = json.loads(run(repo, monkeypatch, "runs", "--json").stdout)
    assert runs[0]["status"] == "stopped"

    # Going on as the hint says: the same run resumes, and the baseline is not paid again.
    resumed = run(repo, monkeypatch, "train", "--budget-usd", "43", "--json")
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads(resumed.stdout)
    assert summary["run"] == run_id and summary["resumed"] and summary["status"] == "finished"
    with open_store(repo / ".skillvc" / "events.db") as store:
        fresh = len(store.events(types=["model.call"]))
        assert len(store.events(types=["run.projected"])) == 1
    assert len(loopback.requests) == fresh  # every request made once


def test_a_budget_lets_an_expensive_projection_go_on(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    repo = demo_copy(demo_seed, tmp_path / "repo")
    over_http(repo, loopback, monkeypatch, EXPENSIVE)
    result = run(repo, monkeypatch, "train", "--budget-usd", "500", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "finished"
    assert "projected for run" not in result.stdout  # progress goes to stderr only


# -- eval when items errored -------------------------------------------------------------------


def eval_with_errors(
    repo: Path, server: LoopbackServer, monkeypatch: pytest.MonkeyPatch, n: int, *flags: str
) -> Result:
    """``skillvc eval`` on one worker, the server failing the first ``n`` calls with a 500."""
    for _ in range(n):
        server.error(500, "upstream exploded")
    return run(repo, monkeypatch, "eval", "-q", "--workers", "1", *flags)


def test_eval_exits_6_when_every_item_errored(
    http_repo: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    repo = http_repo
    result = eval_with_errors(repo, loopback, monkeypatch, 30)
    assert result.exit_code == 6, result.output
    assert result.stdout == ""
    first, hint = result.stderr.splitlines()
    assert first.startswith("Error: All 30 items of the val split errored, so there is no score ")
    assert "(first error: target call to openai:loopback-sim failed: " in first
    assert "upstream exploded" in first and first.endswith(").")
    assert hint == "Hint: Run 'skillvc doctor' to check models, credentials and reachability."
    assert len(loopback.requests) == 30
    assert event_types(repo).count("evaluation") == 1  # the failures are kept as evidence


def test_eval_says_how_many_items_errored(
    http_repo: Path, monkeypatch: pytest.MonkeyPatch, loopback: LoopbackServer
) -> None:
    result = eval_with_errors(http_repo, loopback, monkeypatch, 3, "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "warning: 3 of 30 items errored and are not scored; the score covers the other 27.\n"
    )
    data = json.loads(result.stdout)
    assert (data["errors"], data["n"]) == (3, 27)
    # The 3 are retried: the server answers them now.
    text = run(http_repo, monkeypatch, "eval", "-q")
    assert text.exit_code == 0 and text.stderr == ""

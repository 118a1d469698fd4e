"""A new user's first hour, second pass (issue 45, items 3, 5 and 6).

A local server without a key, asked once, its model names checked; a train that fails before
any model call leaves no run behind; a typo gets the nearest name and its line of skillvc.toml.
Real SDKs against the loopback server; real repos from ``create_demo_repo``; the CLI in process.
"""

# The imported ``loopback`` fixture is named by every test's parameter, as pytest wants.
# ruff: noqa: F811

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import git
from loopback import LoopbackServer, loopback  # noqa: F401 - the fixture

from skillvc.cli import cli
from skillvc.core.store import open_store
from skillvc.core.suggest import config_line, nearest
from skillvc.models.backends.local import is_loopback
from skillvc.training.demo import create_demo_repo

SKILL = "skills/acme-returns/SKILL.md"
TOML = (
    f'[skill]\npath = "{SKILL}"\n\n'
    '[tasks]\ntrain = "evals/train.jsonl"\nval = "evals/val.jsonl"\nscorer = "{scorer}"\n\n'
    "[target]\n{target}\n\n[optimizer]\n{optimizer}\n\n"
    "[train]\nepochs = 1\n{extra}\n"
)
SIM = 'model = "sim:support"'


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    create_demo_repo(root)
    monkeypatch.chdir(root)
    return root


def configure(
    repo: Path, target: str = SIM, optimizer: str = SIM, scorer: str = "exact", extra: str = ""
) -> None:
    text = TOML.format(target=target, optimizer=optimizer, scorer=scorer, extra=extra)
    (repo / "skillvc.toml").write_text(text, encoding="utf-8")
    git(repo, "commit", "-qam", "configure")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def line(result: Result, name: str) -> str:
    (found,) = [
        ln for ln in result.stdout.splitlines() if ln[6:].startswith(name + ":") or ln == name
    ]
    return found


def runs_started(repo: Path) -> int:
    db = repo / ".skillvc" / "events.db"
    if not db.exists():
        return 0
    with open_store(db) as store:
        return len(store.events(types=["run.started"]))


# -- item 6: did you mean ---------------------------------------------------------------------


def test_a_mistyped_key_or_section_gets_the_nearest_name_and_its_line(repo: Path) -> None:
    configure(repo, extra="learning_rte = 3")

    doctor = run("doctor")
    assert doctor.exit_code == 6
    assert line(doctor, "config") == (
        "FAIL  config: Unknown key 'learning_rte' in [train] of skillvc.toml on line 17. "
        "Fix: Did you mean 'learning_rate'? Rename it in skillvc.toml."
    )

    text = (repo / "skillvc.toml").read_text().replace("learning_rte = 3", "")
    (repo / "skillvc.toml").write_text(text.replace("[tasks]", "[task]"))
    train = run("train", "-q")
    assert train.exit_code == 5
    assert train.stderr == (
        "Error: Unknown section [task] in skillvc.toml on line 4.\n"
        "Hint: Did you mean [tasks]? Rename the table.\n"
    )


@pytest.mark.parametrize(
    ("setting", "message", "hint"),
    [
        (
            {"scorer": "exakt"},
            "Unknown scorer 'exakt' ([tasks] scorer on line 7 of skillvc.toml).",
            "Did you mean 'exact'? Set it as [tasks] scorer. docs/tasks.md describes each scorer.",
        ),
        (
            {"target": 'model = "sim:suport"'},
            "Unknown simulator world 'suport' in 'sim:suport' ([target] model on line 10 of "
            "skillvc.toml).",
            "Did you mean 'sim:support'?",
        ),
        (
            {"optimizer": 'model = "openia:gpt-4o"'},
            "Unknown model backend 'openia' in 'openia:gpt-4o' ([optimizer] model on line 13 "
            "of skillvc.toml).",
            "Did you mean 'openai'? Write it before the ':'.",
        ),
    ],
)
def test_a_mistyped_value_names_its_line_and_the_nearest_name_before_any_run(
    repo: Path, setting: dict[str, str], message: str, hint: str
) -> None:
    configure(repo, **setting)

    train = run("train", "-q")

    assert train.exit_code == 5
    assert train.stderr == f"Error: {message}\nHint: {hint}\n"
    assert runs_started(repo) == 0
    doctor = run("doctor")
    assert f"FAIL  {'tasks' if 'scorer' in setting else next(iter(setting))}" in doctor.stdout
    assert f": {message} Fix: {hint}" in doctor.stdout


def test_nearest_and_config_line() -> None:
    assert nearest("learning_rte", ["learning_rate", "min_learning_rate", "seed"]) == (
        "learning_rate"
    )
    assert nearest("zzz", ["learning_rate"]) is None
    text = '[train]\nseed = 1\n\n[skills.a.train]\n"epochs" = 2\n'
    assert config_line(text, "train", "seed") == 2
    assert config_line(text, "skills.a.train", "epochs") == 5
    assert config_line(text, "skills.a.train") == 4
    assert config_line(text, "train", "epochs") is None


# -- item 5: failed starts leave no run ---------------------------------------------------------


def test_no_key_stops_train_before_a_run_is_created(repo: Path) -> None:
    configure(repo, target='model = "openai:gpt-4o-mini"')

    first = run("train", "-q")
    second = run("train", "-q")

    assert first.exit_code == second.exit_code == 6
    assert first.stderr == (
        "Error: OPENAI_API_KEY is not set ([target] model openai:gpt-4o-mini needs it); no run "
        "was started.\n"
        "Hint: Export it (export OPENAI_API_KEY=...), or name another variable with api_key_env "
        "in [target] of skillvc.toml; 'skillvc doctor' checks every setting.\n"
    )
    assert runs_started(repo) == 0


def test_a_model_the_server_does_not_have_gets_the_model_name_hint(
    repo: Path, loopback: LoopbackServer
) -> None:
    loopback.responder = lambda body: "<answer>refund</answer>"
    model = f'model = "openai:nope"\nbase_url = "{loopback.url}/v1"\nmax_retries = 0'
    configure(repo, target=model)
    for _ in range(40):
        loopback.error(404, "model 'nope' not found")

    train = run("train", "-q")

    assert train.exit_code == 4
    assert train.stderr.splitlines()[-1] == (
        "Hint: Check the model name in [target] of skillvc.toml ('skillvc doctor' names the "
        "models the server serves), then run 'skillvc train' again."
    )


# -- item 3: a local server ----------------------------------------------------------------------


def test_a_loopback_server_needs_no_key_is_asked_once_and_its_models_are_checked(
    repo: Path, loopback: LoopbackServer
) -> None:
    loopback.get_routes["/v1/models"] = {"object": "list", "data": [{"id": "qwen2.5"}]}
    loopback.responder = lambda body: "OK"
    model = f'model = "openai:qwen-2.5"\nbase_url = "{loopback.url}/v1"'
    configure(repo, target=model, optimizer=model)

    result = run("doctor")

    assert result.exit_code == 0, result.output
    assert line(result, "target key") == (
        "ok    target key: OPENAI_API_KEY is not set; the server is on this machine, so a "
        "placeholder key is sent (a local server accepts any)."
    )
    assert line(result, "target model") == (
        f"warn  target model: {loopback.url}/v1 serves 'qwen2.5', not 'qwen-2.5'; calls to "
        "'qwen-2.5' may fail with 404. Fix: Set model = \"openai:qwen2.5\" (or the served model "
        "you meant) in [target] of skillvc.toml."
    )
    assert line(result, "optimizer reachable").startswith(
        "ok    optimizer reachable: the target's server and model, asked once: answered one "
        "tiny call in "
    )
    assert len(loopback.requests) == 1, "one server and model: one tiny call"
    assert loopback.requests[0].headers["authorization"] == "Bearer local"
    assert result.stderr == (
        f"doctor: waiting for one tiny answer from openai:qwen-2.5 at {loopback.url}/v1 "
        "(at most 180 s)...\n"
    )


def test_a_placeholder_goes_only_to_this_machine() -> None:
    assert all(is_loopback(u) for u in ("http://localhost:8080/v1", "http://127.0.0.2/v1"))
    assert is_loopback("http://[::1]:11434/v1")
    for url in ("https://api.openai.com/v1", "http://10.0.0.5/v1", "http://localhost.evil.com"):
        assert not is_loopback(url)
    assert not is_loopback(None)


# -- item 4: apply records what the diff does, and its gate --------------------------------------

ADD_TWO = f"""--- a/{SKILL}
+++ b/{SKILL}
@@ -13,2 +13,4 @@
 - Always quote the order number in the reply.
+- Damaged on arrival: offer a replacement, not a refund.
+- Late deliveries earn store credit, not a refund.
{" "}
"""


def test_apply_records_an_addition_as_add_and_keeps_its_gate(repo: Path, tmp_path: Path) -> None:
    diff = tmp_path / "add.diff"
    diff.write_text(ADD_TWO)

    applied = run("apply", str(diff), "-q", "-m", "Add two rules")

    assert applied.exit_code == 0, applied.output
    assert applied.stdout.splitlines()[0] == (
        "Val: 0.333 -> 0.367 (+0.033 ± 0.033 s.e.; 0 worse, 1 better of 30; p=0.5 sign)."
    )
    body = git(repo, "log", "-1", "--format=%B").splitlines()
    assert body[-2:] == [
        f"Skillvc-Gate: {body[-2].split(';')[0].split()[-1]}; val hard 0.333 -> 0.367, n=30, "
        "1 better, 0 worse",
        "Skillvc-Significance: p=0.5; within noise; alpha=0.1",
    ]
    with open_store(repo / ".skillvc" / "events.db") as store:
        (edit,) = [e.payload["edit"] for e in store.events(types=["edit.proposed"])]
    assert (edit["op"], edit["anchor"], edit.get("target") or None) == (
        "add",
        "- Always quote the order number in the reply.",
        None,
    )
    log = run("log", "-n", "1").stdout.splitlines()
    assert log[0].startswith("accepted patch applied by hand  event ")
    assert (
        log[1]
        == "    val 0.333 -> 0.367 (hard, n=30)  sign test: p = 0.5, within noise (alpha 0.1)"
    )
    blamed = run("blame").stdout.splitlines()
    assert any(
        "human (Test Author) +0.033 p = 0.5, within noise (alpha 0.1)" in b
        and b.endswith("| - Damaged on arrival: offer a replacement, not a refund.")
        for b in blamed
    ), blamed


def test_a_short_hunk_is_named_with_its_counts(repo: Path, tmp_path: Path) -> None:
    diff = tmp_path / "short.diff"
    diff.write_text("".join(ADD_TWO.splitlines(True)[:5]))

    applied = run("apply", "--no-gate", str(diff))

    assert applied.exit_code == 5
    assert applied.stderr == (
        "Error: The diff cannot be parsed: hunk 1 (@@ -13,2 +13,4 @@) promises 2 old and 4 new "
        "lines but has 1 old and 2 new.\n"
        "Hint: Fix the counts in the @@ line (or make the diff again with 'git diff').\n"
    )


# -- item 2: your own tasks offline ---------------------------------------------------------------

KINDS = {
    "broken": ("My {t} arrived broken{tag}.", "replace"),
    "late": ("The {t} came late again{tag}.", "credit"),
    "charged": ("I was charged twice for the {t}{tag}.", "refund"),
    "password": ("I forgot my password for the {t} shop{tag}.", "reset"),
}
THINGS = ("lamp", "kettle", "chair", "drone", "order", "parcel")


def own_repo(root: Path, model: str, n_train: int = 16, n_val: int = 24) -> Path:
    """A repository of one's own: a bare skill and a triage task set no simulator was made for."""
    import json

    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "SKILL.md").write_text(
        "---\nname: triage\ndescription: Route messages.\n---\n# Triage\n"
    )
    (root / "evals").mkdir()
    for split, n, tag in (("train", n_train, ""), ("val", n_val, " (val)")):
        rows = []
        for i in range(n):
            text, target = list(KINDS.values())[i % 4]
            rows.append({"id": f"{split}{i}", "input": text.format(t=THINGS[i // 4 % 6], tag=tag),
                         "target": target})  # fmt: skip
        (root / "evals" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "skillvc.toml").write_text(
        '[skill]\npath = "SKILL.md"\n\n[tasks]\ntrain = "evals/train.jsonl"\n'
        f'val = "evals/val.jsonl"\n\n[target]\nmodel = "{model}"\n\n[optimizer]\n'
        f'model = "{model}"\n\n[train]\nepochs = 1\nslow_update = false\n'
    )
    git(root, "add", ".")
    git(root, "commit", "-qm", "my own skill and tasks")
    return root


def test_a_sim_world_that_cannot_read_the_tasks_is_named_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(own_repo(tmp_path / "own", "sim:support", n_train=4, n_val=4))
    warning = (
        "sim:support is a simulator of Acme support tickets and recognises 0 of 8 task inputs "
        "here, so it scores them 0 whatever the skill says. To try the loop on your own tasks "
        'offline, set model = "sim:tasks" in [target] and [optimizer] (a simulator that learns '
        "from the items' own targets); for real scores, an openai: or anthropic: model."
    )

    doctor = run("doctor")
    train = run("train")

    assert line(doctor, "tasks") == (
        f"warn  tasks: the task set loads (4 train, 4 val, 0 test), but {warning}"
    )
    assert train.stderr.splitlines()[0] == f"Warning: {warning}"


def test_sim_tasks_learns_rules_from_ones_own_targets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = own_repo(tmp_path / "own", "sim:tasks")
    monkeypatch.chdir(repo)

    train = run("train", "-q")

    assert train.exit_code == 0, train.output
    assert "Warning" not in train.stderr
    assert "val  0.000 -> 1.000" in train.stdout
    skill = (repo / "SKILL.md").read_text()
    assert '- When the input mentions "password", answer "reset".' in skill
    assert git(repo, "log", "--format=%s", "-1").startswith("skillvc: add ")

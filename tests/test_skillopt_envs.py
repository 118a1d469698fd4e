"""SkillOpt's six environments (issue 40 item 1): each split format loads as a task set, is
scored by its verifier, and the tool-using ones run through the tool loop.

The fixtures (tests/fixtures/skillopt/<env>_split/) are built from the fields SkillOpt's loaders
read (``skillopt/envs/*/dataloader.py`` and data/README.md in microsoft/SkillOpt); the binary
files they point to (a DocVQA image, SpreadsheetBench workbooks) are made here, the workbooks
with openpyxl.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from click.testing import CliRunner
from conftest import git
from loopback import Behaviour, LoopbackServer, loopback, neutral_messages  # noqa: F401

from skillvc.cli import cli
from skillvc.core.config import TasksConfig
from skillvc.core.errors import TaskSetError, ToolsError
from skillvc.models.tools.environment import Environment
from skillvc.tasks.scorers import Acted, get_scorer, score_item
from skillvc.tasks.skillopt import alfworld
from skillvc.tasks.skillopt.tools import officeqa as officeqa_tools
from skillvc.tasks.taskset import TaskSet, load_taskset

FIXTURES = Path(__file__).parent / "fixtures" / "skillopt"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def workbook(path: Path, values: dict[str, Any], sheet: str = "Sheet1") -> None:
    book = openpyxl.Workbook()
    book.active.title = sheet
    for cell, value in values.items():
        book.active[cell] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    book.save(path)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixtures in a repository, with the files their items point to."""
    root = tmp_path_factory.mktemp("skillopt") / "repo"
    root.mkdir()
    for name in FIXTURES.glob("*_split"):
        shutil.copytree(name, root / "data" / name.name)
    shutil.copytree(FIXTURES / "officeqa_docs", root / "data" / "officeqa_docs_official")
    for qid, doc in ((5000, 700), (5001, 701), (5002, 702)):
        (root / "data/docvqa_images").mkdir(parents=True, exist_ok=True)
        (root / f"data/docvqa_images/q{qid}_d{doc}.png").write_bytes(PNG)
    for i in range(3):
        task = root / f"data/spreadsheetbench_verified_400/spreadsheet/{32438 + i}"
        ident = 32438 + i
        for no, numbers in (("1", (1, 2, 3)), ("2", (10, 20, 30))):
            cells = {f"A{r}": n for r, n in enumerate(numbers, start=1)}
            workbook(task / f"{no}_{ident}_input.xlsx", cells)
            workbook(task / f"{no}_{ident}_answer.xlsx", {**cells, "B1": sum(numbers)})
    return root


def load(root: Path, split_dir: str, env: str | None, **more: Any) -> TaskSet:
    scorer = {
        "livemathematicianbench": "livemath",
        "docvqa": "anls",
        "officeqa": "officeqa",
        "spreadsheetbench": "spreadsheet",
        "alfworld": "reward",
    }.get(env or "", "exact")
    config = TasksConfig(skillopt_dir=f"data/{split_dir}", skillopt_env=env, scorer=scorer, **more)
    return load_taskset(config, root)


def scored(name: str, item: Any, output: str, acted: Acted | None = None) -> tuple[float, float]:
    result = score_item(item, output, get_scorer(name), acted=acted)
    return result.hard, result.soft


def test_searchqa_still_loads_without_skillopt_env_and_scores_exact_match(repo: Path) -> None:
    tasks = load(repo, "searchqa_split", None)
    item = tasks.val[0]
    assert item.input == "Which river flows through Rome?\n\nContext: The Tiber is a river."
    assert scored("exact", item, "<answer>The Tiber</answer>") == (1.0, 1.0)
    assert scored("exact", item, "<answer>Po</answer>") == (0.0, 0.0)
    assert load(repo, "searchqa_split", "searchqa").hash == tasks.hash


def test_livemath_items_show_labelled_choices_and_score_the_picked_label(repo: Path) -> None:
    item = load(repo, "livemathematicianbench_split", "livemath").train[0]
    assert item.id == "202602:1"
    assert item.input.endswith("## Choices\nA. O(n^1)\nB. O(log n) for 0\nC. none of these")
    assert item.targets == ("B",)
    assert "Theorem 0" in item.fields["reference"]  # for the optimizer, never the target
    assert "Theorem" not in item.input
    for right in ("<answer>B</answer>", "so the answer is\nB.", "<answer>O(log n) for 0</answer>"):
        assert scored("livemath", item, right) == (1.0, 1.0), right
    assert scored("livemath", item, "<answer>A</answer>") == (0.0, 0.0)
    assert scored("livemath", item, "<answer>C) none</answer>") == (0.0, 0.0)


def test_docvqa_rows_carry_their_image_and_score_anls(repo: Path) -> None:
    tasks = load(repo, "docvqa_split", "docvqa")
    item = tasks.train[0]
    assert (item.id, item.input) == ("5000", "What is the invoice date?")
    assert item.targets == ("12/03/1998", "December 3, 1998")
    assert [(p, t) for p, t, _ in item.images] == [
        ("data/docvqa_images/q5000_d700.png", "image/png")
    ]
    assert scored("anls", item, "<answer>12/03/1998</answer>") == (1.0, 1.0)
    hard, soft = scored("anls", item, "<answer>12/03/1990</answer>")  # one character off
    assert (hard, round(soft, 3)) == (0.0, 0.9)
    assert scored("anls", item, "<answer>March</answer>") == (0.0, 0.0)  # past 0.5: nothing


def test_officeqa_items_get_their_documents_and_score_officeqa_match(repo: Path) -> None:
    tasks = load(repo, "officeqa_split", "officeqa", data_root="data/officeqa_docs_official")
    item = tasks.train[0]
    assert item.id == "UID0002"
    assert [p for p, _ in item.files] == [
        "data/officeqa_docs_official/treasury_bulletin_1944_01.txt"
    ]
    assert "## Candidate Files\n- treasury_bulletin_1944_01.txt" in item.input
    assert "?page=12" in item.input  # the source hint
    assert scored("officeqa", item, "<answer>165877 million dollars</answer>") == (1.0, 1.0)
    assert scored("officeqa", item, "165,877") == (0.0, 0.0)  # no <answer> tag: no answer
    hard, soft = scored("officeqa", item, "<answer>165,877 total</answer>")
    assert (hard, round(soft, 3)) == (0.0, 0.667)
    assert tasks.test[0].files[0][0].endswith("treasury_bulletin_1944_01.txt")  # a JSON list


def test_a_missing_document_or_image_is_named_before_any_call(repo: Path) -> None:
    with pytest.raises(TaskSetError, match=r"names the document treasury_bulletin_1944_01.txt"):
        load(repo, "officeqa_split", "officeqa", data_root="data/docvqa_images")
    with pytest.raises(TaskSetError, match=r"image data/docvqa_images/q5000_d700.png is not"):
        load(repo, "docvqa_split", "docvqa", data_root="data/officeqa_docs_official")


def test_items_of_another_environment_without_skillopt_env_are_named(repo: Path) -> None:
    with pytest.raises(TaskSetError) as caught:
        load(repo, "docvqa_split", None)
    assert "holds docvqa items" in caught.value.message
    assert 'skillopt_env = "docvqa"' in caught.value.hint
    with pytest.raises(TaskSetError, match="not one of SkillOpt's environments"):
        load(repo, "docvqa_split", "docvq")


def test_spreadsheetbench_compares_the_produced_workbooks_cell_by_cell(
    repo: Path, tmp_path: Path
) -> None:
    tasks = load(
        repo, "spreadsheetbench_split", "spreadsheetbench",
        data_root="data/spreadsheetbench_verified_400",
    )  # fmt: skip
    item = tasks.train[0]
    assert [Path(p).name for p, _ in item.files] == ["1_32438_input.xlsx", "2_32438_input.xlsx"]
    assert "1_32438_input.xlsx -> write 1_output.xlsx" in item.input
    assert "answer" not in json.dumps([p for p, _ in item.files])  # never shown to the model
    assert item.metadata["answer_position"] == "Sheet1!B1"

    def produced(**books: dict[str, Any]) -> Acted:
        files = {}
        for name, cells in books.items():
            workbook(tmp_path / name, cells)
            data = (tmp_path / name).read_bytes()
            files[f"{name}.xlsx"] = {"size": len(data), "base64": base64.b64encode(data).decode()}
        return Acted(files=files)

    right = produced(**{"1_output": {"B1": 6}, "2_output": {"B1": "60.001"}})  # rounds to 60.0
    assert scored("spreadsheet", item, "done", right) == (1.0, 1.0)
    half = produced(**{"1_output": {"B1": 6}, "2_output": {"B1": 61}})
    result = score_item(item, "done", get_scorer("spreadsheet"), acted=half)
    assert (result.hard, result.soft) == (0.0, 0.5)
    assert result.detail == "case 2: Sheet1!B1: got 61, expected 60"
    assert scored("spreadsheet", item, "done", produced(**{"1_output": {"B1": 6}})) == (0.0, 0.5)
    assert scored("spreadsheet", item, "done", None) == (0.0, 0.0)  # no tools: nothing written
    other = produced(**{"1_output": {"B1": "6"}, "2_output": {"B1": None}})
    assert scored("spreadsheet", item, "done", other) == (0.0, 0.5)  # "6" is 6.0; None is not 60


def test_alfworld_loads_and_names_what_it_needs_before_any_call(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(TaskSetError, match="environment is not set"):
        load(repo, "alfworld_path_split", "alfworld")
    spec = "skillvc.tasks.skillopt.alfworld:ALFWorld"
    tasks = load(repo, "alfworld_path_split", "alfworld", environment=spec)
    assert tasks.val[0].metadata["gamefile"].startswith("json_2.1.1/valid_seen/")
    monkeypatch.setattr(alfworld, "installed", lambda package: False)
    with pytest.raises(ToolsError) as caught:
        Environment(spec, repo)
    assert "needs the alfworld and textworld packages" in caught.value.message
    assert "pip install alfworld" in caught.value.hint
    monkeypatch.setattr(alfworld, "installed", lambda package: True)  # the packages, no data
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(ToolsError, match="ALFWORLD_DATA is not set") as caught:
        Environment(spec, repo)
    assert "alfworld-download" in caught.value.hint


class FakeGame:
    """A two-room game: won by 'take mug' after 'go to desk 1'."""

    def __init__(self, path: Path) -> None:
        self.path, self.at = path, "start"

    def reset(self) -> tuple[str, list[str], bool]:
        return (
            f"You are in a room ({self.path.name}). Your task is to: take the mug.",
            [
                "go to desk 1",
                "help",
            ],
            False,
        )

    def step(self, action: str) -> tuple[str, list[str], bool]:
        if action == "go to desk 1":
            self.at = "desk"
            return "You see a mug.", ["take mug"], False
        won = action == "take mug" and self.at == "desk"
        return ("You take the mug." if won else "Nothing happens."), ["go to desk 1"], won


def test_the_alfworld_environment_plays_a_game_through_the_protocol(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    game = tmp_path / "json_2.1.1/train/t1/game.tw-pddl"
    game.parent.mkdir(parents=True)
    game.write_text("{}")
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    monkeypatch.setattr(alfworld.ALFWorld, "game", FakeGame)
    env = Environment("skillvc.tasks.skillopt.alfworld:ALFWorld", tmp_path)
    episode, first = env.start(
        {"id": "t", "metadata": {"gamefile": "json_2.1.1/train/t1/game.tw-pddl"}}
    )
    assert first.startswith("You are in a room (game.tw-pddl)")
    assert "admissible actions are: ['go to desk 1']" in first  # help is left out
    assert episode.step("<think>desk</think><action>Go to desk 1</action>")[1:] == (0.0, False)
    observation, reward, done = episode.step("take mug")
    assert (observation.split("\n")[0], reward, done) == ("You take the mug.", 1.0, True)


def test_officeqa_document_tools_see_the_scratch_directory_only(tmp_path: Path) -> None:
    (tmp_path / "bulletin.txt").write_text("a\nTotal debt: 5\nb\n")
    assert officeqa_tools.glob("*.txt", tmp_path) == "bulletin.txt"
    assert officeqa_tools.grep("DEBT", "bulletin.txt", tmp_path) == "2: Total debt: 5"
    assert officeqa_tools.read("bulletin.txt", tmp_path, start=2, limit=1) == "Total debt: 5\n"
    with pytest.raises(ValueError, match="no document"):
        officeqa_tools.read("../secret.txt", tmp_path)


def test_spreadsheet_and_officeqa_rollouts_act_through_the_tool_loop(
    repo: Path,
    loopback: LoopbackServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scripted model writes the workbooks with the code tool (SpreadsheetBench) and greps
    the bulletin with the shipped OfficeQA tools; the verifiers score what came back."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")

    def model(body: dict) -> Behaviour | str:
        messages = neutral_messages(body)
        user = next(m for m in messages if m["role"] == "user")["content"]
        results = [m for m in messages if m["role"] == "tool"]
        if "# Instruction" in user:
            if results:
                return "saved"
            code = (
                "import glob, openpyxl\n"
                "for path in sorted(glob.glob('*_input.xlsx')):\n"
                "    book = openpyxl.load_workbook(path)\n"
                "    sheet = book.active\n"
                "    sheet['B1'] = sum(sheet[f'A{r}'].value for r in range(1, 4))\n"
                "    book.save(path.split('_')[0] + '_output.xlsx')\n"
            )
            call = {"id": "c1", "name": "python", "arguments": json.dumps({"code": code})}
            return Behaviour(tool_calls=[call])
        if results:
            line = results[-1]["content"].split(": ", 1)[-1]
            return f"<answer>{line.split(': ')[-1].replace(' million dollars', '')}</answer>"
        name = user.split("## Candidate Files\n- ", 1)[1].split("\n", 1)[0]
        args = {"pattern": "net budget receipts", "path": name}
        return Behaviour(tool_calls=[{"id": "c1", "name": "grep", "arguments": json.dumps(args)}])

    loopback.responder = model
    root = tmp_path / "repo"
    shutil.copytree(repo, root)
    git(root, "init", "-q", "-b", "main")
    (root / "skills/s").mkdir(parents=True)
    (root / "skills/s/SKILL.md").write_text("---\nname: s\ndescription: Work.\n---\n# S\n")
    target = f'[target]\nmodel = "openai:local-model"\nbase_url = "{loopback.url}/v1"\n'
    for env, data_root, tools in (
        ("spreadsheetbench", "data/spreadsheetbench_verified_400", "code = true"),
        ("officeqa", "data/officeqa_docs_official",
         'python = ["skillvc.tasks.skillopt.tools.officeqa"]'),
    ):  # fmt: skip
        (root / "skillvc.toml").write_text(
            f'[skill]\npath = "skills/s/SKILL.md"\n\n[tasks]\nskillopt_dir = "data/{env}_split"\n'
            f'skillopt_env = "{env}"\ndata_root = "{data_root}"\n\n[tools]\n{tools}\n'
            f'timeout_s = 60\n\n{target}max_retries = 0\n\n[optimizer]\nmodel = "sim:support"\n'
        )
        git(root, "add", "-A")
        git(root, "commit", "-qm", env)
        if not (root / ".skillvc").exists():
            assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
        monkeypatch.chdir(root)
        result = CliRunner().invoke(cli, ["eval", "--split", "val", "--json"])
        assert result.exit_code == 0, result.output
        items = json.loads(result.stdout)["items"]
        assert [(i["hard"], i["soft"]) for i in items] == [(1.0, 1.0)], (env, items)
    assert any(r.json.get("tools") for r in loopback.requests)


def test_the_answer_workbook_hash_guards_the_scorer(repo: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    shutil.copytree(repo, root)
    tasks = load(
        root, "spreadsheetbench_split", "spreadsheetbench",
        data_root="data/spreadsheetbench_verified_400",
    )  # fmt: skip
    item = tasks.val[0]
    answer = Path(item.fields["answer_workbooks"]["1"])
    case = item.metadata["cases"][0]
    assert case["answer_sha256"] == hashlib.sha256(answer.read_bytes()).hexdigest()
    workbook(answer, {"B1": 999})
    workbook(tmp_path / "out.xlsx", {"B1": 999})
    data = (tmp_path / "out.xlsx").read_bytes()
    acted = Acted(files={"1_output.xlsx": {"size": 1, "base64": base64.b64encode(data).decode()}})
    with pytest.raises(Exception, match="changed after the task set loaded"):
        score_item(item, "", get_scorer("spreadsheet"), acted=acted)

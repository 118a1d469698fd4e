"""Task files: formats, aliases, templates, splits, ids, integrity checks and error messages."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from skillvc.core.config import TasksConfig
from skillvc.core.errors import TaskSetError
from skillvc.core.hashing import content_id
from skillvc.tasks.taskset import (
    DUPLICATE_HINT,
    OVERLAP_HINT,
    TaskItem,
    TaskSet,
    load_taskset,
    read_items,
)

FIXTURES = Path(__file__).parent / "fixtures" / "tasks"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def jsonl(*rows: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def error_of(fn, *args, **kwargs) -> TaskSetError:  # type: ignore[no-untyped-def]
    with pytest.raises(TaskSetError) as info:
        fn(*args, **kwargs)
    return info.value


# -- formats and aliases ------------------------------------------------------------------------


def test_jsonl_field_aliases_targets_and_overrides() -> None:
    items = read_items(FIXTURES / "aliases.jsonl", scorer="exact")
    by_id = {i.id: i for i in items}
    assert [i.id for i in items][:4] == ["q1", "q2", "q3", "q4"]
    assert by_id["q1"].input == "What is the capital of France?"
    assert by_id["q1"].targets == ("Paris",)
    assert by_id["q2"].input == "2 + 2 = ?" and by_id["q2"].targets == ("4",)
    assert by_id["q3"].input == "Name a primary colour."
    assert by_id["q3"].targets == ("red", "blue", "yellow")
    # OpenAI-evals chat input is flattened with roles; "ideal" is a target alias.
    assert by_id["q4"].input == "system: Be brief.\n\nuser: Largest planet?"
    assert by_id["q4"].targets == ("Jupiter",)
    # metadata.scorer is a per-item override; numeric ids become strings.
    fifth = items[4]
    assert fifth.targets == ("cold",) and fifth.scorer == "includes"
    assert fifth.metadata == {"topic": "words", "scorer": "includes"}
    assert by_id["6"].choices == ("Trout", "Whale", "Eagle") and by_id["6"].scorer == "choice"
    # The blank line is skipped, but line numbers stay those of the file.
    assert by_id["q3"].source.endswith("aliases.jsonl:4")
    assert by_id["q1"].fields["target"] == "Paris"


def test_json_object_with_items_list() -> None:
    items = read_items(FIXTURES / "wrapped.json", scorer="exact")
    assert [(i.id, i.input, i.targets) for i in items] == [
        ("g1", "Capital of Japan?", ("Tokyo",)),
        ("g2", "Capital of Peru?", ("Lima",)),
    ]
    assert items[1].source.endswith("wrapped.json:2")


def test_json_list_and_targetless_scorer_override() -> None:
    items = read_items(FIXTURES / "list.json", scorer="exact")
    assert items[0].scorer == "json" and items[0].targets == ()
    assert items[1].targets == ("cat",)


def test_json_object_with_data_list(tmp_path: Path) -> None:
    path = write(tmp_path / "d.json", json.dumps({"data": [{"input": "x", "target": "y"}]}))
    assert read_items(path, scorer="exact")[0].targets == ("y",)


def test_csv_cells_json_lists_and_blank_cells() -> None:
    items = read_items(FIXTURES / "tasks.csv", scorer="exact")
    assert [i.id for i in items] == ["c1", "c2", "c3"]
    assert items[0].targets == ("B", "Apple") and items[0].choices == ("Carrot", "Apple")
    assert items[1].input == "Capital of Italy, in one word?" and items[1].targets == ("Rome",)
    assert items[1].choices == ()  # a blank cell is absent, not an empty choice
    assert items[2].targets == ("299,792",)  # not a JSON list: kept as text
    assert items[0].fields["note"] == "first"
    assert items[0].source.endswith("tasks.csv:2")


def test_promptfoo_rows() -> None:
    items = read_items(FIXTURES / "promptfoo.jsonl", scorer="f1")
    assert items[0].input == "Capital of Spain?"
    assert items[0].targets == ("Madrid",) and items[0].scorer == "exact"
    assert items[1].id == "pf2" and items[1].scorer == "includes"
    assert items[1].targets == ("Eiffel",)
    # The first assert of a supported type counts; llm-rubric is skipped.
    assert items[2].scorer == "regex" and items[2].targets == ("^199\\d$",)
    assert items[0].fields == {"question": "Capital of Spain?"}


def test_promptfoo_without_supported_assert(tmp_path: Path) -> None:
    path = write(
        tmp_path / "p.jsonl",
        jsonl({"vars": {"input": "x"}, "assert": [{"type": "llm-rubric", "value": "nice"}]}),
    )
    assert str(error_of(read_items, path)) == (
        f"{path} line 1 has no supported assert (found llm-rubric; expected equals, contains, "
        "icontains or regex)."
    )


def test_targets_of_various_json_types(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        jsonl(
            {"input": "a", "target": 2.5},
            {"input": "b", "target": True},
            {"input": "c", "expected": {"b": 1, "a": [1, 2]}},
            {"input": "d", "answers": [1, "two", None]},
            {"input": "e", "answers": '["only parsed in CSV cells"]'},
        ),
    )
    items = read_items(path, scorer="exact")
    assert [i.targets for i in items] == [
        ("2.5",),
        ("true",),
        ('{"a": [1, 2], "b": 1}',),
        ("1", "two"),
        ('["only parsed in CSV cells"]',),
    ]


def test_bom_is_stripped(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_bytes("\ufeffinput,target\nhello,world\n".encode())
    assert read_items(path, scorer="exact")[0].fields == {"input": "hello", "target": "world"}


# -- templates ----------------------------------------------------------------------------------


def test_template_is_always_used_when_set(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        jsonl({"input": "ignored?", "question": "Q", "context": "C", "target": "x"}),
    )
    item = read_items(path, input_template="{question}\n\nContext: {context}")[0]
    assert item.input == "Q\n\nContext: C"


def test_template_missing_field_names_file_line_and_field(tmp_path: Path) -> None:
    path = write(
        tmp_path / "t.jsonl",
        jsonl({"question": "Q", "context": "C", "target": "x"}, {"question": "Q2", "target": "y"}),
    )
    err = error_of(read_items, path, input_template="{question} / {context}")
    assert str(err) == (
        f"{path} line 2 has no field 'context' used by input_template '{{question}} / {{context}}'."
    )


def test_template_that_is_not_a_format_string(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", jsonl({"question": "Q", "target": "x"}))
    err = error_of(read_items, path, input_template="{question")
    assert str(err).startswith("input_template '{question' cannot be rendered for ")


# -- ids and hashes -----------------------------------------------------------------------------


def test_content_derived_ids_are_stable(tmp_path: Path) -> None:
    row = {"input": "Opposite of hot?", "expected": "cold"}
    a = read_items(write(tmp_path / "a.jsonl", jsonl(row)), scorer="exact")[0]
    b = read_items(write(tmp_path / "b.jsonl", "\n\n" + jsonl({"note": 1, **row})))[0]
    expected = "t" + content_id({"input": "Opposite of hot?", "targets": ["cold"]})[:10]
    assert a.id == b.id == expected
    c = read_items(write(tmp_path / "c.jsonl", jsonl({**row, "expected": "cool"})))[0]
    assert c.id != a.id


def _separate(tmp_path: Path, train: list[dict], val: list[dict], test: list[dict]) -> TaskSet:
    for name, rows in (("train", train), ("val", val), ("test", test)):
        write(tmp_path / "evals" / f"{name}.jsonl", jsonl(*rows))
    config = TasksConfig(train="evals/train.jsonl", val="evals/val.jsonl", test="evals/test.jsonl")
    return load_taskset(config, tmp_path)


TRAIN = [{"id": "a", "input": "one", "target": "1"}, {"id": "b", "input": "two", "target": "2"}]
VAL = [{"id": "c", "input": "three", "target": "3"}]
TEST = [{"id": "d", "input": "four", "target": "4", "metadata": {"k": 1}}]


def test_hash_is_stable_and_changes_with_content(tmp_path: Path) -> None:
    base = _separate(tmp_path / "1", TRAIN, VAL, TEST)
    again = _separate(tmp_path / "2", TRAIN, VAL, TEST)
    assert base.hash == again.hash and len(base.hash) == 16
    # Extra raw fields that are not content (notes) do not matter.
    noted = _separate(tmp_path / "3", [{**TRAIN[0], "note": "x"}, TRAIN[1]], VAL, TEST)
    assert noted.hash == base.hash
    changes = [
        ([{**TRAIN[0], "target": "one"}, TRAIN[1]], VAL, TEST),  # a target
        ([{**TRAIN[0], "input": "One"}, TRAIN[1]], VAL, TEST),  # an input
        (TRAIN, VAL, [{**TEST[0], "metadata": {"k": 2}}]),  # metadata
        (TRAIN, [{**VAL[0], "id": "c2"}], TEST),  # an id
        (TRAIN, [{**VAL[0], "scorer": "f1"}], TEST),  # the scorer override
        ([TRAIN[0]], [TRAIN[1], *VAL], TEST),  # an item moved to another split
    ]
    hashes = {_separate(tmp_path / f"c{n}", *change).hash for n, change in enumerate(changes)}
    assert base.hash not in hashes and len(hashes) == len(changes)


# -- splits -------------------------------------------------------------------------------------


def test_separate_files_and_split_accessors(tmp_path: Path) -> None:
    ts = _separate(tmp_path, TRAIN, VAL, TEST)
    assert ts.counts() == {"train": 2, "val": 1, "test": 1}
    assert [i.id for i in ts.split("train")] == ["a", "b"]
    assert ts.split("test")[0].source == "evals/test.jsonl:1"
    assert ts.overlaps == () and not ts.allow_overlap
    assert str(error_of(ts.split, "dev")) == "Unknown split 'dev' (expected train, val or test)."


def test_missing_splits_are_empty(tmp_path: Path) -> None:
    write(tmp_path / "train.jsonl", jsonl(*TRAIN))
    ts = load_taskset(TasksConfig(train="train.jsonl"), tmp_path)
    assert ts.counts() == {"train": 2, "val": 0, "test": 0}


def test_one_file_with_split_field() -> None:
    config = TasksConfig(path="with_split.jsonl")
    ts = load_taskset(config, FIXTURES)
    assert [i.id for i in ts.train] == ["s1", "s2"]
    assert [i.id for i in ts.val] == ["s3", "s4"]
    assert [i.id for i in ts.test] == ["s5"]


def test_custom_split_field_and_bad_values(tmp_path: Path) -> None:
    rows = [{"input": "x", "target": "1", "part": "train"}, {"input": "y", "target": "2"}]
    write(tmp_path / "all.jsonl", jsonl(*rows))
    err = error_of(load_taskset, TasksConfig(path="all.jsonl", split_field="part"), tmp_path)
    assert str(err) == "all.jsonl line 2 has no 'part' field, but other rows do."
    write(tmp_path / "all.jsonl", jsonl({"input": "x", "target": "1", "part": "holdout"}))
    err = error_of(load_taskset, TasksConfig(path="all.jsonl", split_field="part"), tmp_path)
    assert str(err) == (
        "all.jsonl line 1 has part 'holdout' (expected one of train, val, validation, dev, test)."
    )


def test_ratio_split_is_deterministic_and_seeded() -> None:
    config = TasksConfig(path="pool.jsonl", split_ratio=[0.6, 0.2, 0.2], split_seed=7)
    first = load_taskset(config, FIXTURES)
    second = load_taskset(config, FIXTURES)
    assert first == second
    assert first.counts() == {"train": 12, "val": 4, "test": 4}
    ids = [i.id for name in ("train", "val", "test") for i in first.split(name)]
    assert sorted(ids) == [f"p{i:02d}" for i in range(20)]
    # Within a split, file order is kept.
    assert [i.id for i in first.train] == sorted(i.id for i in first.train)
    other = load_taskset(dataclasses.replace(config, split_seed=8), FIXTURES)
    assert [i.id for i in other.test] != [i.id for i in first.test]
    assert other.hash != first.hash


def test_ratio_split_pinned_assignment() -> None:
    # Pinned so a change in the shuffle (which would silently move items) fails loudly.
    ts = load_taskset(TasksConfig(path="pool.jsonl", split_seed=0), FIXTURES)
    assert [i.id for i in ts.test] == ["p01", "p08", "p12", "p13"]


@pytest.mark.parametrize(
    ("n", "ratio", "counts"),
    [
        (5, [0.5, 0.5, 0.0], (3, 2, 0)),  # 2.5 rounds half up, not to even
        (5, [0.3, 0.3, 0.4], (2, 1, 2)),  # cuts at 1.5 -> 2 and 3.0 -> 3
        (1, [0.6, 0.2, 0.2], (1, 0, 0)),
        (0, [0.6, 0.2, 0.2], (0, 0, 0)),
    ],
)
def test_ratio_split_counts(
    tmp_path: Path, n: int, ratio: list[float], counts: tuple[int, int, int]
) -> None:
    write(tmp_path / "all.jsonl", jsonl(*[{"input": f"q{i}", "target": "x"} for i in range(n)]))
    ts = load_taskset(TasksConfig(path="all.jsonl", split_ratio=ratio), tmp_path)
    assert tuple(ts.counts().values()) == counts


def test_ratio_split_with_two_numbers_and_bad_ratio(tmp_path: Path) -> None:
    ts = load_taskset(TasksConfig(path="pool.jsonl", split_ratio=[3, 1]), FIXTURES)
    assert ts.counts() == {"train": 15, "val": 5, "test": 0}
    err = error_of(load_taskset, TasksConfig(path="pool.jsonl", split_ratio=[1, -1]), FIXTURES)
    assert "split_ratio [1, -1] must be two or three non-negative numbers" in str(err)


def test_skillopt_split_dir() -> None:
    ts = load_taskset(TasksConfig(skillopt_dir="skillopt"), FIXTURES)
    assert ts.counts() == {"train": 2, "val": 1, "test": 1}
    first = ts.train[0]
    assert first.id == "sq-train-1"
    assert first.input == (
        "Which river flows through Cairo?\n\nContext: Cairo lies on the banks of the Nile."
    )
    assert first.targets == ("Nile", "the Nile River")
    assert first.source == "skillopt/train/items.json:1"
    custom = load_taskset(
        TasksConfig(skillopt_dir="skillopt", input_template="Q: {question}"), FIXTURES
    )
    assert custom.val[0].input == "Q: What is the largest ocean?"


def test_skillopt_dir_missing_split(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "skillopt", tmp_path / "so")
    (tmp_path / "so" / "test" / "items.json").unlink()
    err = error_of(load_taskset, TasksConfig(skillopt_dir="so"), tmp_path)
    assert str(err) == "Task file so/test/items.json does not exist."


def test_config_without_or_with_conflicting_layouts(tmp_path: Path) -> None:
    assert str(error_of(load_taskset, TasksConfig(), tmp_path)) == "No task files are configured."
    err = error_of(load_taskset, TasksConfig(path="a.jsonl", train="b.jsonl"), tmp_path)
    assert str(err) == (
        "[tasks] sets both path and train/val/test; use one way to give the splits."
    )


# -- integrity ----------------------------------------------------------------------------------


def test_duplicate_ids_name_items_and_files(tmp_path: Path) -> None:
    err = error_of(_separate, tmp_path, TRAIN, [{**VAL[0], "id": "a"}], TEST)
    assert str(err) == (
        "The task set has 1 overlap(s): duplicate id 'a' (evals/train.jsonl:1, evals/val.jsonl:1)."
    )
    assert err.hint == DUPLICATE_HINT


def test_cross_split_input_overlap_is_whitespace_normalised(tmp_path: Path) -> None:
    leaked = {"id": "z", "input": "  two\n", "target": "2"}
    err = error_of(_separate, tmp_path, TRAIN, VAL, [TEST[0], leaked])
    assert str(err) == (
        "The task set has 1 overlap(s): same input in 'b' in train (evals/train.jsonl:2), "
        "'z' in test (evals/test.jsonl:2)."
    )


def test_overlap_message_names_at_most_five(tmp_path: Path) -> None:
    train = [{"id": f"x{i}", "input": f"in {i}", "target": "t"} for i in range(7)]
    test = [{"id": f"x{i}", "input": f"other {i}", "target": "t"} for i in range(7)]
    err = error_of(_separate, tmp_path, train, [], test)
    message = str(err)
    assert message.startswith("The task set has 7 overlap(s): duplicate id 'x0' ")
    assert "'x4'" in message and "'x5'" not in message
    assert message.endswith("; and 2 more.")


def test_allow_overlap_loads_and_records(tmp_path: Path) -> None:
    for name, rows in (("train", TRAIN), ("test", [{**TRAIN[0], "id": "a"}])):
        write(tmp_path / f"{name}.jsonl", jsonl(*rows))
    config = TasksConfig(train="train.jsonl", test="test.jsonl", allow_overlap=True)
    ts = load_taskset(config, tmp_path)
    assert ts.allow_overlap and ts.counts() == {"train": 2, "val": 0, "test": 1}
    assert ts.overlaps == (
        "duplicate id 'a' (train.jsonl:1, test.jsonl:1)",
        "same input in 'a' in train (train.jsonl:1), 'a' in test (test.jsonl:1)",
    )


def test_same_input_within_one_split_is_not_an_overlap(tmp_path: Path) -> None:
    ts = _separate(tmp_path, [*TRAIN, {"id": "b2", "input": "two", "target": "2"}], VAL, TEST)
    assert ts.counts()["train"] == 3


# -- bad input: one sentence naming file and line -------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "train.jsonl",
            '{"input": "a", "target": "b"}\n{"input": "c", \n',
            "evals/train.jsonl line 2 is not valid JSON "
            "(Expecting property name enclosed in double quotes at column 16).",
        ),
        (
            "train.jsonl",
            '{"input": "a", "target": "b"}\n\n["c", "d"]\n',
            "evals/train.jsonl line 3 is not a JSON object (it is an array).",
        ),
        (
            "train.jsonl",
            '"just text"\n',
            "evals/train.jsonl line 1 is not a JSON object (it is a string).",
        ),
        (
            "train.jsonl",
            jsonl(*[{"input": f"q{i}", "target": "x"} for i in range(6)], {"input": "q7"}),
            "evals/train.jsonl line 7 has no target "
            "(expected one of target, answer, answers, ideal, expected).",
        ),
        (
            "train.jsonl",
            jsonl({"context": "c", "target": "x"}),
            "evals/train.jsonl line 1 has no input "
            "(expected one of input, question, prompt, query, or set input_template in [tasks]).",
        ),
        (
            "train.json",
            '[{"input": "a", "target": "b"},\n 3]',
            "evals/train.json item 2 is not a JSON object (it is a number).",
        ),
        (
            "train.json",
            '[{"input": "a"\n "target": "b"}]',
            "evals/train.json is not valid JSON (Expecting ',' delimiter at line 2 column 2).",
        ),
        (
            "train.json",
            '{"rows": []}',
            'evals/train.json must hold a list of task objects or an object with an "items" or '
            '"data" list.',
        ),
        (
            "train.csv",
            "input,target\na,b\nc,d,e\n",
            "evals/train.csv line 3 has more cells than the header (2 columns).",
        ),
        (
            "train.csv",
            "input,target\na,b\nc,\n",
            "evals/train.csv line 3 has no target "
            "(expected one of target, answer, answers, ideal, expected).",
        ),
        (
            "train.yaml",
            "- input: a\n",
            "Task file evals/train.yaml has an unknown extension '.yaml' "
            "(expected .jsonl, .json or .csv).",
        ),
        (
            "train.jsonl",
            jsonl({"input": "a", "target": "b", "choices": "A or B"}),
            "evals/train.jsonl line 1 has choices that are not a list.",
        ),
        (
            "train.jsonl",
            jsonl({"input": "a", "target": "b", "metadata": [1]}),
            "evals/train.jsonl line 1 has metadata that is not an object.",
        ),
    ],
)
def test_bad_input_messages(tmp_path: Path, name: str, content: str, message: str) -> None:
    write(tmp_path / "evals" / name, content)
    err = error_of(load_taskset, TasksConfig(train=f"evals/{name}"), tmp_path)
    assert str(err) == message
    assert err.exit_code == 5


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    err = error_of(load_taskset, TasksConfig(train="evals/nope.jsonl"), tmp_path)
    assert str(err) == "Task file evals/nope.jsonl does not exist."
    (tmp_path / "dir.jsonl").mkdir()
    err = error_of(load_taskset, TasksConfig(train="dir.jsonl"), tmp_path)
    assert str(err) == "Task file dir.jsonl is a directory, not a regular file."
    (tmp_path / "latin1.jsonl").write_bytes(b'{"input": "caf\xe9", "target": "x"}\n')
    err = error_of(load_taskset, TasksConfig(train="latin1.jsonl"), tmp_path)
    assert str(err) == "Task file latin1.jsonl is not UTF-8 text (bad byte 0xe9 at offset 14)."


def test_nothing_partial_when_a_later_split_is_bad(tmp_path: Path) -> None:
    write(tmp_path / "train.jsonl", jsonl(*TRAIN))
    write(tmp_path / "test.jsonl", "not json\n")
    with pytest.raises(TaskSetError, match="test.jsonl line 1"):
        load_taskset(TasksConfig(train="train.jsonl", test="test.jsonl"), tmp_path)


def test_targetless_scorer_needs_no_target(tmp_path: Path) -> None:
    write(tmp_path / "t.jsonl", jsonl({"input": "Give JSON."}))
    ts = load_taskset(TasksConfig(train="t.jsonl", scorer="json"), tmp_path)
    assert ts.train[0].targets == ()
    # An item override to a scorer that needs a target still needs one.
    write(tmp_path / "t.jsonl", jsonl({"input": "Give JSON.", "scorer": "exact"}))
    with pytest.raises(TaskSetError, match="line 1 has no target"):
        load_taskset(TasksConfig(train="t.jsonl", scorer="json"), tmp_path)


def test_to_dict_round_trips_through_json() -> None:
    item = TaskItem(id="x", input="in", targets=("a", "b"), choices=("a",), source="f:1")
    data = json.loads(json.dumps(item.to_dict()))
    assert data == {
        "id": "x",
        "input": "in",
        "targets": ["a", "b"],
        "choices": ["a"],
        "metadata": {},
        "scorer": None,
        "fields": {},
        "source": "f:1",
    }


# -- review regressions -------------------------------------------------------------------------


def test_jsonl_strings_may_hold_unicode_line_separators(tmp_path: Path) -> None:
    """JSON allows U+2028, U+0085, \\x1c... unescaped in strings (ensure_ascii=False writes them);
    str.splitlines() would cut the row in two there."""
    text = "a\u2028b \x85c \x1cd \x0be \x0cf"
    rows = [{"id": "x", "input": text, "target": "y"}, {"id": "z", "input": "q", "target": "y"}]
    path = write(
        tmp_path / "t.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows)
    )
    items = read_items(path, scorer="exact")
    assert [i.id for i in items] == ["x", "z"] and items[0].input == text
    assert items[1].source.endswith(":2")


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("t.jsonl", '{"id": "a", "input": "q", "target": ' + "1" * 5000 + "}\n", "limit"),
        ("t.jsonl", "[" * 100_000 + "\n", "nested too deeply"),
        ("t.json", "[" * 100_000, "nested too deeply"),
    ],
)
def test_json_past_the_parser_limits_is_a_task_set_error(
    tmp_path: Path, name: str, text: str, reason: str
) -> None:
    """Not a crash with a traceback: one TaskSetError naming the file (and the line)."""
    error = error_of(read_items, write(tmp_path / name, text), scorer="exact")
    assert str(tmp_path / name) in error.message and reason in error.message


def test_csv_cell_with_a_huge_json_number_is_kept_as_text(tmp_path: Path) -> None:
    path = write(tmp_path / "t.csv", "id,input,answers\na,q,[" + "1" * 5000 + "]\n")
    assert read_items(path, scorer="exact")[0].targets == ("[" + "1" * 5000 + "]",)


def test_blank_input_is_no_input(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", jsonl({"id": "a", "input": "  \n ", "target": "x"}))
    assert "has no input" in error_of(read_items, path, scorer="exact").message
    # A blank field gives way to the next alias.
    path = write(tmp_path / "u.jsonl", jsonl({"input": " ", "question": "Q?", "target": "x"}))
    assert read_items(path, scorer="exact")[0].input == "Q?"


def test_overlap_hint_names_only_settings_that_exist() -> None:
    assert "--allow-overlap" not in OVERLAP_HINT and "allow_overlap = true" in OVERLAP_HINT

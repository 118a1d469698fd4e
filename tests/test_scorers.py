"""Scorers: hand-checked cases for each built-in, the registry and score_item's guarantees."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from skillvc.core.errors import ScorerError
from skillvc.tasks import scorers
from skillvc.tasks.scorers import (
    Score,
    extract_answer,
    get_scorer,
    normalize_answer,
    parse_judge_score,
    parse_numbers,
    register_scorer,
    score_item,
)
from skillvc.tasks.taskset import TARGETLESS_SCORERS, TaskItem


def item(*targets: str, choices: tuple[str, ...] = (), **kw: Any) -> TaskItem:
    return TaskItem(id=kw.pop("id", "i1"), input=kw.pop("input", "Q?"), targets=targets,
                    choices=choices, **kw)  # fmt: skip


def hard(name: str, it: TaskItem, output: str, **options: Any) -> float:
    return get_scorer(name, options).score(it, output).hard


# -- answer text --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("  Paris \n", "Paris"),
        ("Thinking... <answer> Lyon </answer>", "Lyon"),
        ("<answer>A</answer> wait, no: <ANSWER>B</ANSWER> done", "B"),
        ("<answer>multi\nline</answer>", "multi\nline"),
        ("<answer>unclosed", "<answer>unclosed"),
        ("<answer></answer>", ""),
    ],
)
def test_extract_answer(output: str, expected: str) -> None:
    assert extract_answer(output) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Eiffel Tower!", "eiffel tower"),
        ("An apple, a day", "apple day"),
        ("Café", "café"),  # accents are kept
        ("«Bonjour» — ¿qué?", "bonjour qué"),  # unicode punctuation removed
        ("$1,000", "1000"),  # ASCII symbols go too, as in SQuAD
        ("well-known", "wellknown"),
        ("theory", "theory"),  # articles only as whole words
        ("", ""),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


# -- exact / includes / f1 ----------------------------------------------------------------------


def test_exact() -> None:
    it = item("Paris", "City of Light")
    assert hard("exact", it, "paris.") == 1.0
    assert hard("exact", it, "<answer>The city of light</answer>") == 1.0
    assert hard("exact", it, "Paris, France") == 0.0
    assert hard("exact", item("Café"), "cafe") == 0.0
    assert hard("exact", item("Café"), "CAFÉ") == 1.0
    # An empty answer never scores, even against a target that normalises to "".
    assert hard("exact", item("The"), "") == 0.0
    assert hard("exact", item("?"), "<answer> </answer>") == 0.0
    score = get_scorer("exact").score(it, "Lyon")
    assert score == Score(0.0, 0.0, score.detail) and "lyon" in score.detail


def test_includes_matches_whole_words() -> None:
    it = item("Eiffel Tower", "Louvre")
    assert hard("includes", it, "You should see the eiffel tower.") == 1.0
    assert hard("includes", it, "the LOUVRE, obviously") == 1.0
    assert hard("includes", it, "Notre-Dame") == 0.0
    assert hard("includes", item("par"), "a comparison") == 0.0
    assert hard("includes", item("x"), "") == 0.0


def test_f1() -> None:
    scorer = get_scorer("f1")
    # pred tokens: [barack, obama]; gold: [president, barack, obama] -> p=1, r=2/3, f1=0.8
    s = scorer.score(item("President Barack Obama"), "Barack Obama")
    assert s.hard == 0.0 and s.soft == pytest.approx(0.8)
    assert scorer.score(item("Obama", "Barack Obama"), "barack obama").soft == 1.0
    assert scorer.score(item("Obama"), "").soft == 0.0
    lenient = get_scorer("f1", {"threshold": 0.75})
    assert lenient.score(item("President Barack Obama"), "Barack Obama").hard == 1.0


# -- regex --------------------------------------------------------------------------------------


def test_regex_targets_are_patterns() -> None:
    it = item(r"^19\d\d$", r"^20[0-2]\d$")
    assert hard("regex", it, "<answer>1999</answer>") == 1.0
    assert hard("regex", it, "2024") == 1.0
    assert hard("regex", it, "in 1999") == 0.0


def test_regex_option_pattern_with_capture_group() -> None:
    options = {"pattern": r"total: (\d+)"}
    assert hard("regex", item("42"), "total: 7, then total: 42", **options) == 1.0
    assert hard("regex", item("42"), "total: 42, then total: 7", **options) == 0.0  # last wins
    assert hard("regex", item(), "total: 7", **options) == 1.0  # no targets: matching is enough
    assert hard("regex", item("42"), "no total", **options) == 0.0
    named = {"pattern": r"(?:x)=(?P<answer>\w+)"}
    assert hard("regex", item("Yes"), "x=yes", **named) == 1.0


def test_regex_bad_patterns() -> None:
    with pytest.raises(ScorerError, match=r"regex option pattern '\(' is not a valid pattern"):
        get_scorer("regex", {"pattern": "("})
    with pytest.raises(ScorerError, match="failed on item 'i1'"):
        score_item(item("("), "x", get_scorer("regex"))


# -- numeric ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("1,234.5", [1234.5]),
        ("-3 and +4", [-3.0, 4.0]),
        ("1e3", [1000.0]),
        ("$1,000 or -$5", [1000.0, -5.0]),
        ("45%", [45.0]),
        ("\u22122.5", [-2.5]),
        (".5 then 7.", [0.5, 7.0]),
        ("no digits", []),
        ("abc123", []),
    ],
)
def test_parse_numbers(text: str, numbers: list[float]) -> None:
    assert parse_numbers(text) == numbers


def test_numeric() -> None:
    scorer = get_scorer("numeric")
    assert scorer.score(item("1234.5"), "The total is $1,234.50.").hard == 1.0
    # The last number in the answer counts.
    assert scorer.score(item("12"), "3 boxes of 4 make 12").hard == 1.0
    assert scorer.score(item("12"), "12 divided by 4 is 3").hard == 0.0
    s = scorer.score(item("100"), "<answer>90</answer>")
    assert s.hard == 0.0 and s.soft == pytest.approx(0.9)
    assert scorer.score(item("100"), "500").soft == 0.0  # capped at 0
    assert scorer.score(item("0"), "0.5").soft == 0.0
    assert scorer.score(item("7"), "seven").hard == 0.0
    assert scorer.score(item("5", "10"), "10").hard == 1.0  # several acceptable answers
    tolerant = get_scorer("numeric", {"rel_tol": 0.05})
    assert tolerant.score(item("100"), "96").hard == 1.0
    assert tolerant.score(item("100"), "94").hard == 0.0
    with pytest.raises(ScorerError, match="is not one number"):
        score_item(item("about"), "3", scorer)
    with pytest.raises(ScorerError, match="abs_tol of the numeric scorer must be a number"):
        get_scorer("numeric", {"abs_tol": "small"})


# -- choice -------------------------------------------------------------------------------------

CHOICES = ("London", "Paris", "Rome", "Berlin")


@pytest.mark.parametrize(
    ("output", "ok"),
    [
        ("B", True),
        ("(B)", True),
        ("b", True),
        ("Answer: B", True),
        ("I think the answer is (B).", True),
        ("B) Paris", True),
        ("paris", True),
        ("<answer>The answer is Paris</answer>", True),
        ("A", False),
        ("Answer: C", False),
        ("E", False),  # out of range
        ("Paris or Rome", False),  # ambiguous
        ("", False),
    ],
)
def test_choice_outputs(output: str, ok: bool) -> None:
    it = item("B", choices=CHOICES)
    assert hard("choice", it, output) == (1.0 if ok else 0.0)


def test_choice_target_forms() -> None:
    assert hard("choice", item("Paris", choices=CHOICES), "B") == 1.0
    assert hard("choice", item("(D)", choices=CHOICES), "berlin") == 1.0
    assert hard("choice", item("A", "C", choices=CHOICES), "C") == 1.0
    with pytest.raises(ScorerError, match="neither a choice letter nor a choice"):
        score_item(item("Madrid", choices=CHOICES), "A", get_scorer("choice"))
    with pytest.raises(ScorerError, match="needs choices on the item"):
        score_item(item("A"), "A", get_scorer("choice"))


# -- json ---------------------------------------------------------------------------------------

SCHEMA = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}


def test_json_validity_fences_and_equality() -> None:
    scorer = get_scorer("json")
    assert scorer.score(item(), '{"a": 1}') == Score(1.0, 1.0, "valid JSON")
    fenced = 'Here:\n```json\n{"a": [1, 2]}\n```\nDone.'
    assert scorer.score(item('{"a":[1,2]}'), fenced).hard == 1.0
    assert scorer.score(item('{"a": 2}'), '{"a": 1}').soft == 0.5
    assert scorer.score(item("true"), "1").hard == 0.0  # JSON true is not 1
    assert scorer.score(item("1"), "1.0").hard == 1.0
    assert scorer.score(item(), "{oops}").soft == 0.0
    with pytest.raises(ScorerError, match="json target 'Paris' is not valid JSON"):
        score_item(item("Paris"), '"Paris"', scorer)


def test_json_schema_inline_and_from_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scorer = get_scorer("json", {"schema": SCHEMA})
    assert scorer.score(item(), '{"name": "x"}').hard == 1.0
    bad = scorer.score(item(), '{"name": 3}')
    assert (bad.hard, bad.soft) == (0.0, 0.5) and "schema" in bad.detail
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    monkeypatch.chdir(tmp_path)
    from_file = get_scorer("json", {"schema": "schema.json"})
    assert from_file.score(item(), "{}").soft == 0.5
    with pytest.raises(ScorerError, match="not a valid JSON schema"):
        get_scorer("json", {"schema": {"type": 5}})


def test_json_schema_without_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # makes the import fail
    with pytest.raises(ScorerError, match="needs the jsonschema package") as info:
        get_scorer("json", {"schema": SCHEMA})
    assert "pip install" in info.value.hint
    assert get_scorer("json").score(item(), "[]").hard == 1.0  # no schema: no import needed


# -- python -------------------------------------------------------------------------------------


def test_python_scorer_imports_from_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_grader_mod.py").write_text(
        textwrap.dedent(
            """
            def exact(output, item):
                return output.strip() == item.targets[0]

            def half(output, item):
                return 0.5

            def pair(output, item):
                return (1, 0.75)

            def broken(output, item):
                return "yes"
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "my_grader_mod", raising=False)
    path_before = list(sys.path)
    scorer = get_scorer("python", {"function": "my_grader_mod:exact"})
    assert sys.path == path_before
    assert scorer.score(item("x"), " x ") == Score(1.0, 1.0, "")
    assert scorer.score(item("x"), "y").hard == 0.0
    assert get_scorer("python", {"function": "my_grader_mod:half"}).score(item(), "") == Score(
        0.0, 0.5
    )
    assert get_scorer("python", {"function": "my_grader_mod:pair"}).score(item(), "") == Score(
        1.0, 0.75
    )
    with pytest.raises(ScorerError, match="returned 'yes'"):
        score_item(item(), "", get_scorer("python", {"function": "my_grader_mod:broken"}))
    with pytest.raises(ScorerError, match="my_grader_mod:nope is not a callable"):
        get_scorer("python", {"function": "my_grader_mod:nope"})
    with pytest.raises(ScorerError, match="cannot import no_such_mod_xyz"):
        get_scorer("python", {"function": "no_such_mod_xyz:f"})
    with pytest.raises(ScorerError, match='needs option function = "module:function"'):
        get_scorer("python")
    monkeypatch.delitem(sys.modules, "my_grader_mod", raising=False)


# -- command ------------------------------------------------------------------------------------


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "grade.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def test_command_scorer(tmp_path: Path) -> None:
    argv = _script(
        tmp_path,
        """
        import json, os, sys
        out = sys.stdin.read().strip()
        targets = json.loads(os.environ["SKILLVC_TARGETS"])
        item = json.loads(os.environ["SKILLVC_ITEM"])
        if out == "half":
            print("0.5")
        elif out == "text":
            print("looks fine")
        sys.exit(0 if out in targets or out in ("half", "text") else 3)
        """,
    )
    scorer = get_scorer("command", {"argv": argv})
    assert scorer.score(item("ok"), "ok").hard == 1.0
    assert scorer.score(item("ok"), "text") == Score(1.0, 1.0, "looks fine")
    assert scorer.score(item("ok"), "half") == Score(0.0, 0.5, "command score 0.5")
    lenient = get_scorer("command", {"argv": argv, "threshold": 0.5})
    assert lenient.score(item("ok"), "half").hard == 1.0
    failed = scorer.score(item("ok"), "nope")
    assert (failed.hard, failed.soft) == (0.0, 0.0) and "exit code 3" in failed.detail


def test_command_timeout_and_missing_program(tmp_path: Path) -> None:
    argv = _script(tmp_path, "import time\ntime.sleep(5)\n")
    scorer = get_scorer("command", {"argv": argv, "timeout_s": 0.2})
    with pytest.raises(ScorerError, match="took longer than 0.2s"):
        score_item(item("x"), "x", scorer)
    missing = get_scorer("command", {"argv": [str(tmp_path / "no-such-program")]})
    with pytest.raises(ScorerError, match="cannot run"):
        score_item(item("x"), "x", missing)
    with pytest.raises(ScorerError, match="needs option argv"):
        get_scorer("command", {"argv": "grade.sh"})


# -- judge --------------------------------------------------------------------------------------


def test_judge_scorer_prompts_and_parses() -> None:
    calls: list[tuple[str, str]] = []

    def judge(system: str, user: str) -> str:
        calls.append((system, user))
        return "Mostly right but vague.\nSCORE: 0.6"

    scorer = get_scorer("judge", {"rubric": "Be strict about units."}, judge=judge)
    s = scorer.score(item("5 km", input="How far?"), "about 5")
    assert (s.hard, s.soft) == (1.0, 0.6) and "vague" in s.detail
    system, user = calls[0]
    assert "Be strict about units." in system and "SCORE:" in system
    assert "How far?" in user and "- 5 km" in user and "about 5" in user
    strict = get_scorer("judge", {"threshold": 0.9}, judge=judge)
    assert strict.score(item("5 km"), "about 5").hard == 0.0
    # The default threshold is 0.5, inclusive.
    half = get_scorer("judge", judge=lambda s, u: "SCORE: 0.5").score(item("x"), "y")
    assert (half.hard, half.soft) == (1.0, 0.5)
    below = get_scorer("judge", judge=lambda s, u: "SCORE: 0.49").score(item("x"), "y")
    assert below.hard == 0.0


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("SCORE: 1", 1.0),
        ("score: 0.25\n", 0.25),
        ("**SCORE:** 0.5", 0.5),
        ("SCORE: 0.2 ... on reflection\nSCORE: 0.8", 0.8),
        ('{"score": 0.75, "reason": "ok"}', 0.75),
    ],
)
def test_parse_judge_score(reply: str, value: float) -> None:
    assert parse_judge_score(reply) == value


def test_judge_errors() -> None:
    with pytest.raises(ScorerError, match=r"needs a \[judge\] model"):
        get_scorer("judge")
    with pytest.raises(ScorerError, match="no SCORE line"):
        parse_judge_score("Looks good to me.")
    with pytest.raises(ScorerError, match="outside 0..1"):
        parse_judge_score("SCORE: 8")
    scorer = get_scorer("judge", judge=lambda s, u: "I cannot grade this.")
    with pytest.raises(ScorerError, match="Scorer 'judge' failed on item 'i1' \\(the judge's"):
        score_item(item("x"), "y", scorer)


# -- registry and score_item --------------------------------------------------------------------


def test_unknown_scorer_and_option() -> None:
    with pytest.raises(ScorerError) as info:
        get_scorer("exactt")
    assert (str(info.value), info.value.hint) == (
        "Unknown scorer 'exactt'.",
        "Did you mean 'exact'? Set it as [tasks] scorer. docs/tasks.md describes each scorer.",
    )
    with pytest.raises(ScorerError, match="Unknown option 'abs_tol' for the exact scorer"):
        get_scorer("exact", {"abs_tol": 1})


class _Const:
    def __init__(self, name: str, result: Any) -> None:
        self.name, self.result = name, result

    def score(self, item: TaskItem, output: str) -> Any:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scorers, "_REGISTRY", dict(scorers._REGISTRY))
    monkeypatch.setattr(scorers, "_OVERRIDES", {})


@pytest.mark.usefixtures("registry")
def test_plugin_registration_and_needs_target(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Mapping[str, Any]] = []

    def factory(options: Mapping[str, Any], judge: Any) -> _Const:
        built.append(options)
        return _Const("always", Score(1.0, 1.0))

    monkeypatch.setattr("skillvc.tasks.taskset.TARGETLESS_SCORERS", set(TARGETLESS_SCORERS))
    register_scorer("always", factory, needs_target=False)
    from skillvc.tasks import taskset as tasks

    assert "always" in tasks.TARGETLESS_SCORERS
    assert get_scorer("always", {"x": 1}).score(item(), "") == Score(1.0, 1.0)
    assert built == [{"x": 1}]


@pytest.mark.usefixtures("registry")
def test_score_item_uses_and_caches_overrides() -> None:
    built: list[Mapping[str, Any]] = []

    def factory(options: Mapping[str, Any], judge: Any) -> _Const:
        built.append(dict(options))
        return _Const("special", Score(1.0, 0.5, "special"))

    register_scorer("special", factory)
    default = get_scorer("exact")
    options = {"special": {"level": 2}}
    plain = item("x")
    special = item("x", scorer="special")
    assert score_item(plain, "y", default, options).hard == 0.0
    assert score_item(special, "y", default, options).detail == "special"
    assert score_item(special, "z", default, options).detail == "special"
    assert built == [{"level": 2}]  # built once, with its own sub-table
    # An override naming the default scorer uses the default itself.
    assert score_item(item("x", scorer="exact"), "x", default, options).hard == 1.0
    # Sub-tables for overrides are not options of the default scorer.
    assert (
        get_scorer("numeric", {"abs_tol": 0.5, "special": {"level": 2}})
        .score(item("1"), "1.4")
        .hard
        == 1.0
    )


@pytest.mark.usefixtures("registry")
@pytest.mark.parametrize(
    ("result", "message"),
    [
        (
            RuntimeError("boom"),
            "Scorer 'bad' failed on item 'i1' (RuntimeError: boom).",
        ),
        (
            Score(0.5, 0.5),
            "Scorer 'bad' returned Score(hard=0.5, soft=0.5, detail='') for item 'i1' "
            "(expected a Score with hard 0 or 1 and soft in 0..1).",
        ),
        (
            Score(1.0, 1.5),
            "Scorer 'bad' returned Score(hard=1.0, soft=1.5, detail='') for item 'i1' "
            "(expected a Score with hard 0 or 1 and soft in 0..1).",
        ),
        (
            0.7,
            "Scorer 'bad' returned 0.7 for item 'i1' "
            "(expected a Score with hard 0 or 1 and soft in 0..1).",
        ),
    ],
)
def test_score_item_wraps_failures(result: Any, message: str) -> None:
    with pytest.raises(ScorerError) as info:
        score_item(item("x"), "x", _Const("bad", result))
    assert str(info.value) == message


def test_score_item_unknown_override() -> None:
    with pytest.raises(ScorerError, match="Unknown scorer 'nope'"):
        score_item(item("x", scorer="nope"), "x", get_scorer("exact"))


# -- odd model output and infrastructure failures (review regressions) --------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        # A mention of the tag before the answer must not swallow the text up to the answer.
        ("Put it in an <answer> tag. <answer>Paris</answer>", "Paris"),
        ("<answer>draft <answer>Paris</answer> more</answer>", "Paris"),
        (None, ""),
    ],
)
def test_extract_answer_with_stray_or_nested_tags(output: str | None, expected: str) -> None:
    assert extract_answer(output) == expected


def test_exact_scores_the_answer_after_a_mentioned_tag() -> None:
    output = "I will use the <answer> tag as asked.\n<answer>Paris</answer>"
    assert hard("exact", item("Paris"), output) == 1.0


@pytest.mark.parametrize(
    "output",
    ["1" * 5000, "[" * 100_000, '{"a": ' * 50_000],
    ids=["integer-past-the-digit-limit", "deep-array", "deep-object"],
)
def test_json_scorer_scores_unreadable_json_as_wrong_instead_of_crashing(output: str) -> None:
    s = score_item(item(), output, get_scorer("json"))
    assert (s.hard, s.soft) == (0.0, 0.0) and "unreadable JSON" in s.detail


def test_json_scorer_target_past_the_digit_limit_is_a_scorer_error() -> None:
    with pytest.raises(ScorerError, match="is not valid JSON"):
        score_item(item("1" * 5000), "1", get_scorer("json"))


def test_a_failed_judge_call_is_a_backend_error_not_a_scorer_error() -> None:
    """The judge's call failing (auth, retries exhausted) is infrastructure: it keeps its class,
    exit code 6 and hint instead of being dressed up as a broken scorer (exit 5)."""
    from skillvc.core.errors import AuthenticationFailed, BackendError
    from skillvc.models.calls import CallFailed

    def refused(system: str, user: str) -> str:
        raise AuthenticationFailed("anthropic:x refused the key in ANTHROPIC_API_KEY (HTTP 401).")

    def exhausted(system: str, user: str) -> str:
        raise CallFailed("judge call to anthropic:x failed: HTTP 529.")

    for judge, cls in ((refused, AuthenticationFailed), (exhausted, CallFailed)):
        with pytest.raises(cls) as caught:
            score_item(item("x"), "y", get_scorer("judge", judge=judge))
        assert isinstance(caught.value, BackendError)
        assert not isinstance(caught.value, ScorerError)


def test_command_scorer_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    """subprocess.run's timeout kills only the direct child; a grader started through a shell
    (or spawning helpers) must not keep running after the scorer gave up."""
    import os
    import time

    pid_file = tmp_path / "grandchild.pid"
    argv = _script(
        tmp_path,
        f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(60)
        """,
    )
    scorer = get_scorer("command", {"argv": argv, "timeout_s": 1.0})
    with pytest.raises(ScorerError, match="took longer"):
        score_item(item("x"), "x", scorer)
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(grandchild):
        os.kill(grandchild, 9)
        pytest.fail("the scoring command's child outlived the timeout")


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a killed orphan may linger as a zombie until init reaps it
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


@pytest.mark.parametrize("printed", ["7", "-1", "nan"])
def test_command_scorer_number_outside_unit_range_is_an_error(tmp_path: Path, printed: str) -> None:
    """A grader printing "7" (out of 10) must not be read as a pass by its exit code."""
    argv = _script(tmp_path, f"print({printed!r})\n")
    with pytest.raises(ScorerError, match="outside 0..1"):
        score_item(item("x"), "x", get_scorer("command", {"argv": argv}))

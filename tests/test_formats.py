"""Format rules per agent (Agent Skills, Cursor, Copilot, Markdown) and the edit checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from skillvc.skill.edits import Edit, apply_edits
from skillvc.skill.formats import (
    AGENT_SKILL,
    COPILOT,
    CURSOR,
    MARKDOWN,
    Problem,
    check_bytes,
    check_document,
    detect_format,
    new_problems,
    protected_changes,
)
from skillvc.skill.skilldoc import SkillDocument

FIXTURES = Path(__file__).parent / "fixtures" / "skills"
SKILL = "skills/support/SKILL.md"


def doc(text: str) -> SkillDocument:
    return SkillDocument.parse(text)


def skill(name: str = "support", description: str = "Answer support questions.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# Support\n- Be polite.\n"


def messages(path: str, text: str, **kw: int) -> list[str]:
    return [p.message for p in check_document(path, doc(text), **kw)]


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        ("skills/support/SKILL.md", AGENT_SKILL),
        ("SKILL.md", AGENT_SKILL),
        (".cursor/rules/python.mdc", CURSOR),
        (".github/instructions/py.instructions.md", COPILOT),
        ("skill.md", MARKDOWN),
        ("AGENTS.md", MARKDOWN),
        ("prompts/agent.md", MARKDOWN),
    ],
)
def test_format_is_detected_from_the_path(path: str, fmt: str) -> None:
    assert detect_format(path) == fmt


# -- Agent Skills / Claude Code ------------------------------------------------------------


def test_valid_skill_has_no_problems() -> None:
    assert messages(SKILL, skill()) == []
    assert (
        messages("skills/pdf-processing/SKILL.md", (FIXTURES / "claude_code.md").read_text()) == []
    )


def test_skill_needs_frontmatter() -> None:
    assert messages(SKILL, "# Support\n") == [
        f"{SKILL}: a SKILL.md must start with YAML frontmatter holding name and description."
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Support", "frontmatter name 'Support' must be 1-64 characters of a-z, 0-9 and '-'."),
        ("sup_port", "frontmatter name 'sup_port' must be 1-64 characters of a-z, 0-9 and '-'."),
        ("a" * 65, f"frontmatter name '{'a' * 65}' must be 1-64 characters of a-z, 0-9 and '-'."),
        (
            "'-support'",
            "frontmatter name '-support' must not start or end with '-' or contain '--'.",
        ),
        ("support-", "frontmatter name 'support-' must not start or end with '-' or contain '--'."),
        (
            "sup--port",
            "frontmatter name 'sup--port' must not start or end with '-' or contain '--'.",
        ),
        ("12", "frontmatter name must be a string, not a number."),
        ("''", "frontmatter name '' must be 1-64 characters of a-z, 0-9 and '-'."),
    ],
)
def test_skill_name_rules(name: str, message: str) -> None:
    assert messages(SKILL, skill(name=name)) == [f"{SKILL}: {message}"]


def test_skill_name_must_equal_its_directory() -> None:
    assert messages("skills/help/SKILL.md", skill(name="support")) == [
        "skills/help/SKILL.md: frontmatter name 'support' must equal its directory name 'help'."
    ]
    # A SKILL.md at the top of the repository has no directory name to match.
    assert messages("SKILL.md", skill(name="support")) == []
    # 64 characters is the limit, not over it.
    name = "a" * 64
    assert messages(f"skills/{name}/SKILL.md", skill(name=name)) == []


def test_skill_name_and_description_missing() -> None:
    assert messages(SKILL, "---\nlicense: MIT\n---\nbody\n") == [
        f"{SKILL}: frontmatter name is missing.",
        f"{SKILL}: frontmatter description is missing.",
    ]


@pytest.mark.parametrize(
    ("description", "message"),
    [
        ("''", "frontmatter description is empty."),
        ("[a, b]", "frontmatter description must be a string, not a list."),
        ("x" * 1025, "frontmatter description is 1,025 characters, over the limit of 1,024."),
    ],
)
def test_skill_description_rules(description: str, message: str) -> None:
    assert messages(SKILL, skill(description=description)) == [f"{SKILL}: {message}"]


def test_skill_description_of_1024_characters_is_fine() -> None:
    assert messages(SKILL, skill(description="x" * 1024)) == []


def test_skill_unknown_keys_are_allowed() -> None:
    text = "---\nname: support\ndescription: d\nallowed-tools: Read\nmodel: x\n---\nbody\n"
    assert messages(SKILL, text) == []


# -- Cursor ------------------------------------------------------------------------------------

MDC = ".cursor/rules/python.mdc"


def test_valid_cursor_rules() -> None:
    text = (
        '---\ndescription: Python style\nglobs: ["**/*.py", "src/*.pyi"]\n'
        "alwaysApply: false\n---\nx\n"
    )
    assert messages(MDC, text) == []
    # Cursor writes empty values and unquoted globs that YAML alone would read as an alias.
    assert (
        messages(MDC, "---\ndescription:\nglobs: *.py, src/**\nalwaysApply: true\n---\nx\n") == []
    )
    assert messages(MDC, "---\ncustom: 1\n---\nx\n") == []
    assert messages(MDC, "no frontmatter: a manual rule\n") == []


@pytest.mark.parametrize(
    ("frontmatter", "message"),
    [
        ("description: [a]", "frontmatter description must be a string, not a list."),
        ("globs: 3", "frontmatter globs must be a string or a list of strings, not a number."),
        ("globs: [a, 1]", "frontmatter globs must be a string or a list of strings, not a list."),
        (
            "globs: {a: b}",
            "frontmatter globs must be a string or a list of strings, not a mapping.",
        ),
        (
            "alwaysApply: yes please",
            "frontmatter alwaysApply must be true or false, not 'yes please'.",
        ),
        ("alwaysApply: 1", "frontmatter alwaysApply must be true or false, not 1."),
    ],
)
def test_cursor_rules(frontmatter: str, message: str) -> None:
    assert messages(MDC, f"---\n{frontmatter}\n---\nx\n") == [f"{MDC}: {message}"]


def test_cursor_broken_yaml_is_still_reported() -> None:
    assert messages(MDC, "---\ndescription: [x\n---\nx\n") == [
        f"{MDC}: frontmatter is not valid YAML (expected ',' or ']', but got '<stream end>' "
        "on line 2)."
    ]


# -- Copilot -----------------------------------------------------------------------------------

INSTR = ".github/instructions/python.instructions.md"


def test_valid_copilot_instructions() -> None:
    assert messages(INSTR, '---\napplyTo: "**/*.py,**/*.pyi"\n---\nUse type hints.\n') == []
    assert messages(INSTR, "Use type hints.\n") == []


@pytest.mark.parametrize(
    ("value", "shown"),
    [("", "empty"), ("''", "empty"), ("[a, b]", "a list"), ("true", "a boolean")],
)
def test_copilot_apply_to_must_be_a_glob_string(value: str, shown: str) -> None:
    assert messages(INSTR, f"---\napplyTo: {value}\n---\nx\n") == [
        f'{INSTR}: frontmatter applyTo must be a glob string such as "**/*.py", not {shown}.'
    ]


# -- common checks -----------------------------------------------------------------------------


def test_markdown_has_only_common_checks() -> None:
    assert messages("notes/agent.md", "# anything\n") == []
    assert messages("notes/agent.md", "---\nname: Not Checked\n---\nx\n") == []


def test_frontmatter_must_be_valid_yaml_mapping() -> None:
    assert messages("a.md", "---\na: 1\nb: : c\n---\nx\n") == [
        "a.md: frontmatter is not valid YAML (mapping values are not allowed here on line 3)."
    ]
    assert messages("a.md", "---\n- a\n- b\n---\nx\n") == [
        "a.md: frontmatter is a YAML list, not a mapping."
    ]
    # A broken SKILL.md frontmatter is one problem, not one per unreadable field.
    assert [p.rule for p in check_document(SKILL, doc("---\nname: [\n---\nx\n"))] == [
        "frontmatter-yaml"
    ]


def test_protected_marker_problems_are_reported() -> None:
    text = skill() + "<!-- skillvc:protected notes -->\nkeep\n"
    assert messages(SKILL, text) == [
        f"{SKILL}: line 7: region 'notes' is never closed; it protects everything to the end "
        "of the document."
    ]
    stray = skill() + "<!-- /skillvc:protected notes -->\n"
    assert messages(SKILL, stray) == [
        f"{SKILL}: line 7: end marker for 'notes' has no start marker."
    ]


def test_size_budget_default_and_parameter() -> None:
    text = skill() + "x" * 16_000 + "\n"
    size = len(text.encode())
    assert messages(SKILL, text) == [
        f"{SKILL}: the file is {size:,} bytes, over the size budget of 16,000 bytes."
    ]
    assert messages(SKILL, text, max_bytes=size) == []
    assert messages(SKILL, skill(), max_bytes=10) == [
        f"{SKILL}: the file is {len(skill().encode())} bytes, over the size budget of 10 bytes."
    ]


def test_bytes_that_are_not_utf8_are_one_problem() -> None:
    assert check_bytes("a.md", b"caf\xe9\n") == [
        Problem(
            "a.md",
            "encoding",
            "a.md: The skill document is not valid UTF-8 (bad byte at offset 3).",
        )
    ]


# -- new_problems and protected_changes --------------------------------------------------------


def test_new_problems_reports_only_what_the_edit_introduces() -> None:
    before = doc(skill())
    after = doc(skill(name="Support"))
    assert [p.rule for p in new_problems(SKILL, before, after)] == ["skill-name"]
    assert new_problems(SKILL, before, before) == []
    # A problem the document already had is not blamed on the edit.
    assert new_problems(SKILL, after, doc(skill(name="Support") + "more\n")) == []


def test_new_problems_ignores_line_shifts_of_existing_marker_problems() -> None:
    before = doc(skill() + "<!-- skillvc:protected notes -->\nkeep\n")
    result = apply_edits(
        before, [Edit("add", content="- Quote the order number.", anchor="- Be polite.")]
    )
    assert result.document.text != before.text
    assert new_problems(SKILL, before, result.document) == []


def test_new_problems_size_budget() -> None:
    small = doc(skill())
    big = doc(skill() + "x" * 200 + "\n")
    bigger = doc(skill() + "x" * 300 + "\n")
    assert [p.rule for p in new_problems(SKILL, small, big, max_bytes=150)] == ["size-budget"]
    # Already over budget: growing is new, shrinking is not.
    assert [p.rule for p in new_problems(SKILL, big, bigger, max_bytes=150)] == ["size-budget"]
    assert new_problems(SKILL, bigger, big, max_bytes=150) == []


def test_protected_changes() -> None:
    base = skill() + "<!-- skillvc:protected a -->\none\n<!-- /skillvc:protected a -->\n"
    before = doc(base + "<!-- SLOW_UPDATE_START -->\nslow\n<!-- SLOW_UPDATE_END -->\n")
    assert protected_changes(before, before) == []
    # Editable text changes do not count.
    assert protected_changes(before, doc(before.text.replace("Be polite", "Be kind"))) == []
    assert protected_changes(before, doc(before.text.replace("one", "two"))) == ["a"]
    assert protected_changes(before, before.with_region("slow-update", "faster")) == ["slow-update"]
    assert protected_changes(before, before.with_region("new", "hi")) == ["new"]
    vanished = doc(before.text.split("<!-- SLOW_UPDATE_START -->")[0])
    assert protected_changes(before, vanished) == ["slow-update"]
    assert protected_changes(before, doc(skill())) == ["a", "slow-update"]


# -- review regressions -------------------------------------------------------------------------


def test_deeply_nested_frontmatter_is_a_problem_not_a_crash() -> None:
    """PyYAML recurses per nesting level; "[[[[..." thousands deep raised RecursionError out of
    the check (and so out of validate, the pre-commit hook and the training loop)."""
    data = ("---\nname: " + "[" * 5000 + "\n---\n# Body\n").encode()
    problems = check_bytes(SKILL, data)
    assert [p.rule for p in problems] == ["frontmatter-yaml"]
    assert problems[0].message.startswith(f"{SKILL}: ")

"""Bounded edits: each op, every unmatched reason, determinism, ids and diffs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import SAMPLE_SKILL
from hypothesis import given, settings
from hypothesis import strategies as st

from skillvc.core.errors import PatchError
from skillvc.skill.edits import Edit, apply_edits, edits_from_diff, unified_diff
from skillvc.skill.skilldoc import SkillDocument

FIXTURES = Path(__file__).parent / "fixtures" / "skills"


@pytest.fixture
def doc() -> SkillDocument:
    return SkillDocument.parse(SAMPLE_SKILL.encode())


def _one(doc: SkillDocument, edit: Edit) -> SkillDocument:
    result = apply_edits(doc, [edit])
    assert result.unmatched == (), result.unmatched
    assert result.applied == (edit,)
    assert result.changed
    return result.document


# -- ops --------------------------------------------------------------------------------------


def test_replace(doc: SkillDocument) -> None:
    new = _one(doc, Edit("replace", target="- Be polite.", content="- Be polite and brief."))
    assert new.text == doc.text.replace("- Be polite.\n", "- Be polite and brief.\n")


def test_delete_whole_line_takes_its_newline(doc: SkillDocument) -> None:
    new = _one(doc, Edit("delete", target="- Be polite."))
    assert "## Rules\n- Quote the order number.\n" in new.text


def test_delete_collapses_blank_lines() -> None:
    doc = SkillDocument.parse("# T\n\nFirst.\n\nDrop me.\n\nLast.\n")
    new = _one(doc, Edit("delete", target="Drop me.\n"))
    assert new.text == "# T\n\nFirst.\n\nLast.\n"


def test_add_at_end_goes_before_trailing_protected_region(doc: SkillDocument) -> None:
    new = _one(doc, Edit("add", content="## Shipping\n- Ships in 2 days."))
    expected = doc.text.replace(
        "\n<!-- SLOW_UPDATE_START -->",
        "\n## Shipping\n- Ships in 2 days.\n\n<!-- SLOW_UPDATE_START -->",
    )
    assert new.text == expected
    old_region, new_region = doc.region("slow-update"), new.region("slow-update")
    assert old_region is not None and new_region is not None
    assert new_region.content == old_region.content


def test_add_at_end_of_document_keeps_one_blank_line() -> None:
    doc = SkillDocument.parse("# T\nlast line")
    new = _one(doc, Edit("add", content="New paragraph."))
    assert new.text == "# T\nlast line\n\nNew paragraph.\n"


def test_add_after_heading_anchor(doc: SkillDocument) -> None:
    new = _one(doc, Edit("add", anchor="## Rules", content="- Greet the customer by name."))
    assert "## Rules\n- Greet the customer by name.\n- Be polite.\n" in new.text


def test_add_anchor_falls_back_to_containing_line(doc: SkillDocument) -> None:
    new = _one(doc, Edit("add", anchor="order number", content="- Never guess it."))
    assert "- Quote the order number.\n- Never guess it.\n" in new.text


def test_edits_apply_in_order_against_previous_result(doc: SkillDocument) -> None:
    edits = [
        Edit("replace", target="- Be polite.", content="- Be kind."),
        Edit("replace", target="- Be kind.", content="- Be kind and brief."),
    ]
    result = apply_edits(doc, edits)
    assert result.applied == tuple(edits)
    assert "- Be kind and brief.\n" in result.document.text


def test_stripped_target_fallback(doc: SkillDocument) -> None:
    new = _one(
        doc, Edit("replace", target="\n\n- Be polite.  \n\n", content="\n\n- Be nice.  \n\n")
    )
    assert "## Rules\n- Be nice.\n- Quote" in new.text


# -- unmatched --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (Edit("replace", target="- Be rude.", content="x"), "missing"),
        (Edit("delete", target="nowhere to be found"), "missing"),
        (Edit("add", anchor="## Nonexistent", content="x"), "missing"),
        (Edit("replace", target="- ", content="* "), "ambiguous"),
        (Edit("add", anchor="- ", content="x"), "ambiguous"),
        (Edit("replace", target="Acme store", content="Acme shop"), "frontmatter"),
        (Edit("delete", target="name: support"), "frontmatter"),
        (Edit("replace", target="Keep answers short.", content="Be long."), "protected"),
        (Edit("add", anchor="Keep answers short.", content="x"), "protected"),
        (Edit("delete", target="<!-- SLOW_UPDATE_END -->"), "protected"),
        # Overlapping the region's start marker counts as protected too.
        (Edit("replace", target="number.\n\n<!-- SLOW", content="x"), "protected"),
        (Edit("replace", target="- Be polite.", content="- Be polite."), "no-op"),
        # Creating a marker or a frontmatter delimiter in editable text is refused.
        (
            Edit("replace", target="- Be polite.", content="<!-- skillvc:protected x -->"),
            "protected",
        ),
        (Edit("add", content="<!-- SLOW_UPDATE_END -->"), "protected"),
    ],
)
def test_unmatched_reasons_leave_document_unchanged(
    doc: SkillDocument, edit: Edit, reason: str
) -> None:
    result = apply_edits(doc, [edit])
    assert result.applied == ()
    assert [u.reason for u in result.unmatched] == [reason]
    assert result.unmatched[0].edit == edit
    assert result.unmatched[0].detail.endswith(".")
    assert result.document.render() == doc.render()
    assert not result.changed


def test_ambiguous_detail_counts_occurrences() -> None:
    doc = SkillDocument.parse("# T\n- same\n- same\n")
    result = apply_edits(doc, [Edit("delete", target="- same")])
    assert result.unmatched[0].reason == "ambiguous"
    assert "2 times" in result.unmatched[0].detail


def test_creating_frontmatter_is_refused() -> None:
    doc = SkillDocument.parse("--\ntitle: x\n---\n# Body\n")
    result = apply_edits(doc, [Edit("replace", target="--\ntitle", content="---\ntitle")])
    assert [u.reason for u in result.unmatched] == ["protected"]


def test_unmatched_edit_does_not_block_later_edits(doc: SkillDocument) -> None:
    edits = [
        Edit("replace", target="- Be rude.", content="x"),
        Edit("replace", target="- Be polite.", content="- Be kind."),
    ]
    result = apply_edits(doc, edits)
    assert result.applied == (edits[1],)
    assert [u.edit for u in result.unmatched] == [edits[0]]


# -- encoding, determinism, ids ---------------------------------------------------------------


def test_crlf_and_bom_survive_edits() -> None:
    data = (FIXTURES / "crlf_bom.md").read_bytes()
    doc = SkillDocument.parse(data)
    edits = [
        Edit(
            "replace", target="Run `build.ps1 -Release`.", content="Run `build.ps1 -Release -Sign`."
        ),
        Edit("add", anchor="## Rules", content="- Keep the certificate\r\n  off laptops."),
        Edit("add", content="## Notes\nTag the release after signing."),
    ]
    result = apply_edits(doc, edits)
    assert result.unmatched == ()
    out = result.document.render()
    assert out.startswith(b"\xef\xbb\xbf---\r\n")
    assert b"\n" not in out.replace(b"\r\n", b"")
    assert b"-Release -Sign`.\r\n" in out
    assert b"## Rules\r\n- Keep the certificate\r\n  off laptops.\r\n- Never sign" in out
    assert out.endswith(b"\r\n\r\n## Notes\r\nTag the release after signing.\r\n")


def test_apply_is_deterministic() -> None:
    data = (FIXTURES / "skillvc_protected.md").read_bytes()
    edits = [
        Edit("add", anchor="## Checklist", content="- Review every `DROP`."),
        Edit("replace", target="has a lock timeout", content="sets `lock_timeout`"),
        Edit("delete", target="two releases"),
    ]
    runs = [apply_edits(SkillDocument.parse(data), edits) for _ in range(3)]
    assert len({r.document.render() for r in runs}) == 1
    assert [u.reason for u in runs[0].unmatched] == ["protected"]
    assert runs[0].document.region("policy") == SkillDocument.parse(data).region("policy")


def test_edit_id_is_stable_and_ignores_rationale() -> None:
    a = Edit("replace", target="x", content="y", rationale="because")
    b = Edit("replace", target="x", content="y", rationale="another reason")
    assert a.id == b.id
    assert len(a.id) == 16
    assert a.id == Edit("replace", target="x", content="y").id
    assert a.id != Edit("replace", target="x", content="z").id
    assert Edit("add", content="y").id != Edit("add", content="y", anchor="## A").id


def test_to_dict_from_dict_round_trip() -> None:
    edit = Edit("add", content="- New.", anchor="## Rules", rationale="fails item 3")
    data = edit.to_dict()
    assert data == {
        "id": edit.id,
        "op": "add",
        "target": "",
        "content": "- New.",
        "anchor": "## Rules",
        "rationale": "fails item 3",
    }
    assert Edit.from_dict(data) == edit


def test_from_dict_aliases() -> None:
    edit = Edit.from_dict(
        {"type": "replace", "old": "a", "new": "b", "reason": "why", "id": "ignored"}
    )
    assert edit == Edit("replace", target="a", content="b", rationale="why")
    added = Edit.from_dict({"action": "ADD", "new": "c", "after": "## H"})
    assert added == Edit("add", content="c", anchor="## H")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"op": "rewrite", "target": "a", "content": "b"}, "Unknown edit op"),
        ({"content": "b"}, "needs an op"),
        ({"op": "replace", "content": "b"}, "non-empty target"),
        ({"op": "delete"}, "non-empty target"),
        ({"op": "add"}, "non-empty content"),
        ({"op": "replace", "target": "a"}, "non-empty content"),
        ({"op": "add", "content": 3}, "must be a string"),
    ],
)
def test_from_dict_validation(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Edit.from_dict(data)


# -- diffs ------------------------------------------------------------------------------------

DIFF_CASES = {
    "replace line": ("# T\na\nb\nc\n", "# T\na\nB\nc\n"),
    "add final newline": ("# T\nlast", "# T\nlast\n"),
    "remove final newline": ("# T\nlast\n", "# T\nlast"),
    "change last line without newline": ("# T\n\nx\nlast", "# T\n\nx\nLAST"),
    "two hunks": (
        "".join(f"line {i}\n" for i in range(30)),
        "".join(f"line {i}\n" for i in range(30))
        .replace("line 2\n", "line two\n")
        .replace("line 25\n", "line 25\nextra\n"),
    ),
    "repetitive text": ("- x\n- x\n- x\n- x\n", "- x\n- x\n- y\n- x\n"),
    "insert at top": ("# T\nbody\n", "intro\n# T\nbody\n"),
    "delete lines": ("# T\n\nA\n\nB\n\nC\n", "# T\n\nA\n\nC\n"),
    "next to a protected region": (SAMPLE_SKILL, SAMPLE_SKILL.replace("- Quote", "- Always quote")),
    "empty document": ("", "# New skill\n"),
}


@pytest.mark.parametrize("case", sorted(DIFF_CASES))
def test_diff_round_trips_through_edits(case: str) -> None:
    before_text, after_text = DIFF_CASES[case]
    before, after = SkillDocument.parse(before_text), SkillDocument.parse(after_text)
    diff = unified_diff(before, after)
    assert diff.startswith("--- a/SKILL.md\n+++ b/SKILL.md\n@@ ")
    edits = edits_from_diff(diff, before)
    result = apply_edits(before, edits)
    assert result.unmatched == ()
    assert result.document.text == after.text


@pytest.mark.parametrize("case", sorted(DIFF_CASES))
def test_unified_diff_applies_with_git_apply(case: str, tmp_path: Path) -> None:
    before_text, after_text = DIFF_CASES[case]
    before, after = SkillDocument.parse(before_text), SkillDocument.parse(after_text)
    (tmp_path / "SKILL.md").write_bytes(before.render())
    (tmp_path / "change.patch").write_text(unified_diff(before, after))
    subprocess.run(["git", "apply", "change.patch"], cwd=tmp_path, check=True)
    assert (tmp_path / "SKILL.md").read_bytes() == after.render()


# Few distinct lines, so hunks are often repeated elsewhere and need widened context.
_LINES = st.lists(st.sampled_from(["a\n", "b\n", "\n", "- x\n", "# H\n", "tail"]), max_size=25)


@settings(max_examples=300, deadline=None)
@given(before_lines=_LINES.filter(lambda ls: "".join(ls).strip()), after_lines=_LINES)
def test_diff_round_trip_property(before_lines: list[str], after_lines: list[str]) -> None:
    def text(lines: list[str]) -> str:
        # "tail" has no newline; it may only end the document.
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines[:-1]) + (
            lines[-1] if lines else ""
        )

    before, after = SkillDocument.parse(text(before_lines)), SkillDocument.parse(text(after_lines))
    diff = unified_diff(before, after)
    if before.text == after.text:
        assert diff == ""
        return
    result = apply_edits(before, edits_from_diff(diff, before))
    assert result.unmatched == ()
    assert result.document.text == after.text


def test_diff_of_fixture_edits_round_trips() -> None:
    for name in ("claude_code.md", "unicode.md", "no_final_newline.md", "crlf_bom.md"):
        before = SkillDocument.parse((FIXTURES / name).read_bytes())
        last = before.body.rstrip("\n").rsplit("\n", 1)[-1]
        after = apply_edits(before, [Edit("replace", target=last, content=last + " (edited)")])
        assert after.changed, name
        edits = edits_from_diff(unified_diff(before, after.document), before)
        assert apply_edits(before, edits).document.render() == after.document.render()


def test_unified_diff_of_equal_documents_is_empty() -> None:
    doc = SkillDocument.parse("# T\n")
    assert unified_diff(doc, doc.with_text("# T\n")) == ""


def test_no_newline_marker_in_diff() -> None:
    before, after = SkillDocument.parse("a\nb"), SkillDocument.parse("a\nc")
    assert unified_diff(before, after) == (
        "--- a/SKILL.md\n+++ b/SKILL.md\n@@ -1,2 +1,2 @@\n a\n-b\n"
        "\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
    )


def test_hand_written_diff(doc: SkillDocument) -> None:
    diff = """diff --git a/skills/support/SKILL.md b/skills/support/SKILL.md
--- a/skills/support/SKILL.md
+++ b/skills/support/SKILL.md
@@ -7,4 +7,5 @@
 ## Rules
 - Be polite.
+- Confirm the shipping address.
 - Quote the order number.

"""
    edits = edits_from_diff(diff, doc)
    # A pure addition is an add after the line before it, not a replace of that line.
    assert edits == [
        Edit("add", content="- Confirm the shipping address.\n", anchor="- Be polite.")
    ]
    result = apply_edits(doc, edits)
    assert result.unmatched == ()
    assert "- Be polite.\n- Confirm the shipping address.\n- Quote" in result.document.text


def test_diff_touching_protected_region_is_refused(doc: SkillDocument) -> None:
    after = doc.with_text(doc.text.replace("Keep answers short.", "Keep answers long."))
    edits = edits_from_diff(unified_diff(doc, after), doc)
    result = apply_edits(doc, edits)
    assert [u.reason for u in result.unmatched] == ["protected"]
    assert result.document.text == doc.text


@pytest.mark.parametrize(
    "diff",
    [
        "this is not a diff at all\n",
        "",
        "--- a/SKILL.md\n+++ b/SKILL.md\n@@ -1,3 +1,3 @@\n a\n-b\n",  # hunk shorter than header
        "--- a/A.md\n+++ b/A.md\n@@ -1 +1 @@\n-a\n+b\n"
        "--- a/B.md\n+++ b/B.md\n@@ -1 +1 @@\n-a\n+b\n",
    ],
)
def test_patch_error_on_garbage(diff: str) -> None:
    with pytest.raises(PatchError):
        edits_from_diff(diff, SkillDocument.parse("a\nb\nc\n"))


def test_shifted_hunk_is_located_only_when_unique() -> None:
    doc = SkillDocument.parse("# T\nintro\n\n- a\n- b\n- c\n")
    # The header says line 1, but the block is at line 4; it is unique, so it is found.
    diff = "--- a/SKILL.md\n+++ b/SKILL.md\n@@ -1,2 +1,2 @@\n - a\n-- b\n+- B\n"
    result = apply_edits(doc, edits_from_diff(diff, doc))
    assert result.document.text == "# T\nintro\n\n- a\n- B\n- c\n"


def test_add_that_only_duplicates_existing_lines_is_a_no_op() -> None:
    doc = SkillDocument.parse(b"# Skill\n\n## Rules\n- Be polite.\n- Quote the order.\n")
    result = apply_edits(doc, [Edit("add", content="- Be polite.", anchor="## Rules")])
    assert [u.reason for u in result.unmatched] == ["no-op"]
    assert result.document.render() == doc.render()
    partly_new = apply_edits(doc, [Edit("add", content="- Be polite.\n- Be brief.")])
    assert partly_new.applied and b"- Be brief." in partly_new.document.render()


def test_mixed_line_endings_diff_round_trips_and_crlf_targets_match() -> None:
    # A file with mixed endings keeps its "\r\n" in text; normalising the edit's "\r\n" away
    # made every target spanning such a line "missing" and broke edits_from_diff.
    data = b"# Title\r\n\r\n- rule one\r\n- rule two\n- rule three\n"
    doc = SkillDocument.parse(data)
    assert doc.newline == "\n" and "\r\n" in doc.text
    after = doc.with_text(doc.text.replace("- rule one\r\n", "- rule 1\r\n- rule 1b\r\n"))
    edits = edits_from_diff(unified_diff(doc, after), doc)
    result = apply_edits(doc, edits)
    assert result.unmatched == ()
    assert result.document.render() == after.render()
    spanning = Edit("replace", target="- rule one\r\n- rule two", content="- rules")
    out = apply_edits(doc, [spanning])
    assert out.unmatched == ()
    assert out.document.render() == b"# Title\r\n\r\n- rules\n- rule three\n"

"""SkillDocument: exact round trips, frontmatter, protected regions, slow-update regions."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillvc.core.errors import SkillDocumentError
from skillvc.skill.skilldoc import SkillDocument

FIXTURES = Path(__file__).parent / "fixtures" / "skills"

PIECES = st.sampled_from(
    [
        "---\n",
        "...\n",
        "---",
        "\n",
        "\r\n",
        "\r",
        "# Title\n",
        "- item ",
        "name: x\n",
        "key: [unclosed\n",
        "<!-- SLOW_UPDATE_START -->",
        "<!-- SLOW_UPDATE_END -->",
        "<!-- skillvc:protected a -->",
        "<!--skillvc:protected   b.c-->",
        "<!-- /skillvc:protected a -->",
        "<!-- /skillvc:protected b.c -->",
        "\ufeff",
        "é日本🙂",
    ]
)
TEXT = st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=30).map("".join)


def _fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


@settings(max_examples=400, deadline=None)
@given(text=TEXT, bom=st.booleans())
def test_render_round_trips_any_text(text: str, bom: bool) -> None:
    data = (("\ufeff" if bom else "") + text).encode("utf-8", "surrogatepass")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return  # hypothesis text may hold lone surrogates, which are not UTF-8
    doc = SkillDocument.parse(data)
    assert doc.render() == data
    # The parts are consistent with the bytes, not a stored copy of them.
    assert doc.body == doc.text[doc.frontmatter_end :]
    assert doc.with_text(doc.text).render() == data


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_render_round_trips_any_utf8_bytes(data: bytes) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(SkillDocumentError):
            SkillDocument.parse(data)
        return
    assert SkillDocument.parse(data).render() == data


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.md")))
def test_fixtures_round_trip_exactly(name: str) -> None:
    data = _fixture(name)
    doc = SkillDocument.parse(data)
    assert doc.render() == data
    assert doc.sha() == SkillDocument.parse(data).sha()


def test_render_is_built_from_parts() -> None:
    doc = SkillDocument.parse(b"# A\r\nb\r\n")
    assert doc.text == "# A\nb\n"
    assert doc.newline == "\r\n"
    assert doc.with_text("# A\nc\n").render() == b"# A\r\nc\r\n"


def test_claude_code_skill_frontmatter() -> None:
    doc = SkillDocument.parse(_fixture("claude_code.md"))
    assert doc.frontmatter is not None
    assert doc.frontmatter["name"] == "pdf-processing"
    assert doc.frontmatter["allowed-tools"] == "Read, Grep, Glob, Bash"
    assert doc.frontmatter_error is None
    assert doc.body.startswith("# PDF Processing\n")
    assert doc.text[: doc.frontmatter_end].endswith("---\n")
    assert doc.regions == ()
    assert doc.problems == ()
    assert doc.editable_spans() == [(doc.frontmatter_end, len(doc.text))]


def test_crlf_bom_fixture() -> None:
    data = _fixture("crlf_bom.md")
    doc = SkillDocument.parse(data)
    assert doc.bom is True
    assert doc.newline == "\r\n"
    assert "\r" not in doc.text
    assert doc.text.startswith("---\nname: windows-release\n")
    assert doc.frontmatter == {
        "name": "windows-release",
        "description": "Build and sign the Windows installer for a release.",
    }
    assert doc.render() == data


def test_no_final_newline_fixture() -> None:
    doc = SkillDocument.parse(_fixture("no_final_newline.md"))
    assert doc.frontmatter is not None
    assert doc.frontmatter["name"] == "commit-messages"
    assert doc.text.endswith("in the body.")
    assert doc.newline == "\n"


def test_skillopt_slow_update_region() -> None:
    doc = SkillDocument.parse(_fixture("skillopt_slow_update.md"))
    region = doc.region("slow-update")
    assert region is not None
    assert region.style == "skillopt"
    assert doc.text[region.start : region.content_start] == "<!-- SLOW_UPDATE_START -->"
    assert doc.text[region.content_end : region.end] == "<!-- SLOW_UPDATE_END -->"
    assert region.content.startswith("\nLessons from epoch 3:\n")
    assert doc.problems == ()
    spans = doc.editable_spans()
    assert spans == [(doc.frontmatter_end, region.start), (region.end, len(doc.text))]


def test_skillvc_regions_with_flexible_whitespace() -> None:
    doc = SkillDocument.parse(_fixture("skillvc_protected.md"))
    assert [r.name for r in doc.regions] == ["policy", "glossary.v2"]
    assert all(r.style == "skillvc" for r in doc.regions)
    assert doc.frontmatter is not None
    assert doc.frontmatter["metadata"] == {"owner": "data-platform", "version": 3}
    policy = doc.region("policy")
    assert policy is not None and "two releases" in policy.content
    assert doc.region("missing") is None
    for start, end in doc.editable_spans():
        assert "skillvc:protected" not in doc.text[start:end]
        assert "two releases" not in doc.text[start:end]


def test_unicode_fixture() -> None:
    data = _fixture("unicode.md")
    doc = SkillDocument.parse(data)
    assert doc.frontmatter is not None
    assert doc.frontmatter["name"] == "übersetzung"
    assert "「」" in doc.body
    assert doc.render() == data


def test_invalid_yaml_sets_frontmatter_error() -> None:
    doc = SkillDocument.parse(_fixture("invalid_yaml.md"))
    assert doc.frontmatter is None
    assert doc.frontmatter_error is not None
    assert "YAML" in doc.frontmatter_error
    assert doc.body.startswith("# Broken frontmatter")


def test_frontmatter_that_is_not_a_mapping() -> None:
    doc = SkillDocument.parse("---\n- a\n- b\n---\nbody\n")
    assert doc.frontmatter is None
    assert doc.frontmatter_error is not None and "mapping" in doc.frontmatter_error


@pytest.mark.parametrize(
    ("text", "end"),
    [
        ("---\nname: x\n---\nbody\n", 16),
        ("---\nname: x\n...\nbody\n", 16),
        ("---\nname: x\n---", 15),
        ("---\n---\n", 8),
        ("--- \nname: x\n---\n", 0),  # the opening line must be exactly ---
        ("\n---\nname: x\n---\n", 0),  # only at the very start
        ("---\nname: x\n", 0),  # never closed
        ("---", 0),
    ],
)
def test_frontmatter_detection(text: str, end: int) -> None:
    doc = SkillDocument.parse(text)
    assert doc.frontmatter_end == end
    assert (doc.frontmatter is not None or doc.frontmatter_error is not None) == bool(end)


def test_markers_in_frontmatter_are_ignored() -> None:
    doc = SkillDocument.parse("---\nnote: <!-- SLOW_UPDATE_START -->\n---\nbody\n")
    assert doc.regions == ()
    assert doc.problems == ()


def test_unclosed_start_marker_protects_to_end() -> None:
    text = "# T\n<!-- skillvc:protected keep -->\nsecret\n"
    doc = SkillDocument.parse(text)
    region = doc.region("keep")
    assert region is not None
    assert region.end == len(text) and not region.closed
    assert doc.editable_spans() == [(0, region.start)]
    assert any("never closed" in p for p in doc.problems)


def test_stray_end_marker_is_a_problem() -> None:
    doc = SkillDocument.parse("# T\n<!-- SLOW_UPDATE_END -->\n")
    assert doc.regions == ()
    assert len(doc.problems) == 1 and "no start marker" in doc.problems[0]


def test_non_utf8_raises() -> None:
    with pytest.raises(SkillDocumentError):
        SkillDocument.parse(b"# Title\n\xff\xfe bad\n")


def test_mixed_newlines_are_kept_verbatim() -> None:
    data = b"a\r\nb\nc\rd\r\n"
    doc = SkillDocument.parse(data)
    assert doc.newline == "\n"
    assert doc.text == data.decode()
    assert doc.render() == data


def test_with_region_replaces_skillopt_region_keeping_markers() -> None:
    doc = SkillDocument.parse(_fixture("skillopt_slow_update.md"))
    new = doc.with_region("slow-update", "Lessons from epoch 4:\n- Check tracking first.\n")
    region = new.region("slow-update")
    assert region is not None and region.style == "skillopt"
    assert region.content == "\nLessons from epoch 4:\n- Check tracking first.\n"
    assert "<!-- SLOW_UPDATE_START -->" in new.text
    assert "<!-- skillvc:protected" not in new.text
    # Everything outside the region is untouched.
    old = doc.region("slow-update")
    assert old is not None
    assert new.text[: region.content_start] == doc.text[: old.content_start]
    assert new.text[region.content_end :] == doc.text[old.content_end :]


def test_with_region_appends_new_region_and_keeps_crlf_bom() -> None:
    data = _fixture("crlf_bom.md")
    doc = SkillDocument.parse(data)
    new = doc.with_region("slow-update", "Sign on the build machine only.")
    assert new.text.startswith(doc.text + "\n<!-- skillvc:protected slow-update -->\n")
    assert new.text.endswith("<!-- /skillvc:protected slow-update -->\n")
    region = new.region("slow-update")
    assert region is not None and region.style == "skillvc"
    assert region.content == "\nSign on the build machine only.\n"
    rendered = new.render()
    assert rendered.startswith(b"\xef\xbb\xbf---\r\n")
    assert b"\n" not in rendered.replace(b"\r\n", b"")
    assert SkillDocument.parse(rendered).region("slow-update") == region


def test_with_region_appends_after_text_without_final_newline() -> None:
    doc = SkillDocument.parse("# T\nlast line")
    new = doc.with_region("notes", "kept")
    expected = (
        "# T\nlast line\n\n"
        "<!-- skillvc:protected notes -->\nkept\n<!-- /skillvc:protected notes -->\n"
    )
    assert new.text == expected


def test_with_region_closes_an_unclosed_region() -> None:
    doc = SkillDocument.parse("# T\n<!-- skillvc:protected keep -->\nold\n")
    new = doc.with_region("keep", "new")
    assert new.problems == ()
    region = new.region("keep")
    assert region is not None and region.closed and region.content == "\nnew\n"


def test_with_region_rejects_markers_in_content() -> None:
    doc = SkillDocument.parse("# T\n")
    with pytest.raises(SkillDocumentError):
        doc.with_region("x", "<!-- SLOW_UPDATE_END -->")
    with pytest.raises(SkillDocumentError):
        doc.with_region("bad name", "text")

"""One glossary: `skillvc help terms` and docs/glossary.md say the same, and every word of
skillvc's summaries that a newcomer may not know is in it."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from skillvc.cli import cli
from skillvc.cli.commands.demo import OWN_SKILL
from skillvc.cli.glossary import markdown, terms

ROOT = Path(__file__).resolve().parent.parent


def test_docs_glossary_is_generated_from_the_one_in_the_package() -> None:
    expected = markdown()
    # Stale? Regenerate it with skillvc.cli.glossary.markdown().
    assert (ROOT / "docs/glossary.md").read_text(encoding="utf-8") == expected


def test_help_terms_prints_every_term_within_80_columns() -> None:
    result = CliRunner().invoke(cli, ["help", "terms"])
    assert result.exit_code == 0, result.output
    for term, _also, meaning in terms():
        assert f"  {term}" in result.stdout
        assert meaning.split()[0] in result.stdout
    assert max(map(len, result.stdout.splitlines())) <= 80


def test_the_words_of_summaries_and_the_log_are_explained() -> None:
    """The words issue 24 found unexplained, each under a term or its other names."""
    names = " | ".join(f"{term}, {also}" for term, also, _ in terms())
    for word in (
        "slow update",
        "no candidate",
        "without a candidate",
        "speculation",
        "<=0.900",
        "at most",
        "flipped",
        "fixed",
        "broken",
        "unmatched",
        "not applied",
        "no-op",
        "answered from the log",
        "made earlier",
        "gate",
        "val",
        "p-value",
    ):
        assert word in names, word


def test_help_without_a_topic_lists_the_topics_and_commands() -> None:
    result = CliRunner().invoke(cli, ["help"])
    assert result.exit_code == 0, result.output
    assert "Commands:" in result.stdout and "terms" in result.stdout
    unknown = CliRunner().invoke(cli, ["help", "nope"])
    assert unknown.exit_code == 2 and "'nope' is not 'terms'" in unknown.output


def test_the_demo_ends_with_how_to_start_on_your_own_skill(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "acme"), "--quiet"])
    assert result.exit_code == 0, result.output
    ending = "\n".join(OWN_SKILL)
    assert result.stdout.rstrip("\n").endswith(ending)
    for step in ("skillvc init --skill", "--train", "--target", "skillvc doctor", "skillvc train"):
        assert step in ending

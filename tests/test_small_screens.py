"""Small screens (issue 45, item 8) and the HTML report's verdict (item 1), as a reader sees them:
the report laid out by real headless Chromium at 390 px (a phone) and 1280 px, and the terminal
commands under an 80-column pseudo-terminal."""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from skillvc.cli import cli
from skillvc.training.demo import create_demo_repo
from tests.test_curves import CHROMIUM
from tests.test_terminal import in_terminal, rows

CHROMIUM_NEEDED = "needs Debian's chromium (apt-get install chromium)"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo trained (attribution on: its gates' alpha is 0.2)."""
    root = tmp_path_factory.mktemp("small") / "repo"
    create_demo_repo(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        result = CliRunner().invoke(cli, ["train", "-q"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return root


def invoke(root: Path, *args: str) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def between(root: Path) -> dict:
    """The accepted step with 0.1 < p <= its alpha 0.2 (the demo's step 2: p = 0.109), which
    the HTML report called "not significant" at a fixed 0.1."""
    [entry] = [
        e
        for e in json.loads(invoke(root, "log", "--json"))
        if e["decision"] == "accepted" and e["p_value"] is not None and 0.1 < e["p_value"] <= 0.2
    ]
    assert entry["alpha"] == 0.2
    return entry


# What each frame reports: the step's p-value cell and heading as rendered text, and the sizes
# that matter on a phone. A tap on the step's point (a click: a phone's tap is one) must bring
# its row up, highlighted.
PROBE = """
const probe = (f, step) => {
  const d = f.contentDocument;
  const row = d.getElementById('step-' + step);
  const cell = row.cells[5];
  const heading = Array.from(d.querySelectorAll('h3'))
    .find(h => h.textContent.startsWith('Step ' + step + ' '));
  const chart = Array.from(d.querySelectorAll('svg.curve'))
    .find(s => s.getBoundingClientRect().width > 0);
  const fonts = Array.from(chart.querySelectorAll('text'),
    t => t.getBoundingClientRect().height);
  const table = d.querySelector('table.steps');
  const before = getComputedStyle(row.cells[0]).backgroundColor;
  const point = chart.querySelector('a[href="#step-' + step + '"]');
  point.focus();
  const focused = d.activeElement === point;
  point.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}));
  return new Promise(done => setTimeout(() => done({
    inner: f.contentWindow.innerWidth,
    scroll: d.documentElement.scrollWidth,
    cell: cell.innerText,
    cellHeight: cell.getBoundingClientRect().height,
    stepHeight: row.cells[0].getBoundingClientRect().height,
    heading: heading.innerText,
    charts: d.querySelectorAll('svg.curve').length,
    chartWidth: chart.getBoundingClientRect().width,
    smallestText: Math.min(...fonts),
    tableHeight: table.getBoundingClientRect().height,
    tableRows: table.rows.length,
    focused: focused,
    before: before,
    after: getComputedStyle(row.cells[0]).backgroundColor,
    hash: f.contentWindow.location.hash,
  }), 200));
};
"""


def lay_out(page: Path, step: int, tmp_path: Path) -> dict[int, dict]:
    """The page in a 390-px and a 1280-px frame (a headless window is at least 500 px wide),
    one Chromium run for both."""
    # src, not srcdoc: the points' "#step-N" links resolve against the page's own address.
    frames = "".join(
        f'<iframe id="f{w}" style="width:{w}px;height:900px;border:0" '
        f'src="{html.escape(page.resolve().as_uri(), quote=True)}"></iframe>'
        for w in (390, 1280)
    )
    host = tmp_path / "host.html"
    host.write_text(
        f'<!doctype html><html><body style="margin:0">{frames}<script>{PROBE}'
        "let left = 2; const seen = {};"
        "for (const w of [390, 1280]) { const f = document.getElementById('f' + w);"
        f" f.onload = async () => {{ seen[w] = await probe(f, {step}); if (--left === 0)"
        " document.body.dataset.seen = JSON.stringify(seen); }; }"
        "</script></body></html>"
    )
    dom = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--allow-file-access-from-files",  # the host page reads the frames' documents
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1700,900",
            "--virtual-time-budget=5000",
            "--dump-dom",
            host.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    seen = json.loads(html.unescape(re.search(r'data-seen="([^"]*)"', dom).group(1)))
    return {int(w): v for w, v in seen.items()}


@pytest.mark.skipif(CHROMIUM is None, reason=CHROMIUM_NEEDED)
def test_the_html_report_states_the_verdict_and_fits_a_phone(demo: Path, tmp_path: Path) -> None:
    entry = between(demo)
    page = tmp_path / "run.html"
    invoke(demo, "report", "--html", str(page))
    said = f"p = {entry['p_value']:.3g}, significant (alpha 0.2)"
    seen = lay_out(page, entry["step"], tmp_path)
    for width, s in seen.items():
        assert s["inner"] == width and s["scroll"] <= width, (width, s)  # no sideways page
        # One verdict, the one `log`, `blame` and `train` give, in the table and the heading.
        assert s["cell"] == said, (width, s["cell"])
        assert s["heading"].endswith(f", {said})"), (width, s["heading"])
        # On one line: as tall as the row's "step 2" cell (it broke across lines at 390).
        assert s["cellHeight"] == s["stepHeight"], (width, s)
        # A row a line high, "(stopped early after 8 of 30)" included (1,300 px at 390).
        assert s["tableHeight"] <= 30 * s["tableRows"], (width, s)
        # The chart shown keeps its text readable (about 4 px at 390) and fits the page.
        assert s["charts"] == 2 and 0 < s["chartWidth"] <= width - 16, (width, s)
        assert s["smallestText"] >= 10, (width, s)
        # A point takes focus and a tap: it goes to the step's row, which lights up.
        assert s["focused"] and s["hash"] == f"#step-{entry['step']}", (width, s)
        assert s["before"] != s["after"] == "rgb(255, 248, 197)", (width, s)


def test_runs_says_which_columns_80_columns_hide(demo: Path) -> None:
    shown = rows(in_terminal(["runs"], demo, columns=80))
    assert all(len(row) <= 80 for row in shown), shown
    header = shown[0].split()
    assert "best" in header and "base" in header  # "val best" keeps "val base" beside it
    note = " ".join(row for row in shown if row).split("Hidden to fit 80 columns: ", 1)[1]
    assert note.startswith(
        "steps, slow upd a/r, test base, test best, calls, tokens, val per step (a wider "
        "terminal shows them; --json and --csv have every column)."
    ), note
    # A terminal wide enough hides nothing and says nothing.
    assert "Hidden" not in in_terminal(["runs"], demo, columns=200)


def test_show_call_marks_wrapped_rows_instead_of_indenting_them(demo: Path) -> None:
    call = json.loads(invoke(demo, "calls", "--json", "-n", "1", "--role", "optimizer"))[0]
    shown = rows(in_terminal(["show", str(call["id"]), "--no-pager"], demo, columns=80))
    assert all(len(row) <= 80 for row in shown)
    body = shown[shown.index("## System") + 2 : shown.index("## User")]
    system = json.loads(invoke(demo, "show", str(call["id"]), "--json"))["call"]["messages"][0]
    lines = system["content"].rstrip("\n").split("\n")
    assert any(len(line) > 80 for line in lines)  # the check can tell
    # Every row is a line of the prompt or its continuation, which says so.
    rebuilt: list[str] = []
    for row in body[:-1]:
        if row.startswith("↪ "):
            rebuilt[-1] += " " + row[2:]
        else:
            assert not row.startswith(" ") or row in lines, row  # no row indented by the wrap
            rebuilt.append(row)
    assert rebuilt == lines

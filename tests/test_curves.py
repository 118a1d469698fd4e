"""Curves, the HTML report, honest views and counts, on a trained demo repository."""

from __future__ import annotations

import html
import json
import math
import os
import re
import shutil
import stat
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
import sqlite_utils
from click.testing import CliRunner

from skillvc.cli import cli
from skillvc.core.migrations import MIGRATIONS, VIEWS
from skillvc.core.store import open_store
from skillvc.models.usage import run_usage
from skillvc.review.runs import usage_by_phase
from skillvc.tasks.scorers import metric_value
from skillvc.training.demo import create_demo_repo
from skillvc.training.loop import RunSummary, train
from skillvc.workspace.workspace import open_workspace

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunSummary]:
    root = tmp_path_factory.mktemp("curves") / "repo"
    create_demo_repo(root)
    # The paper's bundle gate, which accepts any strict gain: the report must mark the gains
    # chance explains (attribution's gates accept only significant ones).
    return root, train(open_workspace(root), overrides={"train": {"attribution": False}})


@pytest.fixture
def repo(trained, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, RunSummary]:
    monkeypatch.chdir(trained[0])  # read-only use: nothing here writes to the repository
    return trained


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def query(path: Path, sql: str, params: tuple = ()) -> list[dict]:
    with open_store(path / ".skillvc" / "events.db") as store:
        return store.query(sql, params)


# -- the Mermaid chart ---------------------------------------------------------------------


def mermaid_block(markdown: str) -> tuple[list[str], list[list[float]]]:
    block = re.search(r"```mermaid\n(.*?)\n```", markdown, re.S).group(1)
    lines = block.splitlines()
    assert lines[0].startswith("%%{init: ") and lines[1] == "xychart-beta"  # colours, then it
    labels = json.loads(re.search(r'x-axis "step" (\[.*\])', block).group(1))
    series = [json.loads(m) for m in re.findall(r"^\s+line (\[.*\])$", block, re.M)]
    return labels, series


def test_report_has_a_mermaid_chart_of_the_event_logs_numbers(repo) -> None:
    path, summary = repo
    labels, (val, train_mean, test_start, test_end) = mermaid_block(invoke("report"))
    assert labels == [str(i) for i in range(summary.steps + 1)]
    assert all(len(line) == summary.steps + 1 for line in (val, train_mean, test_start, test_end))
    assert val[0] == round(summary.baseline_val, 4) and val[-1] == round(summary.best_val, 4)
    assert test_start == [round(summary.baseline_test, 4)] * (summary.steps + 1)
    assert test_end == [round(summary.test, 4)] * (summary.steps + 1)
    # Each gate compares against the val score the curve shows for the step before it.
    for gate in query(path, "SELECT step, val_before FROM gates WHERE kind = 'step'"):
        assert val[gate["step"] - 1] == round(gate["val_before"], 4)
    # The train line is the mean score of each step's own batch, from the rollouts view.
    metric = summary_metric(path)
    for step in range(1, summary.steps + 1):
        rows = query(
            path, "SELECT hard, soft FROM rollouts WHERE split = 'train' AND step = ?", (step,)
        )
        batch = json.loads(
            query(
                path,
                "SELECT payload FROM events WHERE type = 'step.started' AND step = ?",
                (step,),
            )[0]["payload"]
        )["batch"]
        if len(rows) == len(batch):  # every item was rolled out in the step itself
            expected = math.fsum(metric_value(r["hard"], r["soft"], metric) for r in rows)
            assert train_mean[step] == round(expected / len(rows), 4)
    assert train_mean[0] == train_mean[1]  # step 1's batch ran the baseline skill


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two #rrggbb colours."""

    def luminance(colour: str) -> float:
        rgb = [int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted([luminance(a), luminance(b)], reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_mermaid_lines_are_readable_in_githubs_light_and_dark_themes_with_a_legend(repo) -> None:
    markdown = invoke("report")
    block = re.search(r"```mermaid\n(.*?)\n```", markdown, re.S).group(1)
    init = json.loads(re.match(r"%%\{init: (.*)\}%%", block.splitlines()[0]).group(1))
    palette = init["themeVariables"]["xyChart"]["plotColorPalette"].split(", ")
    _, series = mermaid_block(markdown)
    assert len(palette) == len(series) == 4  # one colour per line, in the lines' order
    for colour in palette:  # WCAG's 3:1 for graphics, on GitHub's light and dark pages
        assert contrast(colour, "#ffffff") >= 3 and contrast(colour, "#0d1117") >= 3, colour
    legend = re.search(r"^Legend: (.*)\.$", markdown, re.M).group(1).split(" · ")
    assert [item.split(" ", 1)[1] for item in legend] == [
        "val",
        "train batch mean",
        "test at start",
        "test at end",
    ]
    assert len({item.split(" ", 1)[0] for item in legend}) == 4  # four different squares


def test_report_names_kept_commits_by_full_sha_so_github_links_them(repo) -> None:
    path, _ = repo
    markdown = invoke("report")
    kept = {
        g["sha"]
        for g in query(
            path,
            "SELECT commit_sha AS sha, decision FROM gates WHERE run_id = "
            "(SELECT run_id FROM gates ORDER BY event_id DESC LIMIT 1)",
        )
        if g["decision"] in ("accepted", "forced")
    }
    bare = set(re.findall(r"(?<![`\w])[0-9a-f]{40}(?![`\w])", markdown))
    assert kept and bare == kept  # bare (a code span is not linked), each kept one


def summary_metric(path: Path) -> str:
    return query(path, "SELECT DISTINCT metric FROM gates")[0]["metric"]


def test_report_json_flag_is_format_json_and_holds_the_curve(repo) -> None:
    _, summary = repo
    data = json.loads(invoke("report", "--json"))
    assert data == json.loads(invoke("report", "--format", "json"))
    points = data["curve"]["points"]
    assert [p["step"] for p in points] == list(range(summary.steps + 1))
    assert points[-1]["val"] == summary.best_val


def test_report_shows_p_values_and_marks_the_ones_chance_explains(repo) -> None:
    path, _ = repo
    out = invoke("report")
    accepted = query(
        path, "SELECT step, p_value FROM gates WHERE kind = 'step' AND decision = 'accepted'"
    )
    for gate in accepted:
        row = next(line for line in out.splitlines() if line.startswith(f"| step {gate['step']} |"))
        # The paper's gate records no alpha: its gains are judged at report's 0.1.
        if gate["p_value"] > 0.1:
            assert f"| ⚠ p = {gate['p_value']:.3g}, within noise (alpha 0.1) |" in row
        else:
            assert f"| p = {gate['p_value']:.3g}, significant (alpha 0.1) |" in row
    # The paper's gate accepts a step within noise in the demo (p = 0.31: 3 items up, 1 down).
    assert any(gate["p_value"] > 0.1 for gate in accepted)
    assert "⚠ p = " in out


def test_runs_shows_a_sparkline_of_val_per_step(repo) -> None:
    _, summary = repo
    out = invoke("runs")
    data = json.loads(invoke("runs", "--json"))[0]
    assert len(data["val_curve"]) == summary.steps + 1
    spark = "".join("▁▂▃▄▅▆▇█"[round(v * 7)] for v in data["val_curve"])
    assert out.splitlines()[0].endswith("val per step")
    assert out.splitlines()[2].endswith(spark)


# -- the HTML page -------------------------------------------------------------------------


def test_html_report_is_one_self_contained_page(repo, tmp_path: Path) -> None:
    _, summary = repo
    page_path = tmp_path / "run.html"
    result = CliRunner().invoke(cli, ["report", "--html", str(page_path)])
    assert result.exit_code == 0 and result.stdout == ""
    page = page_path.read_text()
    # The curve twice, drawn for a wide screen and for a phone (the page's CSS shows one).
    wide = page.split('<div class="wide"><svg class="curve"', 1)[1].split("</svg>", 1)[0]
    assert page.count('<svg class="curve"') == 2
    assert wide.count('<g class="point ') == summary.steps + 1  # one point per step, and 0
    assert wide.count('<g class="point accepted"') == summary.accepted
    assert wide.count('<g class="point rejected"') == summary.rejected
    assert wide.count('<g class="slow ') == summary.slow_updates_accepted + (
        summary.slow_updates_rejected
    )
    assert not re.search(r"https?://", page)
    for loader in ("<script", "<link", "<img", "<iframe", "src=", "@import", "url("):
        assert loader not in page
    assert page.count('<pre class="diff">') >= summary.accepted
    assert "⚠ p = " in page and "within noise (alpha 0.1)" in page
    assert not list(tmp_path.glob("*.partial"))


def test_html_report_refuses_a_target_it_cannot_or_must_not_replace(repo, tmp_path: Path) -> None:
    """The page is renamed into place: over /dev/null (as root) or a FIFO that replaced the
    special file with a page; a missing directory or an unwritable place crashed (exit 70)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, code, message in [
        (fifo, 2, f"Error: Invalid value for '--html': {fifo} is not a regular file."),
        (
            tmp_path / "missing" / "run.html",
            2,
            f"Error: Invalid value for '--html': the directory '{tmp_path / 'missing'}' does "
            "not exist.",
        ),
        (
            Path("/proc/skillvc-run.html"),
            1,
            "Error: Cannot write /proc/skillvc-run.html: No such file or directory.",
        ),
    ]:
        result = CliRunner().invoke(cli, ["report", "--html", str(target)])
        assert result.exit_code == code, result.output
        assert message in result.stderr.splitlines()
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert not (tmp_path / "fifo.partial").exists()


def test_html_report_escapes_everything_from_the_log(repo) -> None:
    from skillvc.review.htmlreport import render_html
    from skillvc.review.report import run_report

    path, _ = repo
    with open_workspace(path).store() as store:
        report = run_report(store, None, "SKILL.md")
    hostile = "<script src='https://evil.example/x.js'></script>"
    step = next(s for s in report["steps"] if s["decision"] == "accepted")
    step["edits"][0]["rationale"] = hostile
    step["patch"] += f"+{hostile}\n"
    page = render_html(report)
    assert "<script" not in page
    assert page.count("&lt;script src=&#x27;https://evil.example/x.js&#x27;&gt;") == 2
    # The only http(s) text left is the escaped one.
    assert re.findall(r"https?://[^&]*", page) == ["https://evil.example/x.js"] * 2


def png_pixels(png: bytes) -> tuple[int, int, list[bytes]]:
    """Rows of RGB(A) pixels of a PNG (8-bit, no interlace), decoded with zlib alone."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = data
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


def colours(png: bytes) -> set[tuple[int, int, int]]:
    width, bpp, rows = png_pixels(png)
    return {tuple(row[x * bpp : x * bpp + 3]) for row in rows for x in range(width)}


def screenshot(chromium: str, page: Path, tmp_path: Path) -> bytes:
    shot = tmp_path / f"{page.stem}.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,900",
            page.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return shot.read_bytes()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_html_report_renders_in_headless_chromium(repo, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    page = tmp_path / "run.html"
    invoke("report", "--html", str(page))
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><html><body></body></html>")
    seen = colours(screenshot(CHROMIUM, page, tmp_path))
    assert len(colours(screenshot(CHROMIUM, blank, tmp_path))) == 1  # the check can tell
    assert len(seen) > 50
    # The markers' own colours: accepted steps (green dots) and rejected ones (red crosses).
    assert (0x1A, 0x7F, 0x37) in seen and (0xCF, 0x22, 0x2E) in seen


def measure(chromium: str, frames: list[tuple[Path, int]], tmp_path: Path) -> list[dict]:
    """Each (page, width) laid out in a viewport ``width`` px wide (an iframe: a headless
    window is at least 500 px), all in one Chromium run: per frame its document's
    scrollWidth, the viewport's width and the chart's width."""
    host = tmp_path / "host.html"
    iframes = "".join(
        f'<iframe id="f{i}" style="display:block;width:{width}px;height:900px;border:0" '
        f'srcdoc="{html.escape(page.read_text(), quote=True)}"></iframe>'
        for i, (page, width) in enumerate(frames)
    )
    host.write_text(
        f'<!doctype html><html><body style="margin:0">{iframes}<script>'
        f"const seen = []; let left = {len(frames)};"
        f"for (let i = 0; i < {len(frames)}; i++) {{ const f = document.getElementById('f' + i);"
        " f.onload = () => { const d = f.contentDocument;"
        " seen[i] = {scroll: d.documentElement.scrollWidth, inner: f.contentWindow.innerWidth,"
        " chart: Math.max(...Array.from(d.querySelectorAll('svg.curve'),"
        " s => s.getBoundingClientRect().width))};"
        " if (--left === 0) document.body.dataset.measure = JSON.stringify(seen); }; }"
        "</script></body></html>"
    )
    dom = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1400,900",
            "--dump-dom",
            host.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    return json.loads(html.unescape(re.search(r'data-measure="([^"]*)"', dom).group(1)))


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_html_report_has_no_horizontal_overflow_on_a_phone_or_a_desktop(repo, tmp_path) -> None:
    assert CHROMIUM is not None
    page = tmp_path / "run.html"
    invoke("report", "--html", str(page))
    # The check can tell: the same page with a fixed-width chart, the wide one even on a
    # phone, overflows there (measured in the same Chromium run as the page itself).
    fixed = tmp_path / "fixed.html"
    fixed.write_text(
        page.read_text()
        .replace("max-width: 100%; height: auto;", "")
        .replace(".wide { display: none; } .narrow { display: block; }", "")
    )
    *pages, overflowing = measure(CHROMIUM, [(page, 390), (page, 1280), (fixed, 390)], tmp_path)
    for width, seen in zip((390, 1280), pages, strict=True):
        assert seen["inner"] == width
        assert seen["scroll"] <= width, (width, seen)  # nothing sticks out sideways
        assert 0 < seen["chart"] <= width - 16  # the chart scales into the page's margins
    assert overflowing["inner"] == 390 and overflowing["scroll"] > 390


# -- honest views --------------------------------------------------------------------------


def test_views_give_null_for_early_stopped_gates_and_the_bound_that_decided(repo) -> None:
    path, _ = repo
    gates = query(path, "SELECT * FROM gates")
    payloads = {
        r["id"]: json.loads(r["payload"])
        for r in query(path, "SELECT id, payload FROM events WHERE type = 'gate'")
    }
    early = [g for g in gates if g["early_stopped"]]
    assert early and any(not g["early_stopped"] for g in gates)
    for g in gates:
        p = payloads[g["event_id"]]
        assert g["val_after_bound"] == p["after"]["bound"]
        assert g["evaluated"] == p["after"]["n"]
        assert g["p_value"] == p["p_value"]
        assert (g["flipped_up"], g["flipped_down"]) == (
            len(p["flipped"]["gained"]),
            len(p["flipped"]["lost"]),
        )
        if g["early_stopped"]:
            assert g["val_after"] is None and g["evaluated"] < g["n"]
        else:
            assert g["val_after"] == p["after"]["mean"]
    rejected = query(path, "SELECT DISTINCT gate_event_id, val_after FROM rejected_edits")
    early_ids = {g["event_id"] for g in early}
    assert all(r["val_after"] is None for r in rejected if r["gate_event_id"] in early_ids)


def test_rollouts_and_model_calls_views_join_the_texts(repo) -> None:
    path, _ = repo
    rollout = query(path, "SELECT * FROM rollouts WHERE split = 'val' LIMIT 1")[0]
    payload = json.loads(
        query(path, "SELECT payload FROM events WHERE id = ?", (rollout["event_id"],))[0]["payload"]
    )
    blob = query(path, "SELECT content FROM blobs WHERE hash = ?", (payload["output"],))
    assert rollout["answer"] == blob[0]["content"] and "<answer>" in rollout["answer"]
    assert rollout["task_id"] == payload["item"] and rollout["error"] is None
    call = query(path, "SELECT * FROM model_calls WHERE role = 'optimizer' LIMIT 1")[0]
    assert json.loads(call["prompt"])[0]["role"] in ("system", "user")
    assert (
        call["response"]
        == query(path, "SELECT content FROM blobs WHERE hash = ?", (call["response_blob"],))[0][
            "content"
        ]
    )


def test_an_old_log_gets_the_new_views_by_migration(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    db = sqlite_utils.Database(path)
    MIGRATIONS.apply(db, stop_before="m002_honest_views")
    db.execute("PRAGMA user_version=1")
    gate = {
        "kind": "step",
        "decision": "rejected",
        "before": {"mean": 0.8, "n": 10},
        "after": {"mean": 0.125, "n": 8, "bound": 0.767},
        "early_stopped": True,
        "flipped": {"gained": ["a"], "lost": ["b", "c"]},
        "edits": [{"id": "e1", "op": "add", "content": "x"}],
    }
    db.execute(
        "INSERT INTO events (type, payload, run_id, seq, step, created_at) "
        "VALUES ('gate', ?, 'r1', 1, 1, 'now')",
        [json.dumps(gate)],
    )
    db.conn.commit()
    assert db.execute("SELECT val_after FROM gates").fetchone()[0] == 0.125  # the old view
    db.conn.close()
    with open_store(path) as store:
        row = store.query("SELECT * FROM rejected_edits")[0]
    assert (row["val_after"], row["val_after_bound"], row["evaluated"]) == (None, 0.767, 8)
    assert (row["flipped_up"], row["flipped_down"]) == (1, 2)


def readme_view_columns() -> dict[str, list[str]]:
    # The README or the page of docs/ that holds the views' table.
    readme = "\n".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    table = readme.split("| view | one row per | columns |", 1)[1].split("\n\n", 1)[0]
    out = {}
    for line in table.splitlines()[2:]:
        name, _, columns = (c.strip() for c in line.strip("|").split("|"))
        out[name.strip("`")] = columns.strip("`")
    return {k: [c.strip() for c in v.split(",")] for k, v in out.items() if "," in v}


def test_readme_and_datasette_metadata_document_every_view_column(tmp_path: Path) -> None:
    from skillvc.integrations.datasette_app import COLUMNS

    with open_store(tmp_path / "events.db") as store:
        actual = {
            v: [r["name"] for r in store.query(f"SELECT name FROM pragma_table_info('{v}')")]
            for v in VIEWS
        }
    documented = readme_view_columns()
    for view, columns in actual.items():
        if view in documented:
            assert documented[view] == columns, view
        assert set(columns) <= set(COLUMNS), (view, set(columns) - set(COLUMNS))
    assert set(documented) | {"accepted_edits", "rejected_edits"} >= set(actual)


# -- counts --------------------------------------------------------------------------------


def test_train_runs_and_report_agree_on_counts_tokens_and_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = CliRunner().invoke(cli, ["demo", "--dir", str(tmp_path / "d"), "--quiet"])
    assert result.exit_code == 0, result.output
    head = result.stdout.splitlines()  # the summary `train` prints
    path = tmp_path / "d"
    monkeypatch.chdir(path)
    with open_workspace(path).store() as store:
        (run,) = store.query("SELECT run_id FROM runs")
        usage = run_usage(store, run["run_id"])
        phases = usage_by_phase(store, run["run_id"])
    assert sum(p.usage.tokens for p in phases) == usage.tokens
    assert sum(p.usage.calls for p in phases) == usage.calls
    (row,) = json.loads(invoke("runs", "--json"))
    report = json.loads(invoke("report", "--json"))
    counts = report["counts"]
    assert counts == {k: row[k] for k in counts}
    assert (row["tokens"], row["calls"], row["cost_usd"]) == (
        usage.tokens,
        usage.calls,
        usage.known_cost,
    )
    assert report["usage"] == {
        "calls": usage.calls,
        "tokens": usage.tokens,
        "cost_usd": usage.known_cost,
        "unpriced_calls": 0,
        "cached_tokens": 0,  # the simulator has no prompt cache
        "cache_hit_ratio": 0.0,
    }
    empty = row["steps"] - row["accepted"] - row["rejected"]
    changes = "change" if row["accepted"] == 1 else "changes"
    assert head[0] == (
        f"run {row['run']} finished after {row['steps']} steps: {row['accepted']} {changes} "
        f"kept, {row['rejected']} tried and refused (they did not beat the current skill on "
        f"val), {empty} steps with nothing to try"
    )
    assert head[1] == (
        f"epoch-end reviews (slow updates): {row['slow_updates_accepted']} kept, "
        f"{row['slow_updates_rejected']} refused"
    )
    calls = next(line for line in head if line.startswith("model calls "))
    assert f"({usage.calls} made by this run, " in calls
    assert f"tokens {usage.tokens:,}, cost ${usage.cost_usd:.4f}" in calls
    assert row["slow_updates"] == row["slow_updates_accepted"] + row["slow_updates_rejected"]


def test_runs_view_counts_steps_and_slow_updates_apart(repo) -> None:
    path, summary = repo
    (row,) = query(path, "SELECT * FROM runs")
    assert (row["steps"], row["accepted"], row["rejected"]) == (
        summary.steps,
        summary.accepted,
        summary.rejected,
    )
    assert (row["slow_updates_accepted"], row["slow_updates_rejected"]) == (
        summary.slow_updates_accepted,
        summary.slow_updates_rejected,
    )

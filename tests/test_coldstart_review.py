"""``skillvc review`` in real headless Chromium (one browser for every check): approve, reject,
edit and label with the keyboard, the 390 px layout, and the server's refusals (no token,
another origin, a DNS-rebinding Host, a file outside the repository)."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest
from cdp import CHROMIUM, Browser
from click.testing import CliRunner
from conftest import git
from loopback import LoopbackServer, chat_messages
from test_coldstart_draft import DRAFTED, SKILL

from skillvc.cli import cli
from skillvc.coldstart.server import ReviewServer
from skillvc.workspace.workspace import open_workspace


def run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result


def respond(body: dict[str, Any]) -> str:
    text = "\n".join(str(m["content"]) for m in chat_messages(body))
    if "skillvc-prompt: draft_tasks" in text:
        return json.dumps({"items": DRAFTED})
    if "You grade the output" in text:
        return "SCORE: 1"
    return "Acme GmbH; 2024-118; 1200.00; 19%"


@pytest.fixture
def drafted(git_repo: Path, loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    skill = git_repo / "skills" / "invoices" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-loopback")
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.url + "/v1")
    monkeypatch.chdir(git_repo)
    run("init", "--target", "openai:target-model", "--optimizer", "openai:drafter")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "skill")
    loopback.responder = respond
    run("tasks", "draft", "-n", "8", "-q")
    return git_repo


def rows(root: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for split in ("train", "val", "test"):
        for line in (root / "evals" / f"{split}.jsonl").read_text().splitlines():
            row = json.loads(line)
            out[row["id"]] = row
    return out


def events(root: Path, type: str) -> list[dict[str, Any]]:
    with open_workspace(root).store() as store:
        return [dict(e.payload) for e in store.events(types=[type])]


def request(
    server: ReviewServer, method: str, path: str, body: Any = None, **headers: str
) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    sent = {"Host": f"127.0.0.1:{server.port}"} | headers
    data = None if body is None else json.dumps(body)
    if data is not None:
        sent["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=sent)
    response = conn.getresponse()
    answer = json.loads(response.read() or b"{}")
    conn.close()
    return response.status, answer


def test_the_servers_refusals(drafted: Path) -> None:
    server = ReviewServer(open_workspace()).start()
    try:
        token = {"X-Skillvc-Review": server.token}
        origin = {"Origin": server.origin}
        first = next(iter(rows(drafted)))
        assert request(server, "GET", "/api/items", **token)[0] == 200
        status, answer = request(server, "GET", "/api/items")
        assert (status, answer["error"]) == (
            403,
            "The review page needs the token printed by 'skillvc review'.",
        )
        assert request(server, "GET", "/?review=wrong")[0] == 403
        # DNS rebinding: a name that resolves to 127.0.0.1 is still not this page's host.
        status, answer = request(
            server, "GET", "/api/items", Host=f"evil.example:{server.port}", **token
        )
        assert status == 403 and "Host" in answer["error"]
        decision = {"id": first, "decision": "approve"}
        status, answer = request(
            server, "POST", "/api/decide", decision, Origin="http://evil.example", **token
        )
        assert (status, answer["error"]) == (403, "Requests from another origin are refused.")
        assert request(server, "POST", "/api/decide", decision, **token)[0] == 403  # no Origin
        outside = decision | {"file": "../outside.jsonl"}
        status, answer = request(server, "POST", "/api/decide", outside, **origin, **token)
        assert status == 403 and "outside" in answer["error"]
        other = decision | {"file": "skillvc.toml"}
        status, answer = request(server, "POST", "/api/decide", other, **origin, **token)
        assert status == 400 and "not one of the configured task files" in answer["error"]
        assert events(drafted, "tasks.reviewed") == []  # nothing refused was written
        assert all(r["status"] == "pending" for r in rows(drafted).values())
        status, answer = request(server, "POST", "/api/decide", decision, **origin, **token)
        assert (status, answer["status"]) == (200, "approved")
    finally:
        server.stop()


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_review_in_headless_chromium(drafted: Path, tmp_path: Path) -> None:
    assert CHROMIUM is not None
    server = ReviewServer(open_workspace()).start()
    browser = Browser(CHROMIUM, tmp_path / "profile")
    try:
        browser.viewport(390)
        browser.goto(server.url)
        browser.wait("document.getElementById('counts').textContent.includes('7 pending')")
        current = "document.getElementById('item').dataset.id"
        status = "document.getElementById('item-status').textContent"
        ids = []

        # Approve with "a" (the page moves on), reject with "r", go back with "k".
        ids.append(browser.evaluate(current))
        browser.key("a")
        browser.wait(f"{current} !== {json.dumps(ids[0])}")
        ids.append(browser.evaluate(current))
        browser.key("r")
        browser.wait(f"{current} !== {json.dumps(ids[1])}")
        browser.key("k")
        browser.wait(f"{current} === {json.dumps(ids[1])}")
        assert browser.evaluate(status) == "rejected"
        browser.key("k")
        assert browser.evaluate(current) == ids[0]
        assert browser.evaluate(status) == "approved"

        # Edit with "e": a new input, saved (and approved) with Ctrl+Enter.
        browser.key("j")
        browser.key("ArrowRight")
        edited = browser.evaluate(current)
        assert edited not in ids
        browser.key("e")
        browser.wait("!document.getElementById('editor').hidden")
        browser.evaluate("document.getElementById('edit-input').select()")
        browser.type("Book invoice E-5 from Elm Ltd: net 42, VAT 19%.")
        browser.key("Enter", ctrl=True)
        browser.wait("document.getElementById('editor').hidden")
        browser.wait(f"{status} === 'approved'")
        assert "Elm Ltd" in browser.evaluate("document.getElementById('item-input').textContent")

        written = rows(drafted)
        assert written[ids[0]]["status"] == "approved"
        assert written[ids[1]]["status"] == "rejected"
        assert written[edited]["status"] == "approved"
        assert written[edited]["input"] == "Book invoice E-5 from Elm Ltd: net 42, VAT 19%."
        assert written[edited]["reviewed"]["by"] == "review page"
        decided = [(e["item"], e["decision"]) for e in events(drafted, "tasks.reviewed")]
        assert decided == [(ids[0], "approved"), (ids[1], "rejected"), (edited, "edited")]

        # Nothing overflows sideways on a phone, and the actions are on screen.
        layout = browser.evaluate(
            "({scroll: document.documentElement.scrollWidth, inner: innerWidth,"
            " approve: document.getElementById('approve').getBoundingClientRect().right})"
        )
        assert layout["inner"] == 390 and layout["scroll"] <= 390, layout
        assert 0 < layout["approve"] <= 390

        # Approve the rest from the command line (the same library path), then score them
        # so there are outputs to label.
        approved = run("review", "--yes").stdout
        assert approved.count("approved d") == 4
        run("eval", "-q")
        judged = next(
            i
            for i, r in rows(drafted).items()
            if r.get("scorer") == "judge" and r["status"] == "approved" and i not in (edited,)
        )
        plain = next(
            i
            for i, r in rows(drafted).items()
            if "scorer" not in r
            and r["status"] == "approved"
            and i in {e["id"] for ev in events(drafted, "evaluation") for e in ev["items"]}
        )
        browser.goto(server.url)
        browser.wait("document.getElementById('counts').textContent.includes('0 pending')")
        browser.evaluate("document.getElementById('only-pending').click()")  # show them all
        browser.wait("document.getElementById('counts').textContent.includes('item 1 of 7')")
        for target, verdict in ((plain, "f"), (judged, "p")):
            for _ in range(8):
                if browser.evaluate(current) == target:
                    break
                browser.key("j")
            assert browser.evaluate(current) == target
            browser.wait("document.querySelectorAll('.output').length > 0")
            browser.key("n")
            browser.type("too terse" if verdict == "f" else "right")
            browser.key("Escape")
            browser.evaluate("document.getElementById('status').textContent = ''")
            browser.key(verdict)
            word = "pass" if verdict == "p" else "fail"
            said = "document.getElementById('status').textContent"
            browser.wait(f"{said}.startsWith('Output labelled {word}')")
        labels = events(drafted, "label.recorded")
        assert [(x["item"], x["label"], x["note"]) for x in labels] == [
            (plain, 0, "too terse"),
            (judged, 1, "right"),
        ]
        lines = (drafted / "evals" / "judge-labels.jsonl").read_text().splitlines()
        assert sorted(json.loads(line)["label"] for line in lines) == [0, 1]
        # A passed output of a judge-scored item became one of its acceptable answers.
        assert "Acme GmbH; 2024-118; 1200.00; 19%" in rows(drafted)[judged]["target"]

        # Another origin's page cannot write, even holding the token.
        before = len(events(drafted, "tasks.reviewed"))
        browser.goto("data:text/html,<p>elsewhere</p>")
        browser.evaluate(
            f"fetch({json.dumps(server.origin + '/api/decide')}, {{method: 'POST', mode: "
            "'no-cors', headers: {'Content-Type': 'text/plain'}, body: JSON.stringify({id: "
            f"{json.dumps(ids[1])}, decision: 'approve'}})}}).catch(() => 0).then(() => 1)"
        )
        assert len(events(drafted, "tasks.reviewed")) == before
        assert rows(drafted)[ids[1]]["status"] == "rejected"

        # The desktop width too.
        browser.viewport(1280)
        browser.goto(server.url)
        browser.wait("document.getElementById('counts').textContent.includes('0 pending')")
        browser.evaluate("document.getElementById('only-pending').click()")
        browser.wait("document.getElementById('item').dataset.id")
        assert browser.evaluate("document.documentElement.scrollWidth") <= 1280
    finally:
        browser.close()
        server.stop()

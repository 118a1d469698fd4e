"""Harvest finds a recurring instruction whose payload varies (issue 23)."""

from __future__ import annotations

from skillvc.sleep.mine import mine

TICKETS = [
    "VPN drops every ten minutes since the update.",
    "The printer on floor 3 jams on every double-sided job, and the tray light blinks orange "
    "even after a restart. Facilities say it is not theirs. Three people are waiting.",
    "Password reset link expired.",
    "Outlook shows 'disconnected' for the shared calendar; other mailboxes work fine. "
    "It started Monday morning.",
    "New starter has no laptop.",
    "Monitor flickers when docked.\nHappens with two different docks.\nDriver 31.0.15 installed.",
    "Cannot print PDFs larger than 20 MB from the billing portal.",
    "Badge does not open the server room since the office move; security says the access "
    "list was copied over but the log shows a denial at 08:12 every day this week.",
    "Teams audio cuts out in meetings longer than an hour.",
]
ONE_OFFS = [
    "Can you explain how git rebase differs from merge? Thanks in advance.",
    "Write a haiku about autumn leaves.",
    "What is the capital of Australia? Thanks in advance.",
    "Draft an agenda for Friday's planning meeting with the design team.",
    "Convert 30 degrees Celsius to Fahrenheit. Thanks in advance.",
]


def test_nine_tickets_under_one_instruction_are_one_kind_and_one_offs_stay_out() -> None:
    rows = [
        {"session": f"s{i}", "timestamp": f"2026-11-{i + 1:02d}", "prompt": prompt}
        for i, prompt in enumerate(
            [f"Summarise this IT ticket in one line: {t}" for t in TICKETS] + ONE_OFFS
        )
    ]
    mined = mine(rows)
    assert len(mined.kinds) == 1
    (kind,) = mined.kinds
    assert sorted(m["session"] for m in kind.members) == [f"s{i}" for i in range(9)]
    assert kind.name == "summarise this it ticket in one line …"
    assert mined.one_offs == len(ONE_OFFS)
    # The order of the input does not matter, and the kind keeps its id.
    again = mine(list(reversed(rows)))
    assert [k.id for k in again.kinds] == [kind.id]


def test_the_instruction_may_follow_the_payload() -> None:
    rows = [
        {
            "session": f"s{i}",
            "timestamp": f"{i:04d}",
            "prompt": f"{t}\n\nExplain the root cause of the error above in two sentences.",
        }
        for i, t in enumerate(TICKETS[:4])
    ]
    (kind,) = mine(rows).kinds
    assert len(kind.members) == 4

"""The glossary: every word skillvc prints that a newcomer may not know, in one place.

``skillvc help terms`` prints it; ``docs/glossary.md`` is generated from it
(``markdown()``), and a test checks the file is up to date, so the two cannot differ.
"""

from __future__ import annotations

import textwrap

# (term, other words skillvc prints for it, meaning), grouped as a reader meets them.
TERMS: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "What is trained",
        (
            (
                "skill",
                "SKILL.md",
                "The Markdown document an agent loads before it works on a "
                "task. Training changes it; every kept change is a git commit.",
            ),
            (
                "skill package",
                "",
                "A skill that is a directory: SKILL.md plus the reference "
                "files it links. An edit names the file it changes.",
            ),
            (
                "target",
                "target model",
                "The model (or agent) that does the tasks with the "
                "skill: the one whose answers are scored.",
            ),
            (
                "optimizer",
                "optimizer model",
                "The model that reads scored answers, above all "
                "the failures, and proposes edits to the skill.",
            ),
            (
                "simulator",
                "sim:",
                "An offline stand-in for both models, for the demo and the "
                "tests; a toy world, not a model.",
            ),
        ),
    ),
    (
        "Tasks and scores",
        (
            (
                "task set",
                "task file",
                "Examples of the work, one JSON object a line: an id, "
                "the input and the expected answer (the target), in three splits.",
            ),
            (
                "train split",
                "train",
                "Examples training learns from: the optimizer sees how the target did on them.",
            ),
            (
                "val split",
                "val, validation",
                "Examples that decide whether a change is kept (the gate).",
            ),
            (
                "test split",
                "test",
                "Examples held out: scored at the start and at the end "
                "and reported, never used to decide anything.",
            ),
            (
                "scorer",
                "",
                "How an answer is scored against its expected answer: exact "
                "match, a number, a Python function, a command or a model as judge.",
            ),
            (
                "hard, soft, mixed",
                "metric",
                "A hard score is 1 (right) or 0 (wrong); a soft "
                "score is partial credit from 0 to 1; mixed is their mean. The gate compares one "
                "of them, the run's metric.",
            ),
        ),
    ),
    (
        "A training run",
        (
            (
                "run",
                "run-1a2b3c4d",
                "One training job (skillvc train): its settings, steps "
                "and epochs. A stopped run resumes where it stopped.",
            ),
            ("epoch", "", "One pass over the train split."),
            (
                "step",
                "",
                "One batch of train examples: the target answers them with the "
                "current skill, the optimizer reflects on the results and proposes edits, and "
                "the edits are tried on val.",
            ),
            (
                "edit",
                "add, replace, delete",
                "One bounded change to the skill: add a line "
                "(after an anchor), replace a piece of text, or delete one.",
            ),
            (
                "learning rate",
                "lr",
                "How many edits a step may make. It starts high and "
                "shrinks over the run (cosine decay), as in training a network.",
            ),
            (
                "candidate",
                "",
                "The current skill with one step's edits applied: the change being tried.",
            ),
            (
                "no candidate",
                "without a candidate, nothing to try",
                "A step whose proposed "
                "edits could not be applied (or none were proposed), so there was no change to "
                "try on val.",
            ),
            (
                "not applied",
                "unmatched, no-op, missing, ambiguous",
                "A proposed edit that could not be placed: its "
                "text was not found (missing), was found more than once (ambiguous), would change "
                "nothing (no-op), or would touch the frontmatter or a protected region.",
            ),
        ),
    ),
    (
        "The gate: kept or refused",
        (
            (
                "gate",
                "",
                "Scoring the candidate on val. It is kept only if it beats the "
                "current skill; otherwise the skill stays as it was.",
            ),
            ("kept", "accepted", "Passed the gate: the change is a git commit on your branch."),
            (
                "refused",
                "rejected",
                "Did not beat the current skill on val. It is kept in "
                "the log (skillvc log --rejected -p) and shown to later steps as something not to "
                "repeat (the rejected buffer).",
            ),
            ("ungated", "forced", "Applied without a gate (--no-slow-update-gate)."),
            (
                "stopped early",
                "at most 0.900, <=0.900, early stopping",
                "The gate stops "
                "scoring once the candidate cannot win even if it got every remaining example "
                "right; the score shown is the best it could still have reached. It saves calls.",
            ),
            (
                "flipped",
                "fixed, broken, +0 -2",
                "Val examples whose result changed between "
                "the current skill and the candidate: fixed (failed before, right now) and broken "
                "(right before, failed now).",
            ),
            (
                "p-value",
                "significant",
                "How likely a gain this large is by chance alone; "
                "the smaller, the surer. Not significant: the gain may be noise.",
            ),
            (
                "rejected buffer",
                "buffer",
                "The refused edits, with their evidence, shown to "
                "the optimizer later so it does not propose them again.",
            ),
        ),
    ),
    (
        "Epoch-end reviews",
        (
            (
                "slow update",
                "epoch-end review",
                "At the end of each epoch the optimizer "
                "compares the skill before and after the epoch and writes longer-term guidance "
                "into a protected region of the skill. It is gated like a step.",
            ),
            (
                "protected region",
                "skillvc:protected",
                "A part of the skill, between marker "
                "comments, that only slow updates write; step edits cannot touch it.",
            ),
            (
                "meta skill",
                "",
                "The optimizer's own notes on which kinds of edits helped or "
                "hurt. Never part of the skill you ship.",
            ),
        ),
    ),
    (
        "Model calls and cost",
        (
            (
                "event log",
                ".skillvc/events.db",
                "Every step, model call, score and decision, "
                "recorded in order in a SQLite file. Nothing is ever rewritten.",
            ),
            (
                "answered from the log",
                "reused",
                "A model call made before with the same "
                "input is answered from the event log: free, and the same answer.",
            ),
            (
                "made earlier",
                "",
                "In a progress line: answers this stage found ready, made "
                "earlier by this run ahead of time or by an earlier command. A run's summary "
                "counts as answered from the log every answer it did not pay for: one an "
                "earlier run made, or one this run made before for the same input.",
            ),
            (
                "speculation",
                "started ahead, not used",
                "While a gate runs, the next step "
                "starts with the current skill, betting the gate refuses. When the gate keeps "
                "its change instead, those calls are thrown away. Results are the same either "
                "way; it only saves time.",
            ),
            (
                "unpriced",
                "price unknown",
                "Calls of a model whose price skillvc does not "
                "know: their cost is not in the total.",
            ),
            (
                "checkpoint",
                "skillvc/<run>/best, epoch-N",
                "Git tags on the best skill of a run and on the skill at the end of each epoch.",
            ),
        ),
    ),
)


def terms() -> list[tuple[str, str, str]]:
    """Every (term, also, meaning), in glossary order."""
    return [entry for _, entries in TERMS for entry in entries]


def text(width: int = 72) -> str:
    """The glossary for a terminal: each term, the other words for it, its meaning indented."""
    lines = ["Words skillvc uses, in plain terms (also in docs/glossary.md).", ""]
    for title, entries in TERMS:
        lines += [title.upper(), ""]
        for term, also, meaning in entries:
            lines.append(f"  {term}" + (f"  ({also})" if also else ""))
            lines += textwrap.wrap(
                meaning, width, initial_indent="      ", subsequent_indent="      "
            )
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def markdown() -> str:
    """docs/glossary.md."""
    lines = [
        "# Glossary",
        "",
        "<!-- Generated from skillvc/cli/glossary.py; `skillvc help terms` prints the same. -->",
        "",
        "Every word skillvc prints that may be new to you, in plain terms. In a terminal, "
        "`skillvc help terms` prints this page.",
    ]
    for title, entries in TERMS:
        lines += ["", f"## {title}", ""]
        for term, also, meaning in entries:
            other = f" ({', '.join(f'`{a.strip()}`' for a in also.split(','))})" if also else ""
            lines.append(f"- **{term}**{other}: {meaning}")
    return "\n".join(lines) + "\n"

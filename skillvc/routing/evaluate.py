"""``skillvc eval --routing``: the library's routing at a revision (or the working tree) on
one split of the trigger set, recorded once as a ``routing.evaluated`` event.

Free to repeat: every selector call is answered from the log when it was made before.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from skillvc.core.config import Config
from skillvc.core.progress import Progress
from skillvc.models.calls import ModelClient, secret_values
from skillvc.models.harness import lazy_backend
from skillvc.routing.library import Library, load_library
from skillvc.routing.measure import agent_of, measure, uses_tools
from skillvc.routing.metrics import RoutingScore
from skillvc.routing.train import check_routing, library_config, selector_config
from skillvc.routing.triggers import load_triggers, spellings
from skillvc.workspace.workspace import Workspace


def evaluate_routing(
    ws: Workspace,
    rev: str | None,
    split: str,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
    config: Config | None = None,
    tasks_root: Path | None = None,
    library: Library | None = None,
) -> tuple[RoutingScore, dict[str, Any]]:
    """(the score, facts for output: rev, sha, split, model, library key, calls);
    ``library``: that library (read by the caller, e.g. a pull request's) instead of the one
    at ``rev``, which then only labels it."""
    progress = progress or Progress.off()
    config = config or library_config(ws)
    check_routing(config)
    if library is None:
        library = load_library(config, ws.repo if rev else None, rev)
    triggers = load_triggers(
        config.routing, tasks_root or ws.root, spellings([(s.name, s.table) for s in library])
    )
    items = triggers.split(split)
    selector = selector_config(config)
    assert config.routing is not None
    agent = agent_of(selector)
    tools = agent is None and uses_tools(selector.model, config.routing.tools)
    with ws.store(create=True) as store:
        client = ModelClient(
            store,
            {"target": lazy_backend(selector, config.root)},
            {"target": selector},
            prices=config.prices,
            secrets=secret_values(config),
        )
        progress.watch(client.totals)
        with (
            ThreadPoolExecutor(max_workers=workers or config.train.workers) as pool,
            progress.stage(f"routing on {split}", len(items)),
        ):
            result = measure(
                client,
                library,
                items,
                pool,
                tools=tools,
                agent=agent is not None,
                done=progress.advance,
            )
        totals = client.totals()
        facts = {
            "rev": rev,
            "sha": ws.repo.resolve(rev) if rev else "worktree",
            "split": split,
            "model": selector.model,
            "tools": tools,
            "agent": agent,
            "dataset": triggers.hash,
            "library_key": library.key,
            "descriptions": library.descriptions(),
            "calls": totals.replies,
            "fresh_calls": totals.fresh,
            "tokens": totals.tokens,
            "cost_usd": totals.cost_usd,
        }
        key = f"{library.key}:{split}:{triggers.hash}:{selector.model}:{tools}"
        if agent is not None:  # an agent reads the whole SKILL.md: the bodies count too
            key += f":{agent}:{library.text_key}"
        if store.find("routing.evaluated", key) is None:
            store.append(
                "routing.evaluated",
                {
                    "label": "eval",
                    **facts,
                    **result.to_dict(),
                    "picks": [p.to_dict() for p in result.picks],
                },
                key=key,
            )
    return result, facts


def describe_library(library: Library) -> list[str]:
    return [f"  {name}: {description}" for name, description in library.listing()]

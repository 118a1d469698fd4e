"""Routing a trigger set through the selector (the target model), one logged call per item.

Every call goes through ``ModelClient``, so the same (library listing, prompt, model) is
answered from the event log: re-measuring an unchanged library is free, and a resumed run pays
no call twice. A call that fails after its retries is an error of its item (never a pick of
none, never a score). Only names and descriptions enter the calls: a body edit that leaves
every description alone routes exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from skillvc.models.calls import CallFailed, ModelClient
from skillvc.routing.library import Library
from skillvc.routing.listing import read_pick, select_tool, system_prompt
from skillvc.routing.metrics import Pick, RoutingScore, score
from skillvc.routing.triggers import TriggerItem

TOOL_BACKENDS = ("openai:", "anthropic:", "sim:")


def uses_tools(model: str, enabled: bool) -> bool:
    """Whether the pick goes through the select_skill tool: the provider has tools and
    ``[routing] tools`` is not false."""
    return enabled and model.startswith(TOOL_BACKENDS)


def route(
    client: ModelClient,
    library: Library,
    items: Sequence[TriggerItem],
    pool: Executor,
    *,
    tools: bool,
    step: int | None = None,
    done: Callable[[int], None] | None = None,
) -> list[Pick]:
    listing = [(s.name, s.description, s.path) for s in library]
    system = system_prompt(listing, tools=tools)
    specs = [select_tool(library.names).as_dict()] if tools else []
    names = library.names

    def one(item: TriggerItem) -> Pick:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": item.prompt}]
        try:
            reply = client.call("target", messages, step=step, tools=specs)
        except CallFailed as exc:
            return Pick(item.id, None, "error", error=str(exc))
        finally:
            if done is not None:
                done(1)
        picked, via = read_pick(reply.text, reply.meta, names)
        return Pick(item.id, picked, via, answer=reply.text[:200])

    return list(pool.map(one, items))


def measure(
    client: ModelClient,
    library: Library,
    items: Sequence[TriggerItem],
    pool: Executor,
    *,
    tools: bool,
    step: int | None = None,
    done: Callable[[int], None] | None = None,
) -> RoutingScore:
    picks = route(client, library, items, pool, tools=tools, step=step, done=done)
    return score(library.names, items, picks)

"""Routing a trigger set through the selector (the target model), one logged call per item.

Every call goes through ``ModelClient``, so the same (library listing, prompt, model) is
answered from the event log: re-measuring an unchanged library is free, and a resumed run pays
no call twice. A call that fails after its retries is an error of its item (never a pick of
none, never a score).

Two kinds of selector:

- a chat model (``harness = "chat"``) is shown the listing (``skillvc.routing.listing``) and
  picks by a tool call or by name; only names and descriptions enter the call, so a body edit
  that leaves every description alone routes exactly as before;
- an agent preset (``harness = "claude-code"`` or ``"codex"``) gets the whole library
  installed where its CLI looks for skills (every skill's SKILL.md, each in its own folder)
  and the prompt alone, verbatim, as its task; the pick is the first skill its trajectory
  shows it loading (``presets.loaded_skills``), none when it loaded none. The SKILL.md files
  go in whole (an agent reads the body once it has loaded a skill), so they are in the cache
  key: a body edit means the agent runs again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from skillvc.core.config import ModelConfig
from skillvc.core.errors import ConfigError
from skillvc.models.backends.command import is_safe_name
from skillvc.models.calls import CallFailed, ModelClient
from skillvc.models.harness import AGENT_PRESETS
from skillvc.packages.packagefile import PackageFile
from skillvc.routing.library import Library
from skillvc.routing.listing import read_pick, select_tool, system_prompt
from skillvc.routing.metrics import Pick, RoutingScore, score
from skillvc.routing.triggers import TriggerItem

TOOL_BACKENDS = ("openai:", "anthropic:", "sim:")


def uses_tools(model: str, enabled: bool) -> bool:
    """Whether the pick goes through the select_skill tool: the provider has tools and
    ``[routing] tools`` is not false."""
    return enabled and model.startswith(TOOL_BACKENDS)


def agent_of(selector: ModelConfig) -> str | None:
    """The agent preset whose activation is the pick (``claude-code``, ``codex``), or None
    for a chat selector."""
    return selector.harness if selector.harness in AGENT_PRESETS else None


def library_files(library: Library) -> tuple[PackageFile, ...]:
    """Every skill's SKILL.md as an agent harness installs it, ``<name>/SKILL.md``: the name
    is the listed one, which must be a usable folder name."""
    for s in library:
        if not is_safe_name(s.name):
            raise ConfigError(
                f"The skill name {s.name!r} cannot be a folder, so an agent cannot be given it.",
                hint="Name skills with letters, digits, '-', '_' and '.' only, as the Agent "
                "Skills spec asks.",
            )
    return tuple(PackageFile(f"{s.name}/SKILL.md", text=s.text) for s in library)


def route(
    client: ModelClient,
    library: Library,
    items: Sequence[TriggerItem],
    pool: Executor,
    *,
    tools: bool,
    agent: bool = False,
    step: int | None = None,
    done: Callable[[int], None] | None = None,
) -> list[Pick]:
    """One pick per item; ``agent``: the selector is an agent preset (see the module)."""
    if agent:
        return _route_agent(client, library, items, pool, step=step, done=done)
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


def _route_agent(
    client: ModelClient,
    library: Library,
    items: Sequence[TriggerItem],
    pool: Executor,
    *,
    step: int | None,
    done: Callable[[int], None] | None,
) -> list[Pick]:
    files = library_files(library)
    names = library.names

    def one(item: TriggerItem) -> Pick:
        try:
            reply = client.call(
                "target", [{"role": "user", "content": item.prompt}], step=step, library=files
            )
        except CallFailed as exc:
            return Pick(item.id, None, "error", error=str(exc))
        finally:
            if done is not None:
                done(1)
        picked = reply.meta.get("picked")
        if picked is not None and picked not in names:  # never: only listed names are read
            picked = None
        return Pick(item.id, picked, "agent", answer=reply.text[:200])

    return list(pool.map(one, items))


def measure(
    client: ModelClient,
    library: Library,
    items: Sequence[TriggerItem],
    pool: Executor,
    *,
    tools: bool,
    agent: bool = False,
    step: int | None = None,
    done: Callable[[int], None] | None = None,
) -> RoutingScore:
    picks = route(client, library, items, pool, tools=tools, agent=agent, step=step, done=done)
    return score(library.names, items, picks)

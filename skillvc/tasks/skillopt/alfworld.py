"""ALFWorld's text games as a skillvc environment (``reset``/``step``), played with the real
``alfworld`` and ``textworld`` packages.

``[tasks] environment = "skillvc.tasks.skillopt.alfworld:ALFWorld"`` with ``skillopt_env =
"alfworld"``: each item's ``gamefile`` (SkillOpt's ``alfworld_path_split``) is relative to
``$ALFWORLD_DATA``, the directory ``alfworld-download`` fills. The reply's ``<action>...</action>``
(else the whole reply, trimmed) is the action; the admissible actions follow every
observation, as SkillOpt's prompt lists them. The reward is 1 when the game is won (SkillOpt's
success), else 0; the episode ends when the game does or after ``[tools] max_turns`` replies.

``ALFWorld.check()`` runs before any model call: without the packages, ``$ALFWORLD_DATA`` or
its ``json_2.1.1`` it raises one error naming what to install or download. ``game`` is the
seam a test (or another engine) replaces: a function from a game file's path to an object
with ``reset() -> (observation, admissible actions, won)`` and ``step(action) -> the same``.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from skillvc.core.errors import ToolsError

INSTALL = "pip install alfworld (it brings textworld), then alfworld-download"
_ACTION = re.compile(r"<action>(.*?)</action>", re.IGNORECASE | re.DOTALL)
MAX_STEPS = 50  # textworld's own step limit per episode (SkillOpt's env.max_steps)


def installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def data_root() -> Path:
    return Path(os.environ.get("ALFWORLD_DATA", "")).expanduser()


class TextWorldGame:
    """One ALFWorld game through textworld's gym interface (batch of one)."""

    def __init__(self, gamefile: Path) -> None:
        import textworld
        import textworld.gym
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        env_id = textworld.gym.register_games(
            [str(gamefile)],
            infos,
            batch_size=1,
            asynchronous=False,
            max_episode_steps=MAX_STEPS,
            wrappers=[AlfredDemangler(shuffle=False), AlfredInfos],
        )
        self.env = textworld.gym.make(env_id)

    @staticmethod
    def _first(value: Any) -> Any:
        return value[0] if isinstance(value, (list, tuple)) and value else value

    def _state(self, obs: Any, infos: Mapping[str, Any]) -> tuple[str, list[str], bool]:
        commands = self._first(infos.get("admissible_commands")) or []
        return str(self._first(obs)), [str(c) for c in commands], bool(self._first(infos["won"]))

    def reset(self) -> tuple[str, list[str], bool]:
        obs, infos = self.env.reset()
        return self._state(obs, infos)

    def step(self, action: str) -> tuple[str, list[str], bool]:
        obs, _scores, _dones, infos = self.env.step([action])
        return self._state(obs, infos)


def action_of(reply: str) -> str:
    """The action in a reply: its last ``<action>`` tag, else the reply itself, one line."""
    found = _ACTION.findall(reply or "")
    text = found[-1] if found else (reply or "")
    return " ".join(text.strip().lower().split())


def _shown(observation: str, commands: list[str]) -> str:
    listed = ", ".join(f"'{c}'" for c in commands if c != "help")
    return (
        f"{observation.strip()}\n\nYour admissible actions are: [{listed}].\n"
        "Reply with the next action inside <action>...</action>."
    )


class ALFWorld:
    """An ALFWorld episode for one task item (``metadata.gamefile``)."""

    game: Callable[[Path], Any] = TextWorldGame

    @classmethod
    def check(cls) -> None:
        """Raise ToolsError naming what is missing: the packages, or the data."""
        if cls.game is not TextWorldGame:
            return
        missing = [m for m in ("alfworld", "textworld") if not installed(m)]
        if missing:
            raise ToolsError(
                f"ALFWorld needs the {' and '.join(missing)} package{'s' * (len(missing) > 1)}, "
                "which are not installed.",
                hint=f"{INSTALL}; then set ALFWORLD_DATA to the directory it downloads to.",
            )
        root = data_root()
        if not os.environ.get("ALFWORLD_DATA") or not (root / "json_2.1.1").is_dir():
            where = f" ({root} has no json_2.1.1/)" if os.environ.get("ALFWORLD_DATA") else ""
            raise ToolsError(
                f"ALFWorld's games are not found: ALFWORLD_DATA is not set to the data "
                f"directory{where}.",
                hint="Run alfworld-download, then export ALFWORLD_DATA=<that directory> "
                "(it holds json_2.1.1/).",
            )

    def __init__(self) -> None:
        self.session: Any = None

    def reset(self, item: Mapping[str, Any]) -> str:
        gamefile = str(item.get("metadata", {}).get("gamefile") or "")
        path = Path(gamefile)
        if not path.is_absolute():
            path = data_root() / gamefile
        if not path.is_file():
            raise FileNotFoundError(f"no game file {gamefile} under ALFWORLD_DATA")
        self.session = type(self).game(path)
        observation, commands, _won = self.session.reset()
        return _shown(observation, commands)

    def step(self, action: str) -> tuple[str, float, bool]:
        observation, commands, won = self.session.step(action_of(action))
        return _shown(observation, commands), 1.0 if won else 0.0, won

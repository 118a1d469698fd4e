from __future__ import annotations

from pathlib import Path

import pytest

from skillvc.core.config import load_config, override, parse_config
from skillvc.core.errors import ConfigError, NotInitialised
from skillvc.workspace.workspace import render_config


def test_rendered_template_parses_with_paper_defaults(tmp_path: Path) -> None:
    text = render_config(
        skill_path="skills/x/SKILL.md",
        target_model="sim:support",
        optimizer_model="sim:support",
        train_file="evals/train.jsonl",
    )
    config = parse_config(text, tmp_path)
    assert config.skill.path == "skills/x/SKILL.md"
    assert config.tasks.train == "evals/train.jsonl" and config.tasks.val is None
    t = config.train
    assert (t.epochs, t.batch_size, t.minibatch_size) == (4, 40, 8)
    assert (t.learning_rate, t.min_learning_rate, t.lr_schedule) == (4, 2, "cosine")
    assert t.gate_metric == "hard" and t.early_stop and t.buffer and t.slow_update_gate
    assert "# Defaults follow the SkillOpt paper." in text


def test_unknown_key_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Unknown key 'learning_rte' in \\[train\\]"):
        parse_config("[train]\nlearning_rte = 3\n", tmp_path)
    with pytest.raises(ConfigError, match="Unknown section \\[trian\\]"):
        parse_config("[trian]\nepochs = 3\n", tmp_path)


def test_wrong_types_and_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match='epochs = "four".*wrong type'):
        parse_config('[train]\nepochs = "four"\n', tmp_path)
    with pytest.raises(ConfigError, match="lr_schedule 'cosin'"):
        parse_config('[train]\nlr_schedule = "cosin"\n', tmp_path)
    with pytest.raises(ConfigError, match="min_learning_rate must not exceed"):
        parse_config("[train]\nlearning_rate = 2\nmin_learning_rate = 3\n", tmp_path)
    with pytest.raises(ConfigError, match="must name a backend"):
        parse_config('[target]\nmodel = "gpt-4o"\n', tmp_path)
    with pytest.raises(ConfigError, match="not valid TOML"):
        parse_config("[train\n", tmp_path)


def test_overrides_are_validated(tmp_path: Path) -> None:
    config = parse_config("", tmp_path)
    changed = override(config, "train", epochs=2, learning_rate=None, lr_schedule="constant")
    assert changed.train.epochs == 2 and changed.train.lr_schedule == "constant"
    assert changed.train.learning_rate == 4
    assert config.train.epochs == 4  # the original is untouched
    with pytest.raises(ConfigError):
        override(config, "train", gate_metric="best")


def test_missing_config_is_not_initialised(tmp_path: Path) -> None:
    with pytest.raises(NotInitialised, match="No skillvc.toml"):
        load_config(tmp_path)


def test_snapshot_holds_no_secret_values(tmp_path: Path) -> None:
    config = parse_config('[target]\nmodel = "openai:gpt-4o"\napi_key_env = "MY_KEY"\n', tmp_path)
    snap = config.to_dict()
    assert snap["target"]["api_key_env"] == "MY_KEY"
    assert snap["train"]["epochs"] == 4


def test_malformed_prices_fail_when_the_config_loads(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        parse_config('[prices."openai:my-model"]\ninput = "cheap"\n', tmp_path)
    ok = parse_config('[prices."openai:my-model"]\ninput = 0.5\noutput = 1.5\n', tmp_path)
    assert ok.prices["openai:my-model"]["input"] == 0.5


def test_overrides_get_the_range_checks_of_the_file(tmp_path: Path) -> None:
    config = parse_config("", tmp_path)
    with pytest.raises(ConfigError) as caught:
        override(config, "target", temperature=float("nan"))
    assert caught.value.message == (
        "[target] temperature = nan is out of range: it must be between 0 and 2."
    )
    with pytest.raises(ConfigError) as caught:
        override(config, "train", workers=5000)
    assert caught.value.message == (
        "[train] workers = 5000 is out of range: it must be between 1 and 1024."
    )
    assert override(config, "target", temperature=2).target.temperature == 2.0  # bounds included

"""Logged clients for one role, for the commands that call a model outside training."""

from __future__ import annotations

from skillvc.core.config import Config
from skillvc.core.store import EventStore
from skillvc.models.calls import ModelClient, secret_values
from skillvc.models.harness import get_backend


def optimizer_client(config: Config, store: EventStore, run_id: str) -> ModelClient:
    """A logged client with the optimizer alone (``harvest``'s rubrics, ``tasks draft``)."""
    return ModelClient(
        store,
        {"optimizer": get_backend(config.optimizer)},
        {"optimizer": config.optimizer},
        prices=config.prices,
        run_id=run_id,
        secrets=secret_values(config),
    )

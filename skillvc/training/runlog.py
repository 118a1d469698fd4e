"""The event stream of one run.

``emit`` numbers run events 1, 2, 3, ... in the order the (deterministic) loop produces them.
On resume the loop starts again from the top and the store hands back the events already
logged at each number, so a replay writes nothing twice and continues exactly where the
interrupted process stopped.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from skillvc.core.events import Event
from skillvc.core.store import EventStore


class RunLog:
    def __init__(self, store: EventStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.seq = 0
        self.step: int | None = None
        self.epoch: int | None = None
        self.replayed = 0

    def emit(self, type: str, payload: Mapping[str, Any], *, key: str | None = None) -> Event:
        self.seq += 1
        event = self.store.append(
            type,
            payload,
            run_id=self.run_id,
            seq=self.seq,
            step=self.step,
            epoch=self.epoch,
            key=key,
        )
        return event

    @contextmanager
    def at(self, step: int | None, epoch: int | None) -> Iterator[None]:
        """Events emitted inside are filed under ``step`` and ``epoch`` (an event the loop
        logs later than the stage it belongs to: a rejected candidate's ``commit.done``)."""
        was = self.step, self.epoch
        self.step, self.epoch = step, epoch
        try:
            yield
        finally:
            self.step, self.epoch = was

    def note(self, type: str, payload: Mapping[str, Any]) -> Event:
        """A process-level event outside the replayed sequence (resumed, stopped)."""
        return self.store.append(type, payload, run_id=self.run_id, step=self.step)

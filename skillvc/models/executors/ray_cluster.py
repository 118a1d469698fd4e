"""The Ray executor: fresh calls as Ray tasks on a cluster (the ``skillvc[ray]`` extra).

Invariants:
- Results are fetched in item order (``ray.get`` ref by ref), so the driver records them in
  the same order whatever order the tasks finish in.
- Each task asks for ``ray_num_cpus`` CPUs, ``ray_memory_mb`` of memory and one unit of
  ``ray_resource`` (e.g. a label of the nodes that have the agent CLI installed).
- A task whose worker process or node died is resubmitted by Ray itself (``max_retries``;
  application exceptions are never retried: ``run_call`` turns model failures into data).
  When the retries run out the run stops with ``ExecutorFailed``; nothing was recorded for
  the lost call, so a resumed run makes it again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from skillvc.core.config import TrainConfig
from skillvc.core.errors import ConfigError, ExecutorFailed

T = TypeVar("T")
R = TypeVar("R")


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError(
            '[train] executor = "ray" needs Ray, which is not installed.',
            hint="Install it with: pip install 'skillvc[ray]'",
        ) from None
    return ray


def infrastructure_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's exceptions for a lost worker, node or object: never the task's own failure."""
    ex = ray.exceptions
    names = (
        "WorkerCrashedError",
        "NodeDiedError",
        "ObjectLostError",
        "OwnerDiedError",
        "OutOfMemoryError",
        "LocalRayletDiedError",
        "RaySystemError",
    )
    return tuple(getattr(ex, n) for n in names if hasattr(ex, n))


class RayExecutor:
    """Runs ``map`` as one Ray task per item on the cluster at ``address``."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: float = 1.0,
        memory_mb: int | None = None,
        resource: str | None = None,
        max_retries: int = 3,
    ) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self.memory_mb = memory_mb
        self.resource = resource
        self.max_retries = max_retries
        self._remote: dict[Callable[..., Any], Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, train: TrainConfig) -> RayExecutor:
        _import_ray()  # a missing extra is a config error now, not after the baseline
        return cls(
            train.ray_address,
            num_cpus=train.ray_num_cpus,
            memory_mb=train.ray_memory_mb,
            resource=train.ray_resource,
            max_retries=train.ray_max_retries,
        )

    def _connect(self) -> Any:
        ray = _import_ray()
        with self._lock:
            if not ray.is_initialized():
                try:
                    ray.init(
                        address=self.address,
                        include_dashboard=False,
                        log_to_driver=False,
                        configure_logging=False,
                    )
                except (ConnectionError, RuntimeError, ValueError) as exc:
                    where = self.address or "RAY_ADDRESS or a new local cluster"
                    raise ExecutorFailed(
                        f"Could not connect to the Ray cluster at {where}: {exc}."
                    ) from None
        return ray

    def _task(self, ray: Any, fn: Callable[..., Any]) -> Any:
        with self._lock:
            task = self._remote.get(fn)
            if task is None:
                options: dict[str, Any] = {
                    "num_cpus": self.num_cpus,
                    "max_retries": self.max_retries,
                    "retry_exceptions": False,
                }
                if self.memory_mb is not None:
                    options["memory"] = self.memory_mb * 1024 * 1024
                if self.resource:
                    options["resources"] = {self.resource: 1}
                task = self._remote[fn] = ray.remote(fn).options(**options)
            return task

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if not items:
            return []
        ray = self._connect()
        if self.resource and self.resource not in ray.cluster_resources():
            # Ray would queue the tasks forever, waiting for a node that has it.
            raise ExecutorFailed(
                f"No node of the Ray cluster has the resource '{self.resource}'.",
                hint="Start the nodes that have it with ray start --resources "
                f"'{{\"{self.resource}\": 4}}', or change [train] ray_resource.",
            )
        task = self._task(ray, fn)
        refs = [task.remote(item) for item in items]
        lost = infrastructure_errors(ray)
        results: list[R] = []
        try:
            for ref in refs:
                try:
                    results.append(ray.get(ref))
                except ray.exceptions.RayTaskError as exc:
                    if isinstance(exc.cause, lost):
                        raise self._lost(exc.cause) from None
                    raise exc.as_instanceof_cause() from None  # a bug in fn: not ours to hide
                except lost as exc:
                    raise self._lost(exc) from None
        except BaseException:
            for ref in refs[len(results) :]:
                ray.cancel(ref, force=False)
            raise
        return results

    def _lost(self, exc: BaseException) -> ExecutorFailed:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return ExecutorFailed(
            f"A Ray task was lost {self.max_retries + 1} times "
            f"({type(exc).__name__}: {first.rstrip('.')})."
        )

"""Executors: the demo trained on a real local Ray cluster equals the thread pool's run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from click.testing import CliRunner
from conftest import copy_repo, seed_env
from test_train import history

import skillvc.training.evaluate
from skillvc.cli import cli
from skillvc.core.errors import ExecutorFailed
from skillvc.core.store import open_store
from skillvc.models.executors import Call, ThreadExecutor, run_call
from skillvc.models.executors.ray_cluster import RayExecutor
from skillvc.training.loop import train
from skillvc.workspace.workspace import open_workspace

RAY = {"train": {"executor": "ray"}}
# Executor runs send nothing ahead (training/loop.py), so the threads run they are compared
# with does not speculate either: speculation only adds calls, never changes the record.
THREADS = {"train": {"speculate": False}}


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One real local Ray cluster per test process (each xdist worker starts its own)."""
    # The workers inherit this environment: how ``dies_once`` finds its marker.
    os.environ[MARKER] = str(tmp_path_factory.mktemp("ray") / "died")
    # The workers cannot import this test module: its task functions travel by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        resources={"agent_cli": 4},
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


def train_demo(repo: Path, overrides: dict | None = None) -> dict:
    summary = train(open_workspace(repo), overrides=overrides)
    assert summary.steps > 0
    return history(repo)


def events(repo: Path) -> list[tuple]:
    """Every event but model calls in log order, then the calls (recorded in the order
    threads finish, so compared as a set of keys and answers)."""
    with open_store(repo / ".skillvc/events.db") as store:
        rows = store.query(
            # Not the key: a commit's is its gate event's global id, which depends on how the
            # run's calls (logged as they finish) interleave with it.
            "SELECT type, run_id, step, seq FROM events WHERE type != 'model.call' ORDER BY id"
        )
        calls = store.query(
            "SELECT key, json_extract(payload, '$.response') AS response FROM events "
            "WHERE type = 'model.call' ORDER BY key"
        )
    return [tuple(r.values()) for r in rows] + [tuple(c.values()) for c in calls]


@pytest.fixture(scope="module")
def on_threads(demo_seed: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The demo trained on the thread pool, once for the module's Ray runs to be compared with:
    (repo, its history). Never written to."""
    repo = copy_repo(demo_seed, tmp_path_factory.mktemp("threads") / "repo")
    with seed_env(repo):  # made before any test's isolated_env, as conftest's demo_trained
        return repo, train_demo(repo, THREADS)


def test_the_demo_trains_on_ray_to_the_same_skill_commits_and_events(
    ray_cluster: None, on_threads: tuple[Path, dict], demo_seed: Path, tmp_path: Path
) -> None:
    threads, expected = on_threads
    on_ray = copy_repo(demo_seed, tmp_path / "ray")
    got = train_demo(on_ray, RAY)
    assert got == expected
    assert events(on_ray) == events(threads)


MARKER = "SKILLVC_TEST_DIE_ONCE"


def dies_once(call: Call) -> object:
    """``run_call``, but the first call ever made kills its worker process (a lost worker)."""
    try:
        Path(os.environ[MARKER]).touch(exist_ok=False)
    except FileExistsError:
        return run_call(call)
    os._exit(1)


def test_a_killed_worker_is_retried_and_the_run_still_matches(
    ray_cluster: None,
    on_threads: tuple[Path, dict],
    demo_seed: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = on_threads[1]
    marker = Path(os.environ[MARKER])
    assert not marker.exists()
    monkeypatch.setattr(skillvc.training.evaluate, "run_call", dies_once)
    got = train_demo(copy_repo(demo_seed, tmp_path / "ray"), RAY)
    assert marker.exists()  # a worker did die
    assert got == expected


def _always_dies(i: int) -> int:
    os._exit(1)


def test_results_come_back_in_item_order(ray_cluster: None) -> None:
    executor = RayExecutor()
    assert executor.map(_slower_first, list(range(6))) == list(range(6))


def test_the_thread_executor_returns_results_in_item_order_too() -> None:
    assert ThreadExecutor(4).map(_slower_first, list(range(6))) == list(range(6))


def _slower_first(i: int) -> int:
    import time

    time.sleep(0.05 * (6 - i))
    return i


def test_a_worker_lost_more_often_than_the_retries_stops_with_one_clear_error(
    ray_cluster: None,
) -> None:
    with pytest.raises(ExecutorFailed, match=r"^A Ray task was lost 1 times \(WorkerCrashedError"):
        RayExecutor(max_retries=0).map(_always_dies, [1])


def demo_with_executor(
    seed: Path, dest: Path, monkeypatch: pytest.MonkeyPatch, executor: str
) -> Path:
    """A copy of the demo with ``[train] executor`` set, made the working directory."""
    repo = copy_repo(seed, dest)
    toml = repo / "skillvc.toml"
    toml.write_text(toml.read_text().replace("[train]\n", f'[train]\nexecutor = "{executor}"\n'))
    monkeypatch.chdir(repo)
    return repo


def test_an_unknown_executor_is_one_clear_error(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo_with_executor(demo_seed, tmp_path / "r", monkeypatch, "dask")
    result = CliRunner().invoke(cli, ["train", "-q"])
    assert result.exit_code == 5
    assert "[train] executor 'dask' is not one of threads, ray." in result.output


def test_tasks_ask_for_their_resources_and_a_missing_one_is_one_clear_error(
    ray_cluster: None,
) -> None:
    on_agent_nodes = RayExecutor(num_cpus=0.5, memory_mb=64, resource="agent_cli")
    assert on_agent_nodes.map(_slower_first, [4, 5]) == [4, 5]
    with pytest.raises(ExecutorFailed) as err:
        RayExecutor(resource="gpu_box").map(_slower_first, [5])
    assert str(err.value) == "No node of the Ray cluster has the resource 'gpu_box'."
    assert err.value.hint == (
        "Start the nodes that have it with ray start --resources '{\"gpu_box\": 4}', "
        "or change [train] ray_resource."
    )


def test_executor_ray_without_ray_installed_is_one_clear_error(
    demo_seed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = demo_with_executor(demo_seed, tmp_path / "r", monkeypatch, "ray")
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` sees without the extra
    result = CliRunner().invoke(cli, ["train", "-q"])
    assert result.exit_code == 5
    assert '[train] executor = "ray" needs Ray, which is not installed.' in result.output
    assert "pip install 'skillvc[ray]'" in result.output
    with open_store(repo / ".skillvc/events.db") as store:
        assert (
            store.query("SELECT COUNT(*) AS n FROM events WHERE type = 'model.call'")[0]["n"] == 0
        )

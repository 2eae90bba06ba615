"""Train, eval and profile on a Ray cluster (`--ray ADDRESS`), with the result of a run here.

- **Workers.** `--ray-workers` actors (`EpisodeWorker`), each with the run's agents and its own
  coordinator, loaded once (the GGUF sha-checked there; the embedded one assembled there) and
  kept with its KV sessions. The driver hands out whole tasks (a task's consecutive units), so a
  worker's KV prefix and memo serve all the candidates of a task, as here. A worker plays its
  units `threads` at a time: network waits overlap inside a worker and across the cluster.
  API keys come from the workers' own environment (the pool names variables, never values), so
  no key travels in a unit, the runtime environment or a log.
- **One source of truth.** A `Keeper` actor on the driver's node holds the run's budget and
  reads and writes the driver's caches (replies, grades, hidden states): a worker gets what the
  driver already has, and what it makes is stored before its episode goes on. Every reservation
  goes through the keeper, so the cluster together never passes `--budget-usd`. Units rerun
  after a crash find the replies their first try paid for in the cache, and the keeper takes
  back what the dead try settled (`Keeper.void`): each reply counts once.
- **Same result.** Hidden states decide everything, so every worker must make them with the
  driver's numerics (llama.cpp version, ggml CPU features, batch, sliding window) and the same
  trinity, on the thread count the driver gives it; a worker that differs is refused with both
  named (exit 3), never mixed in. (The thread count does not change a state's bits here: a
  local run on more threads writes the same head, which the tests check.)
- **Faults.** A worker that dies is replaced and its units rerun; each unit's result is taken
  once. The driver's own checkpoint (train) covers the driver.
- `--ray local` starts a private cluster for the run and shuts it down after; any other
  address is `ray.init`'s (`auto`: the running cluster). Ray is imported only here.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from trinity_cli import __version__
from trinity_cli.core.budget import Budget
from trinity_cli.errors import BudgetExceeded, ConfigError, UsageError
from trinity_cli.pool.providers import kind_of
from trinity_cli.pool.spec import Pool
from trinity_cli.tasks.taskset import Task

NETWORK_CPUS = 0.5  # a worker whose agents all wait on the network: 4 fit on 2 CPUs
START_TIMEOUT_S = 600.0  # loading a worker: the GGUF (assembled on a fresh node) and the agents


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'trinity-cli[ray]'") from None
    return ray


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker builds its side of the run from; no secrets (AgentSpec names env vars)."""

    pool: Pool
    tasks: tuple[Task, ...]  # the run's task set (replay and sim agents check and read them)
    backbone_sha256: str
    n_threads: int  # each worker's coordinator threads: the CPUs it holds (at least 1)
    threads: int  # units in flight at once on a worker
    formats: tuple[str, ...]  # transcript formats the run's policies read


def worker_identity(numerics: dict[str, Any], n_threads: int) -> dict[str, Any]:
    """What must match between driver and workers for their states to be the same bits."""
    return {"trinity": __version__, **numerics, "n_threads": n_threads}


def identity_mismatch(driver: dict[str, Any], worker: dict[str, Any]) -> str | None:
    differing = [
        key for key in sorted(set(driver) | set(worker)) if driver.get(key) != worker.get(key)
    ]
    if not differing:
        return None
    return "; ".join(
        f"{key}: driver {driver.get(key)!r}, worker {worker.get(key)!r}" for key in differing
    )


class Keeper:
    """On the driver's node: the run's budget and the driver's caches, for every worker."""

    def __init__(self, paths: dict[str, str | None]) -> None:
        from trinity_cli.coordinator.memo import MemoCoordinator
        from trinity_cli.providers.cache import ResponseStore
        from trinity_cli.store.table import KeyValueStore, MemoryTable, Table
        from trinity_cli.tasks.grading import Grader

        schemas = {
            "replies": ResponseStore.SCHEMA, "grades": Grader.SCHEMA,
            "states": MemoCoordinator.SCHEMA,
        }
        self.tables: dict[str, Table] = {
            name: KeyValueStore(Path(path), *schemas[name]) if path else MemoryTable()
            for name, path in paths.items()
        }
        self.budget = Budget()
        self.held: dict[str, float] = {}  # per attempt: reserved and not yet settled
        self.settled: dict[str, float] = {}  # per attempt: settled

    def get(self, table: str, key: str) -> Any:
        return self.tables[table].get(key)

    def put(self, table: str, key: str, value: Any) -> None:
        self.tables[table].put(key, value)

    def count(self, table: str) -> int:
        return self.tables[table].count()

    def load_budget(self, state: dict[str, Any]) -> None:
        self.budget = Budget(**state)

    def budget_state(self) -> dict[str, Any]:
        return budget_state(self.budget)

    def reserve(self, worst_case_usd: float, attempt: str) -> str | None:
        """None, or the refusal's message. `attempt` names the worker's try at its units."""
        try:
            self.budget.reserve(worst_case_usd)
        except BudgetExceeded as refused:
            return refused.message
        self.held[attempt] = self.held.get(attempt, 0.0) + worst_case_usd
        return None

    def settle(self, usd: float, reserved_usd: float, attempt: str) -> None:
        self.budget.settle(usd, reserved_usd)
        self.held[attempt] = self.held.get(attempt, 0.0) - reserved_usd
        self.settled[attempt] = self.settled.get(attempt, 0.0) + usd

    def finished(self, attempt: str) -> None:
        self.held.pop(attempt, None)
        self.settled.pop(attempt, None)

    def void(self, attempt: str) -> None:
        """A worker died during `attempt`; its units run again. What it settled is taken back
        (the rerun settles those replies again, from the cache: each counts once); a call it
        had in flight counts at its reservation, as it may have been billed."""
        in_flight = max(0.0, self.held.pop(attempt, 0.0))
        self.budget.take_back(in_flight, self.settled.pop(attempt, 0.0))


def budget_state(budget: Budget) -> dict[str, Any]:
    return {f.name: getattr(budget, f.name) for f in fields(budget) if not f.name.startswith("_")}


class KeptTable:
    """A worker's view of one of the keeper's tables (store.Table)."""

    def __init__(self, keeper: Any, table: str) -> None:
        self.keeper, self.table = keeper, table

    def get(self, key: str) -> Any | None:
        return _ray().get(self.keeper.get.remote(self.table, key))

    def put(self, key: str, value: Any) -> None:
        # stored before the episode goes on
        _ray().get(
            self.keeper.put.remote(self.table, key, value)
        )

    def count(self) -> int:
        return int(_ray().get(self.keeper.count.remote(self.table)))


class KeptBudget(Budget):
    """A worker's budget: every reservation and settlement is the keeper's."""

    def __init__(self, keeper: Any) -> None:
        super().__init__()
        self.keeper = keeper
        self.attempt = ""  # the units being played (EpisodeWorker.run sets it)

    def reserve(self, worst_case_usd: float) -> None:
        refusal = _ray().get(self.keeper.reserve.remote(worst_case_usd, self.attempt))
        if refusal is not None:
            self.refusal = refusal
            raise BudgetExceeded(refusal)

    def settle(self, usd: float, reserved_usd: float) -> None:
        _ray().get(self.keeper.settle.remote(usd, reserved_usd, self.attempt))


class EpisodeWorker:
    """One worker: the run's players, built once; plays the units it is handed."""

    def __init__(self, spec: WorkerSpec, keeper: Any) -> None:
        from trinity_cli.coordinator.llama import LlamaCoordinator
        from trinity_cli.coordinator.memo import MemoCoordinator
        from trinity_cli.providers.cache import ResponseStore
        from trinity_cli.providers.registry import build_agents
        from trinity_cli.runtime import backbone_of, coordinator_path
        from trinity_cli.tasks.grading import Grader
        from trinity_cli.train.runner import Players

        pool = spec.pool
        sha = backbone_of(pool).sha256
        if sha != spec.backbone_sha256:
            raise ConfigError(
                f"the coordinator GGUF on worker {os.uname().nodename} has sha256 {sha}; "
                f"the driver's is {spec.backbone_sha256}"
            )
        coordinators = {
            fmt: MemoCoordinator(
                LlamaCoordinator(
                    coordinator_path(pool), n_ctx=pool.coordinator.n_ctx, n_threads=spec.n_threads,
                    token_position=pool.coordinator.token_position, sessions=spec.threads,
                    transcript_format=fmt,
                ),
                sha, table=KeptTable(keeper, "states"),
            )
            for fmt in spec.formats
        }
        self.store = store = ResponseStore(None, KeptTable(keeper, "replies"))
        agents = build_agents(
            pool.agents, spec.tasks, store, coordinator_model=pool.coordinator.model
        )
        self.players = Players(
            agents, Grader(table=KeptTable(keeper, "grades")), coordinators, KeptBudget(keeper)
        )
        self.threads = spec.threads
        self.identities = {
            fmt: worker_identity(c.numerics, c.inner.n_threads) for fmt, c in coordinators.items()
        }

    def counts(self) -> dict[str, int]:
        """What this worker's caches answered and did, for the driver's figures."""
        memo = list(self.players.coordinators.values())
        return {
            "reply_hits": self.store.stats.hits, "reply_misses": self.store.stats.misses,
            "memo_hits": sum(m.hits for m in memo), "memo_misses": sum(m.misses for m in memo),
            "grades_run": self.players.grader.runs,
        }

    def identity(self) -> dict[str, Any]:
        return {"node": os.uname().nodename, "formats": self.identities}

    def run(self, units: Sequence[Any], attempt: str) -> list[Any]:
        from trinity_cli.train.runner import LocalRunner

        self.players.budget.attempt = attempt  # type: ignore[union-attr]  # one run at a time per worker
        return LocalRunner(self.players, self.threads).map(units, self.players.budget)


@dataclass
class RayRunner:
    """train/runner.Runner on a cluster: whole tasks to free workers, results in unit order."""

    spec: WorkerSpec
    workers: int
    cpus_per_worker: float
    keeper: Any
    # transcript format → the driver's identity (worker_identity)
    expected: dict[
        str, dict[str, Any]
    ]
    warn: Callable[[str], None]
    # adds workers' cache figures (EpisodeWorker.counts) to the driver's
    tally: Callable[
        [dict[str, int]], None
    ]

    def __post_init__(self) -> None:
        ray = _ray()
        self._actor = ray.remote(EpisodeWorker)
        self.actors = [self._start() for _ in range(self.workers)]
        self.identities = [self._check(actor) for actor in self.actors]
        self.counted: list[dict[str, int]] = [{} for _ in self.actors]
        self.attempts = 0

    def _start(self) -> Any:
        return self._actor.options(num_cpus=self.cpus_per_worker).remote(self.spec, self.keeper)

    def _check(self, actor: Any) -> dict[str, Any]:
        ray = _ray()
        ready, _ = ray.wait([ref := actor.identity.remote()], timeout=START_TIMEOUT_S)
        if not ready:
            raise ConfigError(
                f"a Ray worker did not start within {START_TIMEOUT_S:.0f} s (does the cluster have "
                f"{self.cpus_per_worker:g} CPU free for each of {self.workers} workers?)"
            )
        try:
            identity = ray.get(ref)
        except ray.exceptions.RayTaskError as failed:
            raise _cause(failed) from None
        # its __init__ raised (say, another GGUF there)
        except (
            ray.exceptions.RayActorError
        ) as failed:
            cause = getattr(failed, "cause", None) or getattr(
                getattr(failed, "error", None), "cause", None
            )
            reason = cause.message if isinstance(cause, ConfigError) else _first_line(failed)
            raise ConfigError(f"a Ray worker failed to start: {reason}") from None
        for fmt, driver in self.expected.items():
            differs = identity_mismatch(driver, identity["formats"].get(fmt, {}))
            if differs:
                raise ConfigError(
                    f"Ray worker on {identity['node']} makes other hidden states than the driver "
                    f"({differs}); its states would change the result, so it is refused"
                )
        return identity

    def map(
        self, units: Sequence[Any], budget: Budget | None,
        on_result: Callable[[], None] = lambda: None,
    ) -> list[Any]:
        ray = _ray()
        ray.get(self.keeper.load_budget.remote(budget_state(budget or Budget())))
        chunks: list[list[int]] = []  # consecutive units of one task: one worker plays them
        for index, unit in enumerate(units):
            if chunks and units[chunks[-1][0]].task_id == unit.task_id:
                chunks[-1].append(index)
            else:
                chunks.append([index])
        results: list[Any] = [None] * len(units)
        todo, idle = deque(range(len(chunks))), list(range(len(self.actors)))
        running: dict[Any, tuple[int, int, str]] = {}
        try:
            while todo or running:
                while todo and idle:
                    worker, chunk = idle.pop(), todo.popleft()
                    self.attempts += 1
                    attempt = f"{self.attempts}"
                    ref = self.actors[worker].run.remote([units[i] for i in chunks[chunk]], attempt)
                    running[ref] = (worker, chunk, attempt)
                done, _ = ray.wait(list(running), num_returns=1)
                worker, chunk, attempt = running.pop(done[0])
                try:
                    played = ray.get(done[0])
                # the worker died: replace it, play its units again
                except (
                    ray.exceptions.RayActorError
                ):
                    ray.get(self.keeper.void.remote(attempt))
                    self.actors[worker] = self._start()
                    self.identities[worker] = self._check(self.actors[worker])
                    self.counted[worker] = {}
                    self.warn(
                        f"Ray worker {worker} died; replaced it and rerunning its "
                        f"{len(chunks[chunk])} episodes"
                    )
                    todo.appendleft(chunk)
                except ray.exceptions.RayTaskError as failed:
                    raise _cause(failed) from None
                else:
                    self.keeper.finished.remote(attempt)
                    for i, result in zip(chunks[chunk], played):
                        results[i] = result
                        on_result()
                idle.append(worker)
        finally:
            if budget is not None:
                for name, value in ray.get(self.keeper.budget_state.remote()).items():
                    setattr(budget, name, value)
        for i, counts in enumerate(ray.get([actor.counts.remote() for actor in self.actors])):
            self.tally({key: value - self.counted[i].get(key, 0) for key, value in counts.items()})
            self.counted[i] = counts
        return results

    def close(self) -> None:
        ray = _ray()
        for actor in [*self.actors, self.keeper]:
            ray.kill(actor)


def _cause(failed: Any) -> BaseException:
    """The exception a unit raised on a worker, as if raised here (its CLI exit code intact)."""
    cause = getattr(failed, "cause", None)
    return cause if isinstance(cause, BaseException) else failed


def connect(address: str) -> bool:
    """ray.init for `--ray ADDRESS`; True when this run started its own (private) cluster."""
    import logging

    # Ray's C++ retries would print a line a second
    os.environ.setdefault(
        "RAY_BACKEND_LOG_LEVEL", "error"
    )
    ray = _ray()
    local = address == "local"
    reachable(address)
    try:
        ray.init(
            address=address, include_dashboard=False if local else None, log_to_driver=False,
            logging_level=logging.ERROR, configure_logging=True,
        )
    except ValueError as failed:  # a malformed address
        raise UsageError(f"--ray {address}: {_first_line(failed)}") from None
    except (ConnectionError, RuntimeError) as failed:
        message = _first_line(failed)
        if "Could not find any running Ray instance" in message:
            message = (
                "no running Ray cluster found here (start one with `ray start --head`, or use "
                "--ray local)"
            )
        elif "RAY_AUTH_MODE" not in os.environ and not local and address != "auto":
            message += (
                "; a cluster with token authentication needs RAY_AUTH_MODE=token with an explicit "
                "address (Ray's rule)"
            )
        raise ConfigError(f"--ray {address}: cannot reach a Ray cluster: {message}") from None
    return local


def _first_line(failed: BaseException) -> str:
    text = str(failed).strip()
    return text.splitlines()[0] if text else type(failed).__name__


def reachable(address: str) -> None:
    """A HOST:PORT that refuses connections fails here at once (ray.init would retry for
    minutes)."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # auto, local, or a form Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as failed:
        raise ConfigError(
            f"--ray {address}: cannot reach a Ray cluster: {failed.strerror or failed}"
        ) from None


@contextmanager
def ray_runner(
    address: str, workers: int | None, pool: Pool, tasks: Sequence[Task], *, threads: int,
    coordinators: dict[str, Any], backbone_sha256: str, caches: Any, warn: Callable[[str], None],
) -> Iterator[RayRunner]:
    """A RayRunner for the run, its keeper on this node; everything is shut down on exit.

    `coordinators` are the driver's, by transcript format: the workers must match their numerics."""
    ray = _ray()
    # a library caller may have connected
    started_here = (
        False if ray.is_initialized() else connect(address)
    )
    runner = keeper = None
    try:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        workers, cpus = cpu_shares(
            workers, float(ray.cluster_resources().get("CPU", 1)), network_bound(pool)
        )
        n_threads = max(1, int(cpus))
        paths = {
            "replies": str(caches.responses.path), "grades": _str(caches.grader.path),
            "states": _str(caches.memo_path),
        }
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        keeper = ray.remote(Keeper).options(num_cpus=0, scheduling_strategy=here).remote(paths)
        spec = WorkerSpec(
            pool, tuple(tasks), backbone_sha256, n_threads, threads, tuple(coordinators)
        )
        expected = {fmt: worker_identity(c.numerics, n_threads) for fmt, c in coordinators.items()}

        def tally(counts: dict[str, int]) -> None:
            caches.responses.stats.hits += counts["reply_hits"]
            caches.responses.stats.misses += counts["reply_misses"]
            caches.grader.runs += counts["grades_run"]
            for memo in list(coordinators.values())[:1]:
                memo.hits += counts["memo_hits"]
                memo.misses += counts["memo_misses"]

        runner = RayRunner(spec, workers, cpus, keeper, expected, warn, tally)
        yield runner
    finally:
        if runner is not None:
            runner.close()
        elif keeper is not None:
            ray.kill(keeper)
        if started_here:
            ray.shutdown()


def network_bound(pool: Pool) -> bool:
    """Every agent waits on a network (its kind's `network`): workers then ask Ray for less CPU."""
    return all(kind_of(a.provider).network for a in pool.agents)


def cpu_shares(workers: int | None, cluster_cpus: float, network_bound: bool) -> tuple[int, float]:
    """(workers, CPUs each asks Ray for): network-bound workers half a CPU (4 fit on 2), others
    their whole share of the cluster's CPUs; more workers than that fits share what there is
    (never more than the cluster has, or Ray would hold the rest back for ever)."""
    if workers is None:
        workers = max(1, int(cluster_cpus / NETWORK_CPUS) if network_bound else int(cluster_cpus))
    share = cluster_cpus / workers
    if network_bound:
        return workers, min(NETWORK_CPUS, share)
    return workers, float(int(share)) if share >= 1 else share


def _str(path: Path | None) -> str | None:
    return None if path is None else str(path)

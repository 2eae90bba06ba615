"""`--ray` and `--ray-workers`: where train, eval and profile play their episodes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Annotated, Any

import typer

from trinity_cli.cli.console import stderr, warn

RayAddress = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="Play the episodes on a Ray cluster: 'auto' (the running one), an address, or 'local' "
        "(a private cluster for this run). Needs the ray extra. The result is the same as without.",
    ),
]
RayWorkers = Annotated[
    int | None,
    typer.Option(
        "--ray-workers", min=1,
        help="Ray workers (each loads the coordinator once). Default: as many as the cluster's "
        "CPUs hold; more share them.",
    ),
]


def check_ray_flags(address: str | None, workers: int | None) -> None:
    from trinity_cli.errors import UsageError

    if workers is not None and address is None:
        raise UsageError("--ray-workers needs --ray")


def runner_for(
    address: str | None, workers: int | None, tasks: Sequence[Any], *, quiet: bool = False
) -> Callable[[Any, dict[str, Any]], AbstractContextManager[Any]]:
    """Where a run plays (runtime.RunnerFactory): a RayRunner under --ray, shut down on exit,
    its workers loading the coordinators they are given; else here."""
    from trinity_cli.runtime import play_here

    if address is None:
        return play_here
    return lambda run, coordinators: _announced(
        address, workers, run.pool, tasks, run.workers, coordinators, run.caches, quiet
    )


@contextmanager
def _announced(
    address: str, workers: int | None, pool: Any, tasks: Sequence[Any], threads: int,
    coordinators: dict[str, Any], caches: Any, quiet: bool,
) -> Iterator[Any]:
    from trinity_cli.runtime import backbone_of
    from trinity_cli.train.ray_runner import ray_runner

    with ray_runner(
        address, workers, pool, tasks, threads=threads, coordinators=coordinators,
        backbone_sha256=backbone_of(pool).sha256, caches=caches,
        warn=warn,
    ) as runner:
        if not quiet:
            nodes = sorted({identity["node"] for identity in runner.identities})
            stderr.print(
                f"playing on {runner.workers} Ray workers ({runner.cpus_per_worker:g} CPU and "
                f"{runner.spec.n_threads} coordinator threads each) on {', '.join(nodes)}",
                markup=False, highlight=False,
            )
        yield runner

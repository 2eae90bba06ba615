"""`--ray` and `--ray-workers`: where train, eval and profile play their episodes."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Annotated, Any

import typer

from trinity_cli.cli.console import stderr

RayAddress = Annotated[str | None, typer.Option(
    "--ray", help="Play the episodes on a Ray cluster: 'auto' (the running one), an address, or 'local' "
    "(a private cluster for this run). Needs the ray extra. The result is the same as without.")]
RayWorkers = Annotated[int | None, typer.Option(
    "--ray-workers", min=1, help="Ray workers (each loads the coordinator once). Default: as many as the cluster's CPUs hold.")]


def check_ray_flags(address: str | None, workers: int | None) -> None:
    from trinity_cli.errors import UsageError

    if workers is not None and address is None:
        raise UsageError("--ray-workers needs --ray")


def runner_for(address: str | None, workers: int | None, pool: Any, tasks: Sequence[Any], *, threads: int,
               coordinators: dict[str, Any], caches: Any) -> AbstractContextManager[Any]:
    """A RayRunner under --ray (shut down on exit), else None (the run plays here)."""
    if address is None:
        return nullcontext(None)
    from trinity_cli.cluster import ray_runner
    from trinity_cli.runtime import backbone_of

    return ray_runner(address, workers, pool, tasks, threads=threads, coordinators=coordinators,
                      backbone_sha256=backbone_of(pool).sha256, caches=caches,
                      warn=lambda msg: stderr.print(f"warning: {msg}", markup=False, highlight=False))

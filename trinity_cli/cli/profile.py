"""`trinity profile`: measure each agent of a pool for the universal head."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any

import typer

from trinity_cli.cli import options as opt
from trinity_cli.cli.cluster_options import RayAddress, RayWorkers, check_ray_flags, runner_for
from trinity_cli.cli.console import say_unless, stderr, to_stdout, warn

HELP = """Measure each agent's profile for the universal head: its pass rate on N calibration tasks
of the train split (the same tasks for every agent), a skill vector fitted on those tasks'
states, and its $ per answer (see docs/profiles.md). Each agent answers every task once as a
single Worker, through the response cache; the worst-case $ is shown before anything is
called, and --budget-usd stops before spend could exceed it (exit 5).

Profiles are stored in the user data dir, keyed by everything that changes the agent's answers
or the profile's meaning (provider, model, base_url, temperature, mode, max_tokens, the
coordinator, the head's basis, the task ids and N), never by the name alone; an agent already
profiled on these tasks is skipped unless --refresh. Then `solve` and `eval` route the pool with
the universal head when no pool-specific head fits. `trinity pool` shows the profiles.

\b
Example: trinity profile --pool my-pool.toml --tasks humaneval --n 40"""


def profile(
    pool: opt.Pool = None, tasks: opt.Tasks = "humaneval",
    n: Annotated[int, typer.Option("--n", min=2, help="Calibration tasks per agent.")] = 40,
    weights: Annotated[
        str,
        typer.Option(
            "--weights", help="The universal head whose basis the skills are measured in."
        ),
    ] = "universal",
    budget_usd: opt.BudgetUsd = None,
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Measure again even where a profile exists.")
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the profiles as one JSON object.")
    ] = False,
    no_cache: opt.NoCache = False, no_log: opt.NoLog = False, offline: opt.Offline = False,
    quiet: opt.Quiet = False, ray: RayAddress = None, ray_workers: RayWorkers = None,
) -> int:
    from rich.progress import Progress

    from trinity_cli.runtime import load_run_pool
    from trinity_cli.train.profile import plan_profiles, profile_pool

    check_ray_flags(ray, ray_workers)
    job = plan_profiles(load_run_pool(pool, offline, budget_usd), tasks, n, weights)
    say = say_unless(quiet)

    def planned(todo: list[Any], worst: float) -> None:
        say(
            f"profiling {len(todo)} of {len(job.pool.agents)} agents on {n} tasks of "
            f"{tasks}:train ({len(todo) * n} calls); worst case ${worst:.4f}"
        )

    shown = not quiet and stderr.is_terminal
    with Progress(console=stderr, transient=True, disable=not shown) as progress:

        def on_agent(name: str) -> Callable[[], None]:
            bar = progress.add_task(name, total=n)
            return lambda: progress.advance(bar)

        result = profile_pool(
            job, refresh=refresh, budget_usd=budget_usd, no_cache=no_cache, log=not no_log,
            warn=warn, on_plan=planned, on_agent=on_agent,
            open_runner=runner_for(ray, ray_workers, job.all_tasks, quiet=quiet),
        )
    if json_out:
        to_stdout(json.dumps(result, indent=2) + "\n")
        return 0
    for name, p in result["agents"].items():
        skill = sum(x * x for x in p["skill"]) ** 0.5
        say(
            f"{name}: pass rate {p['pass_rate']:.3f}, ${p['usd_per_answer']:.5f}/answer, "
            f"skill |s| {skill:.3f}"
        )
    return 0

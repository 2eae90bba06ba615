"""`trinity profile`: measure each agent of a pool for the universal head."""

from __future__ import annotations

import json
from contextlib import closing
from typing import Annotated

import typer

from trinity_cli.cli.cluster_options import RayAddress, RayWorkers, check_ray_flags, runner_for
from trinity_cli.cli.console import stderr
from trinity_cli.cli.options import PoolOption, TasksOption

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
    pool: PoolOption = None,
    tasks: TasksOption = "humaneval",
    n: Annotated[int, typer.Option("--n", min=2, help="Calibration tasks per agent.")] = 40,
    weights: Annotated[
        str,
        typer.Option(
            "--weights", help="The universal head whose basis the skills are measured in."
        ),
    ] = "universal",
    budget_usd: Annotated[
        float | None,
        typer.Option("--budget-usd", min=0.0, help="Stop before spend could exceed this (exit 5)."),
    ] = None,
    refresh: Annotated[
        bool, typer.Option("--refresh", help="Measure again even where a profile exists.")
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the profiles as one JSON object.")
    ] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache")] = False,
    no_log: Annotated[
        bool, typer.Option("--no-log", help="Do not write this run to the run log.")
    ] = False,
    offline: Annotated[
        bool, typer.Option("--offline", help="Refuse agents that need the network (exit 3).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    ray: RayAddress = None,
    ray_workers: RayWorkers = None,
) -> int:
    from rich.progress import Progress

    from trinity_cli.core.budget import Budget
    from trinity_cli.errors import BudgetExceeded, ConfigError, UsageError
    from trinity_cli.heads.files import in_head_format, is_universal, load_head, mismatches, resolve
    from trinity_cli.heads.profile_store import ProfileStore
    from trinity_cli.runtime import backbone_of, build_run, load_run_pool, profile_scale
    from trinity_cli.store.runlog import disabled, summary_row
    from trinity_cli.tasks.taskset import gradable, load_tasks, select_split
    from trinity_cli.train.plan import episode_worst_usd
    from trinity_cli.train.profile import calibration_tasks, problem_states, profile_agent
    from trinity_cli.train.runner import LocalRunner, Players

    check_ray_flags(ray, ray_workers)
    pool_cfg = load_run_pool(pool, offline, budget_usd)
    head_path = resolve(weights)
    head, meta = load_head(head_path)
    if not is_universal(meta):
        raise ConfigError(
            f"--weights {weights}: {head_path} is a pool-specific head; profiles are measured for a universal head"
        )
    backbone = in_head_format(meta, backbone_of(pool_cfg))
    problems = mismatches(meta, backbone, pool_cfg)
    if problems:  # the states would come from another coordinator than the head's
        raise ConfigError(
            f"--weights {weights}: {head_path} does not read this pool's coordinator: "
            + "; ".join(problems)
        )
    all_tasks = load_tasks(tasks)
    calibration = calibration_tasks(gradable(select_split(all_tasks, "train"))[0], n)
    if len(calibration) < n:
        raise UsageError(
            f"task set {tasks} has {len(calibration)} gradable training tasks; --n {n} needs as many"
        )
    task_ids = [t.task_id for t in calibration]
    scale = profile_scale(meta)
    with closing(ProfileStore()) as store:
        todo = [
            spec for spec in pool_cfg.agents if refresh or store.get(spec, scale, task_ids) is None
        ]
        worst = sum(episode_worst_usd(t, [spec], 1) for spec in todo for t in calibration)
        if not quiet:
            stderr.print(
                f"profiling {len(todo)} of {len(pool_cfg.agents)} agents on {n} tasks of {tasks}:train "
                f"({len(todo) * n} calls); worst case ${worst:.4f}",
                markup=False,
                highlight=False,
            )
        budget = Budget(budget_usd)
        settings = {"n": n, "refresh": refresh, "budget_usd": budget_usd}
        with summary_row(
            "profile",
            f"{tasks}:train",
            pool_cfg,
            str(head_path),
            settings,
            enabled=not disabled(no_log),
            warn=lambda msg: stderr.print(f"warning: {msg}", markup=False),
        ) as logged:
            if (
                todo
            ):  # the agents first: a record that lacks tasks of the set fails before any encoding
                run = build_run(pool_cfg, all_tasks, no_cache)
                states = problem_states(
                    calibration, run.coordinator(backbone.transcript_format, sessions=1), head
                )
                done: list[str] = []
                with (
                    runner_for(
                        ray,
                        ray_workers,
                        pool_cfg,
                        all_tasks,
                        threads=run.workers,
                        coordinators={},
                        caches=run.caches,
                        quiet=quiet,
                    ) as cluster,
                    Progress(
                        console=stderr, transient=True, disable=quiet or not stderr.is_terminal
                    ) as progress,
                ):
                    runner = cluster or LocalRunner(Players(run.agents, run.caches.grader))
                    for spec in todo:
                        bar = progress.add_task(spec.name, total=n)
                        try:
                            measured = profile_agent(
                                runner,
                                pool_cfg.agents.index(spec),
                                spec.name,
                                calibration,
                                states,
                                budget,
                                on_task=lambda: progress.advance(bar),  # noqa: B023 (used at once)
                            )
                        except BudgetExceeded as exc:
                            # the agents measured so far keep their profiles
                            logged.done("budget", budget.spent_usd, {"profiled": done}, exc.message)
                            raise
                        store.put(spec, scale, task_ids, measured)
                        done.append(spec.name)
            shown = {spec.name: store.get(spec, scale, task_ids) for spec in pool_cfg.agents}
            result = {
                "head": str(head_path),
                "tasks": tasks,
                "n": n,
                "spent_usd": budget.spent_usd,
                "agents": {
                    name: {
                        "pass_rate": p.profile.pass_rate,
                        "usd_per_answer": p.profile.usd_per_answer,
                        "skill": list(p.profile.skill),
                        "created": p.created,
                    }
                    for name, p in shown.items()
                    if p is not None
                },
            }
            logged.done("completed", budget.spent_usd, result, None)
    if json_out:
        print(json.dumps(result, indent=2))
    elif not quiet:
        for name, p in shown.items():
            if p is not None:
                stderr.print(
                    f"{name}: pass rate {p.profile.pass_rate:.3f}, ${p.profile.usd_per_answer:.5f}/answer, "
                    f"skill |s| {sum(x * x for x in p.profile.skill) ** 0.5:.3f}",
                    markup=False,
                    highlight=False,
                )
    return 0

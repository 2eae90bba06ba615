"""Measuring agent profiles (core.profile): each agent answers the calibration tasks once as a
single Worker, through the same episode code, caches and grader as train and eval.

The calibration tasks are the first n of the train split in a fixed hash order (the same n
tasks for every agent and every run), so profiles of one pool are comparable and reused.
A replay agent's pass-rate entries give their recorded probability (exact); every other
answer is graded. The states are the tasks' problem states in the universal head's basis.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import BUDGET
from trinity_cli.core.head import PlanPolicy, UniversalHead
from trinity_cli.core.profile import Profile, measure
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Transcript
from trinity_cli.errors import BudgetExceeded, ConfigError, UsageError
from trinity_cli.pool.spec import AgentSpec, Pool
from trinity_cli.runtime import RunnerFactory, backbone_of, build_run, play_here, profile_scale
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.fitness import Outcome
from trinity_cli.train.runner import Episode, Runner

CALIBRATION_SALT = "trinity-calibration-v1:"


def calibration_tasks(train: Sequence[Task], n: int) -> list[Task]:
    """The first `n` train-split tasks in the calibration hash order."""
    return sorted(
        train, key=lambda t: hashlib.sha256((CALIBRATION_SALT + t.task_id).encode()).digest()
    )[:n]


def problem_states(tasks: Sequence[Task], coordinator: Any, head: UniversalHead) -> np.ndarray:
    """(n, k): each task's problem state in the head's input space."""
    return np.asarray(
        [head.features(coordinator.encode(Transcript(t.problem)).hidden) for t in tasks]
    )


def profile_agent(
    runner: Runner, agent: int, name: str, tasks: Sequence[Task], states: np.ndarray,
    budget: Budget | None = None, on_task: Callable[[], None] = lambda: None,
) -> Profile:
    """One single-Worker episode per task for the pool's `agent` (an index; `name` for errors);
    its profile from the passes and the $."""
    units = [Episode(task, PlanPolicy(1, ((0, Role.WORKER),)), 1, (agent,)) for task in tasks]
    outcomes: list[Outcome] = runner.map(units, budget, on_task)
    refused = next((task for task, o in zip(tasks, outcomes) if o.verdict == BUDGET), None)
    if refused is not None:
        raise BudgetExceeded(
            f"--budget-usd: profiling {name!r} stopped before task {refused.task_id}: "
            f"{budget.refusal if budget else ''}"
        )
    return measure(
        [o.expected for o in outcomes], states, float(np.mean([o.usd for o in outcomes]))
    )


@dataclass(frozen=True)
class ProfileJob:
    """A checked request: the universal head whose basis the skills are measured in, the pool
    and its calibration tasks."""

    pool: Pool
    tasks: str  # the task set's name, as given
    all_tasks: list[Task]
    calibration: list[Task]
    head_path: Path
    head: UniversalHead
    transcript_format: str
    scale: Any  # the head's profile scale: part of every profile's key

    @property
    def task_ids(self) -> list[str]:
        return [t.task_id for t in self.calibration]


def plan_profiles(pool: Pool, tasks: str, n: int, weights: str) -> ProfileJob:
    """The job, or a usage or configuration error before anything is built."""
    from trinity_cli.heads.files import in_head_format, is_universal, load_head, mismatches, resolve
    from trinity_cli.tasks.taskset import gradable, load_tasks, select_split

    head_path = resolve(weights)
    head, meta = load_head(head_path)
    if not is_universal(meta):
        raise ConfigError(
            f"--weights {weights}: {head_path} is a pool-specific head; profiles are measured "
            "for a universal head"
        )
    backbone = in_head_format(meta, backbone_of(pool))
    problems = mismatches(meta, backbone, pool)
    if problems:  # the states would come from another coordinator than the head's
        raise ConfigError(
            f"--weights {weights}: {head_path} does not read this pool's coordinator: "
            + "; ".join(problems)
        )
    all_tasks = load_tasks(tasks)
    calibration = calibration_tasks(gradable(select_split(all_tasks, "train"))[0], n)
    if len(calibration) < n:
        raise UsageError(
            f"task set {tasks} has {len(calibration)} gradable training tasks; --n {n} needs "
            "as many"
        )
    scale = profile_scale(meta)
    return ProfileJob(
        pool, tasks, all_tasks, calibration, head_path, head, backbone.transcript_format, scale
    )


def profile_pool(
    job: ProfileJob, *, refresh: bool = False, budget_usd: float | None = None,
    no_cache: bool = False, log: bool = True, warn: Callable[[str], None] = lambda msg: None,
    on_plan: Callable[[list[AgentSpec], float], None] = lambda todo, worst: None,
    on_agent: Callable[[str], Callable[[], None]] = lambda name: lambda: None,
    open_runner: RunnerFactory = play_here,
) -> dict[str, Any]:
    """Measure and store the profile of every agent not yet profiled on these tasks (all of
    them with `refresh`), with `log` one summary row in the run log; returns every agent's
    stored profile. `on_plan(todo, worst $)` hears the plan first; `on_agent(name)` returns
    what to call after each of that agent's tasks. A budget refusal raises BudgetExceeded; the
    agents measured before it keep their profiles."""
    from trinity_cli.heads.profile_store import ProfileStore
    from trinity_cli.store.runlog import disabled, summary_row
    from trinity_cli.train.plan import episode_worst_usd

    agents, ids = job.pool.agents, job.task_ids
    with closing(ProfileStore()) as store:
        todo = [spec for spec in agents if refresh or store.get(spec, job.scale, ids) is None]
        on_plan(
            todo, sum(episode_worst_usd(t, [spec], 1) for spec in todo for t in job.calibration)
        )
        budget = Budget(budget_usd)
        settings = {"n": len(ids), "refresh": refresh, "budget_usd": budget_usd}
        problem, head = f"{job.tasks}:train", str(job.head_path)
        with summary_row(
            "profile", problem, job.pool, head, settings, enabled=not disabled(not log), warn=warn,
            spent=lambda: budget.spent_usd,
        ) as logged:
            done: list[str] = []
            try:
                _measure(job, store, todo, budget, done, no_cache, on_agent, open_runner)
            except BudgetExceeded as exc:
                logged.done("budget", budget.spent_usd, {"profiled": done}, exc.message)
                raise
            shown = {spec.name: store.get(spec, job.scale, ids) for spec in agents}
            result = {
                "head": head, "tasks": job.tasks, "n": len(ids), "spent_usd": budget.spent_usd,
                "agents": {
                    name: {
                        "pass_rate": p.profile.pass_rate,
                        "usd_per_answer": p.profile.usd_per_answer, "skill": list(p.profile.skill),
                        "created": p.created,
                    }
                    for name, p in shown.items()
                    if p is not None
                },
            }
            logged.done("completed", budget.spent_usd, result, None)
    return result


def _measure(
    job: ProfileJob, store: Any, todo: Sequence[AgentSpec], budget: Budget, done: list[str],
    no_cache: bool, on_agent: Callable[[str], Callable[[], None]],
    open_runner: RunnerFactory,
) -> None:
    """Each agent of `todo` measured and stored in turn, its name then added to `done`."""
    from trinity_cli.train.runner import LocalRunner, Players

    if not todo:
        return
    # the agents first: a record that lacks tasks of the set fails before any encoding
    run = build_run(job.pool, job.all_tasks, no_cache)
    states = problem_states(
        job.calibration, run.coordinator(job.transcript_format, sessions=1), job.head
    )
    with open_runner(run, {}) as cluster:  # an answer alone needs no coordinator
        runner = cluster or LocalRunner(Players(run.agents, run.caches.grader))
        for spec in todo:
            index = job.pool.agents.index(spec)
            measured = profile_agent(
                runner, index, spec.name, job.calibration, states, budget, on_agent(spec.name)
            )
            store.put(spec, job.scale, job.task_ids, measured)
            done.append(spec.name)

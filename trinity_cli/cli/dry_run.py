"""--dry-run's report on stdout: a run's episodes, agent calls and an upper bound of its $,
for `train` and `eval` (nothing is called or written)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trinity_cli.pool.spec import AgentSpec
    from trinity_cli.tasks.taskset import Task
    from trinity_cli.train.es import TrainSettings


def print_plan(
    tasks: list[Task],
    agents: tuple[AgentSpec, ...],
    settings: TrainSettings,
    folds: int,
    starts: int,
) -> None:
    """--dry-run: the run's size and an upper bound of its cost, on stdout."""
    from trinity_cli.train.plan import plan_training

    plan = plan_training(tasks, agents, settings, folds, starts)
    batch = len(tasks) if settings.batch_size is None else min(settings.batch_size, len(tasks))
    print(
        f"episodes: {plan.episodes} (best-fixed and the start {plan.parts.get('best-fixed', 0)}; the search "
        f"{plan.parts.get('search', 0)}; cross-validation {plan.parts.get('cross-validation', 0)}, --folds {folds}"
        f"{f' for each of {starts} starts' if starts > 1 else ''})"
    )
    print(
        f"search: {plan.parts.get('search', 0)} episodes ({settings.generations} generations × {settings.popsize} "
        f"candidates × {batch} tasks, then the head on the {len(tasks)} training tasks)"
    )
    print(
        f"agent calls: at most {plan.calls} (episodes × their turn limit; each distinct turn is made once, "
        "and cached replies make none)"
    )
    print_cost(plan, settings.budget_usd, "run")


def print_eval_plan(
    tasks: list[Any],
    fixed_tasks: list[Any],
    agents: Any,
    heads: list[str],
    max_turns: int,
    samples: int,
    kinds: tuple[str, ...],
    budget_usd: float | None,
) -> None:
    """--dry-run: every row's episodes, the calls and an upper bound of the cost, on stdout."""
    from trinity_cli.train.plan import plan_evaluation

    plan = plan_evaluation(
        tasks, fixed_tasks, agents, heads, max_turns=max_turns, samples=samples, baselines=kinds
    )
    for row, episodes in plan.parts.items():
        what = (
            " (chosen among the plans on the train split, then played)"
            if row == "best-fixed"
            else ""
        )
        print(f"{row}: {episodes} episodes{what}")
    print(
        f"episodes: {plan.episodes}; agent calls: at most {plan.calls} (episodes × their turn limit; "
        "cached replies make none)"
    )
    print_cost(plan, budget_usd, "evaluation")


def print_cost(plan: Any, budget_usd: float | None, what: str) -> None:
    if plan.worst_usd is None:
        print(f"worst case: unknown (no prices in the pool) for {', '.join(plan.unpriced)}")
    else:
        print(
            f"worst case: ${plan.worst_usd:.4f} (an upper bound: every call at max_tokens, the longest "
            "prompt the transcript allows, every retry billed)"
        )
    if budget_usd is not None:
        print(f"--budget-usd: the {what} stops before spend could exceed ${budget_usd:g}")
    print("dry run: nothing was called or written")

"""--dry-run's report on stdout: a run's episodes, agent calls and an upper bound of its $,
for `train` and `eval` (nothing is called or written)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trinity_cli.cli.console import to_stdout

if TYPE_CHECKING:
    from trinity_cli.train.evaluation import EvalJob
    from trinity_cli.train.workflow import TrainJob


def line_out(line: str) -> None:
    to_stdout(line + "\n")


def print_plan(job: TrainJob) -> None:
    """--dry-run: the run's size and an upper bound of its cost, on stdout."""
    from trinity_cli.train.plan import plan_training

    tasks, settings, folds, starts = job.train_tasks, job.settings, job.folds, len(job.imitations)
    plan = plan_training(tasks, job.pool.agents, settings, folds, starts)
    batch = len(tasks) if settings.batch_size is None else min(settings.batch_size, len(tasks))
    search, folded = plan.parts.get("search", 0), plan.parts.get("cross-validation", 0)
    each = f" for each of {starts} starts" if starts > 1 else ""
    line_out(
        f"episodes: {plan.episodes} (best-fixed and the start {plan.parts.get('best-fixed', 0)}; "
        f"the search {search}; cross-validation {folded}, --folds {folds}{each})"
    )
    line_out(
        f"search: {search} episodes ({settings.generations} generations × {settings.popsize} "
        f"candidates × {batch} tasks, then the head on the {len(tasks)} training tasks)"
    )
    line_out(
        f"agent calls: at most {plan.calls} (episodes × their turn limit; each distinct turn is "
        "made once, and cached replies make none)"
    )
    print_cost(plan, settings.budget_usd, "run")


def print_eval_plan(job: EvalJob) -> None:
    """--dry-run: every row's episodes, the calls and an upper bound of the cost, on stdout."""
    from trinity_cli.train.plan import plan_evaluation

    plan = plan_evaluation(
        job.played, job.fixed_tasks, job.pool.agents, job.names, max_turns=job.max_turns,
        samples=job.sample, baselines=job.kinds,
    )
    for row, episodes in plan.parts.items():
        what = (
            " (chosen among the plans on the train split, then played)"
            if row == "best-fixed"
            else ""
        )
        line_out(f"{row}: {episodes} episodes{what}")
    line_out(
        f"episodes: {plan.episodes}; agent calls: at most {plan.calls} (episodes × their turn "
        "limit; cached replies make none)"
    )
    print_cost(plan, job.budget_usd, "evaluation")


def print_cost(plan: Any, budget_usd: float | None, what: str) -> None:
    if plan.worst_usd is None:
        line_out(f"worst case: unknown (no prices in the pool) for {', '.join(plan.unpriced)}")
    else:
        line_out(
            f"worst case: ${plan.worst_usd:.4f} (an upper bound: every call at max_tokens, the "
            "longest prompt the transcript allows, every retry billed)"
        )
    if budget_usd is not None:
        line_out(f"--budget-usd: the {what} stops before spend could exceed ${budget_usd:g}")
    line_out("dry run: nothing was called or written")

"""`trinity eval`: the trained head against the baselines, on tasks it never saw.

Rows: `trained` (greedy, or the mean of N sampled runs), `random` (agent and role uniform),
`pipeline:<agent>` (that agent alone, Thinker → Worker → Verifier, at least 3 turns),
`single:<agent>` (that agent answering once as Worker), `cascade` (the cheapest agent's Worker
answer, checked by the cheapest Verifier; on a REJECT or a failing check the next dearer agent
answers; up the price list as far as `max_turns` allows), and `oracle` (a task counts when any
agent's Worker answer passes, alone or after any agent's Thinker turn). Every row skips the roles an
agent may not play. Each row also gives `expected_pass_at_1` (fitness.py: recorded pass
probabilities where the final answers came from pass-rate records at the last turn, else the same as
`pass_at_1`; the oracle's is the best expected pass among the plans it played before the first
pass). The best single is the best `single:` or `pipeline:` row; `rel_err_reduction_vs_best_single`
= (err_best − err_trained) / err_best (null when the best single makes no error: no reduction is
possible and any error is an infinite increase); `paired_margin_se` gives the first head's paired
margins over the best single, random and cascade on the same tasks, in standard errors of the
per-task difference (null when that difference never varies).

Under a budget every row's episodes (the oracle's many plans included) draw on one `Budget`. At its
first refusal the evaluation stops: the row in progress is dropped, as its refused episodes would
read as failures, and the report keeps the rows finished before, marked `partial` (its summary
fields are null when the rows they need were not reached)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import role_mask
from trinity_cli.core.head import PipelinePolicy, PlanPolicy, RandomPolicy
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import CURRENT_FORMAT
from trinity_cli.errors import UsageError
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.fixed import (
    FixedPlan,
    best_fixed,
    cascade_plan,
    describe,
    loop_plan,
    oracle_plans,
    playing,
)
from trinity_cli.train.runner import Episode, LocalRunner, OracleTask, Players, Runner
from trinity_cli.train.tree import Forest

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Row:
    policy: str
    passes: tuple[float, ...]  # per task (a mean when sampled several times)
    usd_per_task: float
    mean_turns: float
    expected: tuple[float, ...] = ()  # per task: the expected pass (fitness.py); () = passes

    @property
    def expected_pass_at_1(self) -> float:
        return float(np.mean(self.expected or self.passes))

    @property
    def pass_at_1(self) -> float:
        return float(np.mean(self.passes))

    def ci95(self) -> tuple[float, float]:
        """Wilson score interval for the pass rate."""
        n, p, z = len(self.passes), self.pass_at_1, 1.96
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return max(0.0, centre - half), min(1.0, centre + half)

    def as_json(self) -> dict[str, Any]:
        lo, hi = self.ci95()
        return {
            "policy": self.policy, "pass_at_1": round(self.pass_at_1, 4),
            "ci95": [round(lo, 4), round(hi, 4)],
            "expected_pass_at_1": round(self.expected_pass_at_1, 4),
            "usd_per_task": self.usd_per_task, "mean_turns": round(self.mean_turns, 3),
        }


def run_policy(
    name: str, tasks: Sequence[Task], policy: Any, runner: Runner, budget: Budget | None, *,
    max_turns: int, agents: tuple[int, ...] | None = None, transcript_format: str | None = None,
    samples: int = 0, seed: int = 0,
) -> Row:
    """`policy` on every task (`samples` sampled runs each, or one greedy run), with the pool's
    `agents` (indices; None: all) and the coordinator of `transcript_format`."""
    draws = [None] if samples == 0 else [(seed, s) for s in range(samples)]
    units = [
        Episode(
            task, policy, max_turns, agents, transcript_format,
            None if d is None else (d[0], i, d[1]),
        )
        for i, task in enumerate(tasks)
        for d in draws
    ]
    played = iter(runner.map(units, budget))
    results = [[next(played) for _ in draws] for _ in tasks]
    passes = [float(np.mean([r.passed for r in rs])) for rs in results]
    expected = [float(np.mean([r.expected for r in rs])) for rs in results]
    usd = sum(sum(r.usd for r in rs) / len(rs) for rs in results)
    turns = sum(sum(r.turns for r in rs) / len(rs) for rs in results)
    return Row(name, tuple(passes), usd / len(tasks), turns / len(tasks), tuple(expected))


def paired_margin(a: Sequence[float], b: Sequence[float]) -> float:
    """Mean of a − b over the same tasks, in standard errors of that mean (±inf when every
    task differs the same way)."""
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    se = d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else 0.0
    if se > 0:
        return float(d.mean() / se)
    return 0.0 if d.mean() == 0 else math.copysign(math.inf, d.mean())


def oracle_row(
    tasks: Sequence[Task], agents: Sequence[Any], runner: Runner, budget: Budget | None
) -> Row:
    solved = runner.map([OracleTask(task, tuple(oracle_plans(agents))) for task in tasks], budget)
    return Row(
        "oracle", tuple(float(s[0]) for s in solved), sum(s[1] for s in solved) / len(tasks),
        sum(s[2] for s in solved) / len(tasks), tuple(s[3] for s in solved),
    )


@dataclass(frozen=True)
class HeadUnderTest:
    """A head to evaluate: its row name, its policy, the coordinator that reads states for it."""

    name: str
    policy: Any
    coordinator: Any
    cost_weight: float | None = None  # what it was trained with, for the quality/cost curve
    transcript_format: str = CURRENT_FORMAT.id  # the coordinator's, as in runner.Episode


# row kinds, in table order
BASELINES = (
    "random", "pipeline", "single", "loop", "cascade", "best-fixed", "oracle",
)


@dataclass(frozen=True)
class FixedOn:
    """Where `best-fixed` is chosen: the train split of the task set, and the cost weight of
    its fitness."""

    tasks: Sequence[Task]
    cost_weight: float = 0.0


def rows_to_compute(
    tasks: Sequence[Task], agents: Sequence[Any], heads: Sequence[HeadUnderTest], *, max_turns: int,
    samples: int = 0, seed: int = 0, baselines: Sequence[str] = BASELINES,
) -> list[tuple[str, Any, int, tuple[int, ...] | None, int]]:
    """(row, policy, turn limit, agents, sampled runs) of each row played on the eval tasks, in
    table order (`best-fixed` is chosen first: `best_fixed_row`; the oracle: `oracle_row`)."""
    n = len(agents)
    rows: list[tuple[str, Any, int, tuple[int, ...] | None, int]] = [
        (head.name, head.policy, max_turns, None, samples) for head in heads
    ]
    if "random" in baselines:
        rows.append(("random", RandomPolicy(n), max_turns, None, max(1, samples)))
    if "pipeline" in baselines:
        rows += [
            (
                f"pipeline:{agent.name}", PipelinePolicy(1, role_mask([agent.roles])),
                max(len(agent.roles), max_turns), (i,), 0,
            )
            for i, agent in enumerate(agents)
            if Role.WORKER in agent.roles
        ]
    if "single" in baselines:
        rows += [
            (f"single:{agents[i].name}", PlanPolicy(n, ((i, Role.WORKER),)), 1, None, 0)
            for i in playing(agents, Role.WORKER)
        ]
    if "loop" in baselines:
        loops = [(i, loop_plan(agents, i, max_turns)) for i in playing(agents, Role.WORKER)]
        rows += [
            (f"loop:{agents[i].name}", PlanPolicy(n, plan), len(plan), None, 0) for i, plan in loops
        ]
    if "cascade" in baselines:
        cascade = cascade_plan(agents, max_turns)
        rows.append(("cascade", PlanPolicy(n, cascade), len(cascade), None, 0))
    return rows


def best_fixed_row(
    tasks: Sequence[Task], agents: Sequence[Any], fixed_on: FixedOn, runner: Runner,
    budget: Budget | None, *, max_turns: int,
) -> tuple[Row, FixedPlan]:
    """`best-fixed`: chosen on `fixed_on.tasks` (the family's plans on a forest, which makes
    each node's call once), then played on `tasks`."""
    forest = Forest(runner, max_turns)
    chosen = best_fixed(
        lambda episodes: forest.play(episodes, budget), fixed_on.tasks, agents, max_turns,
        fixed_on.cost_weight,
    )
    plan = chosen.plan
    return run_policy(
        "best-fixed", tasks, PlanPolicy(len(agents), plan), runner, budget, max_turns=len(plan)
    ), chosen


def evaluate(
    tasks: Sequence[Task], agents: Sequence[Any], heads: Sequence[HeadUnderTest], grader: Grader, *,
    max_turns: int, samples: int = 0, seed: int = 0, workers: int = 1,
    on_row: Callable[[Row], None] = lambda row: None, budget: Budget | None = None,
    runner: Runner | None = None, baselines: Sequence[str] = BASELINES,
    fixed_on: FixedOn | None = None,
) -> dict[str, Any]:
    """The heads' rows first, then the baselines (`baselines`: which kinds); the summary
    compares the first head. `best-fixed` needs `fixed_on` (without it the row is left out).
    `runner` plays the episodes (default: here, `workers` at a time)."""
    budget = budget or Budget()
    runner = runner or LocalRunner(
        Players(
            agents, grader,
            {h.transcript_format: h.coordinator for h in heads if h.coordinator is not None},
        ),
        workers,
    )
    formats = {
        head.name: None if head.coordinator is None else head.transcript_format for head in heads
    }
    pending: list[Callable[[], Row]] = [
        partial(
            run_policy, name, tasks, policy, runner, budget, max_turns=turns, agents=indices,
            transcript_format=formats.get(name), samples=runs, seed=seed,
        )
        for name, policy, turns, indices, runs in rows_to_compute(
            tasks, agents, heads, max_turns=max_turns, samples=samples, seed=seed,
            baselines=baselines,
        )
    ]
    chosen: list[FixedPlan] = []
    if "best-fixed" in baselines and fixed_on is not None and fixed_on.tasks:

        def fixed() -> Row:
            row, plan = best_fixed_row(tasks, agents, fixed_on, runner, budget, max_turns=max_turns)
            chosen.append(plan)
            return row

        pending.append(fixed)
    if "oracle" in baselines:
        pending.append(partial(oracle_row, tasks, agents, runner, budget))
    rows: list[Row] = []
    for compute in pending:
        row = compute()
        if budget.refusal is not None:  # some episode of this row was refused: stop here
            break
        rows.append(row)
        on_row(row)
    singles = [r for r in rows if r.policy.startswith(("single:", "pipeline:"))]
    best_single = max(singles, key=lambda r: r.pass_at_1) if singles else None
    reduction = None
    by_name = {r.policy: r for r in rows}
    margins = {}
    if best_single is not None:
        err_best = 1.0 - best_single.pass_at_1
        trained_err = 1.0 - rows[0].pass_at_1  # rows[0] is the first head's: heads come first
        reduction = round((err_best - trained_err) / err_best, 4) if err_best > 0 else None
        for key, other in (
            ("vs_best_single", best_single), ("vs_random", by_name.get("random")),
            ("vs_cascade", by_name.get("cascade")), ("vs_best_fixed", by_name.get("best-fixed")),
        ):
            if other is not None:
                margin = paired_margin(rows[0].passes, other.passes)
                # JSON has no infinity
                margins[key] = (
                    round(margin, 3) if math.isfinite(margin) else None
                )
    return {
        "schema_version": SCHEMA_VERSION, "tasks": len(tasks),
        "rel_err_reduction_vs_best_single": reduction,
        "best_single": None if best_single is None else best_single.policy,
        "paired_margin_se": margins,
        "best_fixed": None
        if not chosen or "best-fixed" not in by_name
        else {
            "plan": describe(chosen[0].plan, agents), "train_fitness": round(chosen[0].fitness, 6),
            "train_tasks": chosen[0].tasks,
            "cost_weight": fixed_on.cost_weight if fixed_on else 0.0,
        },
        "rows": [r.as_json() for r in rows],
        **(
            {
                "curve": [
                    {
                        "head": h.name, "cost_weight": h.cost_weight,
                        "pass_at_1": round(r.pass_at_1, 4), "usd_per_task": r.usd_per_task,
                    }
                    for h, r in zip(heads, rows)
                ]
            }
            if len(heads) > 1
            else {}
        ),
        "partial": budget.refusal is not None, "error": budget.refusal, "budget": budget.as_json(),
        "_rows": rows,
    }


def baseline_kinds(value: str) -> tuple[str, ...]:
    """--baselines: `all`, `none` or a comma list of row kinds (exit 2 naming an unknown one)."""
    if value.strip().lower() == "all":
        return BASELINES
    if value.strip().lower() == "none":
        return ()
    kinds = [kind.strip() for kind in value.split(",")]
    unknown = [kind for kind in kinds if kind not in BASELINES]
    if unknown or not all(kinds):
        raise UsageError(
            f"--baselines {value!r}: unknown row kind {unknown[0] if unknown else repr('')} "
            f"(kinds: {', '.join(BASELINES)}; or all, none)"
        )
    return tuple(kind for kind in BASELINES if kind in kinds)

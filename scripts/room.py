"""How much room a pool leaves above best-fixed, on a task set's train split: every plan of the
best-fixed family (train/fixed.py) played on every training task, then the best single plan
(best-fixed itself) against the best plan chosen per task with hindsight (what a coordinator
that read each task perfectly could reach within the family) and the one-answer oracle.

    python scripts/room.py --pool ldb-humaneval --tasks humaneval [--max-turns 5] [--cost-weight 0]
    python scripts/room.py --pool ldb-mbpp --tasks mbpp --read-states

`decision_points` says where that room lies: at each Worker turn of best-fixed's path (before
the first answer, after the first REJECT, ...), the tasks that reach it, the value of
best-fixed's continuation there and of the best continuation per task. With `--read-states`,
each point also asks whether the coordinator's state there tells which continuation is best:
5-fold cross-validation (train/crossval.folds) of the `routed` predictor (plan values
ridge-regressed on the state's K components) against the continuation re-chosen on each
fold's training part, over a grid of K and ridge fixed in advance (`GRID`).

Plans do not read states: without `--read-states` nothing is encoded; replies and grades come
from the caches.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from trinity_cli.core.head import PlanPolicy
from trinity_cli.core.roles import ROLE_ORDER, Role
from trinity_cli.pool.spec import load_pool
from trinity_cli.runtime import build_run
from trinity_cli.tasks.taskset import gradable, load_tasks, select_split
from trinity_cli.train.baselines import paired_margin
from trinity_cli.train.crossval import folds
from trinity_cli.train.es import new_forest
from trinity_cli.train.fixed import Plan, choose, describe, play_family, routed
from trinity_cli.train.imitate import input_space
from trinity_cli.train.runner import Episode
from trinity_cli.train.tree import Forest

GRID = [(k, ridge) for k in (2, 4, 8, 16) for ridge in (1.0, 10.0, 100.0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", required=True)
    parser.add_argument("--tasks", required=True)
    parser.add_argument("--max-turns", type=int, default=5)
    parser.add_argument("--cost-weight", type=float, default=0.0)
    parser.add_argument("--read-states", action="store_true")
    args = parser.parse_args()
    tasks = load_tasks(args.tasks)
    train = gradable(select_split(tasks, "train"))[0]
    run = build_run(load_pool(args.pool), tasks, no_cache=False)
    agents = run.agents
    forest = new_forest(agents, run.coordinator(), run.caches.grader, args.max_turns)
    plans, outcomes = play_family(forest.play, train, agents, args.max_turns)
    # plans × tasks
    values = np.array(
        [[o.expected - args.cost_weight * o.usd for o in plan] for plan in outcomes]
    )
    chosen = choose(plans, outcomes, args.cost_weight)
    best = values[plans.index(chosen.plan)]
    answers = [i for i, plan in enumerate(plans) if len(plan) == 1]  # one Worker answer each
    trails = None
    if args.read_states:
        trails = forest.trail(
            [Episode(t, PlanPolicy(len(agents), chosen.plan), len(chosen.plan)) for t in train]
        )[0]
    points = [
        decision_point(
            forest, train, plans, outcomes, values, chosen.plan, depth, args.cost_weight, trails
        )
        for depth, (_, role) in enumerate(chosen.plan)
        if role is Role.WORKER
    ]
    print(
        json.dumps(
            {
                "pool": args.pool, "tasks": len(train), "max_turns": args.max_turns,
                "cost_weight": args.cost_weight, "plans": len(plans),
                "best_fixed": {
                    "plan": " → ".join(" ".join(step) for step in describe(chosen.plan, agents)),
                    "value": round(float(best.mean()), 4),
                },
                "per_task_best": round(float(values.max(axis=0).mean()), 4),
                "tasks_where_another_plan_is_better": int((values.max(axis=0) > best + 1e-9).sum()),
                "one_answer_oracle": round(float(values[answers].max(axis=0).mean()), 4),
                "decision_points": points,
            },
            indent=1, ensure_ascii=False,
        )
    )


def decision_point(
    forest: Forest, train: Sequence[Any], plans: Sequence[Plan], outcomes: Sequence[Any],
    values: np.ndarray, plan: Plan, depth: int, cost_weight: float,
    trails: list[list[Any]] | None,
) -> dict[str, Any]:
    """The Worker turn `depth` + 1 of `plan`: who reaches it, the room in its continuations, and
    (given the plan's encoded `trails`) the cross-validated routing from its states."""
    path = tuple((agent, ROLE_ORDER.index(role)) for agent, role in plan[:depth])
    reach = [
        i for i, task in enumerate(train)
        if (node := forest.trees[(task.task_id, None)].get(path)) is not None
        and not node.state.done
    ]
    options = [p for p, candidate in enumerate(plans) if candidate[:depth] == plan[:depth]
               and len(candidate) > depth]
    continuations = [plans[p] for p in options]
    here = values[np.ix_(options, reach)]  # continuations × reaching tasks
    own = here[continuations.index(plan)]
    point: dict[str, Any] = {
        "turn": depth + 1, "tasks": len(reach), "continuations": len(options),
        "best_fixed": round(float(own.mean()), 4),
        "per_task_best": round(float(here.max(axis=0).mean()), 4),
        "tasks_where_another_is_better": int((here.max(axis=0) > own + 1e-9).sum()),
    }
    if trails is None:
        return point
    states = np.asarray([trails[i][depth][0].hidden for i in reach])
    split = folds([train[i] for i in reach], 5)
    point["held_out_routing"] = []
    for k, ridge in GRID:
        route, fixed = np.zeros(len(reach)), np.zeros(len(reach))
        for held in split:
            fit = [j for j in range(len(reach)) if j not in set(held)]
            fit_outcomes = [[outcomes[p][reach[j]] for j in fit] for p in options]
            fixed_plan = choose(continuations, fit_outcomes, cost_weight).plan
            space = input_space(states[fit], 1, k)  # only its basis is used
            chosen = routed(
                continuations, fit_outcomes,
                np.asarray([space.features(h) for h in states[fit]]), fixed_plan, cost_weight,
                ridge, np.asarray([space.features(h) for h in states[held]]),
            )
            for j, routed_plan in zip(held, chosen):
                route[j] = values[plans.index(routed_plan), reach[j]]
                fixed[j] = values[plans.index(fixed_plan), reach[j]]
        margin = paired_margin(route, fixed)
        point["held_out_routing"].append(
            {
                "components": k, "ridge": ridge, "routed": round(float(route.mean()), 4),
                "fixed": round(float(fixed.mean()), 4), "for": int((route > fixed).sum()),
                "against": int((route < fixed).sum()),
                "margin_se": round(margin, 2) if np.isfinite(margin) else None,
            }
        )
    return point


if __name__ == "__main__":
    main()

"""How much room a pool leaves above best-fixed, on a task set's train split: every plan of the
best-fixed family (train/fixed.py) played on every training task, then the best single plan
(best-fixed itself) against the best plan chosen per task with hindsight (what a coordinator
that read each task perfectly could reach within the family) and the one-answer oracle.

    python scripts/room.py --pool ldb-humaneval --tasks humaneval [--max-turns 5] [--cost-weight 0]

Plans do not read states: nothing is encoded; replies and grades come from the caches.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from trinity_cli.pool.spec import load_pool
from trinity_cli.runtime import build_run
from trinity_cli.tasks.taskset import gradable, load_tasks, select_split
from trinity_cli.train.es import new_forest
from trinity_cli.train.fixed import choose, describe, play_family


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", required=True)
    parser.add_argument("--tasks", required=True)
    parser.add_argument("--max-turns", type=int, default=5)
    parser.add_argument("--cost-weight", type=float, default=0.0)
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
            },
            indent=1, ensure_ascii=False,
        )
    )


if __name__ == "__main__":
    main()

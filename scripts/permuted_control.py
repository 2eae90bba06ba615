"""The permuted-state control of `trinity train`'s cross-validation on a recorded pool: the same
5 folds, start and settings as `train`'s defaults, once with the coordinator's real states and
once with each task's transcripts encoded as if its problem were another task's (a fixed
derangement of the training tasks; the turns are kept). A head that reads the task beats
best-fixed with real states and loses that margin with permuted ones.

    python scripts/permuted_control.py --pool ldb-mbpp --tasks mbpp --arm real
    python scripts/permuted_control.py --pool ldb-mbpp --tasks mbpp --arm permuted
    python scripts/permuted_control.py --compare real.json permuted.json

Each arm prints a JSON object (its held-out per-task values included); `--compare` reads two
and gives the paired margin of the real-state heads over the permuted ones.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from trinity_cli.coordinator.permuted import PermutedCoordinator
from trinity_cli.pool.spec import load_pool
from trinity_cli.runtime import build_run
from trinity_cli.tasks.taskset import gradable, load_tasks, select_split
from trinity_cli.train.baselines import paired_margin
from trinity_cli.train.crossval import cross_validate
from trinity_cli.train.es import TrainSettings, new_forest

FOLDS = 5


def run_arm(pool: str, tasks_name: str, arm: str, imitate: str) -> dict[str, Any]:
    tasks = load_tasks(tasks_name)
    train = gradable(select_split(tasks, "train"))[0]
    run = build_run(load_pool(pool), tasks, no_cache=False)
    coordinator = run.coordinator()
    if arm == "permuted":
        coordinator = PermutedCoordinator(coordinator, train)
    settings = replace(TrainSettings(), imitate=imitate)
    forest = new_forest(run.agents, coordinator, run.caches.grader, settings.max_turns)
    validation = cross_validate(
        train, run.agents, coordinator, run.caches.grader, settings, FOLDS, forest,
        on_fold=lambda fold, result: print(f"{arm}: fold {fold} done", file=sys.stderr),
    )
    return {
        "pool": pool, "tasks": tasks_name, "arm": arm, "imitate": imitate, "folds": FOLDS,
        "head_fitness": validation.head_fitness, "plan_fitness": validation.plan_fitness,
        "margin_se_vs_best_fixed": validation.margin_se, "differing": validation.differing,
        "task_ids": validation.task_ids, "head": validation.head, "plan": validation.plan,
    }


def compare(real_path: Path, permuted_path: Path) -> dict[str, Any]:
    real, permuted = (json.loads(p.read_text()) for p in (real_path, permuted_path))
    assert real["task_ids"] == permuted["task_ids"] and real["plan"] == permuted["plan"]
    return {
        "tasks": len(real["task_ids"]), "real": real["head_fitness"],
        "permuted": permuted["head_fitness"], "best_fixed": real["plan_fitness"],
        "real_vs_best_fixed_se": real["margin_se_vs_best_fixed"],
        "permuted_vs_best_fixed_se": permuted["margin_se_vs_best_fixed"],
        "real_vs_permuted_se": paired_margin(real["head"], permuted["head"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool")
    parser.add_argument("--tasks")
    parser.add_argument("--arm", choices=("real", "permuted"))
    parser.add_argument("--imitate", default="routed")
    parser.add_argument("--compare", nargs=2, type=Path)
    args = parser.parse_args()
    if args.compare:
        print(json.dumps(compare(*args.compare), indent=1))
    else:
        print(json.dumps(run_arm(args.pool, args.tasks, args.arm, args.imitate)))


if __name__ == "__main__":
    main()

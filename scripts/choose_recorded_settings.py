"""A recorded pool's shipped head, with its setting chosen by 5-fold cross-validation on the
train split (the test split is never read here).

`validate` runs `trinity train`'s own protocol for each setting of GRID: the head trained on the
whole train split, and 5-fold cross-validation over it (train/crossval.py: in each fold
best-fixed re-chosen and the head trained again without the fold, both scored on it). Every
row goes to docs/recorded/<head>.json, the head to the scratch folder. `choose` takes the
setting with the largest cross-validated margin over best-fixed pooled over the pools named
(the paired differences of all their training tasks together; the same setting for all), and
copies each pool's head at that setting, with the plan it started from, to weights/. Then the
test split is scored once, with the command it prints.

    python scripts/choose_recorded_settings.py validate --pool ldb-humaneval --tasks humaneval
    python scripts/choose_recorded_settings.py validate --pool ldb-mbpp --tasks mbpp
    python scripts/choose_recorded_settings.py choose ldb-humaneval ldb-mbpp
    python scripts/choose_recorded_settings.py validate --pool ldb-humaneval --tasks humaneval --cost-weight 10
    python scripts/choose_recorded_settings.py choose ldb-humaneval-w10
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from trinity_cli.config import load_pool
from trinity_cli.coordinator.llama import LlamaCoordinator
from trinity_cli.coordinator.memo import MemoCoordinator
from trinity_cli.core.head import PlanPolicy
from trinity_cli.embedded import gguf_sha256
from trinity_cli.providers.cache import ResponseStore
from trinity_cli.providers.registry import build_agents
from trinity_cli.runtime import backbone_of, coordinator_path
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import gradable, load_tasks, select_split
from trinity_cli.train.baselines import paired_margin
from trinity_cli.train.crossval import cross_validate
from trinity_cli.train.es import TrainSettings, new_forest, train
from trinity_cli.train.fixed import padded
from trinity_cli.weights import metadata_for, save_head

ROOT = Path(__file__).resolve().parent.parent
FIXED = {"generations": 30, "popsize": 16, "sigma0": 0.2, "max_turns": 5, "seed": 0}  # fixed in advance
GRID = [{"imitate": "best-fixed", "project": 8}, {"imitate": "routed", "project": 8}, {"imitate": "routed", "project": 32}]
FOLDS = 5


def head_name(pool: str, cost_weight: float) -> str:
    return pool + (f"-w{cost_weight:g}" if cost_weight else "")


def validate(args: argparse.Namespace) -> None:
    name = head_name(args.pool, args.cost_weight)
    scratch = args.scratch / name
    scratch.mkdir(parents=True, exist_ok=True)
    pool = load_pool(args.pool)
    tasks = load_tasks(args.tasks)
    train_split = gradable(select_split(tasks, "train"))[0]
    gguf = coordinator_path(pool)
    coordinator = MemoCoordinator(LlamaCoordinator(gguf, n_ctx=pool.coordinator.n_ctx, n_threads=args.threads),
                                  gguf_sha256(gguf), args.scratch / "hidden.sqlite")
    grader = Grader(args.scratch / "grades.sqlite")
    agents = build_agents(pool.agents, tasks, ResponseStore(args.scratch / "responses.sqlite"),
                          coordinator_model=pool.coordinator.model)
    forest = new_forest(agents, coordinator, grader, FIXED["max_turns"])
    out = ROOT / "docs" / "recorded" / f"{name}.json"
    rows = []
    for i, setting in enumerate(GRID):
        settings = TrainSettings(**FIXED, **setting, cost_weight=args.cost_weight)
        started = time.perf_counter()
        result = train(train_split, agents, coordinator, grader, settings, None, forest=forest)
        validation = cross_validate(train_split, agents, coordinator, grader, settings, FOLDS, forest)
        training = {"tasks": args.tasks, "split": "train", "n_tasks": len(train_split), **asdict(settings),
                    "folds": FOLDS, "fitness": result.fitness, "start": result.start.as_json(agents),
                    "below_start": validation.below_start, "validation": validation.as_json(),
                    "history": result.history, "how": "scripts/choose_recorded_settings.py"}
        backbone = backbone_of(pool)
        meta = metadata_for(backbone, pool, coordinator.hidden_size, trained=True, numerics=coordinator.numerics,
                            training=training)
        save_head(scratch / f"run-{i}.npz", result.head, meta)
        assert result.start.plan is not None
        save_head(scratch / f"run-{i}-plan.npz", PlanPolicy(len(agents), padded(result.start.plan.plan, agents,
                                                                                      settings.max_turns)),
                  metadata_for(backbone, pool, coordinator.hidden_size, kind="plan", trained=True,
                               training={**training, "history": [], "plan_of": f"{name}.npz"}))
        row = {"settings": asdict(settings), "train_fitness": result.fitness, "start": result.start.as_json(agents),
               "validation": validation.as_json(), "seconds": round(time.perf_counter() - started, 1),
               "states_encoded": forest.encoded, "nodes_made": forest.grown}
        summary = {k: v for k, v in row["validation"].items() if k != "per_task"}
        print(json.dumps({"setting": setting, **summary, "seconds": row["seconds"]}), flush=True)
        rows.append(row)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"how": "scripts/choose_recorded_settings.py validate", "pool": args.pool,
                               "tasks": args.tasks, "cost_weight": args.cost_weight, "train_tasks": len(train_split),
                               "folds": FOLDS, "fixed": FIXED, "grid": rows}, indent=1) + "\n")


def choose(args: argparse.Namespace) -> None:
    docs = {name: json.loads((ROOT / "docs" / "recorded" / f"{name}.json").read_text()) for name in args.heads}
    pooled = []
    for i, setting in enumerate(GRID):
        head = np.concatenate([doc["grid"][i]["validation"]["per_task"]["head"] for doc in docs.values()])
        plan = np.concatenate([doc["grid"][i]["validation"]["per_task"]["plan"] for doc in docs.values()])
        pooled.append(paired_margin(head, plan))
        print(json.dumps({"setting": setting, "tasks": len(head), "head": round(float(head.mean()), 4),
                          "plan": round(float(plan.mean()), 4), "pooled_margin_se": round(pooled[-1], 3)}))
    best = max(range(len(GRID)), key=lambda i: (pooled[i], -i))
    for name, doc in docs.items():
        doc["chosen"] = {"setting": GRID[best], "pooled_over": list(docs), "pooled_margin_se": round(pooled[best], 3)}
        (ROOT / "docs" / "recorded" / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
        for suffix in (".npz", ".json", "-plan.npz", "-plan.json"):
            source = args.scratch / name / f"run-{best}{suffix}"
            shutil.copy(source, ROOT / "weights" / f"{name}{suffix}")
        if doc["cost_weight"]:  # a cost-weighted head routes only when named: the pool's default is the unweighted one
            for suffix in (".json", "-plan.json"):
                meta = json.loads((ROOT / "weights" / f"{name}{suffix}").read_text())
                (ROOT / "weights" / f"{name}{suffix}").write_text(json.dumps({**meta, "auto_select": False}, indent=2) + "\n")
        print(f"chosen {GRID[best]}; wrote weights/{name}.npz and {name}-plan.npz\n"
              f"trinity eval --pool {doc['pool']} --tasks {doc['tasks']} --split test --weights weights/{name}.npz --json")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scratch", type=Path, default=Path.home() / ".cache" / "trinity-recorded",
                        help="Caches and the heads of every setting (kept between runs).")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("validate")
    run.add_argument("--pool", required=True)
    run.add_argument("--tasks", required=True)
    run.add_argument("--cost-weight", type=float, default=0.0)
    run.add_argument("--threads", type=int, default=None, help="The coordinator's threads (default: every core).")
    pick = commands.add_parser("choose")
    pick.add_argument("heads", nargs="+", help="docs/recorded/<head>.json files to pool, by head name")
    args = parser.parse_args()
    {"validate": validate, "choose": choose}[args.command](args)


if __name__ == "__main__":
    main()

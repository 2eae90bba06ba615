"""Choose a recorded pool's training settings on a validation slice of the train split.

For each setting of a small grid, trains the head on the train split minus its validation slice
and scores it on the validation slice against every baseline; the choice is the setting with
the largest paired margin over the stronger of the best single agent and the cascade (with a cost
weight: the largest validation fitness, pass@1 − weight × $ per task, what that head optimises). It writes
the grid and the choice to docs/recorded/<pool>[-w<cost weight>].json and the chosen head (as
trained on that slice) to weights/<pool>[-w<cost weight>].npz, and prints the command that
scores it on the test split, once.

    python scripts/choose_recorded_settings.py --pool ldb-humaneval --tasks humaneval
    python scripts/choose_recorded_settings.py --pool ldb-mbpp --tasks mbpp --cost-weight 3
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from trinity_cli.config import load_pool
from trinity_cli.coordinator.llama import LlamaCoordinator
from trinity_cli.coordinator.memo import MemoCoordinator
from trinity_cli.providers.cache import ResponseStore
from trinity_cli.providers.registry import build_agents
from trinity_cli.runtime import backbone_of, coordinator_path
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import gradable, load_tasks, select_split, validation_slice
from trinity_cli.train.baselines import HeadUnderTest, evaluate, paired_margin
from trinity_cli.train.es import TrainSettings, train
from trinity_cli.weights import metadata_for, save_head

ROOT = Path(__file__).resolve().parent.parent
GRID = {"max_turns": [2], "project": [4, 8, 16]}  # max_turns 3 (Worker, Verifier, Worker) is not in it yet
FIXED = {"generations": 30, "popsize": 8, "batch_size": 32, "seed": 0, "sigma0": 0.3}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pool", required=True)
    parser.add_argument("--tasks", required=True)
    parser.add_argument("--cost-weight", type=float, default=0.0)
    parser.add_argument("--scratch", type=Path, help="Caches to reuse (default: a new temp dir).")
    args = parser.parse_args()
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="trinity-recorded-"))
    pool = load_pool(args.pool)
    tasks = load_tasks(args.tasks)
    fit, validation = validation_slice(gradable(select_split(tasks, "train"))[0])
    gguf = coordinator_path(pool)
    from trinity_cli.embedded import gguf_sha256

    coordinator = MemoCoordinator(LlamaCoordinator(gguf, n_ctx=8192), gguf_sha256(gguf), scratch / "hidden.sqlite")
    grader = Grader(scratch / "grades.sqlite")
    agents = build_agents(pool.agents, tasks, ResponseStore(scratch / "responses.sqlite"),
                          coordinator_model=pool.coordinator.model)
    results = []
    for values in itertools.product(*GRID.values()):
        settings = TrainSettings(**FIXED, **dict(zip(GRID, values)), cost_weight=args.cost_weight)
        started = time.perf_counter()
        result = train(fit, agents, coordinator, grader, settings, scratch / f"run-{len(results)}.ckpt")
        save_head(scratch / f"run-{len(results)}.npz", result.head, metadata_for(
            backbone_of(pool), pool, coordinator.hidden_size, trained=True, numerics=coordinator.numerics,
            training={"tasks": args.tasks, "split": "train minus its validation slice", "n_tasks": len(fit),
                      **asdict(settings), "history": result.history, "how": "scripts/choose_recorded_settings.py"}))
        report = evaluate(validation, agents, [HeadUnderTest("trained", result.head, coordinator)], grader,
                          max_turns=settings.max_turns)
        rows = {r.policy: r for r in report.pop("_rows")}
        best, cascade = rows[report["best_single"]], rows["cascade"]
        rival = max((best, cascade), key=lambda r: r.pass_at_1)
        row = {"settings": asdict(settings), "validation_pass_at_1": round(rows["trained"].pass_at_1, 4),
               "usd_per_task": rows["trained"].usd_per_task,
               "validation_fitness": round(rows["trained"].pass_at_1 - args.cost_weight * rows["trained"].usd_per_task, 4),
               "rival": rival.policy,
               "rival_pass_at_1": round(rival.pass_at_1, 4),
               "margin_vs_rival_se": round(paired_margin(rows["trained"].passes, rival.passes), 3),
               "seconds": round(time.perf_counter() - started, 1)}
        print(json.dumps(row), flush=True)
        results.append(row)
    criterion = "validation_fitness" if args.cost_weight else "margin_vs_rival_se"
    best = max(range(len(results)), key=lambda i: (results[i][criterion], -i))
    chosen = results[best]["settings"]
    name = args.pool + (f"-w{args.cost_weight:g}" if args.cost_weight else "")
    for suffix in (".npz", ".json"):
        shutil.copy(scratch / f"run-{best}{suffix}", ROOT / "weights" / f"{name}{suffix}")
    out = ROOT / "docs" / "recorded" / f"{name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"how": "scripts/choose_recorded_settings.py", "pool": args.pool, "tasks": args.tasks,
                               "fit_tasks": len(fit), "validation_tasks": len(validation), "grid": results,
                               "criterion": criterion, "chosen": chosen}, indent=2) + "\n")
    print(f"chosen: {chosen}; wrote weights/{name}.npz\n"
          f"trinity eval --pool {args.pool} --tasks {args.tasks} --split test --max-turns {chosen['max_turns']} "
          f"--weights weights/{name}.npz --json")

if __name__ == "__main__":
    main()

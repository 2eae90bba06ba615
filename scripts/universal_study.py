"""Train the shipped universal head on EvalPerf's training models and measure it on pools of
held-out models only (docs/measurements.md, "Routing any pool").

    # docs/universal/validation-t1.json
    python scripts/universal_study.py validate
    # writes weights/universal.npz (shipped)
    python scripts/universal_study.py train --max-turns 3
    python scripts/universal_study.py train --max-turns 1 --out universal-t1.npz
    # docs/universal/held-out-t3.json
    python scripts/universal_study.py measure --max-turns 3 --ns 40 --pool-specific 0
    # docs/universal/held-out-t1.json
    python scripts/universal_study.py measure --max-turns 1 --weights universal-t1.npz
    # the tables of docs/measurements.md
    python scripts/universal_study.py report --max-turns 3

`validate`: every setting is chosen here, on the training models only. They are split again by
family (VALIDATION_SALT, the same rule as the held-out split, fixed before any run) into fit
and validation models. Each setting trains on the fit models on the N_CALIBRATION calibration
tasks; the validation models are profiled on those tasks and every pool of 3-5 of them is
scored on the other train-split tasks, against its best single agent by profile. It searches
GRID with one turn (a three-turn search would take hours on 2 cores) and writes the chosen
setting, which both shipped settings use.

`train`: the setting `validate` chose; the model split of the bundled manifest (whole
families held out); the training models replay `evalperf-all` on the train split of
`evalperf` (all 118 tasks count: pass-rate records are graded by their recorded probability);
profiles on N_CALIBRATION calibration tasks; episodes on pools of 2-6 training models drawn
per task and generation.

`measure`: POOLS pools of 3-5 held-out models (seeded draws), each agent profiled on n
calibration tasks of the train split (n in NS) as `trinity profile` does; on the test split,
per pool: the universal head, the pool's best single agent by its profile (what a user would
pick), random routing, every single agent, cascade, the per-task oracle (the best recorded
pass probability among the pool's agents), expected and sampled pass@1 and $ per task, with
the paired SE of universal − best-by-profile on expected passes; and for a few pools a head
trained on that very pool.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from build_records import held_out

from trinity_cli.core.head import PlanPolicy
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import CURRENT_FORMAT
from trinity_cli.heads.files import load_head, save_head, universal_metadata
from trinity_cli.pool import bundled
from trinity_cli.pool.spec import load_pool
from trinity_cli.runtime import backbone_of, build_run
from trinity_cli.tasks.taskset import load_tasks, select_split
from trinity_cli.train.baselines import HeadUnderTest, evaluate, paired_margin, run_policy
from trinity_cli.train.es import TrainSettings, train
from trinity_cli.train.profile import calibration_tasks
from trinity_cli.train.runner import LocalRunner, Players
from trinity_cli.train.universal import measure_profiles, train_universal

ROOT = Path(__file__).resolve().parent.parent
N_CALIBRATION = 40
NS = (10, 20, 40, 72)  # the train split of evalperf has 72 tasks
POOLS = 30
POOL_SPECIFIC = (
    3  # pools that also get a head trained on themselves, with the recorded pools' K and σ0
)
POOL_SPECIFIC_SETTINGS = {"project": 4, "sigma0": 0.3}
# the recorded pools' (not searched)
SETTINGS = {
    "generations": 30, "popsize": 8, "batch_size": 32, "seed": 0,
}
GRID = {"project": (2, 4, 8), "sigma0": (0.1, 0.3, 1.0), "skill_weight": (0.0, 1.0)}
VALIDATION_SALT = "trinity-validation-v1:"
UNIVERSAL = ROOT / "docs" / "universal"
# baseline rows per pool (the oracle: from the record)
MEASURED = (
    "random", "pipeline", "single", "loop", "cascade",
)


def setup(scratch: Path):
    pool = load_pool("evalperf-all")
    split = json.loads((bundled.DATA / "manifest.json").read_text())["model_split"]
    tasks = load_tasks("evalperf")
    run = build_run(pool, tasks, no_cache=False, cache_root=scratch)
    agents = {a.name: a for a in run.agents}
    return pool, split, tasks, run.coordinator(), run.caches.grader, agents


def validation_models(split: dict) -> tuple[list[str], list[str]]:
    """(fit, validation): the training models split by whole families, with the held-out
    split's rule (scripts/build_records.py) and VALIDATION_SALT."""
    training = set(split["train"])
    held = {
        m
        for family, models in split["families"].items()
        if set(models) <= training and held_out(family, VALIDATION_SALT)
        for m in models
    }
    return sorted(training - held), sorted(held)


def chosen_setting() -> dict:
    return json.loads((UNIVERSAL / "validation-t1.json").read_text())["chosen"]


def validation_score(
    setting: dict, fit: list[str], held: list[str], calibration, scored, coordinator, grader,
    agents, scratch: Path,
) -> dict:
    """Train on the fit models with `setting` (one turn); score every pool of 3-5 validation
    models."""
    max_turns = 1
    settings = TrainSettings(
        **SETTINGS, project=setting["project"], sigma0=setting["sigma0"], max_turns=max_turns
    )
    name = "-".join(f"{k}{v}" for k, v in setting.items())
    head = train_universal(
        calibration, [agents[m] for m in fit], calibration, coordinator, grader, settings,
        scratch / f"validate-t{max_turns}-{name}.ckpt", skill_weight=setting["skill_weight"],
    ).head
    profiles = dict(
        zip(
            held,
            measure_profiles([agents[m] for m in held], calibration, coordinator, head, grader),
        )
    )
    mine, best = [], []
    for members in (c for size in (3, 4, 5) for c in itertools.combinations(held, size)):
        runner = LocalRunner(
            Players([agents[m] for m in members], grader, {CURRENT_FORMAT.id: coordinator})
        )
        bound = head.for_pool(np.array([profiles[m].vector() for m in members]))
        mine += run_policy(
            "universal", scored, bound, runner=runner, budget=None, max_turns=max_turns,
            transcript_format=CURRENT_FORMAT.id,
        ).expected
        by_profile = max(range(len(members)), key=lambda i: profiles[members[i]].pass_rate)
        best += run_policy(
            "best", scored, PlanPolicy(len(members), ((by_profile, Role.WORKER),)), runner=runner,
            budget=None, max_turns=1,
        ).expected
    return {
        **setting, "max_turns": max_turns, "universal": float(np.mean(mine)),
        "best_by_profile": float(np.mean(best)), "margin_se": paired_margin(mine, best),
    }


def validate_command(args: argparse.Namespace) -> None:
    _, split, tasks, coordinator, grader, agents = setup(args.scratch)
    fit, held = validation_models(split)
    train_tasks = select_split(tasks, "train")
    calibration = calibration_tasks(train_tasks, N_CALIBRATION)
    scored = [t for t in train_tasks if t not in calibration]
    rows = []
    for values in itertools.product(*GRID.values()):
        rows.append(
            validation_score(
                dict(zip(GRID, values)), fit, held, calibration, scored, coordinator, grader,
                agents, args.scratch,
            )
        )
        print(json.dumps(rows[-1]), flush=True)
    result = {
        "how": "scripts/universal_study.py validate", "fit_models": fit, "validation_models": held,
        "calibration_tasks": len(calibration), "scored_tasks": len(scored),
        "pools": "every pool of 3-5 validation models", "settings": SETTINGS, "rows": rows,
        "chosen": {k: max(rows, key=lambda r: r["universal"])[k] for k in GRID},
    }
    out = UNIVERSAL / "validation-t1.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


def train_command(args: argparse.Namespace) -> None:
    pool, split, tasks, coordinator, grader, agents = setup(args.scratch)
    train_tasks = select_split(tasks, "train")
    calibration = calibration_tasks(train_tasks, N_CALIBRATION)
    setting = chosen_setting()
    settings = TrainSettings(
        **SETTINGS, project=setting["project"], sigma0=setting["sigma0"], max_turns=args.max_turns,
        cost_weight=args.cost_weight,
    )
    started = time.perf_counter()
    result = train_universal(
        train_tasks, [agents[n] for n in split["train"]], calibration, coordinator, grader,
        settings, args.scratch / f"universal-t{args.max_turns}.ckpt",
        skill_weight=setting["skill_weight"],
    )
    head = result.head
    out = ROOT / "weights" / args.out
    save_head(
        out, head,
        universal_metadata(
            backbone_of(pool), head.mean.shape[0], head, numerics=coordinator.numerics,
            training={
                "how": "scripts/universal_study.py train", "tasks": "evalperf", "split": "train",
                "models": split["train"], "calibration_tasks": [t.task_id for t in calibration],
                **asdict(settings), "skill_weight": setting["skill_weight"], "pool_sizes": [2, 6],
                "start": {"fitness": result.training.start.fitness},
                "fitness": result.training.fitness, "kept_start": result.training.kept_start,
                "history": result.training.history,
                "seconds": round(time.perf_counter() - started, 1),
            },
        ),
    )
    print(f"wrote {out}")


def measure_command(args: argparse.Namespace) -> None:
    _, split, tasks, coordinator, grader, agents = setup(args.scratch)
    head, _ = load_head(ROOT / "weights" / args.weights)
    train_tasks, test = select_split(tasks, "train"), select_split(tasks, "test")
    held = split["held_out"]
    rng = np.random.default_rng(args.seed)
    pools = [
        sorted(rng.choice(held, size=int(rng.integers(3, 6)), replace=False).tolist())
        for _ in range(POOLS)
    ]
    profiles = {
        n: dict(
            zip(
                held,
                measure_profiles(
                    [agents[m] for m in held], calibration_tasks(train_tasks, n), coordinator, head,
                    grader,
                ),
            )
        )
        for n in args.ns
    }
    results = []
    for index, members in enumerate(pools):
        pool_agents = [agents[m] for m in members]
        row: dict = {"pool": members}
        bound = {
            n: head.for_pool(np.array([profiles[n][m].vector() for m in members])) for n in args.ns
        }
        # the baselines do not depend on n: once per pool
        report = evaluate(
            test, pool_agents, [HeadUnderTest(f"n{n}", bound[n], coordinator) for n in args.ns],
            grader, max_turns=args.max_turns, baselines=MEASURED,
        )
        rows = {r.policy: r for r in report.pop("_rows")}
        oracle = [
            max(
                agents[m]
                .provider.record.rates[(agents[m].provider.spec.model, t.task_id)]
                .pass_rate
                for m in members
            )
            for t in test
        ]
        row["baselines"] = {
            "best_true": max(rows[f"single:{m}"].expected_pass_at_1 for m in members),
            "random": rows["random"].expected_pass_at_1,
            "cascade": rows["cascade"].expected_pass_at_1,
            "cascade_sampled": rows["cascade"].pass_at_1,
            "cascade_usd": rows["cascade"].usd_per_task, "oracle": float(np.mean(oracle)),
            "singles": {
                m: [rows[f"single:{m}"].expected_pass_at_1, rows[f"single:{m}"].usd_per_task]
                for m in members
            },
        }
        for n in args.ns:
            by_profile = max(members, key=lambda m: profiles[n][m].pass_rate)
            best, mine, pipeline = (
                rows[f"single:{by_profile}"], rows[f"n{n}"], rows[f"pipeline:{by_profile}"],
            )
            loop = rows[f"loop:{by_profile}"]
            row[f"n{n}"] = {
                "universal": mine.expected_pass_at_1, "universal_usd": mine.usd_per_task,
                "universal_sampled": mine.pass_at_1, "best_by_profile": by_profile,
                "best": best.expected_pass_at_1, "best_usd": best.usd_per_task,
                "margin_se": paired_margin(mine.expected, best.expected),
                "diff": [u - b for u, b in zip(mine.expected, best.expected)],
                # the same agent as Worker and Verifier, over the same turns
                # (a second answer after a REJECT)
                "best_pipeline": pipeline.expected_pass_at_1,
                "best_pipeline_usd": pipeline.usd_per_task,
                "margin_vs_pipeline_se": paired_margin(mine.expected, pipeline.expected),
                # loop: that agent answers, the pool's cheapest Verifier checks,
                # it answers again after a REJECT
                "best_loop": loop.expected_pass_at_1, "best_loop_usd": loop.usd_per_task,
                "diff_vs_loop": [u - b for u, b in zip(mine.expected, loop.expected)],
            }
        if index < args.pool_specific:
            fit = train(
                train_tasks, pool_agents, coordinator, grader,
                TrainSettings(**SETTINGS, **POOL_SPECIFIC_SETTINGS, max_turns=args.max_turns),
                args.scratch / f"pool-{index}-t{args.max_turns}.ckpt",
            )
            report = evaluate(
                test, pool_agents, [HeadUnderTest("specific", fit.head, coordinator)], grader,
                max_turns=args.max_turns,
            )
            row["pool_specific"] = report["_rows"][0].expected_pass_at_1
        print(json.dumps({k: v for k, v in row.items()}, default=float)[:400], flush=True)
        results.append(row)
    out = ROOT / "docs" / "universal" / f"held-out-t{args.max_turns}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "how": "scripts/universal_study.py measure", "weights": args.weights,
                "max_turns": args.max_turns, "seed": args.seed, "test_tasks": len(test),
                "pools": results,
            },
            indent=1, default=float,
        )
        + "\n"
    )
    print(f"wrote {out}")


def report_command(args: argparse.Namespace) -> None:
    """The markdown table and headline figures of docs/measurements.md from held-out-t{T}.json."""
    data = json.loads((UNIVERSAL / f"held-out-t{args.max_turns}.json").read_text())
    pools = data["pools"]
    print(f"max_turns {data['max_turns']}, {len(pools)} pools, {data['test_tasks']} test tasks")
    print(
        "| n | universal | best single by profile | pools strictly above | pooled margin (SE) "
        "| error reduction | universal $/task | best's $/task |"
        + (
            " loop: of the best by profile | its $/task | margin vs it "
            "(SE over tasks) | pools strictly above it |"
            if data["max_turns"] > 1
            else ""
        )
    )
    ns = sorted(int(key[1:]) for key in pools[0] if key[0] == "n" and key[1:].isdigit())
    for n in ns:
        cells = [p[f"n{n}"] for p in pools]
        mine, best = np.mean([c["universal"] for c in cells]), np.mean([c["best"] for c in cells])
        diffs = np.concatenate([c["diff"] for c in cells])
        row = [
            n, f"{mine:.3f}", f"{best:.3f}",
            f"{np.mean([c['universal'] > c['best'] for c in cells]):.0%}",
            f"{diffs.mean() / (diffs.std(ddof=1) / np.sqrt(len(diffs))):+.1f}",
            f"{((1 - best) - (1 - mine)) / (1 - best):+.0%}",
            f"{np.mean([c['universal_usd'] for c in cells]):.5f}",
            f"{np.mean([c['best_usd'] for c in cells]):.5f}",
        ]
        if data["max_turns"] > 1:
            # each test task's difference, over the pools
            by_task = np.mean(
                [c["diff_vs_loop"] for c in cells], axis=0
            )
            row += [
                f"{np.mean([c['best_loop'] for c in cells]):.3f}",
                f"{np.mean([c['best_loop_usd'] for c in cells]):.5f}",
                f"{by_task.mean() / (by_task.std(ddof=1) / np.sqrt(len(by_task))):+.1f}",
                f"{np.mean([c['universal'] > c['best_loop'] for c in cells]):.0%}",
            ]
        print("| " + " | ".join(str(x) for x in row) + " |")
    means = {
        key: np.mean([p["baselines"][key] for p in pools])
        for key in ("best_true", "random", "cascade", "oracle")
    }
    print(
        "means:", {k: round(float(v), 3) for k, v in means.items()}, "cascade $/task",
        round(float(np.mean([p["baselines"]["cascade_usd"] for p in pools])), 5),
    )
    n = 40 if 40 in ns else ns[-1]
    for index, p in enumerate(q for q in pools if "pool_specific" in q):
        c = p[f"n{n}"]
        gain = p["pool_specific"] - c["best"]
        kept = (c["universal"] - c["best"]) / gain if gain > 0 else float("nan")
        print(
            f"pool-specific {index}: specific {p['pool_specific']:.3f}, "
            f"best by profile {c['best']:.3f}, "
            f"universal (n={n}) {c['universal']:.3f}, share of the gain kept {kept:.0%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=("validate", "train", "measure", "report"))
    parser.add_argument("--max-turns", type=int, default=1)
    parser.add_argument("--cost-weight", type=float, default=0.0)
    parser.add_argument("--out", default="universal.npz")
    parser.add_argument("--weights", default="universal.npz")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--pool-specific", type=int, default=POOL_SPECIFIC,
        help="pools that also get their own head",
    )
    parser.add_argument(
        "--ns", type=lambda text: tuple(int(n) for n in text.split(",")), default=NS,
        help="calibration sizes to measure (comma list)",
    )
    parser.add_argument("--scratch", type=Path, default=None)
    args = parser.parse_args()
    args.scratch = args.scratch or Path(tempfile.mkdtemp(prefix="trinity-universal-"))
    args.scratch.mkdir(parents=True, exist_ok=True)
    {
        "validate": validate_command, "train": train_command, "measure": measure_command,
        "report": report_command,
    }[args.command](args)


if __name__ == "__main__":
    main()

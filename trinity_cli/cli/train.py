"""`trinity train`: evolve a head for a pool on a task set's train split."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Annotated

import typer

from trinity_cli.cli import options as opt
from trinity_cli.cli.cluster_options import RayAddress, RayWorkers, check_ray_flags, runner_for
from trinity_cli.cli.console import say as say_always
from trinity_cli.cli.console import say_unless, stderr, warn

# train.es.TrainSettings' defaults, without importing numpy for --help
DEFAULTS = SimpleNamespace(
    generations=30, popsize=16, sigma0=0.2, max_turns=5, project=8, imitate="auto"
)


HELP = f"""Evolve the routing head with sep-CMA-ES on the task set's train split.

The search starts from a head fitted to play best-fixed, the best hand-built plan on the
training tasks (a sequence of Worker answers with the cheapest Verifier between them), or
(--imitate routed) the plan it reads from each task's problem, and scores every candidate
exactly, greedily, on every training task (--batch-size: fewer a generation); if the search
does not beat its start on the training tasks, the head is the start. First --folds K
cross-validation (default 5) trains without each fold and compares head and plan on it; with
--imitate auto (the default) for both starts, and the better held-out head's start is taken.

Writes OUT (.npz; by default `<pool>-<tasks>.npz` in the user heads folder, where solve
finds it) with its .json metadata, OUT-plan.npz (the starting plan, a routing policy that
solve --weights accepts), OUT.csv (the training curve; OUT.png too with the `plot` extra) and
OUT.ckpt (a checkpoint after every generation; --resume continues from it). When the
cross-validated head is below its plan (training.below_start), solve routes with the plan
unless the head is named. Every agent call goes through a disk cache, so a second run on the
same tasks makes no provider calls. Exit codes as for solve: 2 bad tasks or flags, 3
configuration, 4 provider error, 5 stopped for budget.

--dry-run prints the run's episodes, agent calls and an upper bound of its $ on stdout, then
exits without loading the coordinator, calling an agent or writing a file.

{opt.SUMMARY_LOGGED}

\b
Example: trinity train --pool ldb-mbpp --tasks mbpp --dry-run"""


def train(
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Where to write the head (.npz). Default: the user heads folder, where solve "
            "finds it.",
        ),
    ] = None,
    tasks: opt.Tasks = "humaneval", pool: opt.Pool = None,
    generations: Annotated[int, typer.Option("--generations", min=1)] = DEFAULTS.generations,
    popsize: Annotated[int, typer.Option("--popsize", min=2)] = DEFAULTS.popsize,
    sigma0: Annotated[float, typer.Option("--sigma0", min=1e-6)] = DEFAULTS.sigma0,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size", min=1, help="Tasks each generation. Default: all the training tasks."
        ),
    ] = None,
    seed: opt.Seed = 0,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1)] = DEFAULTS.max_turns,
    cost_weight: Annotated[
        float, typer.Option("--cost-weight", min=0.0, help="Fitness −= this × mean $ per task.")
    ] = 0.0,
    project: Annotated[
        int | None,
        typer.Option(
            "--project", min=1,
            help="Head over K directions of the states: their mean, what tells the turns apart, "
            "then principal components within a turn.",
        ),
    ] = DEFAULTS.project,
    imitate: Annotated[
        str,
        typer.Option(
            "--imitate",
            help="Where the search starts: 'best-fixed' on every task, 'routed': the plan read "
            "from each task's problem, or 'auto': the one cross-validation prefers (best-fixed "
            "with --folds 0).",
        ),
    ] = DEFAULTS.imitate,
    folds: Annotated[
        int,
        typer.Option(
            "--folds", min=0,
            help="Cross-validate head against plan over K folds of the training tasks (0: skip).",
        ),
    ] = 5,
    budget_usd: opt.BudgetUsd = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from OUT.ckpt.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Replace the head, plan and curve an earlier run wrote at --out."
        ),
    ] = False,
    no_cache: opt.NoCache = False, quiet: opt.Quiet = False, workers: opt.Workers = None,
    no_log: opt.NoLog = False, offline: opt.Offline = False, dry_run: opt.DryRun = False,
    ray: RayAddress = None, ray_workers: RayWorkers = None,
) -> int:
    from trinity_cli.cli.dry_run import print_plan
    from trinity_cli.cli.progress import GenerationDisplay
    from trinity_cli.errors import UsageError
    from trinity_cli.runtime import load_run_pool
    from trinity_cli.train.checkpoint import default_out, interrupted_note
    from trinity_cli.train.es import TrainSettings
    from trinity_cli.train.workflow import plan_job, train_and_save

    check_ray_flags(ray, ray_workers)
    if out is not None and out.suffix != ".npz":
        raise UsageError(f"--out must end in .npz, got {out}")
    if dry_run and resume:
        raise UsageError("--dry-run plans a fresh run: drop --resume")
    pool_cfg = load_run_pool(pool, offline, budget_usd, warn)
    settings = TrainSettings(
        generations, popsize, sigma0, batch_size, seed, max_turns, cost_weight, project, budget_usd
    )
    say = say_unless(quiet)
    out = out or default_out(pool_cfg.source, tasks, resume)
    job = plan_job(
        pool_cfg, tasks, out, settings, folds, imitate, resume, note=say, force=force
    )
    if dry_run:
        print_plan(job)
        return 0
    try:
        trained = train_and_save(
            job, no_cache=no_cache, workers=workers, log=not no_log, say=say, warn=warn,
            display=lambda run, coord: GenerationDisplay(stderr, run.caches, coord, quiet),
            open_runner=runner_for(ray, ray_workers, job.all_tasks, quiet=quiet),
        )
    except KeyboardInterrupt:
        say_always(interrupted_note(out, cached=not no_cache))
        raise
    for line in trained.summary_lines():
        say(line)
    return 5 if trained.result.stopped_for_budget else 0

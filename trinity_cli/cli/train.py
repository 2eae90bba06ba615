"""`trinity train`: evolve a head for a pool on a task set's train split."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from trinity_cli.cli.cluster_options import RayAddress, RayWorkers, check_ray_flags, runner_for
from trinity_cli.cli.console import stderr
from trinity_cli.cli.options import PoolOption, TasksOption

if TYPE_CHECKING:
    from trinity_cli.train.crossval import CrossValidation


@dataclass(frozen=True)
class _Defaults:  # train.es.TrainSettings' defaults, without importing numpy for --help
    generations: int = 30
    popsize: int = 16
    sigma0: float = 0.2
    max_turns: int = 5
    project: int = 8
    imitate: str = "auto"


DEFAULTS = _Defaults()


HELP = """Evolve the routing head with sep-CMA-ES on the task set's train split.

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

The run is written to the run log as one summary row (see `trinity logs`), also when it stops
early; --no-log or TRINITY_NO_LOG=1 turns that off.

\b
Example: trinity train --pool ldb-mbpp --tasks mbpp --dry-run"""


def train(
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Where to write the head (.npz). Default: the user heads folder, where solve finds it.",
        ),
    ] = None,
    tasks: TasksOption = "humaneval",
    pool: PoolOption = None,
    generations: Annotated[int, typer.Option("--generations", min=1)] = DEFAULTS.generations,
    popsize: Annotated[int, typer.Option("--popsize", min=2)] = DEFAULTS.popsize,
    sigma0: Annotated[float, typer.Option("--sigma0", min=1e-6)] = DEFAULTS.sigma0,
    batch_size: Annotated[
        int | None,
        typer.Option(
            "--batch-size", min=1, help="Tasks each generation. Default: all the training tasks."
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1)] = DEFAULTS.max_turns,
    cost_weight: Annotated[
        float, typer.Option("--cost-weight", min=0.0, help="Fitness −= this × mean $ per task.")
    ] = 0.0,
    project: Annotated[
        int | None,
        typer.Option(
            "--project",
            min=1,
            help="Head over K directions of the states: their mean, what tells the turns apart, then principal components within a turn.",
        ),
    ] = DEFAULTS.project,
    imitate: Annotated[
        str,
        typer.Option(
            "--imitate",
            help="Where the search starts: 'best-fixed' on every task, 'routed': the plan read from each task's problem, or 'auto': the one cross-validation prefers (best-fixed with --folds 0).",
        ),
    ] = DEFAULTS.imitate,
    folds: Annotated[
        int,
        typer.Option(
            "--folds",
            min=0,
            help="Cross-validate head against plan over K folds of the training tasks (0: skip).",
        ),
    ] = 5,
    budget_usd: Annotated[float | None, typer.Option("--budget-usd", min=0.0)] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from OUT.ckpt.")] = False,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Do not read or write the disk caches.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Episodes in flight at once, to overlap agents' network waits (results do not change). Default: 4 with a network agent in the pool, else 1.",
        ),
    ] = None,
    no_log: Annotated[
        bool, typer.Option("--no-log", help="Do not write this run to the run log.")
    ] = False,
    offline: Annotated[
        bool, typer.Option("--offline", help="Refuse agents that need the network (exit 3).")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the episodes, agent calls and worst-case $ of this run; call and write nothing.",
        ),
    ] = False,
    ray: RayAddress = None,
    ray_workers: RayWorkers = None,
) -> int:
    from trinity_cli.cli.dry_run import print_plan
    from trinity_cli.cli.progress import GenerationDisplay
    from trinity_cli.core.budget import Budget
    from trinity_cli.core.head import PlanPolicy
    from trinity_cli.errors import BudgetExceeded, ConfigError, UsageError
    from trinity_cli.heads.files import metadata_for, plan_path, save_head
    from trinity_cli.runtime import backbone_of, build_run, load_run_pool
    from trinity_cli.store.runlog import disabled, summary_row
    from trinity_cli.tasks.taskset import gradable, load_tasks, select_split
    from trinity_cli.train.checkpoint import checkpoint_path, default_out, unfinished
    from trinity_cli.train.crossval import starts
    from trinity_cli.train.curves import plot_training_curve, write_training_curve
    from trinity_cli.train.es import IMITATE, TrainSettings, new_forest
    from trinity_cli.train.es import train as run_training
    from trinity_cli.train.fixed import padded

    check_ray_flags(ray, ray_workers)
    if out is not None and out.suffix != ".npz":
        raise UsageError(f"--out must end in .npz, got {out}")
    if dry_run and resume:
        raise UsageError("--dry-run plans a fresh run: drop --resume")
    pool_cfg = load_run_pool(pool, offline, budget_usd)
    out = out or default_out(pool_cfg.source, tasks, resume)
    if not resume and unfinished(out):
        raise ConfigError(
            f"{checkpoint_path(out)} holds an unfinished run: --resume continues it; "
            "another --out starts afresh (delete the checkpoint to discard it)"
        )
    all_tasks = load_tasks(tasks)
    train_tasks, left_out = gradable(select_split(all_tasks, "train"))
    if left_out and not quiet:
        stderr.print(f"note: {left_out}", markup=False)
    if len(train_tasks) < 2:
        raise UsageError(
            f"task set {tasks} has {len(train_tasks)} training tasks; at least 2 are needed"
        )
    if folds > len(train_tasks):
        folds = len(train_tasks)
        if not quiet:
            stderr.print(f"note: --folds {folds}: one fold per training task", markup=False)
    if imitate not in (*IMITATE, "auto"):
        raise UsageError(f"--imitate {imitate!r}: one of {', '.join(IMITATE)}, auto")
    imitations = (
        (imitate,) if imitate != "auto" else IMITATE if folds else IMITATE[:1]
    )  # no folds: best-fixed
    settings = TrainSettings(
        generations,
        popsize,
        sigma0,
        batch_size,
        seed,
        max_turns,
        cost_weight,
        project,
        budget_usd,
        imitations[0],
    )
    if dry_run:
        print_plan(train_tasks, pool_cfg.agents, settings, folds, len(imitations))
        return 0
    run = build_run(pool_cfg, all_tasks, no_cache, workers)
    caches, agents, workers, coordinator = run.caches, run.agents, run.workers, run.coordinator()
    backbone = backbone_of(pool_cfg)
    display = GenerationDisplay(stderr, caches, coordinator, quiet)
    logged = summary_row(
        "train",
        f"{tasks}:train",
        pool_cfg,
        str(out),
        settings.__dict__,
        enabled=not disabled(no_log),
        warn=lambda msg: stderr.print(f"warning: {msg}", markup=False),
    )
    say = (
        (lambda msg: None)
        if quiet
        else (lambda msg: stderr.print(msg, markup=False, highlight=False))
    )
    if not resume:
        say(
            f"writing {out}; first best-fixed, the start: every plan of Worker answers with the cheapest Verifier "
            f"between them, on {len(train_tasks)} training tasks (each turn made and graded once; quick on a rerun)"
        )
    cluster = runner_for(
        ray,
        ray_workers,
        pool_cfg,
        all_tasks,
        threads=workers,
        coordinators={backbone.transcript_format: coordinator},
        caches=caches,
        quiet=quiet,
    )
    validation: CrossValidation | None = None
    validations: dict[str, CrossValidation] = {}
    budget = Budget(budget_usd)
    with logged as summary, cluster as runner, display:
        forest = new_forest(agents, coordinator, caches.grader, settings.max_turns, workers, runner)
        try:
            if folds:
                say(
                    f"cross-validating {' and '.join(imitations)} over {folds} folds: in each, the plan chosen and a "
                    "head trained without the fold, both scored on it"
                )
                chosen, validations = starts(
                    train_tasks,
                    agents,
                    coordinator,
                    caches.grader,
                    settings,
                    imitations,
                    folds,
                    forest,
                    budget,
                    on_fold=lambda name, fold: say(f"{name}: fold {fold}/{folds} done"),
                )
                settings, validation = replace(settings, imitate=chosen), validations[chosen]
                if len(imitations) > 1:
                    say(
                        f"chosen start: {chosen} (held-out heads: "
                        + ", ".join(
                            f"{name} {v.head_fitness:.4f}" for name, v in validations.items()
                        )
                        + ")"
                    )
            result = run_training(
                train_tasks,
                agents,
                coordinator,
                caches.grader,
                settings,
                checkpoint_path(out),
                resume=resume,
                fingerprint={
                    "pool": [a.name for a in pool_cfg.agents],
                    "backbone": backbone.sha256,
                    "transcript_format": backbone.transcript_format,
                    "numerics": coordinator.numerics,
                },
                on_generation=display.update,
                forest=forest,
                budget=budget,
                on_start=lambda start: say(start_line(start, agents)),
            )
        except BudgetExceeded as refused:
            summary.done(
                "budget", budget.spent_usd, {"tasks": tasks, "out": str(out)}, refused.message
            )
            raise BudgetExceeded(
                f"{refused.message} (before any head was made: nothing written)"
            ) from None
        summary.done(
            "budget" if result.stopped_for_budget else "completed",
            result.spent_usd,
            {
                "tasks": tasks,
                "n_tasks": len(train_tasks),
                "out": str(out),
                "generations": len(result.history),
                "best_fitness": result.best_fitness,
                "spent_usd": result.spent_usd,
                "stopped_for_budget": result.stopped_for_budget,
                "history": result.history,
            },
        )
    below_start = None if validation is None else validation.below_start
    training = {
        "tasks": tasks,
        "split": "train",
        "n_tasks": len(train_tasks),
        **settings.__dict__,
        "folds": folds,
        "final_best_fitness": result.best_fitness,
        "fitness": result.fitness,
        "spent_usd": result.spent_usd,
        "start": result.start.as_json(agents),
        "kept_start": result.kept_start,
        "below_start": below_start,
        "validation": None if validation is None else validation.as_json(),
        "starts": {name: v.scores() for name, v in validations.items()},
        "history": result.history,
        "stopped_for_budget": result.stopped_for_budget,
    }
    meta = metadata_for(
        backbone,
        pool_cfg,
        coordinator.hidden_size,
        trained=True,
        numerics=coordinator.numerics,
        training=training,
        **({"auto_select": False} if below_start else {}),
    )
    save_head(out, result.head, meta)
    plan_out = plan_path(out)
    save_head(
        plan_out,
        PlanPolicy(len(agents), padded(result.start.plan.plan, agents, settings.max_turns)),  # type: ignore[union-attr]
        metadata_for(
            backbone,
            pool_cfg,
            coordinator.hidden_size,
            kind="plan",
            trained=True,
            training={**training, "history": [], "plan_of": str(out)},
            **({} if below_start else {"auto_select": False}),
        ),
    )
    write_training_curve(out.with_suffix(".csv"), result.history)
    plotted = plot_training_curve(out.with_suffix(".png"), result.history)
    overrun = result.budget.overrun_warning() if result.budget else None
    if overrun:
        say(f"warning: {overrun}")
    say(
        f"head: fitness {result.fitness:.4f} on the training tasks (start {result.start.fitness:.4f})"
        + (
            "; the search did not beat its start there, so the head is the start"
            if result.kept_start
            else ""
        )
    )
    if validation is not None:
        margin = validation.margin_se
        say(
            f"cross-validated ({folds} folds): head {validation.as_json()['head_fitness']:.4f} vs its plan "
            f"{validation.as_json()['plan_fitness']:.4f} ({'n/a' if margin is None else f'{margin:+.2f}'} SE; "
            f"choices differ on {validation.differing} of {len(train_tasks)} tasks)"
        )
        if below_start:
            say(
                f"the head is below its starting plan: solve routes with the plan {plan_out} unless the head is named"
            )
    say(
        f"wrote {out} and {plan_out.name} (+ .json, .csv{', .png' if plotted else ''}, .ckpt); {caches.report()}; "
        f"coordinator passes saved by the memo: {coordinator.saved_fraction:.0%}"
    )
    return 5 if result.stopped_for_budget else 0


def start_line(start: Any, agents: Any) -> str:
    """Where the search starts, for stderr."""
    from trinity_cli.train.fixed import describe

    plan = " → ".join(f"{agent} {role}" for agent, role in describe(start.plan.plan, agents))
    return (
        f"start: best-fixed {plan} (fitness {start.plan.fitness:.4f} on the training tasks); the start head "
        f"repeats {start.agreement:.0%} of its decisions and scores {start.fitness:.4f} "
        f"(the plan padded with Verifier turns: {start.plan_fitness:.4f})"
    )

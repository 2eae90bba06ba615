"""Train and save a head: what `trinity train` does once its flags are parsed, as one library
call. The caller decides how progress is shown (`say`, a generation display) and where the
episodes are played (a Ray cluster or here)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trinity_cli.core.budget import Budget
from trinity_cli.core.head import PlanPolicy
from trinity_cli.errors import BudgetExceeded, ConfigError, UsageError
from trinity_cli.heads.files import metadata_for, plan_path, save_head, sidecar
from trinity_cli.paths import unwritable
from trinity_cli.pool.spec import Pool
from trinity_cli.runtime import Run, RunnerFactory, backbone_of, build_run, play_here
from trinity_cli.store.runlog import disabled, summary_row
from trinity_cli.tasks.taskset import Task, gradable, load_tasks, select_split
from trinity_cli.train.checkpoint import checkpoint_path, read, unfinished, written_by_train
from trinity_cli.train.crossval import CrossValidation, starts
from trinity_cli.train.curves import plot_training_curve, write_training_curve
from trinity_cli.train.es import IMITATE, TrainResult, TrainSettings, new_forest, train
from trinity_cli.train.fixed import describe, padded

Say = Callable[[str], None]


class NoDisplay:
    """A generation display that shows nothing."""

    def __enter__(self) -> NoDisplay:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, report: Any) -> None:
        pass


@dataclass(frozen=True)
class TrainJob:
    """A checked request: the pool, its task set's training tasks and the settings."""

    pool: Pool
    tasks: str  # the task set's name, as given
    all_tasks: list[Task]
    train_tasks: list[Task]
    out: Path
    settings: TrainSettings
    folds: int
    imitations: tuple[str, ...]  # the starts cross-validation compares; the first without folds
    resume: bool = False  # continue from the checkpoint beside `out`


def written_beside(out: Path) -> list[Path]:
    """The files a finished run writes: the head, its plan, their sidecars, the curve."""
    plan = plan_path(out)
    curves = [out.with_suffix(".csv"), out.with_suffix(".png")]
    return [out, sidecar(out), plan, sidecar(plan), *curves]


def plan_job(
    pool: Pool, tasks: str, out: Path, settings: TrainSettings, folds: int = 5,
    imitate: str = "auto", resume: bool = False, note: Say = lambda msg: None,
    force: bool = False,
) -> TrainJob:
    """The job, or a usage or configuration error before anything is built (`resume`: continue
    the checkpoint beside `out`, which is refused otherwise; `force`: a fresh run may replace
    the files of an earlier one; `note` hears what is left out)."""
    # all before minutes of cross-validation
    why = unwritable(out.parent)
    if why is not None:
        raise UsageError(f"--out {out}: {why}")
    if resume:
        read(checkpoint_path(out))  # there, and a checkpoint
    elif unfinished(out):
        if not written_by_train(checkpoint_path(out)):
            raise ConfigError(
                f"{checkpoint_path(out)} is in the way and is no checkpoint train wrote: move it "
                "aside, or another --out starts afresh (train never replaces it)"
            )
        raise ConfigError(
            f"{checkpoint_path(out)} holds an unfinished run: --resume continues it; "
            "another --out starts afresh (delete the checkpoint to discard it)"
        )
    beside = written_beside(out)
    folders = [p.name for p in beside if p.is_dir()]
    if folders:  # not even --force replaces a folder
        raise ConfigError(
            f"--out {out}: {', '.join(folders)} is a folder, where train writes a file"
        )
    existing = [p.name for p in beside if p.exists()]
    if existing and not (resume or force):
        raise ConfigError(
            f"--out {out} would replace {', '.join(existing)}: choose another --out, or pass "
            "--force to replace them"
        )
    all_tasks = load_tasks(tasks)
    train_tasks, left_out = gradable(select_split(all_tasks, "train"))
    if left_out:
        note(f"note: {left_out}")
    if len(train_tasks) < 2:
        raise UsageError(
            f"task set {tasks} has {len(train_tasks)} training tasks; at least 2 are needed"
        )
    if folds > len(train_tasks):
        folds = len(train_tasks)
        note(f"note: --folds {folds}: one fold per training task")
    if imitate not in (*IMITATE, "auto"):
        raise UsageError(f"--imitate {imitate!r}: one of {', '.join(IMITATE)}, auto")
    # without folds nothing tells the starts apart: best-fixed
    imitations = (imitate,) if imitate != "auto" else IMITATE if folds else IMITATE[:1]
    settings = replace(settings, imitate=imitations[0])
    return TrainJob(pool, tasks, all_tasks, train_tasks, out, settings, folds, imitations, resume)


@dataclass
class Trained:
    job: TrainJob
    result: TrainResult
    validation: CrossValidation | None
    plan_out: Path
    plotted: bool  # the curve's .png was drawn too
    run: Run
    coordinator: Any

    def summary_lines(self) -> list[str]:
        """What the run made, for the user: the head's fitness, its held-out margin, the files."""
        job, result, validation = self.job, self.result, self.validation
        lines = []
        overrun = result.budget.overrun_warning() if result.budget else None
        if overrun:
            lines.append(f"warning: {overrun}")
        kept = "; the search did not beat its start there, so the head is the start"
        lines.append(
            f"head: fitness {result.fitness:.4f} on the training tasks (start "
            f"{result.start.fitness:.4f})" + (kept if result.kept_start else "")
        )
        if validation is not None:
            scores = validation.as_json()
            margin = "n/a" if validation.margin_se is None else f"{validation.margin_se:+.2f}"
            lines.append(
                f"cross-validated ({job.folds} folds): head {scores['head_fitness']:.4f} vs its "
                f"plan {scores['plan_fitness']:.4f} ({margin} SE; choices differ on "
                f"{validation.differing} of {len(job.train_tasks)} tasks)"
            )
            if validation.below_start:
                lines.append(
                    f"the head is below its starting plan: solve routes with the plan "
                    f"{self.plan_out} unless the head is named"
                )
        png = ", .png" if self.plotted else ""
        lines.append(
            f"wrote {job.out} and {self.plan_out.name} (+ .json, .csv{png}, .ckpt); "
            f"{self.run.caches.report()}; coordinator passes saved by the memo: "
            f"{self.coordinator.saved_fraction:.0%}"
        )
        return lines


PROGRESS_EVERY_S = 60.0


def ticker(seconds: float, report: Callable[[], None]) -> Callable[[], None]:
    """Calls `report` every `seconds` on a daemon thread until the returned function is called;
    once it has returned, no report comes (none lands after what its caller says next)."""
    stop, reporting = threading.Event(), threading.Lock()

    def loop() -> None:
        while not stop.wait(seconds):
            with reporting:
                if not stop.is_set():
                    report()

    def halt() -> None:
        with reporting:
            stop.set()

    threading.Thread(target=loop, daemon=True, name="trinity-progress").start()
    return halt


def train_and_save(
    job: TrainJob, *, no_cache: bool = False, workers: int | None = None,
    log: bool = True, say: Say = lambda msg: None, warn: Say = lambda msg: None,
    display: Callable[[Run, Any], Any] = lambda run, coordinator: NoDisplay(),
    open_runner: RunnerFactory = play_here,
) -> Trained:
    """Cross-validate the starts (--folds), train, and write the head, its plan, its curve and
    its metadata; with `log`, one summary row in the run log (TRINITY_NO_LOG turns it off).
    `display(run, coordinator)` is a context manager whose `update` gets each generation's
    report; `open_runner` says where the episodes are played (runtime.RunnerFactory)."""
    settings, folds, out, resume = job.settings, job.folds, job.out, job.resume
    run = build_run(job.pool, job.all_tasks, no_cache, workers)
    coordinator = run.coordinator()
    backbone = backbone_of(job.pool)
    shown = display(run, coordinator)
    problem = f"{job.tasks}:train"
    budget = Budget(settings.budget_usd)
    logged = summary_row(
        "train", problem, job.pool, str(out), settings.__dict__, enabled=not disabled(not log),
        warn=warn, spent=lambda: budget.spent_usd,
    )
    if not resume:
        say(
            f"writing {out}; first best-fixed, the start: every plan of Worker answers with the "
            f"cheapest Verifier between them, on {len(job.train_tasks)} training tasks (each turn "
            f"made and graded once{'' if no_cache else '; quick on a rerun'})"
        )
    validation: CrossValidation | None = None
    validations: dict[str, CrossValidation] = {}
    with logged as summary, open_runner(run, run.coordinators) as runner, shown:
        forest = new_forest(
            run.agents, coordinator, run.caches.grader, settings.max_turns, run.workers, runner
        )
        # minutes on a cold cache before the first generation says anything
        stop_playing = ticker(
            PROGRESS_EVERY_S,
            lambda: say(
                f"still playing: {forest.grown:,} turns made and graded, {forest.encoded:,} "
                "states encoded so far"
            ),
        )

        def started(start: Any) -> None:
            stop_playing()
            say(start_line(start, run.agents))

        try:
            if folds:
                say(
                    f"cross-validating {' and '.join(job.imitations)} over {folds} folds: in "
                    "each, the plan chosen and a head trained without the fold, both scored on it"
                )
                chosen, validations = starts(
                    job.train_tasks, run.agents, coordinator, run.caches.grader, settings,
                    job.imitations, folds, forest, budget,
                    on_fold=lambda name, fold: say(f"{name}: fold {fold}/{folds} done"),
                )
                settings, validation = replace(settings, imitate=chosen), validations[chosen]
                if len(job.imitations) > 1:
                    heads = ", ".join(f"{n} {v.head_fitness:.4f}" for n, v in validations.items())
                    say(f"chosen start: {chosen} (held-out heads: {heads})")
            result = train(
                job.train_tasks, run.agents, coordinator, run.caches.grader, settings,
                checkpoint_path(out), resume=resume,
                fingerprint={
                    "pool": [a.name for a in job.pool.agents], "backbone": backbone.sha256,
                    "transcript_format": backbone.transcript_format,
                    "numerics": coordinator.numerics,
                },
                on_generation=shown.update, forest=forest, budget=budget,
                on_start=started,
            )
        except BudgetExceeded as refused:
            result_json = {"tasks": job.tasks, "out": str(out)}
            summary.done("budget", budget.spent_usd, result_json, refused.message)
            raise BudgetExceeded(
                f"{refused.message} (before any head was made: nothing written)"
            ) from None
        finally:
            stop_playing()
        summary.done(
            "budget" if result.stopped_for_budget else "completed", result.spent_usd,
            {
                "tasks": job.tasks, "n_tasks": len(job.train_tasks), "out": str(out),
                "generations": len(result.history), "best_fitness": result.best_fitness,
                "spent_usd": result.spent_usd, "stopped_for_budget": result.stopped_for_budget,
                "history": result.history,
            },
        )
    plan_out = _save(job, settings, result, validation, validations, run, coordinator)
    write_training_curve(out.with_suffix(".csv"), result.history)
    plotted = plot_training_curve(out.with_suffix(".png"), result.history)
    return Trained(job, result, validation, plan_out, plotted, run, coordinator)


def _save(
    job: TrainJob, settings: TrainSettings, result: TrainResult, validation: CrossValidation | None,
    validations: dict[str, CrossValidation], run: Run, coordinator: Any,
) -> Path:
    """The head and its plan, each with metadata; the pool's default is the better of the two
    held out (`auto_select`). Returns the plan's path."""
    below_start = None if validation is None else validation.below_start
    training = {
        "tasks": job.tasks, "split": "train", "n_tasks": len(job.train_tasks), **settings.__dict__,
        "folds": job.folds, "final_best_fitness": result.best_fitness, "fitness": result.fitness,
        "spent_usd": result.spent_usd, "start": result.start.as_json(run.agents),
        "kept_start": result.kept_start, "below_start": below_start,
        "validation": None if validation is None else validation.as_json(),
        "starts": {name: v.scores() for name, v in validations.items()}, "history": result.history,
        "stopped_for_budget": result.stopped_for_budget,
    }
    backbone, hidden = backbone_of(job.pool), coordinator.hidden_size
    meta = metadata_for(
        backbone, job.pool, hidden, trained=True, numerics=coordinator.numerics, training=training,
        **({"auto_select": False} if below_start else {}),
    )
    save_head(job.out, result.head, meta)
    plan_out = plan_path(job.out)
    plan = padded(result.start.plan.plan, run.agents, settings.max_turns)  # type: ignore[union-attr]
    save_head(
        plan_out, PlanPolicy(len(run.agents), plan),
        metadata_for(
            backbone, job.pool, hidden, kind="plan", trained=True,
            training={**training, "history": [], "plan_of": str(job.out)},
            **({} if below_start else {"auto_select": False}),
        ),
    )
    return plan_out


def start_line(start: Any, agents: Any) -> str:
    """Where the search starts, for the user."""
    plan = " → ".join(f"{agent} {role}" for agent, role in describe(start.plan.plan, agents))
    return (
        f"start: best-fixed {plan} (fitness {start.plan.fitness:.4f} on the training tasks); "
        f"the start head repeats {start.agreement:.0%} of its decisions and scores "
        f"{start.fitness:.4f} (the plan padded with Verifier turns: {start.plan_fitness:.4f})"
    )

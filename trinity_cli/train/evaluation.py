"""Evaluate and report: what `trinity eval` does once its flags are parsed, as one library call.
Heads are chosen as solve chooses them, the tasks are checked, and every row (the heads and the
baselines) is played on the same tasks, under one budget, into one report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trinity_cli.core.budget import Budget
from trinity_cli.errors import UsageError
from trinity_cli.heads.files import head_names
from trinity_cli.pool.spec import Pool
from trinity_cli.runtime import (
    FALLBACK,
    LoadedHead,
    Run,
    RunnerFactory,
    build_run,
    choose_policy,
    play_here,
    warn_if_other_numerics,
)
from trinity_cli.store.runlog import disabled, summary_row
from trinity_cli.tasks.taskset import Task, gradable, load_tasks, select_split
from trinity_cli.train.baselines import FixedOn, HeadUnderTest, baseline_kinds, evaluate
from trinity_cli.train.curves import write_quality_cost_curve

DEFAULT_MAX_TURNS = 3  # eval's turn limit when the head does not say what it was trained with
Say = Callable[[str], None]


@dataclass(frozen=True)
class EvalJob:
    """A checked request: the heads, the tasks and every row's settings."""

    pool: Pool
    tasks: str  # the task set's name, as given
    split: str
    limit: int | None
    all_tasks: list[Task]
    played: list[Task]  # the tasks every row plays
    scope: str  # which tasks, in words
    fixed_tasks: list[Task]  # where best-fixed is chosen (none: no best-fixed row)
    heads: list[LoadedHead]
    names: list[str]  # the heads' rows
    kinds: tuple[str, ...]  # the baseline rows
    max_turns: int
    cost_weight: float
    sample: int
    seed: int
    budget_usd: float | None

    @property
    def sources(self) -> str:
        return ", ".join(head.source for head in self.heads)


def plan_eval(
    pool: Pool, tasks: str, weights: str | None, split: str = "test", *, limit: int | None = None,
    max_turns: int | None = None, cost_weight: float | None = None, baselines: str = "all",
    sample: int = 0, seed: int = 0, budget_usd: float | None = None, note: Say = lambda msg: None,
    warn: Say = lambda msg: None,
) -> EvalJob:
    """The job, or a usage or configuration error before anything is built. Turn limit and
    cost weight default to the first head's training settings. `note` hears which tasks and
    rows are left out, `warn` of heads scored on their own training tasks."""
    kinds = baseline_kinds(baselines)
    heads = [choose_policy(pool, name, warn=lambda msg: None) for name in head_names(weights)]
    training = (heads[0].meta or {}).get("training", {})
    max_turns = max_turns or training.get("max_turns") or DEFAULT_MAX_TURNS
    cost_weight = (training.get("cost_weight") or 0.0) if cost_weight is None else cost_weight
    all_tasks = load_tasks(tasks)
    played, left_out = gradable(select_split(all_tasks, split))
    if left_out:
        note(f"note: {left_out}")
    if not played:
        raise UsageError(f"task set {tasks} has no gradable tasks in its {split} split")
    scope = f"{len(played)} tasks"
    if limit is not None and limit < len(played):
        scope = f"the first {limit} of {len(played)} tasks (--limit)"
        played = played[:limit]
    fixed_tasks = _fixed_tasks(all_tasks, tasks, split, note) if "best-fixed" in kinds else []
    for head in heads:
        trained_on = (head.meta or {}).get("training", {})
        if trained_on.get("tasks") == tasks and split in ("train", "all"):
            warn(f"these tasks overlap the head's training split ({tasks}:train): {head.source}")
    return EvalJob(
        pool, tasks, split, limit, all_tasks, played, scope, fixed_tasks, heads,
        _row_names(heads), kinds, max_turns, cost_weight, sample, seed, budget_usd,
    )


def _fixed_tasks(all_tasks: list[Task], tasks: str, split: str, note: Say) -> list[Task]:
    """The train split best-fixed is chosen on; none where it is what eval plays."""
    if split in ("train", "all"):
        note(
            "note: best-fixed is left out: it is chosen on the train split, which "
            f"--split {split} evaluates on"
        )
        return []
    fixed_tasks = gradable(select_split(all_tasks, "train"))[0]
    if not fixed_tasks:
        note(
            f"note: best-fixed is left out: task set {tasks} has no gradable training tasks to "
            "choose it on"
        )
    return fixed_tasks


def _row_names(heads: Sequence[LoadedHead]) -> list[str]:
    if len(heads) == 1:
        return ["fallback" if heads[0].source == FALLBACK else "trained"]
    return [
        "fallback" if h.source == FALLBACK else f"trained:{Path(h.source).stem}" for h in heads
    ]


@dataclass
class Evaluated:
    report: dict[str, Any]  # what --json prints
    rows: list[Any]  # baselines.Row, in table order
    budget: Budget
    written: list[Path]  # the quality/cost curve of several heads

    def summary_lines(self) -> list[str]:
        """For the user, after the table: the files written, an overrun, a stop for budget."""
        lines = [f"wrote {', '.join(str(w) for w in self.written)}"] if self.written else []
        overrun = self.budget.overrun_warning()
        if overrun:
            lines.append(f"warning: {overrun}")
        if self.report["partial"]:
            stopped = f"(eval stopped; rows finished: {len(self.rows)})"
            lines.append(f"error: {self.report['error']} {stopped}")
        return lines


def evaluate_and_report(
    job: EvalJob, *, no_cache: bool = False, workers: int | None = None, log: bool = True,
    warn: Say = lambda msg: None, open_runner: RunnerFactory = play_here,
    rows_display: Callable[[], AbstractContextManager[Callable[[Any], None]]] = lambda: nullcontext(
        lambda row: None
    ),
    out_dir: Path = Path("."),
) -> Evaluated:
    """Every row on the job's tasks, with `log` one summary row in the run log (TRINITY_NO_LOG
    turns it off); with several heads, their quality/cost curve written to `out_dir`. A budget
    refusal ends the rows early: the report is then `partial` with its `error`. While the rows
    play, `rows_display()` is entered and what it yields hears each finished row."""
    run = build_run(job.pool, job.all_tasks, no_cache, workers)
    heads = [_head_under_test(head, name, run, warn) for head, name in zip(job.heads, job.names)]
    budget = Budget(job.budget_usd)
    settings = {
        "split": job.split, "limit": job.limit, "max_turns": job.max_turns, "sample": job.sample,
        "seed": job.seed, "budget_usd": job.budget_usd, "cost_weight": job.cost_weight,
        "baselines": list(job.kinds),
    }
    problem = f"{job.tasks}:{job.split}"
    logged = summary_row(
        "eval", problem, job.pool, job.sources, settings, enabled=not disabled(not log), warn=warn,
        spent=lambda: budget.spent_usd,
    )
    with logged as summary, open_runner(run, run.coordinators) as runner, rows_display() as on_row:
        report = evaluate(
            job.played, run.agents, heads, run.caches.grader, max_turns=job.max_turns,
            samples=job.sample, seed=job.seed, workers=run.workers, budget=budget, runner=runner,
            baselines=job.kinds,
            fixed_on=FixedOn(job.fixed_tasks, job.cost_weight) if job.fixed_tasks else None,
            on_row=on_row,
        )
        rows = report.pop("_rows")
        report.update(split=job.split, limit=job.limit, max_turns=job.max_turns)
        verdict = "budget" if report["partial"] else "completed"
        summary.done(verdict, budget.spent_usd, report, report["error"])
    written = []
    if len(heads) > 1:
        written = write_quality_cost_curve(out_dir, rows, report.get("curve", []))
    return Evaluated(report, rows, budget, written)


def _head_under_test(head: LoadedHead, name: str, run: Run, warn: Say) -> HeadUnderTest:
    """A head's row: a coordinator in its transcript format where it reads states."""
    coordinator = None
    if head.policy.needs_hidden:
        coordinator = run.coordinator(head.transcript_format)
        warn_if_other_numerics(head, coordinator, warn)
    cost_weight = (head.meta or {}).get("training", {}).get("cost_weight")
    return HeadUnderTest(name, head.policy, coordinator, cost_weight, head.transcript_format)

"""`trinity eval`: one table of the trained head against the baselines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from trinity_cli.cli.cluster_options import RayAddress, RayWorkers, check_ray_flags, runner_for
from trinity_cli.cli.console import stderr
from trinity_cli.cli.options import PoolOption, TasksOption

HELP = """Compare a head (by default the one solve would use) with the baselines on a split of a
task set: pass@1 with a 95% interval, $ per task and mean turns. Warns when the tasks overlap
the head's training split. --json prints the same data as one object.

Baselines (--baselines: a comma list of these, or none): random, pipeline (pipeline:<agent>),
single (single:<agent>), loop (loop:<agent>: that agent answers, the cheapest Verifier checks,
on REJECT it answers again), cascade, best-fixed (the best sequence of Worker answers with the
cheapest Verifier between them, chosen on the task set's train split by pass@1 − --cost-weight
× $/task, then played here; left out with --split train or all), oracle. --max-turns (default:
the head's training turns) limits the head and every baseline row but pipeline: (one turn per
role, at least 3). --limit N evaluates the first N tasks of the split only.

--weights takes one head (a path or a name), a comma list, or a directory of heads: several
heads (say, trained with different --cost-weight) are evaluated on the same tasks, as rows
trained:<head>, and eval writes their quality/cost curve beside the single agents' points to
OUT_DIR/eval-curve.csv (and .png with the `plot` extra); --json adds `curve`.

With --budget-usd every row's agent calls (the oracle's and best-fixed's many plans too) share
that budget; at the first call it refuses, eval stops and exits 5 with the rows finished so
far, marked partial. --dry-run prints the rows' episodes, agent calls and worst-case $ first,
and calls nothing.

The run is written to the run log as one summary row (see `trinity logs`), also when it stops
early; --no-log or TRINITY_NO_LOG=1 turns that off.

\b
Example: trinity eval --pool ldb-humaneval --tasks humaneval --weights ldb-humaneval --limit 10"""


def eval_command(
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help="The head to evaluate (path or name), a comma list, or a directory of heads. Default: the head solve would route the pool with (`trinity pool` names it).",
        ),
    ] = None,
    tasks: TasksOption = "humaneval",
    split: Annotated[str, typer.Option("--split", help="train, test or all.")] = "test",
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Only the first N tasks of the split, in the task file's order (best-fixed is still chosen on the whole train split).",
        ),
    ] = None,
    pool: PoolOption = None,
    max_turns: Annotated[
        int | None,
        typer.Option(
            "--max-turns",
            min=1,
            help="Turn limit of the head, loop and best-fixed. Default: the first head's training turns, else 3.",
        ),
    ] = None,
    cost_weight: Annotated[
        float | None,
        typer.Option(
            "--cost-weight",
            min=0.0,
            help="best-fixed is chosen by pass@1 − this × $/task. Default: the first head's training cost weight, else 0.",
        ),
    ] = None,
    baselines: Annotated[
        str,
        typer.Option(
            "--baselines",
            help="Baseline rows: a comma list of random, pipeline, single, loop, cascade, best-fixed, oracle; or none.",
        ),
    ] = "all",
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the rows' episodes, agent calls and worst-case $; call and write nothing.",
        ),
    ] = False,
    sample: Annotated[
        int,
        typer.Option(
            "--sample", min=0, help="Report the mean of N sampled runs instead of greedy."
        ),
    ] = 0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout.")
    ] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache")] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Episodes in flight at once, to overlap agents' network waits (results do not change). Default: 4 with a network agent in the pool, else 1.",
        ),
    ] = None,
    budget_usd: Annotated[
        float | None,
        typer.Option(
            "--budget-usd",
            min=0.0,
            help="Stop before spend could exceed this (exit 5, rows so far).",
        ),
    ] = None,
    no_log: Annotated[
        bool, typer.Option("--no-log", help="Do not write this run to the run log.")
    ] = False,
    offline: Annotated[
        bool, typer.Option("--offline", help="Refuse agents that need the network (exit 3).")
    ] = False,
    out_dir: Annotated[
        Path, typer.Option("--out-dir", help="Where the quality/cost curve of several heads goes.")
    ] = Path("."),
    ray: RayAddress = None,
    ray_workers: RayWorkers = None,
) -> int:
    from trinity_cli.cli.dry_run import print_eval_plan
    from trinity_cli.core.budget import Budget
    from trinity_cli.errors import UsageError
    from trinity_cli.heads.files import head_names
    from trinity_cli.runtime import (
        FALLBACK,
        build_run,
        choose_policy,
        load_run_pool,
        warn_if_other_numerics,
    )
    from trinity_cli.store.runlog import disabled, summary_row
    from trinity_cli.tasks.taskset import gradable, load_tasks, select_split
    from trinity_cli.train.baselines import FixedOn, HeadUnderTest, baseline_kinds, evaluate
    from trinity_cli.train.curves import write_quality_cost_curve

    check_ray_flags(ray, ray_workers)
    kinds = baseline_kinds(baselines)
    pool_cfg = load_run_pool(pool, offline, budget_usd)
    choices = [choose_policy(pool_cfg, name, warn=lambda msg: None) for name in head_names(weights)]
    training = (choices[0].meta or {}).get("training", {})
    max_turns = max_turns or training.get("max_turns") or DEFAULT_MAX_TURNS
    cost_weight = (training.get("cost_weight") or 0.0) if cost_weight is None else cost_weight
    all_tasks = load_tasks(tasks)
    chosen, left_out = gradable(select_split(all_tasks, split))
    if left_out:
        stderr.print(f"note: {left_out}", markup=False)
    if not chosen:
        raise UsageError(f"task set {tasks} has no gradable tasks in its {split} split")
    scope = f"{len(chosen)} tasks"
    if limit is not None and limit < len(chosen):
        scope = f"the first {limit} of {len(chosen)} tasks (--limit)"
        chosen = chosen[:limit]
    fixed_tasks: list[Any] = []
    if "best-fixed" in kinds:
        if split in ("train", "all"):
            stderr.print(
                f"note: best-fixed is left out: it is chosen on the train split, which --split {split} "
                "evaluates on",
                markup=False,
            )
        else:
            fixed_tasks = gradable(select_split(all_tasks, "train"))[0]
            if not fixed_tasks:
                stderr.print(
                    f"note: best-fixed is left out: task set {tasks} has no gradable training tasks to "
                    "choose it on",
                    markup=False,
                )
    for choice in choices:
        trained_on = (choice.meta or {}).get("training", {})
        if trained_on.get("tasks") == tasks and split in ("train", "all"):
            stderr.print(
                f"warning: these tasks overlap the head's training split ({tasks}:train): {choice.source}",
                markup=False,
            )
    names = [
        "fallback"
        if c.source == FALLBACK
        else "trained"
        if len(choices) == 1
        else f"trained:{Path(c.source).stem}"
        for c in choices
    ]
    if dry_run:
        print_eval_plan(
            chosen, fixed_tasks, pool_cfg.agents, names, max_turns, sample, kinds, budget_usd
        )
        return 0
    run = build_run(pool_cfg, all_tasks, no_cache, workers)
    heads = []
    for choice, name in zip(choices, names):
        coordinator = None
        if choice.policy.needs_hidden:
            coordinator = run.coordinator(choice.transcript_format)
            warn_if_other_numerics(
                choice,
                coordinator,
                lambda msg: stderr.print(f"warning: {msg}", markup=False, highlight=False),
            )
        head_weight = (choice.meta or {}).get("training", {}).get("cost_weight")
        heads.append(
            HeadUnderTest(name, choice.policy, coordinator, head_weight, choice.transcript_format)
        )
    sources = ", ".join(choice.source for choice in choices)
    budget = Budget(budget_usd)
    settings = {
        "split": split,
        "limit": limit,
        "max_turns": max_turns,
        "sample": sample,
        "seed": seed,
        "budget_usd": budget_usd,
        "cost_weight": cost_weight,
        "baselines": list(kinds),
    }
    with (
        summary_row(
            "eval",
            f"{tasks}:{split}",
            pool_cfg,
            sources,
            settings,
            enabled=not disabled(no_log),
            warn=lambda msg: stderr.print(f"warning: {msg}", markup=False),
        ) as logged,
        runner_for(
            ray,
            ray_workers,
            pool_cfg,
            all_tasks,
            threads=run.workers,
            coordinators=run.coordinators,
            caches=run.caches,
        ) as runner,
    ):
        with stderr.status(
            f"eval: {names[0]} on {len(chosen)} tasks…"
        ) as status:  # a terminal only
            report = evaluate(
                chosen,
                run.agents,
                heads,
                run.caches.grader,
                max_turns=max_turns,
                samples=sample,
                seed=seed,
                workers=run.workers,
                budget=budget,
                runner=runner,
                baselines=kinds,
                fixed_on=FixedOn(fixed_tasks, cost_weight) if fixed_tasks else None,
                on_row=lambda row: status.update(
                    f"eval: {row.policy} {row.pass_at_1:.3f}; the next row…"
                ),
            )
        rows = report.pop("_rows")
        report["split"] = split
        report["limit"] = limit
        report["max_turns"] = max_turns
        logged.done(
            "budget" if report["partial"] else "completed",
            budget.spent_usd,
            report,
            report["error"],
        )
    if json_out:
        print(json.dumps(report, indent=2))
    else:
        print_table(
            report,
            rows,
            f"{tasks}:{split} · {scope} · {sources} · --max-turns {max_turns} (pipeline: rows "
            "play one turn per role, at least 3)",
        )
    if len(heads) > 1:
        written = write_quality_cost_curve(out_dir, rows, report.get("curve", []))
        stderr.print(f"wrote {', '.join(str(w) for w in written)}", markup=False, highlight=False)
    overrun = budget.overrun_warning()
    if overrun:
        stderr.print(f"warning: {overrun}", markup=False)
    if report["partial"]:
        stderr.print(
            f"error: {report['error']} (eval stopped; rows finished: {len(rows)})", markup=False
        )
        return 5
    return 0


DEFAULT_MAX_TURNS = 3  # eval's turn limit when the head does not say what it was trained with


def print_table(report: dict[str, Any], rows: list[Any], title: str) -> None:
    from rich.table import Table

    partial = " · PARTIAL: stopped by --budget-usd" if report["partial"] else ""
    table = Table(title=title + partial, title_justify="left")
    for column in ("policy", "pass@1", "95% CI", "$/task", "turns"):
        table.add_column(column)
    for row in rows:
        lo, hi = row.ci95()
        table.add_row(
            row.policy,
            f"{row.pass_at_1:.3f}",
            f"{lo:.2f}–{hi:.2f}",
            f"{row.usd_per_task:.5f}",
            f"{row.mean_turns:.2f}",
        )
    stderr.print(table)
    if report["best_fixed"] is not None:
        fixed = report["best_fixed"]
        plan = " → ".join(f"{agent} {role}" for agent, role in fixed["plan"])
        stderr.print(
            f"best-fixed: {plan} (chosen on {fixed['train_tasks']} train-split tasks, fitness "
            f"{fixed['train_fitness']:.4f} at cost weight {fixed['cost_weight']:g})",
            markup=False,
        )
    if report["best_single"] is not None:
        stderr.print(
            error_line(
                rows[0],
                next(r for r in rows if r.policy == report["best_single"]),
                report["rel_err_reduction_vs_best_single"],
            ),
            markup=False,
        )
    margins = report["paired_margin_se"]
    if margins:
        stderr.print(
            "paired margins of the first head (SE): "
            + ", ".join(
                f"{key.removeprefix('vs_').replace('_', ' ')} {'n/a' if value is None else f'{value:+.2f}'}"
                for key, value in margins.items()
            ),
            markup=False,
        )


def error_line(head: Any, single: Any, reduction: float | None) -> str:
    """How the first head's error rate compares with the best single's, saying which way."""
    rates = f"error rate {1 - head.pass_at_1:.3f} vs {1 - single.pass_at_1:.3f}"
    if reduction is None:
        return f"{head.policy} vs the best single ({single.policy}), which makes no error: {rates}"
    way = (
        f"{reduction:.1%} fewer errors"
        if reduction > 0
        else f"{-reduction:.1%} more errors"
        if reduction < 0
        else "as many errors"
    )
    return f"{head.policy}: {way} than the best single ({single.policy}): {rates}"

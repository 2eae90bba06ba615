"""`trinity eval`: one table of the trained head against the baselines."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from trinity_cli.cli.console import stderr

HELP = """Compare a head with the baselines (random, pipeline:<agent>, single:<agent>, oracle) on a
split of a task set: pass@1 with a 95% interval, $ per task and mean turns. Warns when the
tasks overlap the head's training split. --json prints the same data as one object.

With --budget-usd every row's agent calls (the oracle's many plans too) share that budget; at
the first call it refuses, eval stops and exits 5 with the rows finished so far, marked
partial.

The run is written to the run log as one summary row (see `trinity logs`), also when it stops
early; --no-log or TRINITY_NO_LOG=1 turns that off."""


def eval_command(
    weights: Annotated[str, typer.Option("--weights", help="The head (.npz) to evaluate.")],
    tasks: Annotated[str, typer.Option("--tasks", help="'humaneval' or a JSONL task file.")] = "humaneval",
    split: Annotated[str, typer.Option("--split", help="train, test or all.")] = "test",
    pool: Annotated[str | None, typer.Option("--pool", help="Pool TOML file.")] = None,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1)] = 3,
    sample: Annotated[int, typer.Option("--sample", min=0, help="Report the mean of N sampled runs instead of greedy.")] = 0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache")] = False,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Episodes in flight at once, to overlap agents' network waits (results do not change). Default: 4 with a network agent in the pool, else 1.")] = None,
    budget_usd: Annotated[float | None, typer.Option(
        "--budget-usd", min=0.0, help="Stop before spend could exceed this (exit 5, rows so far)."
    )] = None,
    no_log: Annotated[bool, typer.Option("--no-log", help="Do not write this run to the run log.")] = False,
    offline: Annotated[bool, typer.Option("--offline", help="Refuse agents that need the network (exit 3).")] = False,
) -> int:
    from trinity_cli.config import load_pool
    from trinity_cli.core.budget import Budget
    from trinity_cli.providers.registry import build_agents
    from trinity_cli.runlog import disabled, summary_row
    from trinity_cli.runtime import (
        check_offline,
        check_prices,
        choose_policy,
        memo_coordinator,
        open_caches,
        warn_if_other_numerics,
    )
    from trinity_cli.tasks.taskset import load_tasks, select_split
    from trinity_cli.train.baselines import evaluate
    from trinity_cli.train.fitness import default_workers

    pool_cfg = load_pool(pool)
    if offline:
        check_offline(pool_cfg)
    if budget_usd is not None:
        check_prices(pool_cfg)
    choice = choose_policy(pool_cfg, weights, warn=lambda msg: None)
    all_tasks = load_tasks(tasks)
    chosen = select_split(all_tasks, split)
    training = (choice.meta or {}).get("training", {})
    if training.get("tasks") == tasks and split in ("train", "all"):
        stderr.print(f"warning: these tasks overlap the head's training split ({tasks}:train)", markup=False)
    caches = open_caches(no_cache)
    agents = build_agents(pool_cfg.agents, all_tasks, caches.responses)
    workers = workers or default_workers(agents)
    coordinator = None  # only a head reads hidden states: `--weights none` needs no GGUF
    if choice.policy.needs_hidden:
        coordinator = memo_coordinator(pool_cfg, caches, sessions=workers,
                                       transcript_format=choice.transcript_format)
        warn_if_other_numerics(choice, coordinator,
                               lambda msg: stderr.print(f"warning: {msg}", markup=False, highlight=False))
    budget = Budget(budget_usd)
    settings = {"split": split, "max_turns": max_turns, "sample": sample, "seed": seed, "budget_usd": budget_usd}
    with summary_row("eval", f"{tasks}:{split}", pool_cfg, choice.source, settings, enabled=not disabled(no_log),
                     warn=lambda msg: stderr.print(f"warning: {msg}", markup=False)) as logged:
        report = evaluate(chosen, agents, coordinator, choice.policy, caches.grader,
                          max_turns=max_turns, samples=sample, seed=seed, workers=workers,
                          budget=budget)
        rows = report.pop("_rows")
        report["split"] = split
        logged.done("budget" if report["partial"] else "completed", budget.spent_usd, report, report["error"])
    if json_out:
        print(json.dumps(report, indent=2))
    else:
        print_table(report, rows, f"{tasks}:{split} · {len(chosen)} tasks · {choice.source}")
    overrun = budget.overrun_warning()
    if overrun:
        stderr.print(f"warning: {overrun}", markup=False)
    if report["partial"]:
        stderr.print(f"error: {report['error']} (eval stopped; rows finished: {len(rows)})",
                     markup=False)
        return 5
    return 0


def print_table(report: dict[str, Any], rows: list[Any], title: str) -> None:
    from rich.table import Table

    partial = " · PARTIAL: stopped by --budget-usd" if report["partial"] else ""
    table = Table(title=title + partial, title_justify="left")
    for column in ("policy", "pass@1", "95% CI", "$/task", "turns"):
        table.add_column(column)
    for row in rows:
        lo, hi = row.ci95()
        table.add_row(row.policy, f"{row.pass_at_1:.3f}", f"{lo:.2f}–{hi:.2f}", f"{row.usd_per_task:.5f}", f"{row.mean_turns:.2f}")
    stderr.print(table)
    if report["rel_err_reduction_vs_best_single"] is not None:
        stderr.print(f"relative error reduction vs best single ({report['best_single']}): "
                     f"{report['rel_err_reduction_vs_best_single']:.1%}", markup=False)

"""`trinity eval`: one table of the trained head against the baselines."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from trinity_cli.cli.cluster_options import RayAddress, RayWorkers, check_ray_flags, runner_for
from trinity_cli.cli.console import stderr

HELP = """Compare a head with the baselines (random, pipeline:<agent>, single:<agent>, cascade, oracle)
on a split of a task set: pass@1 with a 95% interval, $ per task and mean turns. Warns when the
tasks overlap the head's training split. --json prints the same data as one object.

--weights takes one head (a path or a name), a comma list, or a directory of heads: several
heads (say, trained with different --cost-weight) are evaluated on the same tasks, as rows
trained:<head>, and eval writes their quality/cost curve beside the single agents' points to
OUT_DIR/eval-curve.csv (and .png with the `plot` extra); --json adds `curve`.

With --budget-usd every row's agent calls (the oracle's many plans too) share that budget; at
the first call it refuses, eval stops and exits 5 with the rows finished so far, marked
partial.

The run is written to the run log as one summary row (see `trinity logs`), also when it stops
early; --no-log or TRINITY_NO_LOG=1 turns that off."""


def eval_command(
    weights: Annotated[str, typer.Option("--weights", help="The head to evaluate (path or name), a comma list, or a directory of heads.")],
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
    out_dir: Annotated[Path, typer.Option("--out-dir", help="Where the quality/cost curve of several heads goes.")] = Path("."),
    ray: RayAddress = None,
    ray_workers: RayWorkers = None,
) -> int:
    from trinity_cli.core.budget import Budget
    from trinity_cli.errors import UsageError
    from trinity_cli.providers.registry import build_agents
    from trinity_cli.runlog import disabled, summary_row
    from trinity_cli.runtime import (
        choose_policy,
        load_run_pool,
        memo_coordinator,
        open_caches,
        warn_if_other_numerics,
    )
    from trinity_cli.tasks.taskset import gradable, load_tasks, select_split
    from trinity_cli.train.baselines import HeadUnderTest, evaluate
    from trinity_cli.train.fitness import default_workers

    check_ray_flags(ray, ray_workers)
    pool_cfg = load_run_pool(pool, offline, budget_usd)
    choices = [choose_policy(pool_cfg, name, warn=lambda msg: None) for name in head_names(weights)]
    all_tasks = load_tasks(tasks)
    chosen, left_out = gradable(select_split(all_tasks, split))
    if left_out:
        stderr.print(f"note: {left_out}", markup=False)
    if not chosen:
        raise UsageError(f"task set {tasks} has no gradable tasks in its {split} split")
    for choice in choices:
        training = (choice.meta or {}).get("training", {})
        if training.get("tasks") == tasks and split in ("train", "all"):
            stderr.print(f"warning: these tasks overlap the head's training split ({tasks}:train): {choice.source}", markup=False)
    caches = open_caches(no_cache)
    agents = build_agents(pool_cfg.agents, all_tasks, caches.responses, coordinator_model=pool_cfg.coordinator.model)
    workers = workers or default_workers(agents)
    coordinators: dict[str, Any] = {}  # one per transcript format; `--weights none` needs no GGUF
    heads = []
    for choice in choices:
        coordinator = None
        if choice.policy.needs_hidden:
            if choice.transcript_format not in coordinators:
                coordinators[choice.transcript_format] = memo_coordinator(
                    pool_cfg, caches, sessions=workers, transcript_format=choice.transcript_format)
            coordinator = coordinators[choice.transcript_format]
            warn_if_other_numerics(choice, coordinator,
                                   lambda msg: stderr.print(f"warning: {msg}", markup=False, highlight=False))
        name = "trained" if len(choices) == 1 else f"trained:{Path(choice.source).stem}"
        cost_weight = (choice.meta or {}).get("training", {}).get("cost_weight")
        heads.append(HeadUnderTest(name, choice.policy, coordinator, cost_weight, choice.transcript_format))
    sources = ", ".join(choice.source for choice in choices)
    budget = Budget(budget_usd)
    settings = {"split": split, "max_turns": max_turns, "sample": sample, "seed": seed, "budget_usd": budget_usd}
    with summary_row("eval", f"{tasks}:{split}", pool_cfg, sources, settings, enabled=not disabled(no_log),
                     warn=lambda msg: stderr.print(f"warning: {msg}", markup=False)) as logged, \
            runner_for(ray, ray_workers, pool_cfg, all_tasks, threads=workers, coordinators=coordinators,
                       caches=caches) as runner:
        report = evaluate(chosen, agents, heads, caches.grader,
                          max_turns=max_turns, samples=sample, seed=seed, workers=workers,
                          budget=budget, runner=runner)
        rows = report.pop("_rows")
        report["split"] = split
        logged.done("budget" if report["partial"] else "completed", budget.spent_usd, report, report["error"])
    if json_out:
        print(json.dumps(report, indent=2))
    else:
        print_table(report, rows, f"{tasks}:{split} · {len(chosen)} tasks · {sources}")
    if len(heads) > 1:
        written = write_curve(out_dir, rows, report.get("curve", []))
        stderr.print(f"wrote {', '.join(str(w) for w in written)}", markup=False, highlight=False)
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


def head_names(weights: str) -> list[str]:
    """--weights: one head, a comma list, or every head in a directory (by name)."""
    from trinity_cli.errors import UsageError

    directory = Path(weights).expanduser()
    if directory.is_dir():
        names = [str(p) for p in sorted(directory.glob("*.npz"))]
        if not names:
            raise UsageError(f"--weights {weights}: the directory holds no heads (*.npz)")
        return names
    names = [name.strip() for name in weights.split(",")]
    if not all(names):
        raise UsageError(f"--weights {weights!r}: an empty name in the list")
    return names


def write_curve(out_dir: Path, rows: list[Any], curve: list[dict[str, Any]]) -> list[Path]:
    """The heads' (usd per task, pass@1) beside every other row's point: CSV, and PNG when
    matplotlib (the `plot` extra) is installed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    weights = {point["head"]: point["cost_weight"] for point in curve}
    path = out_dir / "eval-curve.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["policy", "kind", "cost_weight", "pass_at_1", "usd_per_task"])
        for row in rows:
            kind = "head" if row.policy in weights else "baseline"
            writer.writerow([row.policy, kind, weights.get(row.policy, ""), round(row.pass_at_1, 4), row.usd_per_task])
    written = [path]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    figure, axes = plt.subplots(figsize=(6, 4))
    heads = sorted((r for r in rows if r.policy in weights), key=lambda r: r.usd_per_task)
    axes.plot([r.usd_per_task for r in heads], [r.pass_at_1 for r in heads], "o-", label="heads")
    for row in rows:
        if row.policy not in weights:
            axes.plot(row.usd_per_task, row.pass_at_1, "x", color="grey")
            axes.annotate(row.policy, (row.usd_per_task, row.pass_at_1), fontsize=7)
    axes.set_xlabel("$ per task")
    axes.set_ylabel("pass@1")
    axes.legend()
    figure.tight_layout()
    figure.savefig(out_dir / "eval-curve.png", dpi=120)
    plt.close(figure)
    return [*written, out_dir / "eval-curve.png"]

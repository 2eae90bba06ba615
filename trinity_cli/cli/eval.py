"""`trinity eval`: one table of the trained head against the baselines."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from trinity_cli.cli import options as opt
from trinity_cli.cli.cluster_options import RayAddress, RayWorkers, check_ray_flags, runner_for
from trinity_cli.cli.console import say, stderr, to_stdout, warn

HELP = f"""Compare a head (by default the one solve would use) with the baselines on a split of a
task set: pass@1 with a 95% interval, $ per task and mean turns. Warns when the tasks overlap
the head's training split. --json prints the same data as one object.

Baselines (--baselines: a comma list of these, or none): random, pipeline (pipeline:<agent>),
single (single:<agent>), loop (loop:<agent>: that agent answers, the cheapest Verifier checks,
on REJECT it answers again), cascade, best-fixed (the best sequence of Worker answers with the
cheapest Verifier between them, chosen on the task set's train split by pass@1 − --cost-weight
× $/task, then played here; left out with --split train or all), oracle. --max-turns limits
the head and every row but pipeline: (one turn per role, at least 3).

--weights takes one head (a path or a name), a comma list, or a directory of heads: several
heads (say, trained with different --cost-weight) are evaluated on the same tasks, as rows
trained:<head>, and eval writes their quality/cost curve beside the single agents' points to
OUT_DIR/eval-curve.csv (and .png with the `plot` extra; eval-curve-2 and on when an earlier
eval's curve is there); --json adds `curve`.

With --budget-usd every row's agent calls (the oracle's and best-fixed's many plans too) share
that budget; at the first call it refuses, eval stops and exits 5 with the rows finished so
far, marked partial.

{opt.SUMMARY_LOGGED}

\b
Example: trinity eval --pool ldb-humaneval --tasks humaneval --weights ldb-humaneval --limit 10"""


def eval_command(
    weights: Annotated[
        str | None,
        typer.Option(
            "--weights",
            help="The head to evaluate (path or name), a comma list, or a directory of heads. "
            "Default: the head solve would route the pool with (`trinity pool` names it).",
        ),
    ] = None,
    tasks: opt.Tasks = "humaneval",
    split: Annotated[str, typer.Option("--split", help="train, test or all.")] = "test",
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", min=1,
            help="Only the first N tasks of the split, in the task file's order (best-fixed is "
            "still chosen on the whole train split).",
        ),
    ] = None,
    pool: opt.Pool = None,
    max_turns: Annotated[
        int | None,
        typer.Option(
            "--max-turns", min=1,
            help="Turn limit of the head, loop and best-fixed. Default: the first head's "
            "training turns, else 3.",
        ),
    ] = None,
    cost_weight: Annotated[
        float | None,
        typer.Option(
            "--cost-weight", min=0.0,
            help="best-fixed is chosen by pass@1 − this × $/task. Default: the first head's "
            "training cost weight, else 0.",
        ),
    ] = None,
    baselines: Annotated[
        str,
        typer.Option(
            "--baselines",
            help="Baseline rows: a comma list of random, pipeline, single, loop, cascade, "
            "best-fixed, oracle; or none.",
        ),
    ] = "all",
    dry_run: opt.DryRun = False,
    sample: Annotated[
        int,
        typer.Option(
            "--sample", min=0, help="Report the mean of N sampled runs instead of greedy."
        ),
    ] = 0,
    seed: opt.Seed = 0, json_out: opt.Json = False, no_cache: opt.NoCache = False,
    workers: opt.Workers = None, budget_usd: opt.BudgetUsd = None, no_log: opt.NoLog = False,
    offline: opt.Offline = False,
    out_dir: Annotated[
        Path, typer.Option("--out-dir", help="Where the quality/cost curve of several heads goes.")
    ] = Path("."),
    ray: RayAddress = None, ray_workers: RayWorkers = None,
) -> int:
    from trinity_cli.cli.dry_run import print_eval_plan
    from trinity_cli.cli.tables import print_eval
    from trinity_cli.errors import UsageError
    from trinity_cli.paths import unwritable
    from trinity_cli.runtime import load_run_pool
    from trinity_cli.train.evaluation import evaluate_and_report, plan_eval

    check_ray_flags(ray, ray_workers)
    job = plan_eval(
        load_run_pool(pool, offline, budget_usd, warn), tasks, weights, split, limit=limit,
        max_turns=max_turns, cost_weight=cost_weight, baselines=baselines, sample=sample, seed=seed,
        budget_usd=budget_usd, note=say, warn=warn,
    )
    why = unwritable(out_dir) if len(job.heads) > 1 else None  # the heads' curve goes there
    if why is not None:
        raise UsageError(f"--out-dir {out_dir}: {why}")
    if dry_run:
        print_eval_plan(job)
        return 0

    @contextmanager
    def status_line() -> Iterator[Callable[[Any], None]]:  # shown on a terminal only
        with stderr.status(f"eval: {job.names[0]} on {len(job.played)} tasks…") as status:
            yield lambda r: status.update(f"eval: {r.policy} {r.pass_at_1:.3f}; the next row…")

    evaluated = evaluate_and_report(
        job, no_cache=no_cache, workers=workers, log=not no_log, warn=warn,
        open_runner=runner_for(ray, ray_workers, job.all_tasks), rows_display=status_line,
        out_dir=out_dir,
    )
    if json_out:
        to_stdout(json.dumps(evaluated.report, indent=2) + "\n")
    else:
        print_eval(job, evaluated.report, evaluated.rows)
    for line in evaluated.summary_lines():
        say(line)
    return 5 if evaluated.report["partial"] else 0

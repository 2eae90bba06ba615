"""`trinity solve PROBLEM|-`: one episode, live on stderr, the answer on stdout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trinity_cli.cli import console
from trinity_cli.cli import options as opt
from trinity_cli.heads.precedence import RULE

HELP = (
    """Solve one coding problem (a Markdown or text file; - or a pipe for stdin).

Each turn the coordinator picks one agent of the pool and one role. Progress goes to stderr
(on a terminal the reply streams under its turn's line; -v prints every finished turn's text);
stdout gets only the final answer (or JSON with --json / --jsonl).

\b
Example: trinity solve problem.md -v > answer.py

Exit codes: 0 accepted; 2 usage or unreadable input; 3 configuration (pool, weights, keys,
--offline); 4 provider error; 5 budget; 6 turn limit, no answer or tests failed; 130
interrupted; 141 stdout could not take the answer (its reader stopped, it was closed, a full
disk); 1 bug. A closed stderr only silences the display.

Execution check: with --tests FILE (plain asserts or test_* functions; or a .json list of
{"input": ..., "output": ...} stdin/stdout cases), or else the problem's doctest examples (>>>
lines), or else its samples ("Sample Input 1" / "Sample Output 1", or "Input" / "Output" under
"Examples": the answer is then a program reading stdin), a Verifier ACCEPT counts only when the
answer also passes them in the sandbox; a failing answer at the end is verdict tests_failed
(exit 6). --no-tests skips it.

Weights, """
    + RULE
    + """. `trinity pool` says which and why; --weights none forces the
fallback.

An answer that does not parse as Python is never accepted, tests or not.

Every run is written to the run log as it happens (see `trinity logs`); --no-log or
TRINITY_NO_LOG=1 turns that off. A log that cannot be written costs a warning, never the run."""
)

EXIT_CODES = {
    "accepted": 0, "provider_error": 4, "budget": 5, "turn_limit": 6, "no_answer": 6,
    "tests_failed": 6, "interrupted": 130,
}


def solve(
    problem: Annotated[
        str | None, typer.Argument(help="Problem file; - or none with a pipe reads stdin.")
    ] = None,
    pool: opt.Pool = None,
    weights: Annotated[
        str | None, typer.Option("--weights", help="Head .npz path or name, or 'none'.")
    ] = None,
    max_turns: Annotated[
        int | None,
        typer.Option(
            "--max-turns", min=1, help="Turn limit. Default: the head's training turns, else 5."
        ),
    ] = None,
    budget_usd: opt.BudgetUsd = None, json_out: opt.Json = False,
    jsonl_out: Annotated[
        bool, typer.Option("--jsonl", help="Print one JSON event per line as it happens.")
    ] = False,
    quiet: opt.Quiet = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v",
            help="Print each finished turn's text on stderr, and the head's path.",
        ),
    ] = False,
    sample: Annotated[
        bool, typer.Option("--sample", help="Sample agent and role instead of greedy.")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed for --sample.")] = 0,
    offline: opt.Offline = False,
    tests: Annotated[
        Path | None,
        typer.Option(
            "--tests",
            help="Tests the answer must pass: asserts, test_*, or .json stdin/stdout cases.",
        ),
    ] = None,
    no_tests: Annotated[
        bool,
        typer.Option("--no-tests", help="No execution check, not even the problem's examples."),
    ] = False,
    no_log: opt.NoLog = False,
) -> int:
    from trinity_cli.cli.problem import read_problem, suite_for
    from trinity_cli.cli.sinks import solve_sinks
    from trinity_cli.core.budget import Budget
    from trinity_cli.core.episode_json import episode_json
    from trinity_cli.errors import UsageError
    from trinity_cli.runtime import build_solver, load_run_pool

    for first, second, both in (
        (json_out, jsonl_out, "--json and --jsonl"),
        (tests is not None, no_tests, "--tests and --no-tests"),
        (quiet, verbose, "--quiet and --verbose"),
    ):
        if first and second:
            raise UsageError(f"{both} are exclusive: pick one")
    text = read_problem(problem)
    found = suite_for(text, tests)
    suite = None if no_tests else found
    warn = (lambda msg: None) if quiet else console.warn
    run_pool = load_run_pool(pool, offline, budget_usd, warn)
    solver = build_solver(run_pool, weights, text, max_turns, warn)
    budget = Budget(budget_usd)
    settings = {"sample": sample, "seed": seed, "no_tests": no_tests}
    sinks = solve_sinks(
        solver, suite, budget, settings, warn, show=not quiet, verbose=verbose,
        searched=not no_tests, jsonl=jsonl_out, log=not no_log,
    )
    result = solver.solve(
        found is not None and found.stdin_program,  # the Worker's prompt says so, checked or not
        budget=budget, sample_seed=seed if sample else None, on_event=sinks,
        check=None if suite is None else suite.run,
    )
    if json_out:
        output = json.dumps(episode_json(result, solver.pool.names, suite, budget), indent=2) + "\n"
    else:
        output = "" if jsonl_out else result.answer or ""
    console.to_stdout(output)
    if result.error and not quiet:
        console.say(f"error: {result.error}")
    overrun = budget.overrun_warning()
    if overrun:
        warn(overrun)
    return EXIT_CODES[result.verdict]

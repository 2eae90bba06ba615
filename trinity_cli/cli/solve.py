"""`trinity solve PROBLEM|-`: one episode, live on stderr, the answer on stdout."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from trinity_cli.cli.console import stderr
from trinity_cli.cli.options import PoolOption
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
interrupted; 141 stdout closed before the answer was written; 1 bug. A closed stderr only
silences the display.

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

MAX_PROBLEM_BYTES = 1_000_000
NO_PROBLEM = "no problem given: name a file or pipe it in (see `trinity solve --help`)"
EXIT_CODES = {
    "accepted": 0,
    "provider_error": 4,
    "budget": 5,
    "turn_limit": 6,
    "no_answer": 6,
    "tests_failed": 6,
    "interrupted": 130,
}
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: whoever read stdout stopped reading


def solve(
    problem: Annotated[
        str | None, typer.Argument(help="Problem file; - or none with a pipe reads stdin.")
    ] = None,
    pool: PoolOption = None,
    weights: Annotated[
        str | None, typer.Option("--weights", help="Head .npz path or name, or 'none'.")
    ] = None,
    max_turns: Annotated[
        int | None,
        typer.Option(
            "--max-turns", min=1, help="Turn limit. Default: the head's training turns, else 5."
        ),
    ] = None,
    budget_usd: Annotated[
        float | None,
        typer.Option("--budget-usd", min=0.0, help="Stop before spend could exceed this."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout.")
    ] = False,
    jsonl_out: Annotated[
        bool, typer.Option("--jsonl", help="Print one JSON event per line as it happens.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Print each finished turn's text on stderr, and the head's path.",
        ),
    ] = False,
    sample: Annotated[
        bool, typer.Option("--sample", help="Sample agent and role instead of greedy.")
    ] = False,
    seed: Annotated[int, typer.Option("--seed", help="Seed for --sample.")] = 0,
    offline: Annotated[
        bool, typer.Option("--offline", help="Refuse agents that need the network.")
    ] = False,
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
    no_log: Annotated[
        bool, typer.Option("--no-log", help="Do not write this run to the run log.")
    ] = False,
) -> int:
    from trinity_cli.cli.display import CutWarnings, JsonlWriter, TurnDisplay, episode_json, fan_out
    from trinity_cli.core.budget import Budget
    from trinity_cli.core.episode import DEFAULT_MAX_TURNS, run_episode
    from trinity_cli.core.transcript import Problem
    from trinity_cli.errors import UsageError
    from trinity_cli.providers.registry import build_agents
    from trinity_cli.runtime import (
        build_coordinator,
        choose_policy,
        load_run_pool,
        warn_if_other_numerics,
    )
    from trinity_cli.store.runlog import RunLogSink, disabled
    from trinity_cli.tasks.checks import suite_from_file, suite_from_problem
    from trinity_cli.tasks.samples import stated_tolerance

    if json_out and jsonl_out:
        raise UsageError("--json and --jsonl are exclusive: pick one")
    if tests is not None and no_tests:
        raise UsageError("--tests and --no-tests are exclusive: pick one")
    if quiet and verbose:
        raise UsageError("--quiet and --verbose are exclusive: pick one")
    text = read_problem(problem)
    chosen = (
        suite_from_file(tests, stated_tolerance(text))
        if tests is not None
        else suite_from_problem(text)
    )
    suite = None if no_tests else chosen
    stdin_program = (
        chosen is not None and chosen.stdin_program
    )  # the Worker's prompt says so, checked or not
    pool_cfg = load_run_pool(pool, offline, budget_usd)
    warn = (
        (lambda msg: None) if quiet else (lambda msg: stderr.print(f"warning: {msg}", markup=False))
    )
    choice = choose_policy(pool_cfg, weights, warn)
    max_turns = (
        max_turns or (choice.meta or {}).get("training", {}).get("max_turns") or DEFAULT_MAX_TURNS
    )
    agents = build_agents(
        pool_cfg.agents, coordinator_model=pool_cfg.coordinator.model, problem=text
    )
    coordinator = (
        build_coordinator(pool_cfg, transcript_format=choice.transcript_format)
        if choice.policy.needs_hidden
        else None
    )
    warn_if_other_numerics(choice, coordinator, warn)
    sinks: list[Callable[[Any], None]] = [
        CutWarnings(warn)
    ]  # an input cut to fit a context is never silent
    tests_json = None if suite is None else {"source": suite.source, "count": suite.count}
    if not quiet:
        head = choice.source if verbose or choice.meta is None else Path(choice.source).name
        header = display_header(pool_cfg.source, head, tests_json, searched=not no_tests)
        sinks.append(TurnDisplay(stderr, header, verbose))
    budget = Budget(budget_usd)
    if jsonl_out:
        sinks.append(JsonlWriter(sys.stdout, pool_cfg.names, suite, budget))
    if not disabled(no_log):
        settings = {
            "max_turns": max_turns,
            "budget_usd": budget_usd,
            "sample": sample,
            "seed": seed,
            "no_tests": no_tests,
        }
        sinks.append(
            RunLogSink.start(
                text,
                pool_cfg,
                choice.source,
                tests=tests_json,
                settings=settings,
                warn=warn,
                final=lambda r: episode_json(r, pool_cfg.names, suite, budget),
            )
        )
    result = run_episode(
        Problem.from_markdown(text, stdin_program),
        agents,
        coordinator,
        choice.policy,
        max_turns=max_turns,
        budget=budget,
        sample_seed=seed if sample else None,
        on_event=fan_out(sinks),
        check=None if suite is None else suite.run,
    )
    try:
        if json_out:
            print(json.dumps(episode_json(result, pool_cfg.names, suite, budget), indent=2))
        elif not jsonl_out and result.answer:
            sys.stdout.write(result.answer)
        sys.stdout.flush()
    except BrokenPipeError:  # stdout went away (`| head`): exit as Unix tools do, without a word
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    if result.error and not quiet:
        stderr.print(f"error: {result.error}", markup=False, highlight=False)
    overrun = budget.overrun_warning()
    if overrun and not quiet:
        warn(overrun)
    return EXIT_CODES[result.verdict]


NO_EXAMPLES = "no examples found: only the syntax check runs"


def display_header(
    pool_source: str, policy_source: str, tests: dict[str, Any] | None, searched: bool = False
) -> str:
    """The display's first line (`trinity logs show` draws it again from the log); `searched`:
    the run looked for tests (no --no-tests), so finding none is news."""
    if tests:
        checking = (
            f" · checked by {tests['source']} ({tests['count']} test{'s' * (tests['count'] != 1)})"
        )
    else:
        checking = f" · {NO_EXAMPLES}" if searched else ""
    return f"pool: {pool_source} · policy: {policy_source}{checking}"


def read_problem(argument: str | None) -> str:
    """The problem text; anything that is not non-empty UTF-8 text is a usage error (exit 2).
    No argument reads a pipe (never a terminal: that would wait for typing nobody meant)."""
    from trinity_cli.errors import UsageError

    if argument is None and sys.stdin.isatty():
        raise UsageError(NO_PROBLEM)
    if argument in (None, "-"):
        data = sys.stdin.buffer.read(MAX_PROBLEM_BYTES + 1)
        where = "stdin"
    else:
        path = Path(argument)
        if path.is_dir():
            raise UsageError(f"problem {argument} is a directory, not a file")
        if not path.exists():
            raise UsageError(f"problem file not found: {argument}")
        try:
            with path.open("rb") as handle:
                data = handle.read(MAX_PROBLEM_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"cannot read problem {argument}: {exc.strerror}") from None
        where = argument
    if len(data) > MAX_PROBLEM_BYTES:
        raise UsageError(f"problem {where} is larger than {MAX_PROBLEM_BYTES:,} bytes")
    if b"\x00" in data:
        raise UsageError(f"problem {where} is binary, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"problem {where} is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise UsageError(NO_PROBLEM if argument is None else f"problem {where} is empty")
    return text

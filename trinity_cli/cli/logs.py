"""`trinity logs`: the run log (trinity_cli/store/runlog.py) listed, replayed, summed and pruned."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

import typer

from trinity_cli.cli.console import stderr

if TYPE_CHECKING:
    from trinity_cli.core.events import Event
    from trinity_cli.core.records import EpisodeResult
    from trinity_cli.store.runlog import RunLog, StoredRun

EXIT_CODES = """Exit codes: 0 done; 2 usage (a bad flag or value, an unknown run id); 3 the log cannot
be read (corrupt, or written by a newer trinity)."""

HELP = f"""List recent runs, newest first, from the run log (a SQLite file in the user data dir,
shown by `trinity doctor`). Every `solve` is logged turn by turn as it runs, so a run that was
killed keeps the turns it finished (it shows as interrupted); each `eval` and `train` is one
summary row. --no-log on those commands, or TRINITY_NO_LOG=1, turns logging off.

--json prints a list of {{id, time, command, problem, problem_sha256, verdict, turns, usd, agents}}
(problem: its first line; for eval and train, the task set and split).

\b
Example: trinity logs -n 5 --verdict accepted

{EXIT_CODES}"""

SHOW_HELP = f"""Replay run ID (or `last`) as `solve -v` drew it, each turn's text included, on
stderr, and print its answer on stdout. --json prints the object `solve --json` printed (for a run that never
finished, the same built from its stored turns, verdict interrupted); for eval and train, the
stored summary.

\b
Example: trinity logs show last

{EXIT_CODES}"""

STATS_HELP = f"""Sum each agent's calls, tokens and $ per day (local time), with accept_rate: of
the agent's Worker answers, the share that ended a run as its accepted answer. Counts solve
turns; eval and train keep no turns.

\b
Example: trinity logs stats --since 2026-12-01

{EXIT_CODES}"""

PRUNE_HELP = f"""Delete the runs started more than AGE ago (Nd days or Nh hours), with their turns.

\b
Example: trinity logs prune --older-than 30d

{EXIT_CODES}"""

app = typer.Typer(
    help=HELP,
    invoke_without_command=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


@app.callback()
def logs(
    ctx: typer.Context,
    count: Annotated[
        int, typer.Option("-n", "--count", min=0, help="How many runs (0: all).")
    ] = 20,
    verdict: Annotated[
        str | None, typer.Option("--verdict", help="Only runs with this verdict.")
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Only runs in which this agent took a turn.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only runs started since (ISO date or datetime, local time)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON list on stdout.")] = False,
) -> int:
    if ctx.invoked_subcommand is not None:
        return 0
    start = parse_since(since)
    with opened() as log:
        runs = log.list_runs(count or 2**62, verdict=verdict, agent=agent, since=start)
    if json_out:
        print(json.dumps(runs, indent=2))
    else:
        _print_runs(runs)
    return 0


@app.command("show", help=SHOW_HELP)
def show(
    run: Annotated[str, typer.Argument(help="A run id, or 'last'.")],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the run's JSON object on stdout.")
    ] = False,
) -> int:
    from trinity_cli.errors import UsageError

    ref = None if run == "last" else _run_id(run)
    with opened() as log:
        stored = log.get_run(ref)
    if stored is None:
        raise UsageError(
            "the run log is empty"
            if ref is None
            else f"no run {ref} in the run log (see `trinity logs`)"
        )
    if stored.row["command"] != "solve":
        _show_summary(stored, json_out)
        return 0
    if json_out:
        print(json.dumps(stored.row["result"] or rebuilt_json(stored), indent=2))
        return 0
    from trinity_cli.cli.display import TurnDisplay
    from trinity_cli.cli.solve import display_header

    row = stored.row
    searched = (row["settings"] or {}).get("no_tests") is False  # older logs did not say: no note
    header = display_header(row["pool"]["source"], row["head"], row["tests"], searched=searched)
    display = TurnDisplay(stderr, header, verbose=True)
    events, result = replay(stored)
    for event in events:
        display(event)
    if result.answer:
        sys.stdout.write(result.answer)
    return 0


@app.command("stats", help=STATS_HELP)
def stats(
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only turns since (ISO date or datetime, local time)."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print a JSON list on stdout.")] = False,
) -> int:
    start = parse_since(since)
    with opened() as log:
        rows = log.stats(start)
    if json_out:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.table import Table

    table = Table(title="run log: per agent and day", title_justify="left")
    for column in (
        "day",
        "agent",
        "calls",
        "tok in",
        "tok out",
        "$",
        "answers",
        "accepted",
        "rate",
    ):
        table.add_column(column, no_wrap=column == "day")
    for r in rows:
        rate = "-" if r["accept_rate"] is None else f"{r['accept_rate']:.0%}"
        table.add_row(
            r["day"],
            r["agent"],
            str(r["calls"]),
            str(r["tokens_in"]),
            str(r["tokens_out"]),
            f"{r['usd']:.4f}",
            str(r["answers"]),
            str(r["accepted"]),
            rate,
        )
    stderr.print(table)
    return 0


@app.command("prune", help=PRUNE_HELP)
def prune(
    older_than: Annotated[
        str, typer.Option("--older-than", metavar="AGE", help="Nd or Nh, e.g. 30d.")
    ],
) -> int:
    age = parse_age(older_than)
    with opened() as log:
        removed = log.prune(datetime.now().astimezone() - age)
        where = log.path
    stderr.print(
        f"pruned {removed} run{'s' * (removed != 1)} older than {older_than} from {where}",
        markup=False,
    )
    return 0


def _show_summary(stored: StoredRun, json_out: bool) -> None:
    """An eval / train run: its one row."""
    row = stored.row
    if json_out:
        keys = (
            "id",
            "time",
            "command",
            "problem",
            "pool",
            "head",
            "settings",
            "usd",
            "error",
            "result",
        )
        print(json.dumps({**{k: row[k] for k in keys}, "verdict": stored.verdict}, indent=2))
    else:
        stderr.print(
            f"run {row['id']} · {row['command']} {row['problem']} · {row['head']} · "
            f"verdict {stored.verdict} · ${row['usd'] or 0:.4f}",
            markup=False,
        )


def parse_since(value: str | None) -> datetime | None:
    """An ISO date or datetime; without a zone it is local time."""
    from trinity_cli.errors import UsageError

    if value is None:
        return None
    try:
        return datetime.fromisoformat(value).astimezone()
    except ValueError:
        raise UsageError(
            f"--since {value!r} is not an ISO date or datetime (e.g. 2025-01-31 or 2025-01-31T09:00)"
        ) from None


def parse_age(value: str) -> timedelta:
    from trinity_cli.errors import UsageError

    match = re.fullmatch(r"(\d+)([dh])", value.strip())
    if match is None:
        raise UsageError(f"--older-than {value!r} is not an age like 30d (days) or 12h (hours)")
    amount = int(match[1])
    return timedelta(days=amount) if match[2] == "d" else timedelta(hours=amount)


def _run_id(value: str) -> int:
    from trinity_cli.errors import UsageError

    if not value.isdigit():
        raise UsageError(f"run {value!r} is not a run id or 'last' (see `trinity logs`)")
    return int(value)


@contextmanager
def opened() -> Iterator[RunLog]:
    """The log, with any database error as one line naming the file (exit 3)."""
    import sqlite3

    from trinity_cli.errors import ConfigError
    from trinity_cli.store.runlog import RunLog, RunLogError, default_path

    try:
        with RunLog.open() as log:
            yield log
    except RunLogError as exc:
        raise ConfigError(f"cannot read the run log {default_path()}: {exc.message}") from None
    except (sqlite3.Error, OSError) as exc:
        raise ConfigError(
            f"cannot read the run log {default_path()}: {exc} (move it aside to start a new log)"
        ) from None


@dataclass(frozen=True)
class StoredSuite:
    """What episode_json needs of a run's execution check."""

    source: str
    count: int


def replay(stored: StoredRun) -> tuple[list[Event], EpisodeResult]:
    """The events the run's display saw, rebuilt from its stored turns and checks, and the
    result (for a run that never finished: its turns so far, verdict interrupted)."""
    from trinity_cli.core.events import CheckFinished, EpisodeFinished, TurnFinished, TurnStarted
    from trinity_cli.core.records import (
        CheckOutcome,
        Decision,
        EpisodeResult,
        Truncation,
        TurnRecord,
    )
    from trinity_cli.core.roles import Role

    events: list[Event] = []
    records: list[TurnRecord] = []
    last_check: CheckFinished | None = None
    for t in stored.turns:
        decision = Decision(
            t["turn"],
            t["agent_index"],
            t["agent"],
            Role(t["role"]),
            t["role_source"],
            tuple(t["agent_probs"]),
            tuple(t["role_probs"]),
            t["coordinator_seconds"],
            t["coordinator_tokens"],
        )
        cut = (
            None if t["input_truncated"] is None else Truncation(**json.loads(t["input_truncated"]))
        )
        record = TurnRecord(
            decision,
            t["text"],
            t["answer"],
            t["verdict"],
            t["tokens_in"],
            t["tokens_out"],
            t["usd"],
            bool(t["usd_estimated"]),
            t["seconds"],
            bool(t["truncated"]),
            cut,
        )
        records.append(record)
        events += [TurnStarted(decision), TurnFinished(record)]
        for c in stored.checks:
            if c["turn"] == t["turn"]:
                last_check = CheckFinished(
                    t["turn"], CheckOutcome(bool(c["passed"]), c["summary"], c["source"])
                )
                events.append(last_check)
    row = stored.row
    answers = [r for r in records if r.answer is not None]
    answer = row["answer"] if row["finished"] else (answers[-1].answer if answers else None)
    # the final answer's check is one made after the turn that wrote it
    check = (
        last_check.outcome
        if last_check and answers and last_check.turn >= answers[-1].decision.turn
        else None
    )
    usd = row["usd"] if row["usd"] is not None else sum(r.usd for r in records)
    result = EpisodeResult(stored.verdict, answer, tuple(records), usd, row["error"], check)
    events.append(EpisodeFinished(result))
    return events, result


def rebuilt_json(stored: StoredRun) -> dict[str, Any]:
    """The `solve --json` object of a run that never stored one (it was killed)."""
    from trinity_cli.cli.display import episode_json
    from trinity_cli.core.budget import Budget

    _, result = replay(stored)
    tests = stored.row["tests"]
    suite = None if tests is None else StoredSuite(tests["source"], tests["count"])
    names = [a["name"] for a in stored.row["pool"]["agents"]]
    budget = Budget(stored.row["settings"].get("budget_usd"), spent_usd=result.usd)
    return episode_json(result, names, suite, budget)


def _print_runs(runs: list[dict[str, Any]]) -> None:
    from rich.table import Table

    if not runs:
        stderr.print("no runs in the run log match", markup=False)
        return

    table = Table(title="run log, newest first", title_justify="left")
    for column in ("id", "time", "command", "problem", "verdict", "turns", "$", "agents"):
        table.add_column(column, no_wrap=column in ("time", "verdict"))
    for r in runs:
        when = datetime.fromisoformat(r["time"]).astimezone().strftime("%Y-%m-%d %H:%M")
        table.add_row(
            str(r["id"]),
            when,
            r["command"],
            r["problem"],
            r["verdict"],
            str(r["turns"]),
            f"{r['usd']:.4f}",
            ", ".join(r["agents"]),
        )
    stderr.print(table)

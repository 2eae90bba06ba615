"""`trinity logs`: the run log (trinity_cli/store/runlog.py) listed, replayed, summed and pruned."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

import typer

from trinity_cli.cli.console import say, to_stdout
from trinity_cli.cli.log_access import (
    JsonList,
    RunsSince,
    TurnsSince,
    opened,
    parse_age,
    parse_since,
    parse_verdict,
    redraw,
    show_summary,
    stored_run,
)
from trinity_cli.core.verdicts import RUN_VERDICTS

EXIT_CODES = """Exit codes: 0 done; 2 usage (a bad flag or value, an unknown run id); 3 the log
cannot be read (corrupt, or written by a newer trinity)."""

HELP = f"""List recent runs, newest first, from the run log (a SQLite file in the user data dir,
shown by `trinity doctor`). Every `solve` is logged turn by turn as it runs, so a run that was
killed keeps the turns it finished (it shows as interrupted); each `eval` and `train` is one
summary row. --no-log on those commands, or TRINITY_NO_LOG=1, turns logging off.

--json prints a list of {{id, time, command, problem, problem_sha256, verdict, turns, usd, agents}}
(problem: its first line; for eval and train, the task set and split). Verdicts, for --verdict:
{", ".join(RUN_VERDICTS)}.

\b
Example: trinity logs -n 5 --verdict accepted

{EXIT_CODES}"""

SHOW_HELP = f"""Replay run ID (or `last`) as `solve -v` drew it, each turn's text included, on
stderr, and print its answer on stdout. --json prints the object `solve --json` printed (for a
run that never finished, the same built from its stored turns, verdict interrupted); for eval
and train, the stored summary.

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
    help=HELP, invoke_without_command=True, add_completion=False, rich_markup_mode=None,
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
    since: RunsSince = None, json_out: JsonList = False,
) -> int:
    if ctx.invoked_subcommand is not None:
        return 0
    start, verdict = parse_since(since), parse_verdict(verdict)
    with opened() as log:
        runs = log.list_runs(count or 2**62, verdict=verdict, agent=agent, since=start)
    if json_out:
        to_stdout(json.dumps(runs, indent=2) + "\n")
    else:
        from trinity_cli.cli.tables import print_runs

        print_runs(runs)
    return 0


@app.command("show", help=SHOW_HELP)
def show(
    run: Annotated[str, typer.Argument(help="A run id, or 'last'.")],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the run's JSON object on stdout.")
    ] = False,
) -> int:
    stored = stored_run(run)
    if stored.row["command"] != "solve":
        show_summary(stored, json_out)
    elif json_out:
        from trinity_cli.store.replay import rebuilt_json

        to_stdout(json.dumps(stored.row["result"] or rebuilt_json(stored), indent=2) + "\n")
    else:
        to_stdout(redraw(stored) or "")
    return 0


@app.command("stats", help=STATS_HELP)
def stats(
    since: TurnsSince = None, json_out: JsonList = False,
) -> int:
    start = parse_since(since)
    with opened() as log:
        rows = log.stats(start)
    if json_out:
        to_stdout(json.dumps(rows, indent=2) + "\n")
    else:
        from trinity_cli.cli.tables import print_stats

        print_stats(rows)
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
    say(f"pruned {removed} run{'s' * (removed != 1)} older than {older_than} from {where}")
    return 0

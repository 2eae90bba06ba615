"""The run log as `trinity logs` reads it: opened with any error as one line, the values of
its flags and options, a run found by id, and a stored run shown again."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from trinity_cli.cli.console import say, stderr, to_stdout
from trinity_cli.core.verdicts import RUN_VERDICTS
from trinity_cli.errors import ConfigError, UsageError

JsonList = Annotated[bool, typer.Option("--json", help="Print a JSON list on stdout.")]
RunsSince = Annotated[
    str | None,
    typer.Option("--since", help="Only runs started since (ISO date or datetime, local time)."),
]
TurnsSince = Annotated[
    str | None,
    typer.Option("--since", help="Only turns since (ISO date or datetime, local time)."),
]

if TYPE_CHECKING:
    from trinity_cli.store.runlog import RunLog, StoredRun


def show_summary(stored: StoredRun, json_out: bool) -> None:
    """An eval / train run: its one row."""
    row = stored.row
    if json_out:
        keys = [
            "id", "time", "command", "problem", "pool", "head", "settings", "usd", "error",
            "result",
        ]
        shown = {**{k: row[k] for k in keys}, "verdict": stored.verdict}
        to_stdout(json.dumps(shown, indent=2) + "\n")
    else:
        why = f" · {row['error']}" if row["error"] else ""
        say(
            f"run {row['id']} · {row['command']} {row['problem']} · {row['head']} · "
            f"verdict {stored.verdict} · ${row['usd'] or 0:.4f}{why}"
        )


def parse_since(value: str | None) -> datetime | None:
    """An ISO date or datetime; without a zone it is local time."""
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value).astimezone()
    except ValueError:
        raise UsageError(
            f"--since {value!r} is not an ISO date or datetime "
            "(e.g. 2025-01-31 or 2025-01-31T09:00)"
        ) from None


def parse_verdict(value: str | None) -> str | None:
    """A typo names no runs: it is refused, with the verdicts there are."""
    if value is not None and value not in RUN_VERDICTS:
        raise UsageError(f"--verdict {value!r}: not a verdict (one of {', '.join(RUN_VERDICTS)})")
    return value


def parse_age(value: str) -> timedelta:
    match = re.fullmatch(r"(\d+)([dh])", value.strip())
    if match is None:
        raise UsageError(f"--older-than {value!r} is not an age like 30d (days) or 12h (hours)")
    amount = int(match[1])
    return timedelta(days=amount) if match[2] == "d" else timedelta(hours=amount)


def redraw(stored: StoredRun) -> str | None:
    """A solve run drawn again on stderr as `solve -v` drew it; returns its answer."""
    from trinity_cli.cli.display import TurnDisplay
    from trinity_cli.cli.problem import display_header
    from trinity_cli.store.replay import replay

    row = stored.row
    searched = (row["settings"] or {}).get("no_tests") is False  # older logs did not say: no note
    header = display_header(row["pool"]["source"], row["head"], row["tests"], searched=searched)
    display = TurnDisplay(stderr, header, verbose=True)
    events, result = replay(stored)
    for event in events:
        display(event)
    return result.answer


def stored_run(run: str) -> StoredRun:
    """Run `run` (an id, or 'last') from the log; a usage error when there is none."""
    ref = None if run == "last" else run_id(run)
    with opened() as log:
        stored = log.get_run(ref)
    if stored is None:
        raise UsageError(
            "the run log is empty"
            if ref is None
            else f"no run {ref} in the run log (see `trinity logs`)"
        )
    return stored


def run_id(value: str) -> int:
    if not value.isdigit():
        raise UsageError(f"run {value!r} is not a run id or 'last' (see `trinity logs`)")
    return int(value)


@contextmanager
def opened() -> Iterator[RunLog]:
    """The log, with any database error as one line naming the file (exit 3)."""
    import sqlite3

    from trinity_cli.store.runlog import RunLog, RunLogError, default_path

    try:
        with RunLog.open() as log:
            yield log
    except RunLogError as exc:
        raise ConfigError(f"cannot read the run log {default_path()}: {exc.message}") from None
    except (sqlite3.Error, OSError) as exc:
        why = why_unreadable(exc)
        raise ConfigError(f"cannot read the run log {default_path()}: {why}") from None


def why_unreadable(exc: Exception) -> str:
    """Why the run log cannot be read; advice to move it aside only where that helps: a file
    that is no database, or a damaged one (not a folder the user may not enter, not a lock)."""
    import sqlite3

    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''}"
    if isinstance(exc, sqlite3.OperationalError):
        return str(exc)
    return f"{exc} (move it aside to start a new log)"

"""Options (and a line of help) several commands share, so their --help says the same thing
everywhere: a command declares `pool: opt.Pool = None`."""

from typing import Annotated

import typer

SUMMARY_LOGGED = """The run is written to the run log as one summary row (see `trinity logs`),
also when it stops early; --no-log or TRINITY_NO_LOG=1 turns that off."""

Pool = Annotated[
    str | None,
    typer.Option(
        "--pool",
        help="Pool TOML file, or a bundled pool's name (`trinity pool --list`). Default: "
        "$TRINITY_POOL, ./trinity.toml, the user config's pool.toml, else the offline default.",
    ),
]
Tasks = Annotated[
    str,
    typer.Option(
        "--tasks",
        help="Task set: humaneval, mbpp, evalperf, a JSONL task file, or a comma list of them.",
    ),
]
BudgetUsd = Annotated[
    float | None,
    typer.Option("--budget-usd", min=0.0, help="Stop before spend could exceed this (exit 5)."),
]
Workers = Annotated[
    int | None,
    typer.Option(
        "--workers", min=1,
        help="Episodes in flight at once, to overlap agents' network waits (results do not "
        "change). Default: 4 with a network agent in the pool, else 1.",
    ),
]
DryRun = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help="Print the episodes, agent calls and worst-case $ of this run; call and write "
        "nothing.",
    ),
]
Offline = Annotated[
    bool, typer.Option("--offline", help="Refuse agents that need the network (exit 3).")
]
NoLog = Annotated[bool, typer.Option("--no-log", help="Do not write this run to the run log.")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the disk caches.")]
Json = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")]
Seed = Annotated[int, typer.Option("--seed")]

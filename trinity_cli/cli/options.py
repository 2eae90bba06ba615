"""Options several commands share, so their --help says the same thing everywhere."""

from typing import Annotated

import typer

PoolOption = Annotated[
    str | None,
    typer.Option(
        "--pool",
        help="Pool TOML file, or a bundled pool's name (`trinity pool --list`). Default: $TRINITY_POOL, "
        "./trinity.toml, the user config's pool.toml, else the offline default.",
    ),
]
TasksOption = Annotated[
    str,
    typer.Option(
        "--tasks",
        help="Task set: humaneval, mbpp, evalperf, a JSONL task file, or a comma list of them.",
    ),
]

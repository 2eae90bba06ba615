"""`trinity bench`: the coordinator's costs as ratios measured in one run (see
trinity_cli/bench/measure.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trinity_cli.cli.console import stderr, to_stdout

HELP = """Measure, on the embedded Gemma GGUF and this machine, what the coordinator costs: prefix
reuse speed-up, re-encode time against raw llama.cpp evaluation, its share of a streamed call
(encoded while it streams, and not), training episodes per hour on the sim pool, the speed-up
of concurrent episodes, peak RSS of solve, --help start-up, and re-encode time per thread
count and batch size. Ratios, not pass/fail timings; --json prints one object.

\b
Example: trinity bench --json > bench.json"""


def bench(
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout.")
    ] = False,
    repeats: Annotated[
        int, typer.Option("--repeats", min=1, help="Runs per timing (the median counts).")
    ] = 3,
    generations: Annotated[
        int, typer.Option("--generations", min=1, help="Generations of the training run.")
    ] = 2,
    problem: Annotated[
        Path | None, typer.Option("--problem", help="Problem for the RSS run.")
    ] = None,
    sim_pool: Annotated[
        Path | None, typer.Option("--sim-pool", help="Pool for the training run.")
    ] = None,
) -> int:
    from rich.table import Table

    from trinity_cli.bench.measure import run_all
    from trinity_cli.cli.display import TurnDisplay
    from trinity_cli.paths import shipped

    examples = shipped("examples")
    result = run_all(
        problem or examples / "fizzbuzz.md", sim_pool or examples / "sim-pool.toml", repeats,
        generations, TurnDisplay,
    )
    if json_out:
        to_stdout(json.dumps(result, indent=2) + "\n")
        return 0
    table = Table(title="trinity bench (ratios from one run)", title_justify="left")
    table.add_column("key")
    table.add_column("value")
    for key, value in result.items():
        table.add_row(key, json.dumps(value))
    stderr.print(table)
    return 0

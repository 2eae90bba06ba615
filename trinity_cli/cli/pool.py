"""`trinity pool`: the agents of the pool and whether each is usable right now."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from trinity_cli.cli.console import stderr

if TYPE_CHECKING:
    from rich.table import Table

HELP = """List the pool's agents and whether each is usable: key present, server reachable,
model file present. Exit 0 when every agent is usable, 3 otherwise (or on a bad pool file)."""


def pool(
    pool: Annotated[str | None, typer.Option("--pool", help="Pool TOML file.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> int:
    from trinity_cli.config import load_pool
    from trinity_cli.pool_check import check_agent

    pool_cfg = load_pool(pool)
    checks = [check_agent(spec) for spec in pool_cfg.agents]
    if json_out:
        print(json.dumps({"source": pool_cfg.source, "agents": [c.as_json() for c in checks]}, indent=2))
    else:
        stderr.print(agent_table(f"pool: {pool_cfg.source}", checks))
    return 0 if all(c.usable for c in checks) else 3


def agent_table(title: str, checks: list) -> Table:
    """The pool's agents and whether each is usable (`pool` and `doctor` show it)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in ("agent", "provider", "model", "usable", "why"):
        table.add_column(column)
    for c in checks:
        table.add_row(c.name, c.provider, c.model, "yes" if c.usable else "no", c.detail)
    return table

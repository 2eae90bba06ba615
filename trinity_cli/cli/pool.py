"""`trinity pool`: the agents of the pool and whether each is usable right now."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from trinity_cli.cli.console import stderr

if TYPE_CHECKING:
    from rich.table import Table

HELP = """List the pool's agents and whether each is usable: key present, server reachable,
model file present; and which head `trinity solve` would route with, and why (--weights >
TRINITY_WEIGHTS > [coordinator] weights in the pool file > the newest user head that fits >
the newest shipped head that fits > the fallback pipeline). Exit 0 when every agent is usable,
3 otherwise (or on a bad pool file)."""


def pool(
    pool: Annotated[str | None, typer.Option("--pool", help="Pool TOML file.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
) -> int:
    from trinity_cli.config import load_pool
    from trinity_cli.pool_check import check_agent

    pool_cfg = load_pool(pool)
    checks = [check_agent(spec) for spec in pool_cfg.agents]
    policy = policy_json(pool_cfg)
    if json_out:
        print(json.dumps({"source": pool_cfg.source, "agents": [c.as_json() for c in checks], "policy": policy},
                         indent=2))
    else:
        stderr.print(agent_table(f"pool: {pool_cfg.source}", checks))
        stderr.print(f"policy: {policy['source'] or 'none'} ({policy['reason']})", markup=False, highlight=False)
    return 0 if all(c.usable for c in checks) else 3


def policy_json(pool_cfg: Any) -> dict[str, Any]:
    """Which head solve would use and why; a head that cannot be used says why instead."""
    from trinity_cli.errors import ConfigError
    from trinity_cli.runtime import find_head

    try:
        return find_head(pool_cfg, None, warn=lambda msg: None).as_json()
    except ConfigError as exc:
        return {"source": None, "reason": f"solve would stop: {exc.message}"}


def agent_table(title: str, checks: list) -> Table:
    """The pool's agents and whether each is usable (`pool` and `doctor` show it)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in ("agent", "provider", "model", "usable", "why"):
        table.add_column(column)
    for c in checks:
        table.add_row(c.name, c.provider, c.model, "yes" if c.usable else "no", c.detail)
    return table

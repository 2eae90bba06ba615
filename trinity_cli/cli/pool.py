"""`trinity pool`: the agents of the pool and whether each is usable right now."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from trinity_cli.cli import options as opt
from trinity_cli.cli.console import stderr, to_stdout
from trinity_cli.heads.precedence import RULE

HELP = (
    """List the pool's agents and whether each is usable: key present, server reachable,
model file present and whole (its GGUF header against its size); and which head `trinity solve`
would route with, and why ("""
    + RULE
    + """;
--weights checks that head), and each agent's profile (`trinity profile`) and its age. Exit 0
when every agent is usable and the head solve would use fits, 3 otherwise (or on a bad pool
file). With --list: the bundled recorded pools and task sets.

\b
Example: trinity pool --pool ldb-humaneval"""
)


def pool(
    pool: opt.Pool = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")] = False,
    list_bundled: Annotated[
        bool, typer.Option("--list", help="List the bundled recorded pools and task sets.")
    ] = False,
    weights: Annotated[
        str | None, typer.Option("--weights", help="Check this head (path or name) as solve would.")
    ] = None,
) -> int:
    if list_bundled:
        return show_bundled(json_out)
    from trinity_cli.cli.tables import agent_table
    from trinity_cli.heads.files import shown_head
    from trinity_cli.pool.bundled import shown_source
    from trinity_cli.pool.spec import load_pool
    from trinity_cli.providers.check import check_agent

    pool_cfg = load_pool(pool)
    checks = [check_agent(spec) for spec in pool_cfg.agents]
    choice, policy = chosen_head(pool_cfg, weights)
    profiles = profile_summaries(pool_cfg, None if choice is None else choice.meta)
    if json_out:
        agents = [{**c.as_json(), "profile": p} for c, p in zip(checks, profiles)]
        report = {
            "source": pool_cfg.source, "agents": agents, "policy": policy,
            "warnings": pool_cfg.warnings,
        }
        to_stdout(json.dumps(report, indent=2) + "\n")
    else:
        stderr.print(agent_table(f"pool: {shown_source(pool_cfg.source)}", checks, profiles))
        stderr.print(
            f"policy: {shown_head(policy['source']) if policy['source'] else 'none'}; "
            f"{policy['reason']}", markup=False,
            highlight=False,
        )
        for warning in pool_cfg.warnings:
            stderr.print(f"warning: {warning}", markup=False, highlight=False)
    return 0 if all(c.usable for c in checks) and policy["source"] is not None else 3


def chosen_head(pool_cfg: Any, weights: str | None = None) -> tuple[Any, dict[str, Any]]:
    """Which head solve would use (runtime.HeadChoice, or None when it would stop) and, as
    JSON, why; a head that cannot be used says why instead."""
    from trinity_cli.errors import ConfigError
    from trinity_cli.runtime import find_head

    try:
        choice = find_head(pool_cfg, weights, warn=lambda msg: None)
    except ConfigError as exc:
        return None, {"source": None, "reason": f"solve would stop: {exc.message}"}
    return choice, choice.as_json()


def profile_summaries(pool: Any, head_meta: dict[str, Any] | None) -> list[dict[str, Any] | None]:
    """Each agent's profile (`trinity profile`) for the universal head: the chosen head when it
    is one, else the shipped one; None where an agent has none."""
    from trinity_cli.heads.files import UNIVERSAL, is_universal, read_metadata, shipped_dir
    from trinity_cli.runtime import stored_profiles

    if head_meta is None or not is_universal(head_meta):
        shipped = shipped_dir() / f"{UNIVERSAL}.npz"
        head_meta = read_metadata(shipped) if shipped.is_file() else None
    if head_meta is None:
        return [None] * len(pool.agents)
    return [
        None
        if p is None
        else {
            "pass_rate": p.profile.pass_rate, "usd_per_answer": p.profile.usd_per_answer,
            "n": p.profile.n, "created": p.created, "age_days": round(p.age_days, 2),
        }
        for p in stored_profiles(pool, head_meta)
    ]


def show_bundled(json_out: bool) -> int:
    """The recorded pools and task sets that ship with trinity, for `--pool NAME` and
    `--tasks NAME`."""
    from dataclasses import asdict

    from rich.table import Table

    from trinity_cli.pool.bundled import pools
    from trinity_cli.tasks.taskset import load_tasks, select_split, task_set_names

    found = [{**asdict(p), "path": str(p.path)} for p in pools()]
    sets: list[dict[str, Any]] = []
    for name in task_set_names():
        tasks = load_tasks(name)
        sets.append(
            {
                "name": name, "tasks": len(tasks), "train": len(select_split(tasks, "train")),
                "test": len(select_split(tasks, "test")),
                "with_tests": sum(t.has_tests for t in tasks),
            }
        )
    if json_out:
        to_stdout(json.dumps({"pools": found, "task_sets": sets}, indent=2) + "\n")
        return 0
    table = Table(title="bundled recorded pools (--pool NAME)", title_justify="left")
    for column in ("pool", "task set", "models"):
        table.add_column(column)
    for p in found:
        table.add_row(p["name"], p["task_set"], ", ".join(p["models"]))
    stderr.print(table)
    table = Table(title="task sets (--tasks NAME[,NAME])", title_justify="left")
    for column in ("task set", "tasks", "train", "test", "with tests"):
        table.add_column(column)
    for s in sets:
        table.add_row(s["name"], *(str(s[k]) for k in ("tasks", "train", "test", "with_tests")))
    stderr.print(table)
    return 0

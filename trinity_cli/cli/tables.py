"""The tables commands print on stderr: eval's rows, the run log's runs and its per-agent
stats."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.table import Table

from trinity_cli.cli.console import say, stderr

STATS_COLUMNS = ("day", "agent", "calls", "tok in", "tok out", "$", "answers", "accepted", "rate")

if TYPE_CHECKING:
    from trinity_cli.train.evaluation import EvalJob


def print_eval(job: EvalJob, report: dict[str, Any], rows: list[Any]) -> None:
    """eval's rows, then best-fixed's plan, the error rate against the best single and the
    first head's paired margins."""
    title = (
        f"{job.tasks}:{job.split} · {job.scope} · {job.sources} · --max-turns {job.max_turns} "
        "(pipeline: rows' limit is one turn per role, at least 3)"
    )
    partial = " · PARTIAL: stopped by --budget-usd" if report["partial"] else ""
    table = Table(title=title + partial, title_justify="left")
    for column in ("policy", "pass@1", "95% CI", "$/task", "turns"):
        table.add_column(column)
    for row in rows:
        lo, hi = row.ci95()
        table.add_row(
            row.policy, f"{row.pass_at_1:.3f}", f"{lo:.2f}–{hi:.2f}", f"{row.usd_per_task:.5f}",
            f"{row.mean_turns:.2f}",
        )
    stderr.print(table)
    if report["best_fixed"] is not None:
        fixed = report["best_fixed"]
        plan = " → ".join(f"{agent} {role}" for agent, role in fixed["plan"])
        say(
            f"best-fixed: {plan} (chosen on {fixed['train_tasks']} train-split tasks, fitness "
            f"{fixed['train_fitness']:.4f} at cost weight {fixed['cost_weight']:g})"
        )
    if report["best_single"] is not None:
        single = next(r for r in rows if r.policy == report["best_single"])
        say(error_line(rows[0], single, report["rel_err_reduction_vs_best_single"]))
    margins = report["paired_margin_se"]
    if margins:
        shown = (
            f"{key.removeprefix('vs_').replace('_', ' ')} "
            + ("n/a" if value is None else f"{value:+.2f}")
            for key, value in margins.items()
        )
        say("paired margins of the first head (SE): " + ", ".join(shown))


def error_line(head: Any, single: Any, reduction: float | None) -> str:
    """How the first head's error rate compares with the best single's, saying which way."""
    rates = f"error rate {1 - head.pass_at_1:.3f} vs {1 - single.pass_at_1:.3f}"
    if reduction is None:
        return f"{head.policy} vs the best single ({single.policy}), which makes no error: {rates}"
    way = (
        f"{reduction:.1%} fewer errors"
        if reduction > 0
        else f"{-reduction:.1%} more errors"
        if reduction < 0
        else "as many errors"
    )
    return f"{head.policy}: {way} than the best single ({single.policy}): {rates}"


def print_runs(runs: list[dict[str, Any]]) -> None:
    """`trinity logs`: one row a run."""
    if not runs:
        say("no runs in the run log match")
        return
    table = Table(title="run log, newest first", title_justify="left")
    for column in ("id", "time", "command", "problem", "verdict", "turns", "$", "agents"):
        table.add_column(column, no_wrap=column in ("time", "verdict"))
    for r in runs:
        when = datetime.fromisoformat(r["time"]).astimezone().strftime("%Y-%m-%d %H:%M")
        table.add_row(
            str(r["id"]), when, r["command"], r["problem"], r["verdict"], str(r["turns"]),
            f"{r['usd']:.4f}", ", ".join(r["agents"]),
        )
    stderr.print(table)


def print_stats(rows: list[dict[str, Any]]) -> None:
    """`trinity logs stats`: one row an agent and day."""
    table = Table(title="run log: per agent and day", title_justify="left")
    for column in STATS_COLUMNS:
        table.add_column(column, no_wrap=column == "day")
    for r in rows:
        rate = "-" if r["accept_rate"] is None else f"{r['accept_rate']:.0%}"
        table.add_row(
            r["day"], r["agent"], str(r["calls"]), str(r["tokens_in"]), str(r["tokens_out"]),
            f"{r['usd']:.4f}", str(r["answers"]), str(r["accepted"]), rate,
        )
    stderr.print(table)


def agent_table(
    title: str, checks: list, profiles: list[dict[str, Any] | None] | None = None
) -> Table:
    """The pool's agents and whether each is usable (`pool` and `doctor` show it), and with
    `profiles` each one's profile for the universal head and its age."""
    table = Table(title=title, title_justify="left")
    for column in (
        "agent", "provider", "model", "usable", "why", *(("profile",) if profiles else ()),
    ):
        table.add_column(column)
    for i, c in enumerate(checks):
        cells = [c.name, c.provider, c.model, "yes" if c.usable else "no", c.detail]
        if profiles:
            p = profiles[i]
            cells.append(
                "none"
                if p is None
                else f"pass {p['pass_rate']:.2f} on {p['n']}, {p['age_days']:.0f} d old"
            )
        table.add_row(*cells)
    return table

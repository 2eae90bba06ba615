"""`trinity doctor`: what works on this machine, on one screen."""

from __future__ import annotations

import json
import platform
import sys
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import typer

from trinity_cli.cli import options as opt
from trinity_cli.cli.console import stderr, to_stdout

HELP = """Show which sandbox isolation works here for the user running trinity (and what it does
not isolate), which agents of the pool are usable, where config and caches live, and the
coordinator's backend and threads. --json prints the same as one object. Exit 0 when every
agent and the coordinator model are usable, 3 otherwise (or on a bad pool file).

\b
Example: trinity doctor --pool my-pool.toml"""


def doctor(
    pool: opt.Pool = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print one JSON object on stdout.")
    ] = False,
) -> int:
    from trinity_cli.pool.spec import load_pool
    from trinity_cli.providers.check import check_agent
    from trinity_cli.tasks.sandbox import isolation

    pool_cfg = load_pool(pool)
    checks = [check_agent(spec) for spec in pool_cfg.agents]
    coordinator = _coordinator(pool_cfg)
    report = {
        "schema_version": 1,
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}, "
        f"Python {platform.python_version()}", "sandbox": isolation().as_dict(),
        "pool": {"source": pool_cfg.source, "agents": [c.as_json() for c in checks]},
        "paths": _paths(), "coordinator": coordinator,
    }
    if json_out:
        to_stdout(json.dumps(report, indent=2) + "\n")
    else:
        _print(report, checks)
    usable = all(c.usable for c in checks) and coordinator["model_present"]
    return 0 if usable else 3


def _paths() -> dict[str, Any]:
    from trinity_cli import paths
    from trinity_cli.heads.files import user_heads_dir
    from trinity_cli.store.runlog import default_path

    log = default_path()
    return {
        "config": str(paths.config_dir()), "cache": str(paths.cache_dir()),
        "heads": str(user_heads_dir()),
        "run_log": {
            "path": str(log), "bytes": log.stat().st_size if log.is_file() else None,
            "problem": _unreadable(log),
        },
        "logs": "progress and errors go to stderr; runs to run_log (`trinity logs`); train writes "
        "its head, OUT.csv and OUT.ckpt to heads (or beside --out)",
    }


def _unreadable(log: Path) -> str | None:
    """Why the run log cannot be read (solve still runs, with a warning), read-only; None if
    it can or does not exist yet."""
    import sqlite3

    from trinity_cli.cli.log_access import why_unreadable

    if not log.is_file():
        return None
    try:
        # immutable: a read-only connection would leave -wal and -shm files beside the log
        with closing(sqlite3.connect(f"{log.absolute().as_uri()}?immutable=1", uri=True)) as db:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        return why_unreadable(exc)
    return None


def _coordinator(pool_cfg: Any) -> dict[str, Any]:
    from trinity_cli.llama.capi import default_threads
    from trinity_cli.pool.spec import EMBEDDED

    spec = pool_cfg.coordinator
    from trinity_cli.llama.gguf import model_problem

    model = "embedded Gemma-3-270M Q4_K_M" if spec.model == EMBEDDED else spec.model
    problem = model_problem(spec.model)
    import llama_cpp

    gpu = bool(llama_cpp.llama_supports_gpu_offload())
    backend = ("Metal" if sys.platform == "darwin" else "GPU offload available") if gpu else "CPU"
    return {
        "model": model, "model_present": problem is None, "model_problem": problem,
        "backend": backend,
        "threads": spec.n_threads or default_threads(), "llama_cpp_python": llama_cpp.__version__,
        "n_ctx": spec.n_ctx,
    }


def _print(report: dict[str, Any], checks: list) -> None:
    from trinity_cli.cli.tables import agent_table
    from trinity_cli.pool.bundled import shown_source

    sandbox = report["sandbox"]
    stderr.print(f"[bold]trinity doctor[/] · {report['platform']}")
    stderr.print(
        f"\n[bold]sandbox[/] for candidate code: mode [bold]{sandbox['mode']}[/], "
        f"as {sandbox['user']}", highlight=False,
    )
    for line in sandbox["isolated"]:
        stderr.print(f"  [green]isolated[/]     {line}", highlight=False)
    for line in sandbox["not_isolated"]:
        stderr.print(f"  [yellow]not isolated[/] {line}", highlight=False)
    for mode, why in sandbox["unavailable"].items():
        stderr.print(f"  [dim]{mode} unavailable: {why}[/]", highlight=False)
    stderr.print(agent_table(f"\npool: {shown_source(report['pool']['source'])}", checks))
    c = report["coordinator"]
    stderr.print(
        f"[bold]coordinator[/]: {c['model']} ({c['model_problem'] or 'present'}), "
        f"backend {c['backend']}, {c['threads']} threads, n_ctx {c['n_ctx']}, "
        f"llama-cpp-python {c['llama_cpp_python']}", highlight=False,
    )
    stderr.print("\n[bold]paths[/]", highlight=False)
    for name, where in report["paths"].items():
        if name == "run_log":
            size = "not created yet" if where["bytes"] is None else f"{where['bytes']:,} bytes"
            problem = f"; UNREADABLE: {where['problem']}" if where["problem"] else ""
            where = f"{where['path']} ({size}{problem})"
        stderr.print(f"  {name:7} {where}", highlight=False, markup=False)

"""The `trinity` command: thin Typer commands over the library.

`main()` is the only place where errors become exit codes (see the README's table). Nothing
heavy is imported here: each command imports what it uses when it runs, so `trinity --help`
loads neither llama.cpp nor numpy nor any SDK.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Annotated

import typer

from trinity_cli import __version__
from trinity_cli.cli import bench as bench_command
from trinity_cli.cli import doctor as doctor_command
from trinity_cli.cli import eval as eval_command
from trinity_cli.cli import logs as logs_command
from trinity_cli.cli import pool as pool_command
from trinity_cli.cli import profile as profile_command
from trinity_cli.cli import solve as solve_command
from trinity_cli.cli import train as train_command
from trinity_cli.cli.console import stderr, to_stdout
from trinity_cli.errors import TrinityError, redact

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# Usage errors are typer's click exceptions, from the copy of click that typer carries (0.26+).
# typer does not export their base class; typer.BadParameter reaches it, so trinity never
# imports click.
_ClickException: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)

app = typer.Typer(
    name="trinity",
    help="An evolved LLM coordinator for coding tasks: a tiny trained head on a small GGUF "
    "model picks, each turn, one model from your pool and one role (thinker, worker, verifier). "
    "Tab completion: --install-completion. NO_COLOR=1 turns colour off.",
    invoke_without_command=True, add_completion=True, pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False, rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        to_stdout(f"trinity {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """trinity: route each turn to one model and one role."""
    if ctx.invoked_subcommand is None:  # bare `trinity`: the help, as a usage error
        stderr.print(ctx.get_help(), markup=False, highlight=False)
        raise _ClickException("no command given") from None


app.command("solve", help=solve_command.HELP)(solve_command.solve)
app.command("pool", help=pool_command.HELP)(pool_command.pool)
app.command("train", help=train_command.HELP)(train_command.train)
app.command("eval", help=eval_command.HELP)(eval_command.eval_command)
app.command("profile", help=profile_command.HELP)(profile_command.profile)
app.command("bench", help=bench_command.HELP)(bench_command.bench)
app.command("doctor", help=doctor_command.HELP)(doctor_command.doctor)
app.add_typer(logs_command.app, name="logs")


def exit_now(code: int) -> None:
    """Exit without waiting for episodes still in flight on worker threads (train, eval): what
    they would add is not kept anyway (checkpoints hold whole generations, caches every reply)."""
    if any(
        t.is_alive() and not t.daemon
        for t in threading.enumerate()
        if t is not threading.main_thread()
    ):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def _usage_line(exc: Exception) -> str:
    """A usage error on one line, naming the command whose --help explains it."""
    message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    if ctx is not None:
        command = ctx.command_path
    else:  # some parser errors carry no context: the command is the first argument, if it is one
        names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
        command = "trinity" + (
            f" {sys.argv[1]}" if len(sys.argv) > 1 and sys.argv[1] in names else ""
        )
    return f"{message} (see `{command} --help`)"


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except TrinityError as exc:
        if exc.message:  # a stopped reader of stdout is said by no message
            stderr.print(f"error: {exc.message}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        stderr.print("interrupted", markup=False)
        exit_now(EXIT_INTERRUPTED)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except _ClickException as exc:
        stderr.print(f"error: {_usage_line(exc)}", markup=False, highlight=False)
        sys.exit(EXIT_USAGE)
    except PermissionError as exc:  # a path this user may not read or write: not a bug
        where = f" {exc.filename}" if exc.filename else ""
        stderr.print(
            f"error: cannot access{where}: {exc.strerror or exc}", markup=False, highlight=False
        )
        sys.exit(EXIT_USAGE)
    except Exception as exc:
        if os.environ.get("TRINITY_DEBUG"):
            raise
        stderr.print(
            f"internal error: {type(exc).__name__}: {redact(str(exc))} (a bug in trinity; "
            "TRINITY_DEBUG=1 shows the traceback)", markup=False, highlight=False,
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)

"""The one console for humans: stderr. stdout carries only the answer (or JSON).

NO_COLOR (no-color.org, any non-empty value) wins over FORCE_COLOR: under NO_COLOR Rich alone
drops only the colours (bold and dim stay), and FORCE_COLOR would still style a pipe.
"""

import os
import sys
from collections.abc import Callable

from rich.console import Console


class _StderrConsole(Console):
    def on_broken_pipe(self) -> None:
        """stderr went away (`2>&1 | head`, a reader that stopped): say nothing more there and
        let the run go on, its answer to stdout. (Rich's own would point stdout at /dev/null and
        exit 1.)"""
        self.quiet = True


PIPE_WIDTH = 200  # a table's widest line into a file or pipe: Rich's 80 would cut it


def _console() -> Console:
    """Into a file or a pipe (`2> eval.log`) a table keeps its natural width, up to PIPE_WIDTH,
    unless COLUMNS says otherwise; a terminal's width is its own."""
    piped = not sys.stderr.isatty() and not os.environ.get("COLUMNS")
    width = PIPE_WIDTH if piped else None
    if not os.environ.get("NO_COLOR"):
        return _StderrConsole(stderr=True, highlight=False, soft_wrap=True, width=width)
    environ = {key: value for key, value in os.environ.items() if key != "FORCE_COLOR"}
    return _StderrConsole(
        stderr=True, highlight=False, soft_wrap=True, width=width, color_system=None,
        _environ=environ,
    )


stderr = _console()


def say(message: str) -> None:
    """One line for the user, printed as it is (brackets are text, not markup)."""
    stderr.print(message, markup=False)


def warn(message: str) -> None:
    say(f"warning: {message}")


def say_unless(quiet: bool) -> Callable[[str], None]:
    """Progress lines, or nothing under --quiet."""
    return (lambda message: None) if quiet else say


def to_stdout(text: str) -> bool:
    """Write `text` on stdout. False when whoever read stdout stopped reading (`| head`): stdout
    then points at /dev/null, so that exiting says nothing more, as Unix tools do."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return False
    return True

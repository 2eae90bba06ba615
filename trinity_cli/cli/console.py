"""The one console for humans: stderr. stdout carries only the answer (or JSON).

NO_COLOR (no-color.org, any non-empty value) wins over FORCE_COLOR: under NO_COLOR Rich alone
drops only the colours (bold and dim stay), and FORCE_COLOR would still style a pipe.
"""

import os
import sys
from collections.abc import Callable

from rich.console import Console

from trinity_cli.errors import OutputLost


def _reopen_closed_standard_fds() -> None:
    """A standard stream closed before trinity started (`2>&-`, `>&-`) leaves its fd free, and
    the next file trinity opened (the run log) would take that number, where a stray write
    would land: /dev/null takes it instead. A closed stderr then only silences the display; a
    closed stdout stays None to Python, so `to_stdout` knows the output is lost."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)  # the lowest free fd: this one, or a lower
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115


_reopen_closed_standard_fds()


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


def to_stdout(text: str) -> None:
    """Write `text` on stdout, with what print() left in its buffer. OutputLost (exit 141) when
    stdout cannot take it; stdout then points at /dev/null, so that exiting says nothing more."""
    if sys.stdout is None:  # closed before trinity started
        if text:
            raise OutputLost("cannot write to stdout: it is closed")
        return
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if isinstance(exc, BrokenPipeError):  # its reader stopped: nothing to say
            raise OutputLost("") from None
        raise OutputLost(f"cannot write to stdout: {exc.strerror or exc}") from None

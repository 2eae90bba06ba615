"""The one console for humans: stderr. stdout carries only the answer (or JSON).

NO_COLOR (no-color.org, any non-empty value) wins over FORCE_COLOR: under NO_COLOR Rich alone
drops only the colours (bold and dim stay), and FORCE_COLOR would still style a pipe.
"""

import os
import sys
from collections.abc import Callable
from typing import IO, cast

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


class _Stderr:
    """What the console writes to: sys.stderr as it is at each write, except that a write that
    fails (a reader that stopped, `2>&1 | head`; a full disk behind `2> log`) silences the
    display from then on instead of ending the run, whose answer goes to stdout."""

    def __init__(self) -> None:
        self.failed = False

    def write(self, text: str) -> int:
        if not self.failed:
            try:
                return sys.stderr.write(text)
            except OSError:
                self.failed = True
        return len(text)

    def flush(self) -> None:
        if not self.failed:
            try:
                sys.stderr.flush()
            except OSError:
                self.failed = True

    def __getattr__(self, name: str) -> object:  # isatty, fileno, encoding: sys.stderr's
        return getattr(sys.stderr, name)


PIPE_WIDTH = 200  # a table's widest line into a file or pipe: Rich's 80 would cut it


def _console() -> Console:
    """Into a file or a pipe (`2> eval.log`) a table keeps its natural width, up to PIPE_WIDTH,
    unless COLUMNS says otherwise; a terminal's width is its own."""
    piped = not sys.stderr.isatty() and not os.environ.get("COLUMNS")
    width = PIPE_WIDTH if piped else None
    file = cast(IO[str], _Stderr())
    if not os.environ.get("NO_COLOR"):
        return Console(file=file, highlight=False, soft_wrap=True, width=width)
    environ = {key: value for key, value in os.environ.items() if key != "FORCE_COLOR"}
    return Console(
        file=file, highlight=False, soft_wrap=True, width=width, color_system=None,
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

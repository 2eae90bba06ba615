"""The problem `solve` reads (a file, or a pipe; anything but non-empty UTF-8 text is a usage
error, exit 2, never a traceback) and the display's first line, which says how it is checked."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from trinity_cli.errors import UsageError
from trinity_cli.pool.bundled import shown_source

MAX_PROBLEM_BYTES = 1_000_000
NO_PROBLEM = "no problem given: name a file or pipe it in (see `trinity solve --help`)"


def suite_for(text: str, tests: Path | None) -> Any:
    """The execution check: --tests FILE, else the problem's doctests or samples (None: none)."""
    from trinity_cli.tasks.checks import suite_from_file, suite_from_problem
    from trinity_cli.tasks.samples import stated_tolerance

    if tests is not None:
        return suite_from_file(tests, stated_tolerance(text))
    return suite_from_problem(text)


def read_problem(argument: str | None) -> str:
    """The problem text; anything that is not non-empty UTF-8 text is a usage error (exit 2).
    No argument reads a pipe (never a terminal: that would wait for typing nobody meant)."""
    if argument is None and sys.stdin.isatty():
        raise UsageError(NO_PROBLEM)
    if argument in (None, "-"):
        data = sys.stdin.buffer.read(MAX_PROBLEM_BYTES + 1)
        where = "stdin"
    else:
        path = Path(argument)
        try:  # a folder the user may not enter fails already at is_dir
            if path.is_dir():
                raise UsageError(f"problem {argument} is a directory, not a file")
            if not path.exists():
                raise UsageError(f"problem file not found: {argument}")
            with path.open("rb") as handle:
                data = handle.read(MAX_PROBLEM_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"cannot read problem {argument}: {exc.strerror}") from None
        where = argument
    if len(data) > MAX_PROBLEM_BYTES:
        raise UsageError(f"problem {where} is larger than {MAX_PROBLEM_BYTES:,} bytes")
    if b"\x00" in data:
        raise UsageError(f"problem {where} is binary, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"problem {where} is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise UsageError(NO_PROBLEM if argument is None else f"problem {where} is empty")
    return text


NO_EXAMPLES = "no examples found: only the syntax check runs"


def display_header(
    pool_source: str, policy_source: str, tests: dict[str, Any] | None, searched: bool = False
) -> str:
    """The display's first line (`trinity logs show` draws it again from the log); `searched`:
    the run looked for tests (no --no-tests), so finding none is news."""
    if tests:
        checking = (
            f" · checked by {tests['source']} ({tests['count']} test{'s' * (tests['count'] != 1)})"
        )
    else:
        checking = f" · {NO_EXAMPLES}" if searched else ""
    return f"pool: {shown_source(pool_source)} · policy: {policy_source}{checking}"

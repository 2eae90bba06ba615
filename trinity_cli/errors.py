"""One error hierarchy that owns the exit codes.

Each subclass carries the exit code of the README's table and a one-line message that names
the fix. Only the CLI entry point turns one into a process exit.
"""

from __future__ import annotations


class TrinityError(Exception):
    """Base class: `exit_code` is what the CLI exits with."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(TrinityError):
    """Bad command line or unreadable / empty / non-text input."""

    exit_code = 2


class TaskFileError(UsageError):
    """A task set file that cannot be parsed (names file:line)."""


class ConfigError(TrinityError):
    """Pool file, weights, keys or an `--offline` violation."""

    exit_code = 3


class ProviderError(TrinityError):
    """An agent call failed (after retries)."""

    exit_code = 4

    def __init__(self, message: str, *, agent: str = "", kind: str = "server", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.agent = agent
        self.kind = kind  # auth | rate_limit | server | network | bad_request
        self.retry_after = retry_after  # seconds, from the server's Retry-After header
        self.partial = False  # the reply had started streaming (it may have been billed)


class BudgetExceeded(TrinityError):
    """The next call could cost more than what is left of `--budget-usd`."""

    exit_code = 5

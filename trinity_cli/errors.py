"""One error hierarchy that owns the exit codes.

Each subclass carries the exit code of the README's table and a one-line message that names
the fix. Only the CLI entry point turns one into a process exit.
"""

from __future__ import annotations

import os
import re

_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
_secrets: set[str] = set()  # keys read by providers/keys.py, whatever their variable is called


def remember_secret(value: str) -> None:
    if len(value) >= 8:
        _secrets.add(value)


def redact(text: str) -> str:
    """`text` with every known key (and every *_KEY / *_TOKEN / *_SECRET environment value)
    replaced by ***: error messages quote server replies, and servers echo keys."""
    values = _secrets | {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 8}
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, "***")
    return text


class TrinityError(Exception):
    """Base class: `exit_code` is what the CLI exits with. Messages are redacted."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message


class UsageError(TrinityError):
    """Bad command line or unreadable / empty / non-text input."""

    exit_code = 2


class TaskFileError(UsageError):
    """A task set file that cannot be parsed (names file:line)."""


class OutputLost(TrinityError):
    """stdout could not take the output: its reader stopped (`| head`: said by no message, as
    Unix tools do), it was closed, or its disk is full."""

    exit_code = 141  # 128 + SIGPIPE


class ConfigError(TrinityError):
    """Pool file, weights, keys or an `--offline` violation."""

    exit_code = 3


class ProviderError(TrinityError):
    """An agent call failed (after retries)."""

    exit_code = 4

    def __init__(
        self, message: str, *, agent: str = "", kind: str = "server",
        retry_after: float | None = None, status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.agent = agent
        self.kind = kind  # auth | rate_limit | server | network | bad_request
        self.retry_after = retry_after  # seconds, from the server's Retry-After header
        self.status = status  # the HTTP status, when the server answered (None: it may still bill)
        self.partial = False  # the reply had started streaming (it may have been billed)


class BudgetExceeded(TrinityError):
    """The next call could cost more than what is left of `--budget-usd`."""

    exit_code = 5

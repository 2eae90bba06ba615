"""The one interface every pool member implements, and its records.

A provider turns a `Request` (a role's system prompt, the transcript as a user message, and
the plain-text lead a completion-mode model continues) into a `Reply` with usage and cost.
`on_retry` matters only to a provider that retries (`RetryingProvider`): the budget reserves
each attempt through it. The others accept it and never call it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from trinity_cli.core.records import Truncation
from trinity_cli.core.roles import Role
from trinity_cli.errors import ProviderError

TextCallback = Callable[[str], None]
# Called by a retrying provider with the failed attempt's error before it tries again; what it
# raises (BudgetExceeded when the budget refuses the next attempt) ends the call.
RetryHook = Callable[[ProviderError], None]
CHAT_TEMPLATE_TOKENS = 64  # role markers and separators a chat template wraps messages in


@dataclass(frozen=True)
class Request:
    role: Role
    system: str
    user: str
    lead: str = ""  # completion mode: the text the model continues after system + user
    answer_prefix: str = ""  # completion-mode Worker: the signature its completion extends
    task_id: str = ""  # the task, when it comes from a task set
    candidate: str | None = None  # the latest Worker answer (what a Verifier checks)
    sample: int = 0  # sample index: repeated identical calls that want different replies
    attempt: int = (
        0  # Worker answers this agent already gave in this episode (a replay agent's repair round)
    )

    def completion_prompt(self) -> str:
        return f"{self.system}\n\n{self.user}\n\n{self.lead}{self.answer_prefix}"

    def prompt_bytes(self) -> int:
        """An offline upper bound on prompt tokens: every token is at least one UTF-8 byte,
        plus what a chat template adds around the messages."""
        return len(self.completion_prompt().encode("utf-8")) + CHAT_TEMPLATE_TOKENS


@dataclass(frozen=True)
class Reply:
    text: str
    tokens_in: int
    tokens_out: int
    usd: float
    seconds: float
    usd_estimated: bool = False  # usage was not reported by the server and was estimated
    truncated: bool = False  # generation stopped at max_tokens, not at a stop or the model's end
    input_truncated: Truncation | None = None  # what the agent cut of the prompt to fit its context


class Provider(Protocol):
    def complete(
        self, request: Request, on_text: TextCallback | None = None,
        on_retry: RetryHook | None = None,
    ) -> Reply: ...


@dataclass(frozen=True)
class Prices:
    """USD per million tokens; None when the pool file gives none."""

    price_in: float | None = None
    price_out: float | None = None

    def usd(self, tokens_in: int, tokens_out: int) -> float:
        return ((self.price_in or 0.0) * tokens_in + (self.price_out or 0.0) * tokens_out) / 1e6

    @property
    def known(self) -> bool:
        return self.price_in is not None and self.price_out is not None

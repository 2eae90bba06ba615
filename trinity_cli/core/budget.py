"""Spend accounting: reserve the worst case before a call, settle with the real cost after.

Reservations count against the limit until settled, so concurrent episodes (train and eval
run several at once) can never together commit more than the limit.

- Every attempt of a call reserves: a retried attempt may be billed as well as the one before
  it (`CallSpend`). A failed attempt settles at its reservation when the server may have done
  the work (no HTTP error status, or a reply that broke off mid-stream), at 0 when it answered
  with an error status.
- A call that cost more than it reserved (a server that ignored `max_tokens`, a cached reply
  priced at old prices) is counted in `overruns` / `overrun_usd`: the limit then no longer
  bounds the spend, and the CLI says so.
- The first refusal stops the budget: every later reservation is refused too, so a run ends
  where it was first refused instead of going on with whatever smaller calls still fit.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from trinity_cli.errors import BudgetExceeded, ProviderError


@dataclass
class Budget:
    limit_usd: float | None = None  # None: unlimited
    spent_usd: float = 0.0
    reserved_usd: float = 0.0
    overruns: int = 0  # settles above their reservation
    overrun_usd: float = 0.0  # what they cost above it, in total
    refusal: str | None = None  # the first refusal's message: the budget has stopped
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def reserve(self, worst_case_usd: float) -> None:
        """Refuse a call that could take spend past the limit; else hold its worst case."""
        with self._lock:
            if self.refusal is not None:
                raise BudgetExceeded(self.refusal)
            committed = self.spent_usd + self.reserved_usd
            if self.limit_usd is not None and committed + worst_case_usd > self.limit_usd + 1e-12:
                self.refusal = (
                    f"the next call could cost ${worst_case_usd:.4f}; "
                    f"${self.limit_usd - committed:.4f} of --budget-usd {self.limit_usd:g} is left"
                )
                raise BudgetExceeded(self.refusal)
            self.reserved_usd += worst_case_usd

    def settle(self, usd: float, reserved_usd: float) -> None:
        """The call that reserved `reserved_usd` cost `usd`; more than that is an overrun."""
        with self._lock:
            self.reserved_usd = max(0.0, self.reserved_usd - reserved_usd)
            self.spent_usd += usd
            if usd > reserved_usd + 1e-12:
                self.overruns += 1
                self.overrun_usd += usd - reserved_usd

    def take_back(self, in_flight_usd: float, settled_usd: float) -> None:
        """An attempt that runs again (a dead Ray worker's): its call in flight, reserved at
        `in_flight_usd`, counts at that, as it may have been billed; what it settled is taken
        back, since the rerun settles those replies again."""
        with self._lock:
            self.reserved_usd = max(0.0, self.reserved_usd - in_flight_usd)
            self.spent_usd += in_flight_usd - settled_usd

    def overrun_warning(self) -> str | None:
        """One line for stderr when some call cost more than it reserved."""
        if not self.overruns:
            return None
        calls = "call" if self.overruns == 1 else "calls"
        return (
            f"{self.overruns} {calls} cost ${self.overrun_usd:.6f} more than reserved in all "
            "(usage above the worst case of max_tokens and the prompt); "
            f"spent ${self.spent_usd:.6f}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "limit_usd": self.limit_usd, "spent_usd": self.spent_usd, "overruns": self.overruns,
            "overrun_usd": self.overrun_usd,
        }


def may_be_billed(error: ProviderError) -> bool:
    """A failed attempt may have been billed unless the server answered with an error status."""
    return error.partial or error.status is None or error.status < 400


@dataclass
class CallSpend:
    """One agent call's share of the budget: each attempt (the first and every retry) reserves
    the call's worst case, and each is settled before the next reserves."""

    budget: Budget
    worst_case_usd: float
    held_usd: float = 0.0  # the reservation of the attempt in flight
    attempts: int = 0

    def reserve(self) -> None:
        self.budget.reserve(self.worst_case_usd)
        self.held_usd = self.worst_case_usd
        self.attempts += 1

    def settle(self, usd: float) -> None:
        self.budget.settle(usd, self.held_usd)
        self.held_usd = 0.0

    def settle_failed(self, error: ProviderError) -> None:
        self.settle(self.held_usd if may_be_billed(error) else 0.0)

    def retry(self, failed: ProviderError) -> None:
        """The retry wrapper's hook before another attempt (`on_retry`): settle the failed one,
        reserve the next. A refusal raises BudgetExceeded, which ends the call."""
        self.settle_failed(failed)
        self.reserve()

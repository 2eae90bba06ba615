"""Spend accounting: reserve the worst case before a call, settle with the real cost after.

Reservations count against the limit until settled, so concurrent episodes (train and eval
run several at once) can never together commit more than the limit.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from trinity_cli.errors import BudgetExceeded


@dataclass
class Budget:
    limit_usd: float | None = None  # None: unlimited
    spent_usd: float = 0.0
    reserved_usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def reserve(self, worst_case_usd: float) -> None:
        """Refuse a call that could take spend past the limit; else hold its worst case."""
        with self._lock:
            committed = self.spent_usd + self.reserved_usd
            if self.limit_usd is not None and committed + worst_case_usd > self.limit_usd + 1e-12:
                raise BudgetExceeded(
                    f"the next call could cost ${worst_case_usd:.4f}; "
                    f"${self.limit_usd - committed:.4f} of --budget-usd {self.limit_usd:g} is left"
                )
            self.reserved_usd += worst_case_usd

    def settle(self, usd: float, reserved_usd: float) -> None:
        """The call that reserved `reserved_usd` cost `usd`."""
        with self._lock:
            self.reserved_usd = max(0.0, self.reserved_usd - reserved_usd)
            self.spent_usd += usd

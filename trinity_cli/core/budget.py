"""Spend accounting: reserve the worst case before a call, settle with the real cost after."""

from __future__ import annotations

from dataclasses import dataclass

from trinity_cli.errors import BudgetExceeded


@dataclass
class Budget:
    limit_usd: float | None = None  # None: unlimited
    spent_usd: float = 0.0

    def reserve(self, worst_case_usd: float) -> None:
        """Refuse a call that could take spend past the limit."""
        if self.limit_usd is not None and self.spent_usd + worst_case_usd > self.limit_usd + 1e-12:
            raise BudgetExceeded(
                f"the next call could cost ${worst_case_usd:.4f}; "
                f"${self.limit_usd - self.spent_usd:.4f} of --budget-usd {self.limit_usd:g} is left"
            )

    def settle(self, usd: float) -> None:
        self.spent_usd += usd

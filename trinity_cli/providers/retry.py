"""Retries around any provider, without changing its interface.

- Rate-limit, server and network errors are retried up to `retries` more times, with
  exponential backoff and full jitter (base 0.5 s, doubling, at most 30 s), or exactly the
  server's `Retry-After` when it sends one (429, 503).
- Auth and bad-request errors (400, 401, 403, ...) are never retried: they will not heal.
- All attempts of one call fit in `deadline_s`; a wait that would pass it ends the call now.
- A reply that broke off after it had started streaming is not retried: the partial reply may
  already be billed, so the error is marked `partial` and the budget settles it at the
  reservation (see `core.budget`).
- Before each further attempt, after the deadline check and before the wait, the caller's
  `on_retry` hook gets the failed attempt's error: the budget settles that attempt and reserves
  the next, as each attempt may be billed. What the hook raises (BudgetExceeded) ends the call.
- Each attempt runs under a per-agent concurrency limit (`max_concurrency`), so parallel work
  never has more calls in flight to one agent than its pool entry allows.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from trinity_cli.core.provider import Provider, Reply, Request, RetryHook, TextCallback
from trinity_cli.errors import ProviderError
from trinity_cli.pool.spec import AgentSpec

RETRYABLE = ("rate_limit", "server", "network")
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0


class RetryingProvider:
    def __init__(
        self, inner: Provider, spec: AgentSpec, *, sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.inner = inner
        self.spec = spec
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.slots = threading.BoundedSemaphore(spec.max_concurrency)
        self.attempts = 0  # every attempt made, for reports and tests

    def complete(
        self, request: Request, on_text: TextCallback | None = None,
        on_retry: RetryHook | None = None,
    ) -> Reply:
        started = time.monotonic()
        streamed: list[str] = []  # text of the current attempt

        def relay(text: str) -> None:
            streamed.append(text)
            on_text(text)  # type: ignore[misc]

        for attempt in range(self.spec.retries + 1):
            streamed.clear()
            try:
                with self.slots:
                    self.attempts += 1
                    return self.inner.complete(request, relay if on_text else None)
            except ProviderError as exc:
                exc.partial = bool(streamed)
                if exc.kind not in RETRYABLE or exc.partial or attempt == self.spec.retries:
                    raise self._final(exc, attempt + 1) from None
                wait = exc.retry_after if exc.retry_after is not None else self._backoff(attempt)
                left = self.spec.deadline_s - (time.monotonic() - started)
                if wait >= left:
                    raise self._final(
                        exc, attempt + 1,
                        f"the next try (in {wait:.1f} s) would pass the "
                        f"{self.spec.deadline_s:g} s deadline",
                    ) from None
                if on_retry is not None:
                    on_retry(exc)
                self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _backoff(self, attempt: int) -> float:
        return self.rng.uniform(0.0, min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt))

    def _final(self, exc: ProviderError, tries: int, why: str = "") -> ProviderError:
        note = (
            f" (gave up after {tries} tries{': ' + why if why else ''})" if tries > 1 or why else ""
        )
        if exc.partial:
            note = " (the reply broke off mid-stream; not retried, as it may have been billed)"
        final = ProviderError(
            exc.message + note, agent=exc.agent, kind=exc.kind, retry_after=exc.retry_after,
            status=exc.status,
        )
        final.partial = exc.partial
        return final

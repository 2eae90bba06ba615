"""A provider added the way a plugin adds one (tests/test_provider_registry.py): this module
and one registry line. It echoes the request's last line back, billed at the agent's prices."""

from __future__ import annotations

from trinity_cli.core.provider import Prices, Reply, Request
from trinity_cli.pool.spec import AgentSpec


class EchoProvider:
    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.prices = Prices(spec.price_in, spec.price_out)

    def complete(self, request: Request, on_text=None, on_retry=None) -> Reply:
        text = request.user.splitlines()[-1]
        tokens_in, tokens_out = len(request.user.split()), len(text.split())
        return Reply(text, tokens_in, tokens_out, self.prices.usd(tokens_in, tokens_out), 0.0)

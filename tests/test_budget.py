"""Hard budgets with priced agents: reserve the worst case before each call, settle after."""

from __future__ import annotations

import json

import pytest
from scripted import CountingCoordinator, ScriptedPolicy, ScriptedProvider
from test_cli import trinity
from test_provider_gemini import chunk
from test_provider_gemini import spec as gemini_spec
from wire.server import Scripted, WireServer, openai_stream

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import Agent, run_episode
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Problem
from trinity_cli.errors import ProviderError
from trinity_cli.providers.base import Prices, Request
from trinity_cli.providers.gemini import GeminiProvider

PROBLEM_MD = "# Add\n\nWrite `add(a, b)`.\n\n```python\ndef add(a, b):\n```\n"
PRICES = 'price_in = 2.0\nprice_out = 8.0\nmax_tokens = 100\n'  # $ per million tokens


@pytest.fixture()
def server():
    wire = WireServer()
    yield wire
    wire.close()


def pool_file(workdir, server, prices: str = PRICES):
    (workdir / "pool.toml").write_text(
        f'[[agents]]\nname="paid"\nprovider="openai"\nmodel="m"\nbase_url="{server.url}/v1"\n{prices}')
    (workdir / "p.md").write_text(PROBLEM_MD)


def test_reasoning_tokens_bill_as_output():
    wire = WireServer()
    try:
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 100, "totalTokenCount": 115}
        wire.responses.append(Scripted(200, json.dumps(chunk("ok", usage)).encode()))
        reply = GeminiProvider(gemini_spec(wire.url)).complete(Request(Role.WORKER, "s", "u"))
    finally:
        wire.close()
    assert reply.tokens_out == 105 and reply.usd == pytest.approx((10 * 1.0 + 105 * 2.0) / 1e6)


def test_the_cli_stops_before_the_call_that_could_pass_the_budget(workdir, server):
    pool_file(workdir, server)
    replies = ["plan", "```python\ndef add(a, b):\n    return a + b\n```", "<verdict>REJECT</verdict>", "plan", "plan"]
    server.responses += [openai_stream(text, tokens_in=300) for text in replies]
    # each call costs $0.0006; its worst case, (prompt bytes + 64) × $2/M + 100 × $8/M, grows
    # with the transcript from about $0.0014: the third call no longer fits
    result = trinity("solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--budget-usd", "0.0025", "--json", "-q")
    assert result.returncode == 5, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "budget" and "--budget-usd" in report["error"]
    assert 1 <= len(report["turns"]) < 5 and report["usd"] <= 0.0025
    assert len(server.requests) == len(report["turns"])  # the refused call was never sent


def test_an_agent_without_prices_under_a_budget_is_exit_3(workdir, server):
    pool_file(workdir, server, prices="")
    result = trinity("solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--budget-usd", "1")
    assert result.returncode == 3 and "no price_in/price_out" in result.stderr and "Traceback" not in result.stderr
    assert server.requests == []


def test_a_reply_cut_mid_stream_settles_at_the_reservation():
    cut = ProviderError("agent 'a0': network error: cut", agent="a0", kind="network")
    cut.partial = True
    pool = [Agent("a0", ScriptedProvider([cut]), 100, Prices(1.0, 1.0))]
    budget = Budget(1.0)
    result = run_episode(Problem("Write add.", "def add(a, b):\n"), pool, CountingCoordinator(),
                         ScriptedPolicy(((0, Role.WORKER),), n_agents=1), budget=budget)
    assert result.verdict == "provider_error"
    reservation = pool[0].worst_case_usd(pool[0].provider.requests[0])
    assert budget.spent_usd == pytest.approx(reservation) and reservation > 100 / 1e6

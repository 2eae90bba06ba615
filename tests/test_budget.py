"""Hard budgets with priced agents: reserve the worst case before each attempt of a call, settle
after; count what cost more than it reserved; eval stops at the first refusal."""

from __future__ import annotations

import json

import pytest
from support.cli import trinity
from support.scripted import CountingCoordinator, ScriptedPolicy, ScriptedProvider
from support.tasks import write_tasks
from support.wire.server import Scripted, WireServer, gemini_chunk, openai_stream

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import Agent, run_episode
from trinity_cli.core.provider import Prices, Request
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Problem
from trinity_cli.errors import BudgetExceeded, ProviderError
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.gemini import GeminiProvider
from trinity_cli.providers.openai_compat import OpenAIProvider
from trinity_cli.providers.retry import RetryingProvider

PROBLEM_MD = "# Add\n\nWrite `add(a, b)`.\n\n```python\ndef add(a, b):\n```\n"
PRICES = "price_in = 2.0\nprice_out = 8.0\nmax_tokens = 100\n"  # $ per million tokens


def pool_file(workdir, server, prices: str = PRICES):
    (workdir / "pool.toml").write_text(
        f'[[agents]]\nname="paid"\nprovider="openai"\nmodel="m"\nbase_url="{server.url}/v1"\n{prices}'
    )
    (workdir / "p.md").write_text(PROBLEM_MD)


def test_reasoning_tokens_bill_as_output():
    wire = WireServer()
    try:
        usage = {
            "promptTokenCount": 10, "candidatesTokenCount": 5, "thoughtsTokenCount": 100,
            "totalTokenCount": 115,
        }
        wire.responses.append(Scripted(200, json.dumps(gemini_chunk("ok", usage)).encode()))
        reply = GeminiProvider(
            AgentSpec(
                name="gem", provider="gemini", model="gemini-test", base_url=wire.url, price_in=1.0,
                price_out=2.0, max_tokens=50,
            )
        ).complete(Request(Role.WORKER, "s", "u"))
    finally:
        wire.close()
    assert reply.tokens_out == 105 and reply.usd == pytest.approx((10 * 1.0 + 105 * 2.0) / 1e6)


def test_the_cli_stops_before_the_call_that_could_pass_the_budget(workdir, server):
    pool_file(workdir, server)
    replies = [
        "plan", "```python\ndef add(a, b):\n    return a + b\n```", "<verdict>REJECT</verdict>",
        "plan", "plan",
    ]
    server.responses += [openai_stream(text, tokens_in=300) for text in replies]
    # each call costs $0.0006; its worst case, (prompt bytes + 64) × $2/M + 100 × $8/M, grows
    # with the transcript from about $0.0014: the third call no longer fits
    result = trinity(
        "solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--budget-usd", "0.0025",
        "--json", "-q",
    )
    assert result.returncode == 5, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "budget" and "--budget-usd" in report["error"]
    assert 1 <= len(report["turns"]) < 5 and report["usd"] <= 0.0025
    assert len(server.requests) == len(report["turns"])  # the refused call was never sent


def test_an_agent_without_prices_under_a_budget_is_exit_3(workdir, server):
    pool_file(workdir, server, prices="")
    result = trinity(
        "solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--budget-usd", "1"
    )
    assert (
        result.returncode == 3
        and "no price_in/price_out" in result.stderr
        and "Traceback" not in result.stderr
    )
    assert server.requests == []


def test_a_reply_cut_mid_stream_settles_at_the_reservation():
    cut = ProviderError("agent 'a0': network error: cut", agent="a0", kind="network")
    cut.partial = True
    pool = [Agent("a0", ScriptedProvider([cut]), 100, Prices(1.0, 1.0))]
    budget = Budget(1.0)
    result = run_episode(
        Problem("Write add.", "def add(a, b):\n"), pool, CountingCoordinator(),
        ScriptedPolicy(((0, Role.WORKER),), n_agents=1), budget=budget,
    )
    assert result.verdict == "provider_error"
    reservation = pool[0].worst_case_usd(pool[0].provider.requests[0])
    assert budget.spent_usd == pytest.approx(reservation) and reservation > 100 / 1e6


def test_a_settle_above_its_reservation_is_counted_and_the_first_refusal_stops_the_budget():
    budget = Budget(1.0)
    budget.reserve(0.1)
    budget.settle(0.3, 0.1)  # a server that ignored max_tokens
    budget.reserve(0.1)
    budget.settle(0.05, 0.1)
    assert budget.spent_usd == pytest.approx(0.35) and budget.reserved_usd == 0
    assert budget.overruns == 1 and budget.overrun_usd == pytest.approx(0.2)
    assert "1 call cost $0.200000 more than reserved" in (budget.overrun_warning() or "")
    with pytest.raises(BudgetExceeded):
        budget.reserve(0.9)
    with pytest.raises(BudgetExceeded):  # what would still fit is refused too: the run has stopped
        budget.reserve(0.01)
    assert budget.as_json() == {
        "limit_usd": 1.0, "spent_usd": pytest.approx(0.35), "overruns": 1,
        "overrun_usd": pytest.approx(0.2),
    }


class Ledger(Budget):
    """A budget that records every reservation and the most it ever had committed."""

    def __init__(self, limit_usd: float) -> None:
        super().__init__(limit_usd)
        self.reservations: list[float] = []
        self.peak_usd = 0.0

    def reserve(self, worst_case_usd: float) -> None:
        super().reserve(worst_case_usd)
        self.reservations.append(worst_case_usd)
        self.peak_usd = max(self.peak_usd, self.spent_usd + self.reserved_usd)


def retrying_agent(server, **kw) -> Agent:
    spec = AgentSpec(
        name="paid", provider="openai", model="m", base_url=f"{server.url}/v1", price_in=2.0,
        price_out=8.0, max_tokens=100, **{"retries": 3, "timeout_s": 5.0, **kw},
    )
    retrying = RetryingProvider(OpenAIProvider(spec), spec, sleep=lambda s: None)
    return Agent(spec.name, retrying, spec.max_tokens, Prices(spec.price_in, spec.price_out))


def one_worker_turn(agent: Agent, budget: Budget):
    return run_episode(
        Problem("Write add.", "def add(a, b):\n"), [agent], CountingCoordinator(),
        ScriptedPolicy(((0, Role.WORKER),), n_agents=1), budget=budget, max_turns=1,
    )


def http_error(status: int, **headers: str) -> Scripted:
    body = json.dumps({"error": {"message": f"status {status}"}}).encode()
    return Scripted(status, body, headers=headers)


def reservation_of(agent: Agent) -> float:
    """What one attempt of `one_worker_turn` reserves: the same turn with an agent of the same
    prices and max_tokens."""
    probe = Ledger(limit_usd=1.0)
    one_worker_turn(Agent("probe", ScriptedProvider(["ok"]), agent.max_tokens, agent.prices), probe)
    return probe.reservations[0]


def test_every_retried_attempt_reserves_and_errors_the_server_answered_cost_nothing(server):
    server.responses += [
        http_error(500), http_error(429, **{"retry-after": "0"}),
        openai_stream("ok", tokens_in=300),
    ]
    agent = retrying_agent(server)
    reservation = reservation_of(agent)
    budget = Ledger(limit_usd=1.5 * reservation)  # refused at once if a failed attempt were billed
    result = one_worker_turn(agent, budget)
    assert result.verdict == "turn_limit" and len(server.requests) == 3
    assert budget.reservations == [reservation] * 3  # one per attempt
    assert budget.spent_usd == pytest.approx(result.usd) and budget.reserved_usd == pytest.approx(0)
    assert budget.peak_usd <= budget.limit_usd and budget.overruns == 0


def test_attempts_that_may_be_billed_count_and_a_retry_that_no_longer_fits_is_refused(server):
    hang = Scripted(200, openai_stream("ok").body, "text/event-stream", delay_s=2.0)
    server.responses += [hang, hang, openai_stream("ok")]
    agent = retrying_agent(server, timeout_s=0.5)  # the timeout is a network error: no HTTP status
    reservation = reservation_of(agent)
    budget = Ledger(limit_usd=2.5 * reservation)  # room for two attempts billed in full, not three
    result = one_worker_turn(agent, budget)
    assert result.verdict == "budget" and "--budget-usd" in (result.error or "")
    assert len(server.requests) == 2 and budget.reservations == [reservation, reservation]
    assert budget.spent_usd == pytest.approx(2 * reservation)
    assert budget.reserved_usd == pytest.approx(0)
    assert budget.spent_usd <= budget.peak_usd <= 2.5 * reservation  # never committed past it


def test_the_cli_warns_of_a_call_that_cost_more_than_it_reserved(workdir, server):
    pool_file(workdir, server)
    # $2 of prompt: far above the call's worst case
    server.responses.append(openai_stream("plan", tokens_in=1_000_000))
    result = trinity(
        "solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--budget-usd", "5",
        "--max-turns", "1", "--json",
    )
    assert result.returncode == 6, result.stderr
    budget = json.loads(result.stdout)["budget"]
    assert budget["overruns"] == 1 and budget["overrun_usd"] > 1.99 and budget["limit_usd"] == 5
    assert budget["spent_usd"] == pytest.approx(2.0, abs=1e-4)
    assert "warning: 1 call cost $" in result.stderr and "more than reserved" in result.stderr


def test_eval_under_a_budget_stops_with_the_rows_finished_so_far(workdir):
    from support.cli import SIM_POOL

    from trinity_cli.tasks.taskset import load_humaneval

    write_tasks(workdir / "tasks.jsonl", load_humaneval()[:3], "tags")
    flags = [
        "--tasks", "tasks.jsonl", "--pool", str(SIM_POOL), "--weights", "none", "--split", "all",
        "--max-turns", "1", "--no-cache",
    ]
    whole = trinity("eval", *flags, "--json")
    assert whole.returncode == 0, whole.stderr
    full = json.loads(whole.stdout)
    # 3 agents: 3 loop: rows and cascade included
    assert (
        full["partial"] is False and full["error"] is None and len(full["rows"]) == 13
    )
    spent = full["budget"]["spent_usd"]
    limit = f"{spent / 2:.6f}"  # the oracle's plans and every row draw on it: it stops halfway
    result = trinity("eval", *flags, "--json", "--budget-usd", limit)
    assert result.returncode == 5, result.stderr
    report = json.loads(result.stdout)
    assert report["partial"] is True and "--budget-usd" in report["error"]
    assert 1 <= len(report["rows"]) < 13 and report["rows"] == full["rows"][: len(report["rows"])]
    assert report["budget"]["spent_usd"] <= float(limit) and report["split"] == "all"
    assert "eval stopped" in result.stderr and "Traceback" not in result.stderr
    table = trinity("eval", *flags, "--budget-usd", limit)
    assert table.returncode == 5 and "PARTIAL" in table.stderr and "oracle" not in table.stderr


def test_eval_under_a_budget_needs_prices(workdir, server):
    pool_file(workdir, server, prices="")
    result = trinity("eval", "--pool", "pool.toml", "--weights", "none", "--budget-usd", "1")
    assert result.returncode == 3 and "no price_in/price_out" in result.stderr
    assert server.requests == []

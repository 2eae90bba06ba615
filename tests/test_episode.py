"""The turn loop's rules, with scripted agents (no model, no network)."""

from __future__ import annotations

import pytest
from support.scripted import CountingCoordinator, ScriptedPolicy, ScriptedProvider

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import Agent, run_episode
from trinity_cli.core.events import EpisodeFinished, TextDelta, TurnFinished, TurnStarted
from trinity_cli.core.head import PipelinePolicy
from trinity_cli.core.provider import Prices
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Problem
from trinity_cli.errors import ProviderError

T, W, V = Role.THINKER, Role.WORKER, Role.VERIFIER
PROBLEM = Problem("Write add(a, b).", "def add(a, b):\n")
CODE = "```python\ndef add(a, b):\n    return a + b\n```"


def agents(*scripts, prices=Prices(0.0, 0.0), price_per_call=0.0):
    return [
        Agent(f"a{i}", ScriptedProvider(list(s), price_per_call), 100, prices)
        for i, s in enumerate(scripts)
    ]


def test_accept_ends_the_episode_with_the_latest_worker_answer():
    pool = agents(["plan", CODE, "ok <verdict>ACCEPT</verdict>"], [])
    coordinator = CountingCoordinator()
    events = []
    result = run_episode(
        PROBLEM, pool, coordinator, ScriptedPolicy(((0, T), (0, W), (0, V))), on_event=events.append
    )
    assert result.verdict == "accepted"
    assert result.answer == "def add(a, b):\n    return a + b\n"
    assert [r.decision.role for r in result.turns] == [T, W, V]
    assert [r.verdict for r in result.turns] == [None, None, "accept"]
    assert len(coordinator.seen) == 3
    # each decision sees the turns so far
    assert [len(t.turns) for t in coordinator.seen] == [
        0, 1, 2,
    ]
    kinds = [type(e) for e in events]
    assert (
        kinds.count(TurnStarted) == 3
        and kinds.count(TurnFinished) == 3
        and kinds[-1] is EpisodeFinished
    )
    assert TextDelta in kinds


def test_turn_limit_keeps_the_latest_answer():
    pool = agents([CODE, "<verdict>REJECT</verdict>", CODE.replace("a + b", "b + a")], [])
    result = run_episode(
        PROBLEM, pool, CountingCoordinator(), ScriptedPolicy(((0, W), (0, V), (0, W))), max_turns=3
    )
    assert result.verdict == "turn_limit"
    assert "b + a" in result.answer
    assert len(result.turns) == 3


def test_verifier_without_an_answer_ends_with_no_answer_and_no_call():
    provider_pool = agents(["plan"], [])
    result = run_episode(
        PROBLEM, provider_pool, CountingCoordinator(), ScriptedPolicy(((0, T), (1, V)))
    )
    assert result.verdict == "no_answer"
    assert result.answer is None
    assert len(result.turns) == 1
    assert provider_pool[1].provider.requests == []


def test_thinker_tag_overrides_the_heads_role_for_the_next_turn_only():
    pool = agents(["try this <next_role>worker</next_role>", CODE, "<verdict>REJECT</verdict>"], [])
    # The head would pick verifier at turn 2 (no answer yet: no_answer) — the Thinker overrides it.
    policy = ScriptedPolicy(((0, T), (0, V), (0, V)))
    result = run_episode(PROBLEM, pool, CountingCoordinator(), policy, max_turns=3)
    sources = [(r.decision.role, r.decision.role_source) for r in result.turns]
    assert sources == [(T, "head"), (W, "thinker"), (V, "head")]
    # role forced: agent prob only
    assert result.turns[1].decision.probability == pytest.approx(
        0.9
    )


def test_malformed_verdict_is_a_rejection_not_a_crash():
    pool = agents([CODE, "looks fine to me", CODE], [])
    result = run_episode(
        PROBLEM, pool, CountingCoordinator(), ScriptedPolicy(((0, W), (0, V), (0, W))), max_turns=3
    )
    assert result.turns[1].verdict == "malformed"
    assert result.verdict == "turn_limit"


def test_provider_error_ends_the_episode_with_its_message_and_partial_answer():
    pool = agents(
        [CODE],
        [ProviderError("agent 'a1' (openai): network error: refused", agent="a1", kind="network")],
    )
    result = run_episode(PROBLEM, pool, CountingCoordinator(), ScriptedPolicy(((0, W), (1, V))))
    assert result.verdict == "provider_error"
    assert "network error" in result.error
    assert result.answer is not None


def test_ctrl_c_keeps_the_turns_done_so_far():
    pool = agents([CODE, KeyboardInterrupt()], [])
    result = run_episode(PROBLEM, pool, CountingCoordinator(), ScriptedPolicy(((0, W), (0, V))))
    assert result.verdict == "interrupted"
    assert len(result.turns) == 1 and result.answer is not None


def test_budget_refuses_a_call_that_could_exceed_it():
    prices = Prices(1.0, 1.0)  # $1 per million tokens
    pool = agents([CODE, CODE, CODE], prices=prices, price_per_call=0.0004)
    budget = Budget(0.0006)
    result = run_episode(
        PROBLEM, pool, CountingCoordinator(), ScriptedPolicy(((0, W),) * 3), budget=budget,
        max_turns=3,
    )
    assert result.verdict == "budget"
    assert budget.spent_usd <= 0.0006
    assert 1 <= len(result.turns) < 3


def test_pipeline_fallback_needs_no_coordinator_and_moves_to_the_next_agent_on_reject():
    pool = agents(["plan", CODE, "<verdict>REJECT</verdict>"], ["plan 2", CODE])
    result = run_episode(PROBLEM, pool, None, PipelinePolicy(2), max_turns=5)
    assert [(r.decision.agent, r.decision.role) for r in result.turns] == [
        ("a0", T), ("a0", W), ("a0", V), ("a1", T), ("a1", W),
    ]


def test_sampling_is_reproducible_with_a_seed():
    from trinity_cli.core.head import RandomPolicy

    def run(seed):
        pool = agents([CODE] * 5, [CODE] * 5)
        result = run_episode(PROBLEM, pool, None, RandomPolicy(2), sample_seed=seed)
        return [(r.decision.agent, r.decision.role) for r in result.turns], result.verdict

    assert run(7) == run(7)
    assert len({str(run(s)) for s in range(8)}) > 1


def test_worker_requests_carry_the_signature_for_completion_models():
    pool = agents([CODE], [])
    run_episode(PROBLEM, pool, CountingCoordinator(), ScriptedPolicy(((0, W),)), max_turns=1)
    request = pool[0].provider.requests[0]
    assert request.role is W and request.answer_prefix == "def add(a, b):\n"
    assert "Write add(a, b)." in request.user

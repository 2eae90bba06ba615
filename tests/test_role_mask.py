"""Roles an agent may play (a pool's `roles`): the mask holds in every policy and baseline.

p(agent, role) ∝ softmax_agent · softmax_role · mask; greedy is the joint argmax, sampling draws
from the masked joint, and the reported probabilities are its marginals.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.scripted import CountingCoordinator, ScriptedPolicy, ScriptedProvider

from trinity_cli.core.episode import Agent, role_mask, run_episode
from trinity_cli.core.head import PipelinePolicy, RandomPolicy, TurnProbs, decide
from trinity_cli.core.provider import Prices
from trinity_cli.core.roles import ROLE_ORDER, Role
from trinity_cli.core.transcript import Problem
from trinity_cli.errors import ConfigError
from trinity_cli.pool.spec import parse_pool
from trinity_cli.train.fixed import cascade_plan, oracle_plans, playing

T, W, V = Role.THINKER, Role.WORKER, Role.VERIFIER


@st.composite
def masks(draw):
    """(L, 3) masks where every agent plays some role and some agent works."""
    n = draw(st.integers(1, 5))
    rows = draw(
        st.lists(
            st.lists(st.booleans(), min_size=3, max_size=3).filter(any), min_size=n, max_size=n
        )
    )
    mask = np.array(rows)
    mask[draw(st.integers(0, n - 1)), ROLE_ORDER.index(W)] = True
    return mask


def probabilities(draw, n):
    raw = np.array(draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))) + 1e-9
    return raw / raw.sum()


@st.composite
def masked_choices(draw):
    """A mask and a policy's choice over its agents and the three roles."""
    mask = draw(masks())
    return mask, TurnProbs(probabilities(draw, mask.shape[0]), probabilities(draw, 3))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_choice_is_an_allowed_pair(data):
    mask, choice = data.draw(masked_choices())
    draws = data.draw(st.none() | st.tuples(st.floats(0, 0.999), st.floats(0, 0.999)))
    forced = data.draw(st.none() | st.integers(0, 2))
    chosen = decide(choice, mask, draws, forced)
    assert mask[chosen.agent, chosen.role]
    assert chosen.agent_probs.sum() == pytest.approx(
        1
    ) and chosen.role_probs.sum() == pytest.approx(1)
    assert all(p == 0 for p, allowed in zip(chosen.agent_probs, mask.any(axis=1)) if not allowed)
    if forced is not None and mask[:, forced].any():
        assert chosen.role == forced and chosen.forced


@settings(max_examples=100, deadline=None)
@given(masked_choices())
def test_greedy_is_the_joint_argmax_and_sampling_follows_the_joint(mask_and_choice):
    mask, choice = mask_and_choice
    joint = np.outer(choice.agent_probs, choice.role_probs) * mask
    joint /= joint.sum()
    greedy = decide(choice, mask)
    assert joint[greedy.agent, greedy.role] == pytest.approx(joint.max())
    assert np.allclose(greedy.agent_probs, joint.sum(axis=1)) and np.allclose(
        greedy.role_probs, joint.sum(axis=0)
    )
    rng = np.random.default_rng(0)
    counts = np.zeros_like(joint)
    for _ in range(4000):
        pick = decide(choice, mask, (rng.random(), rng.random()))
        counts[pick.agent, pick.role] += 1
    assert np.abs(counts / counts.sum() - joint).max() < 0.04


def test_without_a_mask_the_choice_is_the_old_independent_one():
    choice = TurnProbs(np.array([0.2, 0.5, 0.3]), np.array([0.1, 0.6, 0.3]))
    for draws in (None, (0.1, 0.9), (0.75, 0.05)):
        chosen = decide(choice, None, draws)
        expect_agent = (
            1
            if draws is None
            else int(np.searchsorted(np.cumsum(choice.agent_probs), draws[0], "right"))
        )
        expect_role = (
            1
            if draws is None
            else int(np.searchsorted(np.cumsum(choice.role_probs), draws[1], "right"))
        )
        assert (chosen.agent, chosen.role) == (expect_agent, expect_role)


@settings(max_examples=100, deadline=None)
@given(masks(), st.integers(1, 30))
def test_the_fixed_policies_and_baselines_keep_the_mask(mask, turn):
    n = mask.shape[0]
    pipeline = PipelinePolicy(n, mask).choose(None, turn)
    assert mask[int(np.argmax(pipeline.agent_probs)), int(np.argmax(pipeline.role_probs))]
    random = decide(RandomPolicy(n).choose(None, turn), mask, (0.5, 0.5))
    assert mask[random.agent, random.role]
    agents = [
        Agent(
            f"a{i}", None, 10, Prices(float(i), float(i)),
            roles=frozenset(r for r, ok in zip(ROLE_ORDER, mask[i]) if ok),
        )
        for i in range(n)
    ]
    plan = cascade_plan(agents, 2 * n)
    assert plan and all(mask[a, ROLE_ORDER.index(r)] for a, r in plan) and len(plan) <= 2 * n
    assert all(mask[a, ROLE_ORDER.index(r)] for steps in oracle_plans(agents) for a, r in steps)
    workers = [a for a, r in plan if r is W]
    everyone = sorted(playing(agents, W))  # cheapest first (price grows with the index here)
    # unverified, a second answer is unseen
    assert workers == (
        everyone if playing(agents, V) else everyone[:1]
    )


def test_an_episode_never_gives_an_agent_a_role_it_may_not_play():
    """The policy wants agent 0 to think and verify; agent 0 may only work, agent 1 only verify."""
    code = "```python\ndef add(a, b):\n    return a + b\n```"
    worker, checker = (
        ScriptedProvider([code, code, code]), ScriptedProvider(["<verdict>ACCEPT</verdict>"]),
    )
    agents = [
        Agent("w", worker, 100, roles=frozenset({W})),
        Agent("v", checker, 100, roles=frozenset({V})),
    ]
    policy = ScriptedPolicy(((0, T), (0, V), (0, V)))
    result = run_episode(
        Problem("Write add.", "def add(a, b):\n"), agents, CountingCoordinator(), policy,
        max_turns=3,
    )
    assert [(r.decision.agent, r.decision.role) for r in result.turns] == [("w", W), ("v", V)]
    assert result.verdict == "accepted"
    # the marginal, with agent 0's verifying masked out
    assert (
        result.turns[1].decision.agent_probs[0] < 0.5
    )


def test_the_pool_key_and_its_errors():
    pool = parse_pool(
        '[[agents]]\nname="a"\nprovider="sim"\nmodel="m"\nroles=["verifier", "worker"]\n', "p.toml"
    )
    assert pool.agents[0].roles == ("worker", "verifier")
    assert role_mask([pool.agents[0].roles]).tolist() == [[False, True, True]]
    for bad in ("roles=[]", 'roles=["boss"]', 'roles="worker"', 'roles=["worker", "worker"]'):
        with pytest.raises(ConfigError, match=r"p.toml: agents\[a\].roles must be"):
            parse_pool(f'[[agents]]\nname="a"\nprovider="sim"\nmodel="m"\n{bad}\n', "p.toml")
    with pytest.raises(ConfigError, match="no agent may play worker"):
        parse_pool(
            '[[agents]]\nname="a"\nprovider="sim"\nmodel="m"\nroles=["verifier"]\n', "p.toml"
        )

"""The starting head: fitted to a plan, it plays the plan on states it never saw (numpy only)."""

from __future__ import annotations

import numpy as np

from trinity_cli.core.head import N_ROLES
from trinity_cli.train.imitate import fit_steps, input_space

N_AGENTS, D, TURNS = 3, 16, 4
# turn → (agent, role): Worker, Verifier, another Worker, Verifier
PLAN = {
    1: (0, 1), 2: (2, 2), 3: (1, 1), 4: (2, 2),
}


OFF_CENTRE = 3.0 * np.random.default_rng(9).normal(size=D)  # as real hidden states are


def states(rng, n):
    return rng.normal(size=(n, D)) + OFF_CENTRE


def choice(head, state, turn):
    picked = head.choose(state, turn)
    return int(np.argmax(picked.agent_probs)), int(np.argmax(picked.role_probs))


def test_a_plan_the_same_on_every_task_is_played_by_the_turn_weights_on_any_state():
    rng = np.random.default_rng(0)
    seen, turns = states(rng, 120), [1 + i % TURNS for i in range(120)]
    space = input_space(seen, N_AGENTS + N_ROLES, 8, turns, turn_features=TURNS)
    head = fit_steps(space, seen, [PLAN[t] for t in turns], turns)
    assert not head.weights[:, : head.n_features].any()  # the state's part is zero
    unseen = 10.0 * rng.normal(size=(200, D))  # far from every state it was fitted on
    assert all(choice(head, s, t) == PLAN[t] for s in unseen for t in PLAN)
    # a turn past the indicators counts as the last
    assert (
        choice(head, unseen[0], 9) == PLAN[TURNS]
    )


def test_what_depends_on_the_state_is_left_to_the_state_weights():
    rng = np.random.default_rng(1)
    seen = states(rng, 300)
    turns = [1] * len(seen)
    direction = seen[:, 0] > np.median(seen[:, 0])  # agent 1 on half the tasks, agent 0 on the rest
    head = fit_steps(
        input_space(seen, N_AGENTS + N_ROLES, None, turn_features=TURNS), seen,
        [(int(d), 1) for d in direction], turns,
    )
    fresh = states(np.random.default_rng(2), 300)
    wanted = fresh[:, 0] > np.median(seen[:, 0])
    assert np.mean([choice(head, s, 1) == (int(w), 1) for s, w in zip(fresh, wanted)]) > 0.9
    assert head.weights[:, : head.n_features].any()


def test_a_head_without_turn_indicators_needs_no_turns():
    rng = np.random.default_rng(3)
    seen = states(rng, 60)
    head = fit_steps(input_space(seen, N_AGENTS + N_ROLES, 8), seen, [PLAN[1]] * len(seen))
    assert head.turn_features == 0 and choice(head, seen[0], 1) == PLAN[1]

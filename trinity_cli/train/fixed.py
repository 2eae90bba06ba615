"""Fixed plans: what a user could write by hand, the baselines a learned head must beat, and
where the head's search starts.

- The **family** (`family`): every sequence of Worker answers, an agent possibly repeating (a
  repeat is its repair round), with the cheapest Verifier between consecutive answers and none
  after the last, at most `max_turns` long. Four agents and five turns give 84 plans.
- `loop:<agent>`: that agent answers, the cheapest Verifier checks, on a REJECT the same agent
  answers again: the family's plan of that agent alone, as long as `max_turns` allows.
- `best-fixed`: the family's plan with the best fitness, pass@1 − cost weight × $ per task
  (`fitness.fitness`: expected passes), on the tasks it is chosen on, each plan played for
  exactly its own length; ties go to the cheaper plan, then the shorter, then the first.
- `routed`: a plan per task, read from its problem (plan values regressed on the problem's
  state): where a head that reads the task can start its search (es.TrainSettings.imitate).

A plan is a `core.head.PlanPolicy` plan: (agent index, role) per turn.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trinity_cli.core.roles import Role
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.fitness import fitness

Plan = tuple[tuple[int, Role], ...]
ROUTER_RIDGE = 10.0  # `routed`'s ridge on whitened problem-state components: fixed, not tuned


def price(agent: Any) -> float:
    """An agent's (or an AgentSpec's) price per million tokens in + out (0 when unknown)."""
    prices = getattr(agent, "prices", agent)
    return (prices.price_in or 0.0) + (prices.price_out or 0.0)


def playing(agents: Sequence[Any], role: Role) -> list[int]:
    return [i for i, agent in enumerate(agents) if role in agent.roles]


def cheapest_verifier(agents: Sequence[Any]) -> int | None:
    verifiers = playing(agents, Role.VERIFIER)
    return min(verifiers, key=lambda i: (price(agents[i]), i)) if verifiers else None


def cascade_plan(agents: Sequence[Any], max_turns: int) -> Plan:
    """Workers from the cheapest up, the cheapest Verifier between consecutive answers, as many
    answers as `max_turns` holds."""
    verifier = cheapest_verifier(agents)
    workers = sorted(playing(agents, Role.WORKER), key=lambda i: (price(agents[i]), i))
    return answers_plan(workers[: most_answers(max_turns, verifier)], verifier)


def oracle_plans(agents: Sequence[Any]) -> list[Plan]:
    """Every agent's Worker answer alone, then after every agent's Thinker turn."""
    workers, thinkers = playing(agents, Role.WORKER), playing(agents, Role.THINKER)
    return [((w, Role.WORKER),) for w in workers] + [
        ((t, Role.THINKER), (w, Role.WORKER)) for t in thinkers for w in workers
    ]


def answers_plan(answers: Sequence[int], verifier: int | None) -> Plan:
    """Workers in turn, the Verifier between consecutive answers."""
    plan: list[tuple[int, Role]] = []
    for n, worker in enumerate(answers):
        if n and verifier is not None:
            plan.append((verifier, Role.VERIFIER))
        plan.append((worker, Role.WORKER))
    return tuple(plan)


def most_answers(max_turns: int, verifier: int | None) -> int:
    """How many answers a plan of at most `max_turns` holds (one without a Verifier: a second
    answer would only replace the first, unseen)."""
    return 1 if verifier is None else (max_turns + 1) // 2


def family(agents: Sequence[Any], max_turns: int) -> list[Plan]:
    verifier = cheapest_verifier(agents)
    workers = playing(agents, Role.WORKER)
    return [
        answers_plan(answers, verifier)
        for n in range(1, most_answers(max_turns, verifier) + 1)
        for answers in itertools.product(workers, repeat=n)
    ]


def loop_plan(agents: Sequence[Any], agent: int, max_turns: int) -> Plan:
    verifier = cheapest_verifier(agents)
    return answers_plan([agent] * most_answers(max_turns, verifier), verifier)


def padded(plan: Plan, agents: Sequence[Any], max_turns: int) -> Plan:
    """The plan as a head with `max_turns` turns plays it: after its last answer the cheapest
    Verifier checks until the limit, which keeps the answer (an ACCEPT ends the episode)."""
    verifier = cheapest_verifier(agents)
    if verifier is None:
        return plan
    return plan + ((verifier, Role.VERIFIER),) * (max_turns - len(plan))


def describe(plan: Plan, agents: Sequence[Any]) -> list[list[str]]:
    """[[agent, role], ...] for JSON and messages."""
    return [[agents[i].name, role.value] for i, role in plan]


@dataclass(frozen=True)
class FixedPlan:
    """The chosen plan and how it scored where it was chosen."""

    plan: Plan
    fitness: float
    pass_at_1: float
    usd_per_task: float
    tasks: int


def choose(
    plans: Sequence[Plan], outcomes: Sequence[Sequence[Any]], cost_weight: float
) -> FixedPlan:
    """The plan of the best fitness (ties: cheaper, shorter, first); `outcomes[i]` are plan i's
    outcomes (train.fitness.Outcome) on the tasks it is chosen on."""

    def key(i: int) -> tuple[float, float, int, int]:
        usd = sum(o.usd for o in outcomes[i]) / len(outcomes[i])
        return (-fitness(outcomes[i], cost_weight), usd, len(plans[i]), i)

    best = min(range(len(plans)), key=key)
    chosen = outcomes[best]
    return FixedPlan(
        plans[best], fitness(chosen, cost_weight), sum(o.expected for o in chosen) / len(chosen),
        sum(o.usd for o in chosen) / len(chosen), len(chosen),
    )


def play_family(
    play: Any, tasks: Sequence[Task], agents: Sequence[Any], max_turns: int,
    indices: tuple[int, ...] | None = None,
) -> tuple[list[Plan], list[list[Any]]]:
    """Every family plan on every task, each played for its own length through `play` (a
    runner's or a forest's: episodes → outcomes): the plans and each plan's outcomes."""
    from trinity_cli.core.head import PlanPolicy
    from trinity_cli.train.runner import Episode

    plans = family(agents, max_turns)
    episodes = [
        Episode(task, PlanPolicy(len(agents), plan), len(plan), indices)
        for plan in plans
        for task in tasks
    ]
    played = play(episodes)
    n = len(tasks)
    return plans, [played[i * n : (i + 1) * n] for i in range(len(plans))]


def best_fixed(
    play: Any, tasks: Sequence[Task], agents: Sequence[Any], max_turns: int, cost_weight: float,
    indices: tuple[int, ...] | None = None,
) -> FixedPlan:
    """`best-fixed` on `tasks` (`play_family`)."""
    return choose(*play_family(play, tasks, agents, max_turns, indices), cost_weight)


def routed(
    plans: Sequence[Plan], outcomes: Sequence[Sequence[Any]], features: np.ndarray, chosen: Plan,
    cost_weight: float, ridge: float = ROUTER_RIDGE, queries: np.ndarray | None = None,
) -> list[Plan]:
    """Each task's plan as read from its problem: every plan's value (expected pass − cost
    weight × $) ridge-regressed, with an intercept, on the tasks' `features` (n, k), and each
    task given the plan of the highest predicted value (ties: `chosen`, best-fixed). Where the
    problem says nothing, the intercepts win and every task gets best-fixed. `queries` (m, k):
    route these tasks instead of the ones the regression is fitted on (held out)."""
    values = np.array(
        [[o.expected - cost_weight * o.usd for o in plan_outcomes] for plan_outcomes in outcomes]
    ).T
    x = np.hstack([features, np.ones((len(features), 1))])  # (n, k + 1)
    penalty = ridge * np.eye(x.shape[1])
    penalty[-1, -1] = 0.0  # the intercept is not shrunk
    weights = np.linalg.solve(x.T @ x + penalty, x.T @ values)  # (k + 1, plans)
    asked = x if queries is None else np.hstack([queries, np.ones((len(queries), 1))])
    base = plans.index(chosen)
    return [
        plans[int(np.argmax(row))] if row.max() > row[base] + 1e-12 else chosen
        for row in asked @ weights
    ]

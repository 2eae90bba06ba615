"""The episode trees of train/tree.py: every episode scored there must be the episode the loop
plays (`run_episode` through the runner), with each turn made once; and the fixed plans of
train/fixed.py that the trees score (the family, loop:, best-fixed)."""

from __future__ import annotations

import numpy as np
import pytest
from support.tasks import short_humaneval

from trinity_cli.core.budget import Budget
from trinity_cli.core.head import LinearHead, PlanPolicy, RandomPolicy
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import CURRENT_FORMAT
from trinity_cli.pool.spec import load_pool
from trinity_cli.providers.registry import build_agents
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import load_tasks
from trinity_cli.train.fitness import Outcome
from trinity_cli.train.fixed import (
    answers_plan,
    best_fixed,
    cheapest_verifier,
    choose,
    family,
    loop_plan,
    padded,
    routed,
)
from trinity_cli.train.runner import Episode, LocalRunner, Players
from trinity_cli.train.tree import Forest

W, V = Role.WORKER, Role.VERIFIER


@pytest.fixture(scope="module")
def recorded(memo):
    """The bundled ldb-humaneval pool (gpt-4, gpt-3.5, codellama-34b, starcoder) on three tasks."""
    pool = load_pool("ldb-humaneval")
    tasks = load_tasks("humaneval")[:3]
    agents = build_agents(pool.agents, tasks, coordinator_model=pool.coordinator.model)
    runner = LocalRunner(Players(agents, Grader(), {CURRENT_FORMAT.id: memo}))
    return {"agents": agents, "tasks": tasks, "runner": runner}


def random_head(agents, memo, seed: int) -> LinearHead:
    rng = np.random.default_rng(seed)
    d = memo.hidden_size
    return LinearHead(rng.normal(size=(len(agents) + 3, d)), np.zeros(d), np.ones(d))


def test_the_forest_plays_every_episode_as_the_loop_does_and_makes_each_turn_once(recorded, memo):
    agents, tasks, runner = recorded["agents"], recorded["tasks"], recorded["runner"]
    n = len(agents)
    episodes = [
        Episode(t, RandomPolicy(n), 5, None, None, (7, i, s))
        for i, t in enumerate(tasks)
        for s in range(8)
    ]
    episodes += [
        Episode(t, random_head(agents, memo, seed), 4, None, CURRENT_FORMAT.id)
        for t in tasks
        for seed in range(3)
    ]
    episodes += [
        Episode(t, PlanPolicy(n, plan), len(plan)) for t in tasks for plan in family(agents, 3)
    ]
    forest = Forest(runner, 5, CURRENT_FORMAT.id)
    on_forest = forest.play(episodes)
    assert on_forest == runner.map(episodes, None)
    # accepted, turn_limit, no_answer: the rules really differ
    assert (
        len({o.verdict for o in on_forest}) >= 3
    )
    grown, encoded = forest.grown, forest.encoded
    # every node made once, roots included
    assert grown == sum(
        len(tree) for tree in forest.trees.values()
    )
    assert forest.play(episodes) == on_forest
    assert (forest.grown, forest.encoded) == (grown, encoded)  # nothing made twice
    turns = sum(o.turns for o in on_forest)
    assert grown < turns  # shared prefixes: fewer calls than the episodes' turns together


class CountingCoordinator:
    """The real coordinator, counting the tokens it evaluates."""

    def __init__(self, inner):
        self.inner, self.hidden_size, self.evaluated = inner, inner.hidden_size, 0

    def encode(self, transcript):
        encoding = self.inner.encode(transcript)
        self.evaluated += encoding.tokens
        return encoding


def test_growing_a_task_at_a_time_plays_the_same_episodes_reusing_each_tasks_kv_prefix(
    coordinator, memo
):
    pool, tasks = load_pool("ldb-humaneval"), short_humaneval(2)  # the coordinator encodes all
    agents = build_agents(pool.agents, tasks, coordinator_model=pool.coordinator.model)
    episodes = [
        Episode(t, random_head(agents, memo, seed), 4, None, CURRENT_FORMAT.id)
        for t in tasks
        for seed in range(2)
    ]
    played, evaluated = [], []
    for task_at_a_time in (False, True):
        counting = CountingCoordinator(coordinator)
        runner = LocalRunner(Players(agents, Grader(), {CURRENT_FORMAT.id: counting}))
        forest = Forest(runner, 4, CURRENT_FORMAT.id, task_at_a_time=task_at_a_time)
        played.append(forest.play(episodes))
        evaluated.append(counting.evaluated)
    assert played[0] == played[1]
    # level by level, each state follows another task's; a task at a time, it extends its parent
    assert evaluated[1] < 0.7 * evaluated[0]


def test_a_refused_turn_ends_its_episodes_with_budget_and_is_not_kept(recorded):
    agents, tasks, runner = recorded["agents"], recorded["tasks"], recorded["runner"]
    forest = Forest(runner, 3)
    episodes = [Episode(t, PlanPolicy(len(agents), ((0, W), (3, V), (1, W))), 3) for t in tasks]
    refused = forest.play(episodes, Budget(0.0))
    assert [o.verdict for o in refused] == ["budget"] * len(tasks)
    assert len(forest.trees) == len(tasks)  # one tree a task, ...
    # ... only its root (no call): no refused turn kept
    assert all(
        list(tree) == [()] for tree in forest.trees.values()
    )
    assert forest.play(episodes) == recorded["runner"].map(episodes, None)


def test_the_family_holds_every_answer_sequence_with_the_cheapest_verifier_between(recorded):
    agents = recorded["agents"]
    starcoder = cheapest_verifier(agents)
    assert agents[starcoder].name == "starcoder"  # $0.30 per million in and out, the cheapest
    plans = family(agents, 5)
    assert len(plans) == 4 + 4**2 + 4**3 == 84 == len(set(plans))
    assert all(len(p) <= 5 and p[-1][1] is W for p in plans)
    assert ((0, W), (starcoder, V), (1, W)) in plans
    assert all(step == (starcoder, V) for p in plans for step in p[1::2])
    assert len(family(agents, 4)) == 4 + 16  # three answers need five turns
    assert loop_plan(agents, 1, 5) == ((1, W), (starcoder, V), (1, W), (starcoder, V), (1, W))
    assert loop_plan(agents, 1, 2) == ((1, W),)
    assert padded(((0, W),), agents, 3) == ((0, W), (starcoder, V), (starcoder, V))
    assert answers_plan([2], None) == ((2, W),)


def test_best_fixed_is_the_fittest_plan_ties_going_to_the_cheaper_then_the_shorter():
    def outcomes(passes, usd):
        return [Outcome(bool(p), usd, 1, "accepted", float(p)) for p in passes]

    plans = [((0, W),), ((1, W),), ((0, W), (1, V), (1, W)), ((1, W), (1, V), (0, W))]
    played = [
        outcomes([1, 0, 0], 1.0), outcomes([1, 1, 0], 2.0), outcomes([1, 1, 0], 2.0),
        outcomes([1, 1, 1], 9.0),
    ]
    assert choose(plans, played, 0.0).plan == plans[3]  # best pass@1, whatever it costs
    # fitness 1 − 0.9 = 0.1 for plan 3; 2/3 − 0.2 for plans 1 and 2
    cheap = choose(
        plans, played, 0.1
    )
    assert cheap.plan == plans[1] and cheap.tasks == 3  # a tie: the shorter of two equal-cost plans
    assert cheap.fitness == pytest.approx(2 / 3 - 0.2) and cheap.usd_per_task == 2.0
    even = [outcomes([1, 1, 0], 3.0), outcomes([1, 1, 0], 1.5)]  # equal fitness at cost weight 0
    # a tie: the cheaper, though longer
    assert (
        choose([plans[1], plans[2]], even, 0.0).plan == plans[2]
    )


def test_routed_gives_each_task_the_plan_its_features_predict_else_best_fixed():
    def outcomes(passes):
        return [Outcome(bool(p), 0.0, 1, "accepted", float(p)) for p in passes]

    plans = [((0, W),), ((1, W),)]
    # plan 0 passes the tasks of feature −1, plan 1 those of +1; plan 0 is best-fixed (3 of 5)
    features = np.array([[-1.0], [-1.0], [-1.0], [1.0], [1.0]])
    played = [outcomes([1, 1, 1, 0, 0]), outcomes([0, 0, 0, 1, 1])]
    by_feature = [plans[0]] * 3 + [plans[1]] * 2
    assert routed(plans, played, features, plans[0], 0.0, ridge=0.0) == by_feature
    # held-out tasks are routed by the regression fitted on the others
    queries = np.array([[0.9], [-0.8]])
    assert routed(plans, played, features, plans[0], 0.0, 0.0, queries) == [plans[1], plans[0]]
    # features that say nothing: the intercepts win, and every task gets best-fixed
    silent = np.zeros((5, 1))
    assert routed(plans, played, silent, plans[0], 0.0, 1.0, queries) == [plans[0]] * 2


def test_best_fixed_on_the_forest_is_best_fixed_through_the_loop(recorded):
    agents, tasks, runner = recorded["agents"], recorded["tasks"], recorded["runner"]
    forest = Forest(runner, 3)
    on_forest = best_fixed(forest.play, tasks, agents, 3, 0.0)
    through_loop = best_fixed(lambda episodes: runner.map(episodes, None), tasks, agents, 3, 0.0)
    assert on_forest == through_loop

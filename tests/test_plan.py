"""`train --dry-run`'s bound must bound: real episodes never send a longer prompt."""

from __future__ import annotations

from support.scripted import CountingCoordinator, ScriptedPolicy, ScriptedProvider

from trinity_cli.core.episode import Agent, run_episode
from trinity_cli.core.roles import Role
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.tasks.taskset import load_humaneval
from trinity_cli.train.es import TrainSettings
from trinity_cli.train.plan import longest_prompt, plan_training


def test_no_request_is_longer_than_the_longest_prompt():
    task = max(load_humaneval(), key=lambda t: len(t.prompt))
    specs = [AgentSpec("a", "sim", "sim"), AgentSpec("longer-name", "sim", "sim")]
    # over the agent view's cap, in wide characters
    long_reply = (
        "🙂 <verdict>REJECT</verdict> " + "é🙂" * 4000
    )
    plan = (
        (0, Role.THINKER), (1, Role.WORKER), (0, Role.VERIFIER), (1, Role.WORKER),
        (1, Role.THINKER), (0, Role.WORKER), (1, Role.VERIFIER), (0, Role.WORKER), (1, Role.WORKER),
    )
    providers = [ScriptedProvider([long_reply] * 9), ScriptedProvider([long_reply] * 9)]
    agents = [Agent(s.name, p, s.max_tokens) for s, p in zip(specs, providers)]
    run_episode(
        task.problem, agents, CountingCoordinator(), ScriptedPolicy(plan), max_turns=len(plan)
    )
    sent = sorted(
        (r for p in providers for r in p.requests), key=lambda r: r.user.count("## Turn ")
    )
    assert len(sent) == len(plan)
    for turn, request in enumerate(sent, start=1):
        assert request.prompt_bytes() <= longest_prompt(task, specs, turn)


def test_unpriced_paid_agents_make_the_cost_unknown_and_local_ones_are_free():
    tasks = load_humaneval()[:6]
    settings = TrainSettings(generations=2, popsize=3, batch_size=2, max_turns=2)
    priced = AgentSpec("p", "openai", "m", price_in=1.0, price_out=1.0)
    local = AgentSpec("l", "local", "embedded")
    assert plan_training(tasks, [priced, local], settings).worst_usd > 0
    assert plan_training(tasks, [local], settings).worst_usd == 0.0
    unknown = plan_training(tasks, [priced, AgentSpec("q", "openai", "m")], settings)
    assert unknown.worst_usd is None and unknown.unpriced == ("q",)
    # best-fixed: two one-answer plans (two turns hold no second answer) on the 6 tasks, then the
    # padded plan's states and the start head; the search: 2 generations × 3 candidates × 2 tasks,
    # then the head on all 6
    assert unknown.parts == {"best-fixed": 2 * 6 + 2 * 6, "search": 2 * 3 * 2 + 6}
    assert unknown.episodes == 42 and unknown.calls == 2 * 6 * 1 + 2 * 6 * 2 + (2 * 3 * 2 + 6) * 2
    # each run again on 4 of the 6 tasks
    folded = plan_training(
        tasks, [priced, local], settings, folds=3
    )
    assert folded.parts["cross-validation"] == 3 * (2 * 4 + 2 * 4 + 2 * 3 * 2 + 4 + 3 * 2)
    assert folded.worst_usd > plan_training(tasks, [priced, local], settings).worst_usd

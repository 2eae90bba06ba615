"""What a training or evaluation run would do and cost, worked out before it starts
(`train --dry-run`, `eval --dry-run`).

The counts follow the loops: `es.train` chooses best-fixed (every family plan on every training
task, train/fixed.py), scores its start, plays each generation's mini-batch once per candidate
and scores its final head, and `--folds` repeats that without each fold; `baselines.evaluate`
plays its rows. An episode makes at most its turn limit in agent calls; on a forest
(train/tree.py) each distinct turn is made once, so the real number is usually far smaller:
these are upper bounds. The dollars bound what the budget could be asked for: every call at
its agent's `max_tokens` (a replay agent's: its longest recorded reply), every retried attempt
billed, and each prompt as long as the transcript allows — the agent view keeps at most
AGENT_VIEW_TURNS earlier turns of about AGENT_VIEW_CHARS characters, counted here at 4 UTF-8
bytes each (`Request.prompt_bytes` counts a byte per token). Replies already in the response
cache cost nothing; the bound does not subtract them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from trinity_cli.core.provider import Prices, Request
from trinity_cli.core.roles import COMPLETION_LEADS, SYSTEM_PROMPTS, Role
from trinity_cli.core.transcript import AGENT_VIEW_CHARS, Transcript, Turn
from trinity_cli.pool.providers import kind_of
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.es import TrainSettings, batch_for
from trinity_cli.train.fixed import family

WIDEST_CHAR = "\U0010ffff"  # 4 bytes in UTF-8, the most a character takes


@dataclass(frozen=True)
class Plan:
    episodes: int
    calls: (
        int  # at most: an episode may end before its turn limit, and a forest makes each turn once
    )
    worst_usd: float | None  # None when a paid agent has no prices
    unpriced: tuple[str, ...]
    parts: dict[str, int] = field(default_factory=dict)  # episodes by part of the run


class Tally:
    """Episodes, calls and worst-case $ of (tasks, turn limit, times) pieces of a run."""

    def __init__(self, agents: Sequence[AgentSpec]) -> None:
        self.agents = agents
        self.unpriced = tuple(
            a.name
            for a in agents
            if kind_of(a.provider).priced and not Prices(a.price_in, a.price_out).known
        )
        self.episodes = self.calls = 0
        self.worst = 0.0
        self.parts: dict[str, int] = {}
        self._by_task: dict[str, list[float]] = {}  # worst $ of an episode of 0, 1, 2 ... turns

    def add(self, part: str, tasks: Sequence[Task], turns: int, times: int = 1) -> None:
        self.episodes += len(tasks) * times
        self.calls += len(tasks) * times * turns
        self.parts[part] = self.parts.get(part, 0) + len(tasks) * times
        if not self.unpriced:
            self.worst += times * sum(self._cumulative(task, turns)[turns] for task in tasks)

    def _cumulative(self, task: Task, turns: int) -> list[float]:
        known = self._by_task.get(task.task_id, [0.0])
        if len(known) <= turns:
            known = [
                0.0,
                *accumulate(
                    turn_worst_usd(task, self.agents, turn) for turn in range(1, turns + 1)
                ),
            ]
            self._by_task[task.task_id] = known
        return known

    def plan(self) -> Plan:
        return Plan(
            self.episodes, self.calls, None if self.unpriced else self.worst, self.unpriced,
            self.parts,
        )


def plan_training(
    tasks: Sequence[Task], agents: Sequence[AgentSpec], settings: TrainSettings, folds: int = 0,
    starts: int = 1,
) -> Plan:
    """`trinity train`: the training run, and `folds`-fold cross-validation of each of `starts`
    starts."""
    from trinity_cli.train.crossval import folds as deal

    tally = Tally(agents)
    add_training(tally, tasks, agents, settings, "")
    for held_out in deal(tasks, folds) * starts if folds else []:
        fit = [t for i, t in enumerate(tasks) if i not in set(held_out)]
        add_training(tally, fit, agents, settings, "cross-validation")
        # head, plan, padded plan
        tally.add(
            "cross-validation", [tasks[i] for i in held_out], settings.max_turns, 3
        )
    return tally.plan()


def plan_evaluation(
    tasks: Sequence[Task], fixed_on: Sequence[Task], agents: Sequence[AgentSpec],
    heads: Sequence[str], *, max_turns: int, samples: int = 0, baselines: Sequence[str],
) -> Plan:
    """`baselines.evaluate`'s rows: each on `tasks`; best-fixed chosen on `fixed_on` first (none:
    left out)."""
    from trinity_cli.train.baselines import HeadUnderTest, rows_to_compute
    from trinity_cli.train.fixed import oracle_plans

    tally = Tally(agents)
    rows = rows_to_compute(
        tasks, agents, [HeadUnderTest(h, None, None) for h in heads], max_turns=max_turns,
        samples=samples, baselines=baselines,
    )
    for name, _, turns, _, runs in rows:
        tally.add(name, tasks, turns, max(1, runs))
    if "best-fixed" in baselines and fixed_on:
        for plan in family(agents, max_turns):
            tally.add("best-fixed", fixed_on, len(plan))
        tally.add("best-fixed", tasks, max_turns)
    if "oracle" in baselines:
        for plan in oracle_plans(agents):
            tally.add("oracle", tasks, len(plan))
    return tally.plan()


def add_training(
    tally: Tally, tasks: Sequence[Task], agents: Sequence[AgentSpec], settings: TrainSettings,
    part: str,
) -> None:
    """One es.train: best-fixed and the start, the search, the final head's score."""
    for plan in family(agents, settings.max_turns):
        tally.add(part or "best-fixed", tasks, len(plan))
    # the padded plan's states, the start head
    tally.add(
        part or "best-fixed", tasks, settings.max_turns, 2
    )
    for generation in range(settings.generations):
        tally.add(
            part or "search", [tasks[i] for i in batch_for(tasks, settings, generation)],
            settings.max_turns, settings.popsize,
        )
    tally.add(part or "search", tasks, settings.max_turns)


def episode_worst_usd(task: Task, agents: Sequence[AgentSpec], max_turns: int) -> float:
    return sum(turn_worst_usd(task, agents, turn) for turn in range(1, max_turns + 1))


def turn_worst_usd(task: Task, agents: Sequence[AgentSpec], turn: int) -> float:
    """The dearest call any agent in any role could make at turn `turn`."""
    return max(call_worst_usd(a, longest_prompt(task, agents, turn)) for a in agents)


def call_worst_usd(agent: AgentSpec, prompt_tokens: int) -> float:
    kind = kind_of(agent.provider)
    if not kind.priced:
        return 0.0
    attempts = 1 + agent.retries if kind.retried else 1
    return attempts * Prices(agent.price_in, agent.price_out).usd(
        prompt_tokens, reply_tokens(agent)
    )


def reply_tokens(agent: AgentSpec) -> int:
    """The most tokens a reply is billed: `max_tokens`, or for a replay agent the longest
    recorded program (its `max_tokens` does not cut a recorded reply)."""
    if agent.provider == "replay":
        from trinity_cli.providers.replay import reply_token_bound

        return reply_token_bound(agent)
    return agent.max_tokens


def longest_prompt(task: Task, agents: Sequence[AgentSpec], turn: int) -> int:
    """`Request.prompt_bytes` of the longest request turn `turn` could send, from a transcript
    whose earlier turns are all longer than the agent view keeps, in 4-byte characters."""
    widest = Turn(
        max((a.name for a in agents), key=len), max(Role, key=lambda r: len(r.value)),
        WIDEST_CHAR * (AGENT_VIEW_CHARS + 1),
    )
    transcript = Transcript(task.problem, (widest,) * (turn - 1))
    return max(
        Request(
            role, SYSTEM_PROMPTS[role], transcript.agent_view(), COMPLETION_LEADS[role],
            task.problem.code_prompt if role is Role.WORKER else "",
        ).prompt_bytes()
        for role in Role
    )

"""Where episodes run: on this machine's threads (`LocalRunner`) or on a Ray cluster
(`trinity_cli.train.ray_runner.RayRunner`), behind one `map`.

Work travels as data, never as closures over this process's objects: an `Episode` names its
task, policy, agents (indices into the pool) and seeds, and an `OracleTask` its plans, so another
machine can play it with its own agents and coordinator. `Players` is what a side plays them
with: the pool's agents, a coordinator per transcript format, the grader and the budget. Results
come back in the order of the units; a unit's result never depends on where it ran.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Protocol

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import BUDGET
from trinity_cli.core.head import PlanPolicy
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.fitness import Outcome, in_parallel, play


@dataclass
class Players:
    agents: Sequence[Any]  # the pool's agents, in pool order (units name them by index)
    grader: Grader
    coordinators: Mapping[str, Any] = field(default_factory=dict)  # transcript format → coordinator
    budget: Budget | None = None


# (task id, the episode's agents; None: the whole pool)
TreeKey = tuple[str, tuple[int, ...] | None]


@dataclass(frozen=True)
class Episode:
    task: Task
    policy: Any
    max_turns: int
    agents: tuple[int, ...] | None = None  # indices into Players.agents; None: all of them
    # the transcript format of the coordinator the policy reads; None: it reads no states
    transcript_format: str | None = None
    sample_seed: tuple[int, ...] | None = None

    @property
    def task_id(self) -> str:
        return self.task.task_id

    @property
    def tree(self) -> TreeKey:
        """Which of a forest's trees it plays on (train/tree.py): its task's, for its agents."""
        return self.task.task_id, self.agents

    def run(self, players: Players) -> Outcome:
        agents = players.agents if self.agents is None else [players.agents[i] for i in self.agents]
        coordinator = (
            None if self.transcript_format is None else players.coordinators[self.transcript_format]
        )
        return play(
            self.task, agents, coordinator, self.policy, players.grader, max_turns=self.max_turns,
            sample_seed=self.sample_seed, budget=players.budget,
        )


@dataclass(frozen=True)
class OracleTask:
    """The oracle on one task: its plans in turn until one passes."""

    task: Task
    plans: tuple[tuple[tuple[int, Any], ...], ...]

    @property
    def task_id(self) -> str:
        return self.task.task_id

    def run(self, players: Players) -> tuple[bool, float, int, float]:
        """(passed, $, turns, the best expected pass of the plans played)."""
        usd, turns, expected = 0.0, 0, 0.0
        for plan in self.plans:
            outcome = play(
                self.task, players.agents, None, PlanPolicy(len(players.agents), plan),
                players.grader, max_turns=len(plan), budget=players.budget,
            )
            usd += outcome.usd
            turns += outcome.turns
            expected = max(expected, outcome.expected)
            if outcome.passed or outcome.verdict == BUDGET:
                return outcome.passed, usd, turns, expected
        return False, usd, turns, expected


class Unit(Protocol):
    @property
    def task_id(self) -> str: ...

    def run(self, players: Players) -> Any: ...


class Runner(Protocol):
    def map(
        self, units: Sequence[Unit], budget: Budget | None, on_result: Callable[[], None] = ...
    ) -> list[Any]: ...


@dataclass
class LocalRunner:
    """Units on this machine, `workers` at a time on threads (fitness.in_parallel)."""

    players: Players
    workers: int = 1

    def map(
        self, units: Sequence[Unit], budget: Budget | None,
        on_result: Callable[[], None] = lambda: None,
    ) -> list[Any]:
        players = replace(self.players, budget=budget)

        def run(unit: Unit) -> Any:
            result = unit.run(players)
            on_result()
            return result

        return in_parallel([partial(run, unit) for unit in units], self.workers)

"""Every episode a task can have, grown as policies reach it: exact scores, no sampling noise.

An episode is a function of its decisions once the agents' replies are: replay and sim agents
answer a request the same way every time, and any other agent does through the response cache
(the reply a node got once is the reply every later policy that reaches it gets). So the
episodes of one task form a tree: a node is the state after some turns, an edge one
(agent, role) step. `Forest.play` plays episodes (`runner.Episode`: greedy or sampled, any
policy, any turn limit up to the forest's) on those trees with the loop's own functions
(`core.episode.step_from`, `take_turn`, `apply`), so a score here is the score
`run_episode` would give. Each node costs one agent call, one coordinator encoding (only when
a policy that reads states reaches it) and one grading, once; after that, scoring a candidate
head on a task is a few matrix-vector products. That is what lets `trinity train` score every
candidate on every training task each generation.

Nodes are grown in rounds: every episode walks as far as the tree goes, the missing nodes are
made as `Grow` units through the runner (threads here, or a Ray cluster), and the walks go on.
With one worker the rounds go a task at a time (`task_at_a_time`), so that each state the
coordinator encodes extends the one it encoded before and reuses its KV prefix (training from
cold caches about 20 % faster); with several, rounds span the tasks, to keep them all busy.
A node whose call the budget refused or whose provider failed is not kept: it is made again
when reached again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import (
    BUDGET,
    PROVIDER_ERROR,
    TURN_LIMIT,
    EpisodeState,
    new_state,
    role_mask,
    step_from,
    take_turn,
)
from trinity_cli.core.records import Decision
from trinity_cli.core.roles import ROLE_ORDER
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.fitness import Outcome, outcome_of
from trinity_cli.train.runner import Episode, Players, Runner, TreeKey

Step = tuple[int, int]  # (agent index among the episode's agents, role index in ROLE_ORDER)
Path = tuple[Step, ...]


@dataclass
class Node:
    state: EpisodeState
    outcome: Outcome  # the episode's score if it ended here (at its turn limit, or its verdict)
    hidden: np.ndarray | None = None  # the coordinator's state for the next decision


@dataclass(frozen=True)
class Grow:
    """A runner unit: the node after `parent` and `step` (`parent` None: the root), with its
    coordinator state when `transcript_format` is set and the episode goes on; `step` None with
    a parent: that node again, now with its state."""

    task: Task
    max_turns: int
    agents: tuple[int, ...] | None
    transcript_format: str | None
    parent: EpisodeState | None = None
    step: Step | None = None

    @property
    def task_id(self) -> str:
        return self.task.task_id

    def run(self, players: Players) -> Node:
        agents = players.agents if self.agents is None else [players.agents[i] for i in self.agents]
        if self.parent is None:
            state = new_state(
                self.task.problem, [a.name for a in agents], self.max_turns,
                role_mask([a.roles for a in agents]),
            )
        else:
            state = replace(
                self.parent, records=list(self.parent.records), checked=dict(self.parent.checked)
            )
        if self.step is not None:
            take_turn(
                state, step_decision(state, self.step), agents[self.step[0]],
                players.budget or Budget(),
            )
        outcome = outcome_of(
            self.task, agents, state.verdict or TURN_LIMIT, state.records,
            state.transcript.latest_answer, sum(r.usd for r in state.records), players.grader,
        )
        hidden = None
        if self.transcript_format is not None and not state.done:
            hidden = players.coordinators[self.transcript_format].encode(state.transcript).hidden
        return Node(state, outcome, hidden)


def step_decision(state: EpisodeState, step: Step) -> Decision:
    """The decision a step stands for (a tree node is shared by every policy that reaches it, so
    it keeps no policy's probabilities)."""
    agent, role = step
    return Decision(
        turn=state.next_turn, agent_index=agent, agent=state.agent_names[agent],
        role=ROLE_ORDER[role], role_source="head" if state.role_override is None else "thinker",
        agent_probs=(), role_probs=(), coordinator_seconds=0.0, coordinator_tokens=0,
    )


@dataclass
class _Walk:
    episode: Episode
    rng: np.random.Generator | None
    path: Path = ()
    outcome: Outcome | None = None


@dataclass
class Forest:
    """The trees of a run's tasks (per task and set of agents), up to `max_turns`;
    `transcript_format` is that of the coordinator whose states the policies read."""

    runner: Runner
    max_turns: int
    transcript_format: str | None = None
    trees: dict[TreeKey, dict[Path, Node]] = field(default_factory=dict)
    grown: int = 0  # nodes made (agent calls, and encodings where a policy read the state)
    encoded: int = 0
    # the nodes whose calls this forest paid for
    made: list[tuple[TreeKey, Path]] = field(
        default_factory=list
    )
    # grow one task's walks to their ends before the next task's (for a runner of one worker):
    # each state the coordinator encodes then extends the one before it, whose KV prefix it
    # reuses, instead of following another task's state
    task_at_a_time: bool = False

    def play(self, episodes: Sequence[Episode], budget: Budget | None = None) -> list[Outcome]:
        """Each episode's outcome, as `run_episode` would give it (nodes grown as needed). An
        episode whose call the budget refused has verdict `budget`, as there."""
        for episode in episodes:
            if episode.max_turns > self.max_turns:
                raise ValueError(
                    f"an episode of {episode.max_turns} turns on a forest of {self.max_turns}"
                )
        walks = [
            _Walk(e, None if e.sample_seed is None else np.random.default_rng(e.sample_seed))
            for e in episodes
        ]
        if self.task_at_a_time:
            by_tree: dict[TreeKey, list[_Walk]] = {}
            for walk in walks:
                by_tree.setdefault(walk.episode.tree, []).append(walk)
            for group in by_tree.values():
                self._grow(group, budget)
        else:
            self._grow(walks, budget)
        return [walk.outcome for walk in walks]  # type: ignore[misc]

    def _grow(self, walks: list[_Walk], budget: Budget | None) -> None:
        """Play `walks` to their ends, making the missing nodes in rounds."""
        pending = walks
        while pending:
            wanted: dict[tuple[TreeKey, Path, bool], Grow] = {}
            for walk in pending:
                grow = self._advance(walk)
                if grow is not None:
                    key = (walk.episode.tree, walk.path, grow.step is None)
                    wanted.setdefault(key, grow)
            if not wanted:
                break
            # task-major: one KV prefix per task
            units = sorted(
                wanted.items(), key=lambda item: item[0][0][0]
            )
            made = self.runner.map([grow for _, grow in units], budget)
            for ((tree, path, _), grow), node in zip(units, made):
                if node.outcome.verdict in (BUDGET, PROVIDER_ERROR):
                    self._end_walks(pending, tree, path, node.outcome)
                    continue
                self.grown += grow.step is not None or grow.parent is None
                self.encoded += node.hidden is not None
                if grow.step is not None:
                    self.made.append((tree, path))
                self.trees.setdefault(tree, {})[path] = node
            pending = [walk for walk in pending if walk.outcome is None]

    def restore(self, made: Sequence[tuple[TreeKey, Path]], tasks: Sequence[Task]) -> None:
        """Make again, free of charge, the nodes an interrupted run had paid for (`made`, from its
        checkpoint, whose spend already counts them): a resumed run then spends what the
        uninterrupted one did."""
        by_id = {task.task_id: task for task in tasks}
        todo = sorted(set(made) - set(self.made), key=lambda item: len(item[1]))
        for depth in sorted({len(path) for _, path in todo}):
            level = [(tree, path) for tree, path in todo if len(path) == depth]
            roots = sorted(
                {tree for tree, _ in level if () not in self.trees.get(tree, {})}, key=str
            )
            for tree, root in zip(
                roots,
                self.runner.map(
                    [Grow(by_id[t[0]], self.max_turns, t[1], None) for t in roots], None
                ),
            ):
                self.trees.setdefault(tree, {})[()] = root  # no call: nothing to pay
            units = [
                Grow(
                    by_id[tree[0]], self.max_turns, tree[1], None,
                    self.trees[tree][path[:-1]].state, path[-1],
                )
                for tree, path in level
            ]
            for (tree, path), node in zip(level, self.runner.map(units, None)):
                self.trees[tree][path] = node
                self.made.append((tree, path))

    def trail(
        self, episodes: Sequence[Episode], budget: Budget | None = None
    ) -> tuple[list[list[tuple[Node, Step]]], list[Outcome]]:
        """Each greedy episode's decision nodes, their states encoded, with the step taken at
        each; and the outcomes (a walk the budget cut short has a shorter trail)."""
        outcomes = self.play([replace(e, policy=Reading(e.policy)) for e in episodes], budget)
        return [self.steps(e) for e in episodes], outcomes

    def steps(self, episode: Episode) -> list[tuple[Node, Step]]:
        """A greedy episode played before (`play`): its decision nodes and the step at each."""
        tree = self.trees.get(episode.tree, {})
        path: Path = ()
        trail: list[tuple[Node, Step]] = []
        while (node := tree.get(path)) is not None and not (
            node.state.done or len(node.state.records) >= episode.max_turns
        ):
            pick = step_from(node.state, episode.policy.choose(node.hidden, node.state.next_turn))
            step = (pick.agent, pick.role)
            trail.append((node, step))
            path += (step,)
        return trail

    def _advance(self, walk: _Walk) -> Grow | None:
        """Walk on while the tree has the nodes; the unit that makes the one missing, if any."""
        episode = walk.episode
        tree = self.trees.get(episode.tree, {})
        reads = bool(getattr(episode.policy, "needs_hidden", False))
        while True:
            node = tree.get(walk.path)
            if node is None:
                parent = tree.get(walk.path[:-1]) if walk.path else None
                return Grow(
                    episode.task, self.max_turns, episode.agents,
                    self.transcript_format if reads else None,
                    None if parent is None else parent.state, walk.path[-1] if walk.path else None,
                )
            state = node.state
            if state.done or len(state.records) >= episode.max_turns:
                walk.outcome = node.outcome
                return None
            if reads and node.hidden is None:
                return Grow(
                    episode.task, self.max_turns, episode.agents, self.transcript_format, state
                )
            draws = (
                None if walk.rng is None else (float(walk.rng.random()), float(walk.rng.random()))
            )
            pick = step_from(state, episode.policy.choose(node.hidden, state.next_turn), draws)
            walk.path += ((pick.agent, pick.role),)

    @staticmethod
    def _end_walks(walks: list[_Walk], tree: TreeKey, path: Path, outcome: Outcome) -> None:
        """The walks that needed a node whose call failed end there, with its outcome."""
        for walk in walks:
            if walk.episode.tree == tree and walk.path == path and walk.outcome is None:
                walk.outcome = outcome


@dataclass(frozen=True)
class Reading:
    """A policy that reads no state, made to encode every state its walks pass: the states a
    head is fitted on to imitate it (`Forest.trail`)."""

    policy: Any
    needs_hidden = True

    def choose(self, hidden: np.ndarray | None, turn: int) -> Any:
        return self.policy.choose(hidden, turn)

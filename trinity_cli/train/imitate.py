"""A starting head that imitates the fallback pipeline, fit by ridge regression.

This is not training for reward: it gives a head whose greedy choices reproduce
Thinker → Worker → Verifier, one round per agent, from the coordinator's real hidden states, so
that a fresh install routes sensibly and the optimizer has a reasonable starting mean. The
transcripts are synthetic (task prompt, a short plan, the canonical solution, a rejection).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from trinity_cli.core.head import N_ROLES, LinearHead, PipelinePolicy, turn_indicators
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Transcript, Turn
from trinity_cli.tasks.taskset import Task


def pipeline_transcripts(task: Task, agent_names: Sequence[str], turns: int) -> list[Transcript]:
    """The transcripts the fallback pipeline would see at turns 1..turns (synthetic replies)."""
    policy = PipelinePolicy(len(agent_names))
    steps = []
    for turn in range(1, turns):
        probs = policy.choose(None, turn)
        steps.append(
            (
                agent_names[int(np.argmax(probs.agent_probs))],
                (Role.THINKER, Role.WORKER, Role.VERIFIER)[int(np.argmax(probs.role_probs))],
            )
        )
    return scripted_transcripts(task, steps)


def scripted_transcripts(task: Task, steps: Sequence[tuple[str, Role]]) -> list[Transcript]:
    """The transcripts before the first turn and after each (agent, role) step (synthetic
    replies: a plan, the canonical solution, a rejection)."""
    transcript = Transcript(task.problem)
    out = [transcript]
    for agent, role in steps:
        docstring = task.prompt.strip().splitlines()
        noise = " ".join(docstring[len(docstring) // 2 :])[:600]  # prose of varying length
        text = {
            Role.THINKER: f"Plan: implement {task.entry_point} as the docstring says. {noise}",
            Role.WORKER: f"```python\n{task.prompt}{task.canonical_solution or '    pass'}\n```",
            Role.VERIFIER: f"{noise[:200]} <verdict>REJECT</verdict>",
        }[role]
        transcript = transcript.with_turn(Turn(agent, role, text))
        out.append(transcript)
    return out


def input_space(
    states: np.ndarray, n_outputs: int, project: int | None, groups: Sequence[int] | None = None,
    turn_features: int = 0,
) -> LinearHead:
    """A head of zero weights over `states` scaled by their std, not centred: the head is
    bias-free, and an uncentred input gives it the states' mean as a bias to prefer an agent
    or a role everywhere (with one decision per task, what best-fixed needs). With `project` = K
    it reads K directions, each scaled to unit root mean square (so σ0 of the search means the
    same for any backbone): the mean first (the bias), then, given `groups` (say each state's
    turn), the directions that tell the groups apart, then the top principal components of the
    states within their groups (without groups, within them all). Without groups, what varies
    most between states of different turns (who has spoken) crowds out what varies between
    tasks. `turn_features` T appends indicators of the turn (core.head)."""
    matrix = np.asarray(states, dtype=np.float64)
    std = matrix.std(axis=0) + 1e-6
    mean = np.zeros(matrix.shape[1])
    if project is None:
        return LinearHead(
            np.zeros((n_outputs, matrix.shape[1] + turn_features)), mean, std, None, turn_features
        )
    z = matrix / std
    centre = z.mean(axis=0)
    candidates = [centre[None, :]]
    labels = np.zeros(len(z), dtype=int) if groups is None else np.asarray(groups)
    names = list(np.unique(labels))
    centres = np.array([z[labels == g].mean(axis=0) for g in names])
    if len(names) > 1:
        candidates.append(
            np.linalg.svd(centres - centres.mean(axis=0), full_matrices=False)[2][: len(names) - 1]
        )
    within = z - centres[[names.index(g) for g in labels]]
    candidates.append(np.linalg.svd(within, full_matrices=False)[2][:project])
    directions = _orthonormal(np.vstack(candidates))[:project]  # (K, d), in the order above
    scale = np.sqrt(((z @ directions.T) ** 2).mean(axis=0))
    return LinearHead(
        np.zeros((n_outputs, len(directions) + turn_features)), mean, std,
        directions / np.maximum(scale, 1e-9)[:, None], turn_features,
    )


def _orthonormal(rows: np.ndarray) -> np.ndarray:
    """Gram-Schmidt in row order, dropping rows that add (almost) nothing."""
    kept: list[np.ndarray] = []
    for row in rows:
        for other in kept:
            row = row - (row @ other) * other
        norm = np.linalg.norm(row)
        if norm > 1e-6:
            kept.append(row / norm)
    return np.array(kept)


def pipeline_space(
    tasks: Sequence[Task], agent_names: Sequence[str], coordinator: Any, project: int | None,
    n_tasks: int = 40, turns: int = 3,
) -> LinearHead:
    """`input_space` of the states of the fallback pipeline's first `turns` turns on `n_tasks`
    tasks (synthetic replies): first-turn states sit off-centre, so a bias-free head can still
    prefer a role."""
    states = [
        coordinator.encode(transcript).hidden
        for task in tasks[:n_tasks]
        for transcript in pipeline_transcripts(task, agent_names, turns)
    ]
    return input_space(np.asarray(states), len(agent_names) + N_ROLES, project)


def fit_steps(
    space: LinearHead, states: np.ndarray, steps: Sequence[tuple[int, int]],
    turns: Sequence[int] | None = None, ridge: float = 1.0, margin: float = 3.0,
) -> LinearHead:
    """The head in `space` whose logits are fitted to +margin on each state's step (agent index,
    role index) and −margin on every other agent and role. With turn indicators (`turns`: each
    state's next turn), they are fitted first, as the mean target of each turn, and the state's
    part ridge-fits what is left: a plan that is the same on every task is played by the turn
    weights alone, with the state's weights zero, on any state."""
    z = np.asarray([space.features(state) for state in states])
    n_agents = space.n_agents
    targets = np.full((len(steps), n_agents + N_ROLES), -margin)
    for row, (agent, role) in enumerate(steps):
        targets[row, agent] = targets[row, n_agents + role] = margin
    by_turn = np.zeros((space.turn_features, targets.shape[1]))
    if space.turn_features:
        if turns is None:
            raise ValueError("a head with turn indicators is fitted with each state's turn")
        indicators = np.asarray([turn_indicators(turn, space.turn_features) for turn in turns])
        seen = indicators.sum(axis=0)
        by_turn[seen > 0] = (indicators.T @ targets)[seen > 0] / seen[seen > 0, None]
        targets = targets - indicators @ by_turn
    weights = np.linalg.solve(z.T @ z + ridge * np.eye(z.shape[1]), z.T @ targets).T  # (L+3, k)
    return space.with_weights(np.hstack([weights, by_turn.T]).ravel())


def fit_imitation_head(
    states: np.ndarray, turns: Sequence[int], n_agents: int, ridge: float = 10.0
) -> tuple[LinearHead, float]:
    """(head, training accuracy) for hidden `states` (n, d) seen at pipeline `turns` (1-based)."""
    policy = PipelinePolicy(n_agents)
    steps = [
        (int(np.argmax(c.agent_probs)), int(np.argmax(c.role_probs)))
        for c in (policy.choose(None, turn) for turn in turns)
    ]
    space = LinearHead(
        np.zeros((n_agents + N_ROLES, states.shape[1])), states.mean(axis=0),
        states.std(axis=0) + 1e-6,
    )
    head = fit_steps(space, states, steps, ridge=ridge)
    return head, agreement(head, states, steps)


def agreement(head: LinearHead, states: np.ndarray, steps: Sequence[tuple[int, int]]) -> float:
    """The share of states where the head's greedy agent and role are the step's (no mask)."""
    hits = 0
    for state, (agent, role) in zip(states, steps):
        probs = head.choose(state, 0)
        hits += int(np.argmax(probs.agent_probs) == agent and np.argmax(probs.role_probs) == role)
    return hits / len(steps)

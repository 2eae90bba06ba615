"""Training the pool-agnostic head (core.head.UniversalHead) across pools drawn from many agents.

1. The head's input space: standardisation and a whitened K-component basis from the states
   of synthetic pipeline transcripts (`imitate.pipeline_space`) of tasks spread over the whole
   set (a set joined from two comes in two blocks); the search starts from the head
   that picks the agent whose profile predicts the highest pass (`input_space`).
2. Every training agent's profile, measured in that space on the calibration tasks.
3. sep-CMA-ES (`es.train`) on the shared parameters; each episode plays a pool drawn from the
   training agents (`es.PoolDraws`), the head bound to the drawn agents' profiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli.core.head import LinearHead, UniversalHead
from trinity_cli.core.profile import Profile
from trinity_cli.core.roles import ROLE_ORDER, Role
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.es import PoolDraws, TrainResult, TrainSettings, train
from trinity_cli.train.imitate import pipeline_space, scripted_transcripts
from trinity_cli.train.profile import problem_states, profile_agent
from trinity_cli.train.runner import LocalRunner, Players

STATS_TASKS = 40  # tasks whose pipeline states give the input space
PROFILE_EXTRA = 3  # profile values before the skill vector: pass rate, cost, offset (core.profile)
START_SHARPNESS = 10.0  # logits per unit of predicted pass at the start
START_ROLES = (Role.WORKER, Role.VERIFIER, Role.WORKER)  # the start's roles by turn: answer, check, answer again


@dataclass
class UniversalResult:
    head: UniversalHead  # unbound (no pool's profiles)
    training: TrainResult


def input_space(tasks: Sequence[Task], agents: Sequence[Any], coordinator: Any, components: int,
                skill_weight: float = 1.0) -> UniversalHead:
    """The starting head, with its basis (what profiles are measured in): each agent's logit is
    START_SHARPNESS × its profile's predicted pass on the task, pass_rate + skill_weight ·
    (z · skill − offset) (W's skill block skill_weight × the identity; u: pass rate 1, offset
    −skill_weight). With skill_weight 0 it starts as "the agent with the best
    pass rate" whatever the task. Roles by turn follow START_ROLES (`start_roles`). The search
    refines it from there."""
    spread = list(tasks)[:: max(1, len(tasks) // STATS_TASKS)]  # task sets come in blocks (HumanEval, then MBPP)
    linear = pipeline_space(spread, [a.name for a in agents][:3], coordinator, components)
    k = linear.n_features
    size = k + PROFILE_EXTRA
    assert linear.basis is not None
    w, u = np.zeros((k, size)), np.zeros(size)
    w[:, PROFILE_EXTRA:] = skill_weight * np.eye(k)
    u[0], u[2] = 1.0, -skill_weight
    roles = start_roles(spread, agents[0].name, coordinator, linear)
    params = np.concatenate([START_SHARPNESS * w.ravel(), START_SHARPNESS * u, roles.ravel()])
    return UniversalHead(params, linear.mean, linear.std, linear.basis, np.zeros((0, size)))


def start_roles(tasks: Sequence[Task], agent_name: str, coordinator: Any, space: LinearHead) -> np.ndarray:
    """(3, k) role weights whose greedy role is START_ROLES[i] at turn i + 1 of synthetic
    transcripts (a ridge fit to ±3 logits): without it a bias-free head starts with uniform roles
    and a multi-turn search spends its first generations learning that a Verifier needs an answer."""
    states, targets = [], []
    for task in tasks:
        for transcript, role in zip(scripted_transcripts(task, [(agent_name, r) for r in START_ROLES[:-1]]), START_ROLES):
            states.append(space.features(coordinator.encode(transcript).hidden))  # as the universal head's
            targets.append([3.0 if r is role else -3.0 for r in ROLE_ORDER])
    z, y = np.asarray(states), np.asarray(targets)
    return np.linalg.solve(z.T @ z + np.eye(z.shape[1]), z.T @ y).T


def measure_profiles(agents: Sequence[Any], calibration: Sequence[Task], coordinator: Any, head: UniversalHead,
                     grader: Grader) -> list[Profile]:
    states = problem_states(calibration, coordinator, head)
    runner = LocalRunner(Players(agents, grader))
    return [profile_agent(runner, i, agent.name, calibration, states) for i, agent in enumerate(agents)]


def train_universal(tasks: Sequence[Task], agents: Sequence[Any], calibration: Sequence[Task], coordinator: Any,
                    grader: Grader, settings: TrainSettings, checkpoint_file: Path, *, pool_sizes: tuple[int, int] = (2, 6),
                    skill_weight: float = 1.0, resume: bool = False) -> UniversalResult:
    if settings.project is None:
        raise ValueError("the universal head needs --project K (its parameters must not depend on d)")
    start = input_space(tasks, agents, coordinator, settings.project, skill_weight)
    profiles = measure_profiles(agents, calibration, coordinator, start, grader)
    draws = PoolDraws(np.array([p.vector() for p in profiles]), *pool_sizes)
    result = train(tasks, agents, coordinator, grader, settings, checkpoint_file, resume=resume,
                   start_head=start, pools=draws)
    return UniversalResult(result.head, result)  # type: ignore[arg-type]

"""Training the pool-agnostic head (core.head.UniversalHead) across pools drawn from many agents.

1. The head's input space: standardisation and a whitened K-component basis from the states
   of synthetic pipeline transcripts (`imitate.pipeline_space`) of tasks spread over the whole
   set (a set joined from two comes in two blocks); the search starts from `loop:` of the
   agent whose profile predicts the highest pass, played by the turn indicators
   (`input_space`): on any pool, the plan a user would write by hand.
2. Every training agent's profile, measured in that space on the calibration tasks.
3. sep-CMA-ES (`es.train`) on the shared parameters; each episode plays a pool drawn from the
   training agents (`es.PoolDraws`), the head bound to the drawn agents' profiles. The head
   returned is the final mean if it beats the start on the training tasks (each on a pool drawn
   for the purpose), else the start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli.core.head import UniversalHead
from trinity_cli.core.profile import Profile
from trinity_cli.core.roles import ROLE_ORDER, Role
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.es import PoolDraws, TrainResult, TrainSettings, train
from trinity_cli.train.imitate import pipeline_space
from trinity_cli.train.profile import problem_states, profile_agent
from trinity_cli.train.runner import LocalRunner, Players

STATS_TASKS = 40  # tasks whose pipeline states give the input space
PROFILE_EXTRA = 3  # profile values before the skill vector: pass rate, cost, offset (core.profile)
START_SHARPNESS = 10.0  # logits per unit of predicted pass (and of cost, log10 $) at the start
ROLE_MARGIN = 3.0  # the start's role logits: the turn's role +3, the others −3


@dataclass
class UniversalResult:
    head: UniversalHead  # unbound (no pool's profiles)
    training: TrainResult


def start_role(turn: int) -> Role:
    """The start's role at `turn`: a Worker answers, a Verifier checks, a Worker answers again..."""
    return Role.WORKER if turn % 2 else Role.VERIFIER


def input_space(
    tasks: Sequence[Task], agents: Sequence[Any], coordinator: Any, components: int,
    skill_weight: float = 1.0, max_turns: int = 1,
) -> UniversalHead:
    """The starting head, with its basis (what profiles are measured in), and one turn indicator
    per turn: `loop:` of the best agent by profile. On a Worker's turn (`start_role`) each agent's
    logit is START_SHARPNESS × its profile's predicted pass on the task, pass_rate + skill_weight ·
    (z · skill − offset) (W's skill block skill_weight × the identity; u: pass rate 1, offset
    −skill_weight): with skill_weight 0, the agent with the best pass rate whatever the task. On
    a Verifier's turn the turn's row of W cancels the pass rate and offset and weighs the cost:
    the cheapest agent (up to z · skill when skill_weight > 0). The search refines it from there."""
    # task sets come in blocks (HumanEval, then MBPP)
    spread = list(tasks)[
        :: max(1, len(tasks) // STATS_TASKS)
    ]
    linear = pipeline_space(spread, [a.name for a in agents][:3], coordinator, components)
    k = linear.n_features
    size = k + PROFILE_EXTRA
    assert linear.basis is not None
    w, u, roles = (
        np.zeros((k + max_turns, size)), np.zeros(size),
        np.full((len(ROLE_ORDER), k + max_turns), -ROLE_MARGIN),
    )
    w[:k, PROFILE_EXTRA:] = skill_weight * np.eye(k)
    u[0], u[2] = 1.0, -skill_weight
    for turn in range(1, max_turns + 1):
        role = start_role(turn)
        roles[ROLE_ORDER.index(role), k + turn - 1] = ROLE_MARGIN
        if role is Role.VERIFIER:
            w[k + turn - 1, :PROFILE_EXTRA] = (-1.0, -1.0, skill_weight)
    params = np.concatenate([START_SHARPNESS * w.ravel(), START_SHARPNESS * u, roles.ravel()])
    return UniversalHead(
        params, linear.mean, linear.std, linear.basis, np.zeros((0, size)), max_turns
    )


def measure_profiles(
    agents: Sequence[Any], calibration: Sequence[Task], coordinator: Any, head: UniversalHead,
    grader: Grader,
) -> list[Profile]:
    states = problem_states(calibration, coordinator, head)
    runner = LocalRunner(Players(agents, grader))
    return [
        profile_agent(runner, i, agent.name, calibration, states) for i, agent in enumerate(agents)
    ]


def train_universal(
    tasks: Sequence[Task], agents: Sequence[Any], calibration: Sequence[Task], coordinator: Any,
    grader: Grader, settings: TrainSettings, checkpoint_file: Path, *,
    pool_sizes: tuple[int, int] = (2, 6), skill_weight: float = 1.0, resume: bool = False,
) -> UniversalResult:
    if settings.project is None:
        raise ValueError(
            "the universal head needs --project K (its parameters must not depend on d)"
        )
    start = input_space(
        tasks, agents, coordinator, settings.project, skill_weight, settings.max_turns
    )
    profiles = measure_profiles(agents, calibration, coordinator, start, grader)
    draws = PoolDraws(np.array([p.vector() for p in profiles]), *pool_sizes)
    result = train(
        tasks, agents, coordinator, grader, settings, checkpoint_file, resume=resume,
        start_head=start, pools=draws,
    )
    return UniversalResult(result.head, result)  # type: ignore[arg-type]

"""Did the search find more than its starting plan? k-fold cross-validation on the training tasks.

The training tasks are dealt into k folds by a salted hash of their ids. For each fold, the
rest is a training run of its own: `best-fixed` is chosen there and the head trained from it
(es.train, same settings); both are then scored on the fold, which neither saw. Every task is
held out once, so the paired margin of head over plan is taken over all the training tasks,
per task value = expected pass − cost weight × $. The folds share one forest (train/tree.py):
a state encoded for one fold serves the others.

`trinity train` runs it before training (`--folds`, default 5), for each start it may take
(`--imitate auto`: best-fixed and routed, the better held-out head chosen; `starts`), and
records the chosen one in the head's metadata (`training.validation`); a head whose margin is
below zero is `below_start`, and the plan, saved beside it, routes by default instead.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from trinity_cli.core.budget import Budget
from trinity_cli.core.head import PlanPolicy
from trinity_cli.tasks.taskset import Task
from trinity_cli.train.baselines import paired_margin
from trinity_cli.train.es import TrainResult, TrainSettings, refused, train
from trinity_cli.train.fitness import Outcome
from trinity_cli.train.fixed import describe, padded
from trinity_cli.train.runner import Episode
from trinity_cli.train.tree import Forest

FOLD_SALT = "trinity-folds-v1:"


def folds(tasks: Sequence[Task], k: int) -> list[list[int]]:
    """Task indices of each of `k` folds: the tasks in salted-hash order, dealt in turn."""
    order = sorted(
        range(len(tasks)),
        key=lambda i: hashlib.sha256((FOLD_SALT + tasks[i].task_id).encode()).digest(),
    )
    return [sorted(order[f::k]) for f in range(k)]


def value(outcome: Outcome, cost_weight: float) -> float:
    return outcome.expected - cost_weight * outcome.usd


@dataclass
class CrossValidation:
    k: int
    task_ids: list[str]
    head: list[float]  # per task: the value of the head trained without its fold
    plan: list[float]  # per task: the value of the best-fixed plan chosen without its fold
    plans: list[list[list[str]]]  # each fold's best-fixed
    differing: int  # held-out tasks where the fold head's choices differ from its (padded) plan's
    cost_weight: float

    @property
    def margin_se(self) -> float | None:
        """The paired margin of head over plan in standard errors (None: ±∞, a difference that never
        varies)."""
        margin = paired_margin(self.head, self.plan)
        return margin if math.isfinite(margin) else None

    @property
    def head_fitness(self) -> float:
        return float(np.mean(self.head))

    @property
    def plan_fitness(self) -> float:
        return float(np.mean(self.plan))

    @property
    def mean_difference(self) -> float:
        return self.head_fitness - self.plan_fitness

    @property
    def below_start(self) -> bool:
        return self.mean_difference < 0

    def scores(self) -> dict[str, Any]:
        """Head and plan held out, and the paired margin between them (JSON)."""
        margin = self.margin_se
        return {
            "head_fitness": round(self.head_fitness, 6),
            "plan_fitness": round(self.plan_fitness, 6),
            "paired_margin_se": None if margin is None else round(margin, 3),
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "folds": self.k, "tasks": len(self.task_ids), "cost_weight": self.cost_weight,
            **self.scores(), "tasks_differing": self.differing, "below_start": self.below_start,
            "plans": self.plans,
            "per_task": {
                "task_id": self.task_ids, "head": [round(v, 6) for v in self.head],
                "plan": [round(v, 6) for v in self.plan],
            },
        }


def steps_of(forest: Forest, episode: Episode) -> list[Any]:
    return [step for _, step in forest.steps(episode)]


def cross_validate(
    tasks: Sequence[Task], agents: Sequence[Any], coordinator: Any, grader: Any,
    settings: TrainSettings, k: int, forest: Forest, budget: Budget | None = None,
    on_fold: Callable[[int, TrainResult], None] = lambda fold, result: None,
) -> CrossValidation:
    """The module docstring's protocol; BudgetExceeded when a call is refused."""
    n = len(tasks)
    head_values, plan_values = [0.0] * n, [0.0] * n
    plans, differing = [], 0
    for fold, held_out in enumerate(folds(tasks, k)):
        fit = [t for i, t in enumerate(tasks) if i not in set(held_out)]
        result = train(
            fit, agents, coordinator, grader, settings, None, forest=forest, budget=budget
        )
        if result.stopped_for_budget:
            refused([Outcome(False, 0.0, 0, "budget")], result.budget)
        plan = result.start.plan
        assert plan is not None  # train's own start
        scored = [tasks[i] for i in held_out]
        heads = [
            Episode(t, result.head, settings.max_turns, None, forest.transcript_format)
            for t in scored
        ]
        played = [
            Episode(
                t, PlanPolicy(len(agents), padded(plan.plan, agents, settings.max_turns)),
                settings.max_turns,
            )
            for t in scored
        ]
        head = forest.play(heads, budget)
        fixed = forest.play(
            [Episode(t, PlanPolicy(len(agents), plan.plan), len(plan.plan)) for t in scored], budget
        )
        refused(head + fixed + forest.play(played, budget), budget)
        for i, h, p in zip(held_out, head, fixed):
            head_values[i], plan_values[i] = (
                value(h, settings.cost_weight), value(p, settings.cost_weight),
            )
        differing += sum(steps_of(forest, a) != steps_of(forest, b) for a, b in zip(heads, played))
        plans.append(describe(plan.plan, agents))
        on_fold(fold + 1, result)
    return CrossValidation(
        k, [t.task_id for t in tasks], head_values, plan_values, plans, differing,
        settings.cost_weight,
    )


def starts(
    tasks: Sequence[Task], agents: Sequence[Any], coordinator: Any, grader: Any,
    settings: TrainSettings, imitations: Sequence[str], k: int, forest: Forest,
    budget: Budget | None = None, on_fold: Callable[[str, int], None] = lambda imitate, fold: None,
) -> tuple[str, dict[str, CrossValidation]]:
    """Each start (`TrainSettings.imitate`) cross-validated on the same folds; the one whose
    held-out heads score highest (ties: the first named)."""
    validations = {
        name: cross_validate(
            tasks, agents, coordinator, grader, replace(settings, imitate=name), k, forest, budget,
            functools.partial(_fold_done, on_fold, name),
        )
        for name in imitations
    }
    return max(imitations, key=lambda name: validations[name].head_fitness), validations


def _fold_done(on_fold: Callable[[str, int], None], name: str, fold: int, _: TrainResult) -> None:
    on_fold(name, fold)

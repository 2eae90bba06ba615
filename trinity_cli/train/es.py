"""`trinity train`: evolve the routing head with sep-CMA-ES, cmaes-style ask → evaluate → tell.

The paper's settings: σ0 = 0.03, population ≈ 32, 60 generations, 16 tasks per candidate
(≈31k episodes). The defaults here are smaller so that the example sim pool trains on a laptop
CPU in well under an hour (see the README).

- Candidates are flat head vectors ((L+3)·k values). cmaes *minimizes*: we tell it −fitness.
- Every candidate of a generation plays the same mini-batch (common random numbers), and the
  policy samples agent and role with draws seeded by (seed, generation, candidate, task), so a
  run is reproducible and resume is exact.
- The head's input is standardised with mean/std of hidden states from pipeline transcripts of
  training tasks (so σ0 means the same for any backbone); the search starts at zero weights
  (uniform choices). With `project = K` the head works on the top-K principal components of
  those states, whitened to unit variance.
- A generation's episodes go task-major to a runner (train/runner.py): here, `workers` at a
  time on threads, so the coordinator's KV cache keeps each task's prefix and the memo answers
  every transcript seen before; or spread over a Ray cluster (`trinity_cli.cluster`), which
  gives each worker whole tasks for the same reason. Where they run never changes the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli.core.budget import Budget
from trinity_cli.core.head import N_ROLES, LinearHead
from trinity_cli.core.transcript import CURRENT_FORMAT
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import Task
from trinity_cli.train import checkpoint
from trinity_cli.train.fitness import Outcome, fitness
from trinity_cli.train.imitate import pipeline_transcripts
from trinity_cli.train.runner import Episode, LocalRunner, Players, Runner

STATS_TASKS = 40  # training tasks whose pipeline transcripts give the normalisation statistics
STATS_TURNS = 3


@dataclass(frozen=True)
class PoolDraws:
    """Universal training: each episode plays a pool drawn from the training agents (sizes
    `smallest`..`largest`), the same draws for every candidate of a generation; the head is
    bound to the drawn agents' profiles (`UniversalHead.for_pool`)."""

    profiles: np.ndarray  # (A, P): row i is agent i's profile vector
    smallest: int = 2
    largest: int = 6

    def draw(self, seed: int, generation: int, task_index: int) -> list[int]:
        rng = np.random.default_rng([seed, generation, task_index, 29])
        n = len(self.profiles)
        size = int(rng.integers(min(self.smallest, n), min(self.largest, n) + 1))
        return sorted(int(i) for i in rng.choice(n, size=size, replace=False))


@dataclass(frozen=True)
class TrainSettings:
    generations: int = 20
    popsize: int = 8
    sigma0: float = 0.03
    batch_size: int = 16
    seed: int = 0
    max_turns: int = 3
    cost_weight: float = 0.0
    project: int | None = None
    budget_usd: float | None = None


@dataclass
class GenerationReport:
    generation: int
    generations: int
    best: float
    mean: float
    std: float
    spent_usd: float
    seconds: float
    extra: dict[str, float] = field(default_factory=dict)


@dataclass
class TrainResult:
    head: LinearHead
    history: list[dict[str, float]]
    spent_usd: float
    stopped_for_budget: bool
    best_fitness: float
    budget: Budget | None = None  # this run's accounting (spent_usd includes resumed spend)


def starting_head(tasks: Sequence[Task], agent_names: Sequence[str], coordinator: Any, project: int | None) -> LinearHead:
    """Zero weights, with normalisation (and a whitened PCA basis) from pipeline transcripts.

    The statistics come from the states of the first turns of pipeline transcripts of training
    tasks, so first-turn states sit off-centre and a bias-free head can still prefer a role.
    """
    states = [
        coordinator.encode(transcript).hidden
        for task in tasks[:STATS_TASKS]
        for transcript in pipeline_transcripts(task, agent_names, STATS_TURNS)
    ]
    matrix = np.asarray(states, dtype=np.float64)
    mean, std = matrix.mean(axis=0), matrix.std(axis=0) + 1e-6
    n_outputs = len(agent_names) + N_ROLES
    if project is None:
        return LinearHead(np.zeros((n_outputs, matrix.shape[1])), mean, std)
    z = (matrix - mean) / std
    _, singular, vt = np.linalg.svd(z - z.mean(axis=0), full_matrices=False)
    k = min(project, len(singular))
    basis = vt[:k] * (np.sqrt(len(z)) / np.maximum(singular[:k], 1e-9))[:, None]  # unit variance: (K, d)
    return LinearHead(np.zeros((n_outputs, k)), mean, std, basis)


def batch_for(tasks: Sequence[Task], settings: TrainSettings, generation: int) -> list[int]:
    rng = np.random.default_rng([settings.seed, generation, 17])
    size = min(settings.batch_size, len(tasks))
    return sorted(int(i) for i in rng.choice(len(tasks), size=size, replace=False))


def train(
    tasks: Sequence[Task],
    agents: Sequence[Any],
    coordinator: Any,
    grader: Grader,
    settings: TrainSettings,
    checkpoint_file: Path,
    *,
    resume: bool = False,
    fingerprint: dict[str, Any] | None = None,
    on_generation: Callable[[GenerationReport], None] = lambda report: None,
    stop_after: int | None = None,
    workers: int = 1,
    start_head: Any = None,
    pools: PoolDraws | None = None,
    expected: bool = False,
    runner: Runner | None = None,
) -> TrainResult:
    """Run (or resume) the ask/tell loop; `stop_after` ends early after that generation.

    `start_head` replaces the zero LinearHead (the universal head brings its basis); `pools`
    draws each episode's pool; `expected` scores expected passes (fitness.py). `runner` plays
    the episodes (default: here, `workers` at a time). Neither changes the result, so neither
    is part of the fingerprint."""
    from cmaes import SepCMA

    fingerprint = {**(fingerprint or {}), **asdict(settings), "tasks": [t.task_id for t in tasks]}
    names = [a.name for a in agents]
    if resume:
        state = checkpoint.load(checkpoint_file, fingerprint)
        start = state["start_head"]
    else:
        start = start_head or starting_head(tasks, names, coordinator, settings.project)
        optimizer = SepCMA(
            mean=start.flat.copy(), sigma=settings.sigma0,
            population_size=settings.popsize, seed=settings.seed,
        )
        state = {"fingerprint": fingerprint, "optimizer": optimizer, "generation": 0, "history": [],
                 "best": (-np.inf, start.flat.copy()), "spent_usd": 0.0, "start_head": start}
    optimizer = state["optimizer"]
    budget = Budget(settings.budget_usd, state["spent_usd"])
    runner = runner or LocalRunner(Players(agents, grader, {CURRENT_FORMAT.id: coordinator}), workers)
    stopped_for_budget = False
    for generation in range(state["generation"], settings.generations):
        began = time.perf_counter()
        optimizer.reseed_rng(settings.seed * 100_003 + generation)
        candidates = [optimizer.ask() for _ in range(optimizer.population_size)]
        heads = [start.with_weights(x) for x in candidates]
        batch = batch_for(tasks, settings, generation)
        episodes = []
        for task_index in batch:  # task-major: the KV prefix and memo serve all candidates
            drawn = None if pools is None else pools.draw(settings.seed, generation, task_index)
            episodes += [
                Episode(tasks[task_index], head if drawn is None else head.for_pool(pools.profiles[drawn]),  # type: ignore[union-attr]
                        settings.max_turns, None if drawn is None else tuple(drawn), CURRENT_FORMAT.id,
                        (settings.seed, generation, c, task_index))
                for c, head in enumerate(heads)
            ]
        played: list[Outcome] = runner.map(episodes, budget)
        if any(outcome.verdict == "budget" for outcome in played):  # never tell the optimizer a partial population
            stopped_for_budget = True
            break
        outcomes = [played[c::len(candidates)] for c in range(len(candidates))]
        scores = [fitness(o, settings.cost_weight, expected) for o in outcomes]
        optimizer.tell([(x, -f) for x, f in zip(candidates, scores)])
        best = int(np.argmax(scores))
        if scores[best] > state["best"][0]:
            state["best"] = (scores[best], candidates[best].copy())
        row = {"generation": generation + 1, "best": max(scores), "mean": float(np.mean(scores)),
               "std": float(np.std(scores)), "spent_usd": budget.spent_usd}
        state["history"].append(row)
        state["generation"] = generation + 1
        state["spent_usd"] = budget.spent_usd
        checkpoint.save(checkpoint_file, state)
        on_generation(GenerationReport(generation + 1, settings.generations, row["best"], row["mean"],
                                       row["std"], budget.spent_usd, time.perf_counter() - began))
        if stop_after is not None and generation + 1 >= stop_after:
            break
    final = start.with_weights(np.asarray(optimizer.mean, dtype=np.float64))
    return TrainResult(final, state["history"], budget.spent_usd, stopped_for_budget,
                       float(state["best"][0]), budget)

"""`trinity train`: evolve the routing head with sep-CMA-ES, cmaes-style ask → evaluate → tell.

1. **Where the search starts: a hand-built plan.** `best-fixed` (train/fixed.py: the best
   sequence of Worker answers with the cheapest Verifier between them) is chosen on the
   training tasks, and the starting head is ridge-fitted to play it, padded with Verifier
   turns to `max_turns`, from the coordinator's real states along its episodes (`plan_start`;
   the head's standardisation and whitened K-component basis come from those states too; the
   plan itself is in the weights of the turn indicators, so the start plays it on any task). So
   the search looks for deviations from a plan that already works, instead of spending its
   generations learning that a Verifier needs an answer first.
2. **Exact fitness.** Candidates play greedily on the episode trees of train/tree.py: every
   candidate on every task of its batch (by default all the training tasks) each generation,
   scored without sampling noise, each distinct state encoded and each reply made once.
   fitness = mean expected pass − cost_weight × mean $ per task (train/fitness.py).
3. cmaes *minimizes*: we tell it −fitness. Its RNG is reseeded from (seed, generation) each
   generation and the state checkpointed after every tell, with the tree nodes the run has
   paid for (a resumed run makes them again free of charge), so resume is exact, spend
   included. The head returned is the final mean if it scores above the start on the training
   tasks, else the start: a move that gains nothing there (CMA-ES drifts on a plateau) would only
   change choices on tasks nobody scored.

The paper's settings: σ0 = 0.03, population ≈ 32, 60 generations, 16 tasks per candidate
(≈31k episodes); the tree makes paper scale a matter of seconds once its states are encoded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import BUDGET, step_from
from trinity_cli.core.head import N_ROLES, LinearHead, PlanPolicy
from trinity_cli.core.transcript import CURRENT_FORMAT
from trinity_cli.errors import BudgetExceeded
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import Task
from trinity_cli.train import checkpoint
from trinity_cli.train.fitness import Outcome, fitness
from trinity_cli.train.fixed import FixedPlan, choose, describe, padded, play_family, routed
from trinity_cli.train.imitate import fit_steps, input_space
from trinity_cli.train.runner import Episode, LocalRunner, Players, Runner
from trinity_cli.train.tree import Forest


@dataclass(frozen=True)
class PoolDraws:
    """Universal training: each episode plays a pool drawn from the training agents (sizes
    `smallest`..`largest`), the same draws for every candidate of a generation; the head is
    bound to the drawn agents' profiles (`UniversalHead.for_pool`)."""

    profiles: np.ndarray  # (A, P): row i is agent i's profile vector
    smallest: int = 2
    largest: int = 6

    def draw(self, seed: int, generation: int, task_index: int) -> list[int]:
        """Generation `generation`'s pool for the task (the start and the final mean are scored on
        the draws of the generation after the last)."""
        rng = np.random.default_rng([seed, generation, task_index, 29])
        n = len(self.profiles)
        size = int(rng.integers(min(self.smallest, n), min(self.largest, n) + 1))
        return sorted(int(i) for i in rng.choice(n, size=size, replace=False))

    def episode(
        self, task: Task, head: Any, max_turns: int, transcript_format: str | None, drawn: list[int]
    ) -> Episode:
        return Episode(
            task, head.for_pool(self.profiles[drawn]), max_turns, tuple(drawn), transcript_format
        )


@dataclass(frozen=True)
class TrainSettings:
    generations: int = 30
    popsize: int = 16
    sigma0: float = 0.2
    batch_size: int | None = None  # tasks a generation; None: all
    seed: int = 0
    max_turns: int = 5
    cost_weight: float = 0.0
    project: int | None = 8
    budget_usd: float | None = None
    # the start plays best-fixed on every task, or the plan `routed` reads from each
    imitate: str = "best-fixed"


IMITATE = ("best-fixed", "routed")


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


@dataclass(frozen=True)
class Start:
    """Where the search started: best-fixed, and how well the head fitted to imitate it (or each
    task's best plan) plays what it imitates."""

    head: Any
    plan: FixedPlan | None  # best-fixed; None: a start given by the caller (the universal head)
    agreement: float  # share of the imitated decisions on the training tasks the start head repeats
    fitness: float  # the start head's, on the training tasks
    plan_fitness: float  # what it imitates (padded with Verifier turns), on the same tasks
    spent_usd: float = 0.0  # the run's spend when the search began

    def as_json(self, agents: Sequence[Any]) -> dict[str, Any]:
        return {
            "plan": None if self.plan is None else describe(self.plan.plan, agents),
            "plan_fitness": self.plan_fitness, "fitness": self.fitness, "agreement": self.agreement,
        }


@dataclass
class TrainResult:
    head: Any
    history: list[dict[str, float]]
    spent_usd: float
    stopped_for_budget: bool
    best_fitness: float
    start: Start
    fitness: float  # the returned head's, on the training tasks (nan when stopped for budget)
    budget: Budget | None = None  # this run's accounting (spent_usd includes resumed spend)
    episodes: int = 0  # played by the search (start and final scoring not counted)
    # the search's mean did not beat its start on the training tasks: the head is the start
    kept_start: bool = False


def batch_for(tasks: Sequence[Task], settings: TrainSettings, generation: int) -> list[int]:
    if settings.batch_size is None or settings.batch_size >= len(tasks):
        return list(range(len(tasks)))
    rng = np.random.default_rng([settings.seed, generation, 17])
    return sorted(int(i) for i in rng.choice(len(tasks), size=settings.batch_size, replace=False))


def score(
    forest: Forest, head: Any, tasks: Sequence[Task], max_turns: int, budget: Budget | None,
    cost_weight: float, pools: PoolDraws | None = None, seed: int = 0, generation: int = 0,
) -> tuple[float, list[Outcome]]:
    """A policy's fitness on `tasks`, greedy, on the forest (BudgetExceeded when refused); with
    `pools`, each task on its pool drawn for (seed, generation)."""
    if pools is None:
        episodes = [Episode(t, head, max_turns, None, forest.transcript_format) for t in tasks]
    else:
        episodes = [
            pools.episode(
                t, head, max_turns, forest.transcript_format, pools.draw(seed, generation, i)
            )
            for i, t in enumerate(tasks)
        ]
    outcomes = forest.play(episodes, budget)
    refused(outcomes, budget)
    return fitness(outcomes, cost_weight), outcomes


def refused(outcomes: Sequence[Outcome], budget: Budget | None) -> None:
    if any(o.verdict == BUDGET for o in outcomes):
        raise BudgetExceeded(
            (budget.refusal if budget else None) or "--budget-usd: a call was refused"
        )


def plan_start(
    forest: Forest, tasks: Sequence[Task], agents: Sequence[Any], settings: TrainSettings,
    budget: Budget | None,
) -> Start:
    """`best-fixed` on `tasks`, and the head fitted to play it on every task, or with
    `imitate = "routed"` the plan read from each task's problem (fixed.routed), padded with
    Verifier turns to the limit, on the states along those episodes (module docstring, step 1)."""
    n = len(agents)
    plans, outcomes = play_family(
        lambda episodes: _played(forest, episodes, budget), tasks, agents, settings.max_turns
    )
    chosen = choose(plans, outcomes, settings.cost_weight)
    targets = [chosen.plan] * len(tasks)
    if settings.imitate == "routed":
        problems, played = forest.trail(
            [Episode(task, PlanPolicy(n, chosen.plan), 1) for task in tasks], budget
        )
        refused(played, budget)
        roots = np.asarray([trail[0][0].hidden for trail in problems])
        space = input_space(roots, n + N_ROLES, settings.project)
        targets = routed(
            plans, outcomes, np.asarray([space.features(h) for h in roots]), chosen.plan,
            settings.cost_weight,
        )
    episodes = [
        Episode(task, PlanPolicy(n, padded(plan, agents, settings.max_turns)), settings.max_turns)
        for task, plan in zip(tasks, targets)
    ]
    trails, played = forest.trail(episodes, budget)
    refused(played, budget)
    states = np.asarray([node.hidden for trail in trails for node, _ in trail])
    steps = [step for trail in trails for _, step in trail]
    turns = [node.state.next_turn for trail in trails for node, _ in trail]
    space = input_space(
        states, n + N_ROLES, settings.project, turns, turn_features=settings.max_turns
    )
    head = fit_steps(space, states, steps, turns)
    start_fitness, _ = score(forest, head, tasks, settings.max_turns, budget, settings.cost_weight)
    return Start(
        head, chosen, agreement_masked(head, trails), start_fitness,
        fitness(played, settings.cost_weight), budget.spent_usd if budget else 0.0,
    )


def agreement_masked(head: LinearHead, trails: Sequence[Sequence[Any]]) -> float:
    """The share of the plan's decisions the head repeats, as the loop chooses (mask applied)."""
    pairs = [(node, step) for trail in trails for node, step in trail]
    hits = 0
    for node, (agent, role) in pairs:
        pick = step_from(node.state, head.choose(node.hidden, node.state.next_turn))
        hits += (pick.agent, pick.role) == (agent, role)
    return hits / len(pairs) if pairs else 1.0


def _played(forest: Forest, episodes: Sequence[Episode], budget: Budget | None) -> list[Outcome]:
    outcomes = forest.play(episodes, budget)
    refused(outcomes, budget)
    return outcomes


def new_forest(
    agents: Sequence[Any], coordinator: Any, grader: Grader, max_turns: int, workers: int = 1,
    runner: Runner | None = None,
) -> Forest:
    """The episode trees of a run (here, `workers` units at a time, unless a runner is given)."""
    sequential = runner is None and workers == 1
    runner = runner or LocalRunner(
        Players(agents, grader, {CURRENT_FORMAT.id: coordinator}), workers
    )
    return Forest(runner, max_turns, CURRENT_FORMAT.id, task_at_a_time=sequential)


def train(
    tasks: Sequence[Task], agents: Sequence[Any], coordinator: Any, grader: Grader,
    settings: TrainSettings, checkpoint_file: Path | None, *, resume: bool = False,
    fingerprint: dict[str, Any] | None = None,
    on_generation: Callable[[GenerationReport], None] = lambda report: None,
    stop_after: int | None = None, workers: int = 1, start_head: Any = None,
    pools: PoolDraws | None = None, runner: Runner | None = None, forest: Forest | None = None,
    budget: Budget | None = None, on_start: Callable[[Start], None] = lambda start: None,
) -> TrainResult:
    """Run (or resume) the ask/tell loop, checkpointed to `checkpoint_file` (None: not at all);
    `stop_after` ends early after that generation.

    `start_head` replaces the plan start (the universal head brings its own); `pools` draws
    each episode's pool. `runner` grows the trees (default: here, `workers` units at a time)
    and `forest` shares them with another run on the same agents (cross-validation folds);
    neither changes the result, so neither is part of the fingerprint. `budget` is the run's
    (default: one of `settings.budget_usd`; a resumed run adds what its checkpoint spent). A
    refusal before the search began raises BudgetExceeded; during it, training stops with the
    head of the last full generation. `on_start` hears where the search starts."""
    from cmaes import SepCMA

    fingerprint = {**(fingerprint or {}), **asdict(settings), "tasks": [t.task_id for t in tasks]}
    forest = forest or new_forest(agents, coordinator, grader, settings.max_turns, workers, runner)
    budget = budget or Budget(settings.budget_usd)

    def training_fitness(head: Any) -> float:
        """On all the training tasks (with pools: the draws of the generation after the last)."""
        return score(
            forest, head, tasks, settings.max_turns, budget, settings.cost_weight, pools,
            settings.seed, settings.generations,
        )[0]

    if resume:
        if checkpoint_file is None:
            raise ValueError("resume needs a checkpoint file")
        state = checkpoint.load(checkpoint_file, fingerprint)
        budget.spent_usd += state["spent_usd"]
        start = state["start"]
        forest.restore(state["made"], tasks)
    else:
        start = (
            plan_start(forest, tasks, agents, settings, budget)
            if start_head is None
            else Start(
                start_head, None, 1.0, training_fitness(start_head), float("nan"), budget.spent_usd
            )
        )
        optimizer = SepCMA(
            mean=start.head.flat.copy(), sigma=settings.sigma0, population_size=settings.popsize,
            seed=settings.seed,
        )
        state = {
            "fingerprint": fingerprint, "optimizer": optimizer, "generation": 0, "history": [],
            "best": (-np.inf, start.head.flat.copy()), "spent_usd": budget.spent_usd,
            "start": start, "made": list(forest.made),
        }
    on_start(start)
    optimizer = state["optimizer"]
    stopped_for_budget = False
    episodes_played = 0
    for generation in range(state["generation"], settings.generations):
        began = time.perf_counter()
        optimizer.reseed_rng(settings.seed * 100_003 + generation)
        candidates = [optimizer.ask() for _ in range(optimizer.population_size)]
        heads = [start.head.with_weights(x) for x in candidates]
        episodes = []
        # task-major: one KV prefix per task
        for task_index in batch_for(
            tasks, settings, generation
        ):
            task = tasks[task_index]
            if pools is None:
                episodes += [
                    Episode(task, head, settings.max_turns, None, forest.transcript_format)
                    for head in heads
                ]
            else:
                drawn = pools.draw(settings.seed, generation, task_index)
                episodes += [
                    pools.episode(task, head, settings.max_turns, forest.transcript_format, drawn)
                    for head in heads
                ]
        played = forest.play(episodes, budget)
        # never tell the optimizer a partial population
        if any(
            outcome.verdict == BUDGET for outcome in played
        ):
            stopped_for_budget = True
            break
        episodes_played += len(played)
        scores = [
            fitness(played[c :: len(candidates)], settings.cost_weight)
            for c in range(len(candidates))
        ]
        optimizer.tell([(x, -f) for x, f in zip(candidates, scores)])
        best = int(np.argmax(scores))
        if scores[best] > state["best"][0]:
            state["best"] = (scores[best], candidates[best].copy())
        row = {
            "generation": generation + 1, "best": max(scores), "mean": float(np.mean(scores)),
            "std": float(np.std(scores)), "spent_usd": budget.spent_usd,
        }
        state["history"].append(row)
        state["generation"] = generation + 1
        state["spent_usd"] = budget.spent_usd
        state["made"] = list(forest.made)
        if checkpoint_file is not None:
            checkpoint.save(checkpoint_file, state)
        on_generation(
            GenerationReport(
                generation + 1, settings.generations, row["best"], row["mean"], row["std"],
                budget.spent_usd, time.perf_counter() - began,
            )
        )
        if stop_after is not None and generation + 1 >= stop_after:
            break
    final = start.head.with_weights(np.asarray(optimizer.mean, dtype=np.float64))
    final_fitness = float("nan")
    if not stopped_for_budget:
        try:
            final_fitness = training_fitness(final)
        except BudgetExceeded:
            stopped_for_budget = True
    kept_start = final_fitness <= start.fitness  # False when either is nan
    if kept_start:
        final, final_fitness = start.head, start.fitness
    return TrainResult(
        final, state["history"], budget.spent_usd, stopped_for_budget, float(state["best"][0]),
        start, final_fitness, budget, episodes_played, kept_start,
    )

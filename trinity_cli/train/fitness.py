"""Playing tasks with a policy and scoring the answers: what train and eval both measure.

fitness(policy) = mean expected pass over the tasks played − cost_weight × mean $ per task
(cost_weight defaults to 0, as in the paper). A task passes when its latest Worker answer passes
the task's tests, whatever the verdict; `no_answer` scores 0.

Expected pass: where the final answer came from a replay agent's pass-rate entry (EvalPerf) and was
the episode's last turn, its recorded probability; elsewhere the pass itself. It removes the
sampling noise of the last draw, and only of that one: an answer a later turn saw (a Verifier's
ACCEPT, the coordinator's next decision) steered the episode, so its draw is not independent of the
path and the probability would be biased (an accepted answer would count p instead of 1, which
scores verification as worthless). The last turn's draw is independent of everything before it, so
E[pass | path] is exactly its probability: the estimate is unbiased at any `max_turns`, and with one
turn it is the recorded probability itself. Training and best-fixed score expected passes (the pass
itself for every other answer). Such an answer passes when it is one of the record's correct
programs: the replay returns one exactly when its draw passed (a failing draw is a mutant the grader
saw fail), so this is the grade the tests would give, with no sandbox run, and it grades tasks
without tests too (their mutants are unverified).

Episodes are independent given their seeds, so `in_parallel` runs several at once on threads:
their agents' network waits overlap, while the coordinator and local models take turns (each
holds a lock). Exact prefix reuse makes every hidden state the same in any order, so with
deterministic agents (or a warm response cache) the results do not depend on the number of
workers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from trinity_cli.core.budget import Budget
from trinity_cli.core.episode import BUDGET, Agent, run_episode
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import Task


@dataclass(frozen=True)
class Outcome:
    passed: bool
    usd: float
    turns: int
    verdict: str
    expected: float = 0.0  # see the module docstring


def play(
    task: Task, agents: Sequence[Agent], coordinator: Any, policy: Any, grader: Grader, *,
    max_turns: int, sample_seed: Sequence[int] | None = None, budget: Budget | None = None,
) -> Outcome:
    result = run_episode(
        task.problem, agents, coordinator, policy, max_turns=max_turns, sample_seed=sample_seed,
        budget=budget,
    )
    return outcome_of(task, agents, result.verdict, result.turns, result.answer, result.usd, grader)


def outcome_of(
    task: Task, agents: Sequence[Agent], verdict: str, turns: Sequence[Any], answer: str | None,
    usd: float, grader: Grader,
) -> Outcome:
    """An episode's score: its final answer graded (or its recorded grade); 0 when the budget
    ended it."""
    recorded = None if verdict == BUDGET else recorded_grade(agents, turns, task)
    if recorded is not None:
        expected, passed = recorded
    else:
        passed = verdict != BUDGET and grader.passes(task, answer)
        expected = float(passed)
    return Outcome(passed, usd, len(turns), verdict, expected)


def recorded_grade(
    agents: Sequence[Agent], turns: Sequence[Any], task: Task
) -> tuple[float, bool] | None:
    """(expected pass, drawn pass) of the final answer, when a replay agent's pass-rate entry
    made it: the expected pass is its probability when no later turn saw it (module docstring)."""
    answering = [t for t in turns if t.answer is not None]
    if not answering:
        return None
    by_name = {a.name: a for a in agents}
    grade = getattr(by_name[answering[-1].decision.agent].provider, "recorded_grade", None)
    recorded = None if grade is None else grade(task.task_id, answering[-1].answer)
    if recorded is None:
        return None
    probability, passed = recorded
    return (probability if answering[-1] is turns[-1] else float(passed)), passed


def fitness(outcomes: Sequence[Outcome], cost_weight: float = 0.0) -> float:
    n = len(outcomes)
    return sum(o.expected for o in outcomes) / n - cost_weight * sum(o.usd for o in outcomes) / n


T = TypeVar("T")


def in_parallel(calls: Sequence[Callable[[], T]], workers: int) -> list[T]:
    """Each call's result, in order; up to `workers` at once."""
    if workers <= 1 or len(calls) <= 1:
        return [call() for call in calls]
    pool = ThreadPoolExecutor(min(workers, len(calls)), thread_name_prefix="trinity-episode")
    try:
        return [future.result() for future in [pool.submit(call) for call in calls]]
    finally:  # on Ctrl-C or an error, start nothing more (the CLI does not wait for the rest)
        pool.shutdown(wait=False, cancel_futures=True)

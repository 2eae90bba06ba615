"""Learning on a recorded pool: the documented synthetic record of
`support/learnable_record.py`, the real Gemma coordinator, real grading. Trained on its train
split, scored once on its test split: the head must beat its best single agent by 2 standard
errors, and the permuted-state control (same head training, each task reading another task's
state) must not."""

from __future__ import annotations

import pytest
from support.learnable_record import (
    MODELS,
    family,
    learnable_tasks,
    program,
    right,
    write_learnable,
)
from support.learning import chosen_settings, train_and_score

from trinity_cli.coordinator.permuted import PermutedCoordinator
from trinity_cli.pool.spec import load_pool
from trinity_cli.providers.cache import ResponseStore
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import select_split

# one Worker turn, as on the simulated pool: the settings its validation slice chose there
# (tests/learning_settings.json), never tuned on this record
SETTINGS = chosen_settings()


@pytest.fixture(scope="module")
def learnable(tmp_path_factory, memo):
    root = tmp_path_factory.mktemp("learnable")
    _, pool = write_learnable(root)
    tasks = learnable_tasks()
    grader = Grader(root / "grades.sqlite")
    train, test = select_split(tasks, "train"), select_split(tasks, "test")

    def run(coordinator, name):
        return train_and_score(
            load_pool(str(pool)), tasks, train, test, coordinator, grader, SETTINGS,
            root / f"{name}.ckpt", ResponseStore(root / "responses.sqlite"),
        )

    return {
        "tasks": tasks, "test": test, "grader": grader, "trained": run(memo, "trained"),
        "permuted": run(PermutedCoordinator(memo, tasks), "permuted"),
    }


def test_the_record_is_what_its_docstring_says(learnable):
    grader = learnable["grader"]
    sample = learnable["tasks"][::6]
    for task in sample:
        expert = "humaneval-expert" if family(task) == "humaneval" else "mbpp-expert"
        assert [m for m in MODELS[:2] if grader.passes(task, program(m, task))] == [expert]
    generalist = sum(program("generalist", t) == right(t) for t in learnable["tasks"]) / len(
        learnable["tasks"]
    )
    assert 0.45 <= generalist <= 0.75


def test_a_head_learns_to_route_a_recorded_pool_and_the_permuted_control_does_not(learnable):
    trained, permuted = learnable["trained"], learnable["permuted"]
    assert len(learnable["test"]) >= 30
    assert trained["best_single_pass_at_1"] <= 0.7  # no single agent solves it
    assert trained["margin_vs_best_single"] >= 2, trained["report"]
    assert permuted["margin_vs_best_single"] < 2, permuted["report"]
    assert trained["pass_at_1"] > permuted["pass_at_1"]

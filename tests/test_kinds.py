"""Routing that reads the task beats the best hand-built plan: the kinds record of
`learnable_record.py` (two models, each right on 90 % of its kind of task and 30 % of the other,
visible tests that catch 80 % of wrong programs, equal prices, three turns), the real Gemma
coordinator, real grading and sandboxed visible tests.

best-fixed (one model, the Verifier, the other) reaches 0.864 there and routing by kind 0.924.
`trinity train`'s own protocol is checked: the search starts where best-fixed is, and 5-fold
cross-validation over the train split (best-fixed re-chosen in each fold) must find the head
≥ 2 standard errors above it on the tasks each fold held out; the test split, scored once,
must agree. And best-fixed is chosen where it must be: a plan planted to be best only on the
eval split is never the one chosen."""

from __future__ import annotations

import json

import numpy as np
import pytest
from learnable_record import (
    KIND_MODELS,
    family,
    kind_program,
    kind_tasks,
    right,
    sly,
    write_kinds,
    wrong,
)
from test_cli import trinity

from trinity_cli.config import load_pool
from trinity_cli.core.head import PlanPolicy
from trinity_cli.core.roles import Role
from trinity_cli.providers.cache import ResponseStore
from trinity_cli.providers.registry import build_agents
from trinity_cli.providers.replay import visible_test_verdict
from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.taskset import load_humaneval, select_split
from trinity_cli.train.baselines import FixedOn, HeadUnderTest, evaluate, paired_margin
from trinity_cli.train.crossval import cross_validate
from trinity_cli.train.es import TrainSettings, new_forest, train
from trinity_cli.train.runner import Episode

# fixed before any run on this record
SETTINGS = TrainSettings(generations=20, popsize=16, sigma0=0.5, max_turns=3, project=8)
FOLDS = 5


@pytest.fixture(scope="module")
def kinds(tmp_path_factory, memo):
    root = tmp_path_factory.mktemp("kinds")
    pool = write_kinds(root)
    tasks = kind_tasks()
    train_split, test_split = select_split(tasks, "train"), select_split(tasks, "test")
    agents = build_agents(load_pool(str(pool)).agents, tasks, ResponseStore(root / "responses.sqlite"))
    grader = Grader(root / "grades.sqlite")
    forest = new_forest(agents, memo, grader, SETTINGS.max_turns)
    trained = train(train_split, agents, memo, grader, SETTINGS, root / "head.ckpt", forest=forest)
    validation = cross_validate(train_split, agents, memo, grader, SETTINGS, FOLDS, forest)
    report = evaluate(test_split, agents, [HeadUnderTest("trained", trained.head, memo)], grader,
                      max_turns=SETTINGS.max_turns, baselines=("single", "best-fixed"), fixed_on=FixedOn(train_split))
    return {"tasks": tasks, "train": train_split, "test": test_split, "agents": agents, "grader": grader,
            "forest": forest, "trained": trained, "validation": validation, "report": report,
            "rows": {r.policy: r for r in report.pop("_rows")}}


def test_the_record_is_what_its_comment_says(kinds):
    tasks, grader = kinds["tasks"], kinds["grader"]
    for task in tasks[::25]:  # the three kinds of program do what they are for
        assert grader.passes(task, right(task)) and "<verdict>ACCEPT" in visible_test_verdict(task, right(task))
        assert not grader.passes(task, sly(task)) and "<verdict>ACCEPT" in visible_test_verdict(task, sly(task))
        assert not grader.passes(task, wrong(task)) and "<verdict>REJECT" in visible_test_verdict(task, wrong(task))
    for model, strong in zip(KIND_MODELS, ("humaneval", "mbpp")):
        for kind, rate in ((strong, 0.9), ({"humaneval": "mbpp", "mbpp": "humaneval"}[strong], 0.3)):
            of_kind = [t for t in tasks if family(t) == kind]
            assert abs(np.mean([kind_program(model, t) == right(t) for t in of_kind]) - rate) < 0.08
    wrongs = [kind_program(m, t) for m in KIND_MODELS for t in tasks if kind_program(m, t) != right(t)]
    assert abs(np.mean([p.endswith("raise NotImplementedError\n") for p in wrongs]) - 0.8) < 0.06


def test_the_search_starts_from_best_fixed_and_its_start_head_plays_it(kinds):
    start = kinds["trained"].start
    assert start.plan.plan in (((0, Role.WORKER), (1, Role.VERIFIER), (1, Role.WORKER)),
                               ((1, Role.WORKER), (0, Role.VERIFIER), (0, Role.WORKER)))
    assert 0.8 < start.plan.pass_at_1 < 0.92  # 0.864 in expectation
    assert start.agreement == 1.0  # every decision of the plan, on every training task
    assert start.fitness == start.plan_fitness
    forest, plan = kinds["forest"], PlanPolicy(2, start.plan.plan)
    for task in kinds["train"]:  # the same steps, task by task
        head_steps = [step for _, step in forest.steps(Episode(task, start.head, 3, None, forest.reader))]
        assert head_steps == [step for _, step in forest.steps(Episode(task, plan, 3))]


def test_a_head_that_reads_the_task_beats_best_fixed_on_held_out_tasks(kinds):
    validation, rows = kinds["validation"], kinds["rows"]
    assert len(validation.task_ids) == len(kinds["train"]) >= 150
    assert validation.margin_se >= 2, validation.as_json()
    assert validation.differing >= 20  # it routes: its choices differ from the plan's on many tasks
    assert not validation.below_start
    margin = paired_margin(rows["trained"].passes, rows["best-fixed"].passes)
    assert rows["trained"].pass_at_1 > rows["best-fixed"].pass_at_1 and margin >= 1, kinds["report"]
    assert kinds["report"]["best_fixed"]["train_tasks"] == len(kinds["train"])


def test_a_plan_best_only_on_the_eval_split_is_never_chosen_as_best_fixed(workdir):
    """`planted` answers right exactly on the test split's tasks, and the Verifier passes
    everything; on the train split `steady` is best. eval must choose best-fixed on train."""
    tasks = load_humaneval()[:24]
    test_ids = {t.task_id for t in select_split(tasks, "test")}
    lines = [{"model": "planted", "task_id": t.task_id, "code": right(t) if t.task_id in test_ids else wrong(t)}
             for t in tasks]
    lines += [{"model": "steady", "task_id": t.task_id, "code": right(t) if i % 3 else wrong(t)}
              for i, t in enumerate(tasks)]
    (workdir / "planted.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (workdir / "tasks.jsonl").write_text("".join(json.dumps(
        {"task_id": t.task_id, "prompt": t.prompt, "entry_point": t.entry_point, "test": t.test,
         "canonical_solution": t.canonical_solution}) + "\n" for t in tasks))
    (workdir / "pool.toml").write_text("".join(
        f'[[agents]]\nname = "{m}"\nprovider = "replay"\nrecord = "planted.jsonl"\nmodel = "{m}"\n'
        f'roles = ["worker"]\nprice_in = 1.0\nprice_out = 1.0\n\n' for m in ("planted", "steady")))
    result = trinity("eval", "--weights", "none", "--tasks", "tasks.jsonl", "--pool", "pool.toml", "--max-turns", "3",
                     "--baselines", "single,best-fixed", "--json", "--no-log", "--no-cache")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = {r["policy"]: r for r in report["rows"]}
    assert rows["single:planted"]["pass_at_1"] == 1.0 > rows["single:steady"]["pass_at_1"]
    assert report["best_fixed"]["plan"] == [["steady", "worker"]]
    assert rows["best-fixed"]["pass_at_1"] == rows["single:steady"]["pass_at_1"]
    assert report["best_fixed"]["train_tasks"] == len(tasks) - len(test_ids)

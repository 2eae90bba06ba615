"""The baselines a skeptical user compares a head with, through the CLI on a small recorded pool:
`loop:<agent>` and `best-fixed` (chosen on the train split, played on the eval split), the
plan `train` saves beside its head (a routing policy `solve` and `eval` take), `--baselines`,
`--cost-weight` and `eval --dry-run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import assert_clean_failure, trinity
from support.tasks import write_tasks

from trinity_cli.cli.train import DEFAULTS
from trinity_cli.tasks.taskset import Task, load_humaneval, select_split

TASKS = load_humaneval()[:12]
TRAIN, TEST = select_split(TASKS, "train"), select_split(TASKS, "test")  # 9 and 3


def right(task: Task) -> str:
    return (task.prompt + (task.canonical_solution or "")).strip() + "\n"


def wrong(task: Task) -> str:
    return task.prompt.strip() + "\n    raise NotImplementedError\n"  # fails every visible test


@pytest.fixture()
def recorded(workdir: Path) -> Path:
    """`cheap` answers wrong on every other task and right in its repair round; `dear` is right
    everywhere at 20-30 times the price; both may answer and verify."""
    lines = []
    for i, task in enumerate(TASKS):
        lines += [
            {
                "model": "cheap", "task_id": task.task_id,
                "code": right(task) if i % 2 else wrong(task),
            },
            {"model": "cheap", "task_id": task.task_id, "code": right(task), "round": 1},
            {"model": "dear", "task_id": task.task_id, "code": right(task)},
        ]
    (workdir / "rec.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    write_tasks(workdir / "tasks.jsonl", TASKS, "visible_tests")
    (workdir / "pool.toml").write_text(
        "".join(
            f'[[agents]]\nname = "{name}"\nprovider = "replay"\n'
            f'record = "rec.jsonl"\nmodel = "{name}"\n'
            f"price_in = {price_in}\nprice_out = {price_out}\n\n"
            for name, price_in, price_out in (("cheap", 0.5, 1.0), ("dear", 10.0, 30.0))
        )
    )
    return workdir


FLAGS = ["--tasks", "tasks.jsonl", "--pool", "pool.toml", "--no-log"]
LOOP_CHEAP = [["cheap", "worker"], ["cheap", "verifier"], ["cheap", "worker"]]


@pytest.fixture()
def trained(recorded: Path) -> Path:
    result = trinity(
        "train", *FLAGS, "--out", "head.npz", "--max-turns", "3", "--generations", "1", "--popsize",
        "2", "--project", "2", "--folds", "0", "--cost-weight", "2.5", "-q", cwd=recorded,
    )
    assert result.returncode == 0, result.stderr
    return recorded


def test_eval_compares_with_loop_and_best_fixed_chosen_on_the_train_split(trained):
    result = trinity("eval", *FLAGS, "--weights", "head-plan.npz", "--json", cwd=trained)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = {r["policy"]: r for r in report["rows"]}
    assert report["max_turns"] == 3  # the head's, as trained
    assert {"loop:cheap", "loop:dear", "best-fixed"} <= set(rows)
    # the repair round passes
    assert (
        rows["single:cheap"]["pass_at_1"] < 1.0 == rows["loop:cheap"]["pass_at_1"]
    )
    # every plan passes every train task but the lone cheap answer; the cheapest of those is
    # cheap's own loop
    assert report["best_fixed"] == {
        "plan": LOOP_CHEAP, "train_fitness": report["best_fixed"]["train_fitness"],
        "train_tasks": len(TRAIN), "cost_weight": 2.5,
    }
    assert 0.9 < report["best_fixed"]["train_fitness"] < 1.0  # pass@1 1.0 less 2.5 × its small $
    # the same plan, played the same
    assert rows["best-fixed"] == {
        **rows["loop:cheap"], "policy": "best-fixed",
    }
    # the plan train saved is best-fixed at the head's cost weight: the same row, and no margin
    # between them
    assert (
        rows["trained"] == {**rows["best-fixed"], "policy": "trained"}
        and rows["trained"]["pass_at_1"] == 1.0
    )
    assert report["paired_margin_se"]["vs_best_fixed"] == 0.0  # no task where they differ
    table = trinity("eval", *FLAGS, "--weights", "head-plan.npz", cwd=trained)
    assert (
        "best-fixed: cheap worker → cheap verifier → cheap worker (chosen on 9 train-split tasks"
        in " ".join(table.stderr.split())
    )
    weighted = json.loads(
        trinity(
            "eval", *FLAGS, "--weights", "head-plan.npz", "--json", "--cost-weight", "0",
            "--baselines", "best-fixed", "--max-turns", "1", cwd=trained,
        ).stdout
    )
    assert weighted["best_fixed"]["cost_weight"] == 0.0 and weighted["max_turns"] == 1
    # one turn: one answer, the one always right
    assert weighted["best_fixed"]["plan"] == [
        ["dear", "worker"]
    ]


def test_solve_routes_with_the_plan_train_saved_beside_its_head(trained):
    meta = json.loads((trained / "head-plan.json").read_text())
    assert meta["kind"] == "plan" and meta["training"]["max_turns"] == 3
    (trained / "p.md").write_text(TASKS[0].prompt)
    result = trinity(
        "solve", "p.md", "--pool", "pool.toml", "--weights", "head-plan.npz", "--json", "--no-log",
        cwd=trained,
    )
    final = json.loads(result.stdout)
    # wrong, rejected, repaired
    assert [
        [t["agent"], t["role"]] for t in final["turns"]
    ] == LOOP_CHEAP
    # no turn left for a Verifier
    assert (
        final["verdict"] == "turn_limit" and final["tests"]["passed"]
    )
    assert result.returncode == 6, result.stderr


def test_baselines_chooses_the_rows_and_a_kind_it_does_not_know_is_exit_2(recorded):
    flags = [*FLAGS, "--weights", "none", "--max-turns", "3", "--json"]
    none = json.loads(trinity("eval", *flags, "--baselines", "none", cwd=recorded).stdout)
    assert [r["policy"] for r in none["rows"]] == ["fallback"] and none["best_fixed"] is None
    some = json.loads(trinity("eval", *flags, "--baselines", "loop,single", cwd=recorded).stdout)
    assert [r["policy"] for r in some["rows"]] == [
        "fallback", "single:cheap", "single:dear", "loop:cheap", "loop:dear",
    ]
    assert_clean_failure(
        trinity("eval", *flags, "--baselines", "loop,oracles", cwd=recorded), 2,
        "--baselines 'loop,oracles': unknown row kind oracles",
    )


def test_eval_limit_takes_the_first_tasks_and_every_baseline_keeps_the_turn_limit(recorded):
    result = trinity(
        "eval", *FLAGS, "--weights", "none", "--max-turns", "2", "--split", "train", "--limit", "4",
        cwd=recorded,
    )
    assert result.returncode == 0, result.stderr
    assert "the first 4 of 9 tasks (--limit)" in result.stderr and "--max-turns 2" in result.stderr
    report = json.loads(
        trinity(
            "eval", *FLAGS, "--weights", "none", "--max-turns", "2", "--split", "train", "--limit",
            "4", "--json", cwd=recorded,
        ).stdout
    )
    assert report["tasks"] == 4 and report["limit"] == 4
    turns = {r["policy"]: r["mean_turns"] for r in report["rows"]}
    assert {"cascade", "loop:cheap", "random"} <= set(turns)
    assert all(t <= 2 for policy, t in turns.items() if not policy.startswith("pipeline:")), turns
    # 2 turns hold one answer: a Verifier after it could change nothing
    assert (
        turns["cascade"] == 1
    )
    # the first 4 training tasks, in the file's order: cheap is wrong on every other one
    assert {r["policy"]: r["pass_at_1"] for r in report["rows"]}["single:cheap"] == 0.5
    # no --weights: the head solve would use, here none fits
    unnamed = json.loads(
        trinity(
            "eval", *FLAGS, "--split", "train", "--limit", "2", "--baselines", "none", "--json",
            cwd=recorded,
        ).stdout
    )
    assert [r["policy"] for r in unnamed["rows"]] == ["fallback"] and unnamed["tasks"] == 2
    line = next(x for x in result.stderr.splitlines() if x.startswith("fallback"))
    best = max(
        (r for r in report["rows"] if r["policy"].startswith(("single:", "pipeline:"))),
        key=lambda r: r["pass_at_1"],
    )
    head_errors, best_errors = 1 - report["rows"][0]["pass_at_1"], 1 - best["pass_at_1"]
    way = (
        "makes no error"
        if best_errors == 0
        else "fewer errors"
        if head_errors < best_errors
        else "more errors"
        if head_errors > best_errors
        else "as many errors"
    )
    assert way in line and best["policy"] in line, (line, report["rows"])
    first = json.loads(
        trinity(
            "eval", *FLAGS, "--weights", "none", "--split", "train", "--limit", "1", "--baselines",
            "single", "--json", cwd=recorded,
        ).stdout
    )
    # task 0, the file's first
    assert {r["policy"]: r["pass_at_1"] for r in first["rows"]}[
        "single:cheap"
    ] == 0.0


def test_eval_dry_run_counts_every_rows_episodes_and_calls_nothing(recorded):
    """Two priced agents behind a loopback address nothing listens on: any call would fail."""
    (recorded / "api.toml").write_text(
        "".join(
            f'[[agents]]\nname = "{name}"\nprovider = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
            f"price_in = {price}\nprice_out = {price}\nmax_tokens = 100\n\n"
            for name, price in (("cheap", 1.0), ("dear", 20.0))
        )
    )
    result = trinity(
        "eval", "--tasks", "tasks.jsonl", "--pool", "api.toml", "--weights", "none", "--max-turns",
        "3", "--dry-run", "--no-log", cwd=recorded,
    )
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    assert lines["fallback"] == "3 episodes" and lines["loop:cheap"] == "3 episodes"
    # best-fixed: the 2 + 4 family plans on the 9 train tasks, then the chosen one on the 3 test
    # tasks
    assert lines["best-fixed"].startswith(f"{6 * 9 + 3} episodes")
    # each Worker alone, then after each Thinker
    assert (
        lines["oracle"] == f"{(2 + 2 * 2) * 3} episodes"
    )
    calls = int(lines["episodes"].split("at most ")[1].split()[0])
    worst = float(lines["worst case"].split()[0].lstrip("$"))
    # every call bounded at max_tokens, at least
    assert (
        calls > 6 * 9 and worst >= calls * 100 * 1.0 / 1e6
    )
    assert lines["dry run"] == "nothing was called or written"


@pytest.mark.parametrize("pool", ["ldb-humaneval", "ldb-mbpp"])
def test_a_recorded_pool_routes_by_default_with_the_head_its_claims_are_about(pool):
    """docs/measurements.md's recorded heads: what `trinity pool` names with no --weights is the
    head `trinity train` made at its defaults (both starts cross-validated, not below its plan),
    trained for the 5 turns solve and eval then default to (test_cli checks that default)."""
    result = trinity("pool", "--pool", pool, "--json")
    assert result.returncode == 0, result.stderr
    head = Path(json.loads(result.stdout)["policy"]["source"])
    assert head.parent.name == "weights" and head.name == f"{pool}.npz"
    training = json.loads(head.with_suffix(".json").read_text())["training"]
    defaults = {
        name: getattr(DEFAULTS, name)
        for name in ("generations", "popsize", "sigma0", "max_turns", "project")
    }
    assert {name: training[name] for name in defaults} == defaults and training["max_turns"] == 5
    assert (
        training["cost_weight"] == 0 and training["folds"] == 5 and training["batch_size"] is None
    )
    assert (
        set(training["starts"]) == {"best-fixed", "routed"}
        and training["imitate"] in training["starts"]
    )
    assert (
        training["below_start"] is False and (training["validation"]["paired_margin_se"] or 0) >= 0
    )

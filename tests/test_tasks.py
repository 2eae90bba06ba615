"""Task sets, the fixed split, scoring by execution, and the simulated pool."""

from __future__ import annotations

import json

import pytest

from trinity_cli.core.provider import Request
from trinity_cli.core.roles import Role, extract_code, parse_verdict
from trinity_cli.errors import TaskFileError
from trinity_cli.pool.spec import parse_pool
from trinity_cli.providers.sim import SimProvider, right_solution, wrong_solution
from trinity_cli.tasks.grading import Grader, run_check
from trinity_cli.tasks.taskset import Task, load_humaneval, read_jsonl, select_split

TASK = Task(
    "t/add", 'def add(a, b):\n    """Sum."""\n', "add",
    "def check(f):\n    assert f(2, 3) == 5\n    assert f(-1, 1) == 0\n", "    return a + b\n",
    ("math",),
)


def test_humaneval_has_164_tagged_tasks_and_a_fixed_split():
    tasks = load_humaneval()
    assert len(tasks) == 164
    assert all(t.tags and t.canonical_solution for t in tasks)
    test = select_split(tasks, "test")
    assert 40 <= len(test) <= 65
    assert [t.task_id for t in test] == [t.task_id for t in select_split(load_humaneval(), "test")]
    assert not {t.task_id for t in test} & {t.task_id for t in select_split(tasks, "train")}


@pytest.mark.parametrize(
    "line,fragment",
    [
        ("{not json", "not valid JSON"), ('["a"]', "must be a JSON object"),
        ('{"task_id": "x", "prompt": "p", "entry_point": "f"}', "field 'test' is missing"),
        (
            '{"task_id": "x", "prompt": "p", "entry_point": "f", "test": "t", "tags": "math"}',
            "'tags' must be a list",
        ),
    ],
)
def test_a_malformed_task_line_names_file_and_line(tmp_path, line, fragment):
    path = tmp_path / "tasks.jsonl"
    good = json.dumps({"task_id": "a", "prompt": "p", "entry_point": "f", "test": "t"})
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(TaskFileError) as caught:
        read_jsonl(path)
    assert f"{path}:2:" in caught.value.message and fragment in caught.value.message
    assert caught.value.exit_code == 2


def test_grading_runs_the_tests_in_a_subprocess(tmp_path):
    assert run_check(TASK, TASK.prompt + TASK.canonical_solution)
    assert not run_check(TASK, TASK.prompt + "    return a - b\n")
    assert not run_check(TASK, TASK.prompt + "    while True:\n        pass\n", timeout_s=1.0)
    assert not run_check(TASK, "import os\nos._exit(3)\n")


def test_grader_caches_by_task_and_answer(tmp_path):
    grader = Grader(tmp_path / "g.sqlite")
    answer = TASK.prompt + TASK.canonical_solution
    assert grader.passes(TASK, answer) and grader.passes(TASK, answer)
    assert grader.runs == 1
    again = Grader(tmp_path / "g.sqlite")
    assert again.passes(TASK, answer) and again.runs == 0
    assert not grader.passes(TASK, None)


def sim_agent(**skills):
    pool = parse_pool(
        '[[agents]]\nname="s"\nprovider="sim"\nmodel="sim"\nverifier_accuracy=1.0\nthinker_boost=0.0\n'
        f"skills = {{ {', '.join(f'{k} = {v}' for k, v in skills.items())} }}\n", "p.toml",
    )
    return SimProvider(pool.agents[0], {TASK.task_id: TASK})


def worker_request(user: str) -> Request:
    return Request(Role.WORKER, "sys", user, task_id=TASK.task_id)


def test_sim_worker_follows_its_skill_and_is_deterministic():
    always, never = sim_agent(math=1.0), sim_agent(math=0.0)
    good = extract_code(always.complete(worker_request("u1")).text)
    bad = extract_code(never.complete(worker_request("u1")).text)
    assert good.strip() == right_solution(TASK).strip() and run_check(TASK, good)
    assert bad.strip() == wrong_solution(TASK).strip() and not run_check(TASK, bad)
    half = sim_agent(math=0.5)
    outcomes = [half.complete(worker_request(f"u{i}")).text for i in range(60)]
    assert outcomes == [half.complete(worker_request(f"u{i}")).text for i in range(60)]
    share = sum("a + b" in o for o in outcomes) / 60
    assert 0.25 < share < 0.75


def test_sim_verifier_with_full_accuracy_tells_the_truth():
    agent = sim_agent(math=0.5)
    right = Request(Role.VERIFIER, "s", "u", task_id=TASK.task_id, candidate=right_solution(TASK))
    wrong = Request(Role.VERIFIER, "s", "u", task_id=TASK.task_id, candidate=wrong_solution(TASK))
    assert parse_verdict(agent.complete(right).text) == "accept"
    assert parse_verdict(agent.complete(wrong).text) == "reject"


def test_sim_keys_are_rejected_for_real_providers():
    from trinity_cli.errors import ConfigError

    with pytest.raises(ConfigError, match='applies to provider "sim" only'):
        parse_pool(
            '[[agents]]\nname="a"\nprovider="openai"\nmodel="m"\nskills={ math = 0.5 }\n', "p.toml"
        )


def test_humaneval_carries_ldb_visible_tests():
    tasks = load_humaneval()
    assert all(
        t.visible_tests and all(v.startswith("assert ") for v in t.visible_tests) for t in tasks
    )
    assert all(t.entry_point in " ".join(t.visible_tests) for t in tasks)


def test_a_task_line_may_have_no_tests_and_visible_tests(tmp_path):
    path = tmp_path / "tasks.jsonl"
    lines = [
        {
            "task_id": "a", "prompt": "p", "entry_point": "f", "test": "",
            "visible_tests": ["assert f() == 1"],
        },
        {
            "task_id": "b", "prompt": "p", "entry_point": "f", "test": "t",
            "visible_tests": "assert f()",
        },
    ]
    path.write_text(json.dumps(lines[0]) + "\n")
    (task,) = read_jsonl(path)
    assert not task.has_tests and task.visible_tests == ("assert f() == 1",)
    path.write_text(json.dumps(lines[0]) + "\n" + json.dumps(lines[1]) + "\n")
    with pytest.raises(TaskFileError, match=r":2: field 'visible_tests' must be a list of strings"):
        read_jsonl(path)

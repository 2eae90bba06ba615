"""Task sets of competitive-programming problems, in LiveCodeBench's layout and trinity's plain
one: they load to the same tasks, a malformed line or a pickle that names a global is one line
naming file:line (and runs nothing), stdin programs and functional answers are graded on every
case while a replay Verifier sees the public ones, and `eval` and `train` run on such a file.

tests/data/tasksets/ is written by scripts/build_test_tasksets.py: the 11 stdin/stdout problems
of tests/data/problems/ (right programs `NAME.right.py`, programs right on the first sample only
`NAME.first_only.py`) and 3 functional ones (`NAME.right.py`, `NAME.wrong.py` beside the files).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from support.cli import assert_clean_failure, trinity

from trinity_cli.core.roles import STDIN_PROGRAM_NOTE, Role, system_prompt
from trinity_cli.errors import TaskFileError
from trinity_cli.providers.replay import visible_test_verdict
from trinity_cli.tasks.grading import Grader, grade, run_check, task_prelude, task_tests
from trinity_cli.tasks.taskset import Task, gradable, load_tasks, read_jsonl, select_split

DATA = Path(__file__).parent / "data"
LCB, PLAIN = DATA / "tasksets" / "livecodebench.jsonl", DATA / "tasksets" / "plain.jsonl"
TASKS = read_jsonl(LCB)
BY_NAME = {task.task_id.split("/")[1]: task for task in TASKS}
STDIN = sorted(name for name, task in BY_NAME.items() if task.stdin_program)
FUNCTIONAL = sorted(name for name, task in BY_NAME.items() if not task.stdin_program)


def program(name: str, kind: str) -> str:
    """kind: right, or wrong (a stdin problem's program right on its first sample only)."""
    if BY_NAME[name].stdin_program:
        return (
            DATA / "problems" / f"{name}.{'first_only' if kind == 'wrong' else kind}.py"
        ).read_text()
    return (DATA / "tasksets" / f"{name}.{kind}.py").read_text()


def test_both_layouts_load_to_the_same_tasks():
    assert read_jsonl(PLAIN) == TASKS and load_tasks(f"{LCB},{PLAIN}") == TASKS
    assert len(STDIN) == 11 and len(FUNCTIONAL) == 3
    lines = [json.loads(line) for line in LCB.read_text().splitlines()]
    pickled = [line for line in lines if not line["private_test_cases"].startswith("[")]
    # LCB's own encoding, decoded as LCB does
    assert len(pickled) == 12 and all(
        pickle.loads(zlib.decompress(base64.b64decode(line["private_test_cases"])))
        for line in pickled
    )
    for task in TASKS:
        assert (
            task.cases is not None and task.cases.public and task.cases.private and task.has_tests
        )
        assert task.test == "" and task.visible_tests == ()
    # the statement's bound (the plain file states it)
    assert (
        BY_NAME["average_speed"].cases.tolerance == 1e-6
    )
    assert (
        BY_NAME["count_peaks"].entry_point == "countPeaks"
        and BY_NAME["count_peaks"].cases.tolerance is None
    )
    assert BY_NAME["shift_word"].cases.private[-1] == ('"a"\n1000000000', '"m"')


def test_the_split_is_the_hash_of_the_task_id_and_every_task_is_gradable():
    humaneval_style = Task("stdin/bus_fare", "def f():\n", "f", "def check(c):\n    pass\n")
    assert BY_NAME["bus_fare"].split == humaneval_style.split  # question_id is the task id
    train, test = select_split(TASKS, "train"), select_split(TASKS, "test")
    assert len(train) + len(test) == len(TASKS) and train and test
    assert gradable(TASKS) == (TASKS, None)


def test_the_worker_is_told_to_write_a_program_or_to_complete_the_starter_code():
    stdin = BY_NAME["bus_fare"].problem
    assert stdin.stdin_program and stdin.code_prompt == "" and "Sample Input 1" in stdin.text
    assert system_prompt(Role.WORKER, stdin.stdin_program).endswith(STDIN_PROGRAM_NOTE)
    call = BY_NAME["count_peaks"].problem
    assert not call.stdin_program and call.code_prompt == BY_NAME["count_peaks"].starter_code
    assert (
        "Complete this starter code" in call.text
        and "def countPeaks(self, heights: List[int]) -> int:" in call.text
    )
    assert STDIN_PROGRAM_NOTE not in system_prompt(Role.WORKER, call.stdin_program)


GOOD = json.dumps(
    {
        "task_id": "ok", "prompt": "p", "visible_tests": [],
        "tests": [{"input": "1\n", "output": "1\n"}],
    }
)
LCB_LINE = {
    "question_id": "q", "question_content": "c", "starter_code": "", "metadata": "{}",
    "public_test_cases": json.dumps([{"input": "1\n", "output": "1\n", "testtype": "stdin"}]),
    "private_test_cases": "[]",
}
FUNCTIONAL_LINE = {
    **LCB_LINE, "metadata": json.dumps({"func_name": "f"}),
    "public_test_cases": json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional"}]),
}


@pytest.mark.parametrize(
    "line,fragment",
    [
        ({**LCB_LINE, "question_id": 7}, "field 'question_id' is missing or not a string"),
        ({**LCB_LINE, "public_test_cases": "[{"}, "public_test_cases is not valid JSON"),
        (
            {
                **LCB_LINE,
                "public_test_cases": json.dumps(
                    [{"input": "1", "output": "1", "testtype": "file"}]
                ),
            },
            "public_test_cases test 1 is not a list of",
        ),
        (
            {**LCB_LINE, "private_test_cases": "not base64!"},
            "private_test_cases is neither a JSON list nor",
        ),
        (
            {**LCB_LINE, "private_test_cases": base64.b64encode(b"plain text").decode()},
            "not base64 of zlib data",
        ),
        (
            {**LCB_LINE, "private_test_cases": base64.b64encode(zlib.compress(b"{}")).decode()},
            "not a pickle",
        ),
        (
            {
                **LCB_LINE,
                "private_test_cases": base64.b64encode(
                    zlib.compress(pickle.dumps(["a list"]))
                ).decode(),
            },
            "holds opcode EMPTY_LIST, not just a string",
        ),
        (
            {
                **LCB_LINE,
                "private_test_cases": base64.b64encode(zlib.compress(pickle.dumps("{}"))).decode(),
            },
            "field 'private_test_cases' must be a list of",
        ),
        ({**LCB_LINE, "metadata": "{"}, "metadata is not valid JSON"),
        ({**FUNCTIONAL_LINE, "metadata": "{}"}, "functional tests need metadata.func_name"),
        ({**LCB_LINE, "metadata": json.dumps({"func_name": "f"})}, "(tests: stdin, func_name: f)"),
        (
            {**FUNCTIONAL_LINE, "private_test_cases": LCB_LINE["public_test_cases"]},
            "mix stdin and functional",
        ),
        (
            {
                **FUNCTIONAL_LINE,
                "public_test_cases": json.dumps(
                    [{"input": "[1,", "output": "3", "testtype": "functional"}]
                ),
            },
            "public_test_cases test 1 (functional tests hold JSON values) is not valid JSON",
        ),
        (
            {"task_id": "p", "prompt": "p", "visible_tests": [], "tests": [{"input": "1"}]},
            "field 'tests' must be a list of",
        ),
        (
            {"task_id": "p", "prompt": "p", "visible_tests": ["assert f(1) == 1"], "tests": []},
            "'visible_tests' must be",
        ),
        ({"task_id": "p", "prompt": "p", "tests": []}, "field 'visible_tests' must be a list of"),
        (
            {"task_id": "p", "prompt": "p", "visible_tests": [], "tests": [], "entry_point": "f"},
            "unknown key 'entry_point'",
        ),
        (
            {"task_id": "p", "prompt": "p", "visible_tests": [], "tests": [], "tolerance": "1e-6"},
            "'tolerance' must be",
        ),
        (
            {
                "task_id": "p", "prompt": "p", "visible_tests": [], "tests": [], "func_name": "f",
                "tolerance": 0.1,
            },
            "'tolerance' applies to stdin tests only",
        ),
    ],
)
def test_a_malformed_line_is_one_error_naming_file_and_line(tmp_path, line, fragment):
    path = tmp_path / "tasks.jsonl"
    path.write_text(GOOD + "\n" + json.dumps(line) + "\n")
    with pytest.raises(TaskFileError) as caught:
        read_jsonl(path)
    assert caught.value.message.startswith(f"{path}:2: ") and fragment in caught.value.message
    assert "\n" not in caught.value.message and caught.value.exit_code == 2


class _Planted:
    """Unpickled, this calls a global that creates `path`."""

    def __init__(self, call: str, path: Path) -> None:
        self.call, self.path = call, path

    def __reduce__(self):
        if self.call == "os.system":
            return os.system, (f"touch {self.path}",)
        return open, (str(self.path), "w")


# opcodes GLOBAL, STACK_GLOBAL
@pytest.mark.parametrize(
    "call,protocol", [("os.system", 0), ("open", 4)]
)
def test_a_pickle_naming_a_global_is_refused_and_nothing_in_it_runs(workdir, call, protocol):
    control = workdir / "control"
    pickle.loads(pickle.dumps(_Planted(call, control), protocol=protocol))
    assert control.exists()  # the planted pickle is live: unpickled as LCB does, it runs its global
    marker = workdir / "marker"
    planted = base64.b64encode(
        zlib.compress(pickle.dumps(_Planted(call, marker), protocol=protocol))
    ).decode()
    (workdir / "lcb.jsonl").write_text(
        json.dumps({**LCB_LINE, "private_test_cases": planted}) + "\n"
    )
    result = trinity(
        "eval", "--tasks", "lcb.jsonl", "--weights", "none", "--pool", "ldb-humaneval", "--no-log",
        cwd=workdir,
    )
    opcode = "GLOBAL" if protocol == 0 else "STACK_GLOBAL"
    assert_clean_failure(
        result, 2,
        f"lcb.jsonl:1: private_test_cases is neither a JSON list nor LiveCodeBench's "
        f"compressed pickle of one: the pickle holds opcode {opcode}, not just a string",
    )
    assert not marker.exists()


# Blank lines in the input, several lines out, trailing spaces; the functional ones. (Every
# problem's programs are checked when the data is built; eval below grades 5 tasks again.)
GRADED = ["paragraphs", "times_table_crlf", "upside_down", *FUNCTIONAL]


@pytest.mark.parametrize("name", GRADED)
def test_a_right_program_passes_every_case_and_a_wrong_one_fails(name):
    task = BY_NAME[name]
    assert run_check(task, program(name, "right"))
    wrong = grade(program(name, "wrong"), task_tests(task), task_prelude(task))
    assert not wrong.passed and 0 < wrong.tests_passed < wrong.tests_total == len(task.cases.all)
    # right on the first case, so the failure is another case's
    assert (
        "case 1 failed" not in wrong.output
    )


FORGED = {
    "prints a guessed pass line, exits 0": (
        "import os\nclass Solution:\n    def countPeaks(self, heights):\n"
        "        print('0' * 32 + ' 5/5')\n        os._exit(0)\n"
    ),
    "exits 0 at import": (
        "import sys\nclass Solution:\n    def countPeaks(self, heights):\n"
        "        return 0\nsys.exit(0)\n"
    ),
    "equal to anything": (
        "class Any:\n    def __eq__(self, other):\n        return True\n\n"
        "class Solution:\n    def countPeaks(self, heights):\n        return Any()\n"
    ),
    "an int equal to anything": (
        "class Any(int):\n    def __eq__(self, other):\n        return True\n\n"
        "class Solution:\n    def countPeaks(self, heights):\n        return Any(0)\n"
    ),
    "patches json": (
        "import json\njson.loads = lambda text: 0\nclass Solution:\n"
        "    def countPeaks(self, heights):\n        return 0\n"
    ),
}


@pytest.mark.parametrize("name", FORGED)
def test_a_functional_answer_cannot_forge_a_pass(name):
    task = BY_NAME["count_peaks"]
    assert not run_check(task, FORGED[name])
    assert run_check(
        task,
        "class Solution:\n    def countPeaks(self, heights):\n        return sum(\n"
        "            heights[i - 1] < heights[i] > heights[i + 1] "
        "for i in range(1, len(heights) - 1))\n",
    )


def test_a_function_without_solution_is_called_and_a_missing_one_fails():
    task = BY_NAME["shift_word"]
    assert run_check(
        task,
        "def shiftWord(word, k):\n"
        "    return ''.join(chr((ord(c) - 97 + k) % 26 + 97) for c in word)\n",
    )
    missing = grade("x = 1\n", task_tests(task), task_prelude(task))
    assert not missing.passed and "neither a class Solution nor 'shiftWord'" in missing.output


def test_a_replay_verifier_runs_the_public_cases_and_the_grade_runs_them_all(tmp_path):
    # wrong on private cases only
    task, wrong = (
        BY_NAME["running_balance"], program("running_balance", "wrong"),
    )
    assert visible_test_verdict(task, wrong).endswith("<verdict>ACCEPT</verdict>")
    assert "passes the task's 2 public tests" in visible_test_verdict(task, wrong)
    assert not run_check(task, wrong)
    grader, public_only = (
        Grader(tmp_path / "grades.sqlite"), replace(task, cases=replace(task.cases, private=())),
    )
    # the cases are in the key
    assert grader.passes(public_only, wrong) and not grader.passes(
        task, wrong
    )
    stdin = BY_NAME["lamps"]
    assert "<verdict>REJECT</verdict>" in visible_test_verdict(stdin, program("lamps", "wrong"))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A replay pool over the LCB file: `right` answers every task right, `half` with a program
    right on the first case only (stdin) or wrong on some case (functional), at a twentieth of
    the price; and, to train on, a file of three of the tasks eval runs (two functional, one
    stdin; all in the train split): training a head costs seconds a task."""
    workdir = tmp_path_factory.mktemp("recorded")
    lines = [
        {"model": model, "task_id": task.task_id, "code": program(name, kind)}
        for name, task in BY_NAME.items()
        for model, kind in (("right", "right"), ("half", "wrong"))
    ]
    lines += [
        {
            "model": "mixed",
            "task_id": task.task_id,  # right on stdin tasks only: its row tells which ran
            "code": program(name, "right" if task.task_id.startswith("stdin/") else "wrong"),
        }
        for name, task in BY_NAME.items()
    ]
    (workdir / "rec.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (workdir / "pool.toml").write_text(
        "".join(
            f'[[agents]]\nname = "{name}"\nprovider = "replay"\n'
            f'record = "rec.jsonl"\nmodel = "{name}"\n'
            f"price_in = {price}\nprice_out = {price}\n\n"
            for name, price in (("right", 10.0), ("half", 0.5), ("mixed", 1.0))
        )
    )
    lines = LCB.read_text().splitlines(keepends=True)
    (workdir / "three.jsonl").write_text(lines[0] + lines[1] + lines[4])
    return workdir


def test_eval_runs_on_a_livecodebench_file(recorded):
    result = trinity(
        "eval", "--tasks", str(LCB), "--split", "all", "--limit", "5", "--pool", "pool.toml",
        "--weights", "none", "--baselines", "single", "--json", "--no-log", cwd=recorded,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    rows = {row["policy"]: row for row in report["rows"]}
    assert (
        report["tasks"] == 5
        and rows["single:right"]["pass_at_1"] == 1.0
        and rows["single:half"]["pass_at_1"] == 0.0
    )
    assert [task.task_id.split("/")[0] for task in TASKS[:5]] == ["call"] * 3 + ["stdin"] * 2
    # the file's first five ran: three functional, two stdin
    assert (
        rows["single:mixed"]["pass_at_1"] == 0.4
    )


def test_train_runs_a_generation_on_a_livecodebench_file(recorded):
    result = trinity(
        "train", "--tasks", "three.jsonl", "--pool", "pool.toml", "--out", "head.npz",
        "--generations", "1", "--popsize", "2", "--folds", "0", "--project", "2", "--max-turns",
        "3", "--no-log", "-q", cwd=recorded,
    )
    assert result.returncode == 0, result.stderr
    meta = json.loads((recorded / "head.json").read_text())
    training = meta["training"]
    assert (
        training["tasks"] == "three.jsonl"
        and training["n_tasks"] == 3
        and training["history"][0]["generation"] == 1
    )
    # half fails them all
    assert (
        training["start"]["plan"] == [["right", "worker"]] and training["fitness"] == 1.0
    )

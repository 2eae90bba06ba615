"""Write tests/data/tasksets/{livecodebench,plain}.jsonl: one small problem set in both layouts.

    python scripts/build_test_tasksets.py

The 11 stdin/stdout problems are tests/data/problems/*.md (their samples are the public tests,
the hidden ones are below); the 3 functional (LeetCode-style) problems are written here. All
texts are original. The LiveCodeBench file ships most private tests as LCB does (base64 of
zlib of a pickled JSON string), a few as plain JSON. The script then checks its work: both
files load to the same tasks, each right program passes and each wrong one fails.
"""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

from trinity_cli.tasks.grading import run_check
from trinity_cli.tasks.samples import find_samples
from trinity_cli.tasks.taskset import read_jsonl

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = ROOT / "tests" / "data" / "problems"
OUT = ROOT / "tests" / "data" / "tasksets"

PRIVATE = {  # hidden (stdin, stdout) cases of each problems/*.md
    "average_speed": [
        ("3\n10 10\n20 20\n30 30\n", "20.0000000000\n"), ("2\n100 50\n100 25\n", "33.3333333333\n"),
    ],
    "bus_fare": [("4\n11 12 64 65\n", "9\n"), ("1\n0\n", "1\n")],
    "lamps": [("3 5\n1 2 1 2 3\n", "1\n"), ("1 1\n1\n", "1\n")],
    "leap_year": [("2400\n", "Yes\n"), ("1999\n", "No\n")],
    "longest_run": [("a\n", "1\n"), ("abcccccdd\n", "5\n")],
    "paragraphs": [("only one line\n", "1\n"), ("\n\na\nb\n\n\nc\n", "2\n")],
    "reverse_words": [("one\n", "one\n"), ("x y z\n", "z y x\n")],
    "stairs": [("1\n", "1\n"), ("10\n", "89\n")],
    "tiles": [("5 1 1\n", "5\n"), ("2 1000 7\n", "286\n")],
    "times_table_crlf": [
        ("2 4\n", "2 x 1 = 2\n2 x 2 = 4\n2 x 3 = 6\n2 x 4 = 8\n"), ("20 1\n", "20 x 1 = 20\n"),
    ],
    "upside_down": [("1 3\n.#.\n", ".#.\n"), ("3 1\n#\n.\n.\n", ".\n.\n#\n")],
}

FUNCTIONAL = {  # name: (func_name, statement, starter code, public cases, private cases)
    "count_peaks": (
        "countPeaks",
        (
            "A skyline is given as the heights of its buildings from left to right. "
            "A building is a peak when it is strictly taller than both its neighbours; "
            "the first and the last building are never peaks. Return the number of peaks.\n\n"
            "Example 1:\nInput: heights = [1, 3, 2]\nOutput: 1\n\n"
            "Example 2:\nInput: heights = [5, 5, 5]\nOutput: 0\n\n"
            "Constraints:\n1 <= heights.length <= 1000"
        ),
        "class Solution:\n    def countPeaks(self, heights: List[int]) -> int:\n        ",
        [("[1, 3, 2]", "1"), ("[5, 5, 5]", "0")],
        [("[2, 7, 3, 8, 1, 9, 4]", "3"), ("[4]", "0"), ("[1, 2, 3, 4]", "0")],
    ),
    "running_balance": (
        "balances",
        (
            "An account starts with the balance start. Each move adds its amount "
            "(a negative move takes money out), except that a move that would leave the balance "
            "below zero is refused and changes nothing. Return the balance after each move.\n\n"
            "Example 1:\nInput: start = 10, moves = [-3, -8, 5]\nOutput: [7, 7, 12]\n\n"
            "Example 2:\nInput: start = 0, moves = []\nOutput: []"
        ),
        (
            "class Solution:\n"
            "    def balances(self, start: int, moves: List[int]) -> List[int]:\n        "
        ),
        [("10\n[-3, -8, 5]", "[7, 7, 12]"), ("0\n[]", "[]")],
        [("5\n[-5, -1, 2]", "[0, 0, 2]"), ("1\n[1, 1, -3]", "[2, 3, 0]")],
    ),
    "shift_word": (
        "shiftWord",
        (
            "Shift every letter of a lowercase word k places forward in the alphabet, so that z is "
            "followed by a again, and return the new word.\n\n"
            'Example 1:\nInput: word = "abc", k = 1\nOutput: "bcd"\n\n'
            'Example 2:\nInput: word = "xyz", k = 3\nOutput: "abc"\n\n'
            "Constraints:\n0 <= k <= 10^9"
        ),
        "class Solution:\n    def shiftWord(self, word: str, k: int) -> str:\n        ",
        [('"abc"\n1', '"bcd"'), ('"xyz"\n3', '"abc"')],
        [('"hello"\n26', '"hello"'), ('"a"\n1000000000', '"m"')],
    ),
}
TOLERANCE = {"average_speed": 1e-6}  # plain layout: stated outright (the statement says it too)
# LCB layout: private tests as a JSON string, not pickled
PLAIN_JSON_PRIVATE = {
    "lamps", "running_balance",
}


def compressed(cases: list[dict[str, str]]) -> str:
    """LiveCodeBench's encoding of private tests: base64(zlib(pickle(json)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


def problems() -> list[tuple[str, str, str, str, list[tuple[str, str]], list[tuple[str, str]]]]:
    """(task id, func_name, statement, starter code, public, private), the functional ones first."""
    stdin = []
    for name, private in PRIVATE.items():
        statement = (PROBLEMS / f"{name}.md").read_bytes().decode("utf-8")  # CRLF kept
        public = [(sample.input, sample.output) for sample in find_samples(statement)]
        stdin.append((f"stdin/{name}", "", statement, "", public, private))
    return [(f"call/{name}", *spec) for name, spec in FUNCTIONAL.items()] + stdin


def lcb_line(
    task_id: str, func_name: str, statement: str, starter: str, public: list[tuple[str, str]],
    private: list[tuple[str, str]],
) -> dict[str, object]:
    testtype = "functional" if func_name else "stdin"
    private_cases = [{"input": i, "output": o, "testtype": testtype} for i, o in private]
    return {
        "question_title": task_id.split("/")[1].replace("_", " ").title(),
        "question_content": statement, "platform": "leetcode" if func_name else "atcoder",
        "question_id": task_id, "contest_id": "trinity-tests",
        "contest_date": "2025-01-01T00:00:00", "starter_code": starter, "difficulty": "easy",
        "public_test_cases": json.dumps(
            [{"input": i, "output": o, "testtype": testtype} for i, o in public]
        ),
        "private_test_cases": json.dumps(private_cases)
        if task_id.split("/")[1] in PLAIN_JSON_PRIVATE
        else compressed(private_cases),
        "metadata": json.dumps({"func_name": func_name} if func_name else {}),
    }


def plain_line(
    task_id: str, func_name: str, statement: str, starter: str, public: list[tuple[str, str]],
    private: list[tuple[str, str]],
) -> dict[str, object]:
    line: dict[str, object] = {
        "task_id": task_id, "prompt": statement,
        "visible_tests": [{"input": i, "output": o} for i, o in public],
        "tests": [{"input": i, "output": o} for i, o in private],
    }
    if func_name:
        line.update(starter_code=starter, func_name=func_name)
    if task_id.split("/")[1] in TOLERANCE:
        line["tolerance"] = TOLERANCE[task_id.split("/")[1]]
    return line


def check() -> None:
    """The files hold the same tasks; every right program passes all of its task's cases and
    every wrong one (a stdin problem's `first_only`) fails: hand-written outputs get checked."""
    tasks = read_jsonl(OUT / "livecodebench.jsonl")
    assert tasks == read_jsonl(OUT / "plain.jsonl"), "the two layouts load to different tasks"
    for task in tasks:
        kind, name = task.task_id.split("/")
        folder, wrong = (PROBLEMS, "first_only") if kind == "stdin" else (OUT, "wrong")
        assert run_check(task, (folder / f"{name}.right.py").read_text()), (
            f"{task.task_id}: the right program fails"
        )
        assert not run_check(task, (folder / f"{name}.{wrong}.py").read_text()), (
            f"{task.task_id}: {wrong} passes"
        )


def main() -> None:
    for name, make in (("livecodebench", lcb_line), ("plain", plain_line)):
        lines = [json.dumps(make(*problem)) + "\n" for problem in problems()]
        (OUT / f"{name}.jsonl").write_text("".join(lines), encoding="utf-8")
        print(f"wrote {OUT / name}.jsonl: {len(lines)} tasks")
    check()
    print("checked: each right program passes every case, each wrong one fails")


if __name__ == "__main__":
    main()

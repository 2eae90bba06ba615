"""The one grader of solve, train and eval: an answer passes only when a fresh secret says so.

An exit code is no proof: `sys.exit(0)`, `os._exit(0)`, an `atexit` or `excepthook` handler, a
`__main__` guard all end a program "successfully" before any test ran, and a model under
selection pressure finds such lines. So the answer runs in the sandbox under a small harness
that, for every run, is handed a new random token (in a file it deletes before the answer's
code runs) and writes `TOKEN N/N` on a saved copy of stdout only when every test passed; the
host requires that exact line and exit code 0. A failing run writes no token, so nothing the
answer prints, intercepts or exits with can forge a pass. The tests run with a snapshot of the
builtins taken before the answer was loaded, so an answer that patches `builtins` changes only
its own code's view.

The answer runs as a module named `solution` (not `__main__`), after the task's prompt (its
imports and helper functions), as HumanEval's own harness does. Three kinds of tests:
`check` (HumanEval's `check(candidate)`), `file` (module-level asserts, then each `test*`
function) and `doctest` (examples from the problem text).

A fourth, `call`, grades LeetCode-style functional tests: for each case, the harness calls the
method of a fresh `Solution()` (or, when the answer defines no such class, its function) on
the case's arguments, JSON values one a line, and requires the value returned, read back
through JSON (a tuple is a list; an object whose `__eq__` is always true is no value), to
equal the expected JSON value. The answer runs after the imports LeetCode's judge provides
(`CALL_PRELUDE`), and passes, as with `check`, only by the token.

A fifth, `stdio`, runs the answer as a whole program (`__main__`), once per case, in a fresh
sandbox with the case's input on stdin and nothing else in reach, and this process compares
its captured stdout with the expected output (`samples.output_difference`). The expected
output never enters the sandbox and the verdict is made outside it, so nothing the program
prints or exits with can forge a pass; a case passes only when its output matches and it
exits 0.

What a grade cannot prove (README, Safety): a program that deliberately searches its own
process for the token, or returns an object whose `__eq__` is always true.

Results are cached by (grader version, task, answer): a noisy timeout cannot make two
evaluations of the same answer disagree, and a second run grades nothing again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import secrets
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from trinity_cli.store.table import KeyValueStore, Table
from trinity_cli.tasks.samples import output_difference
from trinity_cli.tasks.sandbox import Limits, run_python
from trinity_cli.tasks.taskset import Task

GRADER_VERSION = 2  # part of every cached grade's key: version 1 counted exit code 0 as a pass
DEFAULT_TIMEOUT_S = 10.0
SPEC_FILE = "grade.json"

# What a LeetCode solution may use unimported (`List`, `defaultdict`, `heapq`, ...), as on
# LeetCode and in LiveCodeBench's harness, whose recursion limit it also sets.
CALL_PRELUDE = """from typing import *
from collections import *
from functools import *
from itertools import *
from heapq import *
from bisect import *
from math import *
from builtins import *
import bisect, collections, functools, heapq, itertools, math, re, string, sys
sys.setrecursionlimit(50000)
"""

# One program, split only to keep the source's lines short: its text is kept byte for byte (a
# traceback it prints quotes its lines by number).
_HARNESS = (
    r"""
import ast, builtins, doctest, json, os, sys, traceback

LOADS, DUMPS = json.loads, json.dumps  # taken before the answer runs
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

def main():
    write, exit_now, out = os.write, os._exit, os.dup(1)  # saved before the answer runs
    with open("grade.json", encoding="utf-8") as handle:
        spec = json.load(handle)
    os.unlink("grade.json")
    token, tests = spec.pop("token"), spec["tests"]
    clean = dict(vars(builtins))
    solution = {"__name__": "solution", "__builtins__": builtins}
    passed, total = 0, 1
    try:
        exec(compile(spec["prelude"], "prompt.py", "exec"), solution)
        exec(compile(spec["answer"], "solution.py", "exec"), solution)
    except BaseException:
        print("the answer failed to load:")
        traceback.print_exc(limit=-3, file=sys.stdout)
    else:
        scope = {k: v for k, v in solution.items() if not k.startswith("__")}
        scope.update(__name__="trinity_tests", __builtins__=clean)
        passed, total = run(tests, solution, scope)
    sys.stdout.flush()
    if passed == total:
        write(out, f"\n{token} {passed}/{total}\n".encode())
    else:
        write(out, f"\nfailed {passed}/{total}\n".encode())
    exit_now(0 if passed == total else 1)


def guarded(name, call):
    try:
        call()
        return True
    except BaseException:  # SystemExit and KeyboardInterrupt included: a failed test
        print(f"{name} failed:")
        traceback.print_exc(limit=-3, file=sys.stdout)
        return False


def run(tests, solution, scope):
    kind = tests["kind"]
    if kind == "check":
        entry = solution.get(tests["entry_point"])
        if entry is None:
            print(f"the answer defines no {tests['entry_point']!r}")
            return 0, 1
        code = compile(tests["source"], "tests.py", "exec")
        return int(guarded("tests", lambda: (exec(code, scope), scope["check"](entry)))), 1
    if kind == "file":  # the module-level asserts, if any, are one test; each test* another
        before = dict(scope)  # the answer's own test_* functions are not the user's tests
        code = compile(tests["source"], "tests.py", "exec")
        tree = ast.parse(tests["source"])
        module = [s for s in tree.body if not isinstance(s, DEFINITIONS)]
        asserts = int(any(isinstance(node, ast.Assert) for s in module for node in ast.walk(s)))
        if not guarded("module-level assertions", lambda: exec(code, scope)):
            defined = [s for s in tree.body if isinstance(s, ast.FunctionDef) and """
    r"""s.name.startswith("test")]
            return 0, max(1, asserts + len(defined))
        functions = [(n, f) for n, f in scope.items() if n.startswith("test") and callable(f) """
    r"""and before.get(n) is not f]
        if not functions:  # module-level code only: one test
            return 1, 1
        return asserts + sum(guarded(n, f) for n, f in functions), asserts + len(functions)
    if kind == "call":
        return call_cases(tests["entry_point"], tests["examples"], solution)
    examples = [doctest.Example(source, want) for source, want in tests["examples"]]
    test = doctest.DocTest(examples, dict(scope), "problem examples", "problem", 0, None)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    results = []
    guarded("examples", lambda: results.append(runner.run(test, out=sys.stdout.write)))
    failed, attempted = results[0] if results else (len(examples), len(examples))
    return max(0, attempted - failed), max(1, attempted)


def call_cases(name, cases, solution):
    owner = solution.get("Solution")
    if owner is None and not callable(solution.get(name)):
        print(f"the answer defines neither a class Solution nor {name!r}")
        return 0, max(1, len(cases))

    def returned(arguments):
        function = getattr(owner(), name) if owner is not None else solution[name]  """
    r"""# a fresh Solution() a case
        value = function(*[LOADS(line) for line in arguments.split("\n") if line.strip()])
        try:
            return LOADS(DUMPS(value))
        except (TypeError, ValueError):
            raise TypeError(f"{name} returned a {type(value).__name__}: not a JSON value") from None

    passed = 0
    for number, (arguments, expected) in enumerate(cases, start=1):
        got = []
        if guarded(f"case {number}", lambda: got.append(returned(arguments))) """
    r"""and got[0] == LOADS(expected):
            passed += 1
        elif got:
            print(f"case {number} failed: expected {expected.strip()[:80]}, """
    r"""got {DUMPS(got[0])[:80]}")
    return passed, max(1, len(cases))

main()
"""
)


@dataclass(frozen=True)
class Tests:
    """What an answer is checked against."""

    __test__ = False  # not a pytest class

    kind: str  # "check" | "file" | "doctest" | "call" | "stdio"
    source: str = ""  # check, file: the test code
    entry_point: str = ""  # check: the function handed to check(); call: the function called
    # doctest: (source, expected output); stdio: (stdin, expected stdout);
    # call: (arguments, one JSON value a line; the expected JSON value)
    examples: tuple[tuple[str, str], ...] = ()
    tolerance: float | None = (
        None  # stdio: the error allowed between numbers (absolute or relative)
    )


@dataclass(frozen=True)
class Grade:
    passed: bool
    tests_passed: int
    tests_total: int
    timed_out: bool
    output: str  # what the tests printed, for the transcript


_RESULT = re.compile(r"^(\S+) (\d+)/(\d+)$")


def grade(answer: str, tests: Tests, prelude: str = "", limits: Limits = Limits()) -> Grade:
    """Run `answer` (after `prelude`) against `tests` in the sandbox; see the module docstring."""
    if tests.kind == "stdio":
        return grade_program(answer, tests.examples, tests.tolerance, limits)
    token = secrets.token_hex(16)
    spec = {"token": token, "prelude": prelude, "answer": answer, "tests": asdict(tests)}
    result = run_python(_HARNESS, limits, {SPEC_FILE: json.dumps(spec)})
    lines = result.stdout.rstrip("\n").splitlines()
    last = _RESULT.match(lines[-1]) if lines else None
    passed_line = last is not None and last.group(1) == token and last.group(2) == last.group(3)
    n_passed, total = (int(last.group(2)), int(last.group(3))) if last else (0, 0)
    output = "\n".join(lines[:-1] if last else lines).strip() + result.stderr
    return Grade(passed_line and result.returncode == 0, n_passed, total, result.timed_out, output)


def grade_program(
    program: str, cases: tuple[tuple[str, str], ...], tolerance: float | None = None,
    limits: Limits = Limits(),
) -> Grade:
    """Run `program` on each (stdin, expected stdout) case, each under `limits`; this process
    judges the output (the first 64 KiB of it, what the sandbox keeps). The first timeout ends
    the grading: a program that hangs on one case would likely hang on each."""
    passed, notes = 0, []
    for number, (stdin, expected) in enumerate(cases, start=1):
        result = run_python(program, limits, stdin=stdin)
        if result.timed_out:
            notes.append(f"case {number}: timed out after {limits.wall_s:g} s")
            return Grade(False, passed, len(cases), True, "\n".join(notes))
        if result.returncode != 0:
            errors = result.stderr.strip().splitlines()
            notes.append(
                f"case {number} failed: exit code {result.returncode}"
                + (f": {errors[-1]}" if errors else "")
            )
        elif (difference := output_difference(result.stdout, expected, tolerance)) is not None:
            notes.append(f"case {number} failed: {difference}")
        else:
            passed += 1
    return Grade(passed == len(cases) > 0, passed, len(cases), False, "\n".join(notes))


def task_tests(task: Task) -> Tests:
    """What grades `task`: HumanEval's check(), or every case, public and private."""
    if task.cases is None:
        return Tests("check", source=task.test, entry_point=task.entry_point)
    return case_tests(task, task.cases.all)


def case_tests(task: Task, cases: tuple[tuple[str, str], ...]) -> Tests:
    """`cases` of a task with cases, as the grader runs them: a program on stdin, or calls."""
    assert task.cases is not None
    if task.stdin_program:
        return Tests("stdio", examples=cases, tolerance=task.cases.tolerance)
    return Tests("call", entry_point=task.entry_point, examples=cases)


def task_prelude(task: Task) -> str:
    """What the answer runs after: HumanEval's prompt (imports, helpers), the imports a
    LeetCode solution takes for granted, or nothing before a whole program."""
    if task.cases is None:
        return task.prompt
    return "" if task.stdin_program else CALL_PRELUDE


@functools.lru_cache(maxsize=4096)  # LCB's private tests run to megabytes: serialised once a task
def tests_key(task: Task) -> str:
    """What a grade depends on besides the task's id and prompt and the answer: HumanEval's test
    code (the key grades were always cached under), or the cases as the grader runs them."""
    return task.test if task.cases is None else json.dumps(asdict(task_tests(task)))


def run_check(task: Task, answer: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    return grade(answer, task_tests(task), task_prelude(task), Limits(wall_s=timeout_s)).passed


class Grader:
    """Grades answers once each; remembers results in memory and, given a path, on disk."""

    SCHEMA = ("grades", "passed", "INTEGER")

    def __init__(
        self, path: Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
        table: Table | None = None,
    ) -> None:
        """Remembered on `path`, or in another process's store (`table`: see
        train/ray_runner.py)."""
        self.timeout_s = timeout_s
        self.path = path
        self.memory: dict[str, bool] = {}
        self.runs = 0
        self._runs_lock = threading.Lock()
        self._db: Table | None = table
        if path is not None:
            self._db = KeyValueStore(path, *self.SCHEMA)

    def passes(self, task: Task, answer: str | None) -> bool:
        if not answer:
            return False
        key = hashlib.sha256(
            f"grader-v{GRADER_VERSION}\0{task.task_id}\0{task.prompt}\0{tests_key(task)}\0{answer}".encode()
        ).hexdigest()
        if key in self.memory:
            return self.memory[key]
        if self._db is not None:
            stored = self._db.get(key)
            if stored is not None:
                self.memory[key] = bool(stored)
                return self.memory[key]
        passed = run_check(task, answer, self.timeout_s)
        with self._runs_lock:
            self.runs += 1
        self.memory[key] = passed
        if self._db is not None:
            self._db.put(key, int(passed))
        return passed

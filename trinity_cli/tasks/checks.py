"""Execution checks for `solve`: a test file, or the examples or samples of the problem text.

All run through the one grader (`tasks/grading.py`), in the sandbox. A test file runs with
the answer's names in scope: its module-level asserts run first, then every `test*` function
it defines (pytest-style, no pytest needed). Doctest examples (`>>> add(2, 3)` / `5`) run with
ELLIPSIS and NORMALIZE_WHITESPACE against the answer's names. A check passes only when the
grader's one-time token says every test passed, so an answer that exits early does not.

A stdin/stdout problem (samples: `tasks/samples.py`) or a JSON `--tests` file of
`{"input": ..., "output": ...}` cases makes the answer a whole program: it runs once per case
with the input on stdin, and the grader compares its stdout outside the sandbox.
"""

from __future__ import annotations

import ast
import doctest
import json
import re
from dataclasses import dataclass
from pathlib import Path

from trinity_cli.core.records import CheckOutcome
from trinity_cli.errors import UsageError
from trinity_cli.tasks.grading import Tests, grade
from trinity_cli.tasks.samples import find_samples, stated_tolerance
from trinity_cli.tasks.sandbox import Limits

SUMMARY_LINES = 30


@dataclass(frozen=True)
class TestSuite:
    """What an answer is checked against; `source` names it in reports and JSON."""

    __test__ = False  # not a pytest class

    source: str  # the test file's path, "problem examples" or "problem samples"
    tests: Tests
    count: int  # a test file's tests (_file_test_count), doctest examples or stdin/stdout cases

    @property
    def stdin_program(self) -> bool:
        """The answer is a whole program judged by its stdout, not functions to call."""
        return self.tests.kind == "stdio"

    def run(self, answer: str, limits: Limits = Limits()) -> CheckOutcome:
        result = grade(answer, self.tests, limits=limits)
        if result.timed_out:
            summary = f"timed out after {limits.wall_s:g} s"
        else:
            lines = result.output.strip().splitlines()
            lines.append(
                f"{result.tests_passed}/{result.tests_total} passed"
                if result.tests_total
                else "the tests did not finish"
            )
            summary = "\n".join(lines[-SUMMARY_LINES:])
        return CheckOutcome(result.passed, summary, self.source)


def suite_from_file(path: Path, tolerance: float | None = None) -> TestSuite:
    """A plain-assert or pytest-style test file, or a `.json` file of stdin/stdout cases (whose
    numbers compare within `tolerance`, the problem's stated bound, unless the file names its
    own); unreadable, empty or malformed is exit 2."""
    text = _read_tests_file(path)
    if path.suffix.lower() == ".json":
        return _suite_from_cases(path, text, tolerance)
    try:
        compile(text, str(path), "exec")
    except SyntaxError as exc:
        raise UsageError(f"--tests file {path}:{exc.lineno}: {exc.msg}") from None
    return TestSuite(str(path), Tests("file", source=text), _file_test_count(path, text))


def _file_test_count(path: Path, text: str) -> int:
    """The grader's count: the module-level asserts, if any, are one test (the first that fails
    stops them), and each `test*` function another. A file with neither, or with tests the
    grader would not run (async, in a class), is a usage error: it would pass any answer."""
    tree = ast.parse(text)
    unrun = [
        node.name
        for node in tree.body
        if isinstance(node, ast.AsyncFunctionDef | ast.ClassDef)
        and node.name.lower().startswith("test")
    ]
    if unrun:
        raise UsageError(
            f"--tests file {path}: {unrun[0]} would not run (async tests and test classes are "
            "not supported): write plain `def test_*` functions or asserts"
        )
    functions = sum(
        isinstance(node, ast.FunctionDef) and node.name.startswith("test") for node in tree.body
    )
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    module = [node for node in tree.body if not isinstance(node, definitions)]
    asserts = any(isinstance(node, ast.Assert) for part in module for node in ast.walk(part))
    if not functions + asserts:
        raise UsageError(
            f"--tests file {path} has no assert and no `def test_*` function: nothing would "
            "check the answer"
        )
    return functions + asserts


def _read_tests_file(path: Path) -> str:
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise UsageError(f"--tests file not found: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"--tests {path} is a directory, not a file") from None
    except UnicodeDecodeError:
        raise UsageError(f"--tests file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise UsageError(f"cannot read --tests file {path}: {exc.strerror}") from None
    if not text.strip():
        raise UsageError(f"--tests file {path} is empty")
    return text


CASES_SHAPE = '[{"input": "...", "output": "..."}, ...] or {"tests": [...], "tolerance": 1e-6}'


def _suite_from_cases(path: Path, text: str, tolerance: float | None) -> TestSuite:
    """JSON stdin/stdout cases: a list of {"input", "output"} strings, or an object holding
    that list as "tests" and, optionally, the "tolerance" numbers compare within."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--tests file {path} is not valid JSON: {exc.msg} (line {exc.lineno})"
        ) from None
    if isinstance(data, dict):
        unknown = sorted(set(data) - {"tests", "tolerance"})
        if unknown:
            raise UsageError(
                f"--tests file {path}: unknown key {unknown[0]!r} (expected {CASES_SHAPE})"
            )
        tolerance = data.get("tolerance", tolerance)
        if tolerance is not None and (
            isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0
        ):
            raise UsageError(f'--tests file {path}: "tolerance" must be a number >= 0')
        data = data.get("tests")
    if not isinstance(data, list) or not data:
        raise UsageError(f"--tests file {path}: expected {CASES_SHAPE}, with at least one case")
    for number, case in enumerate(data, start=1):
        if not (
            isinstance(case, dict)
            and set(case) == {"input", "output"}
            and all(isinstance(value, str) for value in case.values())
        ):
            raise UsageError(
                f'--tests file {path}: case {number} is not {{"input": "...", "output": "..."}} '
                "(two strings)"
            )
    cases = tuple((case["input"], case["output"]) for case in data)
    return TestSuite(str(path), Tests("stdio", examples=cases, tolerance=tolerance), len(cases))


def suite_from_problem(text: str) -> TestSuite | None:
    """The problem's doctest examples, else its stdin/stdout samples, else None: a problem with
    `>>>` examples asks for functions, whatever else it shows."""
    return _doctest_suite(text) or _samples_suite(text)


def _samples_suite(text: str) -> TestSuite | None:
    """The "Sample Input" / "Sample Output" blocks of a stdin/stdout problem
    (`tasks/samples.py`)."""
    samples = find_samples(text)
    if not samples:
        return None
    cases = tuple((sample.input, sample.output) for sample in samples)
    return TestSuite(
        "problem samples", Tests("stdio", examples=cases, tolerance=stated_tolerance(text)),
        len(cases),
    )


def _doctest_suite(text: str) -> TestSuite | None:
    """The problem's doctest examples (``>>> expr`` followed by the expected output), if any.

    Fence and docstring-quote lines end an expected output (a Markdown problem puts its examples
    in a docstring inside a code block); a paragraph doctest cannot parse is skipped."""
    lines = [
        "" if line.strip() in ('"""', "'''") or line.lstrip().startswith("```") else line
        for line in text.splitlines()
    ]
    parser, examples = doctest.DocTestParser(), []
    for paragraph in re.split(r"\n\s*\n", "\n".join(lines)):
        try:
            examples += parser.get_examples(paragraph)
        except ValueError:  # inconsistent indentation: not a usable example
            continue
    if not any(e.want.strip() for e in examples):
        return None
    pairs = tuple((e.source, e.want) for e in examples)
    return TestSuite("problem examples", Tests("doctest", examples=pairs), len(pairs))

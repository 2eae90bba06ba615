"""Execution checks for `solve`: a test file, or the doctest examples of the problem text.

Both run through the one grader (`tasks/grading.py`), in the sandbox. A test file runs with
the answer's names in scope: its module-level asserts run first, then every `test*` function
it defines (pytest-style, no pytest needed). Doctest examples (`>>> add(2, 3)` / `5`) run with
ELLIPSIS and NORMALIZE_WHITESPACE against the answer's names. A check passes only when the
grader's one-time token says every test passed, so an answer that exits early does not.
"""

from __future__ import annotations

import ast
import doctest
import re
from dataclasses import dataclass
from pathlib import Path

from trinity_cli.core.records import CheckOutcome
from trinity_cli.errors import UsageError
from trinity_cli.tasks.grading import Tests, grade
from trinity_cli.tasks.sandbox import Limits

SUMMARY_LINES = 30


@dataclass(frozen=True)
class TestSuite:
    """What an answer is checked against; `source` names it in reports and JSON."""

    __test__ = False  # not a pytest class

    source: str  # the test file's path, or "problem examples"
    tests: Tests
    count: int  # test functions (1 for a file of asserts only), or doctest examples

    def run(self, answer: str, limits: Limits = Limits()) -> CheckOutcome:
        result = grade(answer, self.tests, limits=limits)
        if result.timed_out:
            summary = f"timed out after {limits.wall_s:g} s"
        else:
            lines = result.output.strip().splitlines()
            lines.append(f"{result.tests_passed}/{result.tests_total} passed" if result.tests_total
                         else "the tests did not finish")
            summary = "\n".join(lines[-SUMMARY_LINES:])
        return CheckOutcome(result.passed, summary)


def suite_from_file(path: Path) -> TestSuite:
    """A plain-assert or pytest-style test file; unreadable or empty is exit 2."""
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
    try:
        compile(text, str(path), "exec")
    except SyntaxError as exc:
        raise UsageError(f"--tests file {path}:{exc.lineno}: {exc.msg}") from None
    functions = [node for node in ast.parse(text).body
                 if isinstance(node, ast.FunctionDef) and node.name.startswith("test")]
    return TestSuite(str(path), Tests("file", source=text), max(1, len(functions)))


def suite_from_problem(text: str) -> TestSuite | None:
    """The problem's doctest examples (``>>> expr`` followed by the expected output), if any.

    Fence and docstring-quote lines end an expected output (a Markdown problem puts its examples
    in a docstring inside a code block); a paragraph doctest cannot parse is skipped."""
    lines = ["" if line.strip() in ('"""', "'''") or line.lstrip().startswith("```") else line
             for line in text.splitlines()]
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

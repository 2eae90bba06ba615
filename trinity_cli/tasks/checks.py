"""Execution checks for `solve`: a test file, or the doctest examples of the problem text.

The answer is written as `solution.py` beside a runner, in the sandbox. A test file runs with
the answer's names in scope: its module-level asserts run first, then every `test*` function
it defines (pytest-style, no pytest needed). Doctest examples (`>>> add(2, 3)` / `5`) run with
ELLIPSIS and NORMALIZE_WHITESPACE against the answer's names. The runner's last line is
`trinity-check: N/M passed`; a check passes only with exit code 0 and that line with N == M,
so an answer that exits early (`sys.exit(0)` at import) does not pass.
"""

from __future__ import annotations

import doctest
import json
import re
from dataclasses import dataclass
from pathlib import Path

from trinity_cli.core.episode import CheckOutcome
from trinity_cli.errors import UsageError
from trinity_cli.tasks.sandbox import Limits, run_python

SUMMARY_LINES = 30
_RESULT_LINE = re.compile(r"^trinity-check: (\d+)/(\d+) passed$", re.MULTILINE)

_TEST_FILE_RUNNER = r'''
import os, sys, traceback
sys.path.insert(0, os.getcwd())
import solution
scope = {k: v for k, v in vars(solution).items() if not k.startswith("__")}
scope["__name__"] = "trinity_tests"
before = set(scope)
failed, total = 0, 1
try:
    exec(compile(open("tests.py", encoding="utf-8").read(), "tests.py", "exec"), scope)
except Exception:
    failed = 1
    print("module-level assertions failed:")
    traceback.print_exc(limit=-2, file=sys.stdout)
if not failed:
    tests = [(n, f) for n, f in scope.items() if n.startswith("test") and callable(f) and n not in before]
    total += len(tests)
    for name, fn in tests:
        try:
            fn()
        except Exception:
            failed += 1
            print(f"{name} failed:")
            traceback.print_exc(limit=-2, file=sys.stdout)
print(f"trinity-check: {total - failed}/{total} passed")
sys.exit(1 if failed else 0)
'''

_DOCTEST_RUNNER = r'''
import doctest, json, os, sys
sys.path.insert(0, os.getcwd())
import solution
examples = [doctest.Example(source, want) for source, want in json.load(open("examples.json"))]
test = doctest.DocTest(examples, dict(vars(solution)), "problem examples", "problem", 0, None)
runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
runner.run(test, out=sys.stdout.write)
failed, total = runner.summarize(verbose=False)
print(f"trinity-check: {total - failed}/{total} passed")
sys.exit(1 if failed else 0)
'''


@dataclass(frozen=True)
class TestSuite:
    """What an answer is checked against; `source` names it in reports and JSON."""

    __test__ = False  # not a pytest class

    source: str  # the test file's path, or "problem examples"
    runner: str
    files: dict[str, str]
    count: int  # test functions (+1 for the module), or doctest examples

    def run(self, answer: str, limits: Limits = Limits()) -> CheckOutcome:
        result = run_python(self.runner, limits, {**self.files, "solution.py": answer})
        found = _RESULT_LINE.findall(result.stdout)
        passed = result.passed and bool(found) and found[-1][0] == found[-1][1]
        if result.timed_out:
            summary = f"timed out after {limits.wall_s:g} s"
        else:
            lines = (result.stdout + result.stderr).strip().splitlines()
            summary = "\n".join(lines[-SUMMARY_LINES:]) or f"exit code {result.returncode}, no output"
        return CheckOutcome(passed, summary)


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
    count = 1 + len(re.findall(r"^def test", text, re.MULTILINE))
    return TestSuite(str(path), _TEST_FILE_RUNNER, {"tests.py": text}, count)


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
    pairs = [(e.source, e.want) for e in examples]
    return TestSuite("problem examples", _DOCTEST_RUNNER, {"examples.json": json.dumps(pairs)}, len(pairs))

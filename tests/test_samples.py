"""Stdin/stdout problems: their samples are found in the text, the answer runs as a program on
each in the real sandbox, and only this process's comparison of its stdout can pass it.

tests/data/problems/ holds hand-written problems in the layouts statements use, each with a
right program (`NAME.right.py`) and one right on the first sample but not on all
(`NAME.first_only.py`). That the program's stdin is exactly the input: tests/test_sandbox.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from support.cli import trinity
from support.wire.server import WireServer, openai_stream

from trinity_cli.cli.problem import NO_EXAMPLES, read_problem
from trinity_cli.core.roles import STDIN_PROGRAM_NOTE
from trinity_cli.errors import UsageError
from trinity_cli.tasks.checks import TestSuite, suite_from_file, suite_from_problem
from trinity_cli.tasks.samples import find_samples, output_difference, stated_tolerance

PROBLEMS = Path(__file__).parent / "data" / "problems"
# Layouts: tiles, leap_year: "### Sample Input 1" headings and fences (3 and 5 samples); lamps:
# Codeforces, "## Input" format sections, then "### Input" under "## Examples"; longest_run:
# plain paragraphs with explanations after the outputs; bus_fare: "Sample Input 1:" and indented
# blocks; average_speed: a 10^{-6} tolerance; times_table_crlf: CRLF; reverse_words: bold,
# unnumbered, ```text; stairs: plain "Examples" / "input" / "output" lines; paragraphs: "Input 1"
# under "## Sample tests", ~~~ fences holding blank lines; upside_down: plain grid rows that
# start with "#" (and a right program that prints trailing spaces and a blank line).
SAMPLE_COUNTS = {
    "average_speed": 3, "bus_fare": 2, "lamps": 2, "leap_year": 5, "longest_run": 3,
    "paragraphs": 2, "reverse_words": 2, "stairs": 2, "tiles": 3, "times_table_crlf": 2,
    "upside_down": 2,
}


def program(name: str, kind: str) -> str:
    return (PROBLEMS / f"{name}.{kind}.py").read_text()


@pytest.fixture(scope="module")
def suites() -> dict[str, TestSuite | None]:
    """Each problem's check, from the text exactly as `solve` reads it (CRLF kept)."""
    return {
        name: suite_from_problem(read_problem(str(PROBLEMS / f"{name}.md")))
        for name in SAMPLE_COUNTS
    }


def test_every_problem_file_is_listed_and_the_crlf_one_keeps_its_line_endings():
    assert sorted(p.stem for p in PROBLEMS.glob("*.md")) == sorted(SAMPLE_COUNTS)
    assert b"\r\n" in (PROBLEMS / "times_table_crlf.md").read_bytes()


@pytest.mark.parametrize("name", sorted(SAMPLE_COUNTS))
def test_the_samples_are_found_and_judge_programs(suites, name):
    suite = suites[name]
    assert suite is not None and suite.source == "problem samples" and suite.stdin_program
    assert suite.count == SAMPLE_COUNTS[name] == len(suite.tests.examples)
    assert suite.run(program(name, "right")).passed
    wrong = program(name, "first_only")
    first = replace(suite, tests=replace(suite.tests, examples=suite.tests.examples[:1]), count=1)
    # so the failure below is the other samples', not a broken program
    assert first.run(
        wrong
    ).passed
    failed = suite.run(wrong)
    assert not failed.passed and "case 1 failed" not in failed.summary
    assert f"/{suite.count} passed" in failed.summary and "expected" in failed.summary


def test_what_a_layout_holds_is_read_exactly():
    texts = {
        name: read_problem(str(PROBLEMS / f"{name}.md"))
        for name in ("paragraphs", "longest_run", "bus_fare")
    }
    # a fence keeps blank lines
    assert (
        find_samples(texts["paragraphs"])[1].input == "x\n\n\ny\n\nz\n"
    )
    # not the explanations
    assert [s.output for s in find_samples(texts["longest_run"])] == [
        "3\n", "2\n", "4\n",
    ]
    assert find_samples(texts["bus_fare"])[0].input == "3\n5 30 40\n"  # an indented block, dedented


FORMAT_ONLY = """# Sum

## Input

```
a b
```

## Output

Print a + b.

Example 1:

Input: a = 1, b = 2
Output: 3
"""
BOTH = "Write `double(x)`.\n\n>>> double(2)\n4\n\nSample Input 1\n\n2\n\nSample Output 1\n\n4\n"


def test_input_format_sections_and_inline_examples_are_not_samples_and_doctests_win():
    assert find_samples(FORMAT_ONLY) == () and suite_from_problem(FORMAT_ONLY) is None
    both = suite_from_problem(BOTH)
    assert both is not None and both.source == "problem examples" and not both.stdin_program


# Programs that claim a pass without printing the answers: a harness-style token line, a
# summary, an early exit, and one that looks for the expected output in its work dir.
FORGERIES = {
    "pass marker": "print('OK 3/3 passed')\n",
    "token line": "print('\\n0123456789abcdef0123456789abcdef 3/3')\n",
    "os._exit(0)": "import os\nprint('3/3 passed', flush=True)\nos._exit(0)\n",
    "sys.exit(0)": "import sys\nsys.exit(0)\n",
    "reads its work dir": "import os\nfor name in os.listdir('.'):\n    print(open(name).read())\n",
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_pass_fails(suites, forgery):
    result = suites["tiles"].run(FORGERIES[forgery])
    assert not result.passed and "0/3 passed" in result.summary


def test_numbers_compare_within_the_stated_tolerance_and_exactly_without_one(suites):
    suite = suites["average_speed"]
    assert suite is not None and suite.tests.tolerance == pytest.approx(1e-6)
    scaled = (
        "import sys\nn, *v = map(int, sys.stdin.read().split())\n"
        "legs = list(zip(v[::2], v[1::2]))\n"
        "print(sum(d for d, _ in legs) / sum(d / s for d, s in legs) * (1 + {}))\n"
    )
    assert suite.run(scaled.format("5e-7")).passed
    outside = suite.run(scaled.format("5e-6"))
    assert not outside.passed and "expected '40.0000000000'" in outside.summary
    exact = replace(suite, tests=replace(suite.tests, tolerance=None))
    # it prints 40.0, not 40.0000000000
    assert not exact.run(
        program("average_speed", "right")
    ).passed


@pytest.mark.parametrize(
    "text,tolerance",
    [
        ("absolute or relative error at most $10^{-6}$", 1e-6),
        ("The answer is accepted if it differs from the true value by at most 10^-9.", 1e-9),
        ("Your output may have an absolute error up to 1e-4.", 1e-4),
        ("error not exceeding 2 \\times 10^{−5}", 2e-5), ("tolerance 10<sup>-3</sup>", 1e-3),
        ("1 <= N <= 10^5, and print the answer modulo 998244353.", None),
        ("It takes 1e-3 seconds per step.", None),
    ],
)
def test_the_stated_tolerance_is_parsed(text, tolerance):
    assert stated_tolerance(text) == (pytest.approx(tolerance) if tolerance else None)


@pytest.mark.parametrize(
    "actual,expected,tolerance,equal",
    [
        # CRLF, trailing spaces, trailing blank lines
        (
            "1 2\r\n3   \r\n\r\n\n", "1 2\n3\n", None, True,
        ),
        ("1  2\n", "1 2\n", None, True),  # tokens, not spacing
        ("1 2\n", "1 2 3\n", None, False),
        ("3.0\n", "3\n", None, False),  # no tolerance: tokens must be equal
        ("3.0000001\n", "3\n", 1e-6, True), ("Yes\n", "yes\n", 1e-6, False),
        ("1\n\n2\n", "1\n2\n", None, False),  # a blank line inside counts
    ],
)
def test_outputs_compare_as_a_judge_reads_them(actual, expected, tolerance, equal):
    assert (output_difference(actual, expected, tolerance) is None) == equal


CASES = [{"input": "1 7 3\n", "output": "3\n"}, {"input": "3 10 4", "output": "9"}]


@pytest.mark.parametrize("content", [CASES, {"tests": CASES}])
def test_a_json_tests_file_is_stdin_stdout_cases(tmp_path, content):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(content))
    suite = suite_from_file(path)
    assert suite.count == 2 and suite.stdin_program and suite.source == str(path)
    assert suite.run(program("tiles", "right")).passed
    assert not suite.run(program("tiles", "first_only")).passed


@pytest.mark.parametrize(
    "content,fragment",
    [
        ("[{", "is not valid JSON"), ('{"input": "1", "output": "2"}', "unknown key 'input'"),
        ("[]", "at least one case"), ('[{"input": "1"}]', "case 1 is not"),
        ('[{"input": 1, "output": "2"}]', "case 1 is not"),
        ('{"tests": [{"input": "1", "output": "2"}], "tolerance": "small"}', "tolerance"),
    ],
)
def test_a_malformed_json_tests_file_is_a_usage_error_naming_it(tmp_path, content, fragment):
    path = tmp_path / "cases.json"
    path.write_text(content)
    with pytest.raises(UsageError, match=fragment) as caught:
        suite_from_file(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


ACCEPT = "Looks right. <verdict>ACCEPT</verdict>"


def fenced(code: str) -> str:
    return f"```python\n{code}```"


@pytest.fixture()
def server(workdir):
    """An OpenAI-compatible agent on loopback, and its pool file in the current directory."""
    wire = WireServer()
    (workdir / "pool.toml").write_text(
        f'[[agents]]\nname="srv"\nprovider="openai"\nmodel="m"\nbase_url="{wire.url}/v1"\n'
    )
    yield wire
    wire.close()


def solve(*args: str):
    return trinity("solve", *args, "--pool", "pool.toml", "--weights", "none", "--max-turns", "3")


def test_solve_checks_a_program_against_json_cases_end_to_end(server, workdir):
    (workdir / "tiles.md").write_text((PROBLEMS / "tiles.md").read_text())
    (workdir / "cases.json").write_text(json.dumps({"tests": CASES}))
    server.responses += [
        openai_stream(s) for s in ["plan", fenced(program("tiles", "first_only")), ACCEPT]
    ]
    result = solve("tiles.md", "--tests", "cases.json", "--json")
    assert result.returncode == 6, result.stderr
    report = json.loads(result.stdout)
    assert report["tests"]["source"] == "cases.json" and report["tests"]["count"] == 2
    assert report["verdict"] == "tests_failed" and "0/2 passed" in report["tests"]["summary"]
    worker_system = server.requests[1]["json"]["messages"][0]["content"]
    assert worker_system.endswith(STDIN_PROGRAM_NOTE)  # the Worker was asked for a program

    server.responses += [
        openai_stream(s) for s in ["plan", fenced(program("tiles", "right")), ACCEPT]
    ]
    result = solve("tiles.md", "--tests", "cases.json")
    assert result.returncode == 0, result.stderr
    assert (
        "checked by cases.json (2 tests)" in result.stderr and "cases.json passed" in result.stderr
    )
    assert "print(h * -(-w // length))" in result.stdout

    server.responses += [
        openai_stream(s) for s in ["plan", fenced(program("tiles", "right")), ACCEPT]
    ]
    result = solve("tiles.md", "--json")  # no --tests: the problem's own samples
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tests"] == {
        "source": "problem samples", "count": 3, "passed": True, "summary": "3/3 passed",
    }

    (workdir / "bad.json").write_text('[{"input": "1"}]')
    result = solve("tiles.md", "--tests", "bad.json")
    assert (
        result.returncode == 2 and "bad.json" in result.stderr and "Traceback" not in result.stderr
    )
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_header_says_when_no_examples_are_found(server, workdir):
    (workdir / "plain.md").write_text("# Greet\n\nWrite `greet(name)` that returns a greeting.\n")
    code = fenced("def greet(name):\n    return 'hi ' + name\n")
    server.responses += [openai_stream(s) for s in ["plan", code, ACCEPT]]
    result = solve("plain.md")
    assert result.returncode == 0, result.stderr
    assert NO_EXAMPLES in result.stderr.splitlines()[0]
    assert STDIN_PROGRAM_NOTE not in server.requests[1]["json"]["messages"][0]["content"]

    server.responses += [openai_stream(s) for s in ["plan", code, ACCEPT]]
    result = solve("plain.md", "--no-tests")  # turned off, not missing: no note
    assert result.returncode == 0 and NO_EXAMPLES not in result.stderr

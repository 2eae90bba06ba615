"""Execution-grounded verification: a Verifier's ACCEPT counts only when the answer passes the
tests (`--tests FILE`, or the problem's doctest examples) in the sandbox."""

from __future__ import annotations

import json

import pytest
from support.cli import trinity
from support.scripted import (
    ACCEPT,
    BROKEN,
    PROBLEM_TEXT,
    RIGHT,
    WRONG,
    CountingCoordinator,
    ScriptedPolicy,
    ScriptedProvider,
)
from support.wire.server import WireServer, openai_stream

from trinity_cli.core.episode import Agent, run_episode
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Problem
from trinity_cli.errors import UsageError
from trinity_cli.tasks.checks import suite_from_file, suite_from_problem

T, W, V = Role.THINKER, Role.WORKER, Role.VERIFIER


def test_doctest_examples_are_found_and_judge_answers():
    suite = suite_from_problem(PROBLEM_TEXT)
    assert suite is not None and suite.count == 2
    assert suite.run("def add(a, b):\n    return a + b\n").passed
    failed = suite.run("def add(a, b):\n    return a * b\n")
    assert not failed.passed and "add(2, 3)" in failed.summary and "0/2 passed" in failed.summary
    assert suite_from_problem("Write a function. No examples here.") is None


def test_a_test_file_runs_asserts_and_test_functions(tmp_path):
    path = tmp_path / "tests.py"
    path.write_text(
        "assert add(1, 1) == 2\n\ndef test_negative():\n    assert add(-2, -3) == -5\n\n"
        "def test_big():\n    assert add(10**20, 1) == 10**20 + 1\n"
    )
    suite = suite_from_file(path)
    assert suite.count == 3  # the module's asserts (one test) and the two test functions
    passed = suite.run("def add(a, b):\n    return a + b\n")
    assert passed.passed and "3/3 passed" in passed.summary
    half = suite.run("def add(a, b):\n    return a + b if a > 0 else 0\n")
    assert (
        not half.passed and "test_negative failed" in half.summary and "2/3 passed" in half.summary
    )
    # the module's asserts must pass for any function to run
    broken = suite.run("def add(a, b):\n    return 0\n")
    assert "module-level assertions failed" in broken.summary and "0/3 passed" in broken.summary
    assert not suite.run("import sys\nsys.exit(0)\n").passed  # exiting early is not passing


def test_a_test_file_counts_its_module_asserts_as_one_test_and_each_test_function(tmp_path):
    path = tmp_path / "tests.py"
    path.write_text("def test_one():\n    assert add(1, 1) == 2\n")
    assert suite_from_file(path).count == 1
    path.write_text(  # an assert inside a module-level loop is a module-level assert
        "for a in range(3):\n    assert add(a, 0) == a\n\n"
        "def test_one():\n    assert add(1, 1) == 2\n"
    )
    suite = suite_from_file(path)
    ran = suite.run("def add(a, b):\n    return a + b\n")
    assert suite.count == 2 and "2/2 passed" in ran.summary


def test_an_answers_own_test_functions_do_not_replace_the_users(tmp_path):
    path = tmp_path / "tests.py"
    path.write_text("def test_add():\n    assert add(2, 3) == 5\n")
    # a wrong add, with a test_add of its own that it passes
    sly = "def add(a, b):\n    return a - b\n\ndef test_add():\n    assert add(1, 1) == 0\n"
    ran = suite_from_file(path).run(sly)
    assert not ran.passed and "test_add failed" in ran.summary and "0/1 passed" in ran.summary
    helper = "def add(a, b):\n    return a + b\n\ndef test_helper():\n    assert False\n"
    ran = suite_from_file(path).run(helper)  # its other test_* functions are not the user's tests
    assert ran.passed and "1/1 passed" in ran.summary


@pytest.mark.parametrize(
    "content,fragment",
    [
        ("x = 1\n\ndef check_add():\n    assert add(1, 2) == 3\n", "nothing would check"),
        ("async def test_add():\n    assert add(1, 2) == 3\n", "test_add would not run"),
        ("class TestAdd:\n    def test_it(self):\n        assert add(1, 2) == 3\n", "TestAdd"),
    ],
)
def test_a_test_file_that_would_pass_any_answer_is_refused(tmp_path, content, fragment):
    path = tmp_path / "tests.py"
    path.write_text(content)
    with pytest.raises(UsageError, match=fragment):
        suite_from_file(path)
    path.write_text("assert add(1, 1) == 2\nassert add(0, 0) == 0\n")
    suite = suite_from_file(path)
    assert (
        suite.count == 1 and "1/1 passed" in suite.run("def add(a, b):\n    return a + b\n").summary
    )


@pytest.mark.parametrize(
    "content,fragment",
    [(None, "not found"), ("", "is empty"), ("def (:\n", "tests.py:1"), (b"\xff\xfe", "not UTF-8")],
)
def test_bad_test_files_are_usage_errors(tmp_path, content, fragment):
    path = tmp_path / "tests.py"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=fragment):
        suite_from_file(path)


def run(scripts, plan, max_turns):
    pool = [Agent("a0", ScriptedProvider(list(scripts)), 100)]
    problem = Problem.from_markdown(PROBLEM_TEXT)
    return run_episode(
        problem, pool, CountingCoordinator(), ScriptedPolicy(tuple(plan), n_agents=1),
        max_turns=max_turns, check=suite_from_problem(PROBLEM_TEXT).run,
    ), pool[0].provider


def test_an_accept_of_a_failing_answer_is_overruled_and_the_loop_goes_on():
    result, provider = run([WRONG, ACCEPT, RIGHT, ACCEPT], [(0, W), (0, V), (0, W), (0, V)], 4)
    assert result.verdict == "accepted" and len(result.turns) == 4
    assert result.check.passed and result.verifier_verdict == "accept"
    assert "FAILED the tests" in provider.requests[2].user  # the next Worker saw the failure


def test_a_failing_answer_at_the_end_is_tests_failed():
    result, _ = run([WRONG, ACCEPT], [(0, W), (0, V)], 2)
    assert result.verdict == "tests_failed"
    assert result.verifier_verdict == "accept" and not result.check.passed


def test_an_answer_that_does_not_parse_is_never_accepted_and_never_run():
    ran = []

    def check(answer):
        ran.append(answer)
        return suite_from_problem(PROBLEM_TEXT).run(answer)

    provider = ScriptedProvider([BROKEN, ACCEPT, RIGHT, ACCEPT])
    result = run_episode(
        Problem.from_markdown(PROBLEM_TEXT), [Agent("a", provider, 100)], CountingCoordinator(),
        ScriptedPolicy(((0, W), (0, V), (0, W), (0, V))), max_turns=4, check=check,
    )
    assert result.verdict == "accepted" and len(result.turns) == 4
    # the broken answer was never executed
    assert ran == [
        RIGHT.split("\n", 1)[1].removesuffix("```")
    ]
    assert "[syntax check: the answer does not parse]" in provider.requests[2].user
    assert "SyntaxError" in provider.requests[2].user


@pytest.mark.parametrize("reply", [BROKEN, "I would use a loop over the items."])
def test_a_final_answer_that_does_not_parse_is_tests_failed_even_without_tests(reply):
    provider = ScriptedProvider([reply, ACCEPT])
    result = run_episode(
        Problem.from_markdown(PROBLEM_TEXT), [Agent("a", provider, 100)], CountingCoordinator(),
        ScriptedPolicy(((0, W), (0, V))), max_turns=2,
    )
    assert result.verdict == "tests_failed" and result.verifier_verdict == "accept"
    assert result.check.source == "syntax" and not result.check.passed


def test_a_parsing_answer_without_tests_is_the_verifiers_call():
    provider = ScriptedProvider([WRONG, ACCEPT])
    result = run_episode(
        Problem.from_markdown(PROBLEM_TEXT), [Agent("a", provider, 100)], CountingCoordinator(),
        ScriptedPolicy(((0, W), (0, V))), max_turns=2,
    )
    assert result.verdict == "accepted" and result.check is None


def test_the_cli_reports_verifier_verdict_and_tests_separately(workdir):
    server = WireServer()
    try:
        server.responses += [openai_stream(s) for s in ["plan", WRONG, ACCEPT]]
        (workdir / "pool.toml").write_text(
            f'[[agents]]\nname="srv"\nprovider="openai"\nmodel="m"\nbase_url="{server.url}/v1"\n'
        )
        (workdir / "add.md").write_text(PROBLEM_TEXT)
        result = trinity(
            "solve", "add.md", "--pool", "pool.toml", "--weights", "none", "--max-turns", "3",
            "--json",
        )
        assert result.returncode == 6, result.stderr
        report = json.loads(result.stdout)
        assert report["verdict"] == "tests_failed" and report["verifier_verdict"] == "accept"
        assert (
            report["tests"]["source"] == "problem examples" and report["tests"]["passed"] is False
        )
        assert "0/2 passed" in report["tests"]["summary"]
        # the check line names the source the JSON names
        assert (
            "problem examples FAILED" in result.stderr
        )
        server.responses += [openai_stream(s) for s in ["plan", WRONG, ACCEPT]]
        result = trinity(
            "solve", "add.md", "--pool", "pool.toml", "--weights", "none", "--max-turns", "3",
            "--jsonl", "-q",
        )
        events = [json.loads(line) for line in result.stdout.splitlines()]
        [check] = [e for e in events if e["event"] == "check"]
        assert (
            check["source"] == events[-1]["tests"]["source"] == "problem examples"
            and check["passed"] is False
        )

        (workdir / "tests.py").write_text(
            "assert add(1, 1) == 2\n\ndef test_add():\n    assert add(2, 2) == 4\n"
        )
        server.responses += [openai_stream(s) for s in ["plan", RIGHT, ACCEPT]]
        result = trinity(
            "solve", "add.md", "--pool", "pool.toml", "--weights", "none", "--max-turns", "3",
            "--tests", "tests.py",
        )
        assert result.returncode == 0, result.stderr
        assert "return a + b" in result.stdout and "tests.py passed" in result.stderr
        assert "checked by tests.py (2 tests)" in result.stderr  # the asserts count as one

        server.responses += [openai_stream(s) for s in ["plan", WRONG, ACCEPT]]
        result = trinity(
            "solve", "add.md", "--pool", "pool.toml", "--weights", "none", "--max-turns", "3",
            "--no-tests", "-q",
        )
        # no check: the Verifier decides alone
        assert (
            result.returncode == 0 and "a * b" in result.stdout
        )

        server.responses += [openai_stream(s) for s in ["plan", BROKEN, ACCEPT]]
        result = trinity(
            "solve", "add.md", "--pool", "pool.toml", "--weights", "none", "--max-turns", "3",
            "--no-tests", "--json",
        )
        assert result.returncode == 6, result.stderr  # even with --no-tests, an answer must parse
        report = json.loads(result.stdout)
        assert report["verdict"] == "tests_failed" and report["verifier_verdict"] == "accept"
        assert report["tests"]["source"] == "syntax" and report["tests"]["passed"] is False
        assert "SyntaxError" in report["tests"]["summary"] and "syntax FAILED" in result.stderr
    finally:
        server.close()

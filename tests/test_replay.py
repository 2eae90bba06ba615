"""Replay agents (`provider = "replay"`): recorded answers of real models, through the real
grader, the real sandbox and the real CLI. A small user record on four HumanEval tasks, two
models ("cheap" and "dear"), samples and a repair round, runs through solve, train and eval."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from support.cli import assert_clean_failure, trinity
from support.tasks import write_tasks

from trinity_cli.core.episode import run_episode
from trinity_cli.core.head import PlanPolicy
from trinity_cli.core.provider import Request
from trinity_cli.core.roles import SYSTEM_PROMPTS, Role, extract_code
from trinity_cli.errors import ConfigError
from trinity_cli.pool.spec import load_pool, parse_pool
from trinity_cli.providers.record_file import parse_record
from trinity_cli.providers.registry import build_agents
from trinity_cli.tasks.grading import Grader, run_check
from trinity_cli.tasks.taskset import Task, load_humaneval
from trinity_cli.train.fitness import play

HUMANEVAL = {t.task_id: t for t in load_humaneval()}
# A, B train split; C, D test split
A, B, C, D = (
    HUMANEVAL[f"HumanEval/{n}"] for n in (0, 2, 7, 9)
)
CHEAP, DEAR = "cheap-model", "dear-model"


def right(task: Task) -> str:  # (stripped: a reply's code block is, see core.roles.extract_code)
    return (task.prompt + (task.canonical_solution or "")).strip() + "\n"


def wrong(task: Task) -> str:
    return task.prompt.strip() + "\n    return None\n"  # fails every visible test of A-D


USER_RECORD = [
    {"model": CHEAP, "task_id": A.task_id, "code": wrong(A)},  # round 0 fails ...
    # ... its own repair passes
    {
        "model": CHEAP, "task_id": A.task_id, "code": right(A), "round": 1,
    },
    {"model": CHEAP, "task_id": B.task_id, "code": right(B), "sample": 0},
    {"model": CHEAP, "task_id": B.task_id, "code": wrong(B), "sample": 1},
    {"model": CHEAP, "task_id": C.task_id, "code": wrong(C)},
    {"model": CHEAP, "task_id": D.task_id, "code": right(D), "tokens_in": 100, "tokens_out": 200},
    *({"model": DEAR, "task_id": t.task_id, "code": right(t)} for t in (A, B, C, D)),
]

POOL = """
[[agents]]
name = "cheap"
provider = "replay"
record = "{record}"
model = "{cheap}"
price_in = 0.5
price_out = 1.0

[[agents]]
name = "dear"
provider = "replay"
record = "{record}"
model = "{dear}"
price_in = 10.0
price_out = 30.0
"""


def write_record(path: Path, rows: list, *, raw_lines: tuple[str, ...] = ()) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in rows) + "".join(line + "\n" for line in raw_lines)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def write_pool(
    folder: Path, record: str = "rec.jsonl.gz", cheap: str = CHEAP, dear: str = DEAR
) -> Path:
    path = folder / "pool.toml"
    path.write_text(POOL.format(record=record, cheap=cheap, dear=dear))
    return path


@pytest.fixture()
def user(workdir: Path) -> Path:
    """A folder with the record (gzip), its pool (the record named relative to it) and the
    four tasks as a task file."""
    folder = workdir / "mine"
    folder.mkdir()
    write_record(folder / "rec.jsonl.gz", USER_RECORD)
    write_pool(folder)
    write_tasks(folder / "tasks.jsonl", (A, B, C, D), "visible_tests")
    return folder


def agents_of(pool: Path, tasks=(A, B, C, D)):
    return build_agents(load_pool(str(pool)).agents, list(tasks))


def worker(agent, task: Task, **fields) -> str:
    reply = agent.provider.complete(
        Request(
            Role.WORKER, SYSTEM_PROMPTS[Role.WORKER], f"## Task\n\n{task.prompt}",
            task_id=task.task_id, **fields,
        )
    )
    return extract_code(reply.text)


# --- the record format ---------------------------------------------------------------------

BAD_LINES = [
    ('{"model": "m", "task_id": "HumanEval/0", "code": "x = 1"', "not valid JSON"),
    ('["model", "task_id"]', "must be a JSON object"),
    ('{"task_id": "HumanEval/0", "code": "x = 1"}', "'model' is missing"),
    ('{"model": "m", "code": "x = 1"}', "'task_id' is missing"),
    ('{"model": "m", "task_id": "HumanEval/0"}', "'code' is missing"),
    ('{"model": "m", "task_id": "HumanEval/0", "code": 7}', "'code' is missing or not a string"),
    (
        '{"model": "m", "task_id": "HumanEval/0", "code": "x = 1", "round": "1"}',
        "'round' must be an integer",
    ),
    (
        '{"model": "m", "task_id": "HumanEval/0", "code": "x = 1", "sample": -1}',
        "'sample' must be an integer",
    ),
    (
        '{"model": "m", "task_id": "HumanEval/0", "code": "x = 1", "tokens_in": true}',
        "'tokens_in' must be an integer",
    ),
    (
        '{"model": "m", "task_id": "HumanEval/0", "code": "x = 1", "temperature": 1}',
        "unknown field 'temperature'",
    ),
    (
        '{"model": "m", "task_id": "HumanEval/0", "pass_rate": 1.5, "correct": []}',
        "'pass_rate' must be a number from 0 to 1",
    ),
    ('{"model": "m", "task_id": "HumanEval/0", "pass_rate": 0.5}', "'correct' is missing"),
    (
        '{"model": "m", "task_id": "HumanEval/0", "pass_rate": 0.5, "correct": [""]}',
        "'correct' is missing or not a list",
    ),
    ('{"model": "m", "task_id": "HumanEval/1", "code": "x = 1"}', "already given on line 2"),
    (
        '{"model": "m", "task_id": "HumanEval/0", "pass_rate": 0.5, "correct": []}',
        "both programs and a pass rate",
    ),
    ('{"model": "m", "task_id": "HumanEval/3", "code": "x = 1", "round": 2}', "has no round 0"),
]


@pytest.mark.parametrize(("line", "fragment"), BAD_LINES)
def test_each_bad_record_line_is_a_config_error_naming_file_and_line(tmp_path, line, fragment):
    good = {"model": "m", "task_id": "HumanEval/0", "code": "x = 1"}
    path = write_record(
        tmp_path / "r.jsonl", [good, {**good, "task_id": "HumanEval/1"}], raw_lines=("", line)
    )
    with pytest.raises(ConfigError) as caught:
        parse_record(path)
    assert caught.value.exit_code == 3
    assert caught.value.message.startswith(f"{path}:4: "), caught.value.message  # line 3 is blank
    assert fragment in caught.value.message


@pytest.mark.parametrize(
    "line",
    [
        '{"model": "m", "task_id": ', '{"model": "m", "task_id": "HumanEval/0", "code": 1}',
        '{"task_id": "HumanEval/0", "code": "x = 1"}',
    ],
)
def test_a_bad_record_line_stops_the_cli_with_exit_3_naming_file_and_line(user, line):
    record = write_record(user / "rec.jsonl.gz", USER_RECORD, raw_lines=(line,))
    result = trinity(
        "eval", "--weights", "none", "--tasks", str(user / "tasks.jsonl"), "--pool",
        str(user / "pool.toml"), "--no-log", "--no-cache",
    )
    assert_clean_failure(result, 3, f"{record.resolve()}:{len(USER_RECORD) + 1}:")
    listed = trinity("pool", "--pool", str(user / "pool.toml"), "--json")
    assert listed.returncode == 3
    assert all(
        not a["usable"] and f":{len(USER_RECORD) + 1}:" in a["detail"]
        for a in json.loads(listed.stdout)["agents"]
    )


def test_an_empty_or_unreadable_record_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="has no lines"):
        parse_record(write_record(tmp_path / "empty.jsonl", [], raw_lines=("", "  ")))
    (tmp_path / "broken.jsonl.gz").write_bytes(b"\x1f\x8b" + b"not gzip")
    with pytest.raises(ConfigError, match="cannot read record"):
        parse_record(tmp_path / "broken.jsonl.gz")


# --- pool keys -----------------------------------------------------------------------------


def test_a_model_that_returned_nothing_is_a_recorded_answer_that_fails(user):
    """Real records hold empty programs (a model sometimes answers nothing): the record loads,
    the empty answer is replayed, the Verifier rejects it and the grader fails it; the
    cascade's next agent then answers."""
    empty = [
        {**row, "code": ""} if row["model"] == CHEAP and row["task_id"] == B.task_id else row
        for row in USER_RECORD
        if not (row["model"] == CHEAP and row["task_id"] == B.task_id and row.get("sample"))
    ]
    write_record(user / "rec.jsonl.gz", empty)
    cheap, dear = agents_of(user / "pool.toml")
    # an empty program, in its fence: an answer
    assert (
        worker(cheap, B).strip() == "```python\n\n```"
    )
    plan = PlanPolicy(2, ((0, Role.WORKER), (0, Role.VERIFIER), (1, Role.WORKER)))
    result = run_episode(B.problem, [cheap, dear], None, PlanPolicy(2, plan.plan[:2]), max_turns=2)
    assert result.answer is not None and "does not parse" in result.turns[1].text
    assert "<verdict>REJECT</verdict>" in result.turns[1].text
    assert not Grader().passes(B, result.answer)
    outcome = play(B, [cheap, dear], None, plan, Grader(), max_turns=3)
    assert outcome.passed and outcome.turns == 3  # dear answered after the rejection


def test_replay_pool_keys_roles_and_record_lookup(user):
    pool = load_pool(str(user / "pool.toml"))
    # the default: they cannot think
    assert [a.roles for a in pool.agents] == [
        ("worker", "verifier")
    ] * 2
    # relative to the pool file, not the cwd
    assert pool.agents[0].record == str(
        user / "rec.jsonl.gz"
    )
    bundled = parse_pool(
        (
            '[[agents]]\nname = "g"\nprovider = "replay"\n'
            'record = "ldb-humaneval"\nmodel = "starcoder"\n'
        ),
        "p.toml",
    )
    assert bundled.agents[0].record.endswith("data/records/ldb-humaneval.jsonl.gz")
    cases = [
        (
            (
                'provider = "replay"\nrecord = "ldb-humaneval"\nmodel = "starcoder"\n'
                'roles = ["thinker", "worker"]'
            ),
            "p.toml: agents[a].roles includes thinker",
        ),
        (
            'provider = "sim"\nrecord = "ldb-humaneval"\nmodel = "x"',
            'agents[a].record applies to provider "replay" only',
        ),
        ('provider = "replay"\nmodel = "starcoder"', "agents[a].record is required"),
        (
            'provider = "replay"\nrecord = "nope.jsonl"\nmodel = "starcoder"',
            "evalperf-api, ldb-humaneval, ldb-mbpp",
        ),
    ]
    for body, fragment in cases:
        with pytest.raises(ConfigError) as caught:
            parse_pool(f'[[agents]]\nname = "a"\n{body}\n', "p.toml")
        assert fragment in caught.value.message


def test_a_bundled_pool_by_name_and_its_agents_usable(workdir):
    assert load_pool("ldb-humaneval").source.endswith("data/pools/ldb-humaneval.toml")
    listed = trinity("pool", "--pool", "ldb-humaneval", "--json")
    assert listed.returncode == 0, listed.stderr
    agents = json.loads(listed.stdout)["agents"]
    assert [(a["name"], a["provider"], a["usable"]) for a in agents] == [
        ("gpt-4", "replay", True), ("gpt-3.5", "replay", True), ("codellama-34b", "replay", True),
        ("starcoder", "replay", True),
    ]
    assert all("164 tasks" in a["detail"] for a in agents)
    shown = trinity("pool", "--pool", "ldb-humaneval").stderr.splitlines()
    assert shown[0] == "pool: ldb-humaneval (bundled)"  # its name, not its path in the package
    assert shown[-1] == (  # and its head likewise
        "policy: ldb-humaneval.npz (shipped); the newest shipped head that fits this "
        "coordinator and pool"
    )
    (workdir / "ldb-humaneval").write_text(
        "[[agents]]\nname = 'mine'\nprovider = 'sim'\nmodel = 'm'\n"
    )
    assert load_pool("ldb-humaneval").names == ("mine",)  # an existing path wins
    assert trinity("pool", "--pool", "ldb-humaneval").stderr.startswith("pool: ldb-humaneval\n")
    assert_clean_failure(
        trinity("pool", "--pool", "no-such-pool"), 3, "evalperf-api, ldb-humaneval, ldb-mbpp"
    )


def test_a_model_the_record_lacks_is_exit_3_naming_agent_and_model(user):
    write_pool(user, dear="ghost-model")
    result = trinity(
        "eval", "--weights", "none", "--tasks", str(user / "tasks.jsonl"), "--pool",
        str(user / "pool.toml"), "--no-log", "--no-cache",
    )
    assert_clean_failure(result, 3, "agent 'dear': its record")
    assert "no model 'ghost-model'" in result.stderr
    listed = json.loads(trinity("pool", "--pool", str(user / "pool.toml"), "--json").stdout)[
        "agents"
    ]
    assert [a["usable"] for a in listed] == [True, False]


def test_a_task_the_record_lacks_is_exit_3_naming_agent_model_and_first_task(user):
    for command in (["eval", "--weights", "none"], ["train", "--out", str(user / "h.npz")]):
        result = trinity(
            *command, "--tasks", "humaneval", "--pool", str(user / "pool.toml"), "--no-log",
            "--no-cache",
        )
        assert_clean_failure(result, 3, "agent 'cheap' replays model 'cheap-model'")
        assert "no answer for task HumanEval/1 (160 of the 164 tasks missing)" in result.stderr


# --- the Worker ----------------------------------------------------------------------------


def test_the_worker_replays_the_repair_round_after_its_own_failed_attempt(user):
    cheap, dear = agents_of(user / "pool.toml")
    assert worker(cheap, A) == wrong(A)
    assert worker(cheap, A, attempt=1) == right(A)
    assert worker(cheap, A, attempt=5) == right(A)  # the last round recorded
    assert worker(cheap, C, attempt=3) == wrong(C)  # no repair recorded: the same program again
    # through the loop: cheap answers, its Verifier rejects (visible tests), cheap answers again
    plan = ((0, Role.WORKER), (0, Role.VERIFIER), (0, Role.WORKER), (1, Role.VERIFIER))
    result = run_episode(A.problem, [cheap, dear], None, PlanPolicy(2, plan), max_turns=4)
    assert [t.answer for t in result.turns if t.answer] == [wrong(A), right(A)]
    assert [t.verdict for t in result.turns if t.verdict] == ["reject", "accept"]
    assert result.verdict == "accepted" and run_check(A, result.answer)


def test_samples_follow_the_seeded_draw_and_vary_with_sample_and_seed(user):
    cheap = agents_of(user / "pool.toml")[0]
    picks = [worker(cheap, B, sample=s) for s in range(40)]
    assert set(picks) == {right(B), wrong(B)} and 8 < picks.count(right(B)) < 32
    assert picks == [worker(cheap, B, sample=s) for s in range(40)]  # reproducible
    spec = load_pool(str(user / "pool.toml")).agents[0]
    reseeded = [build_agents([replace(spec, seed=seed)], [B])[0] for seed in range(1, 30)]
    assert {worker(agent, B) for agent in reseeded} == {right(B), wrong(B)}


def test_a_program_that_exits_0_scores_0_with_the_real_grader(user):
    write_record(
        user / "rec.jsonl.gz",
        [
            {"model": CHEAP, "task_id": A.task_id, "code": "import sys; sys.exit(0)"},
            {"model": DEAR, "task_id": A.task_id, "code": "import os; os._exit(0)"},
        ],
    )
    agents = agents_of(user / "pool.toml", [A])
    grader = Grader()
    for plan in (((0, Role.WORKER),), ((1, Role.WORKER), (1, Role.VERIFIER))):
        outcome = play(A, agents, None, PlanPolicy(2, plan), grader, max_turns=len(plan))
        assert not outcome.passed
    result = run_episode(
        A.problem, agents, None, PlanPolicy(2, ((0, Role.WORKER), (0, Role.VERIFIER))), max_turns=2
    )
    assert result.turns[1].verdict == "reject"  # the visible tests did not run to the end either


def test_cost_is_the_coordinators_token_count_at_the_pools_prices(user, gguf_path):
    from trinity_cli.llama.capi import load_model

    cheap = agents_of(user / "pool.toml")[0]
    request = Request(
        Role.WORKER, SYSTEM_PROMPTS[Role.WORKER], f"## Task\n\n{A.prompt}", task_id=A.task_id
    )
    reply = cheap.provider.complete(request)
    count = lambda text: len(load_model(gguf_path).tokenize(text, bos=False))
    assert (reply.tokens_in, reply.tokens_out) == (
        count(request.system) + count(request.user), count(reply.text),
    )
    assert (
        reply.usd == pytest.approx((0.5 * reply.tokens_in + 1.0 * reply.tokens_out) / 1e6)
        and reply.usd_estimated
    )
    recorded = cheap.provider.complete(replace(request, task_id=D.task_id))
    assert (recorded.tokens_in, recorded.tokens_out) == (100, 200)  # the record's own counts win
    verdict = cheap.provider.complete(
        Request(
            Role.VERIFIER, SYSTEM_PROMPTS[Role.VERIFIER], "## Task\n\nlong transcript",
            task_id=A.task_id, candidate=right(A),
        )
    )
    assert verdict.tokens_in == count(SYSTEM_PROMPTS[Role.VERIFIER]) + count(
        "## Task\n\nlong transcript"
    )
    assert verdict.tokens_out == count(verdict.text) < 40
    # the budget's bound holds
    assert cheap.max_tokens >= max(
        len(r["code"].encode()) for r in USER_RECORD
    )


# --- pass-rate records (synthesized) -------------------------------------------------------

# correct, and its first mutant (1 <= 2) still passes: only a verified mutant fails
TRICKY_B = (
    "def truncate_number(number: float) -> float:\n    assert 1 < 2\n    return number % 1.0\n"
)


def test_pass_rate_records_pass_at_their_rate_and_their_failures_really_fail(tmp_path):
    rows = [
        {"model": "often", "task_id": A.task_id, "pass_rate": 0.8, "correct": [right(A)]},
        # borrows often's program
        {
            "model": "rarely", "task_id": A.task_id, "pass_rate": 0.25, "correct": [],
        },
        {"model": "often", "task_id": B.task_id, "pass_rate": 0.5, "correct": [right(B)]},
        {"model": "rarely", "task_id": B.task_id, "pass_rate": 0.0, "correct": [TRICKY_B]},
    ]
    assert run_check(B, TRICKY_B) and run_check(B, TRICKY_B.replace("1 < 2", "1 <= 2"))
    write_record(tmp_path / "rates.jsonl", rows)
    (tmp_path / "pool.toml").write_text(
        POOL.format(record="rates.jsonl", cheap="rarely", dear="often")
    )
    rarely, often = agents_of(tmp_path / "pool.toml", [A, B])
    for agent, task, rate in (
        (often, A, 0.8), (rarely, A, 0.25), (often, B, 0.5), (rarely, B, 0.0),
    ):
        programs = [worker(agent, task, sample=s) for s in range(200)]
        passing = [p for p in programs if p in (right(task), TRICKY_B)]
        assert abs(len(passing) / 200 - rate) < 0.1, (agent.name, task.task_id)
        failing = set(programs) - set(passing)
        assert failing and all(not run_check(task, p) for p in failing)  # verified by the grader
    retried = {worker(often, B, sample=0, attempt=k) == right(B) for k in range(20)}
    assert retried == {True, False}  # each attempt is a fresh draw


def test_expected_pass_is_unbiased_when_a_verifier_saw_the_answer(tmp_path):
    """Worker, Verifier, Worker with one agent of pass rate 0.6 on A: an accepted first answer
    passes (its visible tests catch the mutants), a rejected one gets a second draw, so the true
    pass is 0.6 + 0.4 * 0.6 = 0.84. Counting the rate for every final answer would give 0.6."""
    write_record(
        tmp_path / "r.jsonl",
        [{"model": "m", "task_id": A.task_id, "pass_rate": 0.6, "correct": [right(A)]}],
    )
    (tmp_path / "pool.toml").write_text(
        '[[agents]]\nname = "m"\nprovider = "replay"\nrecord = "r.jsonl"\nmodel = "m"\n'
        "price_in = 1\nprice_out = 1\n"
    )
    spec = load_pool(str(tmp_path / "pool.toml")).agents[0]
    grader, plan = Grader(), PlanPolicy(1, ((0, Role.WORKER), (0, Role.VERIFIER), (0, Role.WORKER)))
    outcomes = [
        play(A, build_agents([replace(spec, seed=seed)], [A]), None, plan, grader, max_turns=3)
        for seed in range(100)
    ]
    accepted = [o for o in outcomes if o.verdict == "accepted"]
    assert accepted and all(o.expected == 1.0 and o.passed for o in accepted)
    # the unseen second draw
    assert {o.expected for o in outcomes if o.verdict != "accepted"} == {
        0.6
    }
    assert abs(np.mean([o.expected for o in outcomes]) - 0.84) < 0.08  # SE 0.02
    alone = play(
        A, build_agents([spec], [A]), None, PlanPolicy(1, ((0, Role.WORKER),)), grader, max_turns=1
    )
    assert alone.expected == 0.6


def test_a_task_without_tests_gets_an_unverified_mutant(tmp_path):
    untested = replace(A, task_id="X/1", test="")
    write_record(
        tmp_path / "r.jsonl",
        [{"model": "m", "task_id": "X/1", "pass_rate": 0.0, "correct": [right(A)]}],
    )
    (tmp_path / "pool.toml").write_text(
        '[[agents]]\nname = "m"\nprovider = "replay"\nrecord = "r.jsonl"\nmodel = "m"\n'
        "price_in = 1\nprice_out = 1\n"
    )
    (agent,) = agents_of(tmp_path / "pool.toml", [untested])
    mutant = worker(agent, untested)
    assert mutant != right(A) and "def has_close_elements" in mutant


# --- the Verifier --------------------------------------------------------------------------


def verdict_of(agent, task: Task, candidate: str) -> str:
    return agent.provider.complete(
        Request(
            Role.VERIFIER, SYSTEM_PROMPTS[Role.VERIFIER], "## Task", task_id=task.task_id,
            candidate=candidate,
        )
    ).text


def test_the_verifier_runs_the_visible_tests_or_else_the_prompts_examples(user):
    # HumanEval/0's prompt has >>> examples
    examples_only = replace(
        A, task_id=B.task_id, visible_tests=()
    )
    nothing = replace(B, visible_tests=(), prompt=B.prompt.split(">>>")[0] + '"""\n')
    for task, good, bad, what in (
        (A, right(A), wrong(A), "2 visible tests"),
        (examples_only, right(A), wrong(A), "2 examples"),
    ):
        cheap = agents_of(user / "pool.toml", [task])[0]
        accepted, rejected = verdict_of(cheap, task, good), verdict_of(cheap, task, bad)
        assert accepted == f"The program passes the task's {what}.\n<verdict>ACCEPT</verdict>"
        assert rejected.startswith(f"The program fails the task's {what}: ") and rejected.endswith(
            "<verdict>REJECT</verdict>"
        )
        assert len(rejected.splitlines()) == 2
    cheap = agents_of(user / "pool.toml", [nothing])[0]
    assert "accepted unchecked" in verdict_of(cheap, nothing, wrong(B))
    assert "does not parse" in verdict_of(cheap, nothing, "def f(:\n")


# --- end to end through the CLI ------------------------------------------------------------


def test_solve_answers_a_recorded_tasks_prompt_and_refuses_any_other_problem(user):
    # whitespace aside, C's prompt
    (user / "problem.md").write_text(
        f"```python\n{C.prompt}\n```\n"
    )
    solved = trinity(
        "solve", str(user / "problem.md"), "--pool", str(user / "pool.toml"), "--weights", "none",
        "--json", "--no-log", cwd=user,
    )
    assert solved.returncode == 0, solved.stderr
    out = json.loads(solved.stdout)
    assert [(t["agent"], t["role"]) for t in out["turns"]] == [
        ("cheap", "worker"), ("cheap", "verifier"), ("dear", "worker"), ("dear", "verifier"),
    ]
    assert "fails the task's 2 visible tests" in out["turns"][1]["text"]
    assert run_check(C, out["answer"])
    # the replies' tokens were counted, not reported: the $ is estimated
    assert (
        "4 turns · ~$" in solved.stderr
    )
    (user / "other.md").write_text("Write a function that adds two numbers.\n")
    refused = trinity(
        "solve", str(user / "other.md"), "--pool", str(user / "pool.toml"), "--weights", "none",
        "--no-log", cwd=user,
    )
    assert_clean_failure(refused, 3, "answers only a recorded task")


def test_train_and_eval_run_end_to_end_on_a_user_record(user):
    tasks, pool, head = str(user / "tasks.jsonl"), str(user / "pool.toml"), str(user / "head.npz")
    trained = trinity(
        "train", "--tasks", tasks, "--pool", pool, "--out", head, "--generations", "1", "--popsize",
        "2", "--batch-size", "2", "--max-turns", "2", "--project", "2", "--no-log", "--no-cache",
        "-q",
    )
    assert trained.returncode == 0, trained.stderr
    meta = json.loads((user / "head.json").read_text())
    # the head records the mask: replay agents cannot think
    assert (
        meta["agent_roles"] == [["worker", "verifier"]] * 2
    )
    evaluated = trinity(
        "eval", "--weights", head, "--tasks", tasks, "--split", "all", "--pool", pool,
        "--max-turns", "3", "--json", "--no-log", "--no-cache",
    )
    assert evaluated.returncode == 0, evaluated.stderr
    rows = {r["policy"]: r for r in json.loads(evaluated.stdout)["rows"]}
    assert {"trained", "random", "single:cheap", "single:dear", "cascade", "oracle"} <= set(rows)
    # cheap fails A and C at once; the cascade's Verifier (cheap, the cheapest) runs the
    # visible tests, rejects those answers and hands the task to dear, which passes
    assert rows["single:cheap"]["pass_at_1"] <= 0.5 and rows["single:dear"]["pass_at_1"] == 1.0
    # within --max-turns
    assert (
        rows["cascade"]["pass_at_1"] == 1.0 and 2.0 < rows["cascade"]["mean_turns"] <= 3
    )
    # cheap's passes cost less
    assert (
        rows["cascade"]["usd_per_task"] < rows["single:dear"]["usd_per_task"]
    )
    assert "more than reserved" not in evaluated.stderr  # replies stay within the budget's bound


def test_train_dry_run_bounds_replay_replies_by_the_record_not_max_tokens(user):
    """A recorded reply is as long as the record says, whatever `max_tokens` is: the dry run's
    worst case must cover the longest recorded program at the dearest output price."""
    pool = user / "pool.toml"
    pool.write_text(
        pool.read_text().replace("price_out = 30.0", "price_out = 30.0\nmax_tokens = 1")
    )
    longest = max(len(row["code"].encode()) for row in USER_RECORD)
    result = trinity(
        "train", "--tasks", str(user / "tasks.jsonl"), "--pool", str(pool), "--out",
        str(user / "h.npz"), "--dry-run", "--generations", "1", "--popsize", "2", "--batch-size",
        "2", "--max-turns", "1",
    )
    assert result.returncode == 0, result.stderr
    plan = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    calls = int(plan["agent calls"].split()[2])
    worst = float(plan["worst case"].split()[0].lstrip("$"))
    assert worst >= calls * longest * 30.0 / 1e6


def test_train_and_eval_leave_out_tasks_without_tests_and_say_so(user):
    """Nothing can grade a task without tests (evalperf has 47): it would count as a failure for
    every policy alike, so train and eval leave it out and say how many they left."""
    untested = replace(A, task_id="Mine/no-tests", test="")  # in the train split
    with (user / "tasks.jsonl").open("a") as handle:
        handle.write(
            json.dumps(
                {
                    "task_id": untested.task_id, "prompt": A.prompt, "entry_point": A.entry_point,
                    "test": "",
                }
            )
            + "\n"
        )
    write_record(
        user / "rec.jsonl.gz",
        USER_RECORD
        + [{"model": m, "task_id": untested.task_id, "code": right(A)} for m in (CHEAP, DEAR)],
    )
    result = trinity(
        "eval", "--weights", "none", "--tasks", str(user / "tasks.jsonl"), "--split", "all",
        "--pool", str(user / "pool.toml"), "--max-turns", "1", "--json", "--no-log", "--no-cache",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tasks"] == 4
    assert "1 of the 5 tasks have no tests and are left out" in result.stderr
    planned = trinity(
        "train", "--tasks", str(user / "tasks.jsonl"), "--pool", str(user / "pool.toml"),
        "--dry-run", "--out", str(user / "h.npz"), "--generations", "1", "--popsize", "2",
        "--batch-size", "8",
    )
    assert planned.returncode == 0, planned.stderr
    assert "have no tests and are left out" in planned.stderr
    # the search: 1 generation × 2 candidates × the 2 gradable train tasks (A, B), then the head
    # on both
    assert (
        "search: 6 episodes (1 generations × 2 candidates × 2 tasks, "
        "then the head on the 2 training" in planned.stdout
    )

"""The run log (`trinity logs`): every solve is logged turn by turn as it happens, replayed as the
display drew it, summed, pruned; concurrent, locked, corrupt and newer logs never fail a solve."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import subprocess
import time
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from support.cli import TRINITY, trinity
from support.scripted import CountingCoordinator, ScriptedPolicy, ScriptedProvider
from support.tasks import write_tasks
from support.wire.server import WireServer, openai_stream

from trinity_cli.core.episode import Agent, run_episode
from trinity_cli.core.episode_json import episode_json
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Problem
from trinity_cli.pool.spec import parse_pool
from trinity_cli.store.runlog import (
    MIGRATIONS,
    SCHEMA_VERSION,
    RunLog,
    RunLogSink,
    default_path,
    migrate,
    summary_row,
)

PROBLEM_MD = (
    "# Add\n\nWrite `add(a, b)` — the sum.\n\n```python\ndef add(a, b):\n```\n"  # not ASCII
)
PLAN, ANSWER, ACCEPT = (
    "the plan", "```python\ndef add(a, b):\n    return a + b\n```", "<verdict>ACCEPT</verdict>",
)
ANY_ROLE = f"{ANSWER}\n{ACCEPT}"  # a reply that serves whichever role receives it
SOLVE = ("solve", "p.md", "--pool", "pool.toml", "--weights", "none")


@pytest.fixture()
def server(workdir: Path, home: Path):
    wire = WireServer()
    (workdir / "pool.toml").write_text(
        f'[[agents]]\nname="srv"\nprovider="openai"\nmodel="m"\n'
        f'base_url="{wire.url}/v1"\nprice_in=2.0\nprice_out=8.0\ntimeout_s=90\n'
    )
    (workdir / "p.md").write_text(PROBLEM_MD, encoding="utf-8")
    yield wire
    wire.close()


def runs_in_log() -> list[dict]:
    result = trinity("logs", "--json", "-n", "0")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_solve_is_logged_and_show_replays_it_as_drawn(server):
    server.responses += [openai_stream(text, tokens_in=300) for text in (PLAN, ANSWER, ACCEPT)]
    solved = trinity(*SOLVE, "--json", "-v")
    assert solved.returncode == 0, solved.stderr
    [run] = runs_in_log()
    assert run["command"] == "solve" and run["verdict"] == "accepted" and run["turns"] == 3
    assert run["agents"] == ["srv"] and run["usd"] == pytest.approx(
        json.loads(solved.stdout)["usd"]
    )
    assert set(run) == {
        "id", "time", "command", "problem", "problem_sha256", "verdict", "turns", "usd", "agents",
    }
    assert run["problem"] == "Add"  # its first line, the heading's marks dropped
    assert "Add" in trinity("logs").stderr
    # of the text as read
    assert (
        run["problem_sha256"] == hashlib.sha256(PROBLEM_MD.encode()).hexdigest()
    )
    with RunLog.open() as log:
        assert (
            log.get_run(run["id"]).row["problem"]
            == Path("p.md").read_text(encoding="utf-8")
            == PROBLEM_MD
        )

    shown = trinity("logs", "show", "last", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout) == json.loads(solved.stdout)
    replayed = trinity("logs", "show", str(run["id"]))
    assert replayed.returncode == 0
    # line for line, as `solve -v` drew it
    assert (
        replayed.stderr == solved.stderr and "turn  3" in replayed.stderr
    )
    assert PLAN in replayed.stderr and "return a + b" in replayed.stderr  # each turn's text
    assert replayed.stdout == "def add(a, b):\n    return a + b\n"


def test_checks_are_logged_and_show_replays_them_as_drawn(workdir, server):
    """A solve checked by the problem's doctest examples: a wrong answer accepted (tests FAILED,
    the ACCEPT overruled), one that does not parse accepted (syntax FAILED), then a right one."""
    from support.scripted import ACCEPT as VERIFIER_ACCEPT
    from support.scripted import BROKEN, PROBLEM_TEXT, RIGHT, WRONG

    (workdir / "add.md").write_text(PROBLEM_TEXT)
    replies = [
        PLAN, WRONG, VERIFIER_ACCEPT, PLAN, BROKEN, VERIFIER_ACCEPT, PLAN, RIGHT, VERIFIER_ACCEPT,
    ]
    server.responses += [openai_stream(text) for text in replies]
    solved = trinity(
        "solve", "add.md", "--pool", "pool.toml", "--weights", "none", "--max-turns", "9", "--json",
        "-v",
    )
    assert solved.returncode == 0, solved.stderr
    report = json.loads(solved.stdout)
    assert (
        report["verdict"] == "accepted"
        and len(report["turns"]) == 9
        and report["tests"]["passed"] is True
    )
    drawn = solved.stderr
    assert "checked by problem examples (2 tests)" in drawn
    checks = re.findall(r"^ {9}(problem examples|syntax) (passed|FAILED)", drawn, re.MULTILINE)
    assert checks == [
        ("problem examples", "FAILED"), ("syntax", "FAILED"), ("problem examples", "passed"),
    ], drawn

    replayed = trinity("logs", "show", "last")
    assert replayed.returncode == 0 and replayed.stdout == "def add(a, b):\n    return a + b\n"
    assert replayed.stderr == drawn  # header, every turn, every check, as drawn
    shown = trinity("logs", "show", "last", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout) == report
    [run] = runs_in_log()
    assert run["problem_sha256"] == hashlib.sha256((workdir / "add.md").read_bytes()).hexdigest()


def test_each_turn_is_in_the_log_when_it_finishes_and_a_killed_run_keeps_them(server):
    server.responses += [openai_stream(PLAN), replace(openai_stream("never"), delay_s=60)]
    proc = subprocess.Popen(
        [TRINITY, *SOLVE, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while len(server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(server.requests) == 2, "the second call never started"
    proc.kill()  # SIGKILL: no handler, no finally, nothing written after this
    proc.communicate(timeout=30)
    [run] = runs_in_log()
    assert run["verdict"] == "interrupted" and run["turns"] == 1
    listed = json.loads(trinity("logs", "--verdict", "interrupted", "--json").stdout)
    assert [r["id"] for r in listed] == [run["id"]]  # the killed run stored no verdict at all
    report = json.loads(trinity("logs", "show", "last", "--json").stdout)
    assert report["verdict"] == "interrupted" and [t["text"] for t in report["turns"]] == [PLAN]
    assert report["answer"] is None and report["usd"] == pytest.approx(report["turns"][0]["usd"])
    replayed = trinity("logs", "show", "last")
    assert "turn  1" in replayed.stderr and "verdict interrupted · 1 turn ·" in replayed.stderr
    [day] = json.loads(trinity("logs", "stats", "--json").stdout)
    assert (day["agent"], day["calls"], day["answers"], day["accepted"], day["accept_rate"]) == (
        "srv", 1, 0, 0, None,
    )


def test_two_solves_at_once_are_both_logged(server):
    """Both start on a log that does not exist yet: they race to create it, then to write."""
    server.responses += [replace(openai_stream(ANY_ROLE), delay_s=0.5) for _ in range(6)]
    procs = [
        subprocess.Popen(
            [TRINITY, *SOLVE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0 and "return a + b" in out, err
        assert "warning" not in err, err
    assert server.max_in_flight == 2  # they really overlapped
    runs = runs_in_log()
    assert [(r["verdict"], r["turns"]) for r in runs] == [("accepted", 3), ("accepted", 3)]
    db = sqlite3.connect(default_path())
    # readers never wait for a writer
    assert (
        db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    )
    db.close()


def test_a_turn_waits_for_another_writer_instead_of_being_dropped(server):
    """Another process holds the write lock (for less than the busy timeout) when a turn ends."""
    server.responses += [replace(openai_stream(ANY_ROLE), delay_s=0.3) for _ in range(3)]
    with RunLog.open():
        pass  # the log exists
    proc = subprocess.Popen(
        [TRINITY, *SOLVE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    holder = sqlite3.connect(default_path(), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    held = time.monotonic()
    listed = trinity("logs", "--json")  # a reader meanwhile
    time.sleep(max(0.0, 1.5 - (time.monotonic() - held)))  # turn 1 ends in here
    holder.execute("ROLLBACK")
    holder.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "warning" not in err, err
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["turns"] == 0
    assert [(r["verdict"], r["turns"]) for r in runs_in_log()] == [("accepted", 3)]


def test_a_locked_log_costs_one_warning_not_the_run(server):
    server.responses += [openai_stream(ANY_ROLE) for _ in range(6)]
    assert trinity(*SOLVE).returncode == 0  # the log exists, in WAL mode
    holder = sqlite3.connect(default_path(), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        locked = trinity(*SOLVE)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert locked.returncode == 0 and locked.stdout == "def add(a, b):\n    return a + b\n"
    warnings = [line for line in locked.stderr.splitlines() if line.startswith("warning:")]
    assert (
        len(warnings) == 1
        and "database is locked" in warnings[0]
        and "Traceback" not in locked.stderr
    )
    assert len(runs_in_log()) == 1  # the log is intact, without the run it could not write


def test_moving_the_log_aside_is_advised_only_for_a_damaged_log():
    from trinity_cli.cli.log_access import why_unreadable

    assert why_unreadable(sqlite3.DatabaseError("file is not a database")) == (
        "file is not a database (move it aside to start a new log)"
    )
    assert why_unreadable(sqlite3.OperationalError("database is locked")) == "database is locked"
    denied = PermissionError(13, "Permission denied", "/home/x/.local")
    assert why_unreadable(denied) == "Permission denied (/home/x/.local)"


def test_a_corrupt_log_costs_one_warning_not_the_run(server):
    default_path().parent.mkdir(parents=True)
    default_path().write_bytes(b"this is not a database" * 200)
    server.responses += [openai_stream(text) for text in (PLAN, ANSWER)]
    result = trinity(*SOLVE, "--max-turns", "2")
    assert result.returncode == 6 and "verdict turn_limit" in result.stderr  # its own exit code
    assert result.stdout == "def add(a, b):\n    return a + b\n"
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert (
        len(warnings) == 1 and "not a database" in warnings[0] and "Traceback" not in result.stderr
    )
    listed = trinity("logs")
    assert listed.returncode == 3 and one_line(listed.stderr).startswith(
        "error: cannot read the run log"
    )


@pytest.mark.parametrize("how", ["flag", "env"])
def test_no_log_writes_nothing(server, monkeypatch, how):
    server.responses += [openai_stream(ANY_ROLE) for _ in range(6)]
    if how == "env":
        monkeypatch.setenv("TRINITY_NO_LOG", "1")
    result = trinity(*SOLVE, *(["--no-log"] if how == "flag" else []))
    assert result.returncode == 0, result.stderr
    assert not default_path().exists()
    monkeypatch.delenv("TRINITY_NO_LOG", raising=False)
    assert trinity(*SOLVE).returncode == 0 and default_path().exists()  # the control: logging is on


def test_an_older_log_migrates_and_keeps_its_rows(home):
    path = default_path()
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, MIGRATIONS[:1])  # a version 1 log (no checks.source), with a run and a check
    db.execute(
        "INSERT INTO runs (time, command, problem, problem_sha256, pool, head, settings) "
        "VALUES ('2025-01-01T00:00:00+00:00', 'solve', 'p', 'x', '{}', 'h', '{}')"
    )
    db.execute("INSERT INTO checks VALUES (1, 2, 0, 'add(2, 3) failed')")
    db.execute(
        "INSERT INTO turns VALUES "
        "(1, 1, '2025-01-01T00:00:01+00:00', 0, 'a', 'worker', 'head', '[1.0]', "
        "'[0, 1, 0]', 0.1, 9, 'text', 'code', NULL, 10, 5, 0.0, 0, 0.2)"
    )
    db.close()
    log = RunLog.open(path)
    assert (
        log.db.execute("PRAGMA user_version").fetchone()[0]
        == SCHEMA_VERSION
        == len(MIGRATIONS)
        == 3
    )
    assert log.get_run(1).checks == [
        {"run_id": 1, "turn": 2, "passed": 0, "summary": "add(2, 3) failed", "source": "tests"}
    ]
    [turn] = log.get_run(1).turns  # version 3: nothing was known to be cut
    assert (turn["truncated"], turn["input_truncated"], turn["answer"]) == (0, None, "code")
    run_id = log.start_run("solve", "p", pool(), "head")
    log.close()
    # the mechanism: a next version that adds a column finds this log and moves it forward
    db = sqlite3.connect(path, isolation_level=None)
    migrate(
        db,
        [*MIGRATIONS, ("ALTER TABLE runs ADD COLUMN note TEXT", "UPDATE runs SET note = 'kept'")],
    )
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
    assert db.execute("SELECT id, note FROM runs").fetchall() == [(1, "kept"), (run_id, "kept")]
    # done already: not again
    migrate(
        db, [*MIGRATIONS, ("ALTER TABLE runs ADD COLUMN note TEXT",)]
    )
    db.close()


def test_a_log_from_a_newer_trinity_is_left_alone(server):
    server.responses += [openai_stream(ANY_ROLE) for _ in range(6)]
    assert trinity(*SOLVE).returncode == 0
    db = sqlite3.connect(default_path())
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    result = trinity(*SOLVE)
    assert result.returncode == 0 and "return a + b" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "newer trinity" in warnings[0]
    listed = trinity("logs")
    assert listed.returncode == 3 and "newer trinity" in one_line(listed.stderr)
    db = sqlite3.connect(default_path())
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1  # nothing written
    db.close()


def pool():
    return parse_pool(
        '[[agents]]\nname="alpha"\nprovider="openai"\nmodel="a"\napi_key_env="ALPHA_KEY"\n'
        '[[agents]]\nname="beta"\nprovider="openai"\nmodel="b"\n', "test.toml",
    )


def logged_episode(plan: list[tuple[int, Role]], replies: list[str]) -> RunLogSink:
    """A real episode of the loop (scripted agents) through the same sink `solve` uses."""
    warnings: list[str] = []
    # the stored result is what `solve --json` prints
    sink = RunLogSink.start(
        PROBLEM_MD, pool(), "scripted head", final=lambda r: episode_json(r, ["alpha", "beta"]),
        warn=warnings.append,
    )
    # both agents answer from one script
    provider = ScriptedProvider(
        list(replies), price_per_call=0.01
    )
    agents = [Agent(name, provider, 100) for name in ("alpha", "beta")]
    run_episode(
        Problem.from_markdown(PROBLEM_MD), agents, CountingCoordinator(),
        ScriptedPolicy(tuple(plan)), max_turns=len(plan), on_event=sink,
    )
    assert warnings == []
    return sink


W, V, T = Role.WORKER, Role.VERIFIER, Role.THINKER


@pytest.fixture(params=["UTC", "America/Los_Angeles", "Asia/Kolkata"])
def zone(request, home):
    """The local time zone, here and in the subprocesses: `--since` and the listing are local
    time."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = request.param
    time.tzset()
    yield request.param
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_list_filters_by_verdict_agent_since_and_count(zone):
    # alpha writes, beta accepts
    accepted = logged_episode(
        [(0, W), (1, V)], [ANSWER, ACCEPT]
    ).run_id
    turn_limit = logged_episode([(1, T), (1, W)], [PLAN, ANSWER]).run_id  # beta only
    new_year = datetime(2020, 1, 1).astimezone()  # local midnight, stored in UTC as a run's time is
    with RunLog.open() as log:
        log.db.execute(
            "UPDATE runs SET time = ? WHERE id = ?",
            (new_year.astimezone(timezone.utc).isoformat(timespec="seconds"), accepted),
        )
    assert [r["id"] for r in runs_in_log()] == [turn_limit, accepted]

    def ids(*args: str) -> list[int]:
        return [r["id"] for r in json.loads(trinity("logs", "--json", *args).stdout)]

    assert ids("--verdict", "accepted") == [accepted] and ids("--verdict", "turn_limit") == [
        turn_limit
    ]
    assert ids("--agent", "alpha") == [accepted] and ids("--agent", "beta") == [
        turn_limit, accepted,
    ]
    assert ids("--since", "2021-06-01") == [turn_limit] and ids("--since", "2019-12-31T23:00") == [
        turn_limit, accepted,
    ]
    # local time: half an hour after the run
    assert ids("--since", "2020-01-01T00:30") == [
        turn_limit
    ]
    assert ids("-n", "1") == [turn_limit]
    listed = trinity("logs")
    assert listed.returncode == 0 and "turn_limit" in listed.stderr and "accepted" in listed.stderr
    assert "2020-01-01 00:00" in listed.stderr  # shown in local time
    bogus = trinity("logs", "--verdict", "acepted")  # a typo is an error, not an empty list
    assert bogus.returncode == 2 and bogus.stdout == "", bogus.stderr
    assert bogus.stderr.count("\n") == 1 and "'acepted': not a verdict" in bogus.stderr
    assert "accepted, tests_failed" in bogus.stderr


def test_every_verdict_solve_can_end_with_is_one_logs_accepts():
    """(eval's and train's: in their summary-row tests, listed by `logs --verdict`.)"""
    from trinity_cli.cli.solve import EXIT_CODES
    from trinity_cli.core.verdicts import RUN_VERDICTS

    assert set(EXIT_CODES) <= set(RUN_VERDICTS)


def test_stats_sum_calls_tokens_usd_and_accept_rate_per_agent_and_day(home):
    logged_episode([(0, W), (1, V)], [ANSWER, ACCEPT])  # alpha's answer accepted
    logged_episode([(0, W), (1, W)], [ANSWER, ANSWER])  # two answers, neither accepted
    result = trinity("logs", "stats", "--json")
    assert result.returncode == 0, result.stderr
    today = datetime.now().date().isoformat()
    rows = {r["agent"]: r for r in json.loads(result.stdout)}
    assert rows["alpha"] == {
        "day": today, "agent": "alpha", "calls": 2, "tokens_in": 20, "tokens_out": 10,
        "usd": pytest.approx(0.02), "answers": 2, "accepted": 1, "accept_rate": 0.5,
    }
    assert (
        rows["beta"]["calls"] == 2
        and rows["beta"]["answers"] == 1
        and rows["beta"]["accepted"] == 0
    )
    table = trinity("logs", "stats")
    assert table.returncode == 0 and "alpha" in table.stderr and "50%" in table.stderr


def test_prune_deletes_old_runs_with_their_turns(home):
    old = logged_episode([(0, W), (1, V)], [ANSWER, ACCEPT]).run_id
    new = logged_episode([(0, W), (1, V)], [ANSWER, ACCEPT]).run_id
    long_ago = (datetime.now(timezone.utc) - timedelta(days=31)).isoformat(timespec="seconds")
    with RunLog.open() as log:
        log.db.execute("UPDATE runs SET time = ? WHERE id = ?", (long_ago, old))
    assert trinity("logs", "prune", "--older-than", "32d").returncode == 0
    assert len(runs_in_log()) == 2
    pruned = trinity("logs", "prune", "--older-than", "30d")
    assert pruned.returncode == 0 and "pruned 1 run " in pruned.stderr
    assert [r["id"] for r in runs_in_log()] == [new]
    with RunLog.open() as log:
        assert [tuple(r) for r in log.db.execute("SELECT DISTINCT run_id FROM turns")] == [(new,)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "999"], "no run 999 in the run log"),
        (["show", "abc"], "run 'abc' is not a run id"), (["show", "last"], "the run log is empty"),
        (["--since", "last tuesday"], "--since 'last tuesday' is not an ISO date"),
        (["stats", "--since", "2025-13-01"], "is not an ISO date"),
        (["prune", "--older-than", "30x"], "--older-than '30x' is not an age"),
        (["prune", "--older-than", "30"], "is not an age"),
        (["prune"], "Missing option '--older-than'"), (["show"], "Missing argument"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(home, args, message):
    result = trinity("logs", *args)
    assert result.returncode == 2 and result.stdout == ""
    line = one_line(result.stderr)
    assert line.startswith("error: ") and message in line and "Traceback" not in result.stderr


def test_bare_logs_lists_and_help_documents_exit_codes(home):
    empty = trinity("logs")
    assert empty.returncode == 0 and "no runs" in empty.stderr
    assert trinity("logs", "--json").stdout.strip() == "[]"
    for args in (
        ["logs", "--help"], ["logs", "show", "--help"], ["logs", "stats", "--help"],
        ["logs", "prune", "--help"],
    ):
        shown = trinity(*args)
        assert shown.returncode == 0 and "Usage" in shown.stdout and "2 usage" in shown.stdout


def test_eval_is_one_summary_row(workdir, home):
    from support.cli import SIM_POOL

    from trinity_cli.tasks.taskset import load_humaneval

    write_tasks(workdir / "tasks.jsonl", load_humaneval()[:2], "tags")
    flags = [
        "--tasks", "tasks.jsonl", "--pool", str(SIM_POOL), "--weights", "none", "--split", "all",
        "--max-turns", "1", "--no-cache", "--json",
    ]
    evaluated = trinity("eval", *flags)
    assert evaluated.returncode == 0, evaluated.stderr
    [run] = runs_in_log()
    assert run["command"] == "eval" and run["verdict"] == "completed" and run["turns"] == 0
    listed = json.loads(trinity("logs", "--verdict", "completed", "--json").stdout)
    assert [r["id"] for r in listed] == [run["id"]]
    report = json.loads(evaluated.stdout)
    assert run["usd"] == pytest.approx(report["budget"]["spent_usd"]) and run["usd"] > 0
    shown = json.loads(trinity("logs", "show", "last", "--json").stdout)
    assert shown["result"] == report and shown["problem"] == "tasks.jsonl:all"
    assert trinity("eval", *flags, "--no-log").returncode == 0 and len(runs_in_log()) == 1


def test_train_is_one_summary_row_and_no_log_writes_none(workdir, home):
    """A real tiny train (a dry run would log nothing anyway): --no-log first, then the control."""
    from support.cli import SIM_POOL

    from trinity_cli.tasks.taskset import load_humaneval, select_split

    # the fewest a train takes: seconds, not a minute
    tasks = select_split(load_humaneval(), "train")[
        :2
    ]
    write_tasks(workdir / "tasks.jsonl", tasks)
    flags = [
        "--tasks", "tasks.jsonl", "--pool", str(SIM_POOL), "--generations", "1", "--popsize", "2",
        "--batch-size", "2", "--max-turns", "1", "--project", "2", "--folds", "0", "-q",
    ]
    unlogged = trinity("train", *flags, "--out", "quiet.npz", "--no-log")
    assert unlogged.returncode == 0, unlogged.stderr
    assert (workdir / "quiet.npz").is_file() and not default_path().exists()

    logged = trinity("train", *flags, "--out", "h.npz")
    assert logged.returncode == 0, logged.stderr
    [run] = runs_in_log()
    assert (run["command"], run["verdict"], run["turns"]) == ("train", "completed", 0)
    listed = json.loads(trinity("logs", "--verdict", "completed", "--json").stdout)
    assert [r["id"] for r in listed] == [run["id"]]
    assert run["agents"] == ["sim-strings", "sim-lists", "sim-math"] and run["usd"] > 0
    shown = json.loads(trinity("logs", "show", "last", "--json").stdout)
    assert shown["problem"] == "tasks.jsonl:train" and shown["head"] == "h.npz"
    assert shown["result"]["out"] == "h.npz" and shown["result"]["generations"] == 1
    assert shown["result"]["spent_usd"] == pytest.approx(run["usd"])
    assert shown["settings"]["popsize"] == 2 and "api_key_env" not in json.dumps(shown["pool"])


def test_a_summary_row_is_written_when_the_run_is_interrupted(home):
    with (
        pytest.raises(KeyboardInterrupt),
        summary_row(
            "train", "t.jsonl:train", pool(), "h.npz", {"seed": 0}, enabled=True, warn=print,
            spent=lambda: 0.25,
        ),
    ):
        raise KeyboardInterrupt
    with (
        pytest.raises(ValueError),
        summary_row("eval", "t.jsonl:test", pool(), "h.npz", {}, enabled=True, warn=print),
    ):
        raise ValueError("boom")
    # what the interrupted run had spent is logged; a run that says nothing spent nothing
    assert [(r["command"], r["verdict"], r["usd"]) for r in runs_in_log()] == [
        ("eval", "error", 0.0), ("train", "interrupted", 0.25),
    ]
    for verdict, command in (("error", "eval"), ("interrupted", "train")):
        listed = json.loads(trinity("logs", "--verdict", verdict, "--json").stdout)
        assert [r["command"] for r in listed] == [command]
    shown = trinity("logs", "show", "last")  # the eval that failed, and why
    assert "verdict error · $0.0000 · ValueError" in shown.stderr, shown.stderr


def test_no_key_and_no_key_variable_reach_the_log(home, monkeypatch):
    key = "sk-live-0123456789abcdef"
    monkeypatch.setenv("ALPHA_KEY", key)
    # in the answer and beyond
    echoed = f"```python\ndef add(a, b):\n    return a + b  # {key}\n```\nmy key is {key}"
    run_id = logged_episode([(0, W), (1, V)], [echoed, ACCEPT]).run_id
    data = default_path().read_bytes() + b"".join(
        p.read_bytes() for p in default_path().parent.glob("*-wal")
    )
    assert key.encode() not in data and b"ALPHA_KEY" not in data
    assert b"***" in data and b"alpha" in data
    with RunLog.open() as log:  # every place the echo is stored, the key redacted in each
        stored = log.get_run(run_id)
    hidden = echoed.replace(key, "***")
    assert stored.turns[0]["text"] == hidden and stored.turns[0]["answer"].endswith("# ***\n")
    assert stored.row["answer"] == stored.turns[0]["answer"] == stored.row["result"]["answer"]
    assert (
        stored.row["result"]["turns"][0]["text"] == hidden
        and stored.row["result"]["verdict"] == "accepted"
    )

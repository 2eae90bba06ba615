"""Nothing cut silently: an input cut to fit a context warns once per reader and is reported as
`input_truncated` (per turn, in the final object, in the run log); a reply cut at max_tokens is
`truncated` and marked on its turn's line."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from support.cli import FAST_POOL, trinity
from support.scripted import CountingCoordinator, ScriptedPolicy, ScriptedProvider
from support.wire.server import WireServer, openai_stream

from trinity_cli.cli.sinks import CutWarnings, JsonlWriter, fan_out
from trinity_cli.core.episode import Agent, run_episode
from trinity_cli.core.episode_json import episode_json
from trinity_cli.core.provider import Reply, Request
from trinity_cli.core.records import Truncation
from trinity_cli.core.roles import Role
from trinity_cli.core.transcript import Problem
from trinity_cli.errors import UsageError
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.cache import ResponseStore
from trinity_cli.providers.context import fit
from trinity_cli.store.runlog import default_path

PLAN, ANSWER, ACCEPT = (
    "First add", "```python\ndef add(a, b):\n    return a + b\n```", "<verdict>ACCEPT</verdict>",
)
SIGNATURE = '```python\ndef total(xs: list[int]) -> int:\n    """Return the sum of xs."""\n```\n'


@pytest.fixture()
def server(home: Path):
    wire = WireServer()
    yield wire
    wire.close()


def remote_pool(workdir: Path, server: WireServer, extra: str = "") -> None:
    (workdir / "pool.toml").write_text(
        f'[[agents]]\nname = "srv"\nprovider = "openai"\nmodel = "m"\n'
        f'base_url = "{server.url}/v1"\nmax_tokens = 64\ntimeout_s = 60\n{extra}'
    )


def turn_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("turn ")]


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


# -- the loop carries what each reader reports -------------------------------------------------


def test_the_loop_reports_each_readers_cut_and_warns_once_per_reader():
    coordinator_cut = Truncation(100, 900, "coordinator", "the problem is 1,000 tokens; ...")
    agent_cut = Truncation(400, 2000, "a", "agent 'a' (worker): the prompt is 2,400 tokens; ...")
    replies = [
        Reply("a plan", 400, 64, 0.0, 0.1, truncated=True, input_truncated=agent_cut),
        Reply(ANSWER, 50, 20, 0.0, 0.1),
    ]
    agents = [Agent("a", ScriptedProvider(replies), max_tokens=64)]
    warnings: list[str] = []
    jsonl = io.StringIO()
    result = run_episode(
        Problem("p"), agents, CountingCoordinator(cut=coordinator_cut),
        ScriptedPolicy(((0, Role.THINKER), (0, Role.WORKER)), n_agents=1), max_turns=2,
        on_event=fan_out([CutWarnings(warnings.append), JsonlWriter(jsonl.write, ["a"])]),
    )
    first, second = result.turns
    assert first.truncated and not second.truncated
    assert first.input_truncated == agent_cut  # the larger of the turn's two cuts
    assert second.input_truncated == coordinator_cut  # the agent read all of its prompt
    assert result.input_truncated == agent_cut
    # once each, though the coordinator cut twice
    assert warnings == [
        coordinator_cut.note, agent_cut.note,
    ]
    report = episode_json(result, ["a"])
    assert report["input_truncated"] == {"kept_tokens": 400, "dropped_tokens": 2000}
    assert [(t["truncated"], t["input_truncated"]) for t in report["turns"]] == [
        (True, {"kept_tokens": 400, "dropped_tokens": 2000}),
        (False, {"kept_tokens": 100, "dropped_tokens": 900}),
    ]
    written = events(jsonl.getvalue())
    assert [e["truncated"] for e in written if e["event"] == "turn_end"] == [True, False]
    assert (
        written[-1]["event"] == "final"
        and written[-1]["input_truncated"] == report["input_truncated"]
    )
    whole = run_episode(
        Problem("p"), [Agent("a", ScriptedProvider([PLAN]), 64)], CountingCoordinator(),
        ScriptedPolicy(((0, Role.THINKER),), n_agents=1), max_turns=1,
    )
    assert whole.input_truncated is None and episode_json(whole, ["a"])["input_truncated"] is None


def test_a_remote_prompt_is_fitted_to_a_declared_context_by_its_estimate():
    spec = AgentSpec(name="srv", provider="openai", model="m", max_tokens=64, n_ctx=700)
    request = Request(Role.WORKER, "Write code.", "## Task\n\n" + "word " * 2000 + "\ndef f():")
    fitted, cut = fit(request, spec, 700)
    assert (
        cut is not None and fitted.user.startswith("[...]\n") and fitted.user.endswith("\ndef f():")
    )
    # 4 bytes a token: 11 bytes of system prompt, 10,018 of user message, 64 for a chat template
    assert cut.kept_tokens <= 700 - 64 and cut.kept_tokens + cut.dropped_tokens == 2 + 2504 + 64
    short = Request(Role.WORKER, "Write code.", "short")
    assert fit(short, spec, 700) == (short, None)
    with pytest.raises(UsageError, match="agent 'srv' cannot read this problem"):
        fit(request, spec, 100)


# -- end to end ---------------------------------------------------------------------------------


def test_a_reply_cut_at_max_tokens_is_marked_in_json_display_and_log(workdir, server):
    remote_pool(workdir, server)
    (workdir / "p.md").write_text("# Add\n\nWrite `add(a, b)`.\n")
    server.responses += [
        openai_stream(PLAN, finish="length"), openai_stream(ANSWER), openai_stream(ACCEPT),
    ]
    solved = trinity("solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--json", "-v")
    assert solved.returncode == 0, solved.stderr
    report = json.loads(solved.stdout)
    assert [t["truncated"] for t in report["turns"]] == [True, False, False]
    assert report["input_truncated"] is None and all(
        t["input_truncated"] is None for t in report["turns"]
    )
    assert ["cut at max_tokens" in line for line in turn_lines(solved.stderr)] == [
        True, False, False,
    ]
    assert "warning" not in solved.stderr
    shown = trinity("logs", "show", "last")
    # the marker is in the log
    assert shown.returncode == 0 and turn_lines(shown.stderr) == turn_lines(
        solved.stderr
    )
    assert json.loads(trinity("logs", "show", "last", "--json").stdout) == report


def test_a_remote_agents_declared_context_cuts_its_prompt_with_a_warning(workdir, server, home):
    remote_pool(workdir, server, "n_ctx = 700\n")
    (workdir / "p.md").write_text(
        "# Add\n\n" + "Some background on addition. " * 400 + "\nWrite `add(a, b)`.\n"
    )
    server.responses += [openai_stream(PLAN), openai_stream(ANSWER), openai_stream(ACCEPT)]
    solved = trinity("solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--jsonl")
    assert solved.returncode == 0, solved.stderr
    warnings = [line for line in solved.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and warnings[0].startswith(
        "warning: agent 'srv' (thinker): the prompt is about "
    )
    assert (
        "n_ctx 700 less 64 for the reply holds about" in warnings[0] and "dropped)" in warnings[0]
    )
    sent = [r["json"]["messages"][1]["content"] for r in server.requests]
    assert all(s.startswith("[...]\n") and len(s.encode()) < 700 * 4 for s in sent)
    assert all(s.endswith("Write `add(a, b)`.") for s in sent[:1])  # the end is kept
    ends = [e for e in events(solved.stdout) if e["event"] == "turn_end"]
    cuts = [e["input_truncated"] for e in ends]
    assert len(cuts) == 3 and all(
        c["kept_tokens"] <= 700 - 64 and c["dropped_tokens"] > 2000 for c in cuts
    )
    final = events(solved.stdout)[-1]
    assert final["event"] == "final" and final["input_truncated"] == max(
        cuts, key=lambda c: c["dropped_tokens"]
    )
    db = sqlite3.connect(default_path())  # as if killed: the final object is rebuilt from the turns
    db.execute("UPDATE runs SET result = NULL, finished = NULL")
    db.commit()
    db.close()
    rebuilt = json.loads(trinity("logs", "show", "last", "--json").stdout)
    assert rebuilt["input_truncated"] == final["input_truncated"]
    assert [t["input_truncated"] for t in rebuilt["turns"]] == cuts


def test_a_context_that_leaves_no_room_is_exit_2_before_any_call(workdir, server):
    remote_pool(workdir, server, "n_ctx = 100\n")
    (workdir / "p.md").write_text("# Add\n\nWrite `add(a, b)`.\n")
    result = trinity("solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--quiet")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith(
        "error: agent 'srv' cannot read this problem: its thinker prompt is about"
    )
    assert len(result.stderr.strip().splitlines()) == 1 and server.requests == []


def test_a_200kb_problem_on_the_embedded_pool_warns_and_reports_the_cut(workdir):
    """Agents with a 1k context and a 2-token reply, the coordinator with a 1k context (it reads
    half): both cut the problem, each says so once, and the 2-token reply is cut too."""
    pool = FAST_POOL.replace("max_tokens = 12", "max_tokens = 2").replace(
        "n_ctx = 2048", "n_ctx = 1024"
    )
    (workdir / "pool.toml").write_text(pool + "\n[coordinator]\nn_ctx = 1024\n")
    background = "".join(
        f"Item {i} of the ledger records a sale of {i % 97} units. " for i in range(4000)
    )
    (workdir / "big.md").write_text(f"# Total\n\n{background}\n\n{SIGNATURE}")
    assert len((workdir / "big.md").read_bytes()) > 200_000
    solved = trinity("solve", "big.md", "--pool", "pool.toml", "--max-turns", "1", "--json")
    assert solved.returncode == 6, solved.stderr
    report = json.loads(solved.stdout)
    warnings = [line for line in solved.stderr.splitlines() if line.startswith("warning:")]
    coordinator, agent = warnings  # one each: the coordinator's, then the agent's
    assert (
        coordinator.startswith("warning: the problem is ")
        and "the coordinator reads its first 512 (" in coordinator
    )
    assert agent.startswith("warning: agent 'gemma-")
    assert "n_ctx 1024 less 2 for the reply holds its first token and last 1,021 (" in agent
    problem_tokens = int(
        coordinator.split("the problem is ")[1].split(" tokens")[0].replace(",", "")
    )
    assert problem_tokens > 40_000
    [turn] = report["turns"]
    assert (
        report["input_truncated"]
        == turn["input_truncated"]
        == {"kept_tokens": 512, "dropped_tokens": problem_tokens - 512}
    )
    [line] = turn_lines(solved.stderr)
    assert turn["tokens_in"] == 1022 and "1022→2 tok" in line
    assert turn["truncated"] is True and "cut at max_tokens" in line


def test_the_response_cache_keeps_what_was_cut_and_reads_replies_stored_before(tmp_path):
    store = ResponseStore(tmp_path / "responses.sqlite")
    cut = Reply(
        "x", 400, 64, 0.0, 0.1, truncated=True,
        input_truncated=Truncation(400, 9, "a", "agent 'a' ..."),
    )
    store.put("k", cut)
    assert store.get("k") == cut
    # as stored before these fields existed
    store._table.put(
        "old",
        json.dumps(
            {
                "text": "y", "tokens_in": 1, "tokens_out": 2, "usd": 0.0, "seconds": 0.1,
                "usd_estimated": False,
            }
        ),
    )
    assert store.get("old") == Reply("y", 1, 2, 0.0, 0.1)

"""What a user watches: the reply streaming under its turn on a terminal, `-v` text on a pipe,
keys redacted in both. The terminal is a real pseudo-terminal; the agents are the embedded
GGUF and a loopback OpenAI-compatible server that streams slowly."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from support.cli import FAST_POOL, PROBLEM, TRINITY, trinity
from support.tasks import write_tasks
from support.wire.server import WireServer, openai_stream

KEY = "sk-planted-0123456789abcdef"
REPLY = (
    "First I read the problem closely.\nThe key I was given is " + KEY + " and I keep it.\n"
    "```python\ndef add(a: int, b: int) -> int:\n    return a + b\n```\nThat is all.\n"
)
PIECES, GAP_S = 8, 0.4  # the reply takes about 3 s to stream
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def on_a_terminal(
    args: list[str], cwd: Path, env: dict[str, str]
) -> tuple[list[tuple[float, bytes]], str, int]:
    """Run trinity with stderr on a pseudo-terminal and stdout on a pipe: the terminal's bytes
    with the time each arrived, stdout, exit code."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [TRINITY, *args], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, cwd=cwd,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "120", **env},
    )
    os.close(slave)
    chunks: list[tuple[float, bytes]] = []
    reader = threading.Thread(target=drain, args=(master, chunks, True))
    reader.start()
    stdout, _ = proc.communicate(timeout=300)
    reader.join(timeout=10)
    os.close(master)
    return chunks, stdout.decode(), proc.returncode


def drain(master: int, chunks: list, timed: bool = False) -> None:
    """Read a terminal until the child closes it, each chunk (with its arrival time if `timed`)."""
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            return
        if not data:
            return
        chunks.append((time.monotonic(), data) if timed else data)


def first_seen(chunks: list[tuple[float, bytes]], needle: bytes) -> float | None:
    seen = b""
    for at, data in chunks:
        seen += ANSI.sub(b"", data)
        if needle in seen:
            return at
    return None


@pytest.fixture()
def streaming_server(workdir: Path):
    server = WireServer()
    server.responses.append(openai_stream(REPLY, pieces=PIECES, gap_s=GAP_S))
    (workdir / "pool.toml").write_text(
        f'[[agents]]\nname = "remote"\nprovider = "openai"\nmodel = "m"\n'
        f'base_url = "{server.url}/v1"\nroles = ["worker"]\n'
    )
    (workdir / "p.md").write_text(PROBLEM.read_text())
    yield server
    server.close()


def test_a_remote_reply_streams_on_the_terminal_while_its_turn_is_in_flight(
    workdir, streaming_server
):
    chunks, stdout, code = on_a_terminal(
        [
            "solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--max-turns", "1",
            "--no-log",
        ],
        workdir, {"OPENAI_API_KEY": KEY},
    )
    terminal = b"".join(data for _, data in chunks)
    # one Worker turn: the turn limit, an answer
    assert code == 6, terminal.decode(
        errors="replace"
    )
    assert stdout == "def add(a: int, b: int) -> int:\n    return a + b\n"  # the answer alone
    early, late = (
        first_seen(chunks, b"read the problem closely"), first_seen(chunks, b"That is all."),
    )
    finished = first_seen(chunks, b"tok ")  # the turn's permanent line: "12→34 tok"
    assert early is not None and late is not None and finished is not None, terminal.decode(
        errors="replace"
    )
    # the first words were on the terminal long before the last came
    assert (
        late - early > GAP_S * 2
    )
    assert early < finished - GAP_S * 2
    assert KEY.encode() not in terminal and b"***" in terminal


def test_ctrl_c_mid_stream_keeps_the_finished_turns_exits_130_and_gives_the_cursor_back(
    workdir, streaming_server
):
    plan = openai_stream("First a plan.", pieces=1)
    # ~10 s: Ctrl-C lands mid-stream on a busy machine too
    slow = openai_stream(
        REPLY, pieces=3 * PIECES, gap_s=GAP_S
    )
    streaming_server.responses[:] = [plan, slow]
    (workdir / "pool.toml").write_text(
        (workdir / "pool.toml").read_text().replace('roles = ["worker"]\n', "")
    )
    master, slave = os.openpty()
    # a child of a suite run in the background would inherit SIGINT ignored (test_bad_inputs'
    # Ctrl-C test says why); a handled one resets to default
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [
                TRINITY, "solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--max-turns",
                "3", "--json",
            ],
            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, cwd=workdir,
            env={**os.environ, "TERM": "xterm", "COLUMNS": "120", "OPENAI_API_KEY": KEY},
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    os.close(slave)
    chunks: list[bytes] = []
    # a terminal nobody reads would block the display
    reader = threading.Thread(
        target=drain, args=(master, chunks)
    )
    reader.start()
    deadline = time.monotonic() + 120
    while (
        b"read the problem closely" not in ANSI.sub(b"", b"".join(chunks))
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    # the second turn is streaming
    assert b"read the problem closely" in ANSI.sub(
        b"", b"".join(chunks)
    )
    proc.send_signal(signal.SIGINT)  # as Ctrl-C sends
    stdout, _ = proc.communicate(timeout=60)
    reader.join(timeout=10)
    os.close(master)
    seen = b"".join(chunks)
    assert proc.returncode == 130, (stdout[-1500:], ANSI.sub(b"", seen)[-1500:])
    report = json.loads(stdout)
    assert report["verdict"] == "interrupted" and [t["text"] for t in report["turns"]] == [
        "First a plan."
    ]
    # the live display showed the cursor again
    assert seen.rfind(b"\x1b[?25h") > seen.rfind(
        b"\x1b[?25l"
    )


def test_verbose_prints_each_turns_text_on_a_pipe_and_redacts_keys(workdir, streaming_server):
    result = subprocess.run(
        [
            TRINITY, "solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--max-turns",
            "1", "--no-log", "-v", "--json",
        ],
        check=False, capture_output=True, text=True, cwd=workdir, timeout=300,
        env={**os.environ, "OPENAI_API_KEY": KEY},
    )
    assert result.returncode == 6, result.stderr
    assert "I read the problem closely" in result.stderr and "That is all." in result.stderr
    assert KEY not in result.stderr and "The key I was given is *** and I keep it." in result.stderr
    assert json.loads(result.stdout)["turns"][0]["role"] == "worker"  # stdout: the JSON alone
    quiet = trinity("solve", "p.md", "--pool", "pool.toml", "-q", "-v", cwd=workdir)
    assert quiet.returncode == 2 and "--quiet and --verbose are exclusive" in quiet.stderr


def test_a_local_gguf_reply_streams_on_the_terminal(workdir):
    (workdir / "fast.toml").write_text(FAST_POOL.replace("max_tokens = 12", "max_tokens = 96"))
    chunks, stdout, code = on_a_terminal(
        ["solve", str(PROBLEM), "--pool", "fast.toml", "--max-turns", "1", "--no-log", "--json"],
        workdir, {},
    )
    turn = json.loads(stdout)["turns"][0]
    first = next(line.strip() for line in turn["text"].splitlines() if len(line.strip()) >= 12)[:12]
    # a reply long enough to stream for a while
    assert code in (0, 6) and turn["tokens_out"] > 48, (
        turn
    )
    seen, finished = first_seen(chunks, first.encode()), first_seen(chunks, b"tok ")
    assert seen is not None and finished is not None, b"".join(d for _, d in chunks).decode(
        errors="replace"
    )
    assert seen < finished - 0.1  # its first line was drawn while the rest was still coming


def test_eval_shows_which_row_it_is_on_while_it_runs(workdir):
    from support.cli import SIM_POOL

    from trinity_cli.tasks.taskset import load_humaneval

    write_tasks(workdir / "tasks.jsonl", load_humaneval()[:3], "tags")
    args = [
        "eval", "--tasks", "tasks.jsonl", "--pool", str(SIM_POOL), "--weights", "none", "--split",
        "all", "--max-turns", "1", "--baselines", "single", "--no-log", "--json",
    ]
    chunks, stdout, code = on_a_terminal(args, workdir, {})
    assert code == 0 and json.loads(stdout)["tasks"] == 3
    # the status line names the rows as they finish
    assert (
        first_seen(chunks, b"eval: single:sim-") is not None
    )
    piped = trinity(*args, cwd=workdir)
    assert piped.returncode == 0 and "eval: " not in piped.stderr  # a pipe gets no status line


def test_a_closed_stderr_silences_the_display_and_a_closed_stdout_exits_141(
    workdir, streaming_server
):
    streaming_server.responses.append(openai_stream(REPLY))
    args = [
        TRINITY, "solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--max-turns", "1",
        "--no-log",
    ]
    reader = subprocess.Popen(
        [*args, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workdir
    )
    # the pool's one agent may only work, so the run's first line says no answer can be accepted
    assert reader.stderr is not None and reader.stderr.readline().startswith(
        b"warning: no agent may play verifier"
    )
    reader.stderr.close()  # whoever watched stderr stopped (`2>&1 | head -1`): the run goes on
    stdout, _ = reader.communicate(timeout=120)
    assert reader.returncode == 6 and json.loads(stdout)["turns"][0]["text"] == REPLY
    gone = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workdir)
    assert gone.stdout is not None
    gone.stdout.close()  # `| head -c0`: nobody reads the answer
    _, err = gone.communicate(timeout=120)
    assert gone.returncode == 141 and b"Traceback" not in err and b"error" not in err

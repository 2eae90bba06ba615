"""Each containment of the candidate sandbox, proven with a hostile program.

Every program below is reported as a failed candidate, leaves nothing behind on the host, and
the test process (standing in for the CLI) goes on. A containment that the mode in use here
does not provide is skipped with the reason.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.sandbox import REPORT_BYTES, Limits, isolation, run_python
from trinity_cli.tasks.taskset import Task

SECRET = "sk-trinity-sandbox-secret-" + uuid.uuid4().hex
MODE = isolation().mode


def needs(mode: str, what: str):
    return pytest.mark.skipif(MODE != mode, reason=f"{what} needs the {mode!r} sandbox mode; here: {MODE!r} "
                              f"({isolation().unavailable.get(mode, 'not tried')})")


def candidate_processes() -> list[int]:
    """Processes on the host still running a sandboxed candidate."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"candidate.py" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_a_plain_program_runs_and_its_output_comes_back():
    result = run_python("print(sum(range(10)))")
    assert result.passed and result.stdout == "45\n"
    assert not run_python("raise SystemExit(3)").passed


def test_an_infinite_loop_is_killed_at_the_wall_clock_limit():
    result = run_python("while True:\n    pass\n", Limits(wall_s=1.5))
    assert result.timed_out and not result.passed
    assert candidate_processes() == []


def test_a_sleeping_group_is_killed_with_its_children():
    program = "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(60)\ntime.sleep(60)\n"
    assert run_python(program, Limits(wall_s=1.5)).timed_out
    if MODE == "namespaces":  # setsid escapes a process group, never the PID namespace
        assert candidate_processes() == []


@pytest.mark.skipif(os.geteuid() != 0 and MODE == "namespaces", reason="the process-count limit applies only as uid 65534")
def test_a_fork_bomb_hits_the_process_limit():
    program = ("import os, time\nn = 0\nfor _ in range(10_000):\n    try:\n        os.fork() or time.sleep(30)\n"
               "    except OSError:\n        break\n    n += 1\nprint(n)\nraise SystemExit(1 if n < 10_000 else 0)\n")
    result = run_python(program, Limits(wall_s=10))
    assert not result.passed
    assert int(result.stdout.split()[0]) < Limits().processes
    assert candidate_processes() == [] or MODE != "namespaces"


def test_a_memory_hog_fails_with_memory_error():
    result = run_python("blob = bytearray(4 << 30)\n")
    assert not result.passed and "MemoryError" in result.stderr


def test_a_huge_print_is_capped_and_fails():
    result = run_python("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n")
    assert not result.passed and not result.timed_out
    assert len(result.stdout) <= REPORT_BYTES


@pytest.mark.parametrize("where", ["host_tmp", "var_tmp", "home", "repo"])
def test_writing_outside_the_temp_dir_leaves_the_host_untouched(tmp_path, where):
    if MODE == "rlimits":
        pytest.skip("the rlimits mode cannot stop writes as the same user")
    target = {
        "host_tmp": tmp_path / "escape.txt",
        "var_tmp": Path("/var/tmp") / f"trinity-escape-{uuid.uuid4().hex}",
        "home": Path.home() / f"trinity-escape-{uuid.uuid4().hex}",
        "repo": Path(__file__).resolve().parent / f"escape-{uuid.uuid4().hex}",
    }[where]
    result = run_python(f"open({str(target)!r}, 'w').write('escaped')\n")
    assert not target.exists()
    if where != "var_tmp":  # /var/tmp exists inside the sandbox as an empty private tmpfs
        assert not result.passed


def test_the_temp_dir_is_fresh_and_private():
    run_python("open('left-behind.txt', 'w').write('x')\n")
    result = run_python("import os\nprint(sorted(os.listdir('.')))\n")
    assert result.stdout.strip() == "['candidate.py']"


def test_an_api_key_in_the_environment_is_not_visible(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    result = run_python("import os\nprint(dict(os.environ))\nassert os.environ.get('OPENAI_API_KEY')\n")
    assert not result.passed and SECRET not in result.stdout + result.stderr


@pytest.mark.skipif(MODE == "rlimits" and os.geteuid() == 0, reason="as root without namespaces or a uid drop, "
                    "/proc/<ppid>/environ stays readable")
def test_an_api_key_cannot_be_read_from_proc_of_the_parent():
    """A parent process started with the key in its environment (as the CLI is) runs a
    candidate that searches every readable /proc/<pid>/environ for it."""
    program = (
        "import os\nfound = []\nfor pid in [os.getppid(), *os.listdir('/proc')]:\n"
        "    try:\n        found.append(open(f'/proc/{pid}/environ', 'rb').read())\n    except OSError:\n        pass\n"
        f"assert any({SECRET[::-1].encode()!r}[::-1] in blob for blob in found)\n"
    )
    parent = (
        "import os, sys\nfrom trinity_cli.tasks.sandbox import run_python\n"
        f"assert {SECRET!r}.encode() in open(f'/proc/{{os.getpid()}}/environ', 'rb').read()\n"
        f"result = run_python({program!r})\nprint(result.passed, {SECRET!r} in result.stdout + result.stderr)\n"
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": SECRET}
    done = subprocess.run([sys.executable, "-c", parent], env=env, capture_output=True, check=False, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


@needs("namespaces", "cutting the network")
def test_a_socket_to_loopback_cannot_connect():
    accepted = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(5)
        port = listener.getsockname()[1]

        def accept() -> None:
            try:
                accepted.append(listener.accept())
            except OSError:
                pass

        waiter = threading.Thread(target=accept)
        waiter.start()
        result = run_python(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=3).sendall(b'hi')\n")
        waiter.join()
    assert not result.passed and not accepted
    assert "Network is unreachable" in result.stderr or "Errno" in result.stderr


def test_hostile_answers_are_failed_candidates_and_grading_goes_on():
    task = Task("t/add", "def add(a, b):\n", "add", "def check(f):\n    assert f(2, 3) == 5\n", "    return a + b\n")
    grader = Grader()
    for hostile in ["import os\nwhile True:\n    os.fork()\n", "x = 'y' * (8 << 30)\n", "print('z' * (4 << 20))\n"]:
        assert not grader.passes(task, hostile)
    assert grader.passes(task, task.prompt + task.canonical_solution)

"""Each containment of the candidate sandbox, proven with a hostile program, in every mode that
works here.

Every program below is reported as a failed candidate, leaves nothing behind on the host, and
the test process (standing in for the CLI) goes on. A containment that a mode does not claim
(see `trinity doctor`) is skipped with the reason; a mode that does not work here is skipped
with the probe's error. tests/test_sandbox_nonroot.py attacks the jails from a root and a
non-root parent.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from trinity_cli.tasks.grading import Grader
from trinity_cli.tasks.sandbox import (
    JAILS,
    MODES,
    OWN_UIDS,
    REPORT_BYTES,
    Limits,
    counts_processes,
    isolation,
    maps_own_uids,
    own_uids,
    run_in_mode,
    run_python,
)
from trinity_cli.tasks.taskset import Task

SECRET = "sk-trinity-sandbox-secret-" + uuid.uuid4().hex


@functools.cache
def probe(mode: str) -> str:
    """'' when `mode` runs a trivial program here, else why not."""
    if mode == "uid-drop" and os.geteuid() != 0:
        return "uid-drop is a root-only mode"
    result = run_in_mode("print('ok')", mode, Limits(wall_s=20))
    return "" if result.stdout == "ok\n" else (result.stderr.strip().splitlines() or ["?"])[-1]


@pytest.fixture(params=MODES)
def mode(request) -> str:
    if why := probe(request.param):
        pytest.skip(f"mode {request.param!r} does not work here: {why}")
    return request.param


@pytest.fixture(params=JAILS)
def jail(request) -> str:
    if why := probe(request.param):
        pytest.skip(f"mode {request.param!r} does not work here: {why}")
    return request.param


def tagged(tag: str) -> str:
    """A prelude that names this process (and so every child) `tag`, which `survivors` finds."""
    return (
        f"import ctypes\nif hasattr(ctypes.CDLL(None), 'prctl'):\n"
        f"    ctypes.CDLL(None).prctl(15, {tag.encode()!r}, 0, 0, 0)  # PR_SET_NAME\n"
    )


def survivors(tag: str, kill: bool = False) -> list[int]:
    """Live processes on the host named `tag` (other tests' candidates never are; a zombie
    waiting for its reaper is dead)."""
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        try:
            named = entry.name.isdigit() and (entry / "comm").read_text().strip() == tag
            if named and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except (OSError, IndexError):
            pass
    for pid in found if kill else []:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return found


def test_a_plain_program_runs_and_its_output_comes_back():
    result = run_python("print(sum(range(10)))")
    assert result.passed and result.stdout == "45\n"
    assert not run_python("raise SystemExit(3)").passed
    assert isolation().mode in MODES and isolation().user


def test_stdin_is_exactly_the_given_input_and_leaves_no_file_behind(mode):
    given = "3 4\n\n  spaced  \nlast line without newline"
    reader = "import os, sys\nprint(repr(sys.stdin.read()), sorted(os.listdir('.')))\n"
    result = run_in_mode(reader, mode, stdin=given)
    assert result.passed and result.stdout == f"{given!r} ['candidate.py']\n", result.stderr
    assert run_in_mode(reader, mode).stdout == "'' ['candidate.py']\n"  # no input: stdin is empty


def test_an_infinite_loop_is_killed_at_the_wall_clock_limit(mode):
    tag = "tri-" + uuid.uuid4().hex[:10]
    result = run_in_mode(tagged(tag) + "while True:\n    pass\n", mode, Limits(wall_s=1.5))
    assert result.timed_out and not result.passed
    assert survivors(tag) == []


def test_a_sleeping_group_is_killed_with_its_children(mode):
    tag = "tri-" + uuid.uuid4().hex[:10]
    program = tagged(tag) + (
        "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n"
        "        time.sleep(60)\ntry:\n    os.setsid()  # the candidate itself leaves too\n"
        "except OSError:\n    pass  # already a session leader (rlimits, uid-drop)\n"
        "time.sleep(60)\n"
    )
    assert run_in_mode(program, mode, Limits(wall_s=1.5)).timed_out
    left = survivors(tag, kill=True)
    if mode in JAILS:  # setsid escapes a process group, never the PID namespace
        assert left == []


def test_a_fork_bomb_hits_the_process_limit(mode):
    if not counts_processes(mode):
        pytest.skip(f"{mode!r} has no process-count limit here (see `trinity doctor`)")
    tag = "tri-" + uuid.uuid4().hex[:10]
    program = tagged(tag) + (
        "import os, time\nn = 0\nfor _ in range(10_000):\n    try:\n"
        "        os.fork() or time.sleep(30)\n    except OSError:\n        break\n"
        "    n += 1\nprint(n)\nraise SystemExit(1 if n < 10_000 else 0)\n"
    )
    result = run_in_mode(program, mode, Limits(wall_s=10))
    left = survivors(tag, kill=True)
    assert not result.passed
    assert int(result.stdout.split()[0]) < Limits().processes
    assert left == [] or mode not in JAILS


def test_as_root_each_candidate_has_a_uid_and_a_process_limit_of_its_own(mode):
    """As root, candidates once all ran as uid 65534, sharing one RLIMIT_NPROC (64) with each
    other and with every uid-65534 process: one that held 60 children left another unable to
    fork. Now each has a uid of its own, so the other forks while the first holds its 60."""
    if os.geteuid() != 0 or mode == "rlimits" or not own_uids():
        pytest.skip("root's candidates have a uid of their own only as root, with OWN_UIDS mapped")
    tag = "tri-" + uuid.uuid4().hex[:10]
    holder = tagged(tag) + (
        "import os, sys, time\nfor _ in range(60):\n    os.fork() or time.sleep(30)\n"
        "print(os.getuid(), flush=True)\ntime.sleep(30)\n"
    )
    forker = (
        "import os\nkids = [os.fork() or os._exit(0) for _ in range(10)]\n"
        "for kid in kids:\n    os.waitpid(kid, 0)\nprint(os.getuid())\n"
    )
    held: list = []
    first = threading.Thread(
        target=lambda: held.append(run_in_mode(holder, mode, Limits(wall_s=6)))
    )
    first.start()
    try:
        deadline = time.monotonic() + 6
        while len(survivors(tag)) < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(survivors(tag)) >= 60
        second = run_in_mode(forker, mode, Limits(wall_s=6))
        assert len(survivors(tag)) >= 60  # the 60 children were there while the second ran
    finally:
        survivors(tag, kill=True)  # the first ends now, not at its wall-clock limit
        first.join()
    assert second.passed, second.stderr
    holder_uid, forker_uid = int(held[0].stdout.split()[0]), int(second.stdout.split()[0])
    assert holder_uid in OWN_UIDS and forker_uid in OWN_UIDS and holder_uid != forker_uid


def test_own_uids_needs_the_whole_range_mapped():
    assert maps_own_uids("         0          0 4294967295\n")  # the host, as root
    assert not maps_own_uids("         0     100000      65536\n")  # a rootless container
    assert maps_own_uids("0 100000 65536\n2000000000 300000 16777216\n")
    assert not maps_own_uids("2000000000 300000 16777215\n")  # one uid short


def test_a_memory_hog_fails_with_memory_error(mode):
    result = run_in_mode("blob = bytearray(4 << 30)\n", mode)
    assert not result.passed and "MemoryError" in result.stderr


def test_a_huge_print_is_capped_and_fails(mode):
    result = run_in_mode("import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n", mode)
    assert not result.passed and not result.timed_out
    assert "File too large" in result.stderr  # the file-size limit stopped it, not the clock
    assert len(result.stdout) == REPORT_BYTES  # what a result keeps of it


@pytest.mark.parametrize("where", ["host_tmp", "var_tmp", "home", "repo"])
def test_writing_outside_the_temp_dir_leaves_the_host_untouched(tmp_path, jail, where):
    target = {
        "host_tmp": tmp_path / "escape.txt",
        "var_tmp": Path("/var/tmp") / f"trinity-escape-{uuid.uuid4().hex}",
        "home": Path.home() / f"trinity-escape-{uuid.uuid4().hex}",
        "repo": Path(__file__).resolve().parent / f"escape-{uuid.uuid4().hex}",
    }[where]
    result = run_in_mode(f"open({str(target)!r}, 'w').write('escaped')\n", jail)
    assert not target.exists()
    if where in ("host_tmp", "repo"):  # home and /var/tmp may be empty private tmpfs in the jail
        assert not result.passed


def test_the_temp_dir_is_fresh_and_private(mode):
    run_in_mode("open('left-behind.txt', 'w').write('x')\n", mode)
    result = run_in_mode("import os\nprint(sorted(os.listdir('.')))\n", mode)
    assert result.stdout.strip() == "['candidate.py']"


def test_an_api_key_in_the_environment_is_not_visible(monkeypatch, mode):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    result = run_in_mode(
        "import os\nprint(dict(os.environ))\nassert os.environ.get('OPENAI_API_KEY')\n", mode
    )
    assert not result.passed and SECRET not in result.stdout + result.stderr


def test_an_api_key_cannot_be_read_from_proc_of_the_parent(mode):
    """A parent process started with the key in its environment (as the CLI is) runs a
    candidate that searches every readable /proc/<pid>/environ for it. Holds in every mode:
    trinity is non-dumpable, and the candidate holds no CAP_SYS_PTRACE, even as root."""
    program = (
        "import os\nfound = []\nfor pid in [os.getppid(), *os.listdir('/proc')]:\n"
        "    try:\n        found.append(open(f'/proc/{pid}/environ', 'rb').read())\n"
        "    except OSError:\n        pass\n"
        f"assert any({SECRET[::-1].encode()!r}[::-1] in blob for blob in found)\n"
    )
    parent = (
        "import os, sys\nfrom trinity_cli.tasks.sandbox import run_in_mode\n"
        f"assert {SECRET!r}.encode() in open(f'/proc/{{os.getpid()}}/environ', 'rb').read()\n"
        f"result = run_in_mode({program!r}, {mode!r})\n"
        f"print(result.passed, {SECRET!r} in result.stdout + result.stderr)\n"
    )
    env = {**os.environ, "ANTHROPIC_API_KEY": SECRET}
    done = subprocess.run(
        [sys.executable, "-c", parent], env=env, capture_output=True, check=False, text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_a_socket_to_loopback_cannot_connect(jail):
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
        result = run_in_mode(
            "import socket\n"
            f"socket.create_connection(('127.0.0.1', {port}), timeout=3).sendall(b'hi')\n", jail,
        )
        waiter.join()
    assert not result.passed and not accepted
    assert "Errno" in result.stderr


def test_hostile_answers_are_failed_candidates_and_grading_goes_on():
    # a prompt that loads alone, as HumanEval's do (the grader runs it first)
    task = Task(
        "t/add", 'def add(a, b):\n    """Sum."""\n', "add",
        "def check(f):\n    assert f(2, 3) == 5\n", "    return a + b\n",
    )
    grader = Grader()
    for hostile in [
        "import os\nwhile True:\n    os.fork()\n", "x = 'y' * (8 << 30)\n",
        "print('z' * (4 << 20))\n",
    ]:
        assert not grader.passes(task, hostile)
    assert grader.passes(task, task.prompt + task.canonical_solution)


@pytest.mark.skipif(
    not os.environ.get("CI"),
    reason="on a user's machine bubblewrap may be missing or barred "
    "(e.g. AppArmor's user-namespace rule); CI installs it and runs as root",
)
def test_ci_uses_bubblewrap_so_a_broken_jail_cannot_hide_as_skips():
    """A change that broke bubblewrap's arguments would make its tests skip and the sandbox
    quietly fall back; in CI the strongest mode must be the one in use."""
    assert shutil.which("bwrap"), "CI must install bubblewrap (.ci/run)"
    assert isolation().mode == "bwrap", isolation().unavailable

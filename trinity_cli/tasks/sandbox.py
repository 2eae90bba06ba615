"""Running code that a language model wrote, contained.

Every candidate runs in its own process group, with a scrubbed environment, stdin closed,
stdout and stderr going to files capped by the file-size limit, CPU-time / address-space /
file-size / open-file limits, a wall-clock timeout that kills the whole group, and a fresh
temporary directory removed afterwards. Resource limits alone do not contain root, and a child
can read its parent's API keys from /proc/<ppid>/environ, so the strongest mode that works here
is used, found once per process by running a trivial program:

- `namespaces` (Linux, `unshare`): new PID, mount and network namespaces (plus a user namespace
  when trinity is not root). The candidate sees only its own processes, no network (loopback is
  down), a private /tmp and empty /var/tmp, /dev/shm, /run/lock and home; as root it also drops
  to uid 65534 with a process-count limit.
- `uid-drop` (root without namespaces): the candidate runs as uid 65534.
- `rlimits` (anywhere else): resource limits only; on Linux trinity marks itself non-dumpable so
  that a same-uid child cannot read /proc/<ppid>/environ.

`isolation()` says which mode is in use and exactly what it does and does not isolate; `trinity
doctor` shows it.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from trinity_cli.errors import ConfigError

SETUP_FAILED = 125  # sandbox_init.py's exit code for "this mode does not work here"
REPORT_BYTES = 64 * 1024  # how much of stdout / stderr a result keeps
HOST_ENV = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8"}  # no keys, ever
HIDDEN_DIRS = ("/var/tmp", "/dev/shm", "/run/lock")
MODES = ("namespaces", "uid-drop", "rlimits")


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 1 << 30  # address space
    file_bytes: int = 1 << 20  # any file written, stdout and stderr included
    processes: int = 64  # enforced only where the candidate runs as uid 65534
    open_files: int = 64


@dataclass(frozen=True)
class ExecResult:
    returncode: int | None  # None when the wall-clock timeout killed it
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def passed(self) -> bool:
        return self.returncode == 0


@dataclass(frozen=True)
class Isolation:
    mode: str
    isolated: tuple[str, ...]
    not_isolated: tuple[str, ...]
    unavailable: dict[str, str]  # stronger modes that failed here → why

    def as_dict(self) -> dict:
        return asdict(self)


def run_python(program: str, limits: Limits = Limits(), files: dict[str, str] | None = None) -> ExecResult:
    """Run `program` (beside `files`, name → text, in its work dir) with the strongest
    isolation this machine offers."""
    return run_in_mode(program, isolation().mode, limits, files)


def run_in_mode(program: str, mode: str, limits: Limits = Limits(), files: dict[str, str] | None = None) -> ExecResult:
    is_root = os.geteuid() == 0
    scratch = Path(tempfile.mkdtemp(prefix="trinity-sandbox-"))  # host side: output files
    work = None if mode == "namespaces" else Path(tempfile.mkdtemp(prefix="trinity-work-"))
    base_python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    rel = os.path.relpath(base_python, sys.base_prefix)
    config = {
        "mode": mode,
        "prefix": sys.base_prefix,
        "python": base_python,
        "python_rel": None if rel.startswith("..") else rel,
        "hide": [*HIDDEN_DIRS, os.path.expanduser("~")],
        "work": str(work),
        "drop_uid": is_root and mode != "rlimits",
        "limits": {**asdict(limits), "processes": limits.processes if is_root and mode != "rlimits" else 0},
    }
    init = [sys.executable, "-I", str(Path(__file__).with_name("sandbox_init.py")), json.dumps(config)]
    if mode == "namespaces":
        user = [] if is_root else ["--user", "--map-root-user"]
        namespaces = ["--pid", "--fork", "--kill-child", "--mount", "--net", "--mount-proc"]
        init = [shutil.which("unshare") or "unshare", *user, *namespaces, *init]
    elif mode == "rlimits":
        _hide_own_environ()
    try:
        with open(scratch / "stdout", "wb") as out, open(scratch / "stderr", "wb") as err:
            try:
                child = subprocess.Popen(init, stdin=subprocess.PIPE, stdout=out, stderr=err, env=HOST_ENV,
                                         cwd="/", start_new_session=True)
            except OSError as exc:
                return ExecResult(SETUP_FAILED, "", f"sandbox set-up failed: {exc}")
            assert child.stdin is not None  # stdin=PIPE
            try:
                child.stdin.write(json.dumps({**(files or {}), "candidate.py": program}).encode())
                child.stdin.close()
            except BrokenPipeError:
                pass
            try:
                returncode: int | None = child.wait(timeout=limits.wall_s)
            except subprocess.TimeoutExpired:
                returncode = None
            finally:
                _kill_group(child)
        return ExecResult(returncode, _head(scratch / "stdout"), _head(scratch / "stderr"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def _kill_group(child: subprocess.Popen) -> None:
    """SIGKILL the process group; under `unshare`, also wait for the namespace's init to be
    gone, since the kernel kills the rest of the namespace only as its init exits."""
    ns_inits = _children(child.pid)
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()
    for pid in ns_inits:
        deadline = time.monotonic() + 5.0
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    """Running, i.e. neither gone nor a zombie (a zombie init has no namespace left)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _head(path: Path) -> str:
    with path.open("rb") as handle:
        return handle.read(REPORT_BYTES).decode("utf-8", "replace")


def _hide_own_environ() -> None:
    """A non-dumpable process's /proc/<pid>/ files belong to root: a same-uid child cannot
    read its environment (and so its API keys)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4


@functools.cache
def isolation() -> Isolation:
    """The strongest mode that runs a trivial program correctly here, and what it isolates."""
    unavailable: dict[str, str] = {}
    is_root = os.geteuid() == 0
    for mode in MODES:
        if mode == "namespaces" and shutil.which("unshare") is None:
            unavailable[mode] = "no `unshare` command"
            continue
        if mode == "uid-drop" and not is_root:
            continue
        result = run_in_mode("print('ok')", mode, Limits(wall_s=20.0))
        if result.passed and result.stdout == "ok\n":
            return Isolation(mode, *_describe(mode, is_root), unavailable)
        unavailable[mode] = (result.stderr.strip().splitlines() or [f"exit code {result.returncode}"])[-1]
    raise ConfigError(f"the sandbox cannot run Python here: {unavailable['rlimits']}")


def _describe(mode: str, is_root: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    isolated = ["scrubbed environment, stdin closed", "own process group, killed on timeout",
                "limits: CPU time, address space, file size (caps output), open files"]
    if mode == "namespaces":
        isolated += ["PID namespace: no other process visible, /proc/<ppid>/environ unreachable",
                     "network namespace: no network, loopback down",
                     "mount namespace: private /tmp, empty /var/tmp, /dev/shm, /run/lock and home"]
        if is_root:
            return (*isolated, "runs as uid 65534 with a process-count limit"), (
                "world-readable files outside the hidden directories can be read",)
        return (*isolated, "user namespace: no privileges outside it"), (
            "your files outside home and /tmp stay writable", "process count is not limited")
    not_isolated = ["network", "other processes are visible", "world-writable directories (/tmp, /var/tmp)",
                    "processes that leave the process group survive the timeout"]
    if mode == "uid-drop":
        dropped = "runs as uid 65534 with a process-count limit: your files and /proc/<ppid>/environ are unreadable"
        return (*isolated, dropped), tuple(not_isolated)
    if sys.platform.startswith("linux") and not is_root:
        isolated.append("/proc/<ppid>/environ unreadable (trinity marks itself non-dumpable)")
    else:
        not_isolated.append("/proc/<ppid>/environ and your files are readable")
    if sys.platform == "darwin":
        not_isolated.append("the address-space limit (macOS does not enforce it)")
    return tuple(isolated), (*not_isolated, "your files are writable", "process count is not limited")

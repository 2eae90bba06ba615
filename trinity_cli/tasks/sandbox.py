"""Running code that a language model wrote, contained.

Every candidate runs in its own process group, with a scrubbed environment, stdin closed (or
reading only the input it is given: a stdin/stdout problem's sample), stdout and stderr going
to files capped by the file-size limit, CPU-time / address-space / file-size / open-file
limits, a wall-clock timeout that kills the whole group, and a fresh temporary directory
removed afterwards. On Linux it starts with no capabilities (the bounding set empty too,
wherever trinity may empty it) and no_new_privs, and trinity marks itself non-dumpable, so
that no child can read its /proc/<pid>/environ (its API keys) or ptrace it. Resource limits
alone contain nothing else, so the strongest mode that works here is used, found once per
process by running a trivial program:

- `bwrap` (bubblewrap): new user (unless root), PID, mount, network, IPC and UTS namespaces; a
  fresh root holding only the system directories and Python, read-only, and a private /tmp;
  uid 65534 inside (as root: a uid of its own, `OWN_UIDS`).
- `namespaces` (`unshare`): the same namespaces over the host's file tree, made read-only, with
  tmpfs over /tmp, home and the other writable directories; uid 65534 in a nested user
  namespace (locked mounts) or, as root, a uid of its own.
- `uid-drop` (root without namespaces): the candidate runs as a uid of its own.
- `rlimits` (anywhere else, macOS included): resource limits only.

`isolation()` says which mode is in use and exactly what it does and does not isolate, for the
user trinity runs as; `trinity doctor` shows it. `tests/test_sandbox_nonroot.py` attacks each
mode from a root and from a non-root parent.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import secrets
import select
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
MODES = ("bwrap", "namespaces", "uid-drop", "rlimits")
JAILS = ("bwrap", "namespaces")  # the modes with their own PID, mount and network namespaces
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
INIT = Path(__file__).with_name("sandbox_init.py")
INIT_IN_JAIL = "/.trinity/sandbox_init.py"
ROOT_SETUP_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_CHOWN")  # dropped before exec
STDIN_FILE = (
    "stdin.txt"  # the input given on stdin: sandbox_init.py opens it as fd 0, then deletes it
)
NOBODY = 65534
# As root, each candidate runs as a uid of its own drawn from this range (far above the
# accounts and container ranges systems hand out, below 2^31): RLIMIT_NPROC then counts its
# processes alone, and no candidate can signal another, nor any process of uid 65534. Where
# the range is not mapped (root in a rootless container), every candidate is uid 65534.
OWN_UIDS = range(2_000_000_000, 2_000_000_000 + (1 << 24))


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0
    cpu_s: int = 10
    memory_bytes: int = 1 << 30  # address space
    file_bytes: int = 1 << 20  # any file written, stdout and stderr included
    processes: int = 64  # enforced where `counts_processes(mode)` says so
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
    user: str = ""  # who trinity runs as: what holds depends on it

    def as_dict(self) -> dict:
        return asdict(self)


def run_python(
    program: str, limits: Limits = Limits(), files: dict[str, str] | None = None,
    stdin: str | None = None,
) -> ExecResult:
    """Run `program` (beside `files`, name → text, in its work dir; `stdin` its input, else
    none) with the strongest isolation this machine offers."""
    return run_in_mode(program, isolation().mode, limits, files, stdin)


def _wait(child: subprocess.Popen, timeout: float) -> int:
    """`child.wait(timeout)` without its polling sleeps (up to 50 ms a run, a third of a short
    grading) where Linux gives the child a pidfd to wait on; else `Popen.wait` itself."""
    try:
        pidfd = os.pidfd_open(child.pid)  # type: ignore[attr-defined]  # Linux only
    except (AttributeError, OSError):
        return child.wait(timeout=timeout)
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ready:
        raise subprocess.TimeoutExpired(child.args, timeout)
    return child.wait()


def run_in_mode(
    program: str, mode: str, limits: Limits = Limits(), files: dict[str, str] | None = None,
    stdin: str | None = None,
) -> ExecResult:
    """Run `program` in one named mode (the probe and the tests call this directly)."""
    if stdin is not None:
        files = {**(files or {}), STDIN_FILE: stdin}
    _hide_own_environ()
    is_root = os.geteuid() == 0
    scratch = Path(tempfile.mkdtemp(prefix="trinity-sandbox-"))  # host side: output files
    work = None if mode in JAILS else Path(tempfile.mkdtemp(prefix="trinity-work-"))
    base_python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    rel = os.path.relpath(base_python, sys.base_prefix)
    uid = candidate_uid() if is_root and mode != "rlimits" else None
    config = {
        "mode": mode, "prefix": sys.base_prefix, "python": base_python,
        "python_rel": None if rel.startswith("..") else rel,
        "hide": [*HIDDEN_DIRS, os.path.expanduser("~")],
        "work": "/tmp/work" if work is None else str(work),
        "drop_uid": uid,
        "stdin": None if stdin is None else STDIN_FILE,
        "nest_user": mode == "namespaces" and not is_root,
        "limits": {
            **asdict(limits), "processes": limits.processes if counts_processes(mode) else 0,
        },
    }
    init = [base_python, "-I", str(INIT), json.dumps(config)]
    if mode == "bwrap":
        init = [
            *_bwrap_command(base_python, is_root), base_python, "-I", INIT_IN_JAIL,
            json.dumps(config),
        ]
    elif mode == "namespaces":
        user = [] if is_root else ["--user", "--map-root-user"]
        namespaces = [
            "--pid", "--fork", "--kill-child", "--mount", "--net", "--ipc", "--uts", "--mount-proc",
        ]
        init = [shutil.which("unshare") or "unshare", *user, *namespaces, *init]
    try:
        with open(scratch / "stdout", "wb") as out, open(scratch / "stderr", "wb") as err:
            try:
                child = subprocess.Popen(
                    init, stdin=subprocess.PIPE, stdout=out, stderr=err, env=HOST_ENV, cwd="/",
                    start_new_session=True,
                )
            except OSError as exc:
                return ExecResult(SETUP_FAILED, "", f"sandbox set-up failed: {exc}")
            assert child.stdin is not None  # stdin=PIPE
            try:
                child.stdin.write(json.dumps({**(files or {}), "candidate.py": program}).encode())
                child.stdin.close()
            except BrokenPipeError:
                pass
            try:
                returncode: int | None = _wait(child, limits.wall_s)
            except subprocess.TimeoutExpired:
                returncode = None
            finally:
                _kill_group(child, namespace=mode in JAILS)
                if mode == "uid-drop" and uid is not None and uid != NOBODY:
                    _kill_uid(uid, base_python)
        return ExecResult(returncode, _head(scratch / "stdout"), _head(scratch / "stderr"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def _bwrap_command(base_python: str, is_root: bool) -> list[str]:
    """bubblewrap's jail: a fresh tmpfs root with read-only system directories, Python's
    installation and sandbox_init.py; a private /tmp; /proc of the new PID namespace; a minimal
    /dev. As a user, a user namespace (uid 65534 inside) that cannot make another; as root, no
    user namespace (it would map root's files to the candidate), so sandbox_init.py keeps the
    capabilities to drop to its own uid and loses them before exec."""
    command = [
        shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--as-pid-1",
        "--cap-drop", "ALL",
    ]
    if is_root:
        command += [
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try",
        ]
        command += [arg for cap in ROOT_SETUP_CAPS for arg in ("--cap-add", cap)]
    else:
        command += ["--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534"]
        command += ["--disable-userns"] if "--disable-userns" in _bwrap_help() else []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            command += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            command += ["--ro-bind", path, path]
    python = [sys.base_prefix] + ([] if _inside(base_python, sys.base_prefix) else [base_python])
    for path in python:
        if not any(_inside(path, top) for top in SYSTEM_DIRS):
            parents = [str(p) for p in reversed(Path(path).parents) if str(p) != "/"]
            command += [arg for p in parents for arg in ("--dir", p)]  # 0755: uid 65534 may enter
            command += ["--ro-bind", path, path]
    command += ["--ro-bind", str(INIT), INIT_IN_JAIL, "--proc", "/proc", "--dev", "/dev"]
    command += ["--size", str(64 << 20)] if "--size" in _bwrap_help() else []
    # The root and /dev are tmpfs that bwrap made: read-only, or a candidate running as the
    # namespace's owner could fill memory through them (only /tmp has a size cap).
    command += ["--tmpfs", "/tmp", "--remount-ro", "/dev", "--remount-ro", "/"]
    return [*command, "--clearenv", "--chdir", "/", "--"]


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


@functools.cache
def _bwrap_help() -> str:
    """Options differ across bubblewrap releases (--disable-userns and --size are 0.8+)."""
    try:
        return subprocess.run(
            ["bwrap", "--help"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


@functools.cache
def own_uids() -> bool:
    """Whether each candidate gets a uid of its own (OWN_UIDS) here: root on Linux, with the
    whole range mapped in this user namespace, uids and gids both."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return False
    try:
        maps = [Path(f"/proc/self/{name}").read_text() for name in ("uid_map", "gid_map")]
    except OSError:
        return False
    return all(maps_own_uids(text) for text in maps)


def maps_own_uids(id_map: str) -> bool:
    """Whether a /proc/<pid>/uid_map (or gid_map) holds all of OWN_UIDS: its lines are "first
    id inside, first id outside, count"."""
    numbers = [int(n) for n in id_map.split()]
    ranges = [range(first, first + count) for first, _, count in zip(*[iter(numbers)] * 3)]
    return any(OWN_UIDS.start in r and OWN_UIDS[-1] in r for r in ranges)


def candidate_uid() -> int:
    """The uid (and gid) a candidate of root's runs as."""
    return OWN_UIDS.start + secrets.randbelow(len(OWN_UIDS)) if own_uids() else NOBODY


def counts_processes(mode: str) -> bool:
    """Whether the candidate runs under a process-count limit: it must run as another uid (when
    trinity is root: its own, else 65534), or in a user namespace of its own on Linux 5.14+,
    which counts processes per namespace; otherwise RLIMIT_NPROC would count every process of
    yours."""
    if mode == "rlimits" or not sys.platform.startswith("linux"):
        return False
    if os.geteuid() == 0:
        return True
    return mode in JAILS and _kernel() >= (5, 14)


def _kernel() -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in platform.release().split("-")[0].split(".")[:2])
    except ValueError:
        return (0,)


def _kill_group(child: subprocess.Popen, namespace: bool) -> None:
    """SIGKILL the process group; in a PID namespace, also wait for the namespace's init to be
    gone, since the kernel kills the rest of the namespace only as its init exits."""
    ns_inits = _children(child.pid) if namespace else []
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()
    for pid in ns_inits:
        deadline = time.monotonic() + 5.0
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)


def _kill_uid(uid: int, python: str) -> None:
    """SIGKILL every process of `uid`, a candidate's own (uid-drop has no PID namespace to end
    those that left the process group): kill(-1) made as that uid signals exactly its
    processes, itself aside. Where that uid cannot run Python, no candidate of it ran either."""
    try:
        subprocess.run(
            [python, "-I", "-S", "-c", "import os, signal; os.kill(-1, signal.SIGKILL)"],
            user=uid, group=uid, extra_groups=[], env=HOST_ENV, cwd="/", check=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    except OSError:
        pass


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
    """A non-dumpable process's /proc/<pid>/ files belong to root and it cannot be ptraced
    without CAP_SYS_PTRACE: no child, whatever its uid, reads its environment (its API keys)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4


@functools.cache
def isolation() -> Isolation:
    """The strongest mode that runs a trivial program correctly here, and what it isolates."""
    unavailable: dict[str, str] = {}
    is_root = os.geteuid() == 0
    for mode in MODES:
        command = {"bwrap": "bwrap", "namespaces": "unshare"}.get(mode)
        if command and shutil.which(command) is None:
            unavailable[mode] = f"no `{command}` command" + (
                " (package bubblewrap)" if mode == "bwrap" else ""
            )
            continue
        if mode == "uid-drop" and not is_root:
            continue
        result = run_in_mode("print('ok')", mode, Limits(wall_s=20.0))
        if result.passed and result.stdout == "ok\n":
            return Isolation(mode, *_describe(mode, is_root), unavailable, _user())
        unavailable[mode] = (
            result.stderr.strip().splitlines() or [f"exit code {result.returncode}"]
        )[-1]
    raise ConfigError(f"the sandbox cannot run Python here: {unavailable['rlimits']}")


def _user() -> str:
    if not hasattr(os, "geteuid"):
        return "unknown"
    return "root" if os.geteuid() == 0 else f"uid {os.geteuid()} (not root)"


def _describe(mode: str, is_root: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What `mode` isolates, and what not, for the user trinity runs as. The hostile programs
    of tests/test_sandbox.py and tests/test_sandbox_nonroot.py check these lines."""
    linux = sys.platform.startswith("linux")
    isolated = [
        "scrubbed environment, stdin closed (or only the sample input)",
        "own process group, killed on timeout",
        "limits: CPU time, address space, file size (caps output), open files",
    ]
    if linux:
        isolated.append(
            "trinity is non-dumpable: no candidate can read its /proc/<pid>/environ "
            "(API keys) or ptrace it"
        )
    not_isolated = [] if counts_processes(mode) else ["process count is not limited"]
    own = is_root and own_uids()
    root_uid = "a uid of its own (one per candidate, no account)" if own else "the real uid 65534"
    if mode in JAILS:
        who = root_uid if is_root else "uid 65534 in a user namespace (your uid outside)"
        isolated += [
            ("user, " if not is_root else "") + "PID, mount, network, IPC and UTS namespaces: "
            "no other process is visible, and killing the sandbox kills all of it",
            "no network: a listener on the host's 127.0.0.1 is unreachable",
            f"runs as {who} with no capabilities and no_new_privs: the jail cannot be undone",
        ]
    if mode == "bwrap":
        isolated.append(
            "bubblewrap: a fresh root with only /usr, /etc, /bin, /lib* and Python's "
            "installation, read-only, and a private /tmp holding the work dir; home (but "
            "for Python's installation, where it lies there), the repository and every "
            "other directory are absent"
        )
        not_isolated.append("files in /usr and /etc and Python's installation can be read")
    elif mode == "namespaces":
        isolated.append(
            "every mount read-only (locked); a private /tmp holding the work dir; empty "
            "tmpfs over home, /var/tmp, /dev/shm and /run/lock"
        )
        reader = ("any user" if own else "uid 65534") if is_root else "you"
        not_isolated.append(
            f"files that {reader} can read outside home and the temporary directories "
            "can be read (the repository, /etc, /opt, ...); install bubblewrap to hide them"
        )
    elif mode == "uid-drop":
        isolated.append(
            f"runs as {root_uid} with no capabilities and no_new_privs: your files are "
            "unreadable unless world-readable"
        )
        signalled = "none can be signalled" if own else "those of uid 65534 can be signalled"
        not_isolated += [
            "network", f"other processes are visible ({signalled})",
            "world-readable files can be read, world-writable directories (/tmp) written",
        ]
        if own:
            isolated.append(
                "processes that leave the process group die with it: every process of its uid "
                "is killed when it ends"
            )
        else:
            not_isolated.append(_LEAVERS)
    else:
        if linux:
            isolated.append("no capabilities and no_new_privs")
        files = (
            "it runs as root, without capabilities: it can read and write every file root owns"
            if is_root
            else "it runs as you: it can read and write every file you can"
        )
        not_isolated += [
            "network", "other processes are visible, and yours can be signalled", files, _LEAVERS,
        ]
        if sys.platform == "darwin":
            not_isolated += [
                (
                    "macOS: resource limits only, no isolation of files, network or processes; "
                    "a process of yours can read trinity's environment (API keys) with `ps -E`"
                ),
                "the address-space limit (macOS does not enforce it)",
            ]
    if counts_processes(mode):
        shared = is_root and not own
        isolated.append(
            "a process-count limit"
            + (" (shared by the candidates running at once: all are uid 65534)" if shared else "")
        )
    return tuple(isolated), tuple(not_isolated)


_LEAVERS = (
    "processes that leave the process group survive the timeout "
    "(the CPU limit still ends a busy one)"
)

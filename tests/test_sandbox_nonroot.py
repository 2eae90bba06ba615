"""Hostile programs against every sandbox mode, from a root and from a non-root parent.

CI runs as root, but most users do not, and a jail that holds for root may not hold for them
(a user namespace makes the candidate root inside it). So each attack runs twice: from a
parent that is root and from one that is uid 65534 (`setpriv`), each in a private mount
namespace where a fresh tmpfs holds its home (a secret file, a world-writable directory) and
where any directory that hides Python or this tree from uid 65534 (such as /root, mode 700)
is overlaid by a 0755 tmpfs that binds its entries back. The home and the overlays live in
that namespace only; the secret planted in /tmp and the world-writable directories in /tmp,
/var/tmp and /dev/shm are removed afterwards.

A driver (`drive`, below, run as `python -c`) plays trinity: it carries a secret in its
environment and a marker in its command line, listens on 127.0.0.1, calls `run_in_mode` for
each attack and judges the outcome from outside (the secret in the output, a file on the
host, a connection accepted). Every attack is also run with the isolation off — a plain child
of a dumpable parent ("off"), or, for the umount attacks, the jail this project had before
(mounts made by a process that keeps its capabilities, "weak") — and must escape there, so a
passing test cannot be one that could not see an escape.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

NOBODY = 65534
TESTS = Path(__file__).resolve().parent
ATTACKS = (
    "home_file", "tmp_file", "host_processes", "umount_home", "umount_tmp", "umount_proc",
    "parent_environ", "ptrace_parent", "network", "write_outside", "capabilities", "outlive",
    "fork_bomb", "memory_hog", "fill_jail",
)
HOLDS = {  # mode → the attacks it contains (what `isolation()` claims for it; fork_bomb only
    "bwrap": set(ATTACKS),  # where `counts_processes` says so for the parent's uid)
    "namespaces": set(ATTACKS),
    "uid-drop": {  # outlive: where each candidate has a uid of its own (`own_uids`)
        "parent_environ", "ptrace_parent", "capabilities", "fork_bomb", "memory_hog", "outlive",
    },
    # see `trinity doctor`
    "rlimits": {
        "parent_environ", "ptrace_parent", "capabilities", "memory_hog",
    },
}
# With the isolation off, only the attacks meant for each control run: a root "off" child
# that unmounted /proc or /tmp would do it in the driver's own mount namespace.
CONTROL = {attack: "weak" if attack.startswith("umount") else "off" for attack in ATTACKS}
# The jail's own root and /dev are memory (tmpfs): its control is bubblewrap's jail without the
# read-only remounts, where a non-root parent's candidate owns them and could fill them.
CONTROL["fill_jail"] = "bwrap-writable"

# --- the hostile programs -------------------------------------------------------------------
# Each starts with PRELUDE and a header of constants. Secrets that live in a process (the
# environment, the marker) appear in a program only reversed, so the program's own text
# never matches; file secrets never appear at all.

PRELUDE = '''
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)


def tried(what, rc):
    print(what, "worked" if rc == 0 else os.strerror(ctypes.get_errno()))


def undo(path, then):
    """Take the mounts off `path` one by one, then try to make it writable; look each time."""
    for _ in range(3):
        tried(f"umount {path}", libc.umount2(path.encode(), 2))  # MNT_DETACH
        then()
    tried(f"remount {path}", libc.mount(None, path.encode(), None, 32 | 4096, None))  # read-write
    then()


def own_namespace():
    """A user and mount namespace of our own, where we would hold every capability."""
    uid, gid = os.getuid(), os.getgid()
    rc = libc.unshare(0x10000000 | 0x00020000)  # CLONE_NEWUSER | CLONE_NEWNS
    tried("own user namespace", rc)
    if rc != 0:
        return False
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        try:
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
        except OSError:
            pass
    return True


def peek(path):
    """A non-recursive bind of each mount above `path` shows what mounts on top of it hide."""
    spot = os.path.abspath("peek")  # in the work dir
    os.makedirs(spot, exist_ok=True)
    parts = path.strip("/").split("/")
    for cut in range(len(parts)):
        above = "/" + "/".join(parts[:cut])
        rc = libc.mount(above.encode(), spot.encode(), None, 4096, None)  # MS_BIND
        tried(f"bind {above}", rc)
        if rc == 0:
            show(os.path.join(spot, *parts[cut:]))
            libc.umount2(spot.encode(), 2)


def show(path):
    for where in (path, f"/proc/1/root{path}", f"/proc/{os.getppid()}/root{path}"):
        try:
            with open(where) as handle:
                print("read", where, handle.read())
        except OSError:
            pass


def scan(kind, wanted):
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/{kind}", "rb") as handle:
                blob = handle.read()
        except OSError:
            continue
        if wanted.encode() in blob:
            print("found in", pid, blob.replace(b"\\0", b" ").decode(errors="replace"))


def attack(path, then):
    undo(path, then)
    if own_namespace():
        undo(path, then)
        peek(path)
'''

PROGRAMS = {
    "home_file": "show(HOME_SECRET)\n", "tmp_file": "show(TMP_SECRET)\n",
    "host_processes": "scan('cmdline', MARKER[::-1])\n",
    "umount_home": "attack(HOME, lambda: show(HOME_SECRET))\n",
    "umount_tmp": "attack('/tmp', lambda: show(TMP_SECRET))\n",
    "umount_proc": "attack('/proc', lambda: scan('cmdline', MARKER[::-1]))\n",
    "parent_environ": "scan('environ', KEY[::-1])\n",
    "ptrace_parent": (
        "libc.ptrace.argtypes = [ctypes.c_long] * 4\n"
        "for pid in {os.getppid(), HOST_PID}:\n"
        "    if libc.ptrace(0x4206, pid, 0, 0) == 0:  # PTRACE_SEIZE\n"
        "        print('ATTACHED', pid)\n"
    ),
    "network": "socket.create_connection(('127.0.0.1', PORT), timeout=3).sendall(b'hi')\n",
    "write_outside": (  # remount every mount read-write (never umount: see CONTROL)
        "with open('/proc/self/mountinfo') as handle:\n"
        "    points = [line.split()[4] for line in handle]\n"
        "for point in points:\n"
        "    libc.mount(None, point.encode(), None, 32 | 4096, None)\n"
        "for target in TARGETS:\n"
        "    try:\n"
        "        with open(target, 'w') as handle:\n"
        "            handle.write('escaped')\n"
        "    except OSError as exc:\n"
        "        print(target, exc)\n"
    ),
    "capabilities": (
        "with open('/proc/self/status') as handle:\n"
        "    print(''.join(line for line in handle if line.startswith(('Cap', 'NoNewPrivs'))))\n"
    ),
    "fork_bomb": (  # bounded: 100 sleepers at most, even with the isolation off
        "import time\n"
        "libc.prctl(15, TAG.encode(), 0, 0, 0)  # PR_SET_NAME: the driver kills them afterwards\n"
        "n = 0\n"
        "for _ in range(100):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "    except OSError:\n"
        "        break\n"
        "    n += 1\n"
        "print('FORKED', n)\n"
    ),
    "fill_jail": (  # a file in the jail's root and /dev, which no size limit caps
        "for top in ('/', '/dev'):\n"
        "    path = os.path.join(top, TAG)\n"
        "    try:\n"
        "        with open(path, 'w') as handle:\n"
        "            handle.write('x' * 65536)\n"
        "        print('FILLED', top)\n"
        "        os.unlink(path)\n"
        "    except OSError as exc:\n"
        "        print(top, exc)\n"
    ),
    "memory_hog": (  # untouched pages: even with the isolation off this takes no memory
        "blob = bytearray(2 << 30)\nprint('ALLOCATED', len(blob))\n"
    ),
    "outlive": (  # children that leave the session, and the program itself, outlast the timeout?
        "import time\n"
        "libc.prctl(15, TAG.encode(), 0, 0, 0)  # PR_SET_NAME: the driver looks for it\n"
        "for _ in range(2):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "try:\n"
        "    os.setsid()\n"
        "except OSError:\n"
        "    pass\n"
        "time.sleep(60)\n"
    ),
}


def program(attack: str, setup: dict) -> str:
    header = "".join(
        f"{name} = {value!r}\n"
        for name, value in {
            "HOME": setup["home"], "HOME_SECRET": setup["home"] + "/secret",
            "TMP_SECRET": setup["tmp_plant"] + "/secret", "MARKER": setup["marker"][::-1],
            "KEY": setup["key"][::-1], "HOST_PID": os.getpid(), "PORT": setup["port"],
            "TARGETS": setup["targets"], "TAG": _tag(attack, setup),
        }.items()
    )
    return PRELUDE + header + PROGRAMS[attack]


def _tag(attack: str, setup: dict) -> str:
    """The process name (at most 15 bytes) that an attack's processes take."""
    return f"{setup['tag']}{ATTACKS.index(attack):02d}"


# --- the driver: plays trinity, as root or as uid 65534 -------------------------------------


def drive() -> None:
    """Run the attacks of stdin's JSON in one mode; print {attack: [escaped, evidence]}."""
    setup = json.loads(sys.stdin.read())
    accepted: list[object] = []
    listener = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        while True:
            accepted.append(listener.accept())

    threading.Thread(target=accept, daemon=True).start()
    setup.update(
        home=os.environ["HOME"], key=os.environ["TRINITY_HOSTILE_KEY"],
        port=listener.getsockname()[1], marker=sys.argv[-1].split("=", 1)[1],
        tag="t" + uuid.uuid4().hex[:10],
    )
    mode = setup["mode"]
    if mode == "bwrap-writable":  # fill_jail's control: bubblewrap without its read-only remounts
        from trinity_cli.tasks import sandbox

        full = sandbox._bwrap_command

        def writable(*args: object) -> list[str]:
            command = full(*args)  # type: ignore[arg-type]
            return [a for i, a in enumerate(command) if "--remount-ro" not in (a, command[i - 1])]

        sandbox._bwrap_command = writable  # type: ignore[assignment]
        mode = "bwrap"
    if mode not in ("off", "weak"):
        from trinity_cli.tasks.sandbox import run_in_mode

        probe = run_in_mode("print('ok')", mode)
        if probe.stdout != "ok\n":
            print(json.dumps({"unavailable": (probe.stderr.strip().splitlines() or ["?"])[-1]}))
            return

    for target in setup["targets"]:
        Path(target).unlink(missing_ok=True)

    def one(attack: str) -> tuple[str, list]:
        before = len(accepted)
        out = _run(mode, program(attack, setup), setup, wall_s=2 if attack == "outlive" else 60)
        alive = _survivors(_tag(attack, setup))
        written = [t for t in setup["targets"] if Path(t).exists()]
        escaped = {
            "home_file": setup["home_secret"] in out, "umount_home": setup["home_secret"] in out,
            "tmp_file": setup["tmp_secret"] in out, "umount_tmp": setup["tmp_secret"] in out,
            "host_processes": setup["marker"] in out, "umount_proc": setup["marker"] in out,
            "parent_environ": setup["key"] in out, "ptrace_parent": "ATTACHED" in out,
            "network": len(accepted) > before, "write_outside": bool(written),
            "capabilities": _holds_capabilities(
                out, strict_bounding=mode != "rlimits" or os.geteuid() == 0
            ),
            "outlive": bool(alive),
            "fork_bomb": "FORKED" not in out or int(out.split("FORKED")[1].split()[0]) >= 64,
            "memory_hog": "ALLOCATED" in out, "fill_jail": "FILLED" in out,
        }[attack]
        evidence = out[-1500:] + (
            f"\nwritten on the host: {written}" if attack == "write_outside" else ""
        )
        return attack, [escaped, evidence + (f"\nstill alive: {alive}" if alive else "")]

    with ThreadPoolExecutor(max_workers=3) as pool:  # `network` counts connections: one at a time
        results = dict(pool.map(one, [a for a in setup["attacks"] if a != "network"]))
    if "network" in setup["attacks"]:
        results.update([one("network")])
    if mode not in ("off", "weak"):
        from trinity_cli.tasks.sandbox import counts_processes, own_uids

        results["counts_processes"] = counts_processes(mode)
        results["own_uids"] = own_uids()
    print(json.dumps(results))


def _run(mode: str, source: str, setup: dict, wall_s: float) -> str:
    """stdout + stderr of `source` run in `mode`, or with the isolation off."""
    python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    if mode not in ("off", "weak"):
        from trinity_cli.tasks.sandbox import Limits, run_in_mode

        result = run_in_mode(source, mode, Limits(wall_s=wall_s))
        return result.stdout + result.stderr
    command = [python, "-I", "candidate.py"]  # "off": a plain child of this dumpable process
    # the jail of the previous release: mounts made by a process that keeps its caps
    if (
        mode == "weak"
    ):
        user = ["--user", "--map-root-user"] if os.geteuid() else []
        jail = (
            'mount -t tmpfs none "$HOME" && mount -t tmpfs none /tmp && mkdir /tmp/work && '
            'cd /tmp/work && exec "$0" -I -c "$1"'
        )
        command = [
            "unshare", *user, "--pid", "--fork", "--kill-child", "--mount", "--net", "--mount-proc",
            "sh", "-c", jail, python, source,
        ]
    with tempfile.TemporaryDirectory() as work:
        Path(work, "candidate.py").write_text(source)
        with open(Path(work, "out"), "w+") as out:  # a file, not a pipe: children may keep it open
            try:
                subprocess.run(
                    command, cwd=work, env={"PATH": "/usr/bin:/bin", "HOME": setup["home"]},
                    stdout=out, stderr=out, timeout=wall_s, check=False,
                )
            except subprocess.TimeoutExpired:
                pass
            out.seek(0)
            return out.read()


def _survivors(tag: str) -> list[int]:
    """Live processes named `tag`, SIGKILLed on the way out."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            named = entry.name.isdigit() and (entry / "comm").read_text().strip() == tag
            if named and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
                os.kill(int(entry.name), 9)
        except (OSError, IndexError):
            pass
    return found


def _holds_capabilities(out: str, strict_bounding: bool) -> bool:
    fields = dict(
        line.split(":", 1) for line in out.splitlines() if line.startswith(("Cap", "NoNewPrivs"))
    )
    if "CapEff" not in fields:
        return True  # no report at all: count it against the mode
    held = any(int(fields[name], 16) for name in ("CapInh", "CapPrm", "CapEff", "CapAmb"))
    return (
        held
        or (strict_bounding and int(fields["CapBnd"], 16) != 0)
        or fields["NoNewPrivs"].strip() != "1"
    )


# --- the launcher: a private mount namespace, then the driver as root or as uid 65534 ---------


def _import_path() -> list[str]:
    """The driver's sys.path: this directory, the trinity_cli under test, then ours."""
    import trinity_cli

    first = [str(TESTS), str(Path(trinity_cli.__file__).resolve().parent.parent)]
    return first + [p for p in sys.path if os.path.isabs(p) and os.path.isdir(p) and p not in first]


def _needed() -> list[str]:
    """What the driver must read: the interpreters, this tree, every import root."""
    paths = {sys.prefix, sys.base_prefix, os.path.realpath(sys.executable), *_import_path()}
    return sorted(paths)


def _blocked() -> list[str]:
    """Directories on the way to `_needed()` that uid 65534 may not enter, outermost first."""
    blocked: set[str] = set()
    for path in _needed():
        for directory in [*reversed(Path(path).parents), Path(path)]:
            info = directory.stat()
            if (
                stat.S_ISDIR(info.st_mode)
                and not info.st_mode & stat.S_IXOTH
                and info.st_uid != NOBODY
            ):
                blocked.add(str(directory))
    return sorted(blocked, key=lambda p: (p.count("/"), p))


def _area() -> str:
    """Where the drivers' homes go: an existing directory above nothing the driver needs."""
    needed = _needed()
    for area in ("/home", "/mnt", "/srv", "/opt"):
        if os.path.isdir(area) and not any(p == area or p.startswith(area + "/") for p in needed):
            return area
    pytest.skip("no directory (/home, /mnt, /srv, /opt) to lay the drivers' homes over")


def _launcher(parent: str, area: str, boot: str | None = None) -> str:
    """sh: plant the home, open the blocked directories, become the parent, start the driver
    (or the Python program `boot`)."""
    q = shlex.quote
    lines = [
        "set -e", f"mount -t tmpfs -o mode=0755 trinity-hostile {q(area)}",
        f'mkdir -m 0755 {q(area)}/hostile && printf %s "$1" > {q(area)}/hostile/secret',
        (
            f"chmod 0644 {q(area)}/hostile/secret && "
            f"mkdir -m 0777 {q(area)}/hostile/w {q(area)}/elsewhere"
        ),
        f"chmod 0777 {q(area)}/hostile/w {q(area)}/elsewhere && mkdir -m 0700 {q(area)}/.hold",
    ]
    if parent == "nobody":
        lines.append(f"chown -R {NOBODY}:{NOBODY} {q(area)}/hostile")
    for number, directory in enumerate(_blocked()):
        hold = f"{area}/.hold/{number}"
        lines += [
            f"mkdir {q(hold)} && mount --bind {q(directory)} {q(hold)}",
            f"mount -t tmpfs -o mode=0755 trinity-open {q(directory)}",
        ]
        for entry in sorted(os.listdir(directory)):
            source, target = os.path.join(hold, entry), os.path.join(directory, entry)
            if os.path.islink(target):
                lines.append(f"ln -s {q(os.readlink(target))} {q(target)}")
            elif os.path.isdir(target):
                lines.append(f"mkdir {q(target)} && mount --rbind {q(source)} {q(target)}")
            elif os.path.isfile(target):
                lines.append(f": > {q(target)} && mount --bind {q(source)} {q(target)}")
    become = (
        f"setpriv --reuid {NOBODY} --regid {NOBODY} --clear-groups -- "
        if parent == "nobody"
        else ""
    )
    boot = f"import sys; sys.path[:0] = {_import_path()!r}; " + (
        boot or "import test_sandbox_nonroot as t; t.drive()"
    )
    lines.append(
        f'exec {become}env -i HOME={q(area)}/hostile PATH=/usr/bin:/bin TRINITY_HOSTILE_KEY="$2" '
        f'{q(sys.executable)} -I -c {q(boot)} "--hostile-marker=$3"'
    )
    return "\n".join(lines)


# --- the tests ------------------------------------------------------------------------------

PARENTS = ("root", "nobody")
MODES_TRIED = ("bwrap", "namespaces", "uid-drop", "rlimits")


@pytest.fixture(scope="module")
def plants():
    """World-readable secrets and world-writable directories where only a jail protects them."""
    if os.geteuid() != 0:
        pytest.skip(
            "the drivers are set up by root (CI runs as root); as a user, run `trinity "
            "doctor` and tests/test_sandbox.py, which attack the mode in use as you"
        )
    for tool in ("unshare", "setpriv", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"no `{tool}` command (util-linux)")
    made = [
        Path(tempfile.mkdtemp(prefix="trinity-hostile-", dir=d))
        for d in ("/tmp", "/var/tmp", "/dev/shm")
    ]
    try:
        for directory in made:
            directory.chmod(0o777)
        secrets = {
            name: f"trinity-{name}-{uuid.uuid4().hex}" for name in ("home", "tmp", "key", "marker")
        }
        (made[0] / "secret").write_text(secrets["tmp"])
        (made[0] / "secret").chmod(0o644)
        (made[0] / "w").mkdir(mode=0o777)
        (made[0] / "w").chmod(0o777)
        yield {
            "secrets": secrets, "tmp_plant": str(made[0]), "area": _area(),
            "writable": [str(made[0] / "w"), str(made[1]), str(made[2])], "runs": {},
        }
    finally:
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)


def outcomes(plants: dict, parent: str, mode: str) -> dict:
    """{attack: [escaped, evidence]} of one driver, run once per module."""
    if (parent, mode) not in plants["runs"]:
        area, secrets = plants["area"], plants["secrets"]
        attacks = [a for a in ATTACKS if mode in MODES_TRIED or CONTROL[a] == mode]
        setup = {
            "mode": mode, "attacks": attacks, "tmp_plant": plants["tmp_plant"],
            "home_secret": secrets["home"], "tmp_secret": secrets["tmp"],
            "targets": [
                f"{d}/escaped-{mode}"
                for d in [f"{area}/hostile/w", f"{area}/elsewhere", *plants["writable"]]
            ],
        }
        done = subprocess.run(
            [
                "unshare", "--mount", "--", "sh", "-c", _launcher(parent, area), "sh",
                secrets["home"], secrets["key"], secrets["marker"],
            ],
            input=json.dumps(setup), capture_output=True, text=True, timeout=300, check=False,
        )
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            pytest.fail(f"the {parent} driver ({mode}) failed: {done.stderr[-3000:]}")
        plants["runs"][parent, mode] = json.loads(lines[-1])
    result = plants["runs"][parent, mode]
    if "unavailable" in result:
        pytest.skip(
            f"mode {mode!r} does not work here for a {parent} parent: {result['unavailable']}"
        )
    return result


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("mode", MODES_TRIED)
@pytest.mark.parametrize("parent", PARENTS)
def test_the_attack_is_contained(plants, parent, mode, attack):
    if attack not in HOLDS[mode]:
        pytest.skip(f"{mode!r} does not claim to stop {attack} (see `trinity doctor`)")
    if mode == "uid-drop" and parent == "nobody":
        pytest.skip("uid-drop is a root-only mode")
    found = outcomes(plants, parent, mode)
    if attack == "outlive" and mode == "uid-drop" and not found["own_uids"]:
        pytest.skip("uid-drop ends what leaves the group only where each candidate has its own uid")
    if attack == "fork_bomb" and not found["counts_processes"]:
        pytest.skip(
            f"{mode!r} has no process-count limit for a {parent} parent here (see `trinity doctor`)"
        )
    escaped, evidence = found[attack]
    assert not escaped, evidence


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("parent", PARENTS)
def test_the_attack_escapes_with_the_isolation_off(plants, parent, attack):
    """The same program, judged the same way, does escape without the isolation: the check
    above can see an escape."""
    if attack == "fill_jail" and parent == "root":
        pytest.skip(
            "as root the jail's root and /dev belong to root, not to the candidate (uid 65534)"
        )
    if attack == "ptrace_parent" and _yama() > 0:
        pytest.skip(
            f"Yama ptrace_scope={_yama()} forbids a child to trace its parent "
            "even with the isolation off"
        )
    escaped, evidence = outcomes(plants, parent, CONTROL[attack])[attack]
    assert escaped, evidence


def _yama() -> int:
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text())
    except (OSError, ValueError):
        return 0


def test_paths_a_user_may_not_enter_are_one_line_errors_not_bugs(plants):
    """As uid 65534, files in a folder only root may enter (0700): the problem, the pool, the
    head and train's --out each give one line and exit 2, not "internal error" (exit 1); train
    says so before any work. A TRINITY_HOME there: `logs` says why it cannot read the run log,
    exit 3, without the advice for a damaged log."""
    area = plants["area"]
    closed = f"{area}/.hold"  # made 0700 by root in the launcher
    commands = {
        "solve": ["solve", f"{closed}/problem.md"],
        "pool": ["pool", "--pool", f"{closed}/pool.toml"],
        "weights": ["solve", "--weights", f"{closed}/h.npz", "-"],
        "train": ["train", "--folds", "0", "--out", f"{closed}/h.npz"],
        "train, a folder it cannot make": ["train", "--folds", "0", "--out", f"{closed}-new/h.npz"],
        "logs": ["logs"],
    }
    for name, argv in commands.items():
        cli = (
            f"import os; os.environ['TRINITY_HOME'] = {closed + '/home'!r}; " * (name == "logs")
            + f"sys.argv = {['trinity', *argv]!r}; from trinity_cli.cli import main; main()"
        )
        done = subprocess.run(
            [
                "unshare", "--mount", "--", "sh", "-c",
                _launcher("nobody", area, cli), "sh", "home", "key", "marker",
            ],
            input="def f(): pass", capture_output=True, text=True, timeout=120, check=False,
        )
        lines = done.stderr.strip().splitlines()
        exit_code = 3 if name == "logs" else 2
        assert done.returncode == exit_code and len(lines) == 1, (name, done.returncode, lines)
        assert lines[0].startswith("error: ") and closed in lines[0], (name, lines)
        why = "does not exist and cannot be made in" if name.endswith("make") else (
            "Permission denied" if name != "train" else "cannot write in"
        )
        assert why in lines[0], (name, lines)
        assert "move it aside" not in lines[0], lines

"""The sandbox's first process: sets up the jail, drops every privilege, then execs the
candidate's interpreter.

Run by `sandbox.py` as `python -I sandbox_init.py CONFIG_JSON`, standard library only, with
the files to run on stdin as JSON ({name: text}; `candidate.py` is the program; the file the
config names `stdin`, if any, becomes the program's stdin and leaves the work dir). Modes:

- "bwrap": bubblewrap has built the jail (a fresh root with read-only system directories,
  a private /tmp); this writes the work dir in it and drops privileges.
- "namespaces": pid 1 of fresh PID, mount, network, IPC and UTS namespaces made by `unshare`
  (and a user namespace when trinity is not root). It makes every mount read-only, lays tmpfs
  over /tmp, home and the other writable directories, then, when not root, moves into a nested
  user namespace as uid 65534: the mounts made above become locked there (umount fails), and
  the candidate holds no capability over the namespaces that own them.
- "uid-drop" / "rlimits": no jail; privileges and limits only.

In every mode the candidate starts with no capabilities (permitted, effective, inheritable,
ambient and, where this process may, the bounding set all empty) and no_new_privs set, so no
setuid or file-capability binary can give any back. Any set-up failure exits with
SETUP_FAILED and one line on stderr, which the host's probe reads as "this mode does not work
here".
"""

import ctypes
import json
import os
import resource
import sys

SETUP_FAILED = 125
NOBODY = 65534
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 4, 38, 24
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
# 442: all arches but alpha
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = (
    442, -100, 0x8000, 1,
)
LINUX_CAPABILITY_VERSION_3 = 0x20080522
IS_LINUX = sys.platform.startswith("linux")

libc = ctypes.CDLL(None, use_errno=True)


def fail(step, detail):
    sys.stderr.write(f"sandbox set-up failed at {step}: {detail}\n")
    sys.stderr.flush()
    os._exit(SETUP_FAILED)


def check(step, rc):
    if rc != 0:
        fail(step, os.strerror(ctypes.get_errno()))


def mount(source, target, fstype, flags, data=None):
    args = [None if v is None else v.encode() for v in (source, target, fstype)]
    check(f"mount {target}", libc.mount(*args, flags, None if data is None else data.encode()))


def set_readonly(path, recursive, readonly=True):
    """mount_setattr(2): (un)set read-only on `path`'s mount, or on every mount below it."""
    attr = (ctypes.c_uint64 * 4)(
        MOUNT_ATTR_RDONLY if readonly else 0, 0 if readonly else MOUNT_ATTR_RDONLY
    )
    flags = AT_RECURSIVE if recursive else 0
    args = (
        ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_long(AT_FDCWD), path.encode(),
        ctypes.c_long(flags),
    )
    check(f"read-only {path}", libc.syscall(*args, attr, ctypes.c_long(ctypes.sizeof(attr))))


def build_jail(cfg):
    """Every mount read-only; a private /tmp (with the work dir and a read-only view of the
    interpreter) and empty tmpfs over home and the other world-writable directories."""
    set_readonly("/", recursive=True)
    set_readonly("/proc", recursive=False, readonly=False)  # our own PID namespace's proc
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=0755")
    os.mkdir("/tmp/.python")
    mount(cfg["prefix"], "/tmp/.python", None, MS_BIND | MS_REC)
    mount(None, "/tmp/.python", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for hidden in cfg["hide"]:
        if os.path.isdir(hidden) and not hidden.startswith("/tmp"):
            mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    return "/tmp/.python/" + cfg["python_rel"] if cfg["python_rel"] else cfg["python"]


def enter_nested_userns():
    """A user namespace inside the one `unshare` made, where we are uid 65534 (our uid
    outside). Its new mount namespace copies ours with every mount locked: no umount can
    reveal what the jail covers, and after exec the candidate holds no capability at all."""
    check("unshare a nested user namespace", libc.unshare(CLONE_NEWUSER | CLONE_NEWNS))
    for name, text in (
        ("setgroups", "deny"), ("uid_map", f"{NOBODY} 0 1"), ("gid_map", f"{NOBODY} 0 1"),
    ):
        try:
            with open(f"/proc/self/{name}", "w") as handle:
                handle.write(text)
        except OSError as exc:
            fail(f"writing /proc/self/{name}", exc)


def drop_uid(work, uid):
    for entry in os.listdir(work):
        os.chown(os.path.join(work, entry), uid, uid)
    os.chown(work, uid, uid)  # last: root may lack CAP_DAC_OVERRIDE (bwrap dropped it)
    try:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    except OSError as exc:
        fail(f"dropping to uid {uid}", exc)


def drop_bounding_set(strict):
    """Empty the bounding set, so that no exec can ever gain a capability back (root's exec
    included). Needs CAP_SETPCAP: without it (rlimits mode as a user, whose permitted set is
    empty anyway) the set stays, and no_new_privs keeps setuid binaries from using it."""
    bounding = capabilities()[1]
    for cap in range(bounding.bit_length()):
        if bounding >> cap & 1 and libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and strict:
            fail("dropping the capability bounding set", os.strerror(ctypes.get_errno()))


def clear_capabilities():
    """Empty the permitted, effective, inheritable and ambient sets (capset(2) version 3)."""
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two {effective, permitted, inheritable} words, all zero
    check("capset", libc.capset(header, data))
    check(
        "clearing ambient capabilities",
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0),
    )


def capabilities():
    """This process's permitted and bounding sets, from /proc/self/status."""
    with open("/proc/self/status") as handle:
        status = dict(line.split(":\t", 1) for line in handle.read().splitlines() if ":\t" in line)
    return int(status["CapPrm"], 16), int(status["CapBnd"], 16)


def drop_privileges(cfg, work):
    """Root's candidates to their uid (`drop_uid`: sandbox.py's candidate_uid), then no
    capability in any set, then no_new_privs."""
    if not IS_LINUX:
        return  # macOS: rlimits mode as the user (root has no uid to drop to there either)
    if cfg["nest_user"]:
        enter_nested_userns()
    privileged = cfg["mode"] != "rlimits" or os.geteuid() == 0  # holds CAP_SETPCAP until dropped
    drop_bounding_set(strict=privileged)
    if cfg["drop_uid"] is not None:
        drop_uid(work, cfg["drop_uid"])
    clear_capabilities()
    check("no_new_privs", libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
    permitted, bounding = capabilities()
    if permitted or (bounding and privileged):
        fail(
            "dropping capabilities", f"still held: permitted {permitted:#x}, bounding {bounding:#x}"
        )


def set_limits(limits, strict):
    """Every limit, or (rlimits mode, strict False) every limit the platform accepts: macOS
    refuses an address-space limit, and `sandbox.py` reports that as not isolated."""
    pairs = {
        resource.RLIMIT_CPU: (limits["cpu_s"], limits["cpu_s"] + 1),
        resource.RLIMIT_AS: (limits["memory_bytes"],) * 2,
        resource.RLIMIT_FSIZE: (limits["file_bytes"],) * 2,
        resource.RLIMIT_NOFILE: (limits["open_files"],) * 2, resource.RLIMIT_CORE: (0, 0),
    }
    if limits.get("processes"):
        pairs[resource.RLIMIT_NPROC] = (limits["processes"],) * 2
    for which, value in pairs.items():
        try:
            resource.setrlimit(which, value)
        except (ValueError, OSError) as exc:
            if strict:
                fail(f"setrlimit {which}", exc)


def stay_as_pid_1():
    """In a jail this process is the PID namespace's init, armed to die with trinity (the
    parent-death signal of `unshare --kill-child` / `bwrap --die-with-parent`). It stays so,
    non-dumpable, and a child becomes the candidate: a uid change would disarm that signal,
    the candidate cannot ptrace its parent, and when this exits the kernel kills every
    process left in the namespace. Returns in the child only."""
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    child = os.fork()
    if child == 0:
        return
    while True:  # reap every orphan until the candidate itself is done
        pid, status = os.wait()
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def write_files(work, files):
    for name, text in files.items():
        if os.path.basename(name) != name or name.startswith("."):
            fail("writing files", f"bad file name {name!r}")
        with open(os.path.join(work, name), "w", encoding="utf-8", errors="replace") as handle:
            handle.write(text)


def open_stdin(work, name):
    """The program's stdin: /dev/null, or the given input file (unlinked, so that the work dir
    holds only the program: the input reaches it on stdin alone)."""
    path = os.devnull if name is None else os.path.join(work, name)
    fd = os.open(path, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    if name is not None:
        os.unlink(path)


def main():
    cfg = json.loads(sys.argv[1])
    files = json.loads(sys.stdin.buffer.read())
    python, work = cfg["python"], cfg["work"]
    if cfg["mode"] == "namespaces":
        python, work = build_jail(cfg), "/tmp/work"
    jailed = cfg["mode"] in ("namespaces", "bwrap")
    if jailed:
        os.mkdir(work, 0o700)
    write_files(work, files)
    open_stdin(work, cfg["stdin"])
    if jailed:
        stay_as_pid_1()
    drop_privileges(cfg, work)
    os.chdir(work)
    set_limits(cfg["limits"], strict=cfg["mode"] != "rlimits")
    env = {
        "PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
    }
    if cfg["mode"] == "namespaces":
        env["LD_LIBRARY_PATH"] = "/tmp/.python/lib"  # the interpreter's RUNPATH may be hidden
    try:
        os.execve(python, [python, "-I", "candidate.py"], env)
    except OSError as exc:
        fail(f"exec {python}", exc)


main()

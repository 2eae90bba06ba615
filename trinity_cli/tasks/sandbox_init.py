"""The sandbox's first process: sets up the jail, then execs the candidate's interpreter.

Run by `sandbox.py` as `python -I sandbox_init.py CONFIG_JSON`, standard library only, with
the files to run on stdin as JSON ({name: text}; `candidate.py` is the program). In "namespaces" mode it is pid 1 of fresh PID, mount and
network namespaces (and a user namespace when trinity is not root), so the mounts below are
private to it. Any set-up failure exits with SETUP_FAILED and one line on stderr, which the
host's probe reads as "this mode does not work here".
"""

import ctypes
import json
import os
import resource
import sys

SETUP_FAILED = 125
NOBODY = 65534
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 32, 4096, 16384
PR_SET_NO_NEW_PRIVS = 38

libc = ctypes.CDLL(None, use_errno=True)


def fail(step, detail):
    sys.stderr.write(f"sandbox set-up failed at {step}: {detail}\n")
    sys.stderr.flush()
    os._exit(SETUP_FAILED)


def mount(source, target, fstype, flags, data=None):
    args = [None if v is None else v.encode() for v in (source, target, fstype)]
    if libc.mount(args[0], args[1], args[2], flags, None if data is None else data.encode()) != 0:
        fail(f"mount {target}", os.strerror(ctypes.get_errno()))


def build_jail(cfg):
    """Private /tmp (with the work dir and a read-only view of the interpreter) and empty
    tmpfs over every other world-writable directory and the home directory."""
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=0755")
    os.mkdir("/tmp/.python")
    mount(cfg["prefix"], "/tmp/.python", None, MS_BIND | MS_REC)
    mount(None, "/tmp/.python", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for hidden in cfg["hide"]:
        if os.path.isdir(hidden) and not hidden.startswith("/tmp"):
            mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    work = "/tmp/work"
    os.mkdir(work, 0o700)
    return work, "/tmp/.python/" + cfg["python_rel"] if cfg["python_rel"] else cfg["python"]


def drop_privileges(work):
    os.chown(work, NOBODY, NOBODY)
    for entry in os.listdir(work):
        os.chown(os.path.join(work, entry), NOBODY, NOBODY)
    try:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    except OSError as exc:
        fail("dropping to uid 65534", exc)


def set_limits(limits, strict):
    """Every limit, or (rlimits mode, strict False) every limit the platform accepts: macOS
    refuses an address-space limit, and `sandbox.py` reports that as not isolated."""
    pairs = {
        resource.RLIMIT_CPU: (limits["cpu_s"], limits["cpu_s"] + 1),
        resource.RLIMIT_AS: (limits["memory_bytes"],) * 2,
        resource.RLIMIT_FSIZE: (limits["file_bytes"],) * 2,
        resource.RLIMIT_NOFILE: (limits["open_files"],) * 2,
        resource.RLIMIT_CORE: (0, 0),
    }
    if limits.get("processes"):
        pairs[resource.RLIMIT_NPROC] = (limits["processes"],) * 2
    for which, value in pairs.items():
        try:
            resource.setrlimit(which, value)
        except (ValueError, OSError) as exc:
            if strict:
                fail(f"setrlimit {which}", exc)


def main():
    cfg = json.loads(sys.argv[1])
    files = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if cfg["mode"] == "namespaces":
        work, python = build_jail(cfg)
    else:
        work, python = cfg["work"], cfg["python"]
    for name, text in files.items():
        if os.path.basename(name) != name or name.startswith("."):
            fail("writing files", f"bad file name {name!r}")
        with open(os.path.join(work, name), "w", encoding="utf-8", errors="replace") as handle:
            handle.write(text)
    if hasattr(libc, "prctl") and libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        fail("no_new_privs", os.strerror(ctypes.get_errno()))
    if cfg["drop_uid"]:
        drop_privileges(work)
    os.chdir(work)
    set_limits(cfg["limits"], strict=cfg["mode"] != "rlimits")
    env = {"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    if cfg["mode"] == "namespaces":
        env["LD_LIBRARY_PATH"] = "/tmp/.python/lib"  # the interpreter's RUNPATH may be hidden
    try:
        os.execve(python, [python, "-I", "candidate.py"], env)
    except OSError as exc:
        fail(f"exec {python}", exc)


main()

"""Shared fixtures: every trinity directory in a temp dir, the real GGUF, a real llama.cpp
server."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from support.states import RECORD_ENV, PrecomputedStates, seed_state_cache

_HOME = Path(tempfile.mkdtemp(prefix="trinity-tests-"))
os.environ["TRINITY_HOME"] = str(_HOME / "home")
os.environ["XDG_CONFIG_HOME"] = str(_HOME / "xdg-config")
os.environ["XDG_CACHE_HOME"] = str(_HOME / "xdg-cache")
for variable in ("TRINITY_POOL", "TRINITY_WEIGHTS"):
    os.environ.pop(variable, None)
for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
    os.environ.pop(key, None)
# support/states.py: read once, for the memo and for the commands' state cache
_STATES = PrecomputedStates(
    record=Path(os.environ[RECORD_ENV]) if os.environ.get(RECORD_ENV) else None
)
seed_state_cache(_HOME / "home" / "cache", _STATES)


def _one_core_per_worker() -> None:
    """Under pytest-xdist (`-n auto` in pyproject.toml: one worker a core), each worker and what it
    starts keeps to a core of its own: llama.cpp's threads spin while they wait, and two
    processes' threads sharing cores slow each other many times over."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ...
    if worker.startswith("gw") and hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[int(worker[2:]) % len(cores)]})


_one_core_per_worker()

# Modules whose runs read the same coordinator states go to one worker, one after the other,
# where the session's memo encodes each state once; every other module is a unit of its own.
SHARED_STATES = {
    "tests/test_learning_records.py": "learnable", "tests/test_universal.py": "learnable",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    class SharedStates(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return SHARED_STATES.get(module, module)

    return SharedStates(config, log)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def gguf_path() -> Path:
    from trinity_cli.llama.gguf import embedded_model_path

    return embedded_model_path()


@pytest.fixture(scope="session")
def coordinator(gguf_path: Path):
    from trinity_cli.coordinator.llama import LlamaCoordinator

    return LlamaCoordinator(gguf_path, n_ctx=4096)


@pytest.fixture(scope="session")
def memo(coordinator, gguf_path: Path):
    """One hidden-state memo for the learning tests: each task's state is encoded once per run,
    and those in tests/data/states.npz not at all (support/states.py)."""
    from trinity_cli.coordinator.memo import MemoCoordinator
    from trinity_cli.llama.gguf import gguf_sha256

    return MemoCoordinator(coordinator, gguf_sha256(gguf_path), table=_STATES)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def llama_server(gguf_path: Path):
    """A real `python -m llama_cpp.server` on 127.0.0.1 serving the embedded GGUF (through
    support/wire/llama_server.py, which keeps llama.cpp's crashing AMX kernels out)."""
    port = free_port()
    log = open(_HOME / "llama-server.log", "wb")  # noqa: SIM115 - the server writes to it until the session ends
    proc = subprocess.Popen(
        [
            sys.executable, str(Path(__file__).parent / "support" / "wire" / "llama_server.py"),
            "--model", str(gguf_path), "--host", "127.0.0.1", "--port", str(port), "--n_ctx",
            "2048", "--chat_format", "chatml",
        ],
        stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{base}/models", timeout=2).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(
                    "llama_cpp.server did not start: "
                    + (_HOME / "llama-server.log").read_text()[-2000:]
                )
            time.sleep(0.5)
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean current directory, so no ./trinity.toml leaks in."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture()
def home(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh TRINITY_HOME per test (the subprocesses inherit it), so each test has its own log."""
    monkeypatch.setenv("TRINITY_HOME", str(workdir / "home"))
    monkeypatch.delenv("TRINITY_NO_LOG", raising=False)
    return workdir / "home"


@pytest.fixture()
def server():
    """A loopback server speaking a provider's wire format (tests/support/wire), scripted by the
    test."""
    from support.wire.server import WireServer

    wire = WireServer()
    yield wire
    wire.close()

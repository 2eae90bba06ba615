"""The bad-input corpus (`bad_inputs/cases.toml`): every case ends with its documented exit code
and a one-line error naming the problem, never a traceback; and Ctrl-C is exit 130 with the
partial result kept."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

import pytest
from conftest import free_port
from support.cli import TRINITY
from support.wire.server import Scripted, WireServer, openai_stream

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
CASES = tomllib.loads((CORPUS / "cases.toml").read_text())["case"]
SHIPPED = Path(__file__).resolve().parent.parent / "weights"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("bad")
    (tmp / "huge.md").write_text("# big\n" + "x" * 1_000_001)
    (tmp / "truncated.npz").write_bytes((SHIPPED / "default-offline.npz").read_bytes()[:200])
    shutil.copy(SHIPPED / "default-offline.json", tmp / "truncated.json")
    shutil.copy(SHIPPED / "sim-pool.npz", tmp / "mismatched.npz")
    shutil.copy(SHIPPED / "sim-pool.json", tmp / "mismatched.json")
    (tmp / "unreachable.toml").write_text(
        f'[[agents]]\nname="gone"\nprovider="openai"\nmodel="m"\nbase_url="http://127.0.0.1:{free_port()}/v1"\n'
        "timeout_s = 2\nretries = 1\n"
    )
    return tmp


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_bad_input_gets_its_exit_code_and_one_clear_line(case, generated, workdir):
    args = [a.replace("{dir}", str(CORPUS)).replace("{tmp}", str(generated)) for a in case["args"]]
    result = subprocess.run(
        [TRINITY, *args], capture_output=True, check=False, text=True, timeout=300
    )
    assert result.returncode == case["exit"], result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and case["message"] in errors[0], result.stderr
    assert "\n" not in errors[0]
    if case["exit"] == 2:
        assert result.stdout == ""
    if "help" in case:  # a usage error names the --help that explains it, and nothing garbled
        assert errors[0].endswith(f"(see `{case['help']} --help`)") and "('" not in errors[0], (
            errors[0]
        )


def test_ctrl_c_is_exit_130_and_keeps_the_turns_so_far(workdir):
    server = WireServer()
    try:
        server.responses += [
            openai_stream("the plan"),
            Scripted(200, openai_stream("never").body, "text/event-stream", delay_s=60),
        ]
        (workdir / "pool.toml").write_text(
            f'[[agents]]\nname="srv"\nprovider="openai"\nmodel="m"\nbase_url="{server.url}/v1"\ntimeout_s=90\n'
        )
        (workdir / "p.md").write_text("# Add\n\nWrite `add(a, b)`.\n")
        # SIGINT as a terminal delivers it: a suite started in the background (`cmd &`) has SIGINT
        # ignored, which its children inherit (and Python keeps), while a handled signal is reset
        # to its default in a child: handle it here while the child starts
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            proc = subprocess.Popen(
                [TRINITY, "solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--json"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
        finally:
            signal.signal(signal.SIGINT, previous)
        deadline = time.monotonic() + 60
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server.requests) == 2, "the second call never started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        server.close()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Aborted" not in err
    report = json.loads(out)
    assert report["verdict"] == "interrupted" and [t["text"] for t in report["turns"]] == [
        "the plan"
    ]

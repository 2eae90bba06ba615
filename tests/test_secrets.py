"""API keys never leak: not in stdout, stderr, JSON, caches, checkpoints, or error messages,
even when the server echoes the key back in its error reply."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import uuid
from pathlib import Path

from support.cli import TRINITY
from support.wire.server import Scripted, WireServer, openai_stream

from trinity_cli.tasks.taskset import load_humaneval

KEY = "sk-live-" + uuid.uuid4().hex


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TRINITY, *args], capture_output=True, check=False, text=True, env=env, cwd=cwd, timeout=600
    )


def test_no_artifact_of_any_command_contains_the_key(tmp_path):
    server = WireServer()
    home = tmp_path / "home"
    env = {**os.environ, "TRINITY_HOME": str(home), "MY_PROVIDER_KEY": KEY}
    echo = json.dumps(
        {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "auth"}}
    ).encode()
    try:
        (tmp_path / "pool.toml").write_text(
            f'[[agents]]\nname="srv"\nprovider="openai"\nmodel="m"\nbase_url="{server.url}/v1"\n'
            'api_key_env="MY_PROVIDER_KEY"\nprice_in=1.0\nprice_out=1.0\n'
        )
        (tmp_path / "p.md").write_text("# Add\n\nWrite `add(a, b)`.\n")
        tasks = load_humaneval()[:3]
        (tmp_path / "tasks.jsonl").write_text(
            "".join(
                json.dumps(
                    {
                        "task_id": t.task_id, "prompt": t.prompt, "entry_point": t.entry_point,
                        "test": t.test,
                    }
                )
                + "\n"
                for t in tasks
            )
        )
        outputs = []
        server.responses += [Scripted(401, echo)]
        failed = run(
            ["solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--json"], env, tmp_path
        )
        assert failed.returncode == 4 and json.loads(failed.stdout)["verdict"] == "provider_error"
        assert "***" in failed.stdout + failed.stderr  # the echoed key was there, and was redacted
        outputs.append(failed)
        server.responses += [openai_stream("plan") for _ in range(3)]
        outputs.append(
            run(
                ["solve", "p.md", "--pool", "pool.toml", "--weights", "none", "--jsonl"], env,
                tmp_path,
            )
        )
        server.responses += [openai_stream("```python\ndef f():\n    pass\n```") for _ in range(40)]
        trained = run(
            [
                "train", "--tasks", "tasks.jsonl", "--pool", "pool.toml", "--out", "h.npz",
                "--generations", "1", "--popsize", "2", "--batch-size", "2", "--max-turns", "1",
                "--folds", "2",
            ],
            env, tmp_path,
        )
        assert trained.returncode == 0, trained.stderr
        outputs.append(trained)
        outputs.append(run(["pool", "--pool", "pool.toml", "--json"], env, tmp_path))
        outputs.append(run(["doctor", "--pool", "pool.toml", "--json"], env, tmp_path))
    finally:
        server.close()
    # the key was really used
    assert any(
        {k.lower(): v for k, v in r["headers"].items()}.get("authorization") == f"Bearer {KEY}"
        for r in server.requests
    )
    for result in outputs:
        assert KEY not in result.stdout and KEY not in result.stderr
        assert "Traceback" not in result.stderr
    artifacts = [p for p in [*home.rglob("*"), *tmp_path.glob("*")] if p.is_file()]
    assert any(p.name == "responses.sqlite" for p in artifacts) and any(
        p.suffix == ".ckpt" for p in artifacts
    )
    # the run log, the echoed key in its stored error included
    run_log = (
        home / "data" / "runs.sqlite"
    )
    db = sqlite3.connect(run_log)
    assert [r[0] for r in db.execute("SELECT command FROM runs ORDER BY id")] == [
        "solve", "solve", "train",
    ]
    assert "***" in db.execute("SELECT error FROM runs WHERE id = 1").fetchone()[0]
    db.close()
    assert run_log in artifacts
    for path in artifacts:
        assert KEY.encode() not in path.read_bytes(), path


def test_a_key_that_crosses_the_message_cut_leaves_no_prefix(monkeypatch):
    """Provider errors are cut to MESSAGE_CHARS: redaction must come first."""
    from trinity_cli.pool.spec import AgentSpec
    from trinity_cli.providers.errors import MESSAGE_CHARS, classify

    monkeypatch.setenv("MY_PROVIDER_KEY", KEY)
    spec = AgentSpec(name="a", provider="openai", model="m")
    for filler in range(MESSAGE_CHARS - 60, MESSAGE_CHARS):  # the key straddles the cut
        message = classify(RuntimeError("x" * filler + KEY + " was rejected"), spec).message
        assert KEY[:12] not in message and len(message) <= MESSAGE_CHARS

"""Running `trinity` as a user does: the installed console script in a subprocess."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRINITY = shutil.which("trinity") or "trinity"

FAST_POOL = """
[defaults]
provider = "local"
model = "embedded"
mode = "completion"
max_tokens = 12
n_ctx = 2048

[[agents]]
name = "gemma-greedy"
temperature = 0.0

[[agents]]
name = "gemma-t08"
temperature = 0.8
"""

PROBLEM = EXAMPLES / "add.md"
SIM_POOL = EXAMPLES / "sim-pool.toml"


def trinity(*args: str, stdin: str | None = None, cwd: Path | None = None, timeout: int = 300):
    return subprocess.run(
        [TRINITY, *args], input=stdin, capture_output=True, check=False, text=True, timeout=timeout,
        cwd=cwd,
    )


def assert_clean_failure(result, code: int, fragment: str):
    assert result.returncode == code, result.stderr
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1


def every_command() -> list[list[str]]:
    """Each command and subcommand of the app, as argv (read from the app, not listed by hand)."""
    from trinity_cli.cli import app
    from trinity_cli.cli.logs import app as logs_app

    commands = [[c.name] for c in app.registered_commands] + [
        [g.name] for g in app.registered_groups
    ]
    return commands + [["logs", c.name] for c in logs_app.registered_commands]

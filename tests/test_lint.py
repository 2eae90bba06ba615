"""The source tree passes ruff (long lines included) and mypy with the project's settings
(pyproject.toml), at the versions the `test` extra pins, so a finding fails CI instead of
piling up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    result = ruff("check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ruff", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=cwd)


def test_a_planted_long_line_is_caught(tmp_path):
    """The project's settings select E501: a line of 101 characters fails the check above."""
    (tmp_path / "long.py").write_text(f"X = {'1' * 97}\n")
    result = ruff(
        "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), "long.py", cwd=tmp_path
    )
    assert result.returncode == 1 and "E501" in result.stdout, result.stdout + result.stderr


def test_mypy_finds_nothing(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path), "trinity_cli"],
        capture_output=True, text=True, check=False, cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr

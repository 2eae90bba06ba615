"""CLI conventions users expect: shell completion, NO_COLOR, --offline everywhere, a dry run.

Each runs the installed `trinity` as a user (or their shell) does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support.cli import PROBLEM, SIM_POOL, TRINITY, assert_clean_failure, trinity
from support.tasks import write_tasks
from support.wire.server import WireServer

from trinity_cli.tasks.taskset import load_humaneval, select_split

SGR = re.compile(r"\x1b\[[0-9;]*m")  # a colour or style escape
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def in_bash(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`script` run by bash, so that completion detects the shell it runs in (the trailing
    `exit` keeps bash from exec'ing the last command in its own place)."""
    return subprocess.run(
        ["bash", "-c", f"{script}; exit $?"], capture_output=True, check=False, text=True,
        timeout=60, env={**os.environ, "TRINITY": TRINITY, **env},
    )


@needs_bash
def test_show_completion_prints_the_bash_script():
    result = in_bash('"$TRINITY" --show-completion')
    assert result.returncode == 0, result.stderr
    assert (
        "_TRINITY_COMPLETE=complete_bash" in result.stdout
        and "complete -o default -F _trinity_completion trinity" in result.stdout
    )


@needs_bash
def test_install_completion_writes_into_home_and_completes_commands(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    result = in_bash('"$TRINITY" --install-completion', HOME=str(home))
    assert result.returncode == 0, result.stderr
    script = home / ".bash_completions" / "trinity.sh"
    assert f"installed in {script}" in result.stdout
    assert f"source '{script}'" in (home / ".bashrc").read_text()
    # what bash does on `trinity so<TAB>` once the installed script is sourced
    completed = in_bash(
        f"source '{script}'; COMP_WORDS=(trinity so); COMP_CWORD=1; "
        '_trinity_completion "$TRINITY"; printf "%s\\n" "${COMPREPLY[@]}"', HOME=str(home),
    )
    assert completed.stdout.split() == ["solve"], completed.stderr


def solve_stderr(**env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")
    }
    return subprocess.run(
        [
            TRINITY, "solve", str(PROBLEM), "--pool", str(SIM_POOL), "--weights", "none",
            "--max-turns", "1",
        ],
        capture_output=True, check=False, text=True, timeout=120, env={**base, **env},
    )


def test_no_color_wins_over_forced_colour(workdir):
    forced = solve_stderr(FORCE_COLOR="1")
    assert SGR.search(forced.stderr), forced.stderr  # the control: colour does reach a pipe
    plain = solve_stderr(FORCE_COLOR="1", NO_COLOR="1")
    assert "pool:" in plain.stderr and "\x1b" not in plain.stderr
    assert plain.returncode == forced.returncode
    # a terminal: the live line, in plain text
    terminal = solve_stderr(
        TTY_COMPATIBLE="1", NO_COLOR="1"
    )
    assert "turn  1" in terminal.stderr and not SGR.search(terminal.stderr), terminal.stderr


REMOTE_POOL = (
    '[[agents]]\nname = "gpt"\nprovider = "openai"\nmodel = "gpt-4o-mini"\n'
    'api_key_env = "DUMMY_KEY"\n'
)


@pytest.mark.parametrize("command", [["train", "--out", "h.npz"], ["eval", "--weights", "none"]])
def test_offline_train_and_eval_refuse_remote_agents(workdir, command, monkeypatch):
    monkeypatch.setenv("DUMMY_KEY", "sk-dummy")  # a usable key: only --offline can refuse
    (workdir / "remote.toml").write_text(REMOTE_POOL)
    result = trinity(*command, "--pool", "remote.toml", "--offline", timeout=60)
    assert_clean_failure(result, 3, "--offline: agent gpt needs the network")
    assert list(workdir.iterdir()) == [workdir / "remote.toml"]


@pytest.fixture()
def task_file(workdir: Path) -> Path:
    from trinity_cli.tasks.taskset import load_humaneval

    path = write_tasks(workdir / "tasks.jsonl", load_humaneval()[:14])
    return path


def dry_run(*flags: str) -> dict[str, str]:
    result = trinity(
        "train", "--tasks", "tasks.jsonl", "--pool", "pool.toml", "--out", "head.npz", "--dry-run",
        "--batch-size", "4", "--max-turns", "2", *flags, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return dict(line.split(": ", 1) for line in result.stdout.splitlines())


def number(text: str) -> float:
    return float(re.search(r"[\d.]+", text).group())  # type: ignore[union-attr]


def test_train_dry_run_counts_and_bounds_the_run_without_calling_or_writing(workdir, task_file):
    server = WireServer()  # a priced agent whose calls would show up here
    try:
        # the coordinator GGUF does not exist: loading it would fail the run
        (workdir / "pool.toml").write_text(
            '[coordinator]\nmodel = "/no/such.gguf"\n'
            '[[agents]]\nname = "srv"\nprovider = "openai"\nmodel = "m"\n'
            f'base_url = "{server.url}/v1"\nprice_in = 1.0\nprice_out = 2.0\n'
            "max_tokens = 100\nretries = 0\n"
        )
        before = sorted(workdir.iterdir())
        n = len(select_split(load_humaneval()[:14], "train"))
        base = dry_run("--generations", "2", "--popsize", "4", "--folds", "0")
        # best-fixed: one agent's lone answer (two turns hold one answer) on the n tasks, the plan's
        # states and the start head; the search: 2 × 4 candidates × 4 tasks, then the head on all
        assert (
            number(base["search"]) == 2 * 4 * 4 + n
            and number(base["episodes"]) == n + 2 * n + 2 * 4 * 4 + n
        )
        assert number(base["agent calls"]) == n * 1 + 2 * n * 2 + (2 * 4 * 4 + n) * 2
        assert "upper bound" in base["worst case"]
        longer = dry_run("--generations", "4", "--popsize", "4", "--folds", "0")
        assert number(longer["search"]) - n == 2 * (number(base["search"]) - n)
        assert number(longer["agent calls"]) - number(base["agent calls"]) == 2 * 4 * 4 * 2
        # the same batches, twice the candidates
        wider = dry_run(
            "--generations", "2", "--popsize", "8", "--folds", "0"
        )
        assert number(wider["worst case"]) > number(base["worst case"])
        folded = dry_run("--generations", "2", "--popsize", "4", "--folds", "2")
        assert (
            number(folded["episodes"]) > number(base["episodes"])
            and "--folds 2" in folded["episodes"]
        )
        # every call at least its max_tokens of output: a bound below that would not bound
        for plan in (base, longer, wider, folded):
            assert number(plan["worst case"]) >= number(plan["agent calls"]) * 100 * 2.0 / 1e6
        assert server.requests == []
        assert sorted(workdir.iterdir()) == before  # no head, checkpoint or curve
    finally:
        server.close()


def test_train_dry_run_without_prices_says_unknown(workdir, task_file, monkeypatch):
    monkeypatch.setenv("DUMMY_KEY", "sk-dummy")
    (workdir / "pool.toml").write_text(REMOTE_POOL)
    plan = dry_run("--generations", "1")
    assert plan["worst case"].startswith("unknown (no prices in the pool) for gpt")

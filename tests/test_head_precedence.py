"""Which head a run routes with (heads/precedence.py, the rule's one copy): each step shown
winning over the ones after it, `trinity pool` saying which and why, and every place that
states the rule quoting that copy."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.cli import EXAMPLES, SIM_POOL, assert_clean_failure, trinity
from support.tasks import write_tasks

from trinity_cli.errors import ConfigError
from trinity_cli.heads.files import shipped_dir, user_heads_dir
from trinity_cli.heads.precedence import RULE, STEPS
from trinity_cli.pool.spec import load_pool
from trinity_cli.runtime import choose_policy

SHIPPED_SIM = shipped_dir() / "sim-pool.npz"


def copy_head(to: Path, created: str = "2030-01-01T00:00:00+00:00") -> Path:
    """A copy of the shipped sim-pool head (it fits the sim pool), dated `created`."""
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(SHIPPED_SIM, to)
    meta = json.loads(SHIPPED_SIM.with_suffix(".json").read_text())
    to.with_suffix(".json").write_text(json.dumps({**meta, "created": created}))
    return to


@pytest.fixture
def heads(tmp_path, monkeypatch, gguf_path):
    monkeypatch.setenv("TRINITY_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TRINITY_WEIGHTS", raising=False)
    pool_dir = tmp_path / "pools"
    pool_dir.mkdir()
    return pool_dir


def sim_pool(pool_dir: Path, weights: str | None = None):
    text = SIM_POOL.read_text()
    if weights is not None:
        text += f'\n[coordinator]\nweights = "{weights}"\n'
    path = pool_dir / "sim.toml"
    path.write_text(text)
    return load_pool(str(path))


def choose(pool, weights=None):
    warnings = []
    choice = choose_policy(pool, weights, warnings.append)
    return choice, warnings


def test_each_step_wins_over_the_ones_after_it(heads, tmp_path, monkeypatch):
    pool_dir = heads
    pool = sim_pool(pool_dir)
    choice, warnings = choose(pool)  # nothing of the user's: the shipped head that fits
    assert choice.source == str(SHIPPED_SIM) and "shipped head" in choice.reason and not warnings

    newest = copy_head(user_heads_dir() / "b-newer.npz", "2031-01-01T00:00:00+00:00")
    # written last, dated earlier
    copy_head(
        user_heads_dir() / "c-older.npz", "2029-01-01T00:00:00+00:00"
    )
    hidden = copy_head(user_heads_dir() / "d-hidden.npz", "2032-01-01T00:00:00+00:00")
    meta = json.loads(hidden.with_suffix(".json").read_text())
    # only when named
    hidden.with_suffix(".json").write_text(
        json.dumps({**meta, "auto_select": False})
    )
    choice, _ = choose(pool)
    assert choice.source == str(newest) and "user head" in choice.reason
    assert choose(pool, "d-hidden")[0].source == str(hidden)

    in_pool = copy_head(pool_dir / "mine.npz")  # a relative path in the pool file is beside it
    pool = sim_pool(pool_dir, "mine.npz")
    choice, _ = choose(pool)
    assert choice.source == str(in_pool) and "[coordinator] weights" in choice.reason

    from_env = copy_head(tmp_path / "env.npz")
    monkeypatch.setenv("TRINITY_WEIGHTS", str(from_env))
    choice, _ = choose(pool)
    assert choice.source == str(from_env) and choice.reason == "TRINITY_WEIGHTS"

    flag = copy_head(tmp_path / "flag.npz")
    choice, _ = choose(pool, str(flag))
    assert choice.source == str(flag) and choice.reason == "--weights"

    choice, _ = choose(pool, "none")  # none at the first step that speaks: the fallback
    assert choice.source.startswith("fallback") and choice.reason == "--weights = none"
    monkeypatch.setenv("TRINITY_WEIGHTS", "none")
    choice, _ = choose(pool)
    assert choice.source.startswith("fallback") and choice.reason == "TRINITY_WEIGHTS = none"


def test_user_heads_that_do_not_fit_are_passed_over_but_a_named_one_must_fit(heads):
    other = load_pool(None)  # the default pool: the sim head does not fit it
    copy_head(user_heads_dir() / "sim.npz")
    choice, _ = choose(other)
    assert "user head" not in choice.reason and choice.source != str(user_heads_dir() / "sim.npz")
    with pytest.raises(ConfigError, match="do not fit this run"):
        choose(other, str(user_heads_dir() / "sim.npz"))


def test_no_fitting_head_is_the_fallback_with_a_warning_that_says_why(heads):
    pool_dir = heads
    (pool_dir / "two.toml").write_text(
        '[[agents]]\nname = "x"\nprovider = "openai"\nmodel = "m"\n'
        'base_url = "http://127.0.0.1:9/v1"\n'
    )
    choice, warnings = choose(load_pool(str(pool_dir / "two.toml")))
    assert choice.source.startswith("fallback")
    assert "no head fits" in choice.reason and "0 user heads" in choice.reason
    assert len(warnings) == 1 and "fallback pipeline" in warnings[0]


def test_a_head_is_named_by_path_first_then_by_shipped_or_user_name(heads):
    pool_dir = heads
    pool = sim_pool(pool_dir)
    assert choose(pool, "sim-pool")[0].source == str(SHIPPED_SIM)
    mine = copy_head(user_heads_dir() / "my-head.npz")
    assert choose(pool, "my-head")[0].source == str(mine)
    with pytest.raises(ConfigError, match=r"no head of that name \(names: .*my-head.*sim-pool"):
        choose(pool, "nosuch")


def test_train_writes_to_the_user_heads_folder_and_solve_then_uses_that_head(workdir):
    from trinity_cli.tasks.taskset import load_humaneval

    tasks = load_humaneval()[:10]
    write_tasks(workdir / "tasks.jsonl", tasks)
    flags = [
        "--tasks", "tasks.jsonl", "--pool", str(SIM_POOL), "--max-turns", "1", "--generations", "1",
        "--popsize", "2", "--batch-size", "2", "--project", "2", "--folds", "0", "-q",
    ]
    assert trinity("train", *flags).returncode == 0
    first = user_heads_dir() / "sim-pool-tasks.npz"
    assert first.is_file() and not (workdir / "sim-pool-tasks.npz").exists()
    assert trinity("train", *flags).returncode == 0  # never over an earlier head
    second = user_heads_dir() / "sim-pool-tasks-2.npz"
    assert second.is_file()

    report = json.loads(trinity("pool", "--pool", str(SIM_POOL), "--json").stdout)
    # the newest, even when both carry the same second
    assert report["policy"]["source"] == str(
        second
    )
    assert "user head" in report["policy"]["reason"]
    shown = trinity("pool", "--pool", str(SIM_POOL))
    assert "policy: " + str(second) in " ".join(shown.stderr.split())
    (workdir / "p.md").write_text(tasks[0].prompt)
    solved = trinity("solve", "p.md", "--pool", str(SIM_POOL), "--max-turns", "1", "--no-tests")
    # its short name; -v shows the path
    assert f"policy: {second.name} " in " ".join(
        solved.stderr.split()
    )
    solved = trinity(
        "solve", "p.md", "--pool", str(SIM_POOL), "--max-turns", "1", "--no-tests", "-v"
    )
    assert f"policy: {second} " in " ".join(solved.stderr.split())


def test_pool_exits_3_when_the_head_solve_would_use_cannot_be_used(workdir):
    (workdir / "p.toml").write_text(
        SIM_POOL.read_text() + '\n[coordinator]\nweights = "nope.npz"\n'
    )
    result = trinity("pool", "--pool", "p.toml", "--json")
    assert result.returncode == 3
    assert json.loads(result.stdout)["policy"]["reason"].startswith(
        "solve would stop: weights nope.npz: no such file ("
    )
    assert trinity("pool", "--pool", str(SIM_POOL), "--weights", "sim-pool").returncode == 0
    # does not fit
    assert (
        trinity("pool", "--pool", str(SIM_POOL), "--weights", "default-offline").returncode == 3
    )


def test_a_fresh_train_never_overwrites_an_unfinished_checkpoint(workdir):
    """A checkpoint (or what only looks like one: a pickle) is an unfinished run; another file
    at that name is called what it is. Either is kept."""
    import pickle

    flags = ["train", "--pool", str(SIM_POOL), "--out", "h.npz", "--generations", "1"]
    for kept, said in (
        (pickle.dumps({"version": 1}), "h.ckpt holds an unfinished run: --resume continues it"),
        (b"my notes", "h.ckpt is in the way and is no checkpoint train wrote: move it aside"),
    ):
        (workdir / "h.ckpt").write_bytes(kept)
        result = trinity(*flags)
        assert result.returncode == 3 and said in result.stderr, result.stderr
        assert (workdir / "h.ckpt").read_bytes() == kept
    class Planted:  # a pickle that runs code of its choosing when loaded
        def __reduce__(self):
            return os.makedirs, (str(workdir / "planted"),)

    # --resume says which: a damaged checkpoint, another file, or one that would run code
    for kept, said in (
        (pickle.dumps({"version": 1})[:-3], "h.ckpt cannot be read: it is damaged"),
        (b"my notes", "h.ckpt cannot be read: it is no checkpoint train wrote"),
        (pickle.dumps({"version": 1, "x": Planted()}), "h.ckpt is refused: it holds os.makedirs"),
    ):
        (workdir / "h.ckpt").write_bytes(kept)
        assert_clean_failure(trinity(*flags, "--resume"), 3, f"error: --resume: {said}")
        assert (workdir / "h.ckpt").read_bytes() == kept
    assert not (workdir / "planted").exists()


def test_a_fresh_train_replaces_an_earlier_runs_files_only_with_force(workdir, home):
    """A user's files where train would write (the head's sidecar and curve names) are refused
    before any work, and kept; --force replaces them; a file where --out needs a folder is a
    usage error at once."""
    from trinity_cli.tasks.taskset import load_humaneval, select_split

    write_tasks(workdir / "tasks.jsonl", select_split(load_humaneval(), "train")[:2])
    flags = [
        "train", "--tasks", "tasks.jsonl", "--pool", str(SIM_POOL), "--generations", "1",
        "--popsize", "2", "--batch-size", "2", "--max-turns", "1", "--project", "2", "--folds",
        "0", "-q", "--no-log", "--out",
    ]
    mine = {"h.json": "my notes", "h.csv": "my,table"}
    for name, text in mine.items():
        (workdir / name).write_text(text)
    refused = trinity(*flags, "h.npz")
    assert refused.returncode == 3 and refused.stdout == ""
    assert "--out h.npz would replace h.json, h.csv: choose another --out, or pass --force" in (
        refused.stderr
    )
    assert {n: (workdir / n).read_text() for n in mine} == mine and not (workdir / "h.npz").exists()
    forced = trinity(*flags, "h.npz", "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads((workdir / "h.json").read_text())["training"]["n_tasks"] == 2
    (workdir / "h.csv").unlink()
    (workdir / "h.csv").mkdir()  # a folder where train writes a file: not even --force
    folder = trinity(*flags, "h.npz", "--force")
    assert folder.returncode == 3 and "h.csv is a folder, where train writes a file" in (
        folder.stderr
    )
    (workdir / "afile").write_text("not a folder")
    blocked = trinity(*flags, "afile/h.npz")
    assert blocked.returncode == 2 and (
        f"--out afile/h.npz: {workdir / 'afile'} is a file, not a folder" in blocked.stderr
    )


def test_resume_without_a_checkpoint_stops_before_any_work(workdir):
    result = trinity("train", "--pool", str(SIM_POOL), "--out", "h.npz", "--resume")
    assert result.returncode == 3 and "--resume: no checkpoint at h.ckpt" in result.stderr
    assert "cross-validating" not in result.stderr and not (workdir / "h.npz").exists()


def test_the_rule_is_written_once_and_quoted_by_the_help_and_the_readme():
    assert len(STEPS) == 7 and RULE.count(" > ") == 6
    quoted = {
        "solve --help": trinity("solve", "--help").stdout,
        "pool --help": trinity("pool", "--help").stdout,
        "README.md": (EXAMPLES.parent / "README.md").read_text(),
    }
    for where, text in quoted.items():
        # the same words in the same order, however wrapped
        assert RULE in " ".join(text.split()), (
            where
        )

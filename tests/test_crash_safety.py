"""Crash-safe training: `trinity train` killed with SIGKILL or stopped with Ctrl-C at random
moments, resumed each time, never leaves a corrupt checkpoint, loses at most the generation in
flight, and ends with the same head as an uninterrupted run with the same seed and caches."""

from __future__ import annotations

import os
import pickle
import random
import re
import signal
import subprocess
import time

import numpy as np
from support.cli import SIM_POOL, TRINITY
from support.tasks import short_humaneval, write_tasks

GENERATIONS = 30


def test_sigkill_or_ctrl_c_at_random_moments_then_resume_reaches_the_uninterrupted_head(
    workdir, monkeypatch
):
    """The killed runs go first, on cold caches (where a run takes long enough to be killed in
    the middle); the uninterrupted run then uses the caches they filled."""
    monkeypatch.setenv("TRINITY_HOME", str(workdir / "home"))
    tasks = short_humaneval(16)
    write_tasks(workdir / "tasks.jsonl", tasks, "tags")
    flags = [
        "train", "--tasks", "tasks.jsonl", "--pool", str(SIM_POOL), "--max-turns", "2",
        "--generations", str(GENERATIONS), "--popsize", "4", "--batch-size", "4", "--project", "4",
        "--sigma0", "1.0", "--seed", "3", "--folds", "0",
    ]
    rng = random.Random(11)
    checkpoint = workdir / "killed.ckpt"
    kills, resumed, last_generation = 0, 0, 0
    for attempt in range(30):
        resume = ["--resume"] if checkpoint.exists() else []
        # SIGINT as a terminal delivers it, to the whole process group: a suite started in the
        # background has SIGINT ignored, which a child inherits; a handled signal is reset to its
        # default in a child
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            proc = subprocess.Popen(
                [TRINITY, *flags, "--out", "killed.npz", *resume], stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True, start_new_session=True,
            )
        finally:
            signal.signal(signal.SIGINT, previous)
        first = ""
        if attempt == 0:  # the first Ctrl-C: once it says what it writes, before any generation
            first = proc.stderr.readline()
        else:
            time.sleep(rng.uniform(2.0, 6.0))
        if proc.poll() is not None:  # it finished before the kill
            assert proc.returncode == 0, proc.stderr.read()
            break
        stop = signal.SIGKILL if attempt % 2 else signal.SIGINT  # no chance to react, or Ctrl-C
        os.killpg(proc.pid, stop)
        stderr = first + proc.communicate(timeout=120)[1]
        if "wrote killed.npz" in stderr:  # it finished as the signal came (after `poll`)
            break
        if stop == signal.SIGINT:  # it says what it kept and how to go on
            assert proc.returncode == 130, stderr
            assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
            kept = checkpoint.exists()
            assert not (attempt == 0 and kept), stderr  # the first came before any generation
            resume_line = "the same command with --out killed.npz --resume continues it"
            assert (resume_line in stderr) == kept, stderr
            assert ("nothing to resume" in stderr) != kept, stderr
        printed = max(map(int, re.findall(rf"gen (\d+)/{GENERATIONS} ", stderr)), default=0)
        kills, resumed = kills + 1, resumed + bool(resume)
        if checkpoint.exists():
            state = pickle.loads(checkpoint.read_bytes())  # never corrupt: always a whole pickle
            assert state["generation"] >= last_generation and state["generation"] >= printed
            last_generation = state["generation"]
    assert (
        kills >= 3 and resumed >= 1 and last_generation >= 1 and (workdir / "killed.npz").exists()
    ), (kills, resumed, last_generation)
    whole = subprocess.run(
        [TRINITY, *flags, "--out", "whole.npz"], capture_output=True, check=False, text=True,
        timeout=600,
    )
    assert whole.returncode == 0, whole.stderr
    a, b = np.load(workdir / "whole.npz"), np.load(workdir / "killed.npz")
    assert set(a.files) == set(b.files)
    for name in a.files:
        assert np.array_equal(a[name], b[name]), name

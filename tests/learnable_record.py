"""Synthetic record files on which routing is learnable from the coordinator's hidden states.

Documented here because the learning tests assert on it (tests/test_learning_records.py):

- Tasks: the first 60 HumanEval problems and the first 60 MBPP problems: two families whose
  prompts read differently (HumanEval's docstrings carry `>>>` examples, MBPP's say "Write a
  python function to ..."), so the family is something a linear head can read off the state.
- Models, one recorded program per task (no samples, no repairs):
  - `humaneval-expert`: the reference solution on every HumanEval task, a failing program
    (the prompt, then `raise NotImplementedError`) on every MBPP task;
  - `mbpp-expert`: the reverse;
  - `generalist`: the reference solution on a seeded 60 % of the tasks of each family.
- Three more models, for the pool-agnostic head (tests/test_universal.py): the same kinds,
  other members and other draws: `humaneval-expert-b` right on a seeded 90 % of HumanEval
  and 10 % of MBPP, `mbpp-expert-b` the reverse, `generalist-b` on another seeded 60 %.
- Prices: the experts 1/2 $ per million tokens in/out, the generalists 0.5/1.

Every single agent stays near 0.5-0.6; a head that reads the family from the state and picks
its expert approaches 1.0. The permuted-state control (learning.PermutedCoordinator) hands
each task another task's state, so its family guess is right about half the time.

The kinds record (below, `write_kinds`) is one where a hand-built plan is good and reading the
task is better: tests/test_kinds.py.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

from trinity_cli.tasks.taskset import Task, load_tasks

MODELS = ("humaneval-expert", "mbpp-expert", "generalist")
OTHER_MODELS = ("humaneval-expert-b", "mbpp-expert-b", "generalist-b")
GENERALIST_RATE = 0.6


def learnable_tasks() -> list[Task]:
    return load_tasks("humaneval")[:60] + load_tasks("mbpp")[:60]


def family(task: Task) -> str:
    return "humaneval" if task.task_id.startswith("HumanEval/") else "mbpp"


def right(task: Task) -> str:
    return task.prompt + (task.canonical_solution or "")


def wrong(task: Task) -> str:
    return task.prompt.rstrip() + "\n    raise NotImplementedError\n"


def seeded(what: str, task: Task, rate: float) -> bool:
    return hashlib.sha256(f"{what}:{task.task_id}".encode()).digest()[0] < 256 * rate


def program(model: str, task: Task) -> str:
    he = family(task) == "humaneval"
    knows = {"humaneval-expert": he, "mbpp-expert": not he, "generalist": seeded("generalist", task, GENERALIST_RATE),
             "humaneval-expert-b": seeded(model, task, 0.9 if he else 0.1),
             "mbpp-expert-b": seeded(model, task, 0.1 if he else 0.9),
             "generalist-b": seeded(model, task, GENERALIST_RATE)}[model]
    return right(task) if knows else wrong(task)


def write_learnable(folder: Path, models: tuple[str, ...] = MODELS, name: str = "pool.toml") -> tuple[Path, Path]:
    """The record (`learnable.jsonl.gz`, every model) and a pool of `models` replaying it
    (Worker only)."""
    tasks = learnable_tasks()
    lines = [json.dumps({"model": m, "task_id": t.task_id, "code": program(m, t)})
             for m in MODELS + OTHER_MODELS for t in tasks]
    record = folder / "learnable.jsonl.gz"
    record.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    pool = folder / name
    pool.write_text("".join(
        f'[[agents]]\nname = "{m}"\nprovider = "replay"\nrecord = "learnable.jsonl.gz"\nmodel = "{m}"\n'
        f'roles = ["worker"]\nprice_in = {0.5 if "generalist" in m else 1.0}\n'
        f'price_out = {1.0 if "generalist" in m else 2.0}\n\n' for m in models))
    return record, pool


# --- the kinds record: the best plan depends on the task ------------------------------------
#
# Two models, equal prices, on HumanEval and MBPP tasks (the two kinds a linear head can read):
# `leans-humaneval` is right on a seeded 90 % of the HumanEval tasks and 30 % of the MBPP ones,
# `leans-mbpp` the mirror image. A wrong program is caught by the visible tests on a seeded 80 %
# of the tasks (`wrong`: it raises) and slips through on the rest (`sly`: right whenever the
# visible tests call it, wrong under the hidden tests' check()). With three turns, best-fixed
# (one model, the Verifier, the other) reaches 0.9 + 0.1·0.8·0.3 = 0.924 on its first model's
# kind and 0.3 + 0.7·0.8·0.9 = 0.804 on the other: 0.864; routing by kind, 0.924 on both.

KIND_MODELS = ("leans-humaneval", "leans-mbpp")
KIND_TASKS_PER_FAMILY = 150


def kind_tasks() -> list[Task]:
    return load_tasks("humaneval")[:KIND_TASKS_PER_FAMILY] + load_tasks("mbpp")[:KIND_TASKS_PER_FAMILY]


def sly(task: Task) -> str:
    """Right when called from the visible tests (module level), wrong when the hidden tests'
    check() calls it: a wrong program the Verifier accepts."""
    return (f"import sys as _sys\n{right(task).rstrip()}\n\n_right_{task.entry_point} = {task.entry_point}\n\n\n"
            f"def {task.entry_point}(*args, **kwargs):\n"
            f"    if _sys._getframe(1).f_code.co_name == 'check':\n"
            f"        return object()\n"
            f"    return _right_{task.entry_point}(*args, **kwargs)\n")


def kind_program(model: str, task: Task) -> str:
    strong = (model == KIND_MODELS[0]) == (family(task) == "humaneval")
    if seeded(f"{model}:right", task, 0.9 if strong else 0.3):
        return right(task)
    return wrong(task) if seeded(f"{model}:caught", task, 0.8) else sly(task)


def write_kinds(folder: Path) -> Path:
    """The kinds record (`kinds.jsonl.gz`) and its pool (`kinds.toml`: Worker and Verifier)."""
    lines = [json.dumps({"model": m, "task_id": t.task_id, "code": kind_program(m, t)})
             for m in KIND_MODELS for t in kind_tasks()]
    (folder / "kinds.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    pool = folder / "kinds.toml"
    pool.write_text("".join(
        f'[[agents]]\nname = "{m}"\nprovider = "replay"\nrecord = "kinds.jsonl.gz"\nmodel = "{m}"\n'
        f'roles = ["worker", "verifier"]\nprice_in = 1.0\nprice_out = 1.0\n\n' for m in KIND_MODELS))
    return pool

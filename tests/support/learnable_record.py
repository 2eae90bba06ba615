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
its expert approaches 1.0. The permuted-state control (coordinator/permuted.py) hands
each task another task's state, so its family guess is right about half the time.

The kinds record (below, `write_kinds`) is one where a hand-built plan is good and reading the
task is better: tests/test_kinds.py.
"""

from __future__ import annotations

import functools
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
    knows = {
        "humaneval-expert": he, "mbpp-expert": not he,
        "generalist": seeded("generalist", task, GENERALIST_RATE),
        "humaneval-expert-b": seeded(model, task, 0.9 if he else 0.1),
        "mbpp-expert-b": seeded(model, task, 0.1 if he else 0.9),
        "generalist-b": seeded(model, task, GENERALIST_RATE),
    }[model]
    return right(task) if knows else wrong(task)


def write_learnable(
    folder: Path, models: tuple[str, ...] = MODELS, name: str = "pool.toml"
) -> tuple[Path, Path]:
    """The record (`learnable.jsonl.gz`, every model) and a pool of `models` replaying it
    (Worker only)."""
    tasks = learnable_tasks()
    lines = [
        json.dumps({"model": m, "task_id": t.task_id, "code": program(m, t)})
        for m in MODELS + OTHER_MODELS
        for t in tasks
    ]
    record = folder / "learnable.jsonl.gz"
    record.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    pool = folder / name
    pool.write_text(
        "".join(
            f'[[agents]]\nname = "{m}"\nprovider = "replay"\n'
            f'record = "learnable.jsonl.gz"\nmodel = "{m}"\n'
            f'roles = ["worker"]\nprice_in = {0.5 if "generalist" in m else 1.0}\n'
            f"price_out = {1.0 if 'generalist' in m else 2.0}\n\n"
            for m in models
        )
    )
    return record, pool


# --- the kinds record: the best plan depends on the task ------------------------------------
#
# Two kinds of short synthetic task a linear head can tell apart: `doc` tasks read like
# HumanEval (integer functions, type hints, a `>>>` example), `ask` tasks like MBPP (string
# functions, "Write a python function to ..."); short, so that the real coordinator reads
# every state of the search quickly. Two models at equal prices: `leans-doc` is right on
# exactly 90 % of the doc tasks and 20 % of the ask tasks (seeded choices), `leans-ask` the
# mirror image. A wrong program is caught by the visible tests on a seeded half of the tasks
# (`wrong`: it raises)
# and slips through on the rest (`sly`: right whenever the visible tests call it, wrong under
# the hidden tests' check()). With three turns, best-fixed (one model, the Verifier, the
# other) reaches 0.9 + 0.1·0.5·0.2 = 0.91 on its first model's kind and 0.2 + 0.8·0.5·0.9 =
# 0.56 on the other: 0.735; routing by kind, 0.91 on both.

KIND_MODELS = ("leans-doc", "leans-ask")
KINDS = ("doc", "ask")
KIND_RIGHT, KIND_WRONG, KIND_CAUGHT = 0.9, 0.2, 0.5
_DOC_OPS = {
    "add": ("x plus {k}", lambda x, k: x + k), "subtract": ("x minus {k}", lambda x, k: x - k),
    "times": ("x times {k}", lambda x, k: x * k),
    "floor": ("x floor-divided by {k}", lambda x, k: x // k),
    "modulo": ("x modulo {k}", lambda x, k: x % k), "above": ("the larger of x and {k}", max),
}
_DOC_CODE = {
    "add": "x + {k}", "subtract": "x - {k}", "times": "x * {k}", "floor": "x // {k}",
    "modulo": "x % {k}", "above": "max(x, {k})",
}
_ASK_OPS = {
    "repeat": ("the string s repeated {k} times", "s * {k}"),
    "head": ("the first {k} characters of s", "s[:{k}]"),
    "tail": ("s without its first {k} characters", "s[{k}:]"),
    "pad": ("s followed by {k} dashes", "s + '-' * {k}"),
    "rotate": (
        "s rotated left by {k} characters", "s[{k} % len(s):] + s[:{k} % len(s)] if s else s",
    ),
    "fence": ("s between {k} stars on each side", "'*' * {k} + s + '*' * {k}"),
}
_INTS, _STRINGS = (1, 7, -4, 30), ("abc", "trinity", "", "xy")


def _doc_task(op: str, k: int) -> Task:
    name, (text, fn), body = f"{op}_{k}", _DOC_OPS[op], _DOC_CODE[op].format(k=k)
    prompt = (
        f'def {name}(x: int) -> int:\n    """Return {text.format(k=k)}.\n'
        f'    >>> {name}(1)\n    {fn(1, k)}\n    """\n'
    )
    return Task(
        f"kinds/doc/{name}", prompt, name,
        "\ndef check(candidate):\n"
        + "".join(f"    assert candidate({x}) == {fn(x, k)}\n" for x in _INTS),
        f"    return {body}\n", visible_tests=(f"assert {name}(1) == {fn(1, k)}",),
    )


def _ask_task(op: str, k: int) -> Task:
    name, (text, body) = f"{op}_{k}", _ASK_OPS[op]
    body = body.format(k=k)
    prompt = (
        f'def {name}(s) : \n    """\n'
        f'    Write a python function to return {text.format(k=k)}.\n    """\n'
    )
    expected = {s: eval(body, {"s": s}) for s in _STRINGS}  # our own expressions
    return Task(
        f"kinds/ask/{name}", prompt, name,
        "\ndef check(candidate):\n"
        + "".join(f"    assert {name}({s!r}) == {e!r}\n" for s, e in expected.items()),
        f"    return {body}\n",
        visible_tests=(f"assert {name}({_STRINGS[0]!r}) == {expected[_STRINGS[0]]!r}",),
    )


def kind_tasks() -> list[Task]:
    """60 tasks of each kind: six operations, k = 2..11."""
    ks = range(2, 12)
    return [_doc_task(op, k) for op in _DOC_OPS for k in ks] + [
        _ask_task(op, k) for op in _ASK_OPS for k in ks
    ]


def kind_of(task: Task) -> str:
    return task.task_id.split("/")[1]


def sly(task: Task) -> str:
    """Right when called from the visible tests (module level), wrong when the hidden tests'
    check() calls it: a wrong program the Verifier accepts."""
    return (
        f"import sys as _sys\n{right(task).rstrip()}\n\n"
        f"_right_{task.entry_point} = {task.entry_point}\n\n\n"
        f"def {task.entry_point}(*args, **kwargs):\n"
        f"    if _sys._getframe(1).f_code.co_name == 'check':\n"
        f"        return object()\n"
        f"    return _right_{task.entry_point}(*args, **kwargs)\n"
    )


@functools.cache
def _share(what: str, kind: str, rate: float) -> frozenset[str]:
    """Exactly `rate` of the tasks of `kind`, in a seeded order."""
    ids = sorted(
        (t.task_id for t in kind_tasks() if kind_of(t) == kind),
        key=lambda i: hashlib.sha256(f"{what}:{i}".encode()).digest(),
    )
    return frozenset(ids[: round(rate * len(ids))])


def kind_program(model: str, task: Task) -> str:
    kind = kind_of(task)
    if task.task_id in _share(
        f"{model}:right", kind,
        KIND_RIGHT if KIND_MODELS.index(model) == KINDS.index(kind) else KIND_WRONG,
    ):
        return right(task)
    return (
        wrong(task) if task.task_id in _share(f"{model}:caught", kind, KIND_CAUGHT) else sly(task)
    )


def write_kinds(folder: Path) -> Path:
    """The kinds record (`kinds.jsonl.gz`) and its pool (`kinds.toml`: Worker and Verifier)."""
    lines = [
        json.dumps({"model": m, "task_id": t.task_id, "code": kind_program(m, t)})
        for m in KIND_MODELS
        for t in kind_tasks()
    ]
    (folder / "kinds.jsonl.gz").write_bytes(
        gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0)
    )
    pool = folder / "kinds.toml"
    pool.write_text(
        "".join(
            f'[[agents]]\nname = "{m}"\nprovider = "replay"\n'
            f'record = "kinds.jsonl.gz"\nmodel = "{m}"\n'
            f'roles = ["worker", "verifier"]\nprice_in = 1.0\nprice_out = 1.0\n\n'
            for m in KIND_MODELS
        )
    )
    return pool

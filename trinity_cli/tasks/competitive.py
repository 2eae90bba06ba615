"""Task sets of competitive-programming problems: tests as (input, expected output) cases.

Two layouts, told apart line by line by their keys (`case_layout`):

- LiveCodeBench's (its `code_generation_lite` release): `question_id`, `question_content`,
  `starter_code`, `public_test_cases` (a JSON string of [{"input", "output", "testtype"}]),
  `private_test_cases` (the same, or, as LCB ships most, base64 of zlib of a pickled JSON
  string of that list) and `metadata` (a JSON string or object; `func_name` for functional
  tests). `question_title`, `platform`, `contest_id`, `contest_date` and `difficulty` are read
  past.
- trinity's plain layout: `task_id`, `prompt`, `visible_tests` and `tests` (lists of {"input",
  "output"} strings), optional `starter_code`, `func_name` and `tolerance`; no other key.

The tests of a task are all stdin tests (the answer is a whole program, judged by its stdout;
numbers compare within `tolerance`, else the bound the statement states, else exactly) or all
functional (LeetCode-style; `func_name` set): each case's input is the arguments, one JSON
value a line, its output the JSON value the call returns. The grader calls the method
`func_name` of a fresh `Solution()` when the answer defines a class `Solution`, else the
answer's function `func_name`. Public (visible) cases are what a Verifier may run; the grade
runs public and private cases, as LiveCodeBench does.

LCB's pickle is never unpickled as it stands: its opcodes are read first (`pickletools.genops`
parses, it runs nothing), and only the few a pickled `str` is made of are allowed; then an
unpickler that resolves no global reads it. A pickle that names any global (`os.system`) is
refused before anything in it runs.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import pickletools
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trinity_cli.errors import TaskFileError
from trinity_cli.tasks.samples import stated_tolerance

Case = tuple[str, str]  # (input, expected output)
PLAIN_KEYS = (
    "task_id", "prompt", "visible_tests", "tests", "starter_code", "func_name", "tolerance",
)
TESTTYPES = ("stdin", "functional")
MAX_PICKLE_BYTES = 1 << 30  # LCB's private tests, decompressed; more is a zip bomb, not a test set
# all a pickled str needs (protocols 0-5)
_STR_OPCODES = frozenset(
    {
        "PROTO", "FRAME", "STOP", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "PUT",
        "BINPUT", "LONG_BINPUT", "MEMOIZE",
    }
)


@dataclass(frozen=True)
class Cases:
    """A task's tests as (input, expected output) pairs."""

    public: tuple[Case, ...]  # shown in the problem: what a Verifier may run
    private: tuple[Case, ...] = ()  # hidden
    tolerance: float | None = (
        None  # stdin tests: the error allowed between numbers (absolute or relative)
    )

    @property
    def all(self) -> tuple[Case, ...]:
        """What the grade runs: public and private, as LiveCodeBench grades."""
        return self.public + self.private


@dataclass(frozen=True)
class CaseTask:
    """One line of either layout, as taskset.py makes it a `Task`."""

    task_id: str
    prompt: str  # the statement
    cases: Cases
    func_name: str = ""  # functional tests: the function they call; "" for a program on stdin
    starter_code: str = ""  # the code an answer completes (LeetCode's `class Solution: ...`)


LineParser = Callable[[dict[str, Any], str], CaseTask]


def case_layout(raw: dict[str, Any]) -> LineParser | None:
    """The parser of the layout a task line is in, by its keys; None: HumanEval's layout."""
    if "question_content" in raw:
        return livecodebench_line
    if "tests" in raw:
        return plain_line
    return None


def livecodebench_line(raw: dict[str, Any], where: str) -> CaseTask:
    """A line of LiveCodeBench's `code_generation_lite` release."""
    task_id, prompt = _text(raw, "question_id", where), _text(raw, "question_content", where)
    starter = raw.get("starter_code", "")
    if not isinstance(starter, str):
        raise TaskFileError(f"{where}: field 'starter_code' must be a string")
    metadata = raw.get("metadata", {})
    if isinstance(metadata, str):
        metadata = _json(metadata, "metadata", where) if metadata.strip() else {}
    func_name = metadata.get("func_name", "") if isinstance(metadata, dict) else None
    if not isinstance(func_name, str):
        raise TaskFileError(
            f"{where}: field 'metadata' must be a JSON object whose 'func_name' is a string"
        )
    public = _lcb_cases(raw.get("public_test_cases"), "public_test_cases", where)
    private_value = raw.get("private_test_cases", [])
    if isinstance(private_value, str) and not private_value.lstrip().startswith("["):
        private_value = _unpickled_json(private_value, where)
    private = _lcb_cases(private_value, "private_test_cases", where)
    types = {testtype for _, _, testtype in public + private}
    if len(types) > 1:
        raise TaskFileError(
            f"{where}: the tests mix stdin and functional test types: "
            "a task's tests are one or the other"
        )
    if types and (types == {"functional"}) != bool(func_name):
        raise TaskFileError(
            f"{where}: functional tests need metadata.func_name, and only they take one "
            f"(tests: {types.pop()}, func_name: {func_name or 'none'})"
        )
    return _case_task(
        task_id, prompt,
        {
            "public_test_cases": [(i, o) for i, o, _ in public],
            "private_test_cases": [(i, o) for i, o, _ in private],
        },
        func_name, starter, None, where,
    )


def plain_line(raw: dict[str, Any], where: str) -> CaseTask:
    """A line of trinity's plain layout."""
    unknown = sorted(set(raw) - set(PLAIN_KEYS))
    if unknown:
        raise TaskFileError(
            f"{where}: unknown key {unknown[0]!r} "
            f'(a task with "tests" takes {", ".join(PLAIN_KEYS)})'
        )
    task_id, prompt = _text(raw, "task_id", where), _text(raw, "prompt", where)
    cases: dict[str, list[Case]] = {}
    for field in ("visible_tests", "tests"):
        value = raw.get(field)
        if not isinstance(value, list) or not all(
            isinstance(case, dict)
            and set(case) == {"input", "output"}
            and all(isinstance(text, str) for text in case.values())
            for case in value
        ):
            raise TaskFileError(
                f'{where}: field {field!r} must be a list of {{"input": "...", "output": "..."}}'
            )
        cases[field] = [(case["input"], case["output"]) for case in value]
    starter, func_name = raw.get("starter_code", ""), raw.get("func_name", "")
    if not isinstance(starter, str):
        raise TaskFileError(f"{where}: field 'starter_code' must be a string")
    if not isinstance(func_name, str) or ("func_name" in raw and not func_name):
        raise TaskFileError(
            f"{where}: field 'func_name' must be a non-empty string (the function the tests call)"
        )
    tolerance = raw.get("tolerance")
    if tolerance is not None and (
        isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or tolerance < 0
    ):
        raise TaskFileError(f"{where}: field 'tolerance' must be a number >= 0")
    return _case_task(task_id, prompt, cases, func_name, starter, tolerance, where)


def _case_task(
    task_id: str, prompt: str, cases: dict[str, list[Case]], func_name: str, starter: str,
    tolerance: float | None, where: str,
) -> CaseTask:
    """The task from its public and private `cases` (by field name, in that order); functional
    cases are checked to be JSON here, once, rather than failing every grade."""
    if func_name:
        if tolerance is not None:
            raise TaskFileError(
                f"{where}: 'tolerance' applies to stdin tests only; "
                f"this task's tests call {func_name}"
            )
        for field, listed in cases.items():
            for number, (arguments, expected) in enumerate(listed, start=1):
                for text in [line for line in arguments.split("\n") if line.strip()] + [expected]:
                    _json(text, f"{field} test {number} (functional tests hold JSON values)", where)
    else:
        tolerance = stated_tolerance(prompt) if tolerance is None else float(tolerance)
    public, private = cases.values()
    return CaseTask(
        task_id, prompt, Cases(tuple(public), tuple(private), tolerance), func_name, starter
    )


def _text(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        raise TaskFileError(f"{where}: field {key!r} is missing or not a string")
    return value


def _json(text: str, what: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskFileError(f"{where}: {what} is not valid JSON ({exc.msg})") from None


def _lcb_cases(value: Any, field: str, where: str) -> list[tuple[str, str, str]]:
    """(input, output, testtype) of a list of LCB tests, given as the list or its JSON text."""
    if isinstance(value, str):
        value = _json(value, field, where)
    shape = (
        f'a list of {{"input", "output", "testtype"}} strings, testtype {" or ".join(TESTTYPES)}'
    )
    if not isinstance(value, list):
        raise TaskFileError(f"{where}: field {field!r} must be {shape}")
    cases = []
    for number, case in enumerate(value, start=1):
        if not (
            isinstance(case, dict)
            and all(isinstance(case.get(key), str) for key in ("input", "output"))
            and case.get("testtype") in TESTTYPES
        ):
            raise TaskFileError(f"{where}: {field} test {number} is not {shape}")
        cases.append((case["input"], case["output"], case["testtype"]))
    return cases


def _unpickled_json(text: str, where: str) -> str:
    try:
        return unpickle_str(text)
    except ValueError as exc:
        raise TaskFileError(
            f"{where}: private_test_cases is neither a JSON list nor LiveCodeBench's compressed "
            f"pickle of one: {exc}"
        ) from None


class _NoGlobals(pickle.Unpickler):
    """Resolves no global at all: nothing a pickle names can be called."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it names {module}.{name}")


def unpickle_str(text: str) -> str:
    """The string in base64(zlib(pickle(str))), LCB's private tests, read without running
    anything: a pickle holding anything but a string is refused before it is read."""
    try:
        inflate = zlib.decompressobj()
        data = inflate.decompress(base64.b64decode(text, validate=True), MAX_PICKLE_BYTES)
    except (binascii.Error, zlib.error) as exc:
        raise ValueError(f"not base64 of zlib data ({exc})") from None
    if inflate.unconsumed_tail:
        raise ValueError(f"it inflates to more than {MAX_PICKLE_BYTES >> 20} MiB")
    try:
        opcodes = [opcode.name for opcode, _, _ in pickletools.genops(data)]
    except ValueError as exc:
        raise ValueError(f"not a pickle ({exc})") from None
    refused = next((name for name in opcodes if name not in _STR_OPCODES), None)
    if refused is not None:
        raise ValueError(
            f"the pickle holds opcode {refused}, not just a string: refused, nothing in it run "
            "(a pickle can call any function)"
        )
    try:
        return str(_NoGlobals(io.BytesIO(data)).load())  # strings are all those opcodes can make
    except (pickle.UnpicklingError, ValueError, EOFError) as exc:  # say, STOP with nothing pushed
        raise ValueError(f"unreadable pickle ({exc})") from None

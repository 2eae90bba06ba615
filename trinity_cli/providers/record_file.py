"""Record files: real models' recorded answers, read once per file per process and validated.

The format is documented in `trinity_cli/pool/bundled.py` (JSON Lines, gzip allowed). Every line is
checked: a bad one is a ConfigError (exit 3) naming `file:line` and what is wrong, so a user's
record fails before any episode runs, never halfway through a training run. An empty `code` is
not bad: real models sometimes return nothing, and that answer is replayed, and fails.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trinity_cli.errors import ConfigError
from trinity_cli.tasks.taskset import json_objects

PROGRAM_KEYS = ("model", "task_id", "code", "sample", "round", "tokens_in", "tokens_out")
RATE_KEYS = ("model", "task_id", "pass_rate", "correct")


@dataclass(frozen=True)
class Program:
    """One recorded program: `round` 0 is a first answer, round k its k-th own repair."""

    code: str
    round: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None


@dataclass(frozen=True)
class PassRate:
    """A probability-only entry: the share of the model's samples that passed, and some of the
    passing programs (possibly none)."""

    pass_rate: float
    correct: tuple[str, ...]


@dataclass
class Record:
    path: Path
    # (model, task_id) → sample → its rounds, in round order
    programs: dict[tuple[str, str], dict[int, tuple[Program, ...]]] = field(default_factory=dict)
    rates: dict[tuple[str, str], PassRate] = field(default_factory=dict)

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted({model for model, _ in (*self.programs, *self.rates)}))

    def has(self, model: str, task_id: str) -> bool:
        return (model, task_id) in self.programs or (model, task_id) in self.rates

    def task_ids(self, model: str) -> set[str]:
        return {task for m, task in (*self.programs, *self.rates) if m == model}

    def correct_programs(self, task_id: str, model: str) -> tuple[str, ...]:
        """The model's own correct programs for the task, else the other models' (in model
        order), else none."""
        own = self.rates.get((model, task_id))
        if own is not None and own.correct:
            return own.correct
        return tuple(
            c
            for m in self.models
            if m != model
            for c in self.rates.get((m, task_id), PassRate(0, ())).correct
        )

    def longest_reply(self, model: str) -> int:
        """A bound on the tokens one of this model's Worker replies is billed: its longest
        program in UTF-8 bytes (a token is at least a byte), or the largest recorded
        tokens_in + tokens_out (a bound while input tokens cost no more than output ones)."""
        programs = [
            p
            for (m, _), samples in self.programs.items()
            if m == model
            for rounds in samples.values()
            for p in rounds
        ]
        sizes = [len(p.code.encode()) for p in programs] + [
            (p.tokens_in or 0) + (p.tokens_out or 0) for p in programs
        ]
        sizes += [
            len(c.encode()) for (_, task) in self.rates for c in self.correct_programs(task, model)
        ]
        return max(sizes, default=0)


_CACHE: dict[Path, Record] = {}
_LOCK = threading.Lock()


def load_record(path: Path) -> Record:
    """The record at `path`, parsed once per process."""
    key = Path(path).expanduser().resolve()
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = parse_record(key)
        return _CACHE[key]


def parse_record(path: Path) -> Record:
    record = Record(path)
    seen: dict[tuple[str, str, int, int], int] = {}  # (model, task, sample, round) → line
    # (model, task) → ("code" | "rate", first line)
    kinds: dict[
        tuple[str, str], tuple[str, int]
    ] = {}
    rounds: dict[tuple[str, str, int], list[Program]] = {}
    for number, raw in _lines(path):
        where = f"{path}:{number}"
        model, task = raw["model"], raw["task_id"]
        kind = "rate" if "pass_rate" in raw else "code"
        first_kind, first_line = kinds.setdefault((model, task), (kind, number))
        if first_kind != kind:
            raise ConfigError(
                f"{where}: model {model!r} has both programs and a pass rate for task {task} "
                f"(line {first_line}): give one kind per model and task"
            )
        if kind == "rate":
            if first_line != number:
                raise ConfigError(
                    f"{where}: model {model!r} already has a pass rate for task {task} "
                    f"(line {first_line})"
                )
            record.rates[(model, task)] = PassRate(float(raw["pass_rate"]), tuple(raw["correct"]))
            continue
        sample, round_ = raw.get("sample", 0), raw.get("round", 0)
        earlier = seen.setdefault((model, task, sample, round_), number)
        if earlier != number:
            raise ConfigError(
                f"{where}: model {model!r}, task {task}, sample {sample}, round {round_} "
                f"is already given on line {earlier}"
            )
        rounds.setdefault((model, task, sample), []).append(
            Program(raw["code"], round_, raw.get("tokens_in"), raw.get("tokens_out"))
        )
    if not kinds:
        raise ConfigError(
            f"record {path} has no lines: "
            "each line is one recorded program (see the format in the README)"
        )
    for (model, task, sample), programs in rounds.items():
        programs.sort(key=lambda p: p.round)
        if programs[0].round != 0:
            line = seen[(model, task, sample, programs[0].round)]
            raise ConfigError(
                f"{path}:{line}: model {model!r}, task {task}, sample {sample} has no round 0 "
                "(its first answer); rounds k > 0 are repairs of it"
            )
        record.programs.setdefault((model, task), {})[sample] = tuple(programs)
    return record


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, validated object) for each non-blank line."""
    for number, raw in json_objects(path, ConfigError, "record"):
        yield number, _checked(raw, f"{path}:{number}")


def _checked(raw: dict[str, Any], where: str) -> dict[str, Any]:
    allowed = RATE_KEYS if "pass_rate" in raw else PROGRAM_KEYS
    for key in raw:
        if key not in allowed:
            raise ConfigError(
                f"{where}: unknown field {key!r} (a program line has {', '.join(PROGRAM_KEYS)}; "
                f"a pass-rate line has {', '.join(RATE_KEYS)})"
            )
    for key in ("model", "task_id"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise ConfigError(f"{where}: field {key!r} is missing or not a non-empty string")
    # "" is an answer: a model that returned nothing
    if "pass_rate" not in raw and not isinstance(
        raw.get("code"), str
    ):
        raise ConfigError(f"{where}: field 'code' is missing or not a string")
    for key in ("sample", "round", "tokens_in", "tokens_out"):
        if key in raw and (
            isinstance(raw[key], bool) or not isinstance(raw[key], int) or raw[key] < 0
        ):
            raise ConfigError(
                f"{where}: field {key!r} must be an integer, zero or more (got {raw[key]!r})"
            )
    if "pass_rate" in raw:
        rate = raw["pass_rate"]
        if (
            isinstance(rate, bool)
            or not isinstance(rate, (int, float))
            or not math.isfinite(rate)
            or not 0 <= rate <= 1
        ):
            raise ConfigError(
                f"{where}: field 'pass_rate' must be a number from 0 to 1 (got {rate!r})"
            )
        correct = raw.get("correct")
        if not isinstance(correct, list) or not all(
            isinstance(c, str) and c.strip() for c in correct
        ):
            raise ConfigError(
                f"{where}: field 'correct' is missing or not a list of programs "
                "(non-empty strings; [] for none)"
            )
    return raw

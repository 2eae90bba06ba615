"""A RECORDED pool member (`provider = "replay"`): a real model's answers, read back from a
record file (`record`, see bundled.py for the format) instead of calling the model.

No model runs. Pool keys: `record` (a path, relative to the pool file, or a bundled record's
name), `model` (a model in the record), prices, `seed` (varies the draws). Roles: Worker and
Verifier only (the records hold no plans).

- Worker: the model's recorded program for the task, in a ```python fence. With several
  samples a seeded draw picks one; the draw hashes (seed, agent, model, task, request.sample),
  not the transcript, so the agent's later answers in the episode are that sample's repair
  rounds: attempt k (`Request.attempt`: k earlier Worker answers of this agent in the episode)
  replays round k, or the last round recorded. A program holding a Markdown fence (five LDB
  MBPP programs end in a stray one, a syntax error) is shown with it broken up as "`` `",
  which keeps it a syntax error, so the answer extracted is what the model wrote.
- `pass_rate` entries (EvalPerf keeps no failing programs) are SYNTHESIZED: a seeded draw
  per attempt passes with probability `pass_rate` and returns one of the model's correct
  programs (another model's, or the task's reference, where it has none); otherwise it
  returns a failing program derived from a correct one by one operator mutation
  (`sim.mutants`), the first mutant that the grader, run on the task's tests, has seen fail
  (timeouts skipped; kept in memory per task and program). When no mutant fails, the program
  gets a line that raises at import. A task without tests (`has_tests` false) cannot verify a
  mutant: its first mutant is returned unchecked; such tasks are scored by their recorded
  pass rate, not by grading this answer.
- Verifier: runs the task's visible tests (`Task.visible_tests`, a competitive-programming
  task's public cases, else the doctest examples or stdin/stdout samples of its prompt) on
  the latest program in the sandbox and answers ACCEPT or REJECT with a
  one-line reason; with neither, it accepts any program that parses, saying it checked
  nothing. The verdict is a function of the task and the program alone, so with a response
  store it is kept there under a key of exactly those (and the grader's version), never stale.

Cost: tokens as the record gives them, else counted with the coordinator's tokenizer: in, the
request as trinity sends it (system + user message); out, the reply. A Verifier turn is billed
as the model reading the transcript and writing its verdict. Prices come from the pool file;
`usd_estimated` is always true. A replayed reply is never `truncated`: the records keep whole
programs and no stop reason.

Task lookup: train and eval build agents with the task set and `require` that the record
covers every task; `solve` `bind`s the problem text to the recorded task whose prompt it is
(whitespace-normalised; the built-in task sets' prompts), else exit 3.

Worker replies are a pure function of the request and the record, so the response cache does
not wrap this provider (registry): a record that changed on disk can never be answered from a
stale cache. Only the Verifier's verdicts are stored, by content.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from trinity_cli.core.provider import Prices, Reply, Request, RetryHook, TextCallback
from trinity_cli.core.roles import Role, syntax_error
from trinity_cli.core.transcript import Problem
from trinity_cli.errors import ConfigError
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.cache import ResponseStore
from trinity_cli.providers.record_file import load_record
from trinity_cli.providers.sim import mutants
from trinity_cli.tasks.grading import (
    GRADER_VERSION,
    Tests,
    case_tests,
    grade,
    task_prelude,
    task_tests,
    tests_key,
)
from trinity_cli.tasks.sandbox import Limits
from trinity_cli.tasks.taskset import Task

MUTANT_CHECK_S = 3.0  # a mutant that runs longer is skipped: it would slow every later grading
REASON_CHARS = 200
TokenCounter = Callable[[str], int]

# (task, its tests, correct program) → failing variant
_FAILING: dict[
    tuple[str, str, str], str
] = {}
_FAILING_LOCK = threading.Lock()


class ReplayProvider:
    def __init__(
        self, spec: AgentSpec, tasks: Mapping[str, Task], count_tokens: TokenCounter,
        store: ResponseStore | None = None,
    ) -> None:
        self.spec = spec
        self.record = load_record(Path(spec.record or ""))
        if spec.model not in self.record.models:
            raise ConfigError(
                f"agent {spec.name!r}: its record {self.record.path} has no model {spec.model!r} "
                f"(it has: {', '.join(self.record.models)})"
            )
        self.prices = Prices(spec.price_in or 0.0, spec.price_out or 0.0)
        self.tasks = dict(tasks)
        self.count_tokens = count_tokens
        self.store = store  # verdicts, by content
        self.bound: Task | None = None  # solve: the recorded task the problem text is
        self._verdicts: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_tasks(
        cls, spec: AgentSpec, tasks: Mapping[str, Task], coordinator_model: str,
        store: ResponseStore | None,
    ) -> ReplayProvider:
        """How the registry builds it (pool.providers: `from_tasks`): replies counted in the
        coordinator's tokens."""
        return cls(spec, tasks, coordinator_tokens(coordinator_model), store)

    def require(self, tasks: Sequence[Task]) -> None:
        """train / eval: the record must hold this model's answer to every task of the set."""
        missing = [t.task_id for t in tasks if not self.record.has(self.spec.model, t.task_id)]
        if missing:
            raise ConfigError(
                f"agent {self.spec.name!r} replays model {self.spec.model!r} from "
                f"{self.record.path}, which has no answer for task {missing[0]} "
                f"({len(missing)} of the {len(tasks)} tasks missing): "
                "use a task set the record covers"
            )

    def bind(self, problem_text: str) -> Task:
        """solve: the recorded task whose prompt the problem text is, else exit 3."""
        index = recorded_prompts(self.record.task_ids(self.spec.model))
        code = Problem.from_markdown(problem_text).code_prompt
        for text in (problem_text, code):
            task = index.get(normalised(text)) if text.strip() else None
            if task is not None:
                self.bound = self.tasks.setdefault(task.task_id, task)
                return task
        raise ConfigError(
            f"agent {self.spec.name!r} replays recorded answers and answers only a recorded task: "
            f"the problem matches none of the {len(index)} prompts of the tasks its record "
            f"{self.record.path.name} holds for {self.spec.model!r} (whitespace aside)"
        )

    def complete(
        self, request: Request, on_text: TextCallback | None = None,
        on_retry: RetryHook | None = None,
    ) -> Reply:
        task = self._task(request)
        tokens_in = tokens_out = None
        if request.role is Role.WORKER:
            code, tokens_in, tokens_out = self._program(task, request)
            text = f"```python\n{code.replace('```', '`` `').rstrip()}\n```"
        elif request.role is Role.VERIFIER:
            text = self._verdict(task, request.candidate)
        else:
            raise ConfigError(
                f"replay agent {self.spec.name!r} cannot play {request.role.value}: "
                "it replays programs"
            )
        if on_text:
            on_text(text)
        if tokens_in is None:
            tokens_in = self.count_tokens(request.system) + self.count_tokens(request.user)
        if tokens_out is None:
            tokens_out = self.count_tokens(text)
        return Reply(
            text, tokens_in, tokens_out, self.prices.usd(tokens_in, tokens_out), 0.0,
            usd_estimated=True,
        )

    def recorded_grade(self, task_id: str, answer: str) -> tuple[float, bool] | None:
        """For a pass-rate entry: (the recorded pass probability, whether `answer` is one of
        the correct programs this agent draws its passes from). The first is the answer's
        expected pass@1; the second grades a task without tests (a failing draw is a mutant,
        never a correct program). None for recorded programs: the grader grades those."""
        rate = self.record.rates.get((self.spec.model, task_id))
        if rate is None:
            return None
        task = self.tasks.get(task_id)
        correct = self.record.correct_programs(task_id, self.spec.model) or (
            reference(task) if task else ()
        )
        return rate.pass_rate, answer.strip() in {c.strip() for c in correct}

    def _task(self, request: Request) -> Task:
        task = self.tasks.get(request.task_id) if request.task_id else self.bound
        if task is None:
            raise ConfigError(
                f"replay agent {self.spec.name!r} got task {request.task_id or '(none)'!r}, "
                "which it was not built for: build agents with the task set, or bind the problem "
                "(solve)"
            )
        if not self.record.has(self.spec.model, task.task_id):
            self.require([task])
        return task

    def _draw(self, task: Task, request: Request, what: str) -> float:
        key = "\0".join(
            str(part)
            for part in (
                self.spec.seed, self.spec.name, self.spec.model, task.task_id, request.sample, what,
            )
        )
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") / 2**64

    def _program(self, task: Task, request: Request) -> tuple[str, int | None, int | None]:
        """The Worker's program and the record's token counts, if it has them."""
        model = self.spec.model
        samples = self.record.programs.get((model, task.task_id))
        if samples is not None:
            ids = sorted(samples)
            rounds = samples[ids[int(self._draw(task, request, "sample") * len(ids))]]
            program = [p for p in rounds if p.round <= request.attempt][-1]  # round k, or the last
            return program.code, program.tokens_in, program.tokens_out
        rate = self.record.rates[(model, task.task_id)]
        correct = self.record.correct_programs(task.task_id, model) or reference(task)
        passes = self._draw(task, request, f"pass {request.attempt}") < rate.pass_rate and bool(
            correct
        )
        base = (
            correct[int(self._draw(task, request, f"program {request.attempt}") * len(correct))]
            if correct
            else None
        )
        return (base if passes and base else failing_variant(task, base)), None, None

    def _verdict(self, task: Task, candidate: str | None) -> str:
        if not candidate:
            return "There is no program to check.\n<verdict>REJECT</verdict>"
        key = (task.task_id, candidate)
        with self._lock:
            known = self._verdicts.get(key)
        if known is None:
            stored_key = verdict_key(task, candidate)
            stored = None if self.store is None else self.store.get(stored_key)
            known = stored.text if stored is not None else visible_test_verdict(task, candidate)
            if self.store is not None and stored is None:
                self.store.put(stored_key, Reply(known, 0, 0, 0.0, 0.0))
            with self._lock:
                self._verdicts[key] = known
        return known


def verdict_key(task: Task, candidate: str) -> str:
    """What a visible-test verdict depends on: the grader, the task's visible tests and prompt,
    the program."""
    parts: list[object] = [
        "replay-verdict", GRADER_VERSION, task.task_id, task.prompt, list(task.visible_tests),
        candidate,
    ]
    if task.cases is not None:  # its visible tests are its public cases
        parts.append(asdict(case_tests(task, task.cases.public)))
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def reply_token_bound(spec: AgentSpec) -> int:
    """The budget's (and `train --dry-run`'s) bound on a replay reply's billed tokens: the
    record's longest (Record.longest_reply) + the fence, a mutation, the raise line; never
    below the agent's `max_tokens`."""
    return max(
        spec.max_tokens, load_record(Path(spec.record or "")).longest_reply(spec.model) + 128
    )


def visible_test_verdict(task: Task, candidate: str) -> str:
    """ACCEPT when the program passes the task's visible tests (or its prompt's examples)."""
    from trinity_cli.tasks.checks import suite_from_problem

    error = syntax_error(candidate)
    if error is not None:
        return f"The program does not parse ({error}).\n<verdict>REJECT</verdict>"
    if task.cases is not None and task.cases.public:
        tests, count = case_tests(task, task.cases.public), len(task.cases.public)
        what = f"{count} public test"
    elif task.visible_tests:
        tests, what = (
            Tests("file", source="\n".join(task.visible_tests) + "\n"),
            f"{len(task.visible_tests)} visible test",
        )
        count = len(task.visible_tests)
    else:
        suite = suite_from_problem(task.prompt)
        if suite is None:
            return (
                "No visible tests or examples to run; the program parses, accepted unchecked.\n"
                "<verdict>ACCEPT</verdict>"
            )
        tests, what, count = suite.tests, f"{suite.count} example", suite.count
    what += "s" * (count != 1)
    result = grade(candidate, tests, task_prelude(task))
    if result.passed:
        return f"The program passes the task's {what}.\n<verdict>ACCEPT</verdict>"
    lines = [line.strip() for line in result.output.splitlines() if line.strip()]
    why = "timed out" if result.timed_out else (lines[-1] if lines else "no result")
    return f"The program fails the task's {what}: {why[:REASON_CHARS]}\n<verdict>REJECT</verdict>"


def failing_variant(task: Task, program: str | None) -> str:
    """A program that fails the task: the first mutant of `program` the grader saw fail."""
    if program is None:
        return f"{task.prompt.rstrip()}\n    raise NotImplementedError('no recorded program')\n"
    key = (task.task_id, tests_key(task), program)
    with _FAILING_LOCK:
        known = _FAILING.get(key)
    if known is not None:
        return known
    found = None
    for mutant in mutants(program):
        if not task.has_tests:
            found = mutant  # unverifiable: scored by the recorded pass rate instead
            break
        result = grade(mutant, task_tests(task), task_prelude(task), Limits(wall_s=MUTANT_CHECK_S))
        if not result.passed and not result.timed_out:
            found = mutant
            break
    found = found or (
        f"{program.rstrip()}\n\n"
        "raise RuntimeError('replay: no failing mutant of a correct program')\n"
    )
    with _FAILING_LOCK:
        _FAILING[key] = found
    return found


def reference(task: Task) -> tuple[str, ...]:
    return (task.prompt + task.canonical_solution,) if task.canonical_solution else ()


def normalised(text: str) -> str:
    return " ".join(text.split())


@functools.lru_cache(maxsize=8)
def _built_in_prompts() -> tuple[tuple[str, Task], ...]:
    from trinity_cli.tasks.taskset import load_tasks, task_set_names

    return tuple((normalised(t.prompt), t) for name in task_set_names() for t in load_tasks(name))


def recorded_prompts(task_ids: set[str]) -> dict[str, Task]:
    """Normalised prompt → task, over the built-in task sets' tasks the record has."""
    index: dict[str, Task] = {}
    for prompt, task in _built_in_prompts():
        if task.task_id in task_ids:
            index.setdefault(prompt, task)
    return index


@functools.lru_cache(maxsize=4)
def coordinator_tokens(model: str) -> TokenCounter:
    """Token counts by the coordinator's tokenizer (`model`: a GGUF path or "embedded"),
    loaded on first use: the same load the coordinator makes, so it costs nothing in train."""
    from trinity_cli.llama.capi import load_model
    from trinity_cli.llama.gguf import resolve_model

    loaded = functools.cache(lambda: load_model(resolve_model(model)))
    return lambda text: len(loaded().tokenize(text, bos=False)) if text else 0

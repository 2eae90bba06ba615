"""A SIMULATED pool member (`provider = "sim"`), for proving offline that routing is learnable.

Nothing here is a language model. Declared in the pool file per agent: a Worker success
probability per task tag (`skills`, `default_skill`), how much a prior Thinker turn raises it
(`thinker_boost`), the Verifier's accuracy (`verifier_accuracy`), prices and a `seed`.

- Worker: returns the task's canonical solution with probability p, else a realistic wrong one
  (the canonical solution with one mutation). The draw is a hash of (seed, agent, the exact
  request, sample index), so the same call always gets the same reply. Answers are scored by
  really running the task's tests.
- Thinker: a short fixed plan.
- Verifier: says the truth about the latest answer (is it the canonical one?) with probability
  `verifier_accuracy`.
Usage is the byte-count estimate of prompt and reply, priced at the agent's prices. Nothing is
cut: no reply is `truncated`, no prompt clipped.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Mapping
from typing import Any, ClassVar

from trinity_cli.core.provider import Prices, Reply, Request, RetryHook, TextCallback
from trinity_cli.core.roles import Role
from trinity_cli.errors import ConfigError
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.base import estimate_tokens
from trinity_cli.tasks.taskset import Task

THINKER_MARK = ": thinker ("  # how a Thinker turn's heading reads in the agent view


class SimProvider:
    def __init__(self, spec: AgentSpec, tasks: Mapping[str, Task]) -> None:
        self.spec = spec
        self.prices = Prices(spec.price_in or 0.0, spec.price_out or 0.0)
        self.tasks = tasks

    @classmethod
    def for_tasks(
        cls, spec: AgentSpec, tasks: Mapping[str, Task], coordinator_model: str, store: Any
    ) -> SimProvider:
        """How the registry builds it (pool.providers: `from_tasks`)."""
        return cls(spec, tasks)

    def _draw(self, request: Request, what: str) -> float:
        key = (
            f"{self.spec.seed}\0{self.spec.name}\0{what}\0{request.sample}\0"
            f"{request.system}\0{request.user}"
        )
        return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little") / 2**64

    def _task(self, request: Request) -> Task:
        task = self.tasks.get(request.task_id)
        if task is None or not task.canonical_solution:
            raise ConfigError(
                f"sim agent {self.spec.name!r} needs tasks with a canonical_solution "
                f"(got {request.task_id!r})"
            )
        return task

    def skill(self, task: Task, after_thinker: bool) -> float:
        skills = self.spec.skills or {}
        base = max(
            (skills.get(tag, self.spec.default_skill) for tag in task.tags),
            default=self.spec.default_skill,
        )
        return min(1.0, base + (self.spec.thinker_boost if after_thinker else 0.0))

    def complete(
        self, request: Request, on_text: TextCallback | None = None,
        on_retry: RetryHook | None = None,
    ) -> Reply:
        task = self._task(request)
        if request.role is Role.WORKER:
            after_thinker = THINKER_MARK in request.user
            good = self._draw(request, "worker") < self.skill(task, after_thinker)
            text = f"```python\n{right_solution(task) if good else wrong_solution(task)}```"
        elif request.role is Role.THINKER:
            text = (
                f"Plan (simulated by {self.spec.name}): follow the docstring of "
                f"{task.entry_point}; test the edge cases."
            )
        else:
            correct = (
                request.candidate is not None
                and request.candidate.strip() == right_solution(task).strip()
            )
            truthful = self._draw(request, "verifier") < self.spec.verifier_accuracy
            accept = correct if truthful else not correct
            text = f"(simulated review) <verdict>{'ACCEPT' if accept else 'REJECT'}</verdict>"
        if on_text:
            on_text(text)
        tokens_in, tokens_out = (
            estimate_tokens(request.system + request.user), estimate_tokens(text),
        )
        return Reply(text, tokens_in, tokens_out, self.prices.usd(tokens_in, tokens_out), 0.0)


class _Mutate(ast.NodeTransformer):
    """One plausible bug: flip a comparison, or an arithmetic operator: the `site`-th such
    operator in the tree's order (0: the first one)."""

    FLIPS: ClassVar = {
        ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
        ast.NotEq: ast.Eq,
    }
    ARITH: ClassVar = {
        ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.FloorDiv: ast.Mult,
        ast.Mod: ast.FloorDiv,
    }

    def __init__(self, site: int = 0) -> None:
        self.site = site
        self.sites = 0  # operators seen that could be flipped
        self.done = False

    def _here(self) -> bool:
        self.sites += 1
        self.done = self.done or self.sites - 1 == self.site
        return self.sites - 1 == self.site

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        if type(node.ops[0]) in self.FLIPS and self._here():
            node.ops[0] = self.FLIPS[type(node.ops[0])]()
        return self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        if type(node.op) in self.ARITH and self._here():
            node.op = self.ARITH[type(node.op)]()
        return self.generic_visit(node)


def mutants(code: str) -> list[str]:
    """Every one-operator mutant of `code`, in the tree's order (none when it does not parse)."""
    try:
        counter = _Mutate(site=-1)
        counter.visit(ast.parse(code))
        return [
            ast.unparse(_Mutate(site).visit(ast.parse(code))) + "\n"
            for site in range(counter.sites)
        ]
    except (SyntaxError, ValueError, RecursionError):
        return []


def wrong_solution(task: Task) -> str:
    """The canonical solution with one mutation (or returning None if nothing mutates)."""
    try:
        tree = ast.parse(task.prompt + (task.canonical_solution or ""))
        mutator = _Mutate()
        tree = mutator.visit(tree)
        if mutator.done:
            return ast.unparse(tree) + "\n"
    except (SyntaxError, ValueError):
        pass
    return task.prompt + "    return None\n"


def right_solution(task: Task) -> str:
    return task.prompt + (task.canonical_solution or "")

"""Building a run's collaborators from configuration: the pool as a run loads it, the head it
routes with (heads/precedence.py), the caches, the agents and the coordinators (`build_run`).

Shared by `solve`, `train`, `eval` and `profile`, so each command only parses flags and reports.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trinity_cli.core.transcript import CURRENT_FORMAT
from trinity_cli.errors import ConfigError
from trinity_cli.heads.files import (
    UNIVERSAL,
    Backbone,
    check_head_file,
    in_head_format,
    is_universal,
    load_head,
    mismatches,
    newest_fitting,
    read_metadata,
    resolve,
    shipped_dir,
    user_heads_dir,
)
from trinity_cli.pool.providers import kind_of
from trinity_cli.pool.spec import BUILTIN_POOL, EMBEDDED, Pool

WEIGHTS_NONE = "none"


@dataclass(frozen=True)
class LoadedHead:
    policy: Any  # core.head.Policy
    source: str  # the weights file, or a description of the fallback
    meta: dict[str, Any] | None
    transcript_format: str  # how the coordinator must show transcripts to this policy
    reason: str = ""  # why this one: which step of the precedence chose it


def coordinator_path(pool: Pool) -> Path:
    from trinity_cli.llama.gguf import resolve_model

    return resolve_model(pool.coordinator.model)


def backbone_of(pool: Pool, transcript_format: str = CURRENT_FORMAT.id) -> Backbone:
    """The run's coordinator side; new heads get the current transcript format."""
    from trinity_cli.llama.gguf import EMBEDDED_NAME, gguf_sha256

    path = coordinator_path(pool)
    name = EMBEDDED_NAME if pool.coordinator.model == EMBEDDED else path.name
    return Backbone(name, gguf_sha256(path), pool.coordinator.token_position, transcript_format)


FALLBACK = "fallback pipeline (thinker → worker → verifier)"


@dataclass(frozen=True)
class HeadChoice:
    """Which head a run will use and why, decided from metadata alone (no arrays loaded)."""

    path: Path | None  # None: the fallback pipeline
    reason: str  # which step of the precedence chose it
    meta: dict[str, Any] | None = None
    transcript_format: str = CURRENT_FORMAT.id

    def as_json(self) -> dict[str, str]:
        return {"source": FALLBACK if self.path is None else str(self.path), "reason": self.reason}


def find_head(pool: Pool, weights: str | None, warn: Callable[[str], None]) -> HeadChoice:
    """The head a run uses, by the rule of heads/precedence.py (`RULE`). A named head (the
    first three steps) must fit, else exit 3; `none` is the fallback, which otherwise comes with
    a warning that says why.

    A head in any transcript format this version reads fits: the coordinator is then built for
    that format (`HeadChoice.transcript_format`)."""
    named = [
        (weights, "--weights"), (os.environ.get("TRINITY_WEIGHTS") or None, "TRINITY_WEIGHTS"),
        (pool.coordinator.weights, f"[coordinator] weights in {pool.source}"),
    ]
    value, given_by = next(((v, why) for v, why in named if v is not None), (None, ""))
    if value is not None and value.lower() == WEIGHTS_NONE:
        return HeadChoice(None, f"{given_by} = none")
    backbone = backbone_of(pool)
    if value is not None:
        return _fitting(resolve(value), backbone, pool, given_by)
    counts = []
    for directory, kind in ((user_heads_dir(), "user head"), (shipped_dir(), "shipped head")):
        found, looked_at = newest_fitting(directory, backbone, pool)
        if found is not None:
            return _fitting(
                found, backbone, pool, f"the newest {kind} that fits this coordinator and pool"
            )
        counts.append(f"{looked_at} {kind}{'s' * (looked_at != 1)}")
    reason = f"no head fits this coordinator and pool ({', '.join(counts)} looked at)"
    universal = shipped_dir() / f"{UNIVERSAL}.npz"
    if universal.is_file():
        meta = read_metadata(universal)
        # the head reads this coordinator
        if not mismatches(
            meta, in_head_format(meta, backbone), pool
        ):
            missing = unprofiled(pool, meta)
            if not missing:
                return HeadChoice(
                    universal,
                    "the universal head: no head fits this pool, every agent has a profile", meta,
                    in_head_format(meta, backbone).transcript_format,
                )
            reason += (
                f"; the universal head needs profiles of {', '.join(missing)} (`trinity profile`)"
            )
    warn(
        f"{reason}; using the fallback pipeline (thinker → worker → verifier, agents in pool "
        "order). "
        "Train one with `trinity train`."
    )
    return HeadChoice(None, reason)


def profile_scale(meta: dict[str, Any]) -> Any:
    from trinity_cli.heads.profile_store import Scale

    return Scale(
        meta.get("backbone", {}).get("sha256", ""), meta.get("profile", {}).get("basis_sha256", "")
    )


def stored_profiles(pool: Pool, meta: dict[str, Any]) -> list[Any]:
    """Each agent's newest profile for this universal head (None where it has none)."""
    from trinity_cli.heads.profile_store import ProfileStore, profiles_path

    if not profiles_path().exists():
        return [None] * len(pool.agents)
    store, scale = ProfileStore(), profile_scale(meta)
    try:
        return [store.get(agent, scale) for agent in pool.agents]
    finally:
        store.close()


def unprofiled(pool: Pool, meta: dict[str, Any]) -> list[str]:
    return [a.name for a, p in zip(pool.agents, stored_profiles(pool, meta)) if p is None]


def _fitting(path: Path, backbone: Backbone, pool: Pool, reason: str) -> HeadChoice:
    """The head at `path` if it fits this run (a universal head: and every agent has a
    profile for it), else exit 3 saying what differs."""
    check_head_file(path)
    meta = read_metadata(path)
    backbone = in_head_format(meta, backbone)
    problems = mismatches(meta, backbone, pool)
    if problems:
        raise ConfigError(f"weights {path} ({reason}) do not fit this run: " + "; ".join(problems))
    missing = unprofiled(pool, meta) if is_universal(meta) else []
    if missing:
        raise ConfigError(
            f"weights {path} ({reason}): the universal head routes by profiles, and agents "
            f"{', '.join(missing)} have none for it: run `trinity profile"
            f"{'' if pool.source == BUILTIN_POOL else f' --pool {pool.source}'} --weights {path}` "
            "(with --tasks naming a task set its agents answer; the default is humaneval)"
        )
    return HeadChoice(path, reason, meta, backbone.transcript_format)


def choose_policy(pool: Pool, weights: str | None, warn: Callable[[str], None]) -> LoadedHead:
    """`find_head`, loaded: the head's arrays, or the fallback pipeline."""
    from trinity_cli.core.episode import role_mask
    from trinity_cli.core.head import PipelinePolicy

    found = find_head(pool, weights, warn)
    if found.path is None:
        return LoadedHead(
            PipelinePolicy(len(pool.agents), role_mask([a.roles for a in pool.agents])), FALLBACK,
            None, found.transcript_format, found.reason,
        )
    head, meta = load_head(found.path)
    if is_universal(meta):
        head = bind_profiles(head, pool, meta, found.path)
    return LoadedHead(head, str(found.path), meta, found.transcript_format, found.reason)


def bind_profiles(head: Any, pool: Pool, meta: dict[str, Any], path: Path) -> Any:
    """The universal head bound to the pool's agents' profiles (`_fitting` saw them all)."""
    import numpy as np

    profiles = stored_profiles(pool, meta)
    if any(p is None for p in profiles):  # removed since `find_head` looked
        raise ConfigError(
            f"weights {path}: an agent's profile disappeared; run `trinity profile` again"
        )
    return head.for_pool(np.array([p.profile.vector() for p in profiles]))


def warn_if_other_numerics(
    choice: LoadedHead, coordinator: Any, warn: Callable[[str], None]
) -> None:
    """States here may differ in their last bits from those the head was trained on: say so."""
    from trinity_cli.heads.files import numerics_mismatches, shown_head

    differences = (
        numerics_mismatches(choice.meta or {}, coordinator.numerics)
        if coordinator is not None
        else []
    )
    if differences:
        warn(
            f"the head {shown_head(choice.source)} was trained on coordinator states computed "
            f"elsewhere ({'; '.join(differences)}): states here may differ in their last bits, "
            "so a few of its decisions may differ (nothing to do unless they matter to you)"
        )


def build_coordinator(
    pool: Pool, sessions: int = 1, transcript_format: str = CURRENT_FORMAT.id
) -> Any:
    """The coordinator; `sessions` KV caches for that many concurrent episodes."""
    from trinity_cli.coordinator.llama import LlamaCoordinator

    spec = pool.coordinator
    return LlamaCoordinator(
        coordinator_path(pool), n_ctx=spec.n_ctx, n_threads=spec.n_threads,
        token_position=spec.token_position, sessions=sessions, transcript_format=transcript_format,
    )


def load_run_pool(
    source: str | None, offline: bool, budget_usd: float | None,
    warn: Callable[[str], None] = lambda msg: None,
) -> Pool:
    """The pool of a run, checked against --offline and --budget-usd (exit 3); `warn` hears
    what a valid pool cannot do (Pool.warnings)."""
    from trinity_cli.pool.spec import load_pool

    pool = load_pool(source)
    for warning in pool.warnings:
        warn(warning)
    if offline:
        check_offline(pool)
    if budget_usd is not None:
        check_prices(pool)
    return pool


def check_offline(pool: Pool) -> None:
    from trinity_cli.providers.registry import is_offline

    remote = [a.name for a in pool.agents if not is_offline(a)]
    if remote:
        raise ConfigError(
            f"--offline: {'agents' if len(remote) > 1 else 'agent'} {', '.join(remote)} "
            f"{'need' if len(remote) > 1 else 'needs'} the network (use provider "
            '"local", "replay" or "sim", or a loopback base_url)'
        )


def check_prices(pool: Pool) -> None:
    """Under --budget-usd every paid agent needs known prices, or the budget means nothing."""
    unpriced = [
        a.name
        for a in pool.agents
        if kind_of(a.provider).priced and (a.price_in is None or a.price_out is None)
    ]
    if unpriced:
        raise ConfigError(
            f"--budget-usd: agents {', '.join(unpriced)} have no price_in/price_out in the pool "
            "file"
        )


@dataclass
class Caches:
    """The disk caches of train and eval (in memory only with --no-cache)."""

    responses: Any
    grader: Any
    memo_path: Path | None

    def report(self) -> str:
        entries, size = self.responses.size()
        return (
            f"response cache: {entries} replies, {size / 1e6:.1f} MB, hit rate "
            f"{self.responses.stats.hit_rate:.0%}; grades run: {self.grader.runs}"
        )


def open_caches(no_cache: bool, root: Path | None = None) -> Caches:
    """The user's caches (or those under `root`); --no-cache: a scratch response store, no
    grade or state cache."""
    import atexit
    import shutil
    import tempfile

    from trinity_cli import paths
    from trinity_cli.providers.cache import ResponseStore
    from trinity_cli.tasks.grading import Grader

    if no_cache:
        scratch = Path(tempfile.mkdtemp(prefix="trinity-nocache-"))
        atexit.register(shutil.rmtree, scratch, True)  # nothing of a --no-cache run stays behind
        return Caches(ResponseStore(scratch / "responses.sqlite"), Grader(), None)
    root = root or paths.cache_dir()
    return Caches(
        ResponseStore(root / "responses.sqlite"), Grader(root / "grades.sqlite"),
        root / "hidden.sqlite",
    )


def memo_coordinator(
    pool: Pool, caches: Caches, sessions: int = 1, transcript_format: str = CURRENT_FORMAT.id
) -> Any:
    from trinity_cli.coordinator.memo import MemoCoordinator

    coordinator = build_coordinator(pool, sessions, transcript_format)
    return MemoCoordinator(coordinator, backbone_of(pool).sha256, caches.memo_path)


NETWORK_WORKERS = 4


def default_workers(agents: Sequence[Any]) -> int:
    """Concurrency pays only while agents wait on the network; with local and simulated agents
    every episode needs this machine's cores, and interleaved episodes make the coordinator
    re-evaluate more (measured on the sim pool: 4 workers 18% slower than 1)."""
    return NETWORK_WORKERS if any(a.remote for a in agents) else 1


@dataclass
class Run:
    """What a command that plays episodes over a task set builds from its pool: the caches, the
    agents, how many episodes run at once, and one coordinator per transcript format, each made
    on first use (`--weights none` needs no GGUF)."""

    pool: Pool
    caches: Caches
    agents: list[Any]
    workers: int
    coordinators: dict[str, Any] = field(default_factory=dict)

    def coordinator(
        self, transcript_format: str = CURRENT_FORMAT.id, sessions: int | None = None
    ) -> Any:
        """The coordinator reading `transcript_format`, with `sessions` KV sessions (default: one
        a worker)."""
        if transcript_format not in self.coordinators:
            self.coordinators[transcript_format] = memo_coordinator(
                self.pool, self.caches, sessions or self.workers, transcript_format
            )
        return self.coordinators[transcript_format]


# Opens where a run's episodes are played, given the run and the coordinators its workers
# load: a Ray runner (cli/cluster_options.py) or None, here (`play_here`).
RunnerFactory = Callable[[Run, dict[str, Any]], AbstractContextManager[Any]]


def play_here(run: Run, coordinators: dict[str, Any]) -> AbstractContextManager[Any]:
    return nullcontext(None)


def build_run(
    pool: Pool, tasks: Sequence[Any], no_cache: bool, workers: int | None = None,
    cache_root: Path | None = None,
) -> Run:
    """The caches (--no-cache: in memory; `cache_root`: a study's own), the pool's agents for
    `tasks` (every call through the response cache) and the workers (default:
    `default_workers`)."""
    from trinity_cli.providers.registry import build_agents

    caches = open_caches(no_cache, cache_root)
    agents = build_agents(
        pool.agents, tasks, caches.responses, coordinator_model=pool.coordinator.model
    )
    return Run(pool, caches, agents, workers or default_workers(agents))


@dataclass
class Solver:
    """What one `solve` builds from its pool, head and problem: the agents (no response cache:
    a new problem is asked afresh) and, where the head reads states, the coordinator."""

    pool: Pool
    head: LoadedHead
    problem: str  # the problem's text, as the agents were built for it
    agents: list[Any]
    coordinator: Any
    max_turns: int

    def solve(self, stdin_program: bool = False, **episode: Any) -> Any:
        """One episode on the problem (`stdin_program`: the answer is a program that reads
        stdin; `episode`: run_episode's keywords)."""
        from trinity_cli.core.episode import run_episode
        from trinity_cli.core.transcript import Problem

        return run_episode(
            Problem.from_markdown(self.problem, stdin_program), self.agents, self.coordinator,
            self.head.policy, max_turns=self.max_turns, **episode,
        )


def build_solver(
    pool: Pool, weights: str | None, problem: str, max_turns: int | None,
    warn: Callable[[str], None],
) -> Solver:
    """The head chosen by the precedence rule, its turn limit (default: the head's training
    turns), the agents for `problem` and the coordinator in the head's transcript format."""
    from trinity_cli.core.episode import DEFAULT_MAX_TURNS
    from trinity_cli.providers.registry import build_agents

    head = choose_policy(pool, weights, warn)
    training = (head.meta or {}).get("training", {})
    max_turns = max_turns or training.get("max_turns") or DEFAULT_MAX_TURNS
    agents = build_agents(pool.agents, coordinator_model=pool.coordinator.model, problem=problem)
    coordinator = None
    if head.policy.needs_hidden:
        coordinator = build_coordinator(pool, transcript_format=head.transcript_format)
    warn_if_other_numerics(head, coordinator, warn)
    return Solver(pool, head, problem, agents, coordinator, max_turns)

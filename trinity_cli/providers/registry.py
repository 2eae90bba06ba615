"""Agents from a pool: each agent's provider built as its kind declares (pool.providers),
imported on first use."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import TYPE_CHECKING

from trinity_cli.core.episode import Agent
from trinity_cli.core.provider import Prices, Provider
from trinity_cli.core.roles import Role
from trinity_cli.pool.providers import kind_of
from trinity_cli.pool.spec import EMBEDDED, AgentSpec
from trinity_cli.providers.base import is_loopback
from trinity_cli.providers.cache import CachingProvider, ResponseStore
from trinity_cli.providers.retry import RetryingProvider
from trinity_cli.tasks.taskset import Task

if TYPE_CHECKING:
    from trinity_cli.providers.replay import ReplayProvider


def build_provider(
    spec: AgentSpec, tasks: Mapping[str, Task] | None = None, coordinator_model: str = EMBEDDED,
    store: ResponseStore | None = None,
) -> Provider:
    """The provider its kind declares (pool.providers), retried and fitted to `n_ctx` where the
    kind says so (a remote model's context is known only when the pool declares it)."""
    kind = kind_of(spec.provider)
    module, name = kind.implementation.split(":")
    implementation = getattr(import_module(module), name)
    if kind.from_tasks:
        return implementation.for_tasks(spec, tasks or {}, coordinator_model, store)  # type: ignore[no-any-return]
    provider: Provider = implementation(spec)
    if not kind.retried:
        return provider
    if spec.n_ctx is not None:
        from trinity_cli.providers.context import FittingProvider

        provider = FittingProvider(provider, spec, spec.n_ctx)
    return RetryingProvider(provider, spec)


def build_agents(
    specs: Sequence[AgentSpec], tasks: Sequence[Task] = (), store: ResponseStore | None = None, *,
    coordinator_model: str = EMBEDDED, problem: str | None = None,
) -> list[Agent]:
    """The loop's agents; with a store, every call goes through the response cache.

    Replay agents (recorded answers) count tokens with the coordinator's tokenizer
    (`coordinator_model`, the pool's [coordinator] model), skip the cache (their replies are
    a function of the request and the record; only their verdicts are stored, by content), and
    are checked here: given `tasks` (train, eval), their record must cover every task; given
    `problem` (solve), it must be a recorded task's prompt. Either failure is exit 3 before any
    episode runs."""
    by_id = {t.task_id: t for t in tasks}
    agents = []
    for spec in specs:
        kind = kind_of(spec.provider)
        prices = Prices(spec.price_in, spec.price_out) if kind.priced else Prices(0.0, 0.0)
        max_tokens = spec.max_tokens
        if spec.provider == "replay":
            from trinity_cli.providers.replay import reply_token_bound

            provider: Provider = _replay(spec, by_id, coordinator_model, tasks, problem, store)
            max_tokens = reply_token_bound(spec)  # the budget's bound on a recorded reply
        else:
            provider = build_provider(spec, by_id)
            if store is not None:
                provider = CachingProvider(provider, spec, store)
        agents.append(
            Agent(
                spec.name, provider, max_tokens, prices, remote=kind.network,
                roles=frozenset(Role(r) for r in spec.roles),
            )
        )
    return agents


def _replay(
    spec: AgentSpec, by_id: Mapping[str, Task], coordinator_model: str, tasks: Sequence[Task],
    problem: str | None, store: ResponseStore | None,
) -> ReplayProvider:
    from trinity_cli.providers.replay import ReplayProvider

    provider = ReplayProvider.for_tasks(spec, by_id, coordinator_model, store)
    if tasks:
        provider.require(tasks)
    if problem is not None:
        provider.bind(problem)
    return provider


def is_offline(spec: AgentSpec) -> bool:
    """True when calling the agent needs no network: local models, recorded answers, loopback
    servers."""
    return not kind_of(spec.provider).network or is_loopback(spec.base_url)

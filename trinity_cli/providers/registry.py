"""The pool file's `provider` string → the class that serves it (imported on first use)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import TYPE_CHECKING

from trinity_cli.core.episode import Agent
from trinity_cli.core.provider import Prices, Provider
from trinity_cli.core.roles import Role
from trinity_cli.pool.spec import EMBEDDED, AgentSpec
from trinity_cli.providers.base import is_loopback
from trinity_cli.providers.cache import CachingProvider, ResponseStore
from trinity_cli.providers.retry import RetryingProvider
from trinity_cli.tasks.taskset import Task

if TYPE_CHECKING:
    from trinity_cli.providers.replay import ReplayProvider

PROVIDER_CLASSES = {
    "openai": ("trinity_cli.providers.openai_compat", "OpenAIProvider"),
    "anthropic": ("trinity_cli.providers.anthropic", "AnthropicProvider"),
    "gemini": ("trinity_cli.providers.gemini", "GeminiProvider"),
    "local": ("trinity_cli.providers.local_gguf", "LocalProvider"),
}


def build_provider(spec: AgentSpec, tasks: Mapping[str, Task] | None = None, coordinator_model: str = EMBEDDED) -> Provider:
    if spec.provider == "sim":
        from trinity_cli.providers.sim import SimProvider

        return SimProvider(spec, tasks or {})
    if spec.provider == "replay":
        from trinity_cli.providers.replay import ReplayProvider, coordinator_tokens

        return ReplayProvider(spec, tasks or {}, coordinator_tokens(coordinator_model))
    module, name = PROVIDER_CLASSES[spec.provider]
    provider: Provider = getattr(import_module(module), name)(spec)
    if spec.provider == "local":
        return provider
    if spec.n_ctx is not None:  # a remote model's context is known only when the pool declares it
        from trinity_cli.providers.context import FittingProvider

        provider = FittingProvider(provider, spec, spec.n_ctx)
    return RetryingProvider(provider, spec)


def build_agents(
    specs: Sequence[AgentSpec],
    tasks: Sequence[Task] = (),
    store: ResponseStore | None = None,
    *,
    coordinator_model: str = EMBEDDED,
    problem: str | None = None,
) -> list[Agent]:
    """The loop's agents; with a store, every call goes through the response cache.

    Replay agents (recorded answers) count tokens with the coordinator's tokenizer
    (`coordinator_model`, the pool's [coordinator] model), skip the cache (their replies are
    a function of the request and the record; only their verdicts are stored, by content), and are checked here: given `tasks` (train,
    eval), their record must cover every task; given `problem` (solve), it must be a recorded
    task's prompt. Either failure is exit 3 before any episode runs."""
    by_id = {t.task_id: t for t in tasks}
    agents = []
    for spec in specs:
        prices = Prices(0.0, 0.0) if spec.provider == "local" else Prices(spec.price_in, spec.price_out)
        max_tokens = spec.max_tokens
        if spec.provider == "replay":
            from trinity_cli.providers.replay import reply_token_bound

            provider: Provider = _replay(spec, by_id, coordinator_model, tasks, problem, store)
            max_tokens = reply_token_bound(spec)  # the budget's bound on a recorded reply
        else:
            provider = build_provider(spec, by_id)
            if store is not None:
                provider = CachingProvider(provider, spec, store)
        agents.append(Agent(spec.name, provider, max_tokens, prices, remote=spec.provider not in ("local", "sim", "replay"),
                            roles=frozenset(Role(r) for r in spec.roles)))
    return agents


def _replay(spec: AgentSpec, by_id: Mapping[str, Task], coordinator_model: str, tasks: Sequence[Task],
            problem: str | None, store: ResponseStore | None) -> ReplayProvider:
    from trinity_cli.providers.replay import ReplayProvider, coordinator_tokens

    provider = ReplayProvider(spec, by_id, coordinator_tokens(coordinator_model), store)
    if tasks:
        provider.require(tasks)
    if problem is not None:
        provider.bind(problem)
    return provider


def is_offline(spec: AgentSpec) -> bool:
    """True when calling the agent needs no network: local models, recorded answers, loopback servers."""
    return spec.provider in ("local", "sim", "replay") or is_loopback(spec.base_url)

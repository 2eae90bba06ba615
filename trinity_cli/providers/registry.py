"""The pool file's `provider` string → the class that serves it (imported on first use)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import import_module

from trinity_cli.config import AgentSpec
from trinity_cli.core.episode import Agent
from trinity_cli.core.provider import Prices, Provider
from trinity_cli.core.roles import Role
from trinity_cli.providers.base import is_loopback
from trinity_cli.providers.cache import CachingProvider, ResponseStore
from trinity_cli.providers.retry import RetryingProvider
from trinity_cli.tasks.taskset import Task

PROVIDER_CLASSES = {
    "openai": ("trinity_cli.providers.openai_compat", "OpenAIProvider"),
    "anthropic": ("trinity_cli.providers.anthropic", "AnthropicProvider"),
    "gemini": ("trinity_cli.providers.gemini", "GeminiProvider"),
    "local": ("trinity_cli.providers.local_gguf", "LocalProvider"),
}


def build_provider(spec: AgentSpec, tasks: Mapping[str, Task] | None = None) -> Provider:
    if spec.provider == "sim":
        from trinity_cli.providers.sim import SimProvider

        return SimProvider(spec, tasks or {})
    module, name = PROVIDER_CLASSES[spec.provider]
    provider: Provider = getattr(import_module(module), name)(spec)
    return provider if spec.provider == "local" else RetryingProvider(provider, spec)


def build_agents(
    specs: Sequence[AgentSpec],
    tasks: Sequence[Task] = (),
    store: ResponseStore | None = None,
) -> list[Agent]:
    """The loop's agents; with a store, every call goes through the response cache."""
    by_id = {t.task_id: t for t in tasks}
    agents = []
    for spec in specs:
        prices = Prices(0.0, 0.0) if spec.provider == "local" else Prices(spec.price_in, spec.price_out)
        provider = build_provider(spec, by_id)
        if store is not None:
            provider = CachingProvider(provider, spec, store)
        agents.append(Agent(spec.name, provider, spec.max_tokens, prices, remote=spec.provider not in ("local", "sim"),
                            roles=frozenset(Role(r) for r in spec.roles)))
    return agents


def is_offline(spec: AgentSpec) -> bool:
    """True when calling the agent needs no network: local models, loopback servers."""
    return spec.provider in ("local", "sim") or is_loopback(spec.base_url)

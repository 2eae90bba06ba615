"""API keys: read from the environment variable the pool names, never logged or stored."""

from __future__ import annotations

import os

from trinity_cli.errors import ConfigError, remember_secret
from trinity_cli.pool.providers import kind_of
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.base import is_loopback

LOOPBACK_PLACEHOLDER = "no-key-needed-for-loopback"


def key_envs(spec: AgentSpec) -> tuple[str, ...]:
    """The pool's `api_key_env`, else where the provider's kind reads its key (pool.providers)."""
    return (spec.api_key_env,) if spec.api_key_env else kind_of(spec.provider).key_envs


def api_key(spec: AgentSpec) -> str:
    """The key for an agent; a loopback server gets a placeholder when none is set."""
    envs = key_envs(spec)
    for env in envs:
        value = os.environ.get(env)
        if value:
            remember_secret(value)
            return value
    if is_loopback(spec.base_url):
        return LOOPBACK_PLACEHOLDER
    raise ConfigError(
        f"agent {spec.name!r} ({spec.provider}) needs an API key: set {' or '.join(envs)}"
    )

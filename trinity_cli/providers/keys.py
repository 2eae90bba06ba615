"""API keys: read from the environment variable the pool names, never logged or stored."""

from __future__ import annotations

import os

from trinity_cli.errors import ConfigError, remember_secret
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.base import is_loopback

LOOPBACK_PLACEHOLDER = "no-key-needed-for-loopback"


def key_envs(spec: AgentSpec, default_env: str | tuple[str, ...]) -> tuple[str, ...]:
    if spec.api_key_env:
        return (spec.api_key_env,)
    return (default_env,) if isinstance(default_env, str) else default_env


def api_key(spec: AgentSpec, default_env: str | tuple[str, ...]) -> str:
    """The key for an agent; a loopback server gets a placeholder when none is set."""
    envs = key_envs(spec, default_env)
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

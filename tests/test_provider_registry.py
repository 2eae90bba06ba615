"""A provider is its module and one registry line (pool.providers): pool loading, `trinity
pool`'s checks, pricing, --offline, retries and Ray sizing take a new one with no other change."""

from __future__ import annotations

import pytest

from trinity_cli.core.provider import Request
from trinity_cli.core.roles import Role
from trinity_cli.errors import ConfigError
from trinity_cli.pool.providers import KINDS, ProviderKind, register
from trinity_cli.pool.spec import parse_pool
from trinity_cli.providers.check import check_agent
from trinity_cli.providers.registry import build_agents, is_offline
from trinity_cli.providers.retry import RetryingProvider
from trinity_cli.runtime import check_offline, check_prices
from trinity_cli.train.plan import call_worst_usd
from trinity_cli.train.ray_runner import network_bound

POOL = """
[[agents]]
name = "far"
provider = "echo"
model = "echo-1"
base_url = "https://echo.invalid/v1"
price_in = 1.0
price_out = 2.0

[[agents]]
name = "near"
provider = "echo"
model = "echo-1"
base_url = "{url}"
"""


@pytest.fixture()
def echo():
    # the one line
    register(
        ProviderKind("echo", "support.echo:EchoProvider", key_envs=("ECHO_API_KEY",))
    )
    yield
    KINDS.pop("echo")


def test_a_pool_cannot_name_it_before_its_line_exists(server):
    with pytest.raises(ConfigError, match="'echo'; known providers: openai, anthropic"):
        parse_pool(POOL.format(url=server.url), "pool.toml")


def test_a_new_provider_works_everywhere_from_its_registry_line(echo, server, monkeypatch):
    monkeypatch.delenv("ECHO_API_KEY", raising=False)
    pool = parse_pool(POOL.format(url=server.url), "pool.toml")
    far, near = pool.agents
    assert far.roles == ("thinker", "worker", "verifier")
    # other kinds' keys stay theirs
    with pytest.raises(
        ConfigError, match='mode applies to provider "local" only'
    ):
        parse_pool(POOL.format(url=server.url) + 'mode = "chat"\n', "pool.toml")
    # trinity pool's checks: the key its line names, the server reached
    assert check_agent(far).detail == "no API key: set ECHO_API_KEY" and not check_agent(far).usable
    monkeypatch.setenv("ECHO_API_KEY", "sk-echo")
    assert check_agent(near).usable and check_agent(near).detail.endswith("reachable")
    # pricing: billed at the pool's prices, every attempt counted; a budget needs prices
    assert call_worst_usd(far, 1000) == pytest.approx(
        (1 + far.retries) * (1000 * 1.0 + far.max_tokens * 2.0) / 1e6
    )
    with pytest.raises(ConfigError, match="near have no price_in/price_out"):
        check_prices(pool)
    # --offline: the remote one is refused, the loopback one is not
    assert not is_offline(far) and is_offline(near)
    with pytest.raises(ConfigError, match="--offline: agent far needs the network"):
        check_offline(pool)
    assert network_bound(pool)  # Ray sizes its workers for network waits
    # built as declared: retried, remote, priced
    agents = build_agents(pool.agents)
    assert isinstance(agents[0].provider, RetryingProvider) and agents[0].remote
    reply = agents[0].provider.complete(Request(Role.WORKER, "system", "the task\necho me"))
    assert reply.text == "echo me" and reply.usd == pytest.approx((4 * 1.0 + 2 * 2.0) / 1e6)

"""The OpenAI provider through the real `openai` SDK against a real llama.cpp server."""

from __future__ import annotations

import pytest
from conftest import free_port

from trinity_cli.config import AgentSpec
from trinity_cli.core.provider import Request
from trinity_cli.core.roles import Role
from trinity_cli.errors import ConfigError, ProviderError
from trinity_cli.providers.openai_compat import OpenAIProvider

REQUEST = Request(Role.THINKER, "You are terse.", "Name a prime number.")


def spec(url: str, **kw) -> AgentSpec:
    return AgentSpec(name="local-server", provider="openai", model="gemma", base_url=url,
                     price_in=0.5, price_out=1.5, max_tokens=12, temperature=0.0, **kw)


def test_plain_reply_reports_usage_and_cost(llama_server):
    reply = OpenAIProvider(spec(llama_server)).complete(REQUEST)
    assert isinstance(reply.text, str)
    assert reply.tokens_in > 5 and 0 < reply.tokens_out <= 12
    assert not reply.usd_estimated
    assert reply.usd == pytest.approx((0.5 * reply.tokens_in + 1.5 * reply.tokens_out) / 1e6)


def test_streamed_reply_arrives_in_pieces(llama_server):
    pieces: list[str] = []
    reply = OpenAIProvider(spec(llama_server)).complete(REQUEST, on_text=pieces.append)
    assert "".join(pieces) == reply.text
    assert reply.tokens_out > 0
    # llama.cpp's server may or may not send a usage chunk; without one the cost is an estimate
    if reply.usd_estimated:
        assert reply.tokens_in > 0


def test_loopback_needs_no_key_but_a_remote_endpoint_does():
    OpenAIProvider(spec("http://127.0.0.1:9/v1"))  # constructing needs no key for loopback
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIProvider(spec("https://api.openai.com/v1"))


def test_unreachable_server_is_a_network_error():
    provider = OpenAIProvider(spec(f"http://127.0.0.1:{free_port()}/v1", timeout_s=5.0))
    with pytest.raises(ProviderError) as caught:
        provider.complete(REQUEST)
    assert caught.value.kind == "network"
    assert "local-server" in caught.value.message

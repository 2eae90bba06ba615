"""The Anthropic provider through the real `anthropic` SDK against a loopback wire server."""

from __future__ import annotations

import json

import pytest
from support.wire.server import Scripted, sse

from trinity_cli.core.provider import Request
from trinity_cli.core.roles import Role
from trinity_cli.errors import ConfigError, ProviderError
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.anthropic import AnthropicProvider

REQUEST = Request(Role.WORKER, "system prompt", "## Task\n\nadd two numbers")


def spec(url: str, **kw) -> AgentSpec:
    return AgentSpec(
        name="claude", provider="anthropic", model="claude-test", base_url=url, price_in=3.0,
        price_out=15.0, max_tokens=64, **kw,
    )


def message(text: str, tokens_in: int, tokens_out: int) -> dict:
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
    }


def test_plain_reply_with_usage_and_cost(server):
    server.responses.append(
        Scripted(200, json.dumps(message("def add(a, b): return a + b", 120, 30)).encode())
    )
    reply = AnthropicProvider(spec(server.url)).complete(REQUEST)
    assert reply.text == "def add(a, b): return a + b"
    assert (reply.tokens_in, reply.tokens_out) == (120, 30)
    assert reply.usd == pytest.approx((3.0 * 120 + 15.0 * 30) / 1e6)
    sent = server.requests[0]
    assert sent["path"] == "/v1/messages"
    assert sent["json"]["system"] == "system prompt"
    assert sent["json"]["messages"] == [{"role": "user", "content": "## Task\n\nadd two numbers"}]
    assert sent["json"]["max_tokens"] == 64


def streamed(texts: list[str], stop_reason: str = "end_turn") -> Scripted:
    """A Messages stream of `texts` as text deltas, ending for `stop_reason`, 80 tokens in,
    12 out."""
    start = message("", 80, 1)
    start["content"] = []
    deltas = [
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}},
        )
        for t in texts
    ]
    events = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {
                "type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        *deltas, ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": 12},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return Scripted(200, sse(events), "text/event-stream")


def test_streamed_reply_arrives_in_pieces_with_usage(server):
    server.responses.append(streamed(["Hello", ", world"]))
    pieces = []
    reply = AnthropicProvider(spec(server.url)).complete(REQUEST, on_text=pieces.append)
    assert pieces == ["Hello", ", world"]
    assert reply.text == "Hello, world"
    assert (reply.tokens_in, reply.tokens_out) == (80, 12)
    assert server.requests[0]["json"]["stream"] is True


@pytest.mark.parametrize(
    "stop_reason,truncated", [("max_tokens", True), ("end_turn", False), ("stop_sequence", False)]
)
def test_a_reply_that_stopped_for_max_tokens_is_truncated(server, stop_reason, truncated):
    server.responses.append(streamed(["def add(a, b):", "\n    return"], stop_reason))
    assert (
        AnthropicProvider(spec(server.url)).complete(REQUEST, on_text=lambda text: None).truncated
        is truncated
    )
    plain = message("def add", 10, 64)
    plain["stop_reason"] = stop_reason
    server.responses.append(Scripted(200, json.dumps(plain).encode()))
    assert AnthropicProvider(spec(server.url)).complete(REQUEST).truncated is truncated


@pytest.mark.parametrize(
    "status,kind", [(400, "bad_request"), (401, "auth"), (429, "rate_limit"), (529, "server")]
)
def test_error_replies_become_one_classified_provider_error(server, status, kind):
    body = {"type": "error", "error": {"type": "some_error", "message": "scripted failure"}}
    server.responses.append(Scripted(status, json.dumps(body).encode()))
    with pytest.raises(ProviderError) as caught:
        AnthropicProvider(spec(server.url)).complete(REQUEST)
    assert caught.value.kind == kind
    assert "claude" in caught.value.message and "\n" not in caught.value.message


def test_a_remote_endpoint_without_a_key_is_a_config_error():
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicProvider(spec("https://api.anthropic.com"))


def test_the_key_comes_from_api_key_env(server, monkeypatch):
    monkeypatch.setenv("MY_CLAUDE_KEY", "sk-test-123")
    server.responses.append(Scripted(200, json.dumps(message("ok", 1, 1)).encode()))
    AnthropicProvider(spec(server.url, api_key_env="MY_CLAUDE_KEY")).complete(REQUEST)
    headers = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
    assert "sk-test-123" in (
        headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "),
    )

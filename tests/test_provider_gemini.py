"""The Gemini provider through the real `google-genai` SDK against a loopback wire server."""

from __future__ import annotations

import json

import pytest
from support.wire.server import Scripted, gemini_chunk, sse

from trinity_cli.core.provider import Request
from trinity_cli.core.roles import Role
from trinity_cli.errors import ConfigError, ProviderError
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.gemini import GeminiProvider

REQUEST = Request(Role.THINKER, "system prompt", "## Task\n\nreverse a list")


def spec(url: str, **kw) -> AgentSpec:
    return AgentSpec(
        name="gem", provider="gemini", model="gemini-test", base_url=url, price_in=1.0,
        price_out=2.0, max_tokens=50, **kw,
    )


def lower(headers: dict) -> dict:
    return {k.lower(): v for k, v in headers.items()}


def test_plain_reply_with_usage_and_cost(server):
    usage = {"promptTokenCount": 40, "candidatesTokenCount": 9, "totalTokenCount": 49}
    server.responses.append(Scripted(200, json.dumps(gemini_chunk("Use slicing.", usage)).encode()))
    reply = GeminiProvider(spec(server.url)).complete(REQUEST)
    assert reply.text == "Use slicing."
    assert (reply.tokens_in, reply.tokens_out, reply.usd_estimated) == (40, 9, False)
    assert reply.usd == pytest.approx((40 * 1.0 + 9 * 2.0) / 1e6)
    sent = server.requests[0]
    assert sent["path"].endswith("/models/gemini-test:generateContent")
    assert sent["json"]["systemInstruction"]["parts"][0]["text"] == "system prompt"
    assert sent["json"]["generationConfig"]["maxOutputTokens"] == 50


def test_streamed_reply_arrives_in_pieces_with_usage(server):
    usage = {"promptTokenCount": 33, "candidatesTokenCount": 7, "totalTokenCount": 40}
    events = [(None, gemini_chunk("Use ")), (None, gemini_chunk("slicing.", usage))]
    server.responses.append(Scripted(200, sse(events), "text/event-stream"))
    pieces = []
    reply = GeminiProvider(spec(server.url)).complete(REQUEST, on_text=pieces.append)
    assert pieces == ["Use ", "slicing."]
    assert reply.text == "Use slicing."
    assert (reply.tokens_in, reply.tokens_out) == (33, 7)
    assert ":streamGenerateContent" in server.requests[0]["path"]


@pytest.mark.parametrize("finish,truncated", [("MAX_TOKENS", True), ("STOP", False)])
def test_a_reply_that_finished_for_max_tokens_is_truncated(server, finish, truncated):
    usage = {"promptTokenCount": 33, "candidatesTokenCount": 50, "totalTokenCount": 83}
    server.responses.append(
        Scripted(
            200, sse([(None, gemini_chunk("Use ")), (None, gemini_chunk("slic", usage, finish))]),
            "text/event-stream",
        )
    )
    reply = GeminiProvider(spec(server.url)).complete(REQUEST, on_text=lambda text: None)
    assert reply.text == "Use slic" and reply.truncated is truncated
    server.responses.append(
        Scripted(200, json.dumps(gemini_chunk("Use slic", usage, finish)).encode())
    )
    assert GeminiProvider(spec(server.url)).complete(REQUEST).truncated is truncated


def test_missing_usage_is_estimated_and_flagged(server):
    server.responses.append(Scripted(200, json.dumps(gemini_chunk("some text here")).encode()))
    reply = GeminiProvider(spec(server.url)).complete(REQUEST)
    assert reply.usd_estimated and reply.tokens_out > 0


@pytest.mark.parametrize("status,kind", [(400, "bad_request"), (403, "auth"), (500, "server")])
def test_error_replies_become_one_classified_provider_error(server, status, kind):
    body = {"error": {"code": status, "message": "scripted failure", "status": "FAILED"}}
    server.responses.append(Scripted(status, json.dumps(body).encode()))
    with pytest.raises(ProviderError) as caught:
        GeminiProvider(spec(server.url)).complete(REQUEST)
    assert caught.value.kind == kind
    assert "\n" not in caught.value.message


def test_key_falls_back_from_gemini_to_google_api_key(server, monkeypatch):
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key-456")
    usage = {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}
    server.responses.append(Scripted(200, json.dumps(gemini_chunk("ok", usage)).encode()))
    GeminiProvider(spec(server.url)).complete(REQUEST)
    assert lower(server.requests[0]["headers"]).get("x-goog-api-key") == "g-key-456"
    monkeypatch.setenv("GEMINI_API_KEY", "gem-key-789")
    server.responses.append(Scripted(200, json.dumps(gemini_chunk("ok", usage)).encode()))
    GeminiProvider(spec(server.url)).complete(REQUEST)
    assert lower(server.requests[1]["headers"]).get("x-goog-api-key") == "gem-key-789"


def test_a_remote_endpoint_without_a_key_is_a_config_error():
    with pytest.raises(ConfigError, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        GeminiProvider(spec("https://generativelanguage.googleapis.com"))

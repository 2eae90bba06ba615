"""Provider calls that survive the real world: the real OpenAI SDK against loopback servers that
rate-limit, fail, hang, cut the stream and send garbage, through `RetryingProvider`."""

from __future__ import annotations

import json
import random

import pytest
from support.wire.server import Scripted, openai_json, openai_stream

from trinity_cli.core.provider import Request
from trinity_cli.core.roles import Role
from trinity_cli.errors import ProviderError
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.openai_compat import OpenAIProvider
from trinity_cli.providers.retry import RetryingProvider

REQUEST = Request(Role.WORKER, "system", "write add")
OK = openai_stream("def add(a, b): return a + b")
OK_PLAIN = openai_json("def add(a, b): return a + b")


def provider(server, waits, **kw):
    spec = AgentSpec(
        name="flaky", provider="openai", model="m", base_url=f"{server.url}/v1",
        **{"timeout_s": 5.0, "retries": 3, **kw},
    )
    return RetryingProvider(OpenAIProvider(spec), spec, sleep=waits.append, rng=random.Random(0))


def error(status: int, **headers: str) -> Scripted:
    return Scripted(
        status, json.dumps({"error": {"message": f"status {status}", "type": "x"}}).encode(),
        headers=headers,
    )


def test_429_with_retry_after_is_honoured(server):
    waits: list[float] = []
    server.responses += [error(429, **{"retry-after": "7"}), OK]
    reply = provider(server, waits).complete(REQUEST, on_text=lambda t: None)
    assert "return a + b" in reply.text
    assert waits == [7.0] and len(server.requests) == 2


def test_503_with_an_http_date_retry_after_and_500_then_success_backs_off(server):
    waits: list[float] = []
    server.responses += [
        error(503, **{"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}), error(500), OK_PLAIN,
    ]
    reply = provider(server, waits).complete(REQUEST)
    assert "return a + b" in reply.text
    assert waits[0] == 0.0  # a date in the past: retry at once
    assert 0.0 <= waits[1] <= 1.0  # full jitter over the second backoff step (0.5 s · 2)


@pytest.mark.parametrize("status,kind", [(400, "bad_request"), (401, "auth"), (403, "auth")])
def test_client_errors_are_never_retried(server, status, kind):
    waits: list[float] = []
    server.responses += [error(status), OK]
    with pytest.raises(ProviderError) as caught:
        provider(server, waits).complete(REQUEST)
    assert caught.value.kind == kind and waits == [] and len(server.requests) == 1
    assert "flaky" in caught.value.message and "openai" in caught.value.message


def test_a_hanging_server_times_out_and_the_retry_succeeds(server):
    waits: list[float] = []
    server.responses += [Scripted(200, OK.body, "text/event-stream", delay_s=3.0), OK]
    reply = provider(server, waits, timeout_s=1.0).complete(REQUEST, on_text=lambda t: None)
    assert "return a + b" in reply.text and len(waits) == 1


def test_persistent_failure_gives_up_after_the_retries_with_one_line(server):
    waits: list[float] = []
    server.responses += [error(500) for _ in range(4)]
    with pytest.raises(ProviderError) as caught:
        provider(server, waits).complete(REQUEST)
    assert caught.value.kind == "server" and len(server.requests) == 4 and len(waits) == 3
    assert "gave up after 4 tries" in caught.value.message and "\n" not in caught.value.message


def test_a_retry_after_past_the_deadline_ends_the_call_now(server):
    waits: list[float] = []
    server.responses += [error(429, **{"retry-after": "600"}), OK]
    with pytest.raises(ProviderError) as caught:
        provider(server, waits, deadline_s=30.0).complete(REQUEST)
    assert caught.value.kind == "rate_limit" and waits == [] and "deadline" in caught.value.message


def test_a_stream_cut_mid_reply_is_not_retried_and_is_marked_partial(server):
    waits: list[float] = []
    cut = Scripted(200, OK.body, "text/event-stream", drop_after=1)
    server.responses += [cut, OK]
    pieces: list[str] = []
    with pytest.raises(ProviderError) as caught:
        provider(server, waits).complete(REQUEST, on_text=pieces.append)
    assert caught.value.partial and pieces and waits == [] and len(server.requests) == 1
    assert "mid-stream" in caught.value.message


def test_invalid_json_is_a_clean_error_after_retries(server):
    waits: list[float] = []
    server.responses += [Scripted(200, b"{this is not json") for _ in range(4)]
    with pytest.raises(ProviderError) as caught:
        provider(server, waits).complete(REQUEST)
    assert "flaky" in caught.value.message and len(server.requests) == 4


def test_parallel_calls_to_one_agent_are_bounded_by_max_concurrency(server):
    from concurrent.futures import ThreadPoolExecutor

    slow = Scripted(200, OK_PLAIN.body, delay_s=0.4)
    server.responses += [slow] * 8
    retrying = provider(server, [], max_concurrency=2)
    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda _: retrying.complete(REQUEST), range(8)))
    assert all("return a + b" in r.text for r in replies)
    assert server.max_in_flight == 2 and len(server.requests) == 8


def test_a_ctrl_c_masked_by_an_sdks_cleanup_is_an_interruption_not_a_provider_error():
    from trinity_cli.providers.errors import classify

    spec = AgentSpec(name="a", provider="openai", model="m")

    def reading_a_stream() -> None:
        try:
            raise KeyboardInterrupt  # Ctrl-C mid-read
        finally:
            raise ConnectionResetError("closing a half-read stream")  # what an SDK's cleanup does

    with pytest.raises(ConnectionResetError) as masked:
        reading_a_stream()
    with pytest.raises(KeyboardInterrupt):
        classify(masked.value, spec)
    # without the interrupt: as before
    assert (
        classify(ConnectionResetError("reset"), spec).kind == "network"
    )

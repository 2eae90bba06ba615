"""The OpenAI provider through the real `openai` SDK against a real llama.cpp server, and against
a loopback that refuses, as OpenAI does for its reasoning models, `max_tokens` and a temperature."""

from __future__ import annotations

import json

import pytest
from conftest import free_port
from support.cli import trinity
from support.wire.server import (
    Scripted,
    WireServer,
    openai_json,
    openai_reasoning_check,
    openai_stream,
)

from trinity_cli.core.provider import Request
from trinity_cli.core.roles import Role
from trinity_cli.errors import ConfigError, ProviderError
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers import openai_compat
from trinity_cli.providers.openai_compat import OpenAIProvider, request_params
from trinity_cli.providers.retry import RetryingProvider

REQUEST = Request(Role.THINKER, "You are terse.", "Name a prime number.")


def spec(url: str, **kw) -> AgentSpec:
    return AgentSpec(
        name="local-server", provider="openai", model="gemma", base_url=url, price_in=0.5,
        price_out=1.5, max_tokens=12, temperature=0.0, **kw,
    )


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


def test_a_server_that_answers_a_stream_with_plain_json_is_an_error_not_an_empty_answer():
    """The SDK reads no event from a plain JSON body; an empty answer at an estimated cost would
    pass silently for the agent's reply."""
    reply = openai_json("def f(): pass")
    server = WireServer(check=lambda body: reply)
    try:
        agent = spec(server.url + "/v1", retries=2)
        provider = RetryingProvider(OpenAIProvider(agent), agent, sleep=lambda seconds: None)
        with pytest.raises(ProviderError, match="no stream events") as caught:
            provider.complete(REQUEST, on_text=lambda text: None)
        assert caught.value.kind == "bad_request"
        prefix = f"agent 'local-server' (openai at {server.url}/v1): "
        assert caught.value.message.startswith(prefix)
        assert len(server.requests) == 1  # not retried, though the agent allows 2 retries
        assert provider.complete(REQUEST).text == "def f(): pass"  # the same body, unstreamed
    finally:
        server.close()


def test_the_benchs_loopback_agent_streams_as_trinity_asks():
    """`trinity bench` times Ray against LoopbackAgent: a server that did not stream would make
    every call an error (above), and the ratio would time nothing."""
    from trinity_cli.bench.measure import LoopbackAgent

    loopback = LoopbackAgent(0.0, answer="def f(): pass")
    try:
        pieces: list[str] = []
        reply = OpenAIProvider(spec(loopback.base_url)).complete(REQUEST, on_text=pieces.append)
        assert reply.text == "".join(pieces) == "def f(): pass"
        assert (reply.tokens_in, reply.tokens_out, reply.usd_estimated) == (100, 20, False)
    finally:
        loopback.close()


# -- OpenAI's reasoning models (o1, o3, o4, gpt-5) ---------------------------------------------

MAX_TOKENS_REFUSED = "Unsupported parameter: 'max_tokens' is not supported with this model."


@pytest.fixture()
def reasoning_server():
    server = WireServer(check=openai_reasoning_check)
    yield server
    server.close()


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Each test is a fresh process as far as the once-per-agent warning goes."""
    monkeypatch.setattr(openai_compat, "_warned", set())


def reasoning_spec(server: WireServer, **kw) -> AgentSpec:
    return AgentSpec(
        **{
            "name": "o3", "provider": "openai", "model": "o3-mini", "base_url": f"{server.url}/v1",
            "price_in": 1.1, "price_out": 4.4, "max_tokens": 64, "temperature": 0.2,
            "token_param": "max_completion_tokens", "timeout_s": 5.0, **kw,
        }
    )


def test_the_loopback_refuses_what_openai_refuses(reasoning_server):
    """The fake is worth testing against only if it really says no."""
    import openai

    client = openai.OpenAI(api_key="x", base_url=f"{reasoning_server.url}/v1", max_retries=0)
    messages = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.BadRequestError, match="'max_tokens' is not supported"):
        client.chat.completions.create(model="o3-mini", messages=messages, max_tokens=5)
    with pytest.raises(openai.BadRequestError, match="'temperature' does not support 0.2"):
        client.chat.completions.create(
            model="gpt-5", messages=messages, max_completion_tokens=5, temperature=0.2
        )
    assert [r["json"].get("max_tokens") for r in reasoning_server.requests] == [5, None]


def test_default_token_param_follows_the_endpoint():
    official = AgentSpec(name="a", provider="openai", model="gpt-4o", temperature=0.5)
    server = AgentSpec(
        name="b", provider="openai", model="qwen", base_url="http://127.0.0.1:8080/v1"
    )
    assert request_params(official) == {
        "model": "gpt-4o", "max_completion_tokens": 512, "stop": None, "temperature": 0.5,
    }
    assert request_params(server) == {"model": "qwen", "max_tokens": 512, "stop": None}
    forced = AgentSpec(
        name="c", provider="openai", model="qwen", base_url="http://h/v1",
        token_param="max_completion_tokens",
    )
    assert "max_completion_tokens" in request_params(forced) and "max_tokens" not in request_params(
        forced
    )


@pytest.mark.parametrize("model", ["o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini"])
def test_reasoning_models_get_no_temperature(model):
    assert "temperature" not in request_params(
        AgentSpec(name="a", provider="openai", model=model, temperature=0.2)
    )


def test_the_official_parameters_pass_and_reasoning_tokens_are_billed_as_output(reasoning_server):
    reasoning_server.responses.append(openai_stream("7", tokens_in=30, reasoning_tokens=200))
    pieces: list[str] = []
    reply = OpenAIProvider(reasoning_spec(reasoning_server)).complete(
        REQUEST, on_text=pieces.append
    )
    body = reasoning_server.requests[0]["json"]
    assert (
        body["max_completion_tokens"] == 64
        and "max_tokens" not in body
        and "temperature" not in body
    )
    assert reply.text == "7" == "".join(pieces)
    # 200 reasoning + 1 visible
    assert (reply.tokens_in, reply.tokens_out, reply.usd_estimated) == (
        30, 201, False,
    )
    assert reply.usd == pytest.approx((1.1 * 30 + 4.4 * 201) / 1e6)


def test_max_tokens_forced_on_a_reasoning_model_is_a_provider_error_with_the_servers_message(
    reasoning_server,
):
    provider = OpenAIProvider(reasoning_spec(reasoning_server, token_param="max_tokens"))
    with pytest.raises(ProviderError) as caught:
        provider.complete(REQUEST, on_text=lambda text: None)
    error = caught.value
    assert (error.kind, error.status, error.exit_code) == ("bad_request", 400, 4)
    assert MAX_TOKENS_REFUSED in error.message and "\n" not in error.message
    assert reasoning_server.requests[0]["json"]["max_tokens"] == 64


def test_temperature_on_a_reasoning_model_warns_once_per_agent(reasoning_server, capsys):
    for _ in range(3):
        OpenAIProvider(reasoning_spec(reasoning_server))
    OpenAIProvider(reasoning_spec(reasoning_server, name="other"))
    OpenAIProvider(reasoning_spec(reasoning_server, name="no-temp", temperature=None))
    OpenAIProvider(reasoning_spec(reasoning_server, name="chat-model", model="gpt-4o"))
    line = (
        "warning: agent {!r}: o3-mini is a reasoning model that takes only its default "
        "temperature; temperature = 0.2 from the pool is not sent"
    )
    assert capsys.readouterr().err.splitlines() == [line.format("o3"), line.format("other")]


def reasoning_pool(server: WireServer, token_param: str) -> str:
    return (
        '[[agents]]\nname = "o3"\nprovider = "openai"\nmodel = "o3-mini"\n'
        f'base_url = "{server.url}/v1"\ntoken_param = "{token_param}"\n'
        "temperature = 0.2\nmax_tokens = 256\nprice_in = 1.1\nprice_out = 4.4\n"
        "timeout_s = 10\n"
    )


def test_solve_with_a_reasoning_model_end_to_end(reasoning_server, workdir):
    answer = "```python\ndef add(a, b):\n    return a + b\n```"
    reasoning_server.responses += [
        openai_stream(text, reasoning_tokens=100)
        for text in ("Add them.", answer, "Correct. <verdict>ACCEPT</verdict>")
    ]
    (workdir / "pool.toml").write_text(reasoning_pool(reasoning_server, "max_completion_tokens"))
    (workdir / "add.md").write_text("# Add\n\nWrite `add(a, b)`.\n\n>>> add(2, 3)\n5\n")
    result = trinity(
        "solve", "add.md", "--pool", "pool.toml", "--weights", "none", "--max-turns", "3", "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verdict"] == "accepted" and "return a + b" in report["answer"]
    # reasoning tokens billed as output
    assert all(
        turn["tokens_out"] > 100 for turn in report["turns"]
    )
    assert result.stderr.count("is a reasoning model") == 1
    bodies = [r["json"] for r in reasoning_server.requests]
    assert len(bodies) == 3
    assert all(
        b["max_completion_tokens"] == 256 and "max_tokens" not in b and "temperature" not in b
        for b in bodies
    )


def test_solve_with_max_tokens_forced_is_exit_4_with_the_servers_message(reasoning_server, workdir):
    (workdir / "pool.toml").write_text(reasoning_pool(reasoning_server, "max_tokens"))
    (workdir / "add.md").write_text("# Add\n\nWrite `add(a, b)`.\n")
    result = trinity("solve", "add.md", "--pool", "pool.toml", "--weights", "none")
    assert result.returncode == 4, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and MAX_TOKENS_REFUSED in errors[0], result.stderr
    assert len(reasoning_server.requests) == 1  # a refused request is not retried


def test_a_bad_token_param_is_exit_3_naming_file_and_agent(workdir):
    (workdir / "pool.toml").write_text(
        '[[agents]]\nname = "o3"\nprovider = "openai"\nmodel = "o3-mini"\n'
        'token_param = "max_output_tokens"\n'
    )
    (workdir / "add.md").write_text("# Add\n\nWrite `add(a, b)`.\n")
    result = trinity("solve", "add.md", "--pool", "pool.toml", "--weights", "none")
    assert result.returncode == 3
    assert result.stderr.strip().splitlines() == [
        (
            "error: pool.toml: agents[o3].token_param is 'max_output_tokens'; "
            'use "max_completion_tokens" or "max_tokens"'
        )
    ]


# -- a reply cut at max_tokens -----------------------------------------------------------------


@pytest.mark.parametrize("finish,truncated", [("length", True), ("stop", False)])
def test_a_reply_that_finished_for_length_is_truncated(finish, truncated):
    server = WireServer()
    try:
        server.responses.append(openai_stream("def add(a, b):\n    return", finish=finish))
        streamed = OpenAIProvider(spec(f"{server.url}/v1")).complete(
            REQUEST, on_text=lambda text: None
        )
        body = {
            "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [
                {
                    "index": 0, "message": {"role": "assistant", "content": "2"},
                    "finish_reason": finish,
                }
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
        }
        server.responses.append(Scripted(200, json.dumps(body).encode()))
        plain = OpenAIProvider(spec(f"{server.url}/v1")).complete(REQUEST)
    finally:
        server.close()
    assert streamed.text == "def add(a, b):\n    return"
    assert (streamed.truncated, plain.truncated) == (truncated, truncated)

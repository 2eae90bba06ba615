"""OpenAI and any OpenAI-compatible server (llama.cpp server, Ollama, vLLM) via the official SDK.

When a caller watches the text (`on_text`), streams with `stream_options.include_usage`; a
server that sends no usage chunk gets an estimate and the reply is flagged `usd_estimated`. A
loopback `base_url` needs no key.

OpenAI's reasoning models (o1, o3, o4, gpt-5) refuse `max_tokens` and any temperature but the
default: the length limit goes out as the agent's `token_param` (`max_completion_tokens` on
OpenAI's own endpoint) and their temperature is left out, with one warning per agent. Their
reasoning tokens are part of `completion_tokens`, so they are billed as output.

A reply is `truncated` when its choice finished for "length" (max_tokens reached).
"""

from __future__ import annotations

import sys
from typing import Any

from trinity_cli.core.provider import Prices, Reply, Request, RetryHook, TextCallback
from trinity_cli.pool.spec import AgentSpec, default_token_param
from trinity_cli.providers.base import Stopwatch, estimate_tokens
from trinity_cli.providers.errors import agent_error, classify
from trinity_cli.providers.keys import api_key

REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
_warned: set[str] = set()  # agents already warned about a dropped temperature, in this process


def is_reasoning_model(model: str) -> bool:
    return model.lower().startswith(REASONING_PREFIXES)


def request_params(spec: AgentSpec) -> dict[str, Any]:
    """Everything the chat-completions call carries besides the messages and streaming."""
    params: dict[str, Any] = {
        "model": spec.model,
        spec.token_param or default_token_param(spec.base_url): spec.max_tokens,
        "stop": list(spec.stop) or None,
    }
    if spec.temperature is not None and not is_reasoning_model(spec.model):
        params["temperature"] = spec.temperature
    return params


class OpenAIProvider:
    def __init__(self, spec: AgentSpec) -> None:
        import openai

        self.spec = spec
        if (
            spec.temperature is not None
            and is_reasoning_model(spec.model)
            and spec.name not in _warned
        ):
            _warned.add(spec.name)
            sys.stderr.write(
                f"warning: agent {spec.name!r}: {spec.model} is a reasoning model that takes "
                f"only its default temperature; temperature = {spec.temperature:g} from the pool "
                "is not sent\n"
            )
        self.prices = Prices(spec.price_in, spec.price_out)
        key = api_key(spec)
        self._client = openai.OpenAI(
            api_key=key, base_url=spec.base_url, timeout=spec.timeout_s, max_retries=0
        )

    def complete(
        self, request: Request, on_text: TextCallback | None = None,
        on_retry: RetryHook | None = None,
    ) -> Reply:
        watch = Stopwatch()
        messages = [
            {"role": "system", "content": request.system},
            {"role": "user", "content": request.user},
        ]
        parts: list[str] = []
        usage, finish, events = None, None, 0
        common = dict(messages=messages, **request_params(self.spec))
        try:
            if on_text is None:  # nobody watches: one plain request
                response = self._client.chat.completions.create(**common)  # type: ignore[call-overload]
                usage = response.usage
                parts.append(response.choices[0].message.content or "" if response.choices else "")
                finish = response.choices[0].finish_reason if response.choices else None
            else:
                stream = self._client.chat.completions.create(
                    **common, stream=True, stream_options={"include_usage": True}
                )  # type: ignore[call-overload]
                for chunk in stream:
                    events += 1
                    if chunk.usage is not None:
                        usage = chunk.usage
                    for choice in chunk.choices or []:
                        finish = choice.finish_reason or finish
                        delta = choice.delta.content if choice.delta else None
                        if delta:
                            parts.append(delta)
                            on_text(delta)
        except Exception as exc:  # noqa: BLE001 - every SDK error becomes a ProviderError
            raise classify(exc, self.spec) from None
        if on_text is not None and not events:  # say, a plain JSON body: the SDK yields nothing
            raise agent_error(
                self.spec, "the server answered a streamed request with no stream events "
                "(does it support `stream: true`?)", "bad_request", 200,
            )
        text = "".join(parts)
        # completion_tokens includes reasoning tokens
        if (
            usage is not None and usage.prompt_tokens is not None
        ):
            tokens_in, tokens_out, estimated = (
                usage.prompt_tokens, usage.completion_tokens or 0, False,
            )
        else:
            tokens_in = estimate_tokens(request.system + request.user)
            tokens_out, estimated = estimate_tokens(text), True
        return Reply(
            text, tokens_in, tokens_out, self.prices.usd(tokens_in, tokens_out), watch.seconds,
            estimated, truncated=finish == "length",
        )

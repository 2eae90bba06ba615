"""Google Gemini through the official `google-genai` SDK; streamed when a caller watches the text.

The key comes from `api_key_env`, else `GEMINI_API_KEY`, falling back to `GOOGLE_API_KEY`.
A reply is `truncated` when its candidate finished for "MAX_TOKENS" (the stream's last chunk says).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from trinity_cli.core.provider import Prices, Reply, Request, RetryHook, TextCallback
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.base import Stopwatch, estimate_tokens
from trinity_cli.providers.errors import classify
from trinity_cli.providers.keys import api_key


class GeminiProvider:
    def __init__(self, spec: AgentSpec) -> None:
        from google import genai
        from google.genai import types

        self.spec = spec
        self.prices = Prices(spec.price_in, spec.price_out)
        self._types = types
        options = types.HttpOptions(base_url=spec.base_url, timeout=int(spec.timeout_s * 1000))
        self._client = genai.Client(
            api_key=api_key(spec), http_options=options,
        )

    def complete(
        self, request: Request, on_text: TextCallback | None = None,
        on_retry: RetryHook | None = None,
    ) -> Reply:
        watch = Stopwatch()
        config = self._types.GenerateContentConfig(
            system_instruction=request.system, max_output_tokens=self.spec.max_tokens,
            temperature=self.spec.temperature, stop_sequences=list(self.spec.stop) or None,
        )
        parts: list[str] = []
        usage, finish = None, None
        chunks: Iterable[Any]
        try:
            if on_text is None:  # nobody watches: one plain request
                chunks = [
                    self._client.models.generate_content(
                        model=self.spec.model, contents=request.user, config=config
                    )
                ]
            else:
                chunks = self._client.models.generate_content_stream(
                    model=self.spec.model, contents=request.user, config=config
                )
            for chunk in chunks:
                if chunk.usage_metadata is not None:
                    usage = chunk.usage_metadata
                if chunk.candidates and chunk.candidates[0].finish_reason is not None:
                    finish = chunk.candidates[0].finish_reason
                text = chunk.text
                if text:
                    parts.append(text)
                    if on_text:
                        on_text(text)
        except Exception as exc:  # noqa: BLE001 - every SDK error becomes a ProviderError
            raise classify(exc, self.spec) from None
        text = "".join(parts)
        if usage is not None and usage.prompt_token_count is not None:
            tokens_in = usage.prompt_token_count
            # thinking tokens bill as output
            tokens_out = (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
            estimated = False
        else:
            tokens_in, tokens_out, estimated = (
                estimate_tokens(request.system + request.user), estimate_tokens(text), True,
            )
        return Reply(
            text, tokens_in, tokens_out, self.prices.usd(tokens_in, tokens_out), watch.seconds,
            estimated, truncated=finish == "MAX_TOKENS",
        )

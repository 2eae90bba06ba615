"""Anthropic's Messages API through the official SDK; streamed when a caller watches the text.

Usage (input and output tokens) and the stop reason come from the message, or from the stream's
events; a reply is `truncated` when it stopped for "max_tokens"."""

from __future__ import annotations

from trinity_cli.core.provider import Prices, Reply, Request, RetryHook, TextCallback
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.base import Stopwatch
from trinity_cli.providers.errors import classify
from trinity_cli.providers.keys import api_key


class AnthropicProvider:
    def __init__(self, spec: AgentSpec) -> None:
        import anthropic

        self.spec = spec
        self.prices = Prices(spec.price_in, spec.price_out)
        self._client = anthropic.Anthropic(
            api_key=api_key(spec), base_url=spec.base_url, timeout=spec.timeout_s, max_retries=0,
        )

    def complete(
        self, request: Request, on_text: TextCallback | None = None,
        on_retry: RetryHook | None = None,
    ) -> Reply:
        watch = Stopwatch()
        parts: list[str] = []
        common = dict(
            model=self.spec.model, max_tokens=self.spec.max_tokens, system=request.system,
            messages=[{"role": "user", "content": request.user}],
            **({"stop_sequences": list(self.spec.stop)} if self.spec.stop else {}),
            # recent SDKs dropped the parameter; older models still accept it in the body
            **(
                {"extra_body": {"temperature": self.spec.temperature}}
                if self.spec.temperature is not None
                else {}
            ),
        )
        try:
            if on_text is None:  # nobody watches: one plain request
                final = self._client.messages.create(**common)  # type: ignore[call-overload]
                parts.extend(block.text for block in final.content if block.type == "text")
            else:
                with self._client.messages.stream(**common) as stream:  # type: ignore[arg-type]
                    for text in stream.text_stream:
                        parts.append(text)
                        on_text(text)
                    final = stream.get_final_message()
        except Exception as exc:  # noqa: BLE001 - every SDK error becomes a ProviderError
            raise classify(exc, self.spec) from None
        tokens_in, tokens_out = final.usage.input_tokens, final.usage.output_tokens
        text = "".join(parts)
        return Reply(
            text, tokens_in, tokens_out, self.prices.usd(tokens_in, tokens_out), watch.seconds,
            truncated=final.stop_reason == "max_tokens",
        )

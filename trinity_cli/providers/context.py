"""A remote agent's declared context (`n_ctx` in the pool file): its prompt is fitted before it
is sent.

A server that gets a prompt longer than its context refuses it or, like Ollama, silently keeps
its end; a remote model's context cannot be known, so trinity cuts only for an agent whose
pool entry declares `n_ctx`. It has no tokenizer for a remote model and counts with the
estimate it uses for usage a server does not report (`estimate_tokens`, about 4 bytes a
token). A prompt whose estimate exceeds n_ctx less `max_tokens` (and a chat template's
markers) keeps the system prompt and the end of the user message, as a local agent's prompt
keeps its end, marked "[...]"; the reply reports the cut (`Reply.input_truncated`, in
estimated tokens). A context too small to hold even the system prompt and a little of the
user message is a usage error (exit 2).
"""

from __future__ import annotations

from dataclasses import replace

from trinity_cli.core.provider import (
    CHAT_TEMPLATE_TOKENS,
    Provider,
    Reply,
    Request,
    RetryHook,
    TextCallback,
)
from trinity_cli.core.records import Truncation
from trinity_cli.errors import UsageError
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.base import estimate_tokens

BYTES_PER_TOKEN = 4  # estimate_tokens' rate
MIN_USER_TOKENS = 16  # of the user message, at least, or the call is pointless
CUT_MARK = "[...]\n"


def fit(request: Request, spec: AgentSpec, n_ctx: int) -> tuple[Request, Truncation | None]:
    """The request with its user message cut from the front to fit `n_ctx`, and the cut."""
    fixed = estimate_tokens(request.system) + CHAT_TEMPLATE_TOKENS
    user = estimate_tokens(request.user)
    room = n_ctx - spec.max_tokens - fixed
    if user <= room:
        return request, None
    if room < MIN_USER_TOKENS:
        raise UsageError(
            f"agent {spec.name!r} cannot read this problem: its {request.role.value} prompt is "
            f"about {fixed + user:,} tokens, and n_ctx {n_ctx} less {spec.max_tokens} for the "
            f"reply leaves room for {max(room + fixed, 0):,}, too few for its instructions and "
            "any of the problem; raise the agent's n_ctx, lower its max_tokens, or shorten the "
            "problem"
        )
    data = request.user.encode("utf-8")
    kept = CUT_MARK + data[len(data) - (room * BYTES_PER_TOKEN - len(CUT_MARK)) :].decode(
        "utf-8", "ignore"
    )
    kept_tokens = fixed + estimate_tokens(kept)
    dropped = fixed + user - kept_tokens
    note = (
        f"agent {spec.name!r} ({request.role.value}): the prompt is about {fixed + user:,} tokens "
        f"(4 bytes a token); n_ctx {n_ctx} less {spec.max_tokens} for the reply holds about "
        f"{kept_tokens:,}: the start of the task is cut ({dropped:,} dropped)"
    )
    return replace(request, user=kept), Truncation(kept_tokens, dropped, spec.name, note)


class FittingProvider:
    """Wraps a remote agent's provider: each request fitted to the agent's declared `n_ctx`."""

    def __init__(self, inner: Provider, spec: AgentSpec, n_ctx: int) -> None:
        self.inner = inner
        self.spec = spec
        self.n_ctx = n_ctx

    def complete(
        self, request: Request, on_text: TextCallback | None = None,
        on_retry: RetryHook | None = None,
    ) -> Reply:
        fitted, cut = fit(request, self.spec, self.n_ctx)
        reply = self.inner.complete(fitted, on_text, on_retry)
        return reply if cut is None else replace(reply, input_truncated=cut)

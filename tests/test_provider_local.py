"""The in-process GGUF provider on the real embedded model."""

from __future__ import annotations

from trinity_cli.config import AgentSpec
from trinity_cli.core.roles import (
    COMPLETION_LEADS,
    SYSTEM_PROMPTS,
    Role,
    extract_code,
    parse_verdict,
)
from trinity_cli.providers.base import Request
from trinity_cli.providers.local_gguf import LocalProvider

SIGNATURE = 'def add(a: int, b: int) -> int:\n    """Return the sum of a and b."""\n'


def provider(**kw) -> LocalProvider:
    return LocalProvider(AgentSpec(name="g", provider="local", model="embedded", mode="completion",
                                   max_tokens=32, temperature=0.0, n_ctx=2048, **kw))


def request(role: Role, user: str) -> Request:
    return Request(role, SYSTEM_PROMPTS[role], user, COMPLETION_LEADS[role],
                   SIGNATURE if role is Role.WORKER else "")


def test_completion_worker_returns_the_signature_plus_its_completion_as_code():
    pieces: list[str] = []
    reply = provider().complete(request(Role.WORKER, "## Task\n\n" + SIGNATURE), on_text=pieces.append)
    code = extract_code(reply.text)
    assert code is not None and code.startswith(SIGNATURE)
    compile(code, "<answer>", "exec")  # the clipped completion is valid Python
    assert reply.tokens_in > 20 and 0 < reply.tokens_out <= 32 and reply.usd == 0.0
    assert pieces  # streamed


def test_completion_verifier_decides_by_log_probabilities():
    good = request(Role.VERIFIER, f"## Task\n\n{SIGNATURE}\n## Turn 1: worker (g)\n\n```python\n{SIGNATURE}    return a + b\n```")
    reply = provider().complete(good)
    assert parse_verdict(reply.text) in ("accept", "reject")
    assert "log-probability" in reply.text


def test_same_prompt_same_reply_even_when_sampling():
    p = provider(stop=("\n\n",))
    p.temperature = 0.8
    r = request(Role.THINKER, "## Task\n\nSort a list of numbers.")
    assert p.complete(r).text == p.complete(r).text


def test_chat_mode_runs_on_a_gguf_without_crashing():
    chat = LocalProvider(AgentSpec(name="c", provider="local", model="embedded", mode="chat",
                                   max_tokens=8, n_ctx=2048))
    reply = chat.complete(request(Role.THINKER, "Say hi."))
    assert isinstance(reply.text, str) and reply.tokens_in > 0

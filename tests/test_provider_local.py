"""The in-process GGUF provider on the real embedded model."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trinity_cli.core.provider import Request
from trinity_cli.core.roles import (
    COMPLETION_LEADS,
    SYSTEM_PROMPTS,
    Role,
    extract_code,
    parse_verdict,
)
from trinity_cli.errors import ConfigError, UsageError
from trinity_cli.llama.capi import load_model
from trinity_cli.pool.spec import AgentSpec
from trinity_cli.providers.local_gguf import LocalProvider, _StopAt

SIGNATURE = 'def add(a: int, b: int) -> int:\n    """Return the sum of a and b."""\n'


def provider(**kw) -> LocalProvider:
    return LocalProvider(
        AgentSpec(
            **{
                "name": "g", "provider": "local", "model": "embedded", "mode": "completion",
                "max_tokens": 32, "temperature": 0.0, "n_ctx": 2048, **kw,
            }
        )
    )


def request(role: Role, user: str) -> Request:
    return Request(
        role, SYSTEM_PROMPTS[role], user, COMPLETION_LEADS[role],
        SIGNATURE if role is Role.WORKER else "",
    )


def test_completion_worker_returns_the_signature_plus_its_completion_as_code():
    pieces: list[str] = []
    reply = provider().complete(
        request(Role.WORKER, "## Task\n\n" + SIGNATURE), on_text=pieces.append
    )
    code = extract_code(reply.text)
    assert code is not None and code.startswith(SIGNATURE)
    compile(code, "<answer>", "exec")  # the clipped completion is valid Python
    assert reply.tokens_in > 20 and 0 < reply.tokens_out <= 32 and reply.usd == 0.0
    assert pieces  # streamed


def test_completion_verifier_decides_by_log_probabilities():
    good = request(
        Role.VERIFIER,
        f"## Task\n\n{SIGNATURE}\n## Turn 1: worker (g)\n\n"
        f"```python\n{SIGNATURE}    return a + b\n```",
    )
    reply = provider().complete(good)
    assert parse_verdict(reply.text) in ("accept", "reject")
    assert "log-probability" in reply.text


def test_same_prompt_same_reply_even_when_sampling():
    p = provider(stop=("\n\n",))
    p.temperature = 0.8
    r = request(Role.THINKER, "## Task\n\nSort a list of numbers.")
    assert p.complete(r).text == p.complete(r).text


# A Gemma-style template: the embedded base model's vocabulary has these control tokens.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else 'user' }}\n"
    "{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def test_chat_mode_renders_the_ggufs_chat_template_with_its_control_tokens(gguf_path, tmp_path):
    chat_gguf = tmp_path / "with-template.gguf"
    subprocess.run(
        [
            sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(gguf_path), str(chat_gguf),
            "--chat-template", CHAT_TEMPLATE, "--force",
        ],
        check=True, capture_output=True,
    )
    chat = LocalProvider(
        AgentSpec(
            name="c", provider="local", model=str(chat_gguf), mode="chat", max_tokens=8, n_ctx=2048
        )
    )
    reply = chat.complete(request(Role.THINKER, "Say hi."))
    expected = (
        f"<bos><start_of_turn>user\n{SYSTEM_PROMPTS[Role.THINKER]}<end_of_turn>\n"
        "<start_of_turn>user\nSay hi.<end_of_turn>\n<start_of_turn>model\n"
    )
    model = load_model(chat_gguf)
    assert reply.tokens_in == len(model.tokenize(expected, bos=False, special=True))
    # control tokens were parsed as such
    assert reply.tokens_in < len(
        model.tokenize(expected, bos=False)
    )
    assert isinstance(reply.text, str) and 0 <= reply.tokens_out <= 8


def test_chat_mode_on_a_gguf_without_a_template_is_a_config_error():
    with pytest.raises(
        ConfigError, match="agent 'c': mode = \"chat\" needs a GGUF with a chat template"
    ):
        LocalProvider(
            AgentSpec(name="c", provider="local", model="embedded", mode="chat", n_ctx=2048)
        )


def test_agents_and_the_coordinator_share_one_load_of_a_file(coordinator):
    assert provider()._runtime.model is coordinator._model
    assert (
        LocalProvider(
            AgentSpec(name="h", provider="local", model="embedded", n_ctx=1024)
        )._runtime.model
        is coordinator._model
    )


def test_streamed_pieces_never_show_a_stop_string_and_the_text_ends_before_it():
    pieces: list[str] = []
    text = _StopAt(["\ndef", "```"], pieces.append)
    for piece in ["    return a", " + b\n", "\nd", "e", "f g():", " pass"]:
        if text.add(piece):
            break
    assert text.finish() == "    return a + b\n"
    assert "".join(pieces) == "    return a + b\n" and not any("d" in p for p in pieces)
    unstopped = _StopAt(["```"], pieces.clear() or pieces.append)
    for piece in ["x = 1`", "`", " # two ticks"]:
        unstopped.add(piece)
    assert unstopped.finish() == "x = 1`` # two ticks" == "".join(pieces)


def test_a_reply_cut_at_max_tokens_is_truncated_and_one_that_ended_is_not():
    cut = provider(max_tokens=4).complete(
        request(Role.THINKER, "## Task\n\nSort a list of numbers.")
    )
    assert cut.truncated and cut.tokens_out == 4
    whole = provider(max_tokens=64).complete(request(Role.WORKER, "## Task\n\n" + SIGNATURE))
    assert not whole.truncated and whole.tokens_out < 64  # the body ended before the limit
    assert (
        provider(max_tokens=64).complete(request(Role.VERIFIER, "## Task\n\nx")).truncated is False
    )


def test_a_prompt_longer_than_the_context_keeps_its_end_and_says_what_it_cut():
    small = LocalProvider(
        AgentSpec(
            name="small", provider="local", model="embedded", mode="completion", max_tokens=8,
            temperature=0.0, n_ctx=512,
        )
    )
    long_task = "## Task\n\n" + "Numbers are sorted in ascending order here. " * 300 + SIGNATURE
    total = len(
        small._runtime.model.tokenize(request(Role.WORKER, long_task).completion_prompt(), bos=True)
    )
    reply = small.complete(request(Role.WORKER, long_task))
    cut = reply.input_truncated
    assert cut is not None and reply.tokens_in == cut.kept_tokens == 512 - 8
    assert cut.dropped_tokens == total - 504 > 1500 and cut.reader == "small"
    assert "the prompt is" in cut.note and f"({total - 504:,} dropped)" in cut.note
    assert extract_code(reply.text).startswith(SIGNATURE)  # the signature at the end was kept
    assert (
        provider().complete(request(Role.WORKER, "## Task\n\n" + SIGNATURE)).input_truncated is None
    )


def test_a_context_that_cannot_hold_the_prompts_end_is_a_usage_error():
    tight = LocalProvider(
        AgentSpec(
            name="tight", provider="local", model="embedded", mode="completion", max_tokens=500,
            n_ctx=512,
        )
    )
    with pytest.raises(
        UsageError,
        match=r"agent 'tight' cannot read this problem: its worker prompt is [\d,]+ tokens"
        r", and n_ctx 512 less 500 for the reply leaves 12",
    ):
        tight.complete(request(Role.WORKER, "## Task\n\n" + "Sort it. " * 200 + SIGNATURE))
